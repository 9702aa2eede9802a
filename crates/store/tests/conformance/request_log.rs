//! The request log: batched inserts, the filtered keyset list, the lookup by request id and
//! the bounded pruning by id range.

use crate::fixtures::{self, T0};
use tern_store::{RequestLogFilter, RequestLogRow, v7_floor};
use uuid::Uuid;

/// A request at `at` (its id a v7 of that millisecond, as the API's ids are).
fn row(org_id: Option<Uuid>, at: i64, status: i64) -> RequestLogRow {
    let mut id = *Uuid::now_v7().as_bytes();
    id[..6].copy_from_slice(&at.to_be_bytes()[2..]);
    RequestLogRow {
        id: Uuid::from_bytes(id),
        org_id,
        at,
        method: "POST".into(),
        route: Some("/messages".into()),
        path: "/messages".into(),
        status,
        error_code: (status >= 400).then(|| "validation_failed".to_string()),
        key_id: None,
        key_name: Some("ci".into()),
        key_prefix: Some("tern_ab12".into()),
        latency_ms: 3,
        address: Some("203.0.113.9".into()),
        user_agent: Some("curl/8".into()),
        idempotency_key: Some("order-1234".into()),
        error_body: (status >= 400).then(|| r#"{"code":"validation_failed"}"#.to_string()),
        message_id: (status == 202).then(Uuid::now_v7),
    }
}

tern_store::both_backends! { tern_store::testkit::TestDb;
    request_log_rows_are_listed_filtered_found_and_pruned => async |db| {
        let org = fixtures::insert_org(&db).await;
        let other = fixtures::insert_org(&db).await;
        let key = Uuid::now_v7();
        let mut rows: Vec<RequestLogRow> = (0..600)
            .map(|i| row(Some(org.id), T0 + i, if i % 3 == 0 { 422 } else { 202 }))
            .collect();
        rows[599].key_id = Some(key);
        rows[599].route = Some("/messages/{message_id}".into());
        rows[599].method = "GET".into();
        rows.push(row(Some(other.id), T0 + 5, 202));
        rows.push(row(None, T0 + 6, 401));
        // More than one statement's worth, in one call; a repeat changes nothing.
        db.insert_request_log(&rows).await.unwrap();
        db.insert_request_log(&rows[..2]).await.unwrap();

        let any = RequestLogFilter::default();
        let page = db.list_request_log(org.id, &any, None, 10).await.unwrap();
        assert_eq!(page.len(), 10);
        assert_eq!(page[0], rows[599]);
        assert!(page.windows(2).all(|w| (w[0].at, w[0].id) > (w[1].at, w[1].id)));
        let last = page.last().unwrap();
        let next = db
            .list_request_log(org.id, &any, Some((last.at, last.id)), 1000)
            .await
            .unwrap();
        assert_eq!(next.len(), 590);
        assert!(next.iter().all(|r| r.org_id == Some(org.id)));

        let refused = RequestLogFilter {
            status: Some((400, 500)),
            error_code: Some("validation_failed".into()),
            ..Default::default()
        };
        let r = db.list_request_log(org.id, &refused, None, 1000).await.unwrap();
        assert_eq!(r.len(), 200);
        assert!(r.iter().all(|r| r.status == 422));
        let by_key = RequestLogFilter { key_id: Some(key), ..Default::default() };
        assert_eq!(db.list_request_log(org.id, &by_key, None, 10).await.unwrap(), vec![rows[599].clone()]);
        let op = RequestLogFilter {
            method: Some("GET".into()),
            route: Some("/messages/{message_id}".into()),
            ..Default::default()
        };
        assert_eq!(db.list_request_log(org.id, &op, None, 10).await.unwrap().len(), 1);
        let window = RequestLogFilter { since: Some(T0 + 10), until: Some(T0 + 20), ..Default::default() };
        let w = db.list_request_log(org.id, &window, None, 100).await.unwrap();
        assert_eq!(w.len(), 10);
        assert!(w.iter().all(|r| (T0 + 10..T0 + 20).contains(&r.at)));

        assert_eq!(db.get_request_log(rows[601].id).await.unwrap(), Some(rows[601].clone()));
        assert_eq!(db.get_request_log(Uuid::now_v7()).await.unwrap(), None);

        // Everything before T0 + 100 goes, 40 at a time; the rest stays.
        let cutoff = v7_floor(T0 + 100);
        assert_eq!(db.prune_request_log(cutoff, 40).await.unwrap(), 40);
        let mut gone = 40;
        loop {
            let n = db.prune_request_log(cutoff, 40).await.unwrap();
            gone += n;
            if n < 40 { break; }
        }
        // 100 of the org, one of the other org, the unauthenticated one.
        assert_eq!(gone, 102);
        let left = db.list_request_log(org.id, &any, None, 1000).await.unwrap();
        assert_eq!(left.len(), 500);
        assert!(left.iter().all(|r| r.at >= T0 + 100));
    },
}
