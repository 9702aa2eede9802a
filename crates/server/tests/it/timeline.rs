//! `GET /messages/{id}/timeline`: every status report (applied or not, and why), the
//! failure with its fix, pagination without gap or repeat, and 404 for another
//! organisation's message, an inbound message edited and deleted — on SQLite and
//! PostgreSQL. Messages through the network: `network.rs`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod network;

use crate::common::TestApp;
use crate::network_webhook::{
    PNID, envelope, messages_change, outbound, setup, status, text_message,
};
use serde_json::{Value, json};
use tern_domain::auth::Preset;

const API: &str = "/api/public/v1";

/// The whole timeline of `id`, walked `limit` entries at a time.
async fn walk(app: &TestApp, key: &str, id: uuid::Uuid, limit: u32) -> Vec<Value> {
    let mut all = Vec::new();
    let mut cursor: Option<String> = None;
    loop {
        let path = match &cursor {
            None => format!("{API}/messages/{id}/timeline?limit={limit}"),
            Some(c) => format!("{API}/messages/{id}/timeline?limit={limit}&cursor={c}"),
        };
        let (s, _, page) = app.get(&path, Some(key)).await;
        assert_eq!(s, 200, "{page}");
        let data = page["data"].as_array().unwrap();
        assert!(data.len() <= limit as usize);
        all.extend(data.iter().cloned());
        match page["next_cursor"].as_str() {
            Some(c) => cursor = Some(c.to_string()),
            None => return all,
        }
    }
}

fn kinds(entries: &[Value]) -> Vec<&str> {
    entries
        .iter()
        .map(|e| e["kind"].as_str().unwrap())
        .collect()
}

async fn reports_out_of_order(app: &TestApp) {
    setup(app).await;
    let (_, key) = app.owner_key("full_access").await;
    let m = outbound(app, Some("wamid.TL1")).await;
    // read before delivered, sent twice, then a failure after the final state.
    let body = serde_json::to_vec(&envelope(vec![messages_change(
        PNID,
        vec![],
        vec![],
        vec![
            status("wamid.TL1", "sent", 1_700_000_010, None),
            status("wamid.TL1", "read", 1_700_000_030, None),
            status("wamid.TL1", "delivered", 1_700_000_020, None),
            status("wamid.TL1", "sent", 1_700_000_010, None),
            status("wamid.TL1", "failed", 1_700_000_040, None),
        ],
    )]))
    .unwrap();
    assert_eq!(app.post_network(&body).await.0, 200);
    tern_engine::inbox::drain(&app.db).await.unwrap();

    let all = walk(app, &key, m.id, 100).await;
    // Written outside the API: the acceptance entry carries no key or request.
    assert_eq!(kinds(&all)[0], "accepted");
    let reports: Vec<&Value> = all.iter().filter(|e| e["kind"] == "status").collect();
    let seen: Vec<(&str, bool, &Value)> = reports
        .iter()
        .map(|e| {
            (
                e["status"].as_str().unwrap(),
                e["applied"].as_bool().unwrap(),
                &e["reason"],
            )
        })
        .collect();
    assert_eq!(
        seen,
        [
            ("sent", true, &Value::Null),
            ("read", true, &Value::Null),
            // Late, but it fills delivered_at: applied.
            ("delivered", true, &Value::Null),
            ("sent", false, &Value::from("after_final")),
            ("failed", false, &Value::from("after_final")),
        ]
    );
    for r in &reports {
        assert!(
            r["network_timestamp"]
                .as_str()
                .unwrap()
                .starts_with("2023-11-14T22:1")
        );
        assert!(r["received_at"].is_string() && r["pricing"].is_null());
    }
    assert!(
        !kinds(&all).contains(&"failed"),
        "failed never follows read"
    );
    // `at` never goes back.
    let ats: Vec<&str> = all.iter().map(|e| e["at"].as_str().unwrap()).collect();
    assert!(ats.windows(2).all(|w| w[0] <= w[1]), "{ats:?}");

    // Two at a time: the same entries, no gap, no repeat.
    assert_eq!(walk(app, &key, m.id, 2).await, all);
    // A cursor of another message's timeline is refused.
    let (_, _, page) = app
        .get(
            &format!("{API}/messages/{}/timeline?limit=1", m.id),
            Some(&key),
        )
        .await;
    let c = page["next_cursor"].as_str().unwrap();
    let other = outbound(app, Some("wamid.TL2")).await;
    let (s, _, e) = app
        .get(
            &format!("{API}/messages/{}/timeline?cursor={c}", other.id),
            Some(&key),
        )
        .await;
    assert_eq!((s, e["code"].as_str()), (400, Some("validation_failed")));

    // Another organisation's message, an unknown id and a malformed one: 404.
    let (_, other_key) = app.other_org("Other", Preset::FullAccess).await;
    for (path, k) in [
        (
            format!("{API}/messages/{}/timeline", m.id),
            other_key.as_str(),
        ),
        (
            format!("{API}/messages/{}/timeline", uuid::Uuid::now_v7()),
            key.as_str(),
        ),
        (format!("{API}/messages/nope/timeline"), key.as_str()),
    ] {
        let (s, _, e) = app.get(&path, Some(k)).await;
        assert_eq!((s, e["code"].as_str()), (404, Some("not_found")), "{path}");
    }
}

async fn a_failure_and_its_fix(app: &TestApp) {
    setup(app).await;
    let (_, key) = app.owner_key("full_access").await;
    let m = outbound(app, Some("wamid.TLF")).await;
    let body = serde_json::to_vec(&envelope(vec![messages_change(
        PNID,
        vec![],
        vec![],
        vec![
            status("wamid.TLF", "failed", 1_700_000_020, None),
            status("wamid.TLF", "failed", 1_700_000_020, None),
        ],
    )]))
    .unwrap();
    assert_eq!(app.post_network(&body).await.0, 200);
    tern_engine::inbox::drain(&app.db).await.unwrap();
    let all = walk(app, &key, m.id, 100).await;
    assert_eq!(kinds(&all), ["accepted", "status", "failed", "status"]);
    let failed = &all[2];
    assert_eq!(failed["failure_code"], "recipient_not_on_whatsapp");
    assert_eq!(failed["provider_code"], "131026");
    assert!(failed["explanation"].as_str().unwrap().len() > 10);
    assert!(failed["fix"].as_str().unwrap().contains("WhatsApp"));
    assert_eq!(all[3]["reason"], "duplicate");
}

async fn an_inbound_message_edited_and_deleted(app: &TestApp) {
    setup(app).await;
    let (_, key) = app.owner_key("full_access").await;
    let from = "447700900555";
    let notify = |messages: Vec<Value>| {
        let body = serde_json::to_vec(&envelope(vec![messages_change(
            PNID,
            vec![json!({"wa_id": from, "profile": {"name": "Ann"}})],
            messages,
            vec![],
        )]))
        .unwrap();
        async move {
            assert_eq!(app.post_network(&body).await.0, 200);
            tern_engine::inbox::drain(&app.db).await.unwrap();
        }
    };
    notify(vec![text_message(
        "wamid.ORIG",
        from,
        1_700_000_000,
        "See you at 5",
    )])
    .await;
    notify(vec![
        json!({"from": from, "id": "wamid.EDIT", "timestamp": "1700000100",
        "type": "edit", "edit": {"original_message_id": "wamid.ORIG",
        "message": {"type": "text", "text": {"body": "See you at 6"}}}}),
    ])
    .await;
    notify(vec![
        json!({"from": from, "id": "wamid.GONE", "timestamp": "1700000200",
        "type": "revoke", "revoke": {"original_message_id": "wamid.ORIG"}}),
    ])
    .await;
    let (_, _, convs) = app.get(&format!("{API}/conversations"), Some(&key)).await;
    let conv = convs["data"][0]["id"].as_str().unwrap();
    let (_, _, page) = app
        .get(
            &format!("{API}/conversations/{conv}/messages?direction=inbound"),
            Some(&key),
        )
        .await;
    let msgs = page["data"].as_array().unwrap();
    assert_eq!(msgs.len(), 1, "{page}");
    let id = msgs[0]["id"].as_str().unwrap().parse().unwrap();
    let all = walk(app, &key, id, 100).await;
    assert_eq!(kinds(&all), ["received", "edited", "revoked"], "{all:?}");
    assert_eq!(
        (
            all[0]["wamid"].as_str(),
            all[1]["wamid"].as_str(),
            all[2]["wamid"].as_str()
        ),
        (Some("wamid.ORIG"), Some("wamid.EDIT"), Some("wamid.GONE"))
    );
    // `received` is at the network's time of the message.
    assert_eq!(all[0]["at"], "2023-11-14T22:13:20.000Z");
}

tern_store::both_backends! { TestApp;
    timeline_keeps_every_report_applied_or_not => reports_out_of_order,
    timeline_shows_a_failure_with_its_fix => a_failure_and_its_fix,
    timeline_of_an_inbound_message_edited_and_deleted => an_inbound_message_edited_and_deleted,
}
