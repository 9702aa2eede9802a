use std::collections::HashSet;
use std::sync::Arc;

use crate::fixtures::T0;
use tern_store::{InboxItem, SetAside, StoreError};
use uuid::Uuid;

const LEASE: i64 = 30_000;

tern_store::both_backends! { tern_store::testkit::TestDb;
    items_set_aside_are_kept_and_their_batch_is_done => async |db| {
        let a = Uuid::now_v7();
        db.insert_inbox(a, b"{}", "s", T0).await.unwrap();
        assert_eq!(db.claim_inbox(10, LEASE, T0 + 1).await.unwrap().len(), 1);
        let item = |key: &str| SetAside {
            inbox_id: a,
            kind: "message".into(),
            item_key: key.into(),
            // Whatever the database refused is kept as bytes.
            item: b"{\"text\":\"\\u0000\"}\x00".to_vec(),
            error: "refused".into(),
            attempts: 8,
            created_at: T0 + 5,
        };
        db.set_aside_inbox(a, &[item("wamid.1"), item("wamid.2")], T0 + 5).await.unwrap();
        assert_eq!(db.count_unprocessed_inbox().await.unwrap(), 0);
        assert!(db.claim_inbox(10, LEASE, T0 + 10 * LEASE).await.unwrap().is_empty());
        // Again (a worker whose lease ran out): nothing changes.
        db.set_aside_inbox(a, &[item("wamid.1")], T0 + 9).await.unwrap();
        assert_eq!(db.list_set_aside_inbox(10).await.unwrap(), vec![item("wamid.1"), item("wamid.2")]);
        assert_eq!(db.list_set_aside_inbox(1).await.unwrap().len(), 1);
        // They outlive their batch's pruning.
        assert_eq!(db.prune_processed_inbox(T0 + 100).await.unwrap(), 1);
        assert_eq!(db.list_set_aside_inbox(10).await.unwrap().len(), 2);
        assert!(matches!(db.set_aside_inbox(Uuid::now_v7(), &[], T0).await.unwrap_err(), StoreError::NotFound));
    },

    inbox_claim_lease_and_completion => async |db| {
        let a = Uuid::now_v7();
        let b = Uuid::now_v7();
        let c = Uuid::now_v7();
        // Inserted out of order; claimed oldest first.
        db.insert_inbox(b, b"{\"b\":1}", "sha256=bb", T0 + 1).await.unwrap();
        db.insert_inbox(a, b"{\"a\":1}", "sha256=aa", T0).await.unwrap();
        db.insert_inbox(c, &[0, 159, 255], "sha256=cc", T0 + 2).await.unwrap();
        let err = db.insert_inbox(a, b"x", "s", T0).await.unwrap_err();
        assert!(matches!(&err, StoreError::Conflict { constraint } if constraint == "network_inbox_pkey"), "{err:?}");
        assert_eq!(db.count_unprocessed_inbox().await.unwrap(), 3);

        let now = T0 + 100;
        let first = db.claim_inbox(2, LEASE, now).await.unwrap();
        assert_eq!(first, vec![
            InboxItem { id: a, body: b"{\"a\":1}".to_vec(), received_at: T0, attempts: 1 },
            InboxItem { id: b, body: b"{\"b\":1}".to_vec(), received_at: T0 + 1, attempts: 1 },
        ]);
        let second = db.claim_inbox(10, LEASE, now).await.unwrap();
        assert_eq!(second, vec![InboxItem { id: c, body: vec![0, 159, 255], received_at: T0 + 2, attempts: 1 }]);
        // Everything is leased.
        assert!(db.claim_inbox(10, LEASE, now + LEASE - 1).await.unwrap().is_empty());
        assert!(db.claim_inbox(10, LEASE, now + LEASE).await.unwrap().is_empty());

        db.mark_inbox_processed(a, now + 5).await.unwrap();
        db.mark_inbox_failed(b, "bad payload", now + 2 * LEASE).await.unwrap();
        assert_eq!(db.count_unprocessed_inbox().await.unwrap(), 2);

        // c's lease ends first; b waits for its retry time; a is done.
        let later = db.claim_inbox(10, LEASE, now + LEASE + 1).await.unwrap();
        assert_eq!(later.iter().map(|i| (i.id, i.attempts)).collect::<Vec<_>>(), [(c, 2)]);
        let retry = db.claim_inbox(10, LEASE, now + 2 * LEASE + 1).await.unwrap();
        assert_eq!(retry.iter().map(|i| (i.id, i.attempts)).collect::<Vec<_>>(), [(b, 2)]);
        db.mark_inbox_processed(b, now + 3 * LEASE).await.unwrap();
        db.mark_inbox_processed(c, now + 3 * LEASE).await.unwrap();
        // A late failure report does not resurrect a processed batch.
        db.mark_inbox_failed(c, "late", now).await.unwrap();
        assert_eq!(db.count_unprocessed_inbox().await.unwrap(), 0);
        assert!(db.claim_inbox(10, LEASE, now + 10 * LEASE).await.unwrap().is_empty());

        let missing = Uuid::now_v7();
        assert!(matches!(db.mark_inbox_processed(missing, now).await.unwrap_err(), StoreError::NotFound));
        assert!(matches!(db.mark_inbox_failed(missing, "x", now).await.unwrap_err(), StoreError::NotFound));

        // Pruning removes only processed batches older than the cut-off.
        db.insert_inbox(Uuid::now_v7(), b"{}", "s", T0).await.unwrap();
        assert_eq!(db.prune_processed_inbox(now + 3 * LEASE).await.unwrap(), 1);
        assert_eq!(db.prune_processed_inbox(now + 3 * LEASE + 1).await.unwrap(), 2);
        assert_eq!(db.count_unprocessed_inbox().await.unwrap(), 1);
    },

    inbox_batches_marked_processed_together => async |db| {
        let ids: Vec<Uuid> = (0..5).map(|_| Uuid::now_v7()).collect();
        for (i, id) in ids.iter().enumerate() {
            db.insert_inbox(*id, b"{}", "s", T0 + i as i64).await.unwrap();
        }
        let now = T0 + 100;
        assert_eq!(db.claim_inbox(10, LEASE, now).await.unwrap().len(), 5);
        db.mark_inbox_failed(ids[1], "was failing", now + LEASE).await.unwrap();
        // Three of them (and an id that is not there) in one statement; nothing for none.
        db.mark_inbox_processed_many(&[ids[0], ids[1], ids[3], Uuid::now_v7()], now + 1).await.unwrap();
        db.mark_inbox_processed_many(&[], now + 1).await.unwrap();
        assert_eq!(db.count_unprocessed_inbox().await.unwrap(), 2);
        // The others come back when their lease ends; the processed ones never do.
        let again = db.claim_inbox(10, LEASE, now + LEASE + 1).await.unwrap();
        assert_eq!(again.iter().map(|i| i.id).collect::<Vec<_>>(), [ids[2], ids[4]]);
        // Processed at `now + 1`: pruned by a cut-off after it, not before.
        assert_eq!(db.prune_processed_inbox(now + 1).await.unwrap(), 0);
        assert_eq!(db.prune_processed_inbox(now + 2).await.unwrap(), 3);
    },

    concurrent_claims_never_share_a_batch => async |db| {
        let total = 60;
        for i in 0..total {
            db.insert_inbox(Uuid::now_v7(), format!("{{\"n\":{i}}}").as_bytes(), "s", T0 + i).await.unwrap();
        }
        // Workers start together and claim small batches until the inbox is empty.
        let barrier = Arc::new(tokio::sync::Barrier::new(4));
        let workers: Vec<_> = (0..4)
            .map(|_| {
                let db = db.clone();
                let barrier = barrier.clone();
                tokio::spawn(async move {
                    barrier.wait().await;
                    let mut mine = Vec::new();
                    loop {
                        let batch = db.claim_inbox(3, LEASE, T0 + 1_000).await.unwrap();
                        if batch.is_empty() {
                            return mine;
                        }
                        mine.extend(batch.into_iter().map(|item| {
                            assert_eq!(item.attempts, 1, "claimed twice: {item:?}");
                            item.id
                        }));
                    }
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
        assert_eq!((claimed, seen.len()), (total as usize, total as usize));
        assert_eq!(db.count_unprocessed_inbox().await.unwrap(), total);
    },

    network_event_keys_dedupe => async |db| {
        assert!(db.remember_network_event("wamid.1:delivered", T0).await.unwrap());
        assert!(!db.remember_network_event("wamid.1:delivered", T0 + 1).await.unwrap());
        assert!(db.remember_network_event("wamid.1:read", T0 + 2).await.unwrap());

        // Racing callers: exactly one first.
        let tasks: Vec<_> = (0..8)
            .map(|_| {
                let db = db.clone();
                tokio::spawn(async move { db.remember_network_event("wamid.2:sent", T0 + 3).await.unwrap() })
            })
            .collect();
        let mut firsts = 0;
        for t in tasks {
            firsts += usize::from(t.await.unwrap());
        }
        assert_eq!(firsts, 1);

        // A failed handling forgets its key so the retry is handled.
        db.forget_network_event("wamid.1:read").await.unwrap();
        db.forget_network_event("never-seen").await.unwrap();
        assert!(db.remember_network_event("wamid.1:read", T0 + 4).await.unwrap());

        // Pruning by age: strictly older than the cut-off.
        assert_eq!(db.prune_network_event_keys(T0).await.unwrap(), 0);
        assert_eq!(db.prune_network_event_keys(T0 + 4).await.unwrap(), 2);
        assert!(db.remember_network_event("wamid.1:delivered", T0 + 5).await.unwrap());
        assert!(!db.remember_network_event("wamid.1:read", T0 + 5).await.unwrap());
    },
}
