//! The inbound messages of many notifications applied together ([`apply_messages_together`]).
//!
//! Applying one message alone is about ten round trips (its customer, conversation, reply
//! target, the message and its event, each a statement or a transaction of their own), so
//! the inbox spent its time waiting on the database. Here the plain messages (anything but
//! an edit, a deletion, a change of identifiers or the network's notice) of the claimed
//! notifications, in the order they arrived, form runs written in a few statements: each
//! customer observed once (the latest time, the first name), each conversation created or
//! touched once with the latest time, the reactions' and replies' targets read at once,
//! the messages inserted together with their `message.received` events in one transaction,
//! the media downloads queued together. The rest is applied one by one as before
//! ([`super::inbound::store`]), in order with the runs:
//!
//! * an edit or deletion waits until the run before it is written (its original may be in
//!   it), and is applied before any later message that it concerns (the original arriving
//!   after it, a reaction or reply to that original): such a message ends the run first;
//! * a change of identifiers, the network's notice and a message without sender are
//!   applied where they are, after the run before them;
//! * a message whose wamid is already in the run (the network's repeat) starts a new one.
//!
//! So every message ends as it would one by one: unique by wamid, customers matched by
//! BSUID then phone (created, merged or given new identifiers by the one-by-one path, which
//! the run falls back to for them), times only moving forward, the same events. A run the
//! database refuses is applied again one message at a time, so one refused message does not
//! fail the others (its writes so far are idempotent).

use std::collections::{BTreeMap, HashMap, HashSet};

use tern_cloudapi::{InboundContent, InboundMessage, MessagesValue};
use tern_domain::{new_id, time::now_ms};
use tern_store::{Db, InboundSeen, Inserted, ReplyTo, StoreError};
use uuid::Uuid;

use super::inbound::{self, Parts};
use super::statuses::{Received, log_errors};
use super::{Orgs, Report, identity, isolated, number_org, parse};
use crate::events;

/// Messages written together at most (bounded transactions and statements).
const RUN: usize = 500;

/// Applies the inbound messages of the notifications of `items` that carry messages (and
/// no template updates), runs of plain messages together (see the module's docs), then
/// their statuses as [`super::apply_received`] does. Returns each item's report at its
/// index, `None` for an item left to [`super::apply_received`]. `Err` only when the
/// database cannot be reached.
pub async fn apply_messages_together(
    db: &Db,
    items: &[Received<'_>],
) -> Result<Vec<Option<Report>>, StoreError> {
    let mut out = vec![None; items.len()];
    let parsed: Vec<(usize, tern_cloudapi::Notification)> = items
        .iter()
        .enumerate()
        .filter_map(|(i, item)| {
            let n = parse(item.body).ok()?;
            carries_messages(&n).then_some((i, n))
        })
        .collect();
    if parsed.is_empty() {
        return Ok(out);
    }
    let mut reports = vec![Report::default(); parsed.len()];
    let mut orgs = Orgs::new();
    let mut ops = Vec::new();
    let mut values = Vec::new();
    for (pos, (_, n)) in parsed.iter().enumerate() {
        for (_waba, value) in n.messages_values() {
            log_errors(value);
            let pnid = value.metadata.phone_number_id.as_deref();
            let Some(org) = number_org(db, &mut orgs, pnid, &mut reports[pos]).await? else {
                continue;
            };
            let pnid = pnid.unwrap_or_default();
            ops.extend(value.messages.iter().map(|m| Op {
                pos,
                org,
                pnid,
                value,
                m,
            }));
            values.push((pos, org, value));
        }
    }
    let mut pending = Pending::default();
    for op in ops {
        match kind(&op) {
            Kind::Plain => {
                if pending.must_end_before(&op) {
                    pending.flush(db, &mut reports).await?;
                }
                pending.push(op);
            }
            Kind::AfterRun(original) => {
                pending.originals.insert(original);
                pending.after.push(op);
            }
            Kind::InPlace => {
                pending.flush(db, &mut reports).await?;
                one(db, &op, &mut reports).await?;
            }
        }
    }
    pending.flush(db, &mut reports).await?;
    // The statuses of each notification after its messages, as one by one.
    for (pos, org, value) in values {
        let received_at = items[parsed[pos].0].received_at;
        super::apply_value_statuses(db, org, value, received_at, &mut reports[pos]).await?;
    }
    for ((i, _), report) in parsed.iter().zip(reports) {
        out[*i] = Some(report);
    }
    Ok(out)
}

/// Whether a notification carries inbound messages and no template updates.
fn carries_messages(n: &tern_cloudapi::Notification) -> bool {
    n.messages_values().any(|(_, v)| !v.messages.is_empty())
        && n.template_updates().next().is_none()
        && n.template_category_updates().next().is_none()
}

/// One inbound message, with the notification (its report's index) and number it came in.
struct Op<'a> {
    pos: usize,
    org: Uuid,
    pnid: &'a str,
    value: &'a MessagesValue,
    m: &'a InboundMessage,
}

impl Op<'_> {
    /// The wamids of the messages it reacts or replies to.
    fn targets(&self) -> impl Iterator<Item = &str> {
        let reacted = match &self.m.content {
            InboundContent::Reaction { message_id, .. } => message_id.as_deref(),
            _ => None,
        };
        reacted.into_iter().chain(self.m.reply_to_wamid())
    }
}

/// How a message is applied.
enum Kind<'a> {
    /// In a run.
    Plain,
    /// One by one after the run before it (an edit or deletion of this wamid).
    AfterRun(&'a str),
    /// One by one, where it is.
    InPlace,
}

fn kind<'a>(op: &Op<'a>) -> Kind<'a> {
    match &op.m.content {
        InboundContent::Edit {
            original_id: Some(original),
            ..
        }
        | InboundContent::Revoke {
            original_id: Some(original),
        } => return Kind::AfterRun(original),
        InboundContent::System { .. } => return Kind::InPlace,
        _ => {}
    }
    if op.m.identity_change().is_some() || !identity(&op.value.sender(op.m)).is_known() {
        return Kind::InPlace;
    }
    Kind::Plain
}

/// The run being gathered and the edits and deletions that follow it.
#[derive(Default)]
struct Pending<'a> {
    run: Vec<Op<'a>>,
    wamids: HashSet<&'a str>,
    after: Vec<Op<'a>>,
    /// The wamids `after` edits or deletes.
    originals: HashSet<&'a str>,
}

impl<'a> Pending<'a> {
    /// Whether `op` must come after what is pending: it concerns a message an edit or
    /// deletion waiting after the run is about, repeats a wamid of the run, came in on
    /// another number, or the run is full.
    fn must_end_before(&self, op: &Op<'a>) -> bool {
        let about_after = self.originals.contains(op.m.id.as_str())
            || op.targets().any(|t| self.originals.contains(t));
        let other_number = self
            .run
            .first()
            .is_some_and(|first| (first.org, first.pnid) != (op.org, op.pnid));
        about_after
            || other_number
            || self.wamids.contains(op.m.id.as_str())
            || self.run.len() >= RUN
    }

    fn push(&mut self, op: Op<'a>) {
        self.wamids.insert(op.m.id.as_str());
        self.run.push(op);
    }

    /// Writes the run, then applies what waited after it.
    async fn flush(&mut self, db: &Db, reports: &mut [Report]) -> Result<(), StoreError> {
        let run = std::mem::take(&mut self.run);
        self.wamids.clear();
        if !run.is_empty() {
            apply_run(db, &run, reports).await?;
        }
        let after = std::mem::take(&mut self.after);
        apply_after(db, &after, reports).await?;
        self.originals.clear();
        Ok(())
    }
}

/// Applies edits and deletions in order: those of distinct messages of one organisation
/// together (`Tx::change_inbound_messages`, one transaction with their timeline entries and
/// `message.updated` events); each of a message Tern does not hold yet (stored as the
/// original's row) alone after them (it concerns no other of them); a second change of a
/// message in the next transaction; refused, each alone.
async fn apply_after(db: &Db, ops: &[Op<'_>], reports: &mut [Report]) -> Result<(), StoreError> {
    let mut rest = ops;
    while !rest.is_empty() {
        match changes_held(db, rest).await {
            Ok((0, _)) => {
                one(db, &rest[0], reports).await?;
                rest = &rest[1..];
            }
            Ok((done, alone)) => {
                for (i, op) in rest[..done].iter().enumerate() {
                    if alone.contains(&i) {
                        one(db, op, reports).await?;
                    } else {
                        reports[op.pos].messages_updated += 1;
                    }
                }
                rest = &rest[done..];
            }
            Err(e) if e.is_unavailable() => return Err(e),
            Err(e) => {
                tracing::info!(error = %e, changes = rest.len(),
                    "edits and deletions written together were refused; each alone");
                for op in rest {
                    one(db, op, reports).await?;
                }
                return Ok(());
            }
        }
    }
    Ok(())
}

/// The leading changes of `ops` of distinct messages of one organisation, in one
/// transaction: how many, and the indices of those whose message Tern does not hold.
async fn changes_held(db: &Db, ops: &[Op<'_>]) -> Result<(usize, Vec<usize>), StoreError> {
    let Some(first) = ops.first() else {
        return Ok((0, Vec::new()));
    };
    let now = now_ms();
    let org = first.org;
    let mut originals = HashSet::new();
    let mut changes = Vec::new();
    for op in ops {
        let Some(change) = inbound::Change::of(op.m, now) else {
            break;
        };
        if op.org != org || !originals.insert(change.original.clone()) {
            break;
        }
        changes.push(change);
    }
    if changes.is_empty() {
        return Ok((0, Vec::new()));
    }
    let list: Vec<_> = changes.iter().map(inbound::Change::as_store).collect();
    let mut tx = db.begin().await?;
    let touched = tx.change_inbound_messages(org, &list, now).await?;
    let mut updated = Vec::new();
    let mut alone = Vec::new();
    for (i, (t, change)) in touched.into_iter().zip(&changes).enumerate() {
        match t {
            Some(t) if t.changed => {
                tx.add_timeline(t.message.id, now, &change.detail);
                updated.push(t.message);
            }
            Some(_) => {}
            None => alone.push(i),
        }
    }
    let updated: Vec<&tern_store::Message> = updated.iter().collect();
    events::messages_updated(&mut tx, org, &updated).await?;
    tx.commit().await?;
    Ok((changes.len(), alone))
}

/// Applies one message alone ([`inbound::store`]), a refusal listed in its report.
async fn one(db: &Db, op: &Op<'_>, reports: &mut [Report]) -> Result<(), StoreError> {
    let mut part = Report::default();
    let outcome = inbound::store(db, op.org, op.pnid, op.value, op.m, &mut part);
    let report = &mut reports[op.pos];
    isolated(report, "message", op.m.id.clone(), &op.m.raw, outcome).await?;
    report.add(&part);
    Ok(())
}

/// Writes a run (one organisation's number); refused, each message alone.
async fn apply_run(db: &Db, run: &[Op<'_>], reports: &mut [Report]) -> Result<(), StoreError> {
    match write_run(db, run, reports).await {
        Ok(inserted) => {
            for (op, inserted) in run.iter().zip(inserted) {
                let report = &mut reports[op.pos];
                if inserted == Inserted::Duplicate {
                    report.inbound_duplicates += 1;
                } else {
                    metrics::counter!("tern_network_events_total", "kind" => "inbound")
                        .increment(1);
                    report.inbound_stored += 1;
                }
            }
            Ok(())
        }
        Err(e) if e.is_unavailable() => Err(e),
        Err(e) => {
            tracing::info!(error = %e, messages = run.len(),
                "inbound messages written together were refused; each alone");
            for op in run {
                one(db, op, reports).await?;
            }
            Ok(())
        }
    }
}

/// The writes of a run; what inserting each message did, at its index. Contacts merged on
/// the way are counted in `reports` (a refused run's fallback finds them merged).
async fn write_run(
    db: &Db,
    run: &[Op<'_>],
    reports: &mut [Report],
) -> Result<Vec<Inserted>, StoreError> {
    let Some(first) = run.first() else {
        return Ok(Vec::new());
    };
    let (org, pnid) = (first.org, first.pnid);
    let now = now_ms();
    // The window is computed from the network's timestamp, not from arrival time.
    let sent: Vec<i64> = run
        .iter()
        .map(|op| {
            op.m.timestamp
                .map(|s| s.saturating_mul(1000))
                .unwrap_or(now)
        })
        .collect();
    let senders: Vec<_> = run.iter().map(|op| op.value.sender(op.m)).collect();

    // Each customer once: the first name the run gives, the latest time.
    let mut customer_of = Vec::with_capacity(run.len());
    let mut seen: Vec<InboundSeen<'_>> = Vec::new();
    let mut first_op: Vec<usize> = Vec::new();
    let mut index: HashMap<_, usize> = HashMap::new();
    for (i, sender) in senders.iter().enumerate() {
        let who = identity(sender);
        let name = sender
            .profile_name
            .as_deref()
            .filter(|n| !n.trim().is_empty());
        let key = (who.wa_id, who.user_id, who.parent_user_id, who.username);
        let c = *index.entry(key).or_insert_with(|| {
            seen.push(InboundSeen {
                who,
                profile_name: None,
                network_ts: sent[i],
            });
            first_op.push(i);
            seen.len() - 1
        });
        let s = &mut seen[c];
        s.network_ts = s.network_ts.max(sent[i]);
        s.profile_name = s.profile_name.or(name);
        customer_of.push(c);
    }
    let known = db.record_inbound_known(org, &seen, now).await?;
    let mut contacts: Vec<Uuid> = Vec::with_capacity(seen.len());
    // Contacts merged into another on the way: the run's customers of one are the
    // survivor's (one by one, their messages would have moved to it).
    let mut moved: HashMap<Uuid, Uuid> = HashMap::new();
    for ((s, known), first) in seen.iter().zip(known).zip(first_op) {
        let id = match known {
            Some(id) => id,
            // To create, merge or learn from: locked, as one by one.
            None => {
                let observed = db
                    .record_inbound(org, &s.who, s.profile_name, s.network_ts, new_id(), now)
                    .await?;
                if let Some(merged) = observed.merged {
                    reports[run[first].pos].contacts_updated += 1;
                    moved.insert(merged, observed.contact.id);
                    for c in contacts.iter_mut().filter(|c| **c == merged) {
                        *c = observed.contact.id;
                    }
                }
                observed.contact.id
            }
        };
        let mut id = id;
        while let Some(next) = moved.get(&id) {
            id = *next;
        }
        contacts.push(id);
    }

    // Each conversation once, with the latest time.
    let mut latest: BTreeMap<Uuid, (Uuid, i64)> = BTreeMap::new();
    for (i, c) in customer_of.iter().enumerate() {
        let entry = latest.entry(contacts[*c]).or_insert((new_id(), sent[i]));
        entry.1 = entry.1.max(sent[i]);
    }
    let conversations = db
        .touch_inbound_conversations(org, pnid, &latest, now)
        .await?;

    // The messages reacted and replied to: those Tern holds, else one earlier in the run.
    let targets: Vec<&str> = run
        .iter()
        .flat_map(Op::targets)
        .collect::<HashSet<_>>()
        .into_iter()
        .collect();
    let held = if targets.is_empty() {
        HashMap::new()
    } else {
        db.message_ids_by_wamids(org, &targets).await?
    };
    let mut earlier: HashMap<&str, Uuid> = HashMap::new();
    let mut rows = Vec::with_capacity(run.len());
    for (i, op) in run.iter().enumerate() {
        let contact = contacts[customer_of[i]];
        let conversation = *conversations.get(&contact).ok_or(StoreError::NotFound)?;
        let target = |w: &str| held.get(w).or_else(|| earlier.get(w)).copied();
        let mut parts = Parts::of(op.m, sent[i]);
        if parts.reaction {
            let reacted = parts.reacted_wamid().and_then(target);
            parts.set_reacted(reacted);
        }
        let reply_to = op.m.reply_to_wamid().map(|w| ReplyTo {
            message_id: target(w),
            wamid: w.to_string(),
        });
        let row = parts.into_row(
            (org, pnid, op.m),
            (conversation, contact),
            reply_to,
            (sent[i], now),
        );
        earlier.insert(op.m.id.as_str(), row.id);
        rows.push(row);
    }

    let mut tx = db.begin().await?;
    let inserted = tx.insert_inbound_messages(&rows).await?;
    let new: Vec<_> = rows
        .iter()
        .zip(&inserted)
        .filter(|(_, i)| **i == Inserted::New)
        .map(|(row, _)| row)
        .collect();
    events::messages_received(&mut tx, org, &new).await?;
    tx.commit().await?;
    // After the messages, also for those stored before (as one by one).
    let jobs: Vec<_> = run
        .iter()
        .filter_map(|op| inbound::media_job(org, pnid, op.m))
        .collect();
    if !jobs.is_empty() {
        db.enqueue_inbound_media_many(&jobs, now).await?;
    }
    Ok(inserted)
}
