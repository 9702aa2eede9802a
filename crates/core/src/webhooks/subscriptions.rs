//! Webhook subscriptions: created, changed, rotated and deleted by the key that owns them
//! (another key, even of the same organisation, sees `404`). The signing secret is shown
//! once (creation, rotation) and stored encrypted.

use serde_json::Value;
use tern_domain::crypto::Purpose;
use tern_domain::events::{self, ROTATION_OVERLAP_MS, subscription};
use tern_domain::plan::Entitlement;
use tern_domain::{Problem, new_id};
use tern_store::{NewSubscription, Subscription, SubscriptionPatch};
use uuid::Uuid;

use crate::{Core, Principal, Result, limits};

/// A subscription with its secret, as shown once.
#[derive(Debug)]
pub struct WithSecret {
    pub subscription: Subscription,
    /// `whsec_…`
    pub secret: String,
}

/// `POST /webhook-subscriptions`: within the plan's count limit (checked atomically).
pub async fn create(core: &Core, p: &Principal, body: &Value, now: i64) -> Result<WithSecret> {
    let new = subscription::parse_new(body, core.media.guard())?;
    let (key, shown) = events::new_secret();
    let row = NewSubscription {
        id: new_id(),
        org_id: p.org_id,
        api_key_id: p.key_id,
        url: new.url,
        event_types: new.events.iter().map(|e| e.as_str().to_string()).collect(),
        secret_enc: core.key.seal(Purpose::WebhookSecretEncryption, &key),
        enabled: new.enabled,
        description: new.description,
        created_at: now,
    };
    let mut tx = core.db.begin().await?;
    limits::check_one_more(
        &mut tx,
        p.org_id,
        &p.effective(),
        Entitlement::WebhookSubscriptions,
    )
    .await?;
    let subscription = tx.insert_webhook_subscription(&row).await?;
    tx.commit().await?;
    Ok(WithSecret {
        subscription,
        secret: shown,
    })
}

/// `PATCH /webhook-subscriptions/{id}`.
pub async fn update(
    core: &Core,
    p: &Principal,
    id: Uuid,
    body: &Value,
    now: i64,
) -> Result<Subscription> {
    let change = subscription::parse_change(body, core.media.guard())?;
    let patch = SubscriptionPatch {
        url: change.url,
        event_types: change
            .events
            .map(|es| es.iter().map(|e| e.as_str().to_string()).collect()),
        enabled: change.enabled,
        description: change.description,
    };
    core.db
        .update_webhook_subscription(p.org_id, p.key_id, id, &patch, now)
        .await?
        .ok_or_else(Problem::not_found)
}

/// `DELETE /webhook-subscriptions/{id}`: its pending deliveries go with it.
pub async fn delete(core: &Core, p: &Principal, id: Uuid) -> Result<()> {
    if core
        .db
        .delete_webhook_subscription(p.org_id, p.key_id, id)
        .await?
    {
        Ok(())
    } else {
        Err(Problem::not_found())
    }
}

/// `POST /webhook-subscriptions/{id}/rotate-secret`: a new secret, shown once; the previous
/// one keeps signing (beside the new one) for 24 hours.
pub async fn rotate(core: &Core, p: &Principal, id: Uuid, now: i64) -> Result<WithSecret> {
    let (key, shown) = events::new_secret();
    let sealed = core.key.seal(Purpose::WebhookSecretEncryption, &key);
    let subscription = core
        .db
        .rotate_webhook_secret(
            p.org_id,
            p.key_id,
            id,
            &sealed,
            now + ROTATION_OVERLAP_MS,
            now,
        )
        .await?
        .ok_or_else(Problem::not_found)?;
    Ok(WithSecret {
        subscription,
        secret: shown,
    })
}

/// The keys that sign a delivery at `now`: the current secret, and the previous one while
/// its overlap lasts. A secret that cannot be decrypted (the service's key changed) is left
/// out; with none left the delivery cannot be signed.
pub fn signing_keys(
    core: &Core,
    secret_enc: &[u8],
    previous: Option<(&[u8], i64)>,
    now: i64,
) -> Vec<Vec<u8>> {
    let open = |s: &[u8]| core.key.open(Purpose::WebhookSecretEncryption, s);
    let mut keys: Vec<Vec<u8>> = open(secret_enc).into_iter().collect();
    if let Some((prev, until)) = previous
        && until > now
        && let Some(k) = open(prev)
    {
        keys.push(k);
    }
    keys
}
