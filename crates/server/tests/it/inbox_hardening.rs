//! What the databases cannot hold never costs the rest of a webhook: a U+0000 from the
//! network becomes U+FFFD and the message is kept; an item the database refuses is retried
//! with its batch, then set aside, while the rest of the batch is applied — on SQLite and
//! PostgreSQL.

use crate::common::{Backend, TestApp};
use crate::network_webhook::{
    PNID, envelope, messages_change, outbound, setup, status, text_message,
};
use serde_json::{Value, json};
use tern_core::inbox::{Received, apply_statuses_together};
use tern_domain::message::{Direction, Status};
use tern_domain::timeline::Detail;
use tern_engine::inbox::{Retry, drain_with_retry};
use tern_store::Message;

const CUSTOMER: &str = "447700900031";

async fn post(app: &TestApp, body: &Value) {
    let (s, b) = app.post_network(&serde_json::to_vec(body).unwrap()).await;
    assert_eq!(s, 200, "{b}");
}

async fn inbound_messages(app: &TestApp) -> Vec<Message> {
    let contact = app
        .db
        .get_contact_by_wa_id(app.org_uuid(), CUSTOMER)
        .await
        .unwrap()
        .unwrap();
    let conv = app
        .db
        .get_or_create_conversation(app.org_uuid(), contact.id, PNID, uuid::Uuid::now_v7(), 0)
        .await
        .unwrap();
    app.db
        .list_conversation_messages(app.org_uuid(), conv.id, Some(Direction::Inbound), None, 50)
        .await
        .unwrap()
}

fn by_wamid<'a>(msgs: &'a [Message], wamid: &str) -> Option<&'a Message> {
    msgs.iter().find(|m| m.wamid.as_deref() == Some(wamid))
}

async fn nul_from_the_network_is_replaced_and_the_message_kept(app: &TestApp) {
    setup(app).await;
    post(
        app,
        &envelope(vec![messages_change(
            PNID,
            vec![json!({"wa_id": CUSTOMER, "profile": {"name": "Ad\u{0}a"}})],
            vec![
                text_message("wamid.NUL1", CUSTOMER, 1_700_000_100, "hel\u{0}lo"),
                json!({"from": CUSTOMER, "id": "wamid.NUL2", "timestamp": "1700000101", "type": "image",
                       "image": {"id": "m1", "mime_type": "image/jpeg", "sha256": "x", "caption": "a \u{0} cat"},
                       "referral": {"headline": "\u{0}"}}),
                text_message("wamid.NUL3", CUSTOMER, 1_700_000_102, "fine"),
            ],
            vec![],
        )]),
    )
    .await;
    let report = tern_engine::inbox::drain(&app.db).await.unwrap();
    assert_eq!(
        (report.inbound_stored, report.failed.len()),
        (3, 0),
        "{report:?}"
    );
    assert_eq!(app.db.count_unprocessed_inbox().await.unwrap(), 0);
    let msgs = inbound_messages(app).await;
    let nul1 = by_wamid(&msgs, "wamid.NUL1").unwrap();
    assert_eq!(nul1.text.as_deref(), Some("hel\u{fffd}lo"));
    assert_eq!(nul1.content.as_ref().unwrap()["body"], "hel\u{fffd}lo");
    assert_eq!(nul1.request["text"]["body"], "hel\u{fffd}lo");
    let nul2 = by_wamid(&msgs, "wamid.NUL2").unwrap();
    assert_eq!(nul2.text.as_deref(), Some("a \u{fffd} cat"));
    assert_eq!(nul2.referral.as_ref().unwrap()["headline"], "\u{fffd}");
    assert_eq!(
        by_wamid(&msgs, "wamid.NUL3").unwrap().text.as_deref(),
        Some("fine")
    );
    let contact = app
        .db
        .get_contact_by_wa_id(app.org_uuid(), CUSTOMER)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(contact.name.as_deref(), Some("Ad\u{fffd}a"));
}

/// Drains until every batch is processed or set aside (a retry "due at once" is due from
/// the next millisecond, so one pass may end before it); the passes' combined report.
async fn drain_until_done(app: &TestApp, retry: Retry) -> tern_engine::inbox::Report {
    let mut total = tern_engine::inbox::Report::default();
    for _ in 0..1_000 {
        total.add(&drain_with_retry(&app.db, &app.db, retry).await.unwrap());
        if app.db.count_unprocessed_inbox().await.unwrap() == 0 {
            return total;
        }
        tokio::time::sleep(std::time::Duration::from_millis(1)).await;
    }
    panic!("batches still unprocessed after 1,000 passes: {total:?}");
}

/// Makes the database refuse the inbound message `wamid.REFUSED`, as it would a value it
/// cannot hold.
fn refusing_trigger(backend: &Backend) -> &'static str {
    match backend {
        Backend::Sqlite => {
            "CREATE TRIGGER refuse_wamid BEFORE INSERT ON messages \
             WHEN NEW.wamid = 'wamid.REFUSED' \
             BEGIN SELECT RAISE(ABORT, 'refused by the test'); END;"
        }
        Backend::Postgres => {
            "CREATE FUNCTION refuse_wamid() RETURNS trigger LANGUAGE plpgsql AS $$ \
             BEGIN IF NEW.wamid = 'wamid.REFUSED' THEN RAISE EXCEPTION 'refused by the test'; \
             END IF; RETURN NEW; END $$; \
             CREATE TRIGGER refuse_wamid BEFORE INSERT ON messages \
             FOR EACH ROW EXECUTE FUNCTION refuse_wamid();"
        }
    }
}

async fn an_item_that_cannot_be_applied_is_set_aside(app: &TestApp) {
    setup(app).await;
    app.db
        .execute_test_sql(refusing_trigger(&app.backend))
        .await
        .unwrap();
    post(
        app,
        &envelope(vec![messages_change(
            PNID,
            vec![json!({"wa_id": CUSTOMER, "profile": {"name": "Ada"}})],
            vec![
                text_message("wamid.REFUSED", CUSTOMER, 1_700_000_100, "refused"),
                text_message("wamid.KEPT", CUSTOMER, 1_700_000_101, "kept"),
            ],
            vec![],
        )]),
    )
    .await;
    let retry = Retry {
        first_delay_ms: 0,
        max_delay_ms: 0,
        item_attempts: 3,
    };
    // The first attempt applies the rest of the batch at once, and keeps the batch to retry.
    let first = drain_with_retry(&app.db, &app.db, retry).await.unwrap();
    assert_eq!(first.inbound_stored, 1, "{first:?}");
    assert_eq!(first.failed[0].key, "wamid.REFUSED", "{first:?}");
    let msgs = inbound_messages(app).await;
    assert_eq!(
        by_wamid(&msgs, "wamid.KEPT").unwrap().text.as_deref(),
        Some("kept")
    );
    assert!(by_wamid(&msgs, "wamid.REFUSED").is_none());
    // After its retries (due at once) the refused item is set aside and the batch is done.
    drain_until_done(app, retry).await;
    let aside = app.db.list_set_aside_inbox(10).await.unwrap();
    assert_eq!(aside.len(), 1, "{aside:?}");
    let a = &aside[0];
    assert_eq!(
        (a.kind.as_str(), a.item_key.as_str(), a.attempts),
        ("message", "wamid.REFUSED", 3)
    );
    assert!(a.error.contains("refused by the test"), "{}", a.error);
    let item: Value = serde_json::from_slice(&a.item).unwrap();
    assert_eq!(item["text"]["body"], "refused");
    // The kept message was stored once, and later batches go through.
    let msgs = inbound_messages(app).await;
    assert_eq!(
        msgs.iter()
            .filter(|m| m.wamid.as_deref() == Some("wamid.KEPT"))
            .count(),
        1
    );
    post(
        app,
        &envelope(vec![messages_change(
            PNID,
            vec![],
            vec![text_message(
                "wamid.LATER",
                CUSTOMER,
                1_700_000_102,
                "later",
            )],
            vec![],
        )]),
    )
    .await;
    let later = drain_with_retry(&app.db, &app.db, retry).await.unwrap();
    assert_eq!(
        (later.inbound_stored, later.failed.len()),
        (1, 0),
        "{later:?}"
    );
}

/// One status a webhook, as the network mostly sends them.
fn one_status(wamid: &str, state: &str, ts: i64) -> Value {
    envelope(vec![messages_change(
        PNID,
        vec![],
        vec![],
        vec![status(wamid, state, ts, None)],
    )])
}

/// The message's status reports in its timeline, in order: (status, applied).
async fn status_reports(app: &TestApp, message_id: uuid::Uuid) -> Vec<(Status, bool)> {
    let rows = app.db.timeline_rows(message_id).await.unwrap();
    rows.iter()
        .filter_map(|r| match &r.detail {
            Detail::Status {
                status, applied, ..
            } => Some((*status, *applied)),
            _ => None,
        })
        .collect()
}

/// Makes the database refuse to mark `wamid.G3` read.
fn refusing_read_trigger(backend: &Backend) -> &'static str {
    match backend {
        Backend::Sqlite => {
            "CREATE TRIGGER refuse_read BEFORE UPDATE ON messages \
             WHEN NEW.wamid = 'wamid.G3' AND NEW.status = 'read' \
             BEGIN SELECT RAISE(ABORT, 'refused by the test'); END;"
        }
        Backend::Postgres => {
            "CREATE FUNCTION refuse_read() RETURNS trigger LANGUAGE plpgsql AS $$ \
             BEGIN IF NEW.wamid = 'wamid.G3' AND NEW.status = 'read' THEN \
             RAISE EXCEPTION 'refused by the test'; END IF; RETURN NEW; END $$; \
             CREATE TRIGGER refuse_read BEFORE UPDATE ON messages \
             FOR EACH ROW EXECUTE FUNCTION refuse_read();"
        }
    }
}

async fn statuses_of_many_webhooks_are_applied_together(app: &TestApp) {
    setup(app).await;
    let g1 = outbound(app, Some("wamid.G1")).await;
    let g2 = outbound(app, Some("wamid.G2")).await;
    let g3 = outbound(app, Some("wamid.G3")).await;
    let inbound = envelope(vec![messages_change(
        PNID,
        vec![json!({"wa_id": CUSTOMER, "profile": {"name": "Ada"}})],
        vec![text_message("wamid.IN", CUSTOMER, 1_700_000_100, "hi")],
        vec![],
    )]);
    let mut bodies: Vec<Vec<u8>> = [
        one_status("wamid.G1", "delivered", 1_700_000_020),
        one_status("wamid.G1", "read", 1_700_000_030),
        inbound,
        one_status("wamid.G2", "read", 1_700_000_031),
    ]
    .iter()
    .map(|b| serde_json::to_vec(b).unwrap())
    .collect();
    bodies.push(b"not json".to_vec());
    let received: Vec<Received<'_>> = bodies
        .iter()
        .map(|body| Received {
            body,
            received_at: 1_700_000_040_000,
        })
        .collect();
    // The statuses alone are applied together; the inbound message and what cannot be read
    // are left to be applied alone.
    let together = apply_statuses_together(&app.db, &received).await.unwrap();
    let applied: Vec<Option<usize>> = together
        .iter()
        .map(|r| r.as_ref().map(|r| r.statuses_applied))
        .collect();
    assert_eq!(
        applied,
        [Some(1), Some(1), None, Some(1), None],
        "{together:?}"
    );
    let get = |id| async move {
        app.db
            .get_message(app.org_uuid(), id)
            .await
            .unwrap()
            .unwrap()
    };
    let m1 = get(g1.id).await;
    assert_eq!(
        (m1.status, m1.delivered_at, m1.read_at),
        (
            Status::Read,
            Some(1_700_000_020_000),
            Some(1_700_000_030_000)
        )
    );
    assert_eq!(get(g2.id).await.status, Status::Read);
    // Each report is in the timeline, in order, with when its own webhook arrived.
    assert_eq!(
        status_reports(app, g1.id).await,
        [(Status::Delivered, true), (Status::Read, true)]
    );

    // Through the worker: webhooks of statuses, one refused by the database, and an inbound
    // message. The refused one fails the shared transaction, so each is applied alone: the
    // others are applied, the refused one is retried, then set aside.
    app.db
        .execute_test_sql(refusing_read_trigger(&app.backend))
        .await
        .unwrap();
    for body in [
        one_status("wamid.G3", "delivered", 1_700_000_050),
        one_status("wamid.G3", "read", 1_700_000_060),
        one_status("wamid.G2", "read", 1_700_000_031),
        envelope(vec![messages_change(
            PNID,
            vec![],
            vec![text_message("wamid.IN2", CUSTOMER, 1_700_000_101, "again")],
            vec![],
        )]),
    ] {
        post(app, &body).await;
    }
    let retry = Retry {
        first_delay_ms: 0,
        max_delay_ms: 0,
        item_attempts: 2,
    };
    let first = drain_until_done(app, retry).await;
    assert_eq!(
        (
            first.statuses_applied,
            first.statuses_ignored,
            first.inbound_stored
        ),
        (1, 1, 1),
        "{first:?}"
    );
    // Its retry is due at once: tried again, then set aside.
    assert_eq!(
        first
            .failed
            .iter()
            .map(|f| f.key.as_str())
            .collect::<Vec<_>>(),
        ["wamid.G3:read"; 2],
        "{first:?}"
    );
    let m3 = get(g3.id).await;
    assert_eq!(
        (m3.status, m3.delivered_at),
        (Status::Delivered, Some(1_700_000_050_000))
    );
    let aside = app.db.list_set_aside_inbox(10).await.unwrap();
    assert_eq!(
        aside
            .iter()
            .map(|a| (a.kind.as_str(), a.item_key.as_str()))
            .collect::<Vec<_>>(),
        [("status", "wamid.G3:read")]
    );
}

/// The network's real pattern at a number's top tier (issue 33): one status per webhook,
/// many at once. Every POST is answered 200 once stored; the intake holds at most its bound
/// of bodies in memory however many arrive together; and every message's reports, posted
/// one after the other, are applied in that order.
async fn a_flood_of_single_status_webhooks_is_stored_and_applied_in_order(app: &TestApp) {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
    setup(app).await;
    const MESSAGES: usize = 120;
    const AT_ONCE: usize = 3 * tern_store::INTAKE_QUEUE;
    let mut msgs = Vec::new();
    for i in 0..MESSAGES {
        msgs.push(outbound(app, Some(&format!("wamid.FLOOD{i}"))).await);
    }
    let (stop, most) = (
        Arc::new(AtomicBool::new(false)),
        Arc::new(AtomicUsize::new(0)),
    );
    let sampler = {
        let (stop, most, intake) = (stop.clone(), most.clone(), app.core.intake.clone());
        tokio::spawn(async move {
            while !stop.load(Ordering::Relaxed) {
                most.fetch_max(intake.queued(), Ordering::Relaxed);
                tokio::task::yield_now().await;
            }
        })
    };
    // Each message's three reports one after the other; all messages at once, and more
    // webhooks in flight (AT_ONCE) than the intake holds.
    let permits = Arc::new(tokio::sync::Semaphore::new(AT_ONCE));
    let mut posters = tokio::task::JoinSet::new();
    for (i, m) in msgs.iter().enumerate() {
        let wamid = m.wamid.clone().unwrap();
        let (base, http, permits) = (app.base.clone(), app.http.clone(), permits.clone());
        let t0 = 1_700_000_000 + i64::try_from(i).unwrap() * 10;
        posters.spawn(async move {
            for (state, ts) in [("sent", t0), ("delivered", t0 + 1), ("read", t0 + 2)] {
                let body = serde_json::to_vec(&one_status(&wamid, state, ts)).unwrap();
                let _permit = permits.acquire().await.unwrap();
                let (s, b) = crate::common::post_network_to(&http, &base, &body).await;
                assert_eq!(s, 200, "{wamid} {state}: {b}");
            }
        });
    }
    while let Some(done) = posters.join_next().await {
        done.unwrap();
    }
    stop.store(true, Ordering::Relaxed);
    sampler.await.unwrap();
    let most = most.load(Ordering::Relaxed);
    assert!(
        most <= tern_store::INTAKE_QUEUE,
        "{most} bodies queued in memory"
    );
    assert_eq!(
        app.db.count_unprocessed_inbox().await.unwrap(),
        3 * MESSAGES as i64
    );

    drain_until_done(app, Retry::default()).await;
    for (i, m) in msgs.iter().enumerate() {
        let t0 = (1_700_000_000 + i64::try_from(i).unwrap() * 10) * 1000;
        let got = app
            .db
            .get_message(app.org_uuid(), m.id)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(
            (got.status, got.sent_at, got.delivered_at, got.read_at),
            (Status::Read, Some(t0), Some(t0 + 1000), Some(t0 + 2000)),
            "{:?}",
            got.wamid
        );
        assert_eq!(
            status_reports(app, m.id).await,
            [
                (Status::Sent, true),
                (Status::Delivered, true),
                (Status::Read, true)
            ],
            "applied in the order posted: {:?}",
            got.wamid
        );
    }
}

tern_store::both_backends! { TestApp;
    nul_from_the_network_is_replaced_and_the_message_kept_http => nul_from_the_network_is_replaced_and_the_message_kept,
    an_item_that_cannot_be_applied_is_set_aside_http => an_item_that_cannot_be_applied_is_set_aside,
    statuses_of_many_webhooks_are_applied_together_http => statuses_of_many_webhooks_are_applied_together,
    a_flood_of_single_status_webhooks_is_stored_and_applied_in_order_http => a_flood_of_single_status_webhooks_is_stored_and_applied_in_order,
}
