//! `POST /events/trigger` (`tern trigger TYPE`): one sample event of a type (the data of
//! [`super::samples`], as a test send carries) stored like a real one, so it goes through
//! the outbox to every enabled subscription of the caller's organisation that lists the type
//! and to every stream that wants it.

use tern_domain::events::EventType;
use tern_domain::new_id;
use tern_domain::time::now_ms;
use uuid::Uuid;

use super::samples;
use crate::{Core, Principal, Result};

/// What a trigger stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Triggered {
    pub event_id: Uuid,
    /// The subscriptions and streams it goes to (none: nothing was stored).
    pub recipients: usize,
}

/// Stores one sample event of `kind` for the organisation's subscriptions and streams.
/// `webhook.test`'s `subscription_id` is the nil UUID: the event is not for one subscription.
pub async fn trigger(core: &Core, p: &Principal, kind: EventType) -> Result<Triggered> {
    let event_id = new_id();
    let created_at = now_ms();
    let mut tx = core.db.begin().await?;
    let recipients = tx.webhook_subscribers(p.org_id, kind.as_str()).await?;
    // A sample is about no message: no timeline entry.
    let stamp = crate::events::Stamp {
        id: event_id,
        created_at,
        message_id: None,
    };
    crate::events::store(&mut tx, p.org_id, kind, &recipients, stamp, || {
        samples::data(kind, Uuid::nil(), created_at)
    })
    .await?;
    tx.commit().await?;
    Ok(Triggered {
        event_id,
        recipients: recipients.len(),
    })
}
