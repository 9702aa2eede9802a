use std::collections::HashSet;
use std::sync::Arc;

use crate::fixtures::{T0, insert_contact, insert_org, phone_number};
use serde_json::json;
use tern_domain::failure::Failure;
use tern_domain::message::{Direction, Status};
use tern_store::{
    Db, DispatchClaim, DispatchCounts, DispatchItem, DispatchLease, DispatchWrite, ExpiredDispatch,
    Message, StatusChange, StoreError,
};
use uuid::Uuid;

/// A dispatch attempt's timeline entry (its content is the caller's; the store writes it).
pub(crate) fn attempt_entry() -> tern_domain::timeline::Detail {
    tern_domain::timeline::Detail::DispatchAttempt {
        attempt: 1,
        outcome: tern_domain::timeline::AttemptOutcome::Retry,
        http_status: Some(400),
        error_code: Some("130429".into()),
        error_message: Some("(#130429) Rate limit hit".into()),
        latency_ms: Some(12),
        next_attempt_at: None,
    }
}

const LEASE: i64 = 10_000;
const GRACE: i64 = 60_000;

/// An organisation with one number ("100") and one contact, and a conversation between them.
pub(crate) struct World {
    pub(crate) org_id: Uuid,
    pub(crate) contact_id: Uuid,
    pub(crate) conversation_id: Uuid,
}

pub(crate) async fn world(db: &Db) -> World {
    let org = insert_org(db).await;
    for pnid in ["100", "200"] {
        db.insert_phone_number(&phone_number(org.id, pnid))
            .await
            .unwrap();
    }
    let contact = insert_contact(db, org.id, "16505551234", T0).await;
    let conversation = db
        .get_or_create_conversation(org.id, contact.id, "100", Uuid::now_v7(), T0)
        .await
        .unwrap();
    World {
        org_id: org.id,
        contact_id: contact.id,
        conversation_id: conversation.id,
    }
}

/// Inserts an accepted outbound text message on number `pnid` and queues it due at `due`.
pub(crate) async fn queued(db: &Db, w: &World, pnid: &str, due: i64) -> Uuid {
    queued_message(db, w, pnid, due, None, None).await
}

/// [`queued`], with `media_id` stored on the message.
async fn queued_with_media(
    db: &Db,
    w: &World,
    pnid: &str,
    due: i64,
    media_id: Option<Uuid>,
) -> Uuid {
    queued_message(db, w, pnid, due, media_id, None).await
}

/// [`queued`], with `media_id` and `campaign_id` stored on the message.
pub(crate) async fn queued_message(
    db: &Db,
    w: &World,
    pnid: &str,
    due: i64,
    media_id: Option<Uuid>,
    campaign_id: Option<Uuid>,
) -> Uuid {
    let conversation_id = if pnid == "100" {
        w.conversation_id
    } else {
        db.get_or_create_conversation(w.org_id, w.contact_id, pnid, Uuid::now_v7(), T0)
            .await
            .unwrap()
            .id
    };
    let id = Uuid::now_v7();
    let m = Message {
        id,
        org_id: w.org_id,
        conversation_id,
        contact_id: w.contact_id,
        phone_number_id: pnid.into(),
        direction: Direction::Outbound,
        r#type: "text".into(),
        status: Status::Accepted,
        template_name: None,
        template_language: None,
        text: Some("hi".into()),
        media_id,
        wamid: None,
        request: json!({"to": "16505551234", "type": "text", "text": {"body": "hi"}}),
        campaign_id,
        created_at: T0,
        sent_at: None,
        delivered_at: None,
        read_at: None,
        failed_at: None,
        failure_code: None,
        failure: None,
        updated_at: T0,
        content: None,
        reply_to: None,
        referral: None,
        edited_at: None,
        revoked_at: None,
        pricing: None,
    };
    assert!(db.insert_message(&m).await.unwrap());
    assert!(db.queue_message_dispatch(id, due).await.unwrap());
    id
}

pub(crate) fn claim<'a>(
    owner: &'a str,
    pnid: Option<&'a str>,
    limit: i64,
    now: i64,
) -> DispatchClaim<'a> {
    DispatchClaim {
        phone_number_id: pnid,
        api_only: false,
        limit,
        owner,
        now,
        lease_ms: LEASE,
        grace_ms: GRACE,
    }
}

fn sent_change(wamid: &str, at: i64) -> StatusChange {
    StatusChange {
        status: Status::Sent,
        wamid: Some(wamid.into()),
        sent_at: Some(at),
        delivered_at: None,
        read_at: None,
        failed_at: None,
        failure_code: None,
        failure: None,
        pricing: None,
    }
}

pub(crate) fn ids(items: &[DispatchItem]) -> Vec<Uuid> {
    items.iter().map(|i| i.id).collect()
}

fn unknown_failure() -> Failure {
    Failure::tern("network_outcome_unknown", "lost")
}

tern_store::both_backends! { tern_store::testkit::TestDb;
    dispatch_claims_due_messages_once_in_order => async |db| {
        let w = world(&db).await;
        let a = queued(&db, &w, "100", T0).await;
        // A media message's claim carries its media, for the worker to upload.
        let media_id = Uuid::now_v7();
        let b = queued_with_media(&db, &w, "200", T0 + 5, Some(media_id)).await;
        let c = queued(&db, &w, "100", T0 + 10).await;
        let later = queued(&db, &w, "100", T0 + 1_000).await;
        // Only accepted outbound messages can be queued; queueing again is harmless.
        assert!(db.queue_message_dispatch(a, T0).await.unwrap());
        assert!(!db.queue_message_dispatch(Uuid::now_v7(), T0).await.unwrap());

        let now = T0 + 100;
        assert_eq!(db.due_dispatch_numbers(now, None, 10).await.unwrap(), ["100", "200"]);
        assert_eq!(db.due_dispatch_numbers(now, None, 1).await.unwrap(), ["100"]);
        assert_eq!(db.due_dispatch_numbers(now, Some("100"), 1).await.unwrap(), ["200"]);
        assert!(db.due_dispatch_numbers(now, Some("200"), 1).await.unwrap().is_empty());
        assert!(db.due_dispatch_numbers(T0 - 1, None, 10).await.unwrap().is_empty());
        assert_eq!(db.count_dispatch_queue().await.unwrap(),
                   DispatchCounts { queued: 4, in_flight: 0, unknown: 0 });

        // One number's messages only, at most the limit, earliest due first.
        let first = db.status_writes().claim_dispatch(&claim("w1", Some("100"), 1, now)).await.unwrap();
        assert_eq!(ids(&first), [a]);
        let item = &first[0];
        assert_eq!(item.org_id, w.org_id);
        assert_eq!(item.phone_number_id, "100");
        assert_eq!(item.status, Status::Sending);
        assert_eq!(item.attempts, 1);
        assert_eq!(item.request["text"]["body"], "hi");
        assert_eq!(item.media_id, None);
        assert_eq!(item.created_at, T0);
        assert_eq!(item.updated_at, now);
        assert_eq!(item.lease_owner, "w1");
        assert_eq!(item.locked_until, now + LEASE);
        assert_eq!(item.deadline, now + LEASE + GRACE);
        assert_eq!(item.lease(), DispatchLease { owner: "w1".into(), attempt: 1 });
        let msg = db.get_message(w.org_id, a).await.unwrap().unwrap();
        assert_eq!((msg.status.as_str(), msg.updated_at), ("sending", now));
        let info = db.dispatch_info(a).await.unwrap();
        assert_eq!(info.dispatch_state.as_deref(), Some("in_flight"));
        assert_eq!((info.next_attempt_at, info.locked_until), (Some(now + LEASE + GRACE), Some(now + LEASE)));

        // Any number; a claimed message is never handed out again, not even past its lease.
        let rest = db.status_writes().claim_dispatch(&claim("w2", None, 10, now)).await.unwrap();
        assert_eq!(ids(&rest), [b, c]);
        assert_eq!((rest[0].media_id, rest[1].media_id), (Some(media_id), None));
        assert!(db.status_writes().claim_dispatch(&claim("w3", None, 10, now)).await.unwrap().is_empty());
        assert!(db.status_writes().claim_dispatch(&claim("w3", None, 0, T0 + 1_000)).await.unwrap().is_empty());
        let far = now + LEASE + GRACE + 1;
        assert_eq!(ids(&db.status_writes().claim_dispatch(&claim("w3", None, 10, far)).await.unwrap()), [later]);
        assert!(db.status_writes().claim_dispatch(&claim("w3", None, 10, far * 2)).await.unwrap().is_empty());
        assert_eq!(db.count_dispatch_queue().await.unwrap(),
                   DispatchCounts { queued: 0, in_flight: 4, unknown: 0 });
        assert!(matches!(db.dispatch_info(Uuid::now_v7()).await.unwrap_err(), StoreError::NotFound));
    },

    dispatch_concurrent_claimers_never_share_a_message => async |db| {
        let w = world(&db).await;
        let total = 40;
        for i in 0..total {
            queued(&db, &w, if i % 2 == 0 { "100" } else { "200" }, T0 + i).await;
        }
        let barrier = Arc::new(tokio::sync::Barrier::new(4));
        let workers: Vec<_> = (0..4)
            .map(|n| {
                let db = db.clone();
                let barrier = barrier.clone();
                tokio::spawn(async move {
                    let owner = format!("w{n}");
                    barrier.wait().await;
                    let mut mine = Vec::new();
                    loop {
                        // Half the workers claim per number, as the dispatcher does.
                        let pnid = match n { 0 => Some("100"), 1 => Some("200"), _ => None };
                        let batch = db.status_writes().claim_dispatch(&claim(&owner, pnid, 3, T0 + 1_000)).await.unwrap();
                        if batch.is_empty() {
                            if pnid.is_some() {
                                // The other number may still have messages; finish with any.
                                let any = db.status_writes().claim_dispatch(&claim(&owner, None, 3, T0 + 1_000)).await.unwrap();
                                if any.is_empty() {
                                    return mine;
                                }
                                mine.extend(any.into_iter().map(|i| (i.id, i.attempts)));
                                continue;
                            }
                            return mine;
                        }
                        mine.extend(batch.into_iter().map(|i| (i.id, i.attempts)));
                    }
                })
            })
            .collect();
        let mut seen = HashSet::new();
        for w in workers {
            for (id, attempts) in w.await.unwrap() {
                assert_eq!(attempts, 1, "{id} claimed twice");
                assert!(seen.insert(id), "{id} claimed by two workers");
            }
        }
        assert_eq!(seen.len(), total as usize);
    },

    dispatch_complete_is_guarded_by_lease_and_status => async |db| {
        let w = world(&db).await;
        let a = queued(&db, &w, "100", T0).await;
        let now = T0 + 100;
        let item = db.status_writes().claim_dispatch(&claim("w1", None, 1, now)).await.unwrap().remove(0);
        let lease = item.lease();

        // Another worker's or another attempt's write is refused.
        for stale in [DispatchLease { owner: "w2".into(), attempt: 1 },
                      DispatchLease { owner: "w1".into(), attempt: 2 }] {
            let r = db.status_writes().complete_dispatch(a, &stale, Status::Sending, item.updated_at, &sent_change("wamid.X", now), now).await.unwrap();
            assert_eq!(r, DispatchWrite::LeaseLost);
        }
        let r = db.status_writes().complete_dispatch(Uuid::now_v7(), &lease, Status::Sending, item.updated_at, &sent_change("wamid.X", now), now).await.unwrap();
        assert_eq!(r, DispatchWrite::LeaseLost);
        // The status moved meanwhile (a webhook): re-read and decide again.
        let r = db.status_writes().complete_dispatch(a, &lease, Status::Sending, item.updated_at - 1, &sent_change("wamid.X", now), now).await.unwrap();
        assert_eq!(r, DispatchWrite::Moved);
        let r = db.status_writes().complete_dispatch(a, &lease, Status::Accepted, item.updated_at, &sent_change("wamid.X", now), now).await.unwrap();
        assert_eq!(r, DispatchWrite::Moved);

        let r = db.status_writes().complete_dispatch(a, &lease, Status::Sending, item.updated_at, &sent_change("wamid.A", now + 5), now + 5).await.unwrap();
        assert_eq!(r, DispatchWrite::Applied);
        let msg = db.get_message(w.org_id, a).await.unwrap().unwrap();
        assert_eq!((msg.status.as_str(), msg.wamid.as_deref(), msg.sent_at), ("sent", Some("wamid.A"), Some(now + 5)));
        assert!(msg.updated_at > item.updated_at);
        let info = db.dispatch_info(a).await.unwrap();
        assert_eq!((info.dispatch_state, info.next_attempt_at, info.locked_until), (None, None, None));
        assert_eq!(info.attempts, 1);
        // Out of the queue for good; a repeated write with the old values changes nothing.
        assert!(db.status_writes().claim_dispatch(&claim("w1", None, 10, now + 10 * GRACE)).await.unwrap().is_empty());
        let r = db.status_writes().complete_dispatch(a, &lease, Status::Sending, item.updated_at, &sent_change("wamid.B", now), now).await.unwrap();
        assert_eq!(r, DispatchWrite::Moved);
        // A stored wamid is never replaced.
        let r = db.status_writes().complete_dispatch(a, &lease, Status::Sent, msg.updated_at, &sent_change("wamid.B", now), now + 6).await.unwrap();
        assert_eq!(r, DispatchWrite::Applied);
        assert_eq!(db.get_message(w.org_id, a).await.unwrap().unwrap().wamid.as_deref(), Some("wamid.A"));
        assert_eq!(db.count_dispatch_queue().await.unwrap(), DispatchCounts::default());
    },

    dispatch_retry_requeues_and_stale_lease_is_refused => async |db| {
        let w = world(&db).await;
        let a = queued(&db, &w, "100", T0).await;
        let now = T0 + 100;
        let first = db.status_writes().claim_dispatch(&claim("w1", None, 1, now)).await.unwrap().remove(0);
        assert!(!db.retry_dispatch(a, &DispatchLease { owner: "w9".into(), attempt: 1 }, now, "x", &attempt_entry()).await.unwrap());
        assert!(db.retry_dispatch(a, &first.lease(), now + 500, "graph error 130429", &attempt_entry()).await.unwrap());
        let info = db.dispatch_info(a).await.unwrap();
        assert_eq!(info.dispatch_state.as_deref(), Some("queued"));
        assert_eq!((info.next_attempt_at, info.locked_until), (Some(now + 500), None));
        assert_eq!(info.last_error.as_deref(), Some("graph error 130429"));
        assert_eq!(info.status, Status::Sending);

        // Not due before the retry time.
        assert!(db.status_writes().claim_dispatch(&claim("w2", None, 10, now + 499)).await.unwrap().is_empty());
        assert!(db.due_dispatch_numbers(now + 499, None, 10).await.unwrap().is_empty());
        let second = db.status_writes().claim_dispatch(&claim("w2", None, 10, now + 500)).await.unwrap().remove(0);
        assert_eq!((second.id, second.attempts, second.status.as_str()), (a, 2, "sending"));

        // The first claim is stale now: none of its writes land.
        assert!(!db.retry_dispatch(a, &first.lease(), now, "late", &attempt_entry()).await.unwrap());
        assert!(!db.mark_dispatch_unknown(a, &first.lease(), now, "late", &attempt_entry()).await.unwrap());
        let r = db.status_writes().complete_dispatch(a, &first.lease(), Status::Sending, second.updated_at, &sent_change("wamid.OLD", now), now).await.unwrap();
        assert_eq!(r, DispatchWrite::LeaseLost);
        let info = db.dispatch_info(a).await.unwrap();
        assert_eq!((info.dispatch_state.as_deref(), info.lease_owner.as_deref(), info.attempts), (Some("in_flight"), Some("w2"), 2));

        // The current claim fails the message for good.
        let failure = Failure::tern("recipient_not_on_whatsapp", "m")
            .with_provider(Some("131026".into()), Some("(#131026) Message undeliverable".into()), None);
        let change = StatusChange { status: Status::Failed, wamid: None, sent_at: None, delivered_at: None,
            read_at: None, failed_at: Some(now + 600), failure_code: Some("recipient_not_on_whatsapp".into()),
            failure: Some(failure.clone()), pricing: None };
        let r = db.status_writes().complete_dispatch(a, &second.lease(), Status::Sending, second.updated_at, &change, now + 600).await.unwrap();
        assert_eq!(r, DispatchWrite::Applied);
        let msg = db.get_message(w.org_id, a).await.unwrap().unwrap();
        assert_eq!((msg.status.as_str(), msg.failed_at, msg.failure), ("failed", Some(now + 600), Some(failure)));
        assert_eq!(db.dispatch_info(a).await.unwrap().dispatch_state, None);
    },

    dispatch_requeue_never_resurrects_a_message_a_webhook_moved => async |db| {
        let w = world(&db).await;
        let a = queued(&db, &w, "100", T0).await;
        let b = queued(&db, &w, "100", T0).await;
        let now = T0 + 100;
        let items = db.status_writes().claim_dispatch(&claim("w1", None, 2, now)).await.unwrap();
        // Status webhooks move both messages on while the worker still holds them.
        for (item, wamid) in items.iter().zip(["wamid.WA", "wamid.WB"]) {
            assert!(db.status_writes().update_message_status(item.id, Status::Sending, item.updated_at, &sent_change(wamid, now + 1), now + 1).await.unwrap());
        }
        assert!(db.retry_dispatch(a, &items[0].lease(), now + 500, "late 5xx", &attempt_entry()).await.unwrap());
        assert!(db.mark_dispatch_unknown(b, &items[1].lease(), now + 500, "timeout", &attempt_entry()).await.unwrap());
        for id in [a, b] {
            let info = db.dispatch_info(id).await.unwrap();
            assert_eq!((info.status.as_str(), info.dispatch_state, info.next_attempt_at), ("sent", None, None), "{id}");
        }
        assert!(db.status_writes().claim_dispatch(&claim("w2", None, 10, now + 10 * GRACE)).await.unwrap().is_empty());
        let sweep = tern_store::testkit::sweep_dispatch(&db, now + 10 * GRACE, "network_outcome_unknown", &unknown_failure(), 100).await.unwrap();
        assert!(sweep.expired.is_empty());
    },

    dispatch_sweep_fails_only_still_sending_messages_past_the_deadline => async |db| {
        let w = world(&db).await;
        let unknown = queued(&db, &w, "100", T0).await;
        let abandoned = queued(&db, &w, "100", T0).await;
        let settled = queued(&db, &w, "100", T0).await;
        let waiting = queued(&db, &w, "100", T0 + 1).await;
        let now = T0 + 100;
        let items = db.status_writes().claim_dispatch(&claim("w1", None, 3, now)).await.unwrap();
        assert_eq!(ids(&items), [unknown, abandoned, settled]);
        let deadline = now + LEASE + GRACE;
        // `unknown`: the request left, no answer; its grace ends earlier than the claim's.
        assert!(db.mark_dispatch_unknown(unknown, &items[0].lease(), now + GRACE, "timed out", &attempt_entry()).await.unwrap());
        // `settled`: a status webhook arrived, and the queue state stays until the sweep.
        assert!(db.status_writes().update_message_status(settled, Status::Sending, items[2].updated_at, &sent_change("wamid.S", now + 2), now + 2).await.unwrap());
        // `abandoned`: the worker died with the claim.
        let failure = unknown_failure();

        let s = tern_store::testkit::sweep_dispatch(&db, now + 1, "network_outcome_unknown", &failure, 100).await.unwrap();
        assert_eq!((s.abandoned, s.expired.len()), (0, 0));
        assert!(s.released <= 1);
        assert_eq!(db.dispatch_info(settled).await.unwrap().dispatch_state, None);
        assert_eq!(db.count_dispatch_queue().await.unwrap(), DispatchCounts { queued: 1, in_flight: 1, unknown: 1 });

        // Past the lease: the abandoned claim is "unknown", never handed out again.
        let s = tern_store::testkit::sweep_dispatch(&db, now + LEASE + 1, "network_outcome_unknown", &failure, 100).await.unwrap();
        assert_eq!((s.abandoned, s.released, s.expired.len()), (1, 0, 0));
        assert_eq!(db.dispatch_info(abandoned).await.unwrap().dispatch_state.as_deref(), Some("unknown"));
        assert_eq!(ids(&db.status_writes().claim_dispatch(&claim("w2", None, 10, now + LEASE + 1)).await.unwrap()), [waiting]);

        // `unknown`'s deadline passes first; the sweep fails it, and only it.
        let s = tern_store::testkit::sweep_dispatch(&db, now + GRACE, "network_outcome_unknown", &failure, 100).await.unwrap();
        assert_eq!(s.expired, vec![ExpiredDispatch { id: unknown, org_id: w.org_id }]);
        let msg = db.get_message(w.org_id, unknown).await.unwrap().unwrap();
        assert_eq!((msg.status.as_str(), msg.failed_at, msg.failure_code.as_deref()), ("failed", Some(now + GRACE), Some("network_outcome_unknown")));
        assert_eq!(msg.failure, Some(failure.clone()));
        assert_eq!(db.dispatch_info(unknown).await.unwrap().dispatch_state, None);

        // At the claim's deadline the abandoned one fails too; the limit bounds one sweep.
        let s = tern_store::testkit::sweep_dispatch(&db, deadline, "network_outcome_unknown", &failure, 0).await.unwrap();
        assert!(s.expired.is_empty());
        let s = tern_store::testkit::sweep_dispatch(&db, deadline, "network_outcome_unknown", &failure, 100).await.unwrap();
        assert_eq!(s.expired, vec![ExpiredDispatch { id: abandoned, org_id: w.org_id }]);
        // The settled message was never failed; `waiting` (its lease over too) has a later deadline.
        let msg = db.get_message(w.org_id, settled).await.unwrap().unwrap();
        assert_eq!((msg.status.as_str(), msg.failure_code), ("sent", None));
        assert_eq!(db.count_dispatch_queue().await.unwrap(), DispatchCounts { queued: 0, in_flight: 0, unknown: 1 });
        let s = tern_store::testkit::sweep_dispatch(&db, deadline * 2, "network_outcome_unknown", &failure, 100).await.unwrap();
        assert_eq!(s.expired.iter().map(|e| e.id).collect::<Vec<_>>(), [waiting]);
        assert_eq!(db.count_dispatch_queue().await.unwrap(), DispatchCounts::default());
    },

    dispatch_late_success_after_the_sweep_keeps_failed_but_records_the_send => async |db| {
        // A worker hung past the deadline, then learned the network took the message: the
        // failure stands (failed is terminal) but its wamid and sent_at are kept.
        let w = world(&db).await;
        let a = queued(&db, &w, "100", T0).await;
        let item = db.status_writes().claim_dispatch(&claim("w1", None, 1, T0)).await.unwrap().remove(0);
        let s = tern_store::testkit::sweep_dispatch(&db, item.deadline, "network_outcome_unknown", &unknown_failure(), 10).await.unwrap();
        assert_eq!(s.expired.len(), 1);
        let msg = db.get_message(w.org_id, a).await.unwrap().unwrap();
        let mut change = sent_change("wamid.LATE", T0 + 5);
        change.status = Status::Failed;
        change.failed_at = msg.failed_at;
        change.failure_code = msg.failure_code.clone();
        change.failure = msg.failure.clone();
        let r = db.status_writes().complete_dispatch(a, &item.lease(), msg.status, msg.updated_at, &change, item.deadline + 1).await.unwrap();
        assert_eq!(r, DispatchWrite::Applied);
        // Its queue writes, however, change nothing.
        assert!(db.retry_dispatch(a, &item.lease(), T0, "x", &attempt_entry()).await.unwrap());
        let info = db.dispatch_info(a).await.unwrap();
        assert_eq!((info.status.as_str(), info.dispatch_state), ("failed", None));
        let msg = db.get_message(w.org_id, a).await.unwrap().unwrap();
        assert_eq!((msg.wamid.as_deref(), msg.sent_at), (Some("wamid.LATE"), Some(T0 + 5)));
    },

    dispatch_refunds_a_debit_once => async |db| {
        let w = world(&db).await;
        let debited = queued(&db, &w, "100", T0).await;
        let free = queued(&db, &w, "100", T0).await;
        db.adjust_wallet(w.org_id, 1_000, "top_up", None, T0).await.unwrap();
        assert_eq!(db.adjust_wallet(w.org_id, -35, "message_debit", Some(debited), T0).await.unwrap(), 965);
        assert_eq!(db.status_writes().refund_message_debit(debited, T0 + 1).await.unwrap(), 35);
        assert_eq!(db.get_org(w.org_id).await.unwrap().unwrap().wallet_balance_minor, 1_000);
        // Once only, however often a worker retries; nothing for a message never debited.
        assert_eq!(db.status_writes().refund_message_debit(debited, T0 + 2).await.unwrap(), 0);
        assert_eq!(db.status_writes().refund_message_debit(free, T0 + 2).await.unwrap(), 0);
        assert_eq!(db.status_writes().refund_message_debit(Uuid::now_v7(), T0 + 2).await.unwrap(), 0);
        // Racing workers: one refund.
        let raced = queued(&db, &w, "100", T0).await;
        db.adjust_wallet(w.org_id, -20, "message_debit", Some(raced), T0).await.unwrap();
        let racers: Vec<_> = (0..4).map(|_| {
            let db = db.clone();
            tokio::spawn(async move { db.status_writes().refund_message_debit(raced, T0 + 3).await.unwrap() })
        }).collect();
        let mut refunded = Vec::new();
        for r in racers {
            refunded.push(r.await.unwrap());
        }
        refunded.sort_unstable();
        assert_eq!(refunded, [0, 0, 0, 20]);
        assert_eq!(db.get_org(w.org_id).await.unwrap().unwrap().wallet_balance_minor, 1_000);
    },
}
