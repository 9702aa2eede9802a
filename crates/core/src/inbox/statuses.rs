//! Status reports of network notifications, through the status writer: those of one
//! notification together, and those of many notifications that carry nothing else together
//! too ([`apply_statuses_together`]).

use std::collections::{BTreeMap, HashSet};

use tern_cloudapi::{MessagesValue, Notification, Sender, StatusUpdate};
use tern_domain::message::{Precision, Pricing, Status};
use tern_domain::time::now_ms;
use tern_store::{Db, StoreError};
use uuid::Uuid;

use super::{Orgs, Report, identity, isolated, number_org, parse};
use crate::messages::failure;
use crate::messages::status::{self, Applied, Report as StatusReport, Reported};

/// Statuses written in one transaction at most.
const STATUSES_PER_TRANSACTION: usize = 1_000;

/// A stored notification: its body and when it reached Tern.
#[derive(Debug, Clone, Copy)]
pub struct Received<'a> {
    pub body: &'a [u8],
    pub received_at: i64,
}

/// Applies the notifications of `items` that carry nothing but statuses in one pass of the
/// status writer per organisation: one read of their messages, one transaction, one commit.
/// The network sends most statuses one per webhook, so applying each notification alone
/// costs a transaction per status; `items` are in the order they arrived, and the status
/// writer applies reports in order with its monotonic rule.
///
/// Returns each item's report at its index, or `None` for an item left to
/// [`super::apply_received`]: one that carries something else (or cannot be read), or one
/// whose shared transaction the database refused (each then alone, so one refused status
/// does not hold back the rest). `Err` only when the database cannot be reached.
pub async fn apply_statuses_together(
    db: &Db,
    items: &[Received<'_>],
) -> Result<Vec<Option<Report>>, StoreError> {
    let mut out = vec![None; items.len()];
    let parsed: Vec<(usize, Notification)> = items
        .iter()
        .enumerate()
        .filter_map(|(i, item)| {
            let n = parse(item.body).ok()?;
            statuses_only(&n).then_some((i, n))
        })
        .collect();
    if parsed.len() < 2 {
        return Ok(out);
    }
    let mut orgs = Orgs::new();
    let mut reports = vec![Report::default(); parsed.len()];
    // Each organisation's statuses in arrival order: (position in `parsed`, status, arrival).
    let mut by_org: BTreeMap<Uuid, Vec<(usize, &StatusUpdate, i64)>> = BTreeMap::new();
    let mut values: Vec<(usize, Uuid, &MessagesValue)> = Vec::new();
    for (pos, (i, n)) in parsed.iter().enumerate() {
        for (_waba, value) in n.messages_values() {
            log_errors(value);
            let pnid = value.metadata.phone_number_id.as_deref();
            let Some(org_id) = number_org(db, &mut orgs, pnid, &mut reports[pos]).await? else {
                continue;
            };
            let list = by_org.entry(org_id).or_default();
            list.extend(
                value
                    .statuses
                    .iter()
                    .map(|s| (pos, s, items[*i].received_at)),
            );
            values.push((pos, org_id, value));
        }
    }
    let mut refused = HashSet::new();
    for (org_id, list) in &by_org {
        // Bounded transactions (and memory: each holds its messages' rows and events).
        for chunk in list.chunks(STATUSES_PER_TRANSACTION) {
            let statuses: Vec<(&StatusUpdate, i64)> =
                chunk.iter().map(|(_, s, at)| (*s, *at)).collect();
            match apply(db, *org_id, &statuses).await {
                Ok(applied) => {
                    for ((pos, _, _), applied) in chunk.iter().zip(applied) {
                        count(&mut reports[*pos], &[applied]);
                    }
                }
                Err(e) if e.is_unavailable() => return Err(e),
                Err(e) => {
                    tracing::info!(error = %e, "statuses applied together were refused; each alone");
                    refused.extend(chunk.iter().map(|(pos, _, _)| *pos));
                }
            }
        }
    }
    // What statuses reveal of customers: each customer once for the whole pass.
    values.retain(|(pos, _, _)| !refused.contains(pos));
    observe_identities(db, &values, &mut reports).await?;
    for (pos, ((i, _), report)) in parsed.iter().zip(reports).enumerate() {
        if !refused.contains(&pos) {
            out[*i] = Some(report);
        }
    }
    Ok(out)
}

/// Whether a notification carries statuses and nothing else Tern applies.
fn statuses_only(n: &Notification) -> bool {
    let mut values = n.messages_values().peekable();
    values.peek().is_some()
        && values.all(|(_, v)| v.messages.is_empty())
        && n.template_updates().next().is_none()
        && n.template_category_updates().next().is_none()
}

/// Logs the system-level errors of a notification value.
pub(super) fn log_errors(value: &MessagesValue) {
    for err in &value.errors {
        tracing::warn!(code = ?err.code, title = ?err.title, "network reported an error");
    }
}

/// Applies statuses of the organisation's messages (each with when its notification arrived)
/// through the status writer in one batch. One flag a status: applied (`false`: ignored, as
/// a duplicate, an unknown message or an unknown status value).
pub(super) async fn apply(
    db: &Db,
    org_id: Uuid,
    statuses: &[(&StatusUpdate, i64)],
) -> Result<Vec<bool>, StoreError> {
    let failures: Vec<Option<failure::Failure>> = statuses
        .iter()
        .map(|(s, _)| {
            (s.status.message_status() == Some(Status::Failed))
                .then(|| failure::from_webhook(s.errors.first()))
        })
        .collect();
    let prices: Vec<Option<Pricing>> = statuses
        .iter()
        .map(|(s, _)| s.pricing.as_ref().map(pricing))
        .collect();
    let mut flags = vec![false; statuses.len()];
    let mut reports = Vec::with_capacity(statuses.len());
    let mut indices = Vec::with_capacity(statuses.len());
    for (i, (((s, received_at), failure), price)) in
        statuses.iter().zip(&failures).zip(&prices).enumerate()
    {
        let Some(incoming) = s.status.message_status() else {
            tracing::info!(status = s.status.as_str(), "unknown status value ignored");
            continue;
        };
        let at = s
            .timestamp
            .map(|t| t.saturating_mul(1000))
            .unwrap_or_else(now_ms);
        indices.push(i);
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
                seen: Some(status::Seen {
                    received_at: *received_at,
                    pricing: price.as_ref(),
                }),
                attempt: None,
            },
        });
    }
    if reports.is_empty() {
        return Ok(flags);
    }
    let results = status::apply_reports(db, org_id, &reports).await?;
    for ((i, r), applied) in indices.into_iter().zip(&reports).zip(results) {
        match applied {
            Applied::Changed => {
                metrics::counter!("tern_network_events_total", "kind" => "status").increment(1);
                flags[i] = true;
            }
            Applied::Unchanged => {}
            Applied::UnknownMessage => {
                tracing::debug!(wamid = %r.wamid, "status for an unknown message ignored");
            }
        }
    }
    Ok(flags)
}

/// A status's pricing in Tern's type (the network's words stay those of the report).
fn pricing(p: &tern_cloudapi::Pricing) -> Pricing {
    Pricing {
        billable: p.billable,
        pricing_model: p.pricing_model.clone(),
        category: p.category.clone(),
        r#type: p.pricing_type.clone(),
    }
}

/// Counts statuses [`apply`] applied or ignored.
pub(super) fn count(report: &mut Report, applied: &[bool]) {
    for &a in applied {
        if a {
            report.statuses_applied += 1;
        } else {
            report.statuses_ignored += 1;
        }
    }
}

/// Learns what the statuses of `values` (each `(report index, organisation, value)`)
/// reveal about their customers: since 2026 they name the customer too (BSUID; username on
/// delivered/read). Each customer once, each organisation's in one pass of the store
/// ([`Db::observe_identities`]: one read, one write for those that only learn identifiers);
/// if the database refuses that pass, each customer alone, so one refusal is one failed
/// item. Counted in the report of the first value naming the customer.
pub(super) async fn observe_identities(
    db: &Db,
    values: &[(usize, Uuid, &MessagesValue)],
    reports: &mut [Report],
) -> Result<(), StoreError> {
    let mut seen = HashSet::new();
    // Each organisation's customers: (report index, who, the status naming them).
    let mut by_org: BTreeMap<Uuid, Vec<(usize, Sender, &StatusUpdate)>> = BTreeMap::new();
    for (pos, org_id, value) in values {
        for s in &value.statuses {
            let who = value.recipient(s);
            if (who.user_id.is_some() || who.username.is_some())
                && seen.insert((
                    *org_id,
                    who.wa_id.clone(),
                    who.user_id.clone(),
                    who.parent_user_id.clone(),
                    who.username.clone(),
                ))
            {
                by_org.entry(*org_id).or_default().push((*pos, who, s));
            }
        }
    }
    for (org_id, list) in by_org {
        let ids: Vec<_> = list.iter().map(|(_, who, _)| identity(who)).collect();
        match db.observe_identities(org_id, &ids, now_ms()).await {
            Ok(written) => {
                for ((pos, _, _), w) in list.iter().zip(written) {
                    reports[*pos].contacts_updated += usize::from(w);
                }
            }
            Err(e) if e.is_unavailable() => return Err(e),
            Err(e) => {
                tracing::info!(error = %e, "customers learned together were refused; each alone");
                for (pos, who, s) in &list {
                    let mut observed = false;
                    let outcome = async {
                        observed = db
                            .observe_identity(org_id, &identity(who), now_ms())
                            .await?
                            .is_some();
                        Ok::<(), StoreError>(())
                    };
                    let key = who
                        .user_id
                        .clone()
                        .or_else(|| who.username.clone())
                        .unwrap_or_default();
                    let report = &mut reports[*pos];
                    isolated(report, "identity", key, &s.raw, outcome).await?;
                    report.contacts_updated += usize::from(observed);
                }
            }
        }
    }
    Ok(())
}
