//! Webhook subscriptions: created, changed, rotated and deleted by the key that owns them
//! (another key, even of the same organisation, sees `404`). The signing secret is shown
//! once (creation, rotation) and stored encrypted. Every change records its audit entry
//! (actor: the Principal's) in its transaction; the entry never holds the secret.

use serde_json::{Value, json};
use tern_domain::crypto::Purpose;
use tern_domain::events::{self, ROTATION_OVERLAP_MS, subscription};
use tern_domain::plan::Entitlement;
use tern_domain::{Problem, new_id};
use tern_store::{KeySummary, NewSubscription, Subscription, SubscriptionPatch};
use uuid::Uuid;

use crate::audit::{self, Entry, TARGET_SUBSCRIPTION};
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
    let entry = Entry::new(Some(p.org_id), audit::SUBSCRIPTION_CREATED)
        .target(TARGET_SUBSCRIPTION, subscription.id)
        .detail(describe(&subscription));
    audit::record_in(&mut tx, &p.context(), entry).await?;
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
    let mut tx = core.db.begin().await?;
    let Some(s) = tx
        .update_webhook_subscription(p.org_id, p.key_id, id, &patch, now)
        .await?
    else {
        tx.rollback().await?;
        return Err(Problem::not_found());
    };
    // What was asked to change, with the values after it.
    let mut changed = serde_json::Map::new();
    if patch.url.is_some() {
        changed.insert("url".into(), json!(s.url));
    }
    if patch.event_types.is_some() {
        changed.insert("event_types".into(), json!(s.event_types));
    }
    if patch.enabled.is_some() {
        changed.insert("enabled".into(), json!(s.enabled));
    }
    if patch.description.is_some() {
        changed.insert("description".into(), json!(s.description));
    }
    let entry = Entry::new(Some(p.org_id), audit::SUBSCRIPTION_UPDATED)
        .target(TARGET_SUBSCRIPTION, s.id)
        .detail(Value::Object(changed));
    audit::record_in(&mut tx, &p.context(), entry).await?;
    tx.commit().await?;
    Ok(s)
}

/// `DELETE /webhook-subscriptions/{id}`: its pending deliveries go with it.
pub async fn delete(core: &Core, p: &Principal, id: Uuid) -> Result<()> {
    let mut tx = core.db.begin().await?;
    if !tx
        .delete_webhook_subscription(p.org_id, p.key_id, id)
        .await?
    {
        tx.rollback().await?;
        return Err(Problem::not_found());
    }
    let entry =
        Entry::new(Some(p.org_id), audit::SUBSCRIPTION_DELETED).target(TARGET_SUBSCRIPTION, id);
    audit::record_in(&mut tx, &p.context(), entry).await?;
    tx.commit().await?;
    Ok(())
}

/// `POST /webhook-subscriptions/{id}/rotate-secret`: a new secret, shown once; the previous
/// one keeps signing (beside the new one) for 24 hours.
pub async fn rotate(core: &Core, p: &Principal, id: Uuid, now: i64) -> Result<WithSecret> {
    let (key, shown) = events::new_secret();
    let sealed = core.key.seal(Purpose::WebhookSecretEncryption, &key);
    let mut tx = core.db.begin().await?;
    let rotated = tx
        .rotate_webhook_secret(
            p.org_id,
            p.key_id,
            id,
            &sealed,
            now + ROTATION_OVERLAP_MS,
            now,
        )
        .await?;
    let Some(subscription) = rotated else {
        tx.rollback().await?;
        return Err(Problem::not_found());
    };
    let entry = Entry::new(Some(p.org_id), audit::SUBSCRIPTION_SECRET_ROTATED)
        .target(TARGET_SUBSCRIPTION, subscription.id);
    audit::record_in(&mut tx, &p.context(), entry).await?;
    tx.commit().await?;
    Ok(WithSecret {
        subscription,
        secret: shown,
    })
}

/// What the audit log keeps of a subscription (never its secret).
fn describe(s: &Subscription) -> Value {
    json!({
        "url": s.url,
        "event_types": s.event_types,
        "enabled": s.enabled,
        "description": s.description,
    })
}

/// Every subscription of the organisation with a summary of its key (the app groups them
/// by key): by key, oldest key first, then by creation. Revoked keys' included.
pub async fn list_for_org(core: &Core, org_id: Uuid) -> Result<Vec<(Subscription, KeySummary)>> {
    Ok(core.db.list_org_webhook_subscriptions(org_id).await?)
}

/// One subscription of the organisation whichever key owns it, with its key; `404` for
/// another organisation's. Its deliveries and attempts are the store's
/// `list_webhook_attempts(org_id, key.id, id, …)`, as the API lists them.
pub async fn get_in_org(core: &Core, org_id: Uuid, id: Uuid) -> Result<(Subscription, KeySummary)> {
    core.db
        .get_org_webhook_subscription(org_id, id)
        .await?
        .ok_or_else(Problem::not_found)
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
