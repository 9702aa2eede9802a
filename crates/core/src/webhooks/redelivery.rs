//! One delivery sent again (the app's "Replay" next to a failed attempt in a message's
//! timeline): that event to that subscription, due now, its attempt count kept so the next
//! attempt is numbered on from the last and the rest of the retry schedule applies.

use tern_domain::Problem;
use tern_domain::time::now_ms;
use tern_store::Redelivery;
use uuid::Uuid;

use crate::audit::{self, Entry};
use crate::{Core, Principal, Result};

/// What became of a redelivery asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Redelivered {
    /// Queued: a worker sends it within moments.
    Queued,
    /// The subscription is disabled: nothing is delivered to it until it is enabled.
    Disabled,
    /// The receiver already took this delivery.
    AlreadySucceeded,
    /// A worker is making an attempt at it right now.
    InFlight,
    /// No delivery of that event to that subscription exists.
    NoDelivery,
}

/// Puts the delivery of event `event_id` to the key's subscription `subscription_id` back in
/// the queue now (`404` for a subscription the key does not own). Audited when queued.
pub async fn redeliver(
    core: &Core,
    p: &Principal,
    subscription_id: Uuid,
    event_id: Uuid,
) -> Result<Redelivered> {
    let sub = core
        .db
        .get_webhook_subscription(p.org_id, p.key_id, subscription_id)
        .await?
        .ok_or_else(Problem::not_found)?;
    if !sub.enabled {
        return Ok(Redelivered::Disabled);
    }
    let r = core
        .db
        .redeliver_webhook_delivery(sub.id, event_id, now_ms())
        .await?;
    Ok(match r {
        Redelivery::Queued => {
            // One statement of the store's, then its entry (a redelivery is harmless to
            // repeat, as a replay is).
            let entry = Entry::new(Some(p.org_id), audit::SUBSCRIPTION_DELIVERY_REPLAYED)
                .target(audit::TARGET_SUBSCRIPTION, sub.id)
                .detail(serde_json::json!({"event_id": event_id.to_string()}));
            audit::record(&core.db, &p.context(), entry).await?;
            Redelivered::Queued
        }
        Redelivery::AlreadySucceeded => Redelivered::AlreadySucceeded,
        Redelivery::InFlight => Redelivered::InFlight,
        Redelivery::Missing => Redelivered::NoDelivery,
    })
}
