//! `POST /events/trigger` (`tern trigger TYPE`): one sample event of a type (the data of
//! [`super::samples`], as a test send carries) stored like a real one, so it goes through
//! the outbox to every enabled subscription of the caller's organisation that lists the type
//! and to every stream that wants it.

use tern_domain::events::{EventType, event_body};
use tern_domain::new_id;
use tern_domain::time::now_ms;
use tern_store::NewEvent;
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
    if !recipients.is_empty() {
        let data = samples::data(kind, Uuid::nil(), created_at);
        let payload = event_body(&event_id.to_string(), kind, created_at, p.mode, &data);
        let event = NewEvent {
            id: event_id,
            org_id: p.org_id,
            event_type: kind.as_str().to_string(),
            // The body is JSON text built by serde_json: always UTF-8.
            payload: String::from_utf8(payload).unwrap_or_default(),
            created_at,
            // A sample is about no message: no timeline entry.
            message_id: None,
        };
        tx.insert_event(&event, &recipients).await?;
    }
    tx.commit().await?;
    Ok(Triggered {
        event_id,
        recipients: recipients.len(),
    })
}
