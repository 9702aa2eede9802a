use std::collections::HashSet;
use std::sync::Arc;

use crate::fixtures::{T0, insert_contact, insert_org, phone_number};
use serde_json::json;
use tern_domain::message::{Direction, Status};
use tern_store::{
    Db, InboundMediaJob, InboundMediaState, Media, MediaSource, Message, NewInboundMedia,
    StoreError,
};
use uuid::Uuid;

const HOUR: i64 = 60 * 60 * 1000;
const LEASE: i64 = 30_000;

/// A media of `org_id` with bytes `sha` stored under `key`, expiring at `expires_at`.
fn media(org_id: Uuid, sha: &str, key: &str, expires_at: i64) -> Media {
    Media {
        id: Uuid::now_v7(),
        org_id,
        sha256: sha.into(),
        mime_type: "image/jpeg".into(),
        size_bytes: 1_234,
        filename: None,
        object_key: key.into(),
        animated: false,
        source: MediaSource::Upload,
        created_at: T0,
        expires_at,
    }
}

async fn stored(db: &Db, org_id: Uuid, sha: &str, key: &str, expires_at: i64) -> Media {
    let m = media(org_id, sha, key, expires_at);
    db.insert_media(&m).await.unwrap();
    m
}

fn job(org_id: Uuid, wamid: &str) -> NewInboundMedia {
    NewInboundMedia {
        org_id,
        wamid: wamid.into(),
        phone_number_id: "100".into(),
        network_media_id: format!("net-{wamid}"),
        mime_type: Some("image/jpeg".into()),
        sha256: Some("q1w2e3==".into()),
        filename: None,
    }
}

/// An organisation with number "100", a contact and their conversation; returns a message of
/// theirs (inbound, received at `T0`) for the caller to adjust and insert.
async fn message_world(db: &Db) -> Message {
    let org = insert_org(db).await;
    db.insert_phone_number(&phone_number(org.id, "100"))
        .await
        .unwrap();
    let contact = insert_contact(db, org.id, "16505551234", T0).await;
    let conversation = db
        .get_or_create_conversation(org.id, contact.id, "100", Uuid::now_v7(), T0)
        .await
        .unwrap();
    Message {
        id: Uuid::now_v7(),
        org_id: org.id,
        conversation_id: conversation.id,
        contact_id: contact.id,
        phone_number_id: "100".into(),
        direction: Direction::Inbound,
        r#type: "image".into(),
        status: Status::Received,
        template_name: None,
        template_language: None,
        text: None,
        media_id: None,
        wamid: Some("wamid.in".into()),
        request: json!({"id": "wamid.in"}),
        campaign_id: None,
        created_at: T0,
        sent_at: None,
        delivered_at: None,
        read_at: None,
        failed_at: None,
        failure_code: None,
        failure: None,
        updated_at: T0,
        content: Some(json!({"mime_type": "image/jpeg"})),
        reply_to: None,
        referral: None,
        edited_at: None,
        revoked_at: None,
        pricing: None,
    }
}

fn wamids(jobs: &[InboundMediaJob]) -> Vec<&str> {
    jobs.iter().map(|j| j.wamid.as_str()).collect()
}

tern_store::both_backends! { tern_store::testkit::TestDb;
    media_rows_round_trip_and_stay_in_their_organisation => async |db| {
        let org = insert_org(&db).await;
        let other = insert_org(&db).await;
        let plain = stored(&db, org.id, "aa", "k/aa", T0 + HOUR).await;
        let sticker = Media {
            filename: Some("wave.webp".into()),
            mime_type: "image/webp".into(),
            animated: true,
            source: MediaSource::Inbound,
            size_bytes: 0,
            ..media(org.id, "bb", "k/bb", T0 - 1)
        };
        db.insert_media(&sticker).await.unwrap();
        let imported = Media { source: MediaSource::Import, ..media(other.id, "aa", "k/other", T0 + HOUR) };
        db.insert_media(&imported).await.unwrap();

        assert_eq!(db.get_media(org.id, plain.id).await.unwrap(), Some(plain.clone()));
        // Expired rows are still returned: the caller decides what expiry means.
        assert_eq!(db.get_media(org.id, sticker.id).await.unwrap(), Some(sticker.clone()));
        assert_eq!(db.get_media(other.id, imported.id).await.unwrap(), Some(imported.clone()));
        // Another organisation's media is invisible by org; by id alone (signed links) it is not.
        assert_eq!(db.get_media(other.id, plain.id).await.unwrap(), None);
        assert_eq!(db.get_media(org.id, imported.id).await.unwrap(), None);
        assert_eq!(db.get_media_by_id(imported.id).await.unwrap(), Some(imported));
        assert_eq!(db.get_media_by_id(sticker.id).await.unwrap(), Some(sticker));
        assert_eq!(db.get_media_by_id(Uuid::now_v7()).await.unwrap(), None);
        assert_eq!(db.get_media(org.id, Uuid::now_v7()).await.unwrap(), None);

        let err = db.insert_media(&plain).await.unwrap_err();
        assert!(matches!(&err, StoreError::Conflict { constraint } if constraint == "media_pkey"), "{err:?}");
        // Several rows may share one blob.
        let twin = stored(&db, org.id, "aa", "k/aa", T0 + 2 * HOUR).await;
        assert_eq!(db.get_media(org.id, twin.id).await.unwrap().unwrap().object_key, "k/aa");
    },

    media_source_names => async |_db| {
        for s in MediaSource::ALL {
            assert_eq!(MediaSource::parse(s.as_str()), Some(*s));
            assert_eq!(MediaSource::try_from(s.to_string()).unwrap(), *s);
        }
        assert_eq!(
            MediaSource::ALL.iter().map(|s| s.as_str()).collect::<Vec<_>>(),
            ["upload", "import", "inbound"]
        );
        assert_eq!(MediaSource::parse("Upload"), None);
        assert!(MediaSource::try_from(String::from("url")).is_err());
    },

    live_media_by_sha256_respects_expiry_and_organisation => async |db| {
        let org = insert_org(&db).await;
        let other = insert_org(&db).await;
        let now = T0 + 1_000;
        assert_eq!(db.live_media_by_sha256(org.id, "aa", now).await.unwrap(), None);
        stored(&db, org.id, "aa", "k/old", now).await; // expires exactly at now: dead
        assert_eq!(db.live_media_by_sha256(org.id, "aa", now).await.unwrap(), None);
        let short = stored(&db, org.id, "aa", "k/1", now + 10).await;
        assert_eq!(db.live_media_by_sha256(org.id, "aa", now).await.unwrap(), Some(short.clone()));
        assert_eq!(db.live_media_by_sha256(org.id, "aa", now - 1).await.unwrap().map(|m| m.id), Some(short.id));
        let long = stored(&db, org.id, "aa", "k/1", now + HOUR).await;
        stored(&db, other.id, "cc", "k/c", now + HOUR).await;

        // The one living longest.
        assert_eq!(db.live_media_by_sha256(org.id, "aa", now).await.unwrap(), Some(long.clone()));
        // Boundaries: alive while expires_at > now.
        assert_eq!(db.live_media_by_sha256(org.id, "aa", now + HOUR - 1).await.unwrap(), Some(long.clone()));
        assert_eq!(db.live_media_by_sha256(org.id, "aa", now + HOUR).await.unwrap(), None);
        // Another organisation's bytes are never reused; nor are other bytes.
        assert_eq!(db.live_media_by_sha256(other.id, "aa", now).await.unwrap(), None);
        assert_eq!(db.live_media_by_sha256(org.id, "cc", now).await.unwrap(), None);
        assert_eq!(db.live_media_by_sha256(org.id, "AA", now).await.unwrap(), None);
        assert_eq!(db.live_media_by_sha256(other.id, "cc", now).await.unwrap().unwrap().object_key, "k/c");
    },

    delete_expired_media_reports_only_unreferenced_blobs => async |db| {
        let org = insert_org(&db).await;
        let other = insert_org(&db).await;
        let now = T0 + 1_000;
        let shared_dead = stored(&db, org.id, "s", "k/shared", now - 5).await;
        let shared_live = stored(&db, org.id, "s", "k/shared", now + 1).await;
        let twin_a = stored(&db, org.id, "t", "k/twin", now - 4).await;
        let twin_b = stored(&db, org.id, "t", "k/twin", now - 3).await;
        let at_boundary = stored(&db, other.id, "b", "k/boundary", now).await;
        let alive = stored(&db, other.id, "l", "k/alive", now + 1).await;
        db.save_network_media_id(shared_dead.id, "100", "net-1", now + HOUR).await.unwrap();
        db.save_network_media_id(alive.id, "100", "net-2", now + HOUR).await.unwrap();

        assert!(db.delete_expired_media(now, 0).await.unwrap().is_empty());
        // Earliest expiry first, `limit` rows: the shared blob is still named by a live row.
        assert!(db.delete_expired_media(now, 1).await.unwrap().is_empty());
        assert_eq!(db.get_media_by_id(shared_dead.id).await.unwrap(), None);
        assert!(db.get_media_by_id(twin_a.id).await.unwrap().is_some());
        // Its network ids went with it (and the row cannot get new ones).
        assert_eq!(db.network_media_id(shared_dead.id, "100", now).await.unwrap(), None);
        assert!(matches!(
            db.save_network_media_id(shared_dead.id, "100", "net-x", now + HOUR).await.unwrap_err(),
            StoreError::NotFound
        ));

        // Both rows of a blob in one batch: the key once. expires_at == now counts as expired.
        assert_eq!(db.delete_expired_media(now, 10).await.unwrap(), ["k/boundary", "k/twin"]);
        for gone in [twin_a.id, twin_b.id, at_boundary.id] {
            assert_eq!(db.get_media_by_id(gone).await.unwrap(), None);
        }
        assert!(db.delete_expired_media(now, 10).await.unwrap().is_empty());
        assert!(db.get_media_by_id(shared_live.id).await.unwrap().is_some());
        assert_eq!(db.network_media_id(alive.id, "100", now).await.unwrap().as_deref(), Some("net-2"));

        // The last row naming the shared blob expires: now it is reported.
        assert_eq!(db.delete_expired_media(now + 1, 10).await.unwrap(), ["k/alive", "k/shared"]);
        assert_eq!(db.network_media_id(alive.id, "100", now).await.unwrap(), None);
    },

    concurrent_sweepers_report_a_shared_blob_once => async |db| {
        let org = insert_org(&db).await;
        for i in 0..6 {
            stored(&db, org.id, "s", "k/shared", T0 + i).await;
            stored(&db, org.id, "x", &format!("k/{i}"), T0 + i).await;
        }
        let barrier = Arc::new(tokio::sync::Barrier::new(3));
        let sweepers: Vec<_> = (0..3)
            .map(|_| {
                let db = db.clone();
                let barrier = barrier.clone();
                tokio::spawn(async move {
                    barrier.wait().await;
                    let mut keys = Vec::new();
                    // 3 sweepers × 8 batches × 2 rows: room for the 12 rows, whoever is fastest.
                    for _ in 0..8 {
                        keys.extend(db.delete_expired_media(T0 + 100, 2).await.unwrap());
                    }
                    keys
                })
            })
            .collect();
        let mut all = Vec::new();
        for s in sweepers {
            all.extend(s.await.unwrap());
        }
        all.sort();
        let mut expected: Vec<String> = (0..6).map(|i| format!("k/{i}")).collect();
        expected.push("k/shared".into());
        expected.sort();
        assert_eq!(all, expected);
    },

    network_media_ids_per_number_with_expiry => async |db| {
        let org = insert_org(&db).await;
        let m = stored(&db, org.id, "aa", "k/aa", T0 + 30 * 24 * HOUR).await;
        let n = stored(&db, org.id, "bb", "k/bb", T0 + 30 * 24 * HOUR).await;
        assert_eq!(db.network_media_id(m.id, "100", T0).await.unwrap(), None);

        db.save_network_media_id(m.id, "100", "net-a", T0 + HOUR).await.unwrap();
        db.save_network_media_id(m.id, "200", "net-b", T0 + 2 * HOUR).await.unwrap();
        db.save_network_media_id(n.id, "100", "net-c", T0 + HOUR).await.unwrap();
        assert_eq!(db.network_media_id(m.id, "100", T0).await.unwrap().as_deref(), Some("net-a"));
        assert_eq!(db.network_media_id(m.id, "200", T0).await.unwrap().as_deref(), Some("net-b"));
        assert_eq!(db.network_media_id(n.id, "100", T0).await.unwrap().as_deref(), Some("net-c"));
        assert_eq!(db.network_media_id(m.id, "300", T0).await.unwrap(), None);
        // Valid while expires_at > now.
        assert_eq!(db.network_media_id(m.id, "100", T0 + HOUR - 1).await.unwrap().as_deref(), Some("net-a"));
        assert_eq!(db.network_media_id(m.id, "100", T0 + HOUR).await.unwrap(), None);

        // A new upload replaces the old id.
        db.save_network_media_id(m.id, "100", "net-a2", T0 + 3 * HOUR).await.unwrap();
        assert_eq!(db.network_media_id(m.id, "100", T0 + 2 * HOUR).await.unwrap().as_deref(), Some("net-a2"));

        // Forgotten for one number only; forgetting nothing is fine.
        db.forget_network_media_id(m.id, "100").await.unwrap();
        db.forget_network_media_id(m.id, "100").await.unwrap();
        db.forget_network_media_id(Uuid::now_v7(), "100").await.unwrap();
        assert_eq!(db.network_media_id(m.id, "100", T0).await.unwrap(), None);
        assert_eq!(db.network_media_id(m.id, "200", T0).await.unwrap().as_deref(), Some("net-b"));
        assert_eq!(db.network_media_id(n.id, "100", T0).await.unwrap().as_deref(), Some("net-c"));

        assert!(matches!(
            db.save_network_media_id(Uuid::now_v7(), "100", "net-z", T0 + HOUR).await.unwrap_err(),
            StoreError::NotFound
        ));
    },

    import_slots_are_leased_per_organisation => async |db| {
        let org = insert_org(&db).await;
        let other = insert_org(&db).await;
        let now = T0;
        let until = now + LEASE;
        assert_eq!(db.claim_import_slot(org.id, 0, "h0", now, until).await.unwrap(), None);
        assert_eq!(db.claim_import_slot(org.id, 2, "h1", now, until).await.unwrap(), Some(0));
        assert_eq!(db.claim_import_slot(org.id, 2, "h2", now, until + 5).await.unwrap(), Some(1));
        assert_eq!(db.claim_import_slot(org.id, 2, "h3", now, until).await.unwrap(), None);
        // Slots are per organisation.
        assert_eq!(db.claim_import_slot(other.id, 2, "o1", now, until).await.unwrap(), Some(0));

        // Only the holder releases; then the slot is free at once.
        db.release_import_slot(org.id, 1, "h1").await.unwrap();
        db.release_import_slot(org.id, 7, "h1").await.unwrap();
        assert_eq!(db.claim_import_slot(org.id, 2, "h3", now, until).await.unwrap(), None);
        db.release_import_slot(org.id, 1, "h2").await.unwrap();
        assert_eq!(db.claim_import_slot(org.id, 2, "h3", now, until).await.unwrap(), Some(1));

        // A lease is held until lease_until, free from then on.
        assert_eq!(db.claim_import_slot(org.id, 2, "h4", until - 1, until + LEASE).await.unwrap(), None);
        assert_eq!(db.claim_import_slot(org.id, 2, "h4", until, until + LEASE).await.unwrap(), Some(0));
        // h1 lost slot 0 to h4 when its lease ended: its late release changes nothing.
        db.release_import_slot(org.id, 0, "h1").await.unwrap();
        assert_eq!(db.claim_import_slot(org.id, 2, "h5", until, until + LEASE).await.unwrap(), Some(1));
        assert_eq!(db.claim_import_slot(org.id, 2, "h6", until, until + LEASE).await.unwrap(), None);
        // A larger allowance opens more slots.
        assert_eq!(db.claim_import_slot(org.id, 3, "h6", until, until + LEASE).await.unwrap(), Some(2));
        // The other organisation's slot was never touched.
        assert_eq!(db.claim_import_slot(other.id, 1, "o2", now + 1, until).await.unwrap(), None);
    },

    concurrent_import_claims_take_at_most_the_allowance => async |db| {
        let org = insert_org(&db).await;
        let barrier = Arc::new(tokio::sync::Barrier::new(10));
        let claimers: Vec<_> = (0..10)
            .map(|n| {
                let db = db.clone();
                let barrier = barrier.clone();
                tokio::spawn(async move {
                    barrier.wait().await;
                    db.claim_import_slot(org.id, 2, &format!("h{n}"), T0, T0 + LEASE).await.unwrap()
                })
            })
            .collect();
        let mut won = Vec::new();
        for c in claimers {
            won.extend(c.await.unwrap());
        }
        won.sort();
        assert_eq!(won, [0, 1]);

        // The same once the leases have ended: two of ten take over.
        let (a, b, c, d, e, f, g, h, i, j) = tokio::join!(
            db.claim_import_slot(org.id, 2, "a", T0 + LEASE, T0 + 2 * LEASE),
            db.claim_import_slot(org.id, 2, "b", T0 + LEASE, T0 + 2 * LEASE),
            db.claim_import_slot(org.id, 2, "c", T0 + LEASE, T0 + 2 * LEASE),
            db.claim_import_slot(org.id, 2, "d", T0 + LEASE, T0 + 2 * LEASE),
            db.claim_import_slot(org.id, 2, "e", T0 + LEASE, T0 + 2 * LEASE),
            db.claim_import_slot(org.id, 2, "f", T0 + LEASE, T0 + 2 * LEASE),
            db.claim_import_slot(org.id, 2, "g", T0 + LEASE, T0 + 2 * LEASE),
            db.claim_import_slot(org.id, 2, "h", T0 + LEASE, T0 + 2 * LEASE),
            db.claim_import_slot(org.id, 2, "i", T0 + LEASE, T0 + 2 * LEASE),
            db.claim_import_slot(org.id, 2, "j", T0 + LEASE, T0 + 2 * LEASE),
        );
        let mut won: Vec<i64> = [a, b, c, d, e, f, g, h, i, j]
            .into_iter()
            .filter_map(|r| r.unwrap())
            .collect();
        won.sort();
        assert_eq!(won, [0, 1]);
    },

    inbound_media_jobs_lease_retry_and_fail => async |db| {
        let org = insert_org(&db).await;
        let other = insert_org(&db).await;
        assert_eq!(db.next_inbound_media_due().await.unwrap(), None);
        assert!(db.enqueue_inbound_media(&job(org.id, "w1"), T0).await.unwrap());
        assert!(db.enqueue_inbound_media(&job(org.id, "w2"), T0 + 5).await.unwrap());
        // The network delivered w1 twice: queued once, the first job unchanged.
        let again = NewInboundMedia { network_media_id: "changed".into(), ..job(org.id, "w1") };
        assert!(!db.enqueue_inbound_media(&again, T0 + 9).await.unwrap());
        // The same wamid in another organisation is another job.
        assert!(db.enqueue_inbound_media(&job(other.id, "w1"), T0 + 20).await.unwrap());
        assert_eq!(db.next_inbound_media_due().await.unwrap(), Some(T0));
        assert_eq!(
            db.get_inbound_media(org.id, "w1").await.unwrap(),
            Some(InboundMediaState {
                attempts: 0, next_attempt_at: T0, locked_until: None, lease_owner: None,
                last_error: None, media_id: None, done_at: None, failed_at: None,
            })
        );
        assert_eq!(db.get_inbound_media(org.id, "nope").await.unwrap(), None);

        // Due from enqueue time on, earliest first, at most `limit`.
        assert!(db.claim_inbound_media("a", T0 - 1, LEASE, 10).await.unwrap().is_empty());
        assert!(db.claim_inbound_media("a", T0 + 100, LEASE, 0).await.unwrap().is_empty());
        let first = db.claim_inbound_media("a", T0, LEASE, 10).await.unwrap();
        assert_eq!(first, vec![InboundMediaJob {
            org_id: org.id,
            wamid: "w1".into(),
            phone_number_id: "100".into(),
            network_media_id: "net-w1".into(),
            mime_type: Some("image/jpeg".into()),
            sha256: Some("q1w2e3==".into()),
            filename: None,
            attempts: 1,
            lease_owner: "a".into(),
            created_at: T0,
        }]);
        let now = T0 + 100;
        let second = db.claim_inbound_media("b", now, LEASE, 1).await.unwrap();
        assert_eq!(wamids(&second), ["w2"]);
        assert_eq!((second[0].attempts, second[0].lease_owner.as_str()), (1, "b"));
        let third = db.claim_inbound_media("b", now, LEASE, 10).await.unwrap();
        assert_eq!((third[0].org_id, wamids(&third)), (other.id, vec!["w1"]));
        // Everything is leased; the earliest due is w1's lease end, not a past time.
        assert!(db.claim_inbound_media("c", now, LEASE, 10).await.unwrap().is_empty());
        assert_eq!(db.next_inbound_media_due().await.unwrap(), Some(T0 + LEASE));
        let state = db.get_inbound_media(org.id, "w1").await.unwrap().unwrap();
        assert_eq!((state.attempts, state.locked_until, state.lease_owner.as_deref()), (1, Some(T0 + LEASE), Some("a")));

        // w1's worker died: its lease ends at T0 + LEASE exactly and "c" takes the job over.
        assert!(db.claim_inbound_media("c", T0 + LEASE - 1, LEASE, 10).await.unwrap().is_empty());
        let taken = db.claim_inbound_media("c", T0 + LEASE, LEASE, 10).await.unwrap();
        assert_eq!(wamids(&taken), ["w1"]);
        assert_eq!((taken[0].attempts, taken[0].lease_owner.as_str()), (2, "c"));
        // "a" comes back late: its outcome is refused whatever it is.
        let late = Uuid::now_v7();
        assert!(!db.finish_inbound_media(org.id, "w1", "a", late, now).await.unwrap());
        assert!(!db.retry_inbound_media(org.id, "w1", "a", now, "late").await.unwrap());
        assert!(!db.fail_inbound_media(org.id, "w1", "a", "late", now).await.unwrap());
        // Another organisation's job of the same wamid is not "c"'s.
        assert!(!db.retry_inbound_media(other.id, "w1", "c", now, "x").await.unwrap());

        // Retry: the lease is cleared and the job is due at the given time.
        let retry_at = T0 + 10 * LEASE;
        assert!(db.retry_inbound_media(org.id, "w1", "c", retry_at, "HTTP 503").await.unwrap());
        assert!(!db.retry_inbound_media(org.id, "w1", "c", retry_at, "twice").await.unwrap());
        assert_eq!(
            db.get_inbound_media(org.id, "w1").await.unwrap(),
            Some(InboundMediaState {
                attempts: 2, next_attempt_at: retry_at, locked_until: None, lease_owner: None,
                last_error: Some("HTTP 503".into()), media_id: None, done_at: None, failed_at: None,
            })
        );
        // Failing for good is terminal: never claimed again, no later outcome.
        assert!(db.fail_inbound_media(org.id, "w2", "b", "media expired", now + 1).await.unwrap());
        assert!(!db.fail_inbound_media(org.id, "w2", "b", "again", now + 2).await.unwrap());
        assert!(!db.finish_inbound_media(org.id, "w2", "b", late, now + 2).await.unwrap());
        assert!(!db.retry_inbound_media(org.id, "w2", "b", now, "again").await.unwrap());
        let failed = db.get_inbound_media(org.id, "w2").await.unwrap().unwrap();
        assert_eq!((failed.failed_at, failed.last_error.as_deref(), failed.lease_owner), (Some(now + 1), Some("media expired"), None));
        assert!(db.fail_inbound_media(other.id, "w1", "b", "gone", now + 1).await.unwrap());

        assert_eq!(db.next_inbound_media_due().await.unwrap(), Some(retry_at));
        assert!(db.claim_inbound_media("d", retry_at - 1, LEASE, 10).await.unwrap().is_empty());
        let retried = db.claim_inbound_media("d", retry_at, LEASE, 10).await.unwrap();
        assert_eq!((wamids(&retried), retried[0].attempts), (vec!["w1"], 3));
        let m = Uuid::now_v7();
        assert!(db.finish_inbound_media(org.id, "w1", "d", m, retry_at + 1).await.unwrap());
        assert!(!db.finish_inbound_media(org.id, "w1", "d", m, retry_at + 2).await.unwrap());
        assert!(!db.fail_inbound_media(org.id, "w1", "d", "after done", retry_at + 2).await.unwrap());
        assert_eq!(
            db.get_inbound_media(org.id, "w1").await.unwrap(),
            Some(InboundMediaState {
                attempts: 3, next_attempt_at: retry_at + LEASE, locked_until: None, lease_owner: None,
                last_error: Some("HTTP 503".into()), media_id: Some(m), done_at: Some(retry_at + 1),
                failed_at: None,
            })
        );
        // Nothing open any more; closed jobs are never claimed and are pruned by age.
        assert_eq!(db.next_inbound_media_due().await.unwrap(), None);
        assert!(db.claim_inbound_media("e", retry_at * 2, LEASE, 10).await.unwrap().is_empty());
        assert!(db.enqueue_inbound_media(&job(org.id, "w3"), T0).await.unwrap());
        assert_eq!(db.prune_inbound_media(now + 1).await.unwrap(), 0);
        assert_eq!(db.prune_inbound_media(now + 2).await.unwrap(), 2);
        assert_eq!(db.prune_inbound_media(retry_at + 2).await.unwrap(), 1);
        assert_eq!(db.get_inbound_media(org.id, "w1").await.unwrap(), None);
        assert!(db.get_inbound_media(org.id, "w3").await.unwrap().is_some());
        assert_eq!(db.next_inbound_media_due().await.unwrap(), Some(T0));
    },

    finishing_an_inbound_download_gives_the_message_its_media => async |db| {
        let base = message_world(&db).await;
        let org_id = base.org_id;
        db.insert_message(&base).await.unwrap();
        let revoked = Message {
            id: Uuid::now_v7(),
            wamid: Some("wamid.revoked".into()),
            content: None,
            revoked_at: Some(T0 + 1),
            ..base.clone()
        };
        db.insert_message(&revoked).await.unwrap();
        let outbound = Message {
            id: Uuid::now_v7(),
            direction: Direction::Outbound,
            status: Status::Sent,
            wamid: Some("wamid.out".into()),
            ..base.clone()
        };
        db.insert_message(&outbound).await.unwrap();
        for wamid in ["wamid.in", "wamid.revoked", "wamid.out", "wamid.unknown"] {
            assert!(db.enqueue_inbound_media(&job(org_id, wamid), T0).await.unwrap());
        }
        let claimed = db.claim_inbound_media("w", T0 + 10, LEASE, 10).await.unwrap();
        assert_eq!(claimed.len(), 4);

        // The inbound message gets the media and a new updated_at.
        let m = Uuid::now_v7();
        assert!(db.finish_inbound_media(org_id, "wamid.in", "w", m, T0 + 50).await.unwrap());
        let msg = db.get_message(org_id, base.id).await.unwrap().unwrap();
        assert_eq!((msg.media_id, msg.updated_at), (Some(m), T0 + 50));
        assert_eq!(msg.content, base.content);
        // A deleted message, an outbound one, and one Tern does not hold are left alone; the
        // jobs are done all the same.
        for wamid in ["wamid.revoked", "wamid.out", "wamid.unknown"] {
            assert!(db.finish_inbound_media(org_id, wamid, "w", Uuid::now_v7(), T0 + 60).await.unwrap());
            assert!(db.get_inbound_media(org_id, wamid).await.unwrap().unwrap().done_at.is_some());
        }
        let r = db.get_message(org_id, revoked.id).await.unwrap().unwrap();
        assert_eq!((r.media_id, r.updated_at), (None, T0));
        let o = db.get_message(org_id, outbound.id).await.unwrap().unwrap();
        assert_eq!((o.media_id, o.updated_at), (None, T0));

        // Another organisation's job never touches this organisation's message.
        let other = insert_org(&db).await;
        assert!(db.enqueue_inbound_media(&job(other.id, "wamid.in"), T0).await.unwrap());
        assert_eq!(wamids(&db.claim_inbound_media("x", T0 + 70, LEASE, 10).await.unwrap()), ["wamid.in"]);
        assert!(db.finish_inbound_media(other.id, "wamid.in", "x", Uuid::now_v7(), T0 + 80).await.unwrap());
        let msg = db.get_message(org_id, base.id).await.unwrap().unwrap();
        assert_eq!((msg.media_id, msg.updated_at), (Some(m), T0 + 50));
    },

    concurrent_inbound_claimers_never_share_a_job => async |db| {
        let org = insert_org(&db).await;
        let total = 40;
        for i in 0..total {
            assert!(db.enqueue_inbound_media(&job(org.id, &format!("w{i:02}")), T0 + i).await.unwrap());
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
                        let batch = db.claim_inbound_media(&owner, T0 + 1_000, LEASE, 3).await.unwrap();
                        if batch.is_empty() {
                            return mine;
                        }
                        for j in batch {
                            assert_eq!((j.attempts, j.lease_owner.as_str()), (1, owner.as_str()), "{j:?}");
                            mine.push(j.wamid);
                        }
                    }
                })
            })
            .collect();
        let mut seen = HashSet::new();
        let mut claimed = 0;
        for w in workers {
            for wamid in w.await.unwrap() {
                claimed += 1;
                assert!(seen.insert(wamid.clone()), "{wamid} claimed by two workers");
            }
        }
        assert_eq!((claimed, seen.len()), (total as usize, total as usize));
        assert_eq!(db.next_inbound_media_due().await.unwrap(), Some(T0 + 1_000 + LEASE));
    },
}
