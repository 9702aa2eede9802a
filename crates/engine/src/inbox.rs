//! Processing of the network's webhook batches stored in `network_inbox`.
//!
//! Every effect is idempotent by construction, so a batch processed twice (the network's
//! retry, or a crash between applying and marking the batch done) changes nothing the
//! second time: inbound messages are unique by wamid, contact and conversation times only
//! move forward, and statuses are applied with the domain's monotonic rule under a
//! compare-and-set.

use std::sync::Arc;
use std::time::Duration;
use tern_cloudapi::{
    DeliveryStatus, InboundContent, InboundMessage, MessagesValue, StatusUpdate, TemplateEvent,
    TemplateStatusUpdate,
};
use tern_domain::message::{self, Status, Times};
use tern_domain::{new_id, time::now_ms};
use tern_store::{Db, Message, StatusChange, StoreError};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

/// How long a claimed batch is reserved for one worker.
const LEASE_MS: i64 = 60_000;
const BATCH: i64 = 20;

/// What processing a batch did, for logs and tests.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Report {
    pub inbound_stored: usize,
    pub inbound_duplicates: usize,
    pub statuses_applied: usize,
    pub statuses_ignored: usize,
    pub templates_updated: usize,
    pub unknown_numbers: usize,
    pub unparseable: usize,
}

impl Report {
    fn add(&mut self, o: &Report) {
        self.inbound_stored += o.inbound_stored;
        self.inbound_duplicates += o.inbound_duplicates;
        self.statuses_applied += o.statuses_applied;
        self.statuses_ignored += o.statuses_ignored;
        self.templates_updated += o.templates_updated;
        self.unknown_numbers += o.unknown_numbers;
        self.unparseable += o.unparseable;
    }
}

/// Runs until cancelled, woken when a batch is stored and every second regardless (so a
/// batch stored by another instance, or one whose lease expired, is picked up).
pub async fn run(db: Db, wakeup: Arc<Notify>, cancel: CancellationToken) {
    loop {
        match drain(&db).await {
            Ok(_) => {}
            Err(e) => tracing::warn!(error = %e, "inbox processing failed; will retry"),
        }
        tokio::select! {
            _ = cancel.cancelled() => break,
            _ = wakeup.notified() => {}
            _ = tokio::time::sleep(Duration::from_secs(1)) => {}
        }
    }
}

/// Processes every claimable batch; returns the combined report.
pub async fn drain(db: &Db) -> Result<Report, StoreError> {
    let mut total = Report::default();
    loop {
        let items = db.claim_inbox(BATCH, LEASE_MS, now_ms()).await?;
        if items.is_empty() {
            return Ok(total);
        }
        for item in items {
            match process_body(db, &item.body).await {
                Ok(report) => {
                    db.mark_inbox_processed(item.id, now_ms()).await?;
                    total.add(&report);
                }
                Err(e) => {
                    // Back off: 2 s, 4 s, … capped at 5 min; the batch stays until it works.
                    let delay = (2_000i64 << item.attempts.clamp(0, 8)).min(300_000);
                    tracing::warn!(inbox_id = %item.id, error = %e, "inbox batch failed");
                    db.mark_inbox_failed(item.id, &e.to_string(), now_ms() + delay)
                        .await?;
                }
            }
        }
    }
}

/// Applies one stored batch.
pub async fn process_body(db: &Db, body: &[u8]) -> Result<Report, StoreError> {
    let mut report = Report::default();
    let notification = match tern_cloudapi::parse_notification(body) {
        Ok(n) => n,
        Err(e) => {
            // Signed by the network but not a notification we can read: nothing to retry.
            tracing::warn!(error = %e, "unreadable network notification dropped");
            metrics::counter!("tern_network_events_total", "kind" => "unparseable").increment(1);
            report.unparseable += 1;
            return Ok(report);
        }
    };
    for (_waba, value) in notification.messages_values() {
        process_messages_value(db, value, &mut report).await?;
    }
    for (waba, update) in notification.template_updates() {
        report.templates_updated += apply_template_update(db, waba, update).await?;
    }
    Ok(report)
}

async fn process_messages_value(
    db: &Db,
    value: &MessagesValue,
    report: &mut Report,
) -> Result<(), StoreError> {
    for err in &value.errors {
        tracing::warn!(code = ?err.code, title = ?err.title, "network reported an error");
    }
    let Some(pnid) = value.metadata.phone_number_id.as_deref() else {
        report.unknown_numbers += 1;
        return Ok(());
    };
    let Some(number) = db.get_phone_number(pnid).await? else {
        tracing::warn!(
            phone_number_id = pnid,
            "event for an unknown number dropped"
        );
        metrics::counter!("tern_network_events_total", "kind" => "unknown_number").increment(1);
        report.unknown_numbers += 1;
        return Ok(());
    };
    for m in &value.messages {
        let profile = m.from.as_deref().and_then(|w| value.profile_name(w));
        store_inbound(db, number.org_id, pnid, m, profile, report).await?;
    }
    for s in &value.statuses {
        apply_status(db, number.org_id, s, report).await?;
    }
    Ok(())
}

/// The text a person would read for an inbound message, if any.
fn inbound_text(c: &InboundContent) -> Option<String> {
    use tern_cloudapi::InteractiveReply as R;
    match c {
        InboundContent::Text { body } => Some(body.clone()),
        InboundContent::Image(m)
        | InboundContent::Video(m)
        | InboundContent::Audio(m)
        | InboundContent::Document(m)
        | InboundContent::Sticker(m) => m.caption.clone(),
        InboundContent::Button { text, .. } => text.clone(),
        InboundContent::Reaction { emoji, .. } => emoji.clone(),
        InboundContent::Interactive(R::ButtonReply { title, .. } | R::ListReply { title, .. }) => {
            title.clone()
        }
        InboundContent::Interactive(R::NfmReply { body, .. }) => body.clone(),
        InboundContent::Order { text, .. } => text.clone(),
        InboundContent::System { body, .. } => body.clone(),
        InboundContent::Location(l) => l.name.clone().or_else(|| l.address.clone()),
        _ => None,
    }
}

async fn store_inbound(
    db: &Db,
    org_id: Uuid,
    pnid: &str,
    m: &InboundMessage,
    profile: Option<&str>,
    report: &mut Report,
) -> Result<(), StoreError> {
    let Some(wa_id) = m.from.as_deref().filter(|w| !w.is_empty()) else {
        tracing::warn!(wamid = %m.id, "inbound message without sender dropped");
        return Ok(());
    };
    let now = now_ms();
    // The window is computed from the network's timestamp, not from arrival time.
    let sent_at = m.timestamp.map(|s| s.saturating_mul(1000)).unwrap_or(now);
    let contact = db
        .record_inbound(org_id, wa_id, profile, sent_at, new_id(), now)
        .await?;
    let conversation = db
        .get_or_create_conversation(org_id, contact.id, pnid, new_id(), now)
        .await?;
    db.touch_conversation_inbound(conversation.id, sent_at, now)
        .await?;
    let row = Message {
        id: new_id(),
        org_id,
        conversation_id: conversation.id,
        contact_id: contact.id,
        phone_number_id: pnid.to_string(),
        direction: "inbound".into(),
        r#type: m.type_name.clone(),
        status: "received".into(),
        template_name: None,
        template_language: None,
        text: inbound_text(&m.content),
        media_id: None,
        wamid: Some(m.id.clone()),
        request: m.raw.clone(),
        campaign_id: None,
        created_at: sent_at,
        sent_at: None,
        delivered_at: None,
        read_at: None,
        failed_at: None,
        failure_code: None,
        failure: None,
        updated_at: now,
    };
    if db.insert_message(&row).await? {
        metrics::counter!("tern_network_events_total", "kind" => "inbound").increment(1);
        report.inbound_stored += 1;
    } else {
        report.inbound_duplicates += 1;
    }
    Ok(())
}

fn incoming_status(s: &DeliveryStatus) -> Option<Status> {
    match s {
        DeliveryStatus::Sent => Some(Status::Sent),
        DeliveryStatus::Delivered => Some(Status::Delivered),
        // `played` (voice) comes after `read` and implies it.
        DeliveryStatus::Read | DeliveryStatus::Played => Some(Status::Read),
        DeliveryStatus::Failed => Some(Status::Failed),
        DeliveryStatus::Unknown(_) => None,
    }
}

/// The Message `failure` object from the network's error.
pub fn failure_object(err: Option<&tern_cloudapi::WebhookError>) -> (String, serde_json::Value) {
    let default = tern_cloudapi::WebhookError::default();
    let err = err.unwrap_or(&default);
    let info = err.failure();
    let provider_message = err.message.clone().or_else(|| err.title.clone());
    let obj = crate::failure::object(
        info.code,
        &info.explanation,
        err.code.map(|c| c.to_string()),
        provider_message,
        err.href.as_deref(),
    );
    (info.code.to_string(), obj)
}

async fn apply_status(
    db: &Db,
    org_id: Uuid,
    s: &StatusUpdate,
    report: &mut Report,
) -> Result<(), StoreError> {
    let Some(incoming) = incoming_status(&s.status) else {
        tracing::info!(status = s.status.as_str(), "unknown status value ignored");
        report.statuses_ignored += 1;
        return Ok(());
    };
    let tern_id = s
        .biz_opaque_callback_data
        .as_deref()
        .and_then(|d| Uuid::parse_str(d).ok());
    let at = s
        .timestamp
        .map(|t| t.saturating_mul(1000))
        .unwrap_or_else(now_ms);
    // Compare-and-set: re-read and decide again if another writer got there first.
    for _ in 0..8 {
        let Some(msg) = db.find_message_for_status(&s.id, tern_id).await? else {
            tracing::debug!(wamid = %s.id, "status for an unknown message ignored");
            report.statuses_ignored += 1;
            return Ok(());
        };
        if msg.org_id != org_id {
            tracing::warn!(wamid = %s.id, "status for another organisation's message ignored");
            report.statuses_ignored += 1;
            return Ok(());
        }
        let Some(current) = Status::parse(&msg.status) else {
            report.statuses_ignored += 1;
            return Ok(());
        };
        // The network's timestamps have whole-second precision; a step cannot precede the
        // message's acceptance, so the truncated second is raised to it.
        let at = at.max(msg.created_at);
        let times = Times {
            sent_at: msg.sent_at,
            delivered_at: msg.delivered_at,
            read_at: msg.read_at,
            failed_at: msg.failed_at,
        };
        let outcome = message::apply(current, times, incoming, at);
        let wamid_missing = msg.wamid.is_none();
        if !outcome.changed && !wamid_missing {
            report.statuses_ignored += 1;
            return Ok(());
        }
        let (failure_code, failure) =
            if outcome.status == Status::Failed && current != Status::Failed {
                let (code, obj) = failure_object(s.errors.first());
                (Some(code), Some(obj))
            } else {
                (msg.failure_code.clone(), msg.failure.clone())
            };
        let change = StatusChange {
            status: outcome.status.as_str().to_string(),
            wamid: Some(s.id.clone()),
            sent_at: outcome.times.sent_at,
            delivered_at: outcome.times.delivered_at,
            read_at: outcome.times.read_at,
            failed_at: outcome.times.failed_at,
            failure_code,
            failure,
        };
        if db
            .update_message_status(msg.id, &msg.status, msg.updated_at, &change, now_ms())
            .await?
        {
            metrics::counter!("tern_network_events_total", "kind" => "status").increment(1);
            report.statuses_applied += 1;
            return Ok(());
        }
    }
    Err(StoreError::Conflict {
        constraint: "message_status_contention".into(),
    })
}

fn template_status(e: &TemplateEvent) -> Option<&'static str> {
    match e {
        TemplateEvent::Approved | TemplateEvent::Reinstated | TemplateEvent::Unarchived => {
            Some("approved")
        }
        TemplateEvent::Rejected => Some("rejected"),
        TemplateEvent::Pending | TemplateEvent::InAppeal => Some("pending"),
        TemplateEvent::Paused => Some("paused"),
        TemplateEvent::Disabled
        | TemplateEvent::Deleted
        | TemplateEvent::PendingDeletion
        | TemplateEvent::Archived
        | TemplateEvent::Locked => Some("disabled"),
        // Quality flags and limits do not change whether the template can be sent.
        TemplateEvent::Flagged | TemplateEvent::LimitExceeded | TemplateEvent::Unknown(_) => None,
    }
}

async fn apply_template_update(
    db: &Db,
    waba: &str,
    u: &TemplateStatusUpdate,
) -> Result<usize, StoreError> {
    let (Some(status), Some(name)) = (template_status(&u.event), u.name.as_deref()) else {
        tracing::info!(
            event = u.event.as_str(),
            "template event without a status change"
        );
        return Ok(0);
    };
    let reason = u
        .reason
        .as_deref()
        .filter(|r| !r.is_empty() && *r != "NONE");
    let changed = db
        .apply_template_status(
            waba,
            u.message_template_id.as_deref(),
            name,
            u.language.as_deref(),
            status,
            reason,
            now_ms(),
        )
        .await?;
    Ok(changed.len())
}
