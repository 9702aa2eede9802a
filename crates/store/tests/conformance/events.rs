use std::collections::HashSet;
use std::sync::Arc;

use crate::fixtures::{T0, api_key, org_with_key};
use tern_domain::events::subscription::DisabledReason;
use tern_store::{
    AttemptRecord, AttemptStatus, Db, DeliveryJob, DeliveryOutcome, DeliveryStatus, NewEvent,
    NewSubscription, Recording, StoreError, Subscription, SubscriptionPatch,
};
use uuid::Uuid;

const LEASE: i64 = 30_000;
const DAY: i64 = 24 * 60 * 60 * 1000;

fn new_sub(org_id: Uuid, key_id: Uuid, types: &[&str]) -> NewSubscription {
    NewSubscription {
        id: Uuid::now_v7(),
        org_id,
        api_key_id: key_id,
        url: "https://hooks.example.com/tern".into(),
        event_types: types.iter().map(|t| t.to_string()).collect(),
        secret_enc: vec![1, 2, 3, 0, 255],
        enabled: true,
        description: Some("main".into()),
        created_at: T0,
    }
}

async fn sub(db: &Db, org_id: Uuid, key_id: Uuid, types: &[&str]) -> Subscription {
    db.insert_webhook_subscription(&new_sub(org_id, key_id, types))
        .await
        .unwrap()
}

fn event(org_id: Uuid, event_type: &str, at: i64) -> NewEvent {
    let id = Uuid::now_v7();
    NewEvent {
        id,
        org_id,
        event_type: event_type.into(),
        // Deliberately not canonical JSON: the bytes must come back exactly.
        payload: format!(
            r#"{{"id":"{id}", "type":"{event_type}","version":1,  "data":{{"z":1,"a":2}}}}"#
        ),
        created_at: at,
        message_id: None,
    }
}

fn attempt(at: i64, status: Option<i64>) -> AttemptRecord {
    AttemptRecord {
        id: Uuid::now_v7(),
        response_status: status,
        latency_ms: 42,
        error: status.is_none().then(|| "connection refused".to_string()),
        created_at: at,
        response_body: status.map(|s| format!("answer {s}: <b>é</b>")),
    }
}

fn subs_of(jobs: &[DeliveryJob]) -> Vec<Uuid> {
    jobs.iter().map(|j| j.subscription_id).collect()
}

tern_store::both_backends! { tern_store::testkit::TestDb;
    revoking_a_key_disables_its_subscriptions => async |db| {
        let (org, member, key) = org_with_key(&db).await;
        let other = api_key(org.id, member.id);
        db.insert_api_key(&other).await.unwrap();
        let on = sub(&db, org.id, key.id, &["message.status"]).await;
        let off = sub(&db, org.id, key.id, &["message.status"]).await;
        assert!(db.disable_webhook_subscription(off.id, DisabledReason::Gone, T0).await.unwrap());
        let theirs = sub(&db, org.id, other.id, &["message.status"]).await;

        db.revoke_api_key(key.id, T0 + 7).await.unwrap();
        let on = db.get_webhook_subscription(org.id, key.id, on.id).await.unwrap().unwrap();
        assert_eq!((on.enabled, on.disabled_reason.as_deref()), (false, Some("key_revoked")));
        assert!(on.updated_at >= T0 + 7);
        // One already disabled keeps its reason; another key's is untouched.
        let off = db.get_webhook_subscription(org.id, key.id, off.id).await.unwrap().unwrap();
        assert_eq!(off.disabled_reason.as_deref(), Some("gone"));
        let theirs = db.get_webhook_subscription(org.id, other.id, theirs.id).await.unwrap().unwrap();
        assert!(theirs.enabled);
        // No event reaches the revoked key's receivers any more.
        assert_eq!(db.emit_event(&event(org.id, "message.status", T0 + 8)).await.unwrap(), 1);
        // A refused second revocation changes nothing.
        assert!(db.revoke_api_key(key.id, T0 + 9).await.is_err());
    },

    rotating_a_key_moves_its_subscriptions => async |db| {
        let (org, member, old) = org_with_key(&db).await;
        let s = sub(&db, org.id, old.id, &["message.status"]).await;
        let new = api_key(org.id, member.id);
        db.rotate_api_key(old.id, &new, T0 + 1).await.unwrap();
        assert!(db.get_webhook_subscription(org.id, old.id, s.id).await.unwrap().is_none());
        let moved = db.get_webhook_subscription(org.id, new.id, s.id).await.unwrap().unwrap();
        assert!(moved.enabled && moved.disabled_reason.is_none());
        assert_eq!(db.emit_event(&event(org.id, "message.status", T0 + 2)).await.unwrap(), 1);
    },

    subscriptions_belong_to_their_key => async |db| {
        let (org, member, key) = org_with_key(&db).await;
        let other_key = api_key(org.id, member.id);
        db.insert_api_key(&other_key).await.unwrap();
        let s = sub(&db, org.id, key.id, &["message.status", "message.received"]).await;
        assert_eq!(s.event_types, ["message.status", "message.received"]);
        assert!(s.enabled);
        assert_eq!((s.created_at, s.updated_at, s.previous_secret_enc.clone()), (T0, T0, None));
        assert_eq!(db.get_webhook_subscription(org.id, key.id, s.id).await.unwrap(), Some(s.clone()));
        assert_eq!(db.get_webhook_subscription(org.id, other_key.id, s.id).await.unwrap(), None);
        let dup = db.insert_webhook_subscription(&NewSubscription { id: s.id, ..new_sub(org.id, key.id, &["x"]) }).await;
        assert!(matches!(dup, Err(StoreError::Conflict { ref constraint }) if constraint == "webhook_subscriptions_pkey"), "{dup:?}");

        let s2 = sub(&db, org.id, key.id, &["template.status"]).await;
        let s3 = sub(&db, org.id, key.id, &["template.status"]).await;
        let theirs = sub(&db, org.id, other_key.id, &["template.status"]).await;
        let ids = |v: Vec<Subscription>| v.into_iter().map(|s| s.id).collect::<Vec<_>>();
        assert_eq!(ids(db.list_webhook_subscriptions(org.id, key.id, None, 10).await.unwrap()), [s.id, s2.id, s3.id]);
        assert_eq!(ids(db.list_webhook_subscriptions(org.id, key.id, None, 2).await.unwrap()), [s.id, s2.id]);
        assert_eq!(ids(db.list_webhook_subscriptions(org.id, key.id, Some(s2.id), 2).await.unwrap()), [s3.id]);
        assert_eq!(ids(db.list_webhook_subscriptions(org.id, other_key.id, None, 10).await.unwrap()), [theirs.id]);
        assert_eq!(db.count_webhook_subscriptions(org.id).await.unwrap(), 4);

        assert!(!db.delete_webhook_subscription(org.id, other_key.id, s.id).await.unwrap());
        assert!(db.delete_webhook_subscription(org.id, key.id, s.id).await.unwrap());
        assert!(!db.delete_webhook_subscription(org.id, key.id, s.id).await.unwrap());
        assert_eq!(db.count_webhook_subscriptions(org.id).await.unwrap(), 3);
    },

    update_patches_only_given_fields_and_enabling_clears_the_reason => async |db| {
        let (org, member, key) = org_with_key(&db).await;
        let other_key = api_key(org.id, member.id);
        db.insert_api_key(&other_key).await.unwrap();
        let s = sub(&db, org.id, key.id, &["message.status"]).await;
        let none = db.update_webhook_subscription(org.id, other_key.id, s.id, &SubscriptionPatch { enabled: Some(false), ..Default::default() }, T0 + 1).await.unwrap();
        assert_eq!(none, None);

        let patch = SubscriptionPatch { url: Some("https://b.example.com".into()), event_types: Some(vec!["contact.consent".into()]), ..Default::default() };
        let u = db.update_webhook_subscription(org.id, key.id, s.id, &patch, T0 + 10).await.unwrap().unwrap();
        assert_eq!((u.url.as_str(), u.event_types.clone(), u.description.clone(), u.enabled, u.updated_at),
                   ("https://b.example.com", vec!["contact.consent".to_string()], Some("main".into()), true, T0 + 10));

        assert!(db.disable_webhook_subscription(s.id, DisabledReason::Gone, T0 + 20).await.unwrap());
        assert!(!db.disable_webhook_subscription(s.id, DisabledReason::Gone, T0 + 21).await.unwrap());
        let d = db.get_webhook_subscription(org.id, key.id, s.id).await.unwrap().unwrap();
        assert_eq!((d.enabled, d.disabled_reason.as_deref(), d.updated_at), (false, Some("gone"), T0 + 20));

        // A patch without `enabled` keeps the reason; clearing the description works.
        let u = db.update_webhook_subscription(org.id, key.id, s.id, &SubscriptionPatch { description: Some(None), ..Default::default() }, T0 + 30).await.unwrap().unwrap();
        assert_eq!((u.enabled, u.disabled_reason.as_deref(), u.description), (false, Some("gone"), None));
        // A stale clock still moves updated_at forward.
        let u = db.update_webhook_subscription(org.id, key.id, s.id, &SubscriptionPatch { enabled: Some(true), ..Default::default() }, T0).await.unwrap().unwrap();
        assert_eq!((u.enabled, u.disabled_reason, u.updated_at), (true, None, T0 + 31));
    },

    rotation_keeps_the_previous_secret => async |db| {
        let (org, member, key) = org_with_key(&db).await;
        let other_key = api_key(org.id, member.id);
        db.insert_api_key(&other_key).await.unwrap();
        let s = sub(&db, org.id, key.id, &["message.status"]).await;
        assert_eq!(db.rotate_webhook_secret(org.id, other_key.id, s.id, b"new", T0 + DAY, T0 + 1).await.unwrap(), None);
        let r = db.rotate_webhook_secret(org.id, key.id, s.id, b"new", T0 + DAY, T0 + 1).await.unwrap().unwrap();
        assert_eq!((r.secret_enc.as_slice(), r.previous_secret_enc.clone(), r.previous_secret_expires_at, r.updated_at),
                   (&b"new"[..], Some(vec![1, 2, 3, 0, 255]), Some(T0 + DAY), T0 + 1));
        let r = db.rotate_webhook_secret(org.id, key.id, s.id, b"newer", T0 + 2 * DAY, T0 + 2).await.unwrap().unwrap();
        assert_eq!((r.secret_enc.as_slice(), r.previous_secret_enc.as_deref()), (&b"newer"[..], Some(&b"new"[..])));
    },

    emit_queues_one_delivery_per_enabled_matching_subscription => async |db| {
        let (org, member, key) = org_with_key(&db).await;
        let other_key = api_key(org.id, member.id);
        db.insert_api_key(&other_key).await.unwrap();
        let a = sub(&db, org.id, key.id, &["message.status", "message.received"]).await;
        let b = sub(&db, org.id, other_key.id, &["message.status"]).await; // another key's: still fed
        let _c = sub(&db, org.id, key.id, &["message.received"]).await;
        let _prefix = sub(&db, org.id, key.id, &["message.status.x", "message"]).await;
        let off = sub(&db, org.id, key.id, &["message.status"]).await;
        assert!(db.disable_webhook_subscription(off.id, DisabledReason::Gone, T0).await.unwrap());
        let (other_org, _, other_org_key) = org_with_key(&db).await;
        sub(&db, other_org.id, other_org_key.id, &["message.status"]).await;

        let e = event(org.id, "message.status", T0 + 5);
        let mut tx = db.begin().await.unwrap();
        assert_eq!(tx.emit_event(&e).await.unwrap(), 2);
        tx.commit().await.unwrap();
        // One row until the fan-out, which is due now.
        assert!(db.webhook_deliveries_of_event(e.id).await.unwrap().is_empty());
        assert_eq!(db.next_webhook_delivery_due().await.unwrap(), Some(T0 + 5));
        assert_eq!(db.fan_out_events(10).await.unwrap(), (1, 2));
        assert_eq!(db.fan_out_events(10).await.unwrap(), (0, 0));
        let ds = db.webhook_deliveries_of_event(e.id).await.unwrap();
        let mut expected = vec![a.id, b.id];
        expected.sort();
        assert_eq!(ds.iter().map(|d| d.subscription_id).collect::<Vec<_>>(), expected);
        for d in &ds {
            assert_eq!((d.status, d.attempts, d.next_attempt_at, d.lease_owner.clone(), d.created_at), (DeliveryStatus::Pending, 0, Some(T0 + 5), None, T0 + 5));
        }
        assert_eq!(db.emit_event(&event(org.id, "campaign.status", T0)).await.unwrap(), 0);
        assert_eq!(db.next_webhook_delivery_due().await.unwrap(), Some(T0 + 5));

        // The job carries the exact payload bytes.
        let jobs = db.claim_webhook_deliveries("w", T0 + 5, LEASE, 10, 10).await.unwrap();
        assert_eq!(jobs.len(), 2);
        for j in &jobs {
            assert_eq!((j.event_id, j.event_type.as_str(), j.payload.as_str(), j.event_created_at, j.org_id), (e.id, "message.status", e.payload.as_str(), T0 + 5, org.id));
            assert_eq!((j.attempt, j.lease_owner.as_str(), j.locked_until, j.enabled), (1, "w", T0 + 5 + LEASE, true));
            assert_eq!(j.url, "https://hooks.example.com/tern");
        }
        // A duplicate event id is refused and queues nothing more.
        let dup = db.emit_event(&e).await;
        assert!(matches!(dup, Err(StoreError::Conflict { ref constraint }) if constraint == "events_pkey"), "{dup:?}");
        assert_eq!(db.webhook_deliveries_of_event(e.id).await.unwrap().len(), 2);
    },

    a_transactions_events_are_stored_together_at_commit => async |db| {
        let (org, _, key) = org_with_key(&db).await;
        let a = sub(&db, org.id, key.id, &["message.status"]).await;
        let b = sub(&db, org.id, key.id, &["message.status", "message.received"]).await;
        let statuses: Vec<NewEvent> = (0..5).map(|i| event(org.id, "message.status", T0 + i)).collect();
        let received = event(org.id, "message.received", T0 + 9);
        let mut tx = db.begin().await.unwrap();
        for e in &statuses {
            assert_eq!(tx.emit_event(e).await.unwrap(), 2);
        }
        assert_eq!(tx.emit_event(&received).await.unwrap(), 1);
        tx.commit().await.unwrap();
        assert_eq!(db.fan_out_events(100).await.unwrap(), (6, 11));
        for e in &statuses {
            let mut got: Vec<Uuid> = db.webhook_deliveries_of_event(e.id).await.unwrap().iter().map(|d| d.subscription_id).collect();
            got.sort();
            let mut want = vec![a.id, b.id];
            want.sort();
            assert_eq!(got, want);
        }
        let r = db.webhook_deliveries_of_event(received.id).await.unwrap();
        assert_eq!((r.len(), r[0].subscription_id, r[0].next_attempt_at), (1, b.id, Some(T0 + 9)));
        // The exact bytes of each, in a claim.
        let jobs = db.claim_webhook_deliveries("w", T0 + DAY, LEASE, 100, 100).await.unwrap();
        assert_eq!(jobs.len(), 11);
        for j in &jobs {
            let e = statuses.iter().chain([&received]).find(|e| e.id == j.event_id).unwrap();
            assert_eq!((j.payload.as_str(), j.event_type.as_str(), j.event_created_at), (e.payload.as_str(), e.event_type.as_str(), e.created_at));
        }
        // A duplicate among them fails the commit, and nothing of the transaction stays.
        let again = event(org.id, "message.status", T0);
        let mut tx = db.begin().await.unwrap();
        tx.emit_event(&again).await.unwrap();
        tx.emit_event(&statuses[0]).await.unwrap();
        assert!(matches!(tx.commit().await, Err(StoreError::Conflict { ref constraint }) if constraint == "events_pkey"));
        assert!(db.webhook_deliveries_of_event(again.id).await.unwrap().is_empty());
        assert_eq!(db.fan_out_events(100).await.unwrap(), (0, 0));
    },

    emit_rolls_back_with_its_transaction => async |db| {
        let (org, _, key) = org_with_key(&db).await;
        sub(&db, org.id, key.id, &["message.status"]).await;
        let e = event(org.id, "message.status", T0);
        let mut tx = db.begin().await.unwrap();
        assert_eq!(tx.emit_event(&e).await.unwrap(), 1);
        drop(tx);
        assert!(db.webhook_deliveries_of_event(e.id).await.unwrap().is_empty());
        assert_eq!(db.next_webhook_delivery_due().await.unwrap(), None);
        assert!(db.claim_webhook_deliveries("w", T0 + DAY, LEASE, 10, 10).await.unwrap().is_empty());
        // The same event id can then be emitted for real.
        assert_eq!(db.emit_event(&e).await.unwrap(), 1);
    },

    single_subscription_events_ignore_types_and_organisations => async |db| {
        let (org, _, key) = org_with_key(&db).await;
        let s = sub(&db, org.id, key.id, &["message.status"]).await;
        assert!(db.disable_webhook_subscription(s.id, DisabledReason::Gone, T0).await.unwrap());
        let e = event(org.id, "webhook.test", T0);
        let delivery_id = db.insert_event_for_subscription(&e, s.id).await.unwrap();
        let ds = db.webhook_deliveries_of_event(e.id).await.unwrap();
        assert_eq!((ds.len(), ds[0].id, ds[0].subscription_id, ds[0].next_attempt_at), (1, delivery_id, s.id, Some(T0)));
        let jobs = db.claim_webhook_deliveries("w", T0, LEASE, 10, 10).await.unwrap();
        assert_eq!((jobs.len(), jobs[0].enabled, jobs[0].event_type.as_str()), (1, false, "webhook.test"));

        let (other, _, _) = org_with_key(&db).await;
        let foreign = event(other.id, "webhook.test", T0);
        assert!(matches!(db.insert_event_for_subscription(&foreign, s.id).await, Err(StoreError::NotFound)));
        // Nothing of it was stored: the same event id goes in for this organisation.
        db.insert_event_for_subscription(&NewEvent { org_id: org.id, ..foreign }, s.id)
            .await
            .unwrap();
    },

    claims_are_leased_and_fair_per_subscription => async |db| {
        let (org, _, key) = org_with_key(&db).await;
        let busy = sub(&db, org.id, key.id, &["message.status"]).await;
        for i in 0..6 {
            db.insert_event_for_subscription(&event(org.id, "message.status", T0 + i), busy.id).await.unwrap();
        }
        let quiet = sub(&db, org.id, key.id, &["message.received"]).await;
        db.insert_event_for_subscription(&event(org.id, "message.received", T0 + 10), quiet.id).await.unwrap();
        // Not yet due.
        db.insert_event_for_subscription(&event(org.id, "message.received", T0 + 500), quiet.id).await.unwrap();

        let jobs = db.claim_webhook_deliveries("a", T0 + 100, LEASE, 3, 2).await.unwrap();
        assert_eq!(subs_of(&jobs), [busy.id, busy.id, quiet.id]);
        // The busy subscription has 2 in flight (leased): no more of it for anyone.
        assert!(db.claim_webhook_deliveries("b", T0 + 100, LEASE, 10, 2).await.unwrap().is_empty());
        let next = db.claim_webhook_deliveries("b", T0 + 100, LEASE, 10, 4).await.unwrap();
        assert_eq!(subs_of(&next), [busy.id, busy.id]);
        assert!(jobs.iter().all(|j| !next.iter().any(|n| n.delivery_id == j.delivery_id)));
        assert_eq!(db.next_webhook_delivery_due().await.unwrap(), Some(T0 + 4));
        // Leased deliveries are not claimed again until the lease ends.
        let rest = db.claim_webhook_deliveries("c", T0 + 1_000, LEASE, 10, 10).await.unwrap();
        assert_eq!(subs_of(&rest), [busy.id, busy.id, quiet.id]);
        assert!(db.claim_webhook_deliveries("d", T0 + 1_000, LEASE, 10, 10).await.unwrap().is_empty());
        assert_eq!(db.next_webhook_delivery_due().await.unwrap(), Some(T0 + 100 + LEASE));
        let again = db.claim_webhook_deliveries("e", T0 + 100 + LEASE, LEASE, 10, 10).await.unwrap();
        assert_eq!(again.len(), 5);
        assert!(again.iter().all(|j| j.attempt == 1 && j.lease_owner == "e"));
        assert!(db.claim_webhook_deliveries("f", T0, LEASE, 0, 10).await.unwrap().is_empty());
    },

    a_subscription_with_a_cap_of_its_own_is_claimed_up_to_it => async |db| {
        let (org, _, key) = org_with_key(&db).await;
        let wide = sub(&db, org.id, key.id, &["message.status"]).await;
        let narrow = sub(&db, org.id, key.id, &["message.received"]).await;
        let plain = sub(&db, org.id, key.id, &["contact.consent"]).await;
        for i in 0..8 {
            db.insert_event_for_subscription(&event(org.id, "message.status", T0 + i), wide.id).await.unwrap();
            db.insert_event_for_subscription(&event(org.id, "message.received", T0 + i), narrow.id).await.unwrap();
            db.insert_event_for_subscription(&event(org.id, "contact.consent", T0 + i), plain.id).await.unwrap();
        }
        let caps = [(wide.id, 6), (narrow.id, 1)];
        let jobs = db.claim_webhook_deliveries_capped("a", T0 + 100, LEASE, 100, 2, &caps).await.unwrap();
        let count = |s: Uuid| jobs.iter().filter(|j| j.subscription_id == s).count();
        assert_eq!((count(wide.id), count(narrow.id), count(plain.id)), (6, 1, 2));
        // The caps count what is in flight: a raised one makes room for more of it only.
        let caps = [(wide.id, 7), (narrow.id, 1)];
        let more = db.claim_webhook_deliveries_capped("b", T0 + 100, LEASE, 100, 2, &caps).await.unwrap();
        assert_eq!(subs_of(&more), [wide.id]);
        // Without caps of their own, every subscription has the default again.
        let rest = db.claim_webhook_deliveries("c", T0 + 100, LEASE, 100, 3).await.unwrap();
        let count = |s: Uuid| rest.iter().filter(|j| j.subscription_id == s).count();
        assert_eq!((count(wide.id), count(narrow.id), count(plain.id)), (0, 2, 1));
    },

    attempts_are_recorded_only_by_the_lease_holder => async |db| {
        let (org, member, key) = org_with_key(&db).await;
        let s = sub(&db, org.id, key.id, &["message.status"]).await;
        let e = event(org.id, "message.status", T0);
        let delivery_id = db.insert_event_for_subscription(&e, s.id).await.unwrap();
        db.claim_webhook_deliveries("old", T0, LEASE, 10, 10).await.unwrap();
        // The lease ends and another worker claims it: the old owner is refused.
        let j = db.claim_webhook_deliveries("new", T0 + LEASE, LEASE, 10, 10).await.unwrap();
        assert_eq!(j.len(), 1);
        assert!(!db.record_webhook_attempt(delivery_id, "old", &attempt(T0 + LEASE + 1, Some(200)), DeliveryOutcome::Succeeded).await.unwrap());

        assert!(db.record_webhook_attempt(delivery_id, "new", &attempt(T0 + LEASE + 2, Some(503)), DeliveryOutcome::Retry { next_attempt_at: T0 + LEASE + 5_000 }).await.unwrap());
        let d = &db.webhook_deliveries_of_event(e.id).await.unwrap()[0];
        assert_eq!((d.status, d.attempts, d.next_attempt_at, d.locked_until, d.lease_owner.clone(), d.last_status_code), (DeliveryStatus::Pending, 1, Some(T0 + LEASE + 5_000), None, None, Some(503)));
        assert!(!db.record_webhook_attempt(delivery_id, "new", &attempt(T0 + LEASE + 3, Some(200)), DeliveryOutcome::Succeeded).await.unwrap());

        let j = db.claim_webhook_deliveries("w2", T0 + LEASE + 5_000, LEASE, 10, 10).await.unwrap();
        assert_eq!(j[0].attempt, 2);
        assert!(db.record_webhook_attempt(delivery_id, "w2", &attempt(T0 + LEASE + 6_000, Some(204)), DeliveryOutcome::Succeeded).await.unwrap());
        let d = &db.webhook_deliveries_of_event(e.id).await.unwrap()[0];
        assert_eq!((d.status, d.attempts, d.next_attempt_at, d.last_error.clone()), (DeliveryStatus::Succeeded, 2, None, None));
        assert_eq!(db.next_webhook_delivery_due().await.unwrap(), None);
        assert!(!db.record_webhook_attempt(delivery_id, "w2", &attempt(T0 + LEASE + 7_000, Some(204)), DeliveryOutcome::Succeeded).await.unwrap());

        // The log: newest first, numbered, filtered, paginated, hidden from other keys.
        let log = db.list_webhook_attempts(org.id, key.id, s.id, None, None, 10).await.unwrap();
        assert_eq!(log.iter().map(|a| (a.attempt, a.status, a.response_status)).collect::<Vec<_>>(),
                   [(2, AttemptStatus::Succeeded, Some(204)), (1, AttemptStatus::Failed, Some(503))]);
        assert_eq!((log[0].event_id, log[0].event_type.as_str(), log[0].delivery_id, log[0].latency_ms, log[0].created_at), (e.id, "message.status", delivery_id, 42, T0 + LEASE + 6_000));
        assert_eq!(log[0].response_body.as_deref(), Some("answer 204: <b>é</b>"), "the answer's start is kept");
        let failed = db.list_webhook_attempts(org.id, key.id, s.id, Some(AttemptStatus::Failed), None, 10).await.unwrap();
        assert_eq!(failed.iter().map(|a| a.attempt).collect::<Vec<_>>(), [1]);
        let page = db.list_webhook_attempts(org.id, key.id, s.id, None, Some((log[0].created_at, log[0].id)), 10).await.unwrap();
        assert_eq!(page.iter().map(|a| a.id).collect::<Vec<_>>(), [log[1].id]);
        let other_key = api_key(org.id, member.id);
        db.insert_api_key(&other_key).await.unwrap();
        assert!(db.list_webhook_attempts(org.id, other_key.id, s.id, None, None, 10).await.unwrap().is_empty());
    },

    replay_requeues_failed_deliveries_since => async |db| {
        let (org, _, key) = org_with_key(&db).await;
        let s = sub(&db, org.id, key.id, &["message.status"]).await;
        let old = event(org.id, "message.status", T0);
        let new = event(org.id, "message.status", T0 + 1_000);
        let ok = event(org.id, "message.status", T0 + 2_000);
        for (e, outcome) in [(&old, DeliveryOutcome::Failed), (&new, DeliveryOutcome::Failed), (&ok, DeliveryOutcome::Succeeded)] {
            let id = db.insert_event_for_subscription(e, s.id).await.unwrap();
            db.claim_webhook_deliveries("w", T0 + 5_000, LEASE, 1, 1).await.unwrap();
            assert!(db.record_webhook_attempt(id, "w", &attempt(T0 + 5_000, None), outcome).await.unwrap());
        }
        assert_eq!(db.next_webhook_delivery_due().await.unwrap(), None);
        assert_eq!(db.replay_failed_deliveries(s.id, T0 + 500, T0 + 9_000).await.unwrap(), 1);
        assert_eq!(db.replay_failed_deliveries(s.id, T0 + 500, T0 + 9_000).await.unwrap(), 0);
        let d = &db.webhook_deliveries_of_event(new.id).await.unwrap()[0];
        assert_eq!((d.status, d.attempts, d.next_attempt_at), (DeliveryStatus::Pending, 0, Some(T0 + 9_000)));
        assert_eq!(db.webhook_deliveries_of_event(old.id).await.unwrap()[0].status, DeliveryStatus::Failed);
        assert_eq!(db.webhook_deliveries_of_event(ok.id).await.unwrap()[0].status, DeliveryStatus::Succeeded);
        let jobs = db.claim_webhook_deliveries("w", T0 + 9_000, LEASE, 10, 10).await.unwrap();
        assert_eq!((jobs.len(), jobs[0].event_id, jobs[0].attempt), (1, new.id, 1));
    },

    deleting_a_subscription_cascades_to_deliveries_and_attempts => async |db| {
        let (org, _, key) = org_with_key(&db).await;
        let s = sub(&db, org.id, key.id, &["message.status"]).await;
        let keep = sub(&db, org.id, key.id, &["message.status"]).await;
        let e = event(org.id, "message.status", T0);
        assert_eq!(db.emit_event(&e).await.unwrap(), 2);
        db.fan_out_events(10).await.unwrap();
        for j in db.claim_webhook_deliveries("w", T0, LEASE, 10, 10).await.unwrap() {
            assert!(db.record_webhook_attempt(j.delivery_id, "w", &attempt(T0 + 1, Some(500)), DeliveryOutcome::Retry { next_attempt_at: T0 + 10 }).await.unwrap());
        }
        assert!(db.delete_webhook_subscription(org.id, key.id, s.id).await.unwrap());
        let ds = db.webhook_deliveries_of_event(e.id).await.unwrap();
        assert_eq!(ds.iter().map(|d| d.subscription_id).collect::<Vec<_>>(), [keep.id]);
        assert!(db.list_webhook_attempts(org.id, key.id, s.id, None, None, 10).await.unwrap().is_empty());
        assert_eq!(db.list_webhook_attempts(org.id, key.id, keep.id, None, None, 10).await.unwrap().len(), 1);
        let jobs = db.claim_webhook_deliveries("w", T0 + 10, LEASE, 10, 10).await.unwrap();
        assert_eq!(subs_of(&jobs), [keep.id]);
    },

    fan_out_is_batched_oldest_first_and_skips_deleted_subscriptions => async |db| {
        let (org, _, key) = org_with_key(&db).await;
        let a = sub(&db, org.id, key.id, &["message.status"]).await;
        let gone = sub(&db, org.id, key.id, &["message.status"]).await;
        let later_off = sub(&db, org.id, key.id, &["message.status"]).await;
        let events: Vec<NewEvent> = (0..3).map(|i| event(org.id, "message.status", T0 + 10 - i)).collect();
        for e in &events {
            assert_eq!(db.emit_event(e).await.unwrap(), 3);
        }
        // Unfanned events count as pending, and are not pruned.
        assert_eq!(db.webhook_delivery_states().await.unwrap().len(), 3);
        assert!(db.webhook_delivery_states().await.unwrap().iter().all(|(_, s)| *s == DeliveryStatus::Pending));
        assert_eq!(db.prune_events(T0 + DAY).await.unwrap(), 0);
        assert_eq!(db.next_webhook_delivery_due().await.unwrap(), Some(T0 + 8));
        assert!(db.delete_webhook_subscription(org.id, key.id, gone.id).await.unwrap());
        assert!(db.disable_webhook_subscription(later_off.id, DisabledReason::Gone, T0).await.unwrap());
        // Oldest first (by created_at), two at a time; the deleted subscription gets nothing,
        // the one disabled since gets a delivery for a worker to close.
        assert_eq!(db.fan_out_events(2).await.unwrap(), (2, 4));
        assert!(db.webhook_deliveries_of_event(events[0].id).await.unwrap().is_empty());
        for e in &events[1..] {
            let ds = db.webhook_deliveries_of_event(e.id).await.unwrap();
            let mut expected = vec![a.id, later_off.id];
            expected.sort();
            assert_eq!(ds.iter().map(|d| d.subscription_id).collect::<Vec<_>>(), expected);
            assert!(ds.iter().all(|d| d.status == DeliveryStatus::Pending && d.next_attempt_at == Some(e.created_at)));
        }
        assert_eq!(db.fan_out_events(2).await.unwrap(), (1, 2));
        assert_eq!(db.fan_out_events(2).await.unwrap(), (0, 0));
        assert_eq!(db.webhook_delivery_states().await.unwrap().len(), 6);
        let jobs = db.claim_webhook_deliveries("w", T0 + 10, LEASE, 10, 10).await.unwrap();
        assert_eq!(jobs.iter().filter(|j| !j.enabled).count(), 3);
    },

    concurrent_claimers_never_share_a_delivery => async |db| {
        let (org, _, key) = org_with_key(&db).await;
        let mut subs = Vec::new();
        for _ in 0..4 {
            subs.push(sub(&db, org.id, key.id, &["message.status"]).await);
        }
        let total = 10;
        for i in 0..total {
            assert_eq!(db.emit_event(&event(org.id, "message.status", T0 + i)).await.unwrap(), 4);
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
                    for _ in 0..200 {
                        // Fanning out concurrently too: each event once.
                        db.fan_out_events(2).await.unwrap();
                        let batch = db.claim_webhook_deliveries(&owner, T0 + 1_000, LEASE, 3, 100).await.unwrap();
                        // Empty but some still due: another worker holds their locks right now.
                        if batch.is_empty() && !matches!(db.next_webhook_delivery_due().await.unwrap(), Some(t) if t <= T0 + 1_000) {
                            break;
                        }
                        for j in batch {
                            assert_eq!((j.attempt, j.lease_owner.as_str()), (1, owner.as_str()), "{j:?}");
                            mine.push(j.delivery_id);
                        }
                    }
                    mine
                })
            })
            .collect();
        let mut seen = HashSet::new();
        let mut claimed = 0;
        for w in workers {
            for id in w.await.unwrap() {
                claimed += 1;
                assert!(seen.insert(id), "{id} claimed by two workers");
            }
        }
        assert_eq!((claimed, seen.len()), (4 * total as usize, 4 * total as usize));
        assert_eq!(db.next_webhook_delivery_due().await.unwrap(), Some(T0 + 1_000 + LEASE));
    },
}

mod in_transactions {
    use super::*;

    tern_store::both_backends! { tern_store::testkit::TestDb;
        created_disabled_and_counted_under_the_org_lock => async |db| {
            let (org, _, key) = org_with_key(&db).await;
            let mut tx = db.begin().await.unwrap();
            assert_eq!(tx.count_locked(org.id, tern_store::Counted::WebhookSubscriptions).await.unwrap(), 0);
            let s = tx
                .insert_webhook_subscription(&NewSubscription { enabled: false, ..new_sub(org.id, key.id, &["message.status"]) })
                .await
                .unwrap();
            assert!(!s.enabled);
            assert_eq!(tx.count_locked(org.id, tern_store::Counted::WebhookSubscriptions).await.unwrap(), 1);
            drop(tx); // rolled back
            assert_eq!(db.count_webhook_subscriptions(org.id).await.unwrap(), 0);
            // a disabled subscription receives nothing
            db.insert_webhook_subscription(&NewSubscription { enabled: false, ..new_sub(org.id, key.id, &["message.status"]) })
                .await
                .unwrap();
            let event = NewEvent { id: Uuid::now_v7(), org_id: org.id, event_type: "message.status".into(), payload: "{}".into(), created_at: T0, message_id: None };
            assert_eq!(db.emit_event(&event).await.unwrap(), 0);
        },
    }
}

mod batches_and_leases {
    use super::*;

    tern_store::both_backends! { tern_store::testkit::TestDb;
        attempts_are_recorded_together_each_by_its_holder => async |db| {
            let (org, _, key) = org_with_key(&db).await;
            let s = sub(&db, org.id, key.id, &["message.status"]).await;
            let a = db.insert_event_for_subscription(&event(org.id, "message.status", T0), s.id).await.unwrap();
            let b = db.insert_event_for_subscription(&event(org.id, "message.status", T0 + 1), s.id).await.unwrap();
            assert_eq!(db.claim_webhook_deliveries("w", T0 + 10, LEASE, 10, 10).await.unwrap().len(), 2);
            let ok = attempt(T0 + 20, Some(204));
            let retry = attempt(T0 + 20, Some(500));
            let done = db.record_webhook_attempts(&[
                Recording { delivery_id: a, owner: "w", attempt: &ok, outcome: DeliveryOutcome::Succeeded, message: None },
                // Not this claimer's: nothing written for it, the other one still is.
                Recording { delivery_id: b, owner: "intruder", attempt: &retry, outcome: DeliveryOutcome::Failed, message: None },
            ]).await.unwrap();
            assert_eq!(done, [true, false]);
            let states: Vec<DeliveryStatus> = db.webhook_delivery_states().await.unwrap().into_iter().map(|(_, s)| s).collect();
            assert_eq!(states.iter().filter(|s| **s == DeliveryStatus::Succeeded).count(), 1);
            assert_eq!(states.iter().filter(|s| **s == DeliveryStatus::Pending).count(), 1);
            let log = db.list_webhook_attempts(org.id, key.id, s.id, None, None, 10).await.unwrap();
            assert_eq!(log.len(), 1);
            assert!(db.record_webhook_attempts(&[]).await.unwrap().is_empty());
        },

        a_test_send_is_leased_to_its_sender => async |db| {
            let (org, _, key) = org_with_key(&db).await;
            let s = sub(&db, org.id, key.id, &["message.status"]).await;
            let e = event(org.id, "webhook.test", T0);
            let id = db.insert_leased_event_for_subscription(&e, s.id, "test-1", T0 + LEASE).await.unwrap();
            // No worker takes it while its sender holds it …
            assert!(db.claim_webhook_deliveries("w", T0 + 1, LEASE, 10, 10).await.unwrap().is_empty());
            assert!(db.record_webhook_attempt(id, "test-1", &attempt(T0 + 5, Some(204)), DeliveryOutcome::Succeeded).await.unwrap());
            // … and one whose sender died is taken when the lease ends.
            let e2 = event(org.id, "webhook.test", T0);
            let id2 = db.insert_leased_event_for_subscription(&e2, s.id, "test-2", T0 + LEASE).await.unwrap();
            let jobs = db.claim_webhook_deliveries("w", T0 + LEASE, LEASE, 10, 10).await.unwrap();
            assert_eq!(jobs.iter().map(|j| j.delivery_id).collect::<Vec<_>>(), [id2]);
        },

        subscribers_are_read_and_events_written_in_the_callers_transaction => async |db| {
            let (org, _, key) = org_with_key(&db).await;
            let mut tx = db.begin().await.unwrap();
            assert!(tx.webhook_subscribers(org.id, "contact.consent").await.unwrap().is_empty());
            tx.commit().await.unwrap();
            let s = sub(&db, org.id, key.id, &["contact.consent"]).await;
            let wakeup = db.wakeups();
            let mut tx = db.begin().await.unwrap();
            let subs = tx.webhook_subscribers(org.id, "contact.consent").await.unwrap();
            assert_eq!(subs, [s.id]);
            tx.insert_event(&event(org.id, "contact.consent", T0), &subs).await.unwrap();
            tx.commit().await.unwrap();
            // The commit woke this process's workers.
            tokio::time::timeout(std::time::Duration::from_secs(1), wakeup.deliveries.notified()).await.unwrap();
            assert_eq!(db.webhook_delivery_states().await.unwrap().len(), 1);
        },

    old_events_nothing_waits_for_are_pruned => async |db| {
        let (org, _, key) = org_with_key(&db).await;
        let s = sub(&db, org.id, key.id, &["message.status"]).await;
        let done = db.insert_event_for_subscription(&event(org.id, "message.status", T0), s.id).await.unwrap();
        let waiting = db.insert_event_for_subscription(&event(org.id, "message.status", T0 + 1), s.id).await.unwrap();
        let recent = db.insert_event_for_subscription(&event(org.id, "message.status", T0 + DAY), s.id).await.unwrap();
        db.claim_webhook_deliveries("w", T0 + 2, LEASE, 1, 10).await.unwrap();
        assert!(db.record_webhook_attempt(done, "w", &attempt(T0 + 3, Some(204)), DeliveryOutcome::Succeeded).await.unwrap());
        // Older than the cutoff: the delivered one goes (with its attempt), the pending one stays.
        assert_eq!(db.prune_events(T0 + 100).await.unwrap(), 1);
        assert!(db.list_webhook_attempts(org.id, key.id, s.id, None, None, 10).await.unwrap().is_empty());
        let left: Vec<Uuid> = db.webhook_delivery_states().await.unwrap().into_iter().map(|(e, _)| e).collect();
        assert_eq!(left.len(), 2);
        let _ = (waiting, recent);
    },
    }
}
