//! The single status writer keeps the domain's rule on every path.

use serde_json::json;
use tern_core::messages::failure::Failure;
use tern_core::messages::status::{self, Applied, Report};
use tern_domain::message::{Precision, Status};
use tern_domain::{new_id, time::now_ms};
use tern_store::{Db, Message, Org};
use uuid::Uuid;

use crate::fixtures::{self, PNID};

/// An outbound message already `sent` with `wamid`, created at `t0`.
async fn sent_message(db: &Db, org: &Org, wamid: &str, t0: i64) -> Message {
    fixtures::sent_message(db, org, "4915550009", Some(wamid), t0).await
}

fn report(status: Status, at: i64) -> Report<'static> {
    Report {
        status,
        at,
        precision: Precision::Millis,
        wamid: None,
        failure: None,
        seen: None,
        attempt: None,
    }
}

/// Read first, then a late `delivered` with an earlier network time: the earliest report of
/// a step is its true time, so `delivered_at` moves down to it (it was the read's time).
async fn late_delivered_after_read_lowers_delivered_at(db: Db) {
    let org = fixtures::org(&db, json!({})).await;
    fixtures::number(&db, &org, PNID).await;
    let t0 = now_ms() - 60_000;
    let m = sent_message(&db, &org, "wamid.R1", t0).await;
    let read = report(Status::Read, t0 + 20_000);
    let applied = status::apply_report(&db, org.id, "wamid.R1", None, &read)
        .await
        .unwrap();
    assert_eq!(applied, Applied::Changed);
    let got = db.get_message(org.id, m.id).await.unwrap().unwrap();
    assert_eq!(
        (got.status, got.delivered_at, got.read_at),
        (Status::Read, Some(t0 + 20_000), Some(t0 + 20_000))
    );

    let delivered = report(Status::Delivered, t0 + 10_000);
    let applied = status::apply_report(&db, org.id, "wamid.R1", None, &delivered)
        .await
        .unwrap();
    assert_eq!(applied, Applied::Changed);
    let got = db.get_message(org.id, m.id).await.unwrap().unwrap();
    assert_eq!(got.status, Status::Read);
    assert_eq!(got.delivered_at, Some(t0 + 10_000));
    assert_eq!(got.read_at, Some(t0 + 20_000));
    assert_eq!(got.sent_at, Some(t0));
    // The same report again changes nothing.
    let again = status::apply_report(&db, org.id, "wamid.R1", None, &delivered)
        .await
        .unwrap();
    assert_eq!(again, Applied::Unchanged);
}

/// The same through a network notification applied by the inbox.
async fn inbox_applies_a_late_delivered_with_its_own_time(db: Db) {
    let org = fixtures::org(&db, json!({})).await;
    fixtures::number(&db, &org, PNID).await;
    let t0 = (now_ms() / 1000 - 600) * 1000;
    let m = sent_message(&db, &org, "wamid.R2", t0).await;
    let note = |status: &str, secs: i64| {
        json!({"object": "whatsapp_business_account", "entry": [{"id": "w", "changes": [{
            "field": "messages",
            "value": {"messaging_product": "whatsapp",
                      "metadata": {"display_phone_number": "15550783881", "phone_number_id": PNID},
                      "statuses": [{"id": "wamid.R2", "status": status,
                                    "timestamp": (t0 / 1000 + secs).to_string(),
                                    "recipient_id": "4915550009"}]}}]}]})
        .to_string()
    };
    let r = tern_core::inbox::apply(&db, note("read", 30).as_bytes())
        .await
        .unwrap();
    assert_eq!(r.statuses_applied, 1);
    let r = tern_core::inbox::apply(&db, note("delivered", 10).as_bytes())
        .await
        .unwrap();
    assert_eq!(r.statuses_applied, 1);
    let got = db.get_message(org.id, m.id).await.unwrap().unwrap();
    assert_eq!(got.status, Status::Read);
    assert_eq!(got.delivered_at, Some(t0 + 10_000));
    assert_eq!(got.read_at, Some(t0 + 30_000));
}

/// The dispatcher's millisecond `sent_at` is not replaced by the network's whole second
/// (it used to move back between two reads), and `delivered` in that second is not before it.
async fn network_seconds_never_move_a_precise_sent_at_back(db: Db) {
    let org = fixtures::org(&db, json!({})).await;
    fixtures::number(&db, &org, PNID).await;
    let t0 = (now_ms() / 1000 - 600) * 1000 + 250;
    let m = sent_message(&db, &org, "wamid.S1", t0).await;
    let sent_ms = t0 + 500; // the dispatcher's own time, inside the same second
    db.status_writes()
        .update_message_status(
            m.id,
            Status::Sent,
            m.updated_at,
            &tern_store::StatusChange {
                status: Status::Sent,
                wamid: None,
                sent_at: Some(sent_ms),
                delivered_at: None,
                read_at: None,
                failed_at: None,
                failure_code: None,
                failure: None,
                pricing: None,
            },
            now_ms(),
        )
        .await
        .unwrap();
    let note = |status: &str| {
        json!({"object": "whatsapp_business_account", "entry": [{"id": "w", "changes": [{
            "field": "messages",
            "value": {"messaging_product": "whatsapp",
                      "metadata": {"display_phone_number": "15550783881", "phone_number_id": PNID},
                      "statuses": [{"id": "wamid.S1", "status": status,
                                    "timestamp": (t0 / 1000).to_string(),
                                    "recipient_id": "4915550009"}]}}]}]})
        .to_string()
    };
    tern_core::inbox::apply(&db, note("sent").as_bytes())
        .await
        .unwrap();
    let got = db.get_message(org.id, m.id).await.unwrap().unwrap();
    assert_eq!(got.sent_at, Some(sent_ms));
    tern_core::inbox::apply(&db, note("delivered").as_bytes())
        .await
        .unwrap();
    let got = db.get_message(org.id, m.id).await.unwrap().unwrap();
    assert_eq!(
        (got.sent_at, got.delivered_at),
        (Some(sent_ms), Some(sent_ms))
    );
}

/// Statuses only move forward; `failed` is terminal; an unknown or foreign message is left
/// alone.
async fn reports_follow_the_monotonic_rule(db: Db) {
    let org = fixtures::org(&db, json!({})).await;
    fixtures::number(&db, &org, PNID).await;
    let t0 = now_ms() - 60_000;
    let m = sent_message(&db, &org, "wamid.R3", t0).await;
    let f = Failure::tern("recipient_not_on_whatsapp", "no");
    let failed = Report {
        status: Status::Failed,
        at: t0 + 5_000,
        precision: Precision::Millis,
        wamid: None,
        failure: Some(&f),
        seen: None,
        attempt: None,
    };
    assert_eq!(
        status::apply_report(&db, org.id, "wamid.R3", None, &failed)
            .await
            .unwrap(),
        Applied::Changed
    );
    let delivered = report(Status::Delivered, t0 + 6_000);
    status::apply_report(&db, org.id, "wamid.R3", None, &delivered)
        .await
        .unwrap();
    let got = db.get_message(org.id, m.id).await.unwrap().unwrap();
    assert_eq!(got.status, Status::Failed);
    assert_eq!(got.failure, Some(f.clone()));
    assert_eq!(
        got.failure_code.as_deref(),
        Some("recipient_not_on_whatsapp")
    );
    // A delivery report fills its time but does not un-fail the message.
    assert_eq!(got.delivered_at, Some(t0 + 6_000));

    let other = Uuid::now_v7();
    assert_eq!(
        status::apply_report(&db, other, "wamid.R3", None, &delivered)
            .await
            .unwrap(),
        Applied::UnknownMessage
    );
    assert_eq!(
        status::apply_report(&db, org.id, "wamid.nope", None, &delivered)
            .await
            .unwrap(),
        Applied::UnknownMessage
    );
}

/// A `message.status` subscription of the organisation (to count its events).
async fn status_subscription(db: &Db, org: &Org) {
    let m = tern_core::admin::add_member(db, org.id, "a@acme.test", tern_domain::auth::Role::Owner)
        .await
        .unwrap();
    let k = tern_core::keys::create(
        db,
        &test_master_key(),
        &tern_core::audit::Context::operator(),
        org.id,
        tern_core::keys::NewKey {
            member_id: m.id,
            name: "k",
            preset: Some(tern_domain::auth::Preset::ReadOnly),
            permissions: &[],
            mode: tern_domain::auth::Mode::Live,
        },
    )
    .await
    .unwrap();
    db.insert_webhook_subscription(&tern_store::NewSubscription {
        id: new_id(),
        org_id: org.id,
        api_key_id: k.key.id,
        url: "https://hooks.example.com/t".into(),
        event_types: vec!["message.status".into()],
        secret_enc: vec![1, 2, 3],
        enabled: true,
        description: None,
        created_at: now_ms(),
    })
    .await
    .unwrap();
}

/// A notification's reports applied together end exactly where the same reports applied one
/// by one end (every order of four steps, with a repeat), and each step that changed the
/// message has its own event.
async fn a_batch_ends_where_the_reports_one_by_one_end(db: Db) {
    let org = fixtures::org(&db, json!({})).await;
    fixtures::number(&db, &org, PNID).await;
    status_subscription(&db, &org).await;
    let t0 = now_ms() - 60_000;
    let f = Failure::tern("recipient_not_on_whatsapp", "no");
    let step = |status: Status, secs: i64| Report {
        status,
        at: t0 + secs * 1000,
        precision: Precision::WholeSecond,
        wamid: None,
        failure: (status == Status::Failed).then_some(&f),
        seen: None,
        attempt: None,
    };
    let orders: [[(Status, i64); 4]; 4] = [
        [
            (Status::Delivered, 2),
            (Status::Read, 3),
            (Status::Delivered, 2),
            (Status::Sent, 1),
        ],
        [
            (Status::Read, 3),
            (Status::Sent, 1),
            (Status::Delivered, 2),
            (Status::Read, 4),
        ],
        [
            (Status::Delivered, 2),
            (Status::Failed, 5),
            (Status::Read, 3),
            (Status::Delivered, 1),
        ],
        [
            (Status::Failed, 5),
            (Status::Failed, 6),
            (Status::Read, 3),
            (Status::Sent, 1),
        ],
    ];
    for (n, order) in orders.iter().enumerate() {
        let (wa, wb) = (format!("wamid.A{n}"), format!("wamid.B{n}"));
        let a = sent_message(&db, &org, &wa, t0).await;
        let b = sent_message(&db, &org, &wb, t0).await;
        let reports: Vec<status::Reported<'_>> = order
            .iter()
            .map(|&(st, secs)| status::Reported {
                wamid: &wa,
                tern_id: None,
                report: step(st, secs),
            })
            .collect();
        let batch = status::apply_reports(&db, org.id, &reports).await.unwrap();
        let (batch_events, _) = db.fan_out_events(1000).await.unwrap();
        let mut single = Vec::new();
        for &(st, secs) in order {
            single.push(
                status::apply_report(&db, org.id, &wb, None, &step(st, secs))
                    .await
                    .unwrap(),
            );
        }
        let (single_events, _) = db.fan_out_events(1000).await.unwrap();
        assert_eq!(batch, single, "order {n}");
        let (ga, gb) = (
            db.get_message(org.id, a.id).await.unwrap().unwrap(),
            db.get_message(org.id, b.id).await.unwrap().unwrap(),
        );
        let row = |m: &Message| {
            (
                m.status,
                m.sent_at,
                m.delivered_at,
                m.read_at,
                m.failed_at,
                m.failure.clone(),
            )
        };
        assert_eq!(row(&ga), row(&gb), "order {n}");
        // One event per step to a new status: delivered+read, read, delivered+failed, failed.
        assert_eq!(
            (batch_events, single_events),
            ([2, 1, 2, 1][n], [2, 1, 2, 1][n]),
            "order {n}"
        );
    }
    // Unknown, another organisation's, and a repeat in one batch.
    let c = sent_message(&db, &org, "wamid.C", t0).await;
    let reports = [
        status::Reported {
            wamid: "wamid.nope",
            tern_id: None,
            report: step(Status::Read, 3),
        },
        status::Reported {
            wamid: "wamid.C",
            tern_id: None,
            report: step(Status::Delivered, 2),
        },
        status::Reported {
            wamid: "wamid.C",
            tern_id: None,
            report: step(Status::Delivered, 2),
        },
    ];
    assert_eq!(
        status::apply_reports(&db, org.id, &reports).await.unwrap(),
        [
            Applied::UnknownMessage,
            Applied::Changed,
            Applied::Unchanged
        ]
    );
    assert_eq!(
        status::apply_reports(&db, Uuid::now_v7(), &reports[1..])
            .await
            .unwrap(),
        [Applied::UnknownMessage, Applied::UnknownMessage]
    );
    assert_eq!(
        db.get_message(org.id, c.id).await.unwrap().unwrap().status,
        Status::Delivered
    );
}

/// CORE.md rule 3: outside the store (which holds the SQL) and the status writer, no code
/// reaches the statements that change a message's status: they sit behind one handle
/// (`Db::status_writes`, `Tx::status_writes`; the methods themselves are private to the
/// store), so one name is checked.
#[test]
fn only_the_status_writer_changes_a_status() {
    const WRITES: [&str; 1] = [".status_writes()"];
    let crates = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let writer = std::path::Path::new("core/src/messages/status.rs");
    let mut offenders = Vec::new();
    let mut stack = vec![crates.clone()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            let rel = path.strip_prefix(&crates).unwrap().to_path_buf();
            if path.is_dir() {
                // Source trees only; the store's own SQL and its tests are the mechanism.
                let name = rel.to_string_lossy();
                if !name.starts_with("store")
                    && !name.ends_with("tests")
                    && !name.contains("target")
                {
                    stack.push(path);
                }
            } else if path.extension().is_some_and(|e| e == "rs") && rel != writer {
                let text = std::fs::read_to_string(&path).unwrap();
                for w in WRITES {
                    if text.contains(w) {
                        offenders.push(format!("{} calls {w}", rel.display()));
                    }
                }
            }
        }
    }
    assert!(offenders.is_empty(), "{offenders:#?}");
}

tern_store::both_backends! { tern_store::testkit::TestDb;
    late_delivered_after_read_lowers_delivered_at,
    inbox_applies_a_late_delivered_with_its_own_time,
    network_seconds_never_move_a_precise_sent_at_back,
    reports_follow_the_monotonic_rule,
    a_batch_ends_where_the_reports_one_by_one_end,
}

/// A master key for keys made in this test (a test key's test space seals its token).
fn test_master_key() -> tern_domain::crypto::MasterKey {
    tern_domain::crypto::MasterKey::from_bytes([7; 32])
}
