//! Applying one stored network notification (a webhook batch from `network_inbox`).
//!
//! Every effect is idempotent by construction, so a batch applied twice (the network's
//! retry, or a crash between applying and marking the batch done) changes nothing the
//! second time: inbound messages are unique by wamid, contact and conversation times only
//! move forward, and statuses go through the single status writer
//! ([`crate::messages::status`]) with the domain's monotonic rule.

use tern_cloudapi::{InboundContent, InboundMessage, MessagesValue, StatusUpdate};
use tern_domain::message::{Direction, Precision, Status};
use tern_domain::{new_id, time::now_ms};
use tern_store::{Db, Message, StoreError};
use uuid::Uuid;

use crate::messages::failure;
use crate::messages::status::{self, Applied, Report as StatusReport};

/// What applying a notification did, for logs and tests.
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
    pub fn add(&mut self, o: &Report) {
        self.inbound_stored += o.inbound_stored;
        self.inbound_duplicates += o.inbound_duplicates;
        self.statuses_applied += o.statuses_applied;
        self.statuses_ignored += o.statuses_ignored;
        self.templates_updated += o.templates_updated;
        self.unknown_numbers += o.unknown_numbers;
        self.unparseable += o.unparseable;
    }
}

/// Stores a notification whose signature was verified, for the inbox worker to apply
/// ([`apply`]); the network is answered as soon as it is stored.
pub async fn receive(db: &Db, body: &[u8], signature: &str) -> Result<Uuid, StoreError> {
    let id = new_id();
    db.insert_inbox(id, body, signature, now_ms()).await?;
    Ok(id)
}

/// Applies one stored notification body.
pub async fn apply(db: &Db, body: &[u8]) -> Result<Report, StoreError> {
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
        apply_messages_value(db, value, &mut report).await?;
    }
    for (waba, update) in notification.template_updates() {
        report.templates_updated +=
            crate::templates::apply_network_update(db, waba, update).await?;
    }
    Ok(report)
}

async fn apply_messages_value(
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
        direction: Direction::Inbound,
        r#type: m.type_name.clone(),
        status: Status::Received,
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

async fn apply_status(
    db: &Db,
    org_id: Uuid,
    s: &StatusUpdate,
    report: &mut Report,
) -> Result<(), StoreError> {
    let Some(incoming) = s.status.message_status() else {
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
    let failure = (incoming == Status::Failed).then(|| failure::from_webhook(s.errors.first()));
    let r = StatusReport {
        status: incoming,
        at,
        precision: Precision::WholeSecond,
        wamid: Some(&s.id),
        failure: failure.as_ref(),
    };
    match status::apply_report(db, org_id, &s.id, tern_id, &r).await? {
        Applied::Changed => {
            metrics::counter!("tern_network_events_total", "kind" => "status").increment(1);
            report.statuses_applied += 1;
        }
        Applied::Unchanged => report.statuses_ignored += 1,
        Applied::UnknownMessage => {
            tracing::debug!(wamid = %s.id, "status for an unknown message ignored");
            report.statuses_ignored += 1;
        }
    }
    Ok(())
}
