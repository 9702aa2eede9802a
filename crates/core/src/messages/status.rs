//! The only writer of a message's status (CORE.md rule 3). Every change goes through here:
//!
//! | who | what | function |
//! |---|---|---|
//! | dispatcher | claim: `accepted` → `sending` | [`claim`] |
//! | dispatcher | the send's outcome: `sent` (wamid) or `failed` (+ wallet refund) | [`record_send`] |
//! | network inbox | a status webhook: `sent` / `delivered` / `read` / `failed` | [`apply_report`] |
//! | dispatch sweep | unknown outcome past its deadline: `failed` | [`expire_unknown`] |
//! | campaign worker | a queued campaign message at the campaign's expiry: `failed` (+ refund) | [`expire_campaign_queue`] |
//!
//! A report is a decision over the current row, never a blind write: the domain's monotonic
//! rule ([`message::apply`]) decides, and the write is a compare-and-set on the status and
//! `updated_at` it was decided from (re-read and decide again when another writer got there
//! first). So statuses only move forward, a late report still fills its `*_at` with the
//! earliest time of that step, and `failed` is terminal.
//!
//! Each decided change is written in a transaction ([`tern_store::Tx`]) that the
//! `message.status` event reporting it ([`crate::events::message_status`]) joins, so an
//! event exists exactly when its change does; a campaign message's change moves its
//! recipient between the campaign's progress counters in that transaction too. A failure that gives the
//! wallet debit back commits the refund in that same transaction.

use std::collections::{BTreeMap, HashMap};

use tern_domain::campaign::{Bucket, ReasonKind};
use tern_domain::message::{self, Precision, Pricing, Status, Times};
use tern_domain::time::now_ms;
use tern_domain::timeline::{self, Detail};
use tern_store::{
    CountMove, Db, DispatchClaim, DispatchCompletion, DispatchItem, DispatchLease, DispatchSweep,
    DispatchWrite, Message, StatusChange, StatusWrite, StoreError, Tx, counter_shard,
};
use uuid::Uuid;

use super::failure::Failure;
use crate::events;

/// Compare-and-set rounds against concurrent writers before giving up.
const CAS_ROUNDS: usize = 8;

/// A step reported for a message.
#[derive(Debug, Clone, PartialEq)]
pub struct Report<'a> {
    pub status: Status,
    /// When it happened (epoch ms; raised to the message's acceptance, which a step cannot
    /// precede).
    pub at: i64,
    /// The network reports whole seconds; Tern's own clock milliseconds.
    pub precision: Precision,
    /// The network's id, stored if none is yet.
    pub wamid: Option<&'a str>,
    /// Why, when `status` is `failed`.
    pub failure: Option<&'a Failure>,
    /// A network report's arrival (then it is a `status` entry of the timeline, applied or
    /// not); `None` for Tern's own steps (the dispatcher's outcome).
    pub seen: Option<Seen<'a>>,
    /// The dispatch attempt that ended in this step (its timeline entry), if any.
    pub attempt: Option<&'a Detail>,
}

/// How a network status report reached Tern.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Seen<'a> {
    /// When its notification arrived (epoch ms).
    pub received_at: i64,
    /// The network's pricing of the report, if it carried one: it replaces the message's
    /// (the latest report's is kept), whether or not the report moves the status.
    pub pricing: Option<&'a Pricing>,
}

/// The timeline entries of `r` about `msg` (as it was before), recorded at `at` in `tx`:
/// the attempt that ended in it, the network's report (applied or not, and why) and the
/// failure it caused. The event that reports the change follows (emitted after).
fn record_entries(
    tx: &mut Tx,
    msg: &Message,
    r: &Report<'_>,
    change: Option<&StatusChange>,
    at: i64,
) {
    if let Some(attempt) = r.attempt {
        tx.add_timeline(msg.id, at, attempt);
    }
    // Applied: the report changed the status or one of the `*_at` (a wamid alone is not).
    let changed = change.is_some_and(|c| {
        c.status != msg.status
            || c.sent_at != msg.sent_at
            || c.delivered_at != msg.delivered_at
            || c.read_at != msg.read_at
            || c.failed_at != msg.failed_at
    });
    if let Some(seen) = r.seen {
        let detail = Detail::Status {
            status: r.status,
            network_timestamp: Some(timeline::time(r.at)),
            received_at: Some(timeline::time(seen.received_at)),
            pricing: seen.pricing.and_then(|p| serde_json::to_value(p).ok()),
            applied: changed,
            reason: timeline::not_applied(msg.status, r.status, changed),
        };
        tx.add_timeline(msg.id, at, &detail);
    }
    if let Some(c) = change
        && c.status == Status::Failed
        && msg.status != Status::Failed
        && let Some(f) = &c.failure
    {
        tx.add_timeline(msg.id, at, &Detail::failed(f));
    }
}

/// The write a report makes on `msg`, if any (the domain's rule decides).
fn decide(msg: &Message, r: &Report<'_>) -> Option<(StatusChange, bool)> {
    let at = r.at.max(msg.created_at);
    let times = Times {
        sent_at: msg.sent_at,
        delivered_at: msg.delivered_at,
        read_at: msg.read_at,
        failed_at: msg.failed_at,
    };
    let o = message::apply_with(msg.status, times, r.status, at, r.precision);
    let wamid_new = r.wamid.is_some() && msg.wamid.is_none();
    // A report's pricing is written with its status in the same statement; one that only
    // brings another price is a write of its own kind (like a wamid alone).
    let pricing = r
        .seen
        .and_then(|s| s.pricing)
        .filter(|p| msg.pricing.as_ref() != Some(*p));
    if !o.changed && !wamid_new && pricing.is_none() {
        return None;
    }
    let became_failed = o.status == Status::Failed && msg.status != Status::Failed;
    let (failure_code, failure) = match r.failure {
        Some(f) if became_failed => (Some(f.code.clone()), Some(f.clone())),
        _ => (msg.failure_code.clone(), msg.failure.clone()),
    };
    Some((
        StatusChange {
            status: o.status,
            wamid: r.wamid.map(str::to_string),
            sent_at: o.times.sent_at,
            delivered_at: o.times.delivered_at,
            read_at: o.times.read_at,
            failed_at: o.times.failed_at,
            failure_code,
            failure,
            pricing: pricing.cloned().or_else(|| msg.pricing.clone()),
        },
        became_failed,
    ))
}

/// What applying a report did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Applied {
    /// Written.
    Changed,
    /// Nothing to change (a duplicate, or a step the message already passed with an
    /// earlier time).
    Unchanged,
    /// No such message (or another organisation's).
    UnknownMessage,
}

/// Applies a network status report to the organisation's message with `wamid` (or, when
/// its send answer was lost, Tern's id from `biz_opaque_callback_data`).
pub async fn apply_report(
    db: &Db,
    org_id: Uuid,
    wamid: &str,
    tern_id: Option<Uuid>,
    report: &Report<'_>,
) -> Result<Applied, StoreError> {
    for _ in 0..CAS_ROUNDS {
        let Some(msg) = db.find_message_for_status(wamid, tern_id).await? else {
            return Ok(Applied::UnknownMessage);
        };
        if msg.org_id != org_id {
            tracing::warn!(wamid, "status for another organisation's message ignored");
            return Ok(Applied::UnknownMessage);
        }
        let Some((change, _)) = decide(&msg, report) else {
            if report.seen.is_some() || report.attempt.is_some() {
                let mut tx = db.begin().await?;
                record_entries(&mut tx, &msg, report, None, now_ms());
                tx.commit().await?;
            }
            return Ok(Applied::Unchanged);
        };
        let mut tx = db.begin().await?;
        let at = now_ms();
        if tx
            .status_writes()
            .update_message_status(msg.id, msg.status, msg.updated_at, &change, at)
            .await?
        {
            campaign_progress(&mut tx, &msg, change.status, change.failure_code.as_deref()).await?;
            record_entries(&mut tx, &msg, report, Some(&change), at);
            events::message_status(
                &mut tx,
                msg.org_id,
                msg.status,
                change.status,
                msg.id,
                || written(&msg, &change),
            )
            .await?;
            tx.commit().await?;
            return Ok(Applied::Changed);
        }
    }
    Err(contention())
}

/// A status report about the message with `wamid` (see [`apply_report`]).
#[derive(Debug, Clone)]
pub struct Reported<'a> {
    pub wamid: &'a str,
    pub tern_id: Option<Uuid>,
    pub report: Report<'a>,
}

/// Applies a notification's status reports for one organisation, in order, as
/// [`apply_report`] would one by one, with one read of the messages and one transaction:
/// the network sends a busy number's statuses in batches (often a message's `sent`,
/// `delivered` and `read` together), and one write per message and one commit per batch
/// cost a fraction of a transaction per report. Each step still has its own
/// `message.status` event. A message another writer moved meanwhile (and one found only by
/// Tern's id) goes through [`apply_report`] afterwards.
pub async fn apply_reports(
    db: &Db,
    org_id: Uuid,
    reports: &[Reported<'_>],
) -> Result<Vec<Applied>, StoreError> {
    let mut results = vec![Applied::UnknownMessage; reports.len()];
    let wamids: Vec<&str> = reports.iter().map(|r| r.wamid).collect();
    let found = db.find_messages_by_wamids(&wamids).await?;
    let by_wamid: HashMap<&str, &Message> = found
        .iter()
        .filter_map(|m| m.wamid.as_deref().map(|w| (w, m)))
        .collect();
    // Each message's steps in report order, decided over the message as the previous step
    // left it; ordered by id so concurrent batches lock rows in one order.
    let mut plans: BTreeMap<Uuid, Plan<'_>> = BTreeMap::new();
    let mut alone = Vec::new();
    for (i, r) in reports.iter().enumerate() {
        let Some(msg) = by_wamid.get(r.wamid) else {
            alone.push(i);
            continue;
        };
        if msg.org_id != org_id {
            tracing::warn!(
                wamid = r.wamid,
                "status for another organisation's message ignored"
            );
            continue;
        }
        let plan = plans.entry(msg.id).or_insert_with(|| Plan {
            original: msg,
            now: (*msg).clone(),
            reports: Vec::new(),
            steps: Vec::new(),
        });
        plan.reports.push(i);
        match decide(&plan.now, &r.report) {
            Some((change, _)) => {
                let before = plan.now.clone();
                plan.now = written(&plan.now, &change);
                plan.steps.push((i, before, Some(change)));
            }
            None => {
                results[i] = Applied::Unchanged;
                plan.steps.push((i, plan.now.clone(), None));
            }
        }
    }
    let mut tx = db.begin().await?;
    let at = now_ms();
    let mut counts = Counts::default();
    let mut events = events::StatusEvents::new(org_id);
    // Each message's last change, written by one statement for all (in id order).
    let writes: Vec<StatusWrite<'_>> = plans
        .values()
        .filter_map(|plan| {
            plan.last().map(|change| StatusWrite {
                id: plan.original.id,
                expected_status: plan.original.status,
                expected_updated_at: plan.original.updated_at,
                change,
            })
        })
        .collect();
    let mut applied = tx
        .status_writes()
        .update_message_statuses(&writes, at)
        .await?
        .into_iter();
    for plan in plans.values() {
        let o = plan.original;
        let Some(last) = plan.last() else {
            // Nothing to write: the reports are entries all the same.
            for (i, before, _) in &plan.steps {
                record_entries(&mut tx, before, &reports[*i].report, None, at);
            }
            continue;
        };
        if !applied.next().unwrap_or(false) {
            // Moved meanwhile: every report about it is decided again over the new row.
            alone.extend(&plan.reports);
            continue;
        }
        counts.add(o, last.status, last.failure_code.as_deref());
        for (i, before, change) in &plan.steps {
            record_entries(&mut tx, before, &reports[*i].report, change.as_ref(), at);
            let Some(change) = change else { continue };
            events
                .emit(&mut tx, before.status, change.status, o.id, || {
                    written(before, change)
                })
                .await?;
            results[*i] = Applied::Changed;
        }
    }
    counts.write(&mut tx).await?;
    tx.commit().await?;
    alone.sort_unstable();
    for i in alone {
        let r = &reports[i];
        results[i] = apply_report(db, org_id, r.wamid, r.tern_id, &r.report).await?;
    }
    Ok(results)
}

/// One message's steps within [`apply_reports`].
struct Plan<'m> {
    original: &'m Message,
    /// The message as the steps so far leave it.
    now: Message,
    /// Every report about it (those that change nothing too).
    reports: Vec<usize>,
    /// Every report in order: `(report index, the message before it, its change)`.
    steps: Vec<(usize, Message, Option<StatusChange>)>,
}

impl Plan<'_> {
    /// The change of its last step that writes one, if any.
    fn last(&self) -> Option<&StatusChange> {
        self.steps.iter().rev().find_map(|(_, _, c)| c.as_ref())
    }
}

/// What recording a send's outcome did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Recorded {
    /// Written; `refunded_minor` > 0 when a template's wallet debit was given back.
    Written { refunded_minor: i64 },
    /// The claim is no longer this worker's (claimed again, or the message is gone).
    Stale,
}

/// Records the final outcome of a dispatch claim: `sent` with the network's wamid, or
/// `failed` (every failure the dispatcher decides is one where the network did not take
/// the message, so a template's wallet debit is refunded in the same transaction).
pub async fn record_send(
    db: &Db,
    item: &DispatchItem,
    report: &Report<'_>,
) -> Result<Recorded, StoreError> {
    let lease = item.lease();
    for _ in 0..CAS_ROUNDS {
        let Some(msg) = db.get_message(item.org_id, item.id).await? else {
            return Ok(Recorded::Stale);
        };
        let at = now_ms();
        let (change, became_failed) = decide(&msg, report).unwrap_or_else(|| {
            // Nothing to change, but the claim still has to leave the queue.
            (unchanged(&msg), false)
        });
        let mut tx = db.begin().await?;
        match tx
            .status_writes()
            .complete_dispatch(item.id, &lease, msg.status, msg.updated_at, &change, at)
            .await?
        {
            DispatchWrite::Applied => {
                let refunded_minor = if became_failed {
                    tx.status_writes().refund_message_debit(item.id, at).await?
                } else {
                    0
                };
                campaign_progress(&mut tx, &msg, change.status, change.failure_code.as_deref())
                    .await?;
                record_entries(&mut tx, &msg, report, Some(&change), at);
                events::message_status(
                    &mut tx,
                    msg.org_id,
                    msg.status,
                    change.status,
                    msg.id,
                    || written(&msg, &change),
                )
                .await?;
                tx.commit().await?;
                return Ok(Recorded::Written { refunded_minor });
            }
            DispatchWrite::LeaseLost => return Ok(Recorded::Stale),
            DispatchWrite::Moved => continue,
        }
    }
    Err(contention())
}

/// [`record_send`] for several claims at once, with one read and one transaction (the
/// dispatcher's sends finish in bursts; one commit for many outcomes is what keeps a busy
/// number at its pace). Claims are written in id order and the campaign counters after every
/// row, in key order, as [`apply_reports`] does. A message another writer moved meanwhile
/// goes through [`record_send`] afterwards.
pub async fn record_sends(
    db: &Db,
    outcomes: &[(&DispatchItem, Report<'_>)],
) -> Result<Vec<Recorded>, StoreError> {
    let mut results = vec![Recorded::Stale; outcomes.len()];
    let ids: Vec<Uuid> = outcomes.iter().map(|(item, _)| item.id).collect();
    let found = db.get_messages_by_ids(&ids).await?;
    let by_id: HashMap<Uuid, &Message> = found.iter().map(|m| (m.id, m)).collect();
    let mut order: Vec<usize> = (0..outcomes.len()).collect();
    order.sort_by_key(|&i| outcomes[i].0.id);
    let mut counts = Counts::default();
    let mut events: HashMap<Uuid, events::StatusEvents> = HashMap::new();
    let mut again = Vec::new();
    let at = now_ms();
    // Decided first, written in one go (one round trip on PostgreSQL), then their effects.
    let mut decided = Vec::with_capacity(outcomes.len());
    for i in order {
        let (item, report) = &outcomes[i];
        let Some(msg) = by_id.get(&item.id).filter(|m| m.org_id == item.org_id) else {
            continue;
        };
        let (change, became_failed) =
            decide(msg, report).unwrap_or_else(|| (unchanged(msg), false));
        decided.push((i, *msg, change, became_failed));
    }
    let leases: Vec<DispatchLease> = decided
        .iter()
        .map(|(i, ..)| outcomes[*i].0.lease())
        .collect();
    let completions: Vec<DispatchCompletion<'_>> = decided
        .iter()
        .zip(&leases)
        .map(|((_, msg, change, _), lease)| DispatchCompletion {
            id: msg.id,
            lease,
            expected_status: msg.status,
            expected_updated_at: msg.updated_at,
            change,
        })
        .collect();
    let mut tx = db.begin().await?;
    let writes = tx
        .status_writes()
        .complete_dispatches(&completions, at)
        .await?;
    for ((i, msg, change, became_failed), write) in decided.iter().zip(writes) {
        match write {
            DispatchWrite::Applied => {}
            DispatchWrite::LeaseLost => continue,
            DispatchWrite::Moved => {
                again.push(*i);
                continue;
            }
        }
        let refunded_minor = if *became_failed {
            tx.status_writes().refund_message_debit(msg.id, at).await?
        } else {
            0
        };
        counts.add(msg, change.status, change.failure_code.as_deref());
        record_entries(&mut tx, msg, &outcomes[*i].1, Some(change), at);
        events
            .entry(msg.org_id)
            .or_insert_with(|| events::StatusEvents::new(msg.org_id))
            .emit(&mut tx, msg.status, change.status, msg.id, || {
                written(msg, change)
            })
            .await?;
        results[*i] = Recorded::Written { refunded_minor };
    }
    counts.write(&mut tx).await?;
    tx.commit().await?;
    for i in again {
        let (item, report) = &outcomes[i];
        results[i] = record_send(db, item, report).await?;
    }
    Ok(results)
}

/// Campaign counter moves and failure codes of a batch, written after its message rows in
/// key order (a lock order no other writer inverts).
#[derive(Default)]
struct Counts {
    moves: BTreeMap<(Uuid, i64, Bucket, Bucket), i64>,
    failures: BTreeMap<(Uuid, String), i64>,
}

impl Counts {
    /// `before` moved to `after` (failing with `failure_code` when `after` is `failed`).
    fn add(&mut self, before: &Message, after: Status, failure_code: Option<&str>) {
        let Some(campaign_id) = before.campaign_id else {
            return;
        };
        let (from, to) = (Bucket::of_message(before.status), Bucket::of_message(after));
        if from == to {
            return;
        }
        *self
            .moves
            .entry((campaign_id, counter_shard(before.id), from, to))
            .or_default() += 1;
        if to == Bucket::Failed {
            let code = failure_code.unwrap_or("unknown");
            *self
                .failures
                .entry((campaign_id, code.to_string()))
                .or_default() += 1;
        }
    }

    async fn write(self, tx: &mut Tx) -> Result<(), StoreError> {
        let moves: Vec<CountMove> = self
            .moves
            .into_iter()
            .map(|((campaign_id, shard, from, to), n)| CountMove {
                campaign_id,
                shard,
                from,
                to,
                n,
            })
            .collect();
        tx.move_campaign_counts(&moves).await?;
        for ((campaign_id, code), n) in self.failures {
            tx.add_campaign_reason(campaign_id, ReasonKind::Failed, &code, n)
                .await?;
        }
        Ok(())
    }
}

/// A campaign message's recipient moves to its new status's bucket in the campaign's
/// progress counters (and a failure's code is counted), in the status change's transaction.
async fn campaign_progress(
    tx: &mut Tx,
    before: &Message,
    after: Status,
    failure_code: Option<&str>,
) -> Result<(), StoreError> {
    let mut counts = Counts::default();
    counts.add(before, after, failure_code);
    counts.write(tx).await
}

/// The message as `change` left it (the event's `data`: the Message at that moment).
fn written(msg: &Message, change: &StatusChange) -> Message {
    Message {
        status: change.status,
        wamid: msg.wamid.clone().or_else(|| change.wamid.clone()),
        sent_at: change.sent_at,
        delivered_at: change.delivered_at,
        read_at: change.read_at,
        failed_at: change.failed_at,
        failure_code: change.failure_code.clone(),
        failure: change.failure.clone(),
        pricing: change.pricing.clone().or_else(|| msg.pricing.clone()),
        ..msg.clone()
    }
}

fn unchanged(msg: &Message) -> StatusChange {
    StatusChange {
        status: msg.status,
        wamid: None,
        sent_at: msg.sent_at,
        delivered_at: msg.delivered_at,
        read_at: msg.read_at,
        failed_at: msg.failed_at,
        failure_code: msg.failure_code.clone(),
        failure: msg.failure.clone(),
        pricing: msg.pricing.clone(),
    }
}

/// Claims due messages for sending: `accepted` → `sending` (see [`Db::claim_dispatch`]).
pub async fn claim(db: &Db, claim: &DispatchClaim<'_>) -> Result<Vec<DispatchItem>, StoreError> {
    db.status_writes().claim_dispatch(claim).await
}

/// The queue's housekeeping (as `tern_store::testkit::sweep_dispatch` runs it): messages whose send outcome
/// stayed unknown past their deadline, still `sending`, fail with `failure` (the only move
/// the rule allows from `sending` without a report: to `failed`). No refund: the network
/// may have taken them.
pub async fn expire_unknown(
    db: &Db,
    now: i64,
    failure: &Failure,
    limit: i64,
) -> Result<DispatchSweep, StoreError> {
    let (abandoned, released) = db.release_dispatch(now).await?;
    let mut tx = db.begin().await?;
    let expired = tx
        .status_writes()
        .expire_dispatch(now, &failure.code, failure, limit)
        .await?;
    for e in &expired {
        if let Some(m) = tx.get_message(e.org_id, e.id).await? {
            let before = Message {
                status: Status::Sending,
                ..m.clone()
            };
            campaign_progress(&mut tx, &before, m.status, m.failure_code.as_deref()).await?;
            if let Some(f) = &m.failure {
                tx.add_timeline(m.id, now, &Detail::failed(f));
            }
            events::message_status(&mut tx, m.org_id, Status::Sending, m.status, m.id, || {
                m.clone()
            })
            .await?;
        }
    }
    tx.commit().await?;
    Ok(DispatchSweep {
        abandoned,
        released,
        expired,
    })
}

/// A campaign's messages still waiting in the dispatch queue when its `expires_at` passed
/// (up to `limit`, one transaction): each fails with `failure` (`campaign_expired`) and
/// leaves the queue, its wallet debit is refunded (it never reached the network), its
/// recipient ends `expired` rather than `failed` (the campaign's time ran out; the message
/// did not fail at the network) and a `message.status` event reports it. Messages a claim
/// holds at that moment go on to the network. Returns how many ended.
pub async fn expire_campaign_queue(
    db: &Db,
    org_id: Uuid,
    campaign_id: Uuid,
    phone_number_id: &str,
    failure: &Failure,
    now: i64,
    limit: i64,
) -> Result<usize, StoreError> {
    let mut tx = db.begin().await?;
    let before = tx
        .status_writes()
        .fail_queued_campaign_messages(campaign_id, phone_number_id, failure, now, limit)
        .await?;
    if before.is_empty() {
        return Ok(0);
    }
    let report = Report {
        status: Status::Failed,
        at: now,
        precision: Precision::Millis,
        wamid: None,
        failure: Some(failure),
        seen: None,
        attempt: None,
    };
    let mut shards: BTreeMap<i64, i64> = BTreeMap::new();
    let mut events = events::StatusEvents::new(org_id);
    for m in &before {
        // The rule's decision for the row the store wrote (`accepted`/`sending` → `failed`).
        let Some((change, _)) = decide(m, &report) else {
            continue;
        };
        tx.status_writes().refund_message_debit(m.id, now).await?;
        *shards.entry(counter_shard(m.id)).or_default() += 1;
        record_entries(&mut tx, m, &report, Some(&change), now);
        events
            .emit(&mut tx, m.status, change.status, m.id, || {
                written(m, &change)
            })
            .await?;
    }
    let contacts: Vec<Uuid> = before.iter().map(|m| m.contact_id).collect();
    tx.expire_messaged_recipients(campaign_id, &contacts, now)
        .await?;
    let moves: Vec<CountMove> = shards
        .into_iter()
        .map(|(shard, n)| CountMove {
            campaign_id,
            shard,
            from: Bucket::Queued,
            to: Bucket::Expired,
            n,
        })
        .collect();
    tx.move_campaign_counts(&moves).await?;
    tx.commit().await?;
    Ok(before.len())
}

fn contention() -> StoreError {
    StoreError::Conflict {
        constraint: "message_status_contention".into(),
    }
}
