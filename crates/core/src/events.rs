//! Events, written in the transaction of the change they report (CORE.md rule 3): the
//! status writer, the inbox (customers' messages, edits and deletions), template status
//! updates and consent changes call these with their open [`Tx`], so an event (one row,
//! naming the subscriptions it goes to) exists exactly when the change does: a process that
//! dies between the change and the send loses nothing (the delivery workers fan the stored
//! event out into deliveries later).
//!
//! An event is stored only when a subscription wants it: with none, emitting costs one
//! indexed read and the body is never built.

use std::collections::HashMap;
use std::sync::Mutex;

use serde::Serialize;
use tern_domain::auth::Mode;
use tern_domain::events::{EventType, event_body};
use tern_domain::message::Status;
use tern_domain::new_id;
use tern_domain::time::now_ms;
use tern_store::{Message, NewEvent, StoreError, Tx};
use uuid::Uuid;

use crate::views;

/// Stores an event of `kind` whose `data` is `data()` for every subscription of the
/// organisation that lists `kind`, in `tx`. Returns how many deliveries were queued.
pub async fn emit<T: Serialize>(
    tx: &mut Tx,
    org_id: Uuid,
    kind: EventType,
    data: impl FnOnce() -> T,
) -> Result<usize, StoreError> {
    emit_about(tx, org_id, kind, None, data).await
}

/// [`emit`] of an event about message `message_id`: the event is an entry of its timeline.
pub async fn emit_about<T: Serialize>(
    tx: &mut Tx,
    org_id: Uuid,
    kind: EventType,
    message_id: Option<Uuid>,
    data: impl FnOnce() -> T,
) -> Result<usize, StoreError> {
    let subscribers = tx.webhook_subscribers(org_id, kind.as_str()).await?;
    emit_to(tx, org_id, kind, &subscribers, message_id, data).await
}

/// [`emit`] to `subscribers`, already read in `tx`.
async fn emit_to<T: Serialize>(
    tx: &mut Tx,
    org_id: Uuid,
    kind: EventType,
    subscribers: &[Uuid],
    message_id: Option<Uuid>,
    data: impl FnOnce() -> T,
) -> Result<usize, StoreError> {
    let stamp = Stamp {
        id: new_id(),
        created_at: now_ms(),
        message_id,
    };
    store(tx, org_id, kind, subscribers, stamp, data).await
}

/// An event's id, its time and the message it is about.
#[derive(Debug, Clone, Copy)]
pub struct Stamp {
    pub id: Uuid,
    pub created_at: i64,
    pub message_id: Option<Uuid>,
}

/// Stores the event `stamp` of `kind` for `subscribers` (subscriptions and streams, read in
/// `tx`), its body saying the organisation's mode; nothing for none. Returns how many it
/// goes to. Every event is written here ([`emit`], and `POST /events/trigger`'s samples).
pub async fn store<T: Serialize>(
    tx: &mut Tx,
    org_id: Uuid,
    kind: EventType,
    subscribers: &[Uuid],
    stamp: Stamp,
    data: impl FnOnce() -> T,
) -> Result<usize, StoreError> {
    if subscribers.is_empty() {
        return Ok(0);
    }
    let Stamp {
        id,
        created_at,
        message_id,
    } = stamp;
    let data = serde_json::to_value(data()).unwrap_or_default();
    let mode = org_mode(tx, org_id).await?;
    let payload = event_body(&id.to_string(), kind, created_at, mode, &data);
    let event = NewEvent {
        id,
        org_id,
        event_type: kind.as_str().to_string(),
        // The body is JSON text built by serde_json: always UTF-8.
        payload: String::from_utf8(payload).unwrap_or_default(),
        created_at,
        message_id,
    };
    tx.insert_event(&event, subscribers).await?;
    metrics::counter!("tern_events_total", "type" => kind.as_str()).increment(1);
    Ok(subscribers.len())
}

/// Whether `org_id` is a test space (its events say `"mode": "test"`). An organisation never
/// changes mode, so the answer is kept for the process: one read per organisation.
async fn org_mode(tx: &mut Tx, org_id: Uuid) -> Result<Mode, StoreError> {
    static MODES: std::sync::LazyLock<Mutex<HashMap<Uuid, Mode>>> =
        std::sync::LazyLock::new(Mutex::default);
    if let Some(mode) = MODES.lock().unwrap_or_else(|e| e.into_inner()).get(&org_id) {
        return Ok(*mode);
    }
    let mode = if tx.org_is_test_space(org_id).await? {
        Mode::Test
    } else {
        Mode::Live
    };
    let mut modes = MODES.lock().unwrap_or_else(|e| e.into_inner());
    // Bounded: a process serving very many organisations reads again now and then.
    if modes.len() >= 100_000 {
        modes.clear();
    }
    modes.insert(org_id, mode);
    Ok(mode)
}

/// `message.status`: the message, as written, reached `sent`, `delivered`, `read` or
/// `failed` (a step the network skipped fires nothing; an earlier time filled in for a step
/// already passed is not a new status).
pub async fn message_status(
    tx: &mut Tx,
    org_id: Uuid,
    before: Status,
    after: Status,
    message_id: Uuid,
    msg: impl FnOnce() -> Message,
) -> Result<(), StoreError> {
    StatusEvents::new(org_id)
        .emit(tx, before, after, message_id, msg)
        .await
}

/// `message.status` events of one organisation in one transaction: the subscribers are read
/// once, at the first change that reports a status, for all of them.
pub struct StatusEvents {
    org_id: Uuid,
    subscribers: Option<Vec<Uuid>>,
}

impl StatusEvents {
    pub fn new(org_id: Uuid) -> StatusEvents {
        StatusEvents {
            org_id,
            subscribers: None,
        }
    }

    /// See [`message_status`].
    pub async fn emit(
        &mut self,
        tx: &mut Tx,
        before: Status,
        after: Status,
        message_id: Uuid,
        msg: impl FnOnce() -> Message,
    ) -> Result<(), StoreError> {
        let reported = matches!(
            after,
            Status::Sent | Status::Delivered | Status::Read | Status::Failed
        );
        if !reported || after == before {
            return Ok(());
        }
        let kind = EventType::MessageStatus;
        let subscribers = match &self.subscribers {
            Some(s) => s,
            None => self
                .subscribers
                .insert(tx.webhook_subscribers(self.org_id, kind.as_str()).await?),
        };
        // The row is built only when a subscription wants it (status changes are hot).
        emit_to(tx, self.org_id, kind, subscribers, Some(message_id), || {
            views::Message::from(msg())
        })
        .await
        .map(drop)
    }
}

/// `message.received`: a customer's new message.
pub async fn message_received(tx: &mut Tx, msg: &Message) -> Result<(), StoreError> {
    emit_about(
        tx,
        msg.org_id,
        EventType::MessageReceived,
        Some(msg.id),
        || views::Message::from(msg.clone()),
    )
    .await
    .map(drop)
}

/// [`message_received`] of many new messages of one organisation in one transaction: the
/// subscribers are read once for all of them.
pub async fn messages_received(
    tx: &mut Tx,
    org_id: Uuid,
    msgs: &[&Message],
) -> Result<(), StoreError> {
    many_about(tx, org_id, EventType::MessageReceived, msgs).await
}

/// Events of `kind` about each of `msgs` (the message as its data), subscribers read once.
async fn many_about(
    tx: &mut Tx,
    org_id: Uuid,
    kind: EventType,
    msgs: &[&Message],
) -> Result<(), StoreError> {
    if msgs.is_empty() {
        return Ok(());
    }
    let subscribers = tx.webhook_subscribers(org_id, kind.as_str()).await?;
    for msg in msgs {
        emit_to(tx, org_id, kind, &subscribers, Some(msg.id), || {
            views::Message::from((*msg).clone())
        })
        .await?;
    }
    Ok(())
}

/// [`message_updated`] of many messages of one organisation in one transaction: the
/// subscribers are read once for all of them.
pub async fn messages_updated(
    tx: &mut Tx,
    org_id: Uuid,
    msgs: &[&Message],
) -> Result<(), StoreError> {
    many_about(tx, org_id, EventType::MessageUpdated, msgs).await
}

/// `message.updated`: the message after a customer's edit or deletion.
pub async fn message_updated(tx: &mut Tx, msg: &Message) -> Result<(), StoreError> {
    emit_about(
        tx,
        msg.org_id,
        EventType::MessageUpdated,
        Some(msg.id),
        || views::Message::from(msg.clone()),
    )
    .await
    .map(drop)
}

/// `template.status`: a template's review status changed.
pub async fn template_status(tx: &mut Tx, t: &tern_store::Template) -> Result<(), StoreError> {
    emit(tx, t.org_id, EventType::TemplateStatus, || {
        views::Template::from(t.clone())
    })
    .await
    .map(drop)
}

/// `contact.consent`: a contact's consent changed.
pub async fn contact_consent(tx: &mut Tx, c: &tern_store::Contact) -> Result<(), StoreError> {
    emit(tx, c.org_id, EventType::ContactConsent, || {
        views::Contact::from(c.clone())
    })
    .await
    .map(drop)
}
