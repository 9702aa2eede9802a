//! The request log's recorder: it never waits — a full buffer drops the entry and counts it —
//! and what it kept is written by the writer in batches. Pruning keeps what is younger than
//! the retention and removes everything when the log is off.

use tern_core::request_log::{self, RequestLog, RequestLogSettings};
use tern_domain::time::now_ms;
use tern_store::{RequestLogFilter, RequestLogRow};
use uuid::Uuid;

fn row(org_id: Uuid, at: i64) -> RequestLogRow {
    let mut id = *Uuid::now_v7().as_bytes();
    id[..6].copy_from_slice(&at.to_be_bytes()[2..]);
    RequestLogRow {
        id: Uuid::from_bytes(id),
        org_id: Some(org_id),
        at,
        method: "GET".into(),
        route: Some("/phone-numbers".into()),
        path: "/phone-numbers".into(),
        status: 200,
        error_code: None,
        key_id: None,
        key_name: None,
        key_prefix: None,
        latency_ms: 1,
        address: None,
        user_agent: None,
        idempotency_key: None,
        error_body: None,
        message_id: None,
    }
}

async fn stored(db: &tern_store::Db, org: Uuid) -> usize {
    db.list_request_log(org, &RequestLogFilter::default(), None, 10_000)
        .await
        .unwrap()
        .len()
}

/// One thread: the writer cannot drain the channel between two `record` calls, so what is
/// dropped is exact.
#[tokio::test(flavor = "current_thread")]
async fn a_full_buffer_drops_and_counts_and_never_waits() {
    let (db, _dir) = tern_store::testkit::fresh_sqlite().await;
    let org = Uuid::now_v7();
    let log = RequestLog::start(
        db.clone(),
        RequestLogSettings {
            days: 7,
            capacity: 3,
        },
    );
    let now = now_ms();
    for i in 0..10 {
        log.record(row(org, now + i));
    }
    assert_eq!(log.dropped(), 7);
    log.flush().await;
    assert_eq!(stored(&db, org).await, 3);

    // With room again, everything is kept; many entries go in batches.
    for i in 0..3 {
        log.record(row(org, now + 100 + i));
    }
    log.flush().await;
    assert_eq!(stored(&db, org).await, 6);
    assert_eq!(log.dropped(), 7);

    // The writer ends (its last batch written) once the recorder is gone.
    let done = log.finished();
    drop(log);
    done.await;
}

#[tokio::test(flavor = "current_thread")]
async fn off_records_nothing() {
    let (db, _dir) = tern_store::testkit::fresh_sqlite().await;
    let org = Uuid::now_v7();
    let log = RequestLog::start(
        db.clone(),
        RequestLogSettings {
            days: 0,
            capacity: 8,
        },
    );
    assert!(!log.enabled());
    log.record(row(org, now_ms()));
    log.flush().await;
    assert_eq!(stored(&db, org).await, 0);
    assert_eq!(log.dropped(), 0);
}

#[tokio::test(flavor = "current_thread")]
async fn entries_older_than_the_retention_are_pruned() {
    let (db, _dir) = tern_store::testkit::fresh_sqlite().await;
    let org = Uuid::now_v7();
    let day = 86_400_000;
    let now = now_ms();
    let rows: Vec<_> = [10 * day, 8 * day, 7 * day + 1, 6 * day, 1]
        .iter()
        .map(|age| row(org, now - age))
        .collect();
    db.insert_request_log(&rows).await.unwrap();
    assert_eq!(request_log::prune(&db, 7, now).await.unwrap(), 3);
    assert_eq!(stored(&db, org).await, 2);
    // Off: what an earlier run kept goes too.
    assert_eq!(request_log::prune(&db, 0, now + 1).await.unwrap(), 2);
    assert_eq!(stored(&db, org).await, 0);
}
