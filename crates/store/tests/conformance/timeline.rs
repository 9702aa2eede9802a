//! A message's timeline entries: written with their transaction, read back in order.

use crate::dispatch::{attempt_entry, claim, queued, world};
use crate::fixtures::T0;
use tern_domain::timeline::{AttemptOutcome, Detail};
use tern_store::{DispatchLease, NewEvent};
use uuid::Uuid;

tern_store::both_backends! { tern_store::testkit::TestDb;
    timeline_entries_commit_with_their_transaction_in_order => async |db| {
        let w = world(&db).await;
        let a = queued(&db, &w, "100", T0).await;
        let replay = Detail::Replayed { request_id: Some("req-1".into()) };
        // Rolled back: nothing stays.
        let mut tx = db.begin().await.unwrap();
        tx.add_timeline(a, T0 + 1, &replay);
        tx.rollback().await.unwrap();
        assert!(db.timeline_rows(a).await.unwrap().is_empty());

        // Two entries of one millisecond keep the order they were made in; an event about
        // the message is an entry too (its subscribers are none here: the row still is).
        let mut tx = db.begin().await.unwrap();
        tx.add_timeline(a, T0 + 5, &attempt_entry());
        tx.add_timeline(a, T0 + 5, &replay);
        let event = NewEvent {
            id: Uuid::now_v7(),
            org_id: w.org_id,
            event_type: "message.status".into(),
            payload: "{}".into(),
            created_at: T0 + 6,
            message_id: Some(a),
        };
        tx.insert_event(&event, &[]).await.unwrap();
        tx.commit().await.unwrap();
        db.add_timeline(a, T0 + 2, &replay).await.unwrap();
        let rows = db.timeline_rows(a).await.unwrap();
        let kinds: Vec<&str> = rows.iter().map(|r| r.detail.kind()).collect();
        assert_eq!(kinds, ["replayed", "dispatch_attempt", "replayed"]);
        assert_eq!(rows.iter().map(|r| r.at).collect::<Vec<_>>(), [T0 + 2, T0 + 5, T0 + 5]);
        assert_eq!(rows[1].detail, attempt_entry());

        // With a subscriber, the event is stored and is an entry.
        let mut tx = db.begin().await.unwrap();
        tx.insert_event(&event, &[Uuid::now_v7()]).await.unwrap();
        tx.commit().await.unwrap();
        let rows = db.timeline_rows(a).await.unwrap();
        assert_eq!(rows.last().unwrap().detail, Detail::Event { event_id: event.id, event_type: "message.status".into() });

        // Another message's entries are its own; no key sent this one.
        let b = queued(&db, &w, "100", T0).await;
        assert!(db.timeline_rows(b).await.unwrap().is_empty());
        let origin = db.message_origin(w.org_id, a).await.unwrap().unwrap();
        assert_eq!((origin.api_key_id, origin.request_id), (None, None));
        assert_eq!(db.message_origin(Uuid::now_v7(), a).await.unwrap(), None);
    },

    queue_writes_record_their_attempt_and_a_lost_claim_is_unknown => async |db| {
        let w = world(&db).await;
        let a = queued(&db, &w, "100", T0).await;
        let b = queued(&db, &w, "100", T0).await;
        let now = T0 + 100;
        let items = db.status_writes().claim_dispatch(&claim("w1", None, 2, now)).await.unwrap();
        assert_eq!(items.len(), 2);
        // A stale claim writes nothing, its entry neither.
        let stale = DispatchLease { owner: "w9".into(), attempt: 1 };
        assert!(!db.retry_dispatch(a, &stale, now, "x", &attempt_entry()).await.unwrap());
        assert!(db.timeline_rows(a).await.unwrap().is_empty());
        assert!(db.retry_dispatch(a, &items[0].lease(), now + 500, "130429", &attempt_entry()).await.unwrap());
        assert_eq!(db.timeline_rows(a).await.unwrap().len(), 1);

        // `b`'s worker dies: past its lease, the sweep records the lost attempt.
        let (abandoned, _) = db.release_dispatch(now + 1).await.unwrap();
        assert_eq!(abandoned, 0);
        assert!(db.timeline_rows(b).await.unwrap().is_empty());
        let (abandoned, _) = db.release_dispatch(now + 60_000).await.unwrap();
        assert_eq!(abandoned, 1);
        let rows = db.timeline_rows(b).await.unwrap();
        assert_eq!(rows.len(), 1);
        match &rows[0].detail {
            Detail::DispatchAttempt { attempt, outcome, http_status, latency_ms, .. } => {
                assert_eq!((*attempt, *outcome, *http_status, *latency_ms), (1, AttemptOutcome::Unknown, None, None));
            }
            other => panic!("{other:?}"),
        }
        // Once only.
        db.release_dispatch(now + 120_000).await.unwrap();
        assert_eq!(db.timeline_rows(b).await.unwrap().len(), 1);
    },
}
