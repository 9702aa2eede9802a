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
//!
//! Content from the network is kept even when the databases cannot hold a character of it:
//! every U+0000 is replaced by U+FFFD before anything is read (PostgreSQL refuses it in
//! text and JSON). Each item of a notification (a message, a status, a template update) is
//! applied on its own: one the database refuses is listed in [`Report::failed`] and the
//! others are applied; the inbox worker retries the batch and, after its retries, sets the
//! item aside. A database that cannot be reached fails the whole batch.
//!
//! The inbox worker applies the notifications it claims together where that ends the same:
//! those of statuses alone ([`apply_statuses_together`]), and the customers' plain messages
//! of those with messages ([`apply_messages_together`]); the rest as here, one by one.

mod inbound;
mod statuses;
mod together;

pub use statuses::{Received, apply_statuses_together};
pub use together::apply_messages_together;

use std::collections::HashMap;
use std::future::Future;

use serde_json::Value;
use tern_cloudapi::{MessagesValue, Notification, Sender, StatusUpdate};
use tern_domain::{new_id, time::now_ms};
use tern_store::{Db, Identity, InboxQueue, NewInboxItem, StoreError};
use uuid::Uuid;

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
    /// Items the database refused (the rest of the notification was applied).
    pub failed: Vec<FailedItem>,
}

/// One item of a notification that could not be applied.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FailedItem {
    /// What it is (a fixed set, usable as a metrics label): `message`, `status`,
    /// `identity`, `template_status`, `template_category`.
    pub kind: &'static str,
    /// Which one, stable across attempts of the batch: a wamid, `wamid:status`, a BSUID, a
    /// template id.
    pub key: String,
    /// The item as the network sent it (JSON).
    pub item: String,
    pub error: String,
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
        self.failed.extend(o.failed.iter().cloned());
    }
}

/// Stores a notification whose signature was verified, for the inbox worker to apply
/// ([`apply`]), committed together with the others arriving meanwhile (`intake`, bounded:
/// a full intake makes the request wait); the network is answered as soon as it is stored.
/// Takes the body and signature as copies of their own: a request's body and headers share
/// the HTTP connection's read buffer, and holding them while the commit is awaited made the
/// connection take another.
pub async fn receive(
    intake: &InboxQueue,
    body: Vec<u8>,
    signature: String,
) -> Result<Uuid, StoreError> {
    let id = new_id();
    let item = NewInboxItem {
        id,
        body,
        signature,
        received_at: now_ms(),
    };
    intake.insert(item).await?;
    Ok(id)
}

/// Applies one stored notification body. `Err` only when the database could not be reached
/// (or refused something shared by the whole batch); an item it refuses is in
/// [`Report::failed`].
pub async fn apply(db: &Db, body: &[u8]) -> Result<Report, StoreError> {
    apply_received(db, body, now_ms()).await
}

/// [`apply`] of a notification that reached Tern at `received_at` (the `received_at` of its
/// status reports' timeline entries).
pub async fn apply_received(db: &Db, body: &[u8], received_at: i64) -> Result<Report, StoreError> {
    let mut report = Report::default();
    let notification = match parse(body) {
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
        apply_messages_value(db, value, received_at, &mut report).await?;
    }
    // Statuses first, then categories (as the network lists them within each).
    let statuses = notification
        .template_updates()
        .map(|(waba, u)| (waba, TemplateChange::Status(u)));
    let categories = notification
        .template_category_updates()
        .map(|(waba, u)| (waba, TemplateChange::Category(u)));
    for (waba, change) in statuses.chain(categories) {
        let mut done = 0;
        let outcome = async {
            done = match change {
                TemplateChange::Status(u) => {
                    crate::templates::apply_network_update(db, waba, u).await?
                }
                TemplateChange::Category(u) => {
                    crate::templates::apply_category_update(db, waba, u).await?
                }
            };
            Ok::<(), StoreError>(())
        };
        let (kind, key, raw) = change.named();
        isolated(&mut report, kind, key, raw, outcome).await?;
        report.templates_updated += done;
    }
    Ok(report)
}

/// Reads a stored notification body, every U+0000 replaced (see [`replace_nul`]).
fn parse(body: &[u8]) -> Result<Notification, String> {
    serde_json::from_slice::<Value>(body)
        .map_err(|e| e.to_string())
        .and_then(|mut root| {
            replace_nul(&mut root);
            tern_cloudapi::parse_notification_value(&root).map_err(|e| e.to_string())
        })
}

/// A template change the network reported.
#[derive(Clone, Copy)]
enum TemplateChange<'a> {
    Status(&'a tern_cloudapi::TemplateStatusUpdate),
    Category(&'a tern_cloudapi::TemplateCategoryUpdate),
}

impl TemplateChange<'_> {
    /// Its kind, its key within the batch (its template's id, else name and language) and
    /// the item as received, for a [`FailedItem`].
    fn named(&self) -> (&'static str, String, &Value) {
        let (kind, id, name, language, raw) = match self {
            TemplateChange::Status(u) => (
                "template_status",
                &u.message_template_id,
                &u.name,
                &u.language,
                &u.raw,
            ),
            TemplateChange::Category(u) => (
                "template_category",
                &u.message_template_id,
                &u.name,
                &u.language,
                &u.raw,
            ),
        };
        (
            kind,
            template_key(id.as_deref(), name.as_deref(), language.as_deref()),
            raw,
        )
    }
}

/// Names a template update within its batch: its id, else its name and language.
fn template_key(id: Option<&str>, name: Option<&str>, language: Option<&str>) -> String {
    match id {
        Some(id) => id.to_owned(),
        None => format!(
            "{}:{}",
            name.unwrap_or_default(),
            language.unwrap_or_default()
        ),
    }
}

/// Replaces every U+0000 in the strings (and keys) of `v` by U+FFFD: the databases cannot
/// hold it, and the rest of the content is worth keeping.
fn replace_nul(v: &mut Value) {
    const NUL: char = '\u{0}';
    match v {
        Value::String(s) if s.contains(NUL) => *s = s.replace(NUL, "\u{fffd}"),
        Value::Array(items) => items.iter_mut().for_each(replace_nul),
        Value::Object(map) if map.keys().any(|k| k.contains(NUL)) => {
            let old = std::mem::take(map);
            for (k, mut item) in old {
                replace_nul(&mut item);
                map.insert(k.replace(NUL, "\u{fffd}"), item);
            }
        }
        Value::Object(map) => map.values_mut().for_each(replace_nul),
        _ => {}
    }
}

/// Runs one item of a notification. When the database refuses it, the item is added to
/// `report.failed` (and logged) and `Ok` lets the rest of the notification go on; a database
/// that cannot be reached is returned, failing the whole batch.
async fn isolated(
    report: &mut Report,
    kind: &'static str,
    key: String,
    raw: &Value,
    item: impl Future<Output = Result<(), StoreError>>,
) -> Result<(), StoreError> {
    match item.await {
        Ok(()) => Ok(()),
        Err(e) if e.is_unavailable() => Err(e),
        Err(e) => {
            tracing::warn!(kind, key = %key, error = %e, "network item could not be applied");
            report.failed.push(FailedItem {
                kind,
                key,
                item: raw.to_string(),
                // Kept in a text column: no NUL, whatever the database said.
                error: e.to_string().replace('\u{0}', "\u{fffd}"),
            });
            Ok(())
        }
    }
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

/// The organisation of each number, looked up once per pass.
type Orgs = HashMap<String, Option<Uuid>>;

/// The organisation of the number a notification is about (`None`: not Tern's; logged).
async fn number_org(
    db: &Db,
    orgs: &mut Orgs,
    pnid: Option<&str>,
    report: &mut Report,
) -> Result<Option<Uuid>, StoreError> {
    let org = match pnid {
        Some(pnid) => match orgs.get(pnid) {
            Some(org) => *org,
            None => {
                let org = db.get_phone_number(pnid).await?.map(|n| n.org_id);
                orgs.insert(pnid.to_owned(), org);
                org
            }
        },
        None => None,
    };
    if org.is_none() {
        tracing::warn!(phone_number_id = ?pnid, "event for an unknown number dropped");
        metrics::counter!("tern_network_events_total", "kind" => "unknown_number").increment(1);
        report.unknown_numbers += 1;
    }
    Ok(org)
}

async fn apply_messages_value(
    db: &Db,
    value: &MessagesValue,
    received_at: i64,
    report: &mut Report,
) -> Result<(), StoreError> {
    statuses::log_errors(value);
    let pnid = value.metadata.phone_number_id.as_deref();
    let Some(org_id) = number_org(db, &mut Orgs::new(), pnid, report).await? else {
        return Ok(());
    };
    let pnid = pnid.unwrap_or_default();
    for m in &value.messages {
        let mut part = Report::default();
        let outcome = inbound::store(db, org_id, pnid, value, m, &mut part);
        isolated(report, "message", m.id.clone(), &m.raw, outcome).await?;
        report.add(&part);
    }
    apply_value_statuses(db, org_id, value, received_at, report).await
}

/// The statuses of a notification's `value` (after its messages), and what they show of
/// their customers.
async fn apply_value_statuses(
    db: &Db,
    org_id: Uuid,
    value: &MessagesValue,
    received_at: i64,
    report: &mut Report,
) -> Result<(), StoreError> {
    let statuses: Vec<(&StatusUpdate, i64)> =
        value.statuses.iter().map(|s| (s, received_at)).collect();
    match statuses::apply(db, org_id, &statuses).await {
        Ok(applied) => statuses::count(report, &applied),
        Err(e) if e.is_unavailable() => return Err(e),
        // One of them was refused: each on its own, so the others are applied.
        Err(_) => {
            for one in &statuses {
                let mut applied = Vec::new();
                let key = format!("{}:{}", one.0.id, one.0.status.as_str());
                let outcome = async {
                    applied = statuses::apply(db, org_id, std::slice::from_ref(one)).await?;
                    Ok::<(), StoreError>(())
                };
                isolated(report, "status", key, &one.0.raw, outcome).await?;
                statuses::count(report, &applied);
            }
        }
    }
    statuses::observe_identities(db, &[(0, org_id, value)], std::slice::from_mut(report)).await
}
