//! Applying one stored network notification (a webhook batch from `network_inbox`).
//!
//! Every effect is idempotent by construction, so a batch applied twice (the network's
//! retry, or a crash between applying and marking the batch done) changes nothing the
//! second time: inbound messages are unique by wamid, contact and conversation times only
//! move forward, edits apply only when newer than the last one, a deletion happens once,
//! and statuses go through the single status writer ([`crate::messages::status`]) with the
//! domain's monotonic rule. Customers are matched by BSUID first, then phone
//! (`tern_store::Identity`); what a notification reveals about them is learned, and two
//! contacts it shows to be one customer are merged.

mod inbound;

use std::collections::HashSet;

use tern_cloudapi::{MessagesValue, Sender, StatusUpdate};
use tern_domain::message::{Precision, Status};
use tern_domain::{new_id, time::now_ms};
use tern_store::{Db, Identity, StoreError};
use uuid::Uuid;

use crate::messages::failure;
use crate::messages::status::{self, Applied, Report as StatusReport, Reported};

/// What applying a notification did, for logs and tests.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Report {
    pub inbound_stored: usize,
    pub inbound_duplicates: usize,
    pub statuses_applied: usize,
    pub statuses_ignored: usize,
    pub templates_updated: usize,
    /// Messages the customer edited or deleted.
    pub messages_updated: usize,
    /// Contacts whose identifiers changed (learned, merged or replaced BSUIDs).
    pub contacts_updated: usize,
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
        self.messages_updated += o.messages_updated;
        self.contacts_updated += o.contacts_updated;
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
    for (waba, update) in notification.template_category_updates() {
        report.templates_updated +=
            crate::templates::apply_category_update(db, waba, update).await?;
    }
    Ok(report)
}

/// The identifiers of a customer as the store matches them.
pub(crate) fn identity(s: &Sender) -> Identity<'_> {
    Identity {
        wa_id: s.wa_id.as_deref(),
        user_id: s.user_id.as_deref(),
        parent_user_id: s.parent_user_id.as_deref(),
        username: s.username.as_deref(),
    }
}

/// The organisation of the number a notification is about (`None`: not Tern's; logged).
async fn number_org(
    db: &Db,
    pnid: Option<&str>,
    report: &mut Report,
) -> Result<Option<Uuid>, StoreError> {
    let number = match pnid {
        Some(pnid) => db.get_phone_number(pnid).await?,
        None => None,
    };
    if number.is_none() {
        tracing::warn!(phone_number_id = ?pnid, "event for an unknown number dropped");
        metrics::counter!("tern_network_events_total", "kind" => "unknown_number").increment(1);
        report.unknown_numbers += 1;
    }
    Ok(number.map(|n| n.org_id))
}

async fn apply_messages_value(
    db: &Db,
    value: &MessagesValue,
    report: &mut Report,
) -> Result<(), StoreError> {
    for err in &value.errors {
        tracing::warn!(code = ?err.code, title = ?err.title, "network reported an error");
    }
    let Some(org_id) = number_org(db, value.metadata.phone_number_id.as_deref(), report).await?
    else {
        return Ok(());
    };
    let pnid = value
        .metadata
        .phone_number_id
        .as_deref()
        .unwrap_or_default();
    for m in &value.messages {
        inbound::store(db, org_id, pnid, value, m, report).await?;
    }
    apply_statuses(db, org_id, &value.statuses, report).await?;
    // Since 2026 statuses name the customer too (BSUID; username on delivered/read): each
    // customer once per notification.
    let mut seen = HashSet::new();
    for s in &value.statuses {
        let who = value.recipient(s);
        if (who.user_id.is_some() || who.username.is_some())
            && seen.insert((
                who.wa_id.clone(),
                who.user_id.clone(),
                who.parent_user_id.clone(),
                who.username.clone(),
            ))
        {
            let observed = db
                .observe_identity(org_id, &identity(&who), now_ms())
                .await?;
            report.contacts_updated += usize::from(observed.is_some());
        }
    }
    Ok(())
}

/// A notification's statuses, through the status writer in one batch.
async fn apply_statuses(
    db: &Db,
    org_id: Uuid,
    statuses: &[StatusUpdate],
    report: &mut Report,
) -> Result<(), StoreError> {
    let failures: Vec<Option<failure::Failure>> = statuses
        .iter()
        .map(|s| {
            (s.status.message_status() == Some(Status::Failed))
                .then(|| failure::from_webhook(s.errors.first()))
        })
        .collect();
    let mut reports = Vec::with_capacity(statuses.len());
    for (s, failure) in statuses.iter().zip(&failures) {
        let Some(incoming) = s.status.message_status() else {
            tracing::info!(status = s.status.as_str(), "unknown status value ignored");
            report.statuses_ignored += 1;
            continue;
        };
        let at = s
            .timestamp
            .map(|t| t.saturating_mul(1000))
            .unwrap_or_else(now_ms);
        reports.push(Reported {
            wamid: &s.id,
            tern_id: s
                .biz_opaque_callback_data
                .as_deref()
                .and_then(|d| Uuid::parse_str(d).ok()),
            report: StatusReport {
                status: incoming,
                at,
                precision: Precision::WholeSecond,
                wamid: Some(&s.id),
                failure: failure.as_ref(),
            },
        });
    }
    if reports.is_empty() {
        return Ok(());
    }
    for (r, applied) in reports
        .iter()
        .zip(status::apply_reports(db, org_id, &reports).await?)
    {
        match applied {
            Applied::Changed => {
                metrics::counter!("tern_network_events_total", "kind" => "status").increment(1);
                report.statuses_applied += 1;
            }
            Applied::Unchanged => report.statuses_ignored += 1,
            Applied::UnknownMessage => {
                tracing::debug!(wamid = %r.wamid, "status for an unknown message ignored");
                report.statuses_ignored += 1;
            }
        }
    }
    Ok(())
}
