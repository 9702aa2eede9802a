//! What every inbound message carries (`content`, `reply_to`, `referral`), in the shapes
//! of published network payloads; edits and deletions change the original message; an
//! outbound message keeps its content as accepted.

use super::{deliver, notification, setup, wamid};
use crate::common::{TestApp, send};
use serde_json::{Value, json};

const API: &str = "/api/public/v1";
const FROM: &str = "16505551234";

fn msg(id: &str, kind: &str, object: Value) -> Value {
    let mut m = json!({"from": FROM, "id": id, "timestamp": "1700000000", "type": kind});
    if !object.is_null() {
        m[kind] = object;
    }
    m
}

/// The inbound messages of the customer's conversation, by wamid.
async fn inbound(app: &TestApp, key: &str) -> std::collections::HashMap<String, Value> {
    let (_, _, convs) = app.get(&format!("{API}/conversations"), Some(key)).await;
    let conv = convs["data"][0]["id"].as_str().unwrap().to_string();
    let (s, _, page) = app
        .get(
            &format!("{API}/conversations/{conv}/messages?direction=inbound&limit=100"),
            Some(key),
        )
        .await;
    assert_eq!(s, 200, "{page}");
    page["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| (m["wamid"].as_str().unwrap().to_string(), m.clone()))
        .collect()
}

async fn every_inbound_type_keeps_its_content(app: &TestApp) {
    let key = setup(app).await;
    // The customer opens the window; a reply the customer will react to and answer.
    let now = (tern_domain::time::now_ms() / 1000).to_string();
    let hello = json!({"from": FROM, "id": "wamid.HELLO", "timestamp": now, "type": "text", "text": {"body": "hello"}});
    deliver(
        app,
        &notification(json!([{"wa_id": FROM}]), json!([hello]), json!([])),
    )
    .await;
    let (s, _, out) = send(
        app.http
            .post(app.url(&format!("{API}/messages")))
            .bearer_auth(&key)
            .header("Idempotency-Key", "k-content-1")
            .json(
                &json!({"to": format!("+{FROM}"), "type": "text", "text": {"body": "Your order?"}}),
            ),
    )
    .await;
    assert_eq!(s, 202, "{out}");
    assert_eq!(out["content"], json!({"body": "Your order?"}));
    let out_id = out["id"].as_str().unwrap().to_string();
    app.db
        .status_writes()
        .update_message_status(
            out_id.parse().unwrap(),
            tern_domain::message::Status::Accepted,
            app.db
                .get_message(app.org_uuid(), out_id.parse().unwrap())
                .await
                .unwrap()
                .unwrap()
                .updated_at,
            &tern_store::StatusChange {
                status: tern_domain::message::Status::Sent,
                wamid: Some("wamid.OUT".into()),
                sent_at: Some(1),
                delivered_at: None,
                read_at: None,
                failed_at: None,
                failure_code: None,
                failure: None,
                pricing: None,
            },
            2,
        )
        .await
        .unwrap();

    let media = |extra: Value| {
        let mut o = json!({"id": "1234567890", "mime_type": "image/jpeg", "sha256": "aGFzaA==",
            "url": "https://lookaside.fbsbx.com/whatsapp_business/attachments/?mid=1"});
        for (k, v) in extra.as_object().unwrap() {
            o[k] = v.clone();
        }
        o
    };
    let referral = json!({"source_url": "https://fb.me/ad", "source_id": "120", "source_type": "ad",
        "headline": "Sale", "body": "50% off", "media_type": "image", "image_url": "https://x/i.jpg", "ctwa_clid": "ARAk"});
    let mut text = msg("wamid.T", "text", json!({"body": "Does it come in red?"}));
    text["referral"] = referral.clone();
    text["context"] = json!({"from": "14155550100", "id": "wamid.OUT"});
    let mut button = msg(
        "wamid.B",
        "button",
        json!({"payload": "STOP_PROMOS", "text": "Stop promotions"}),
    );
    button["context"] = json!({"from": "14155550100", "id": "wamid.UNKNOWN_TEMPLATE"});
    let contacts_card = json!([{"name": {"formatted_name": "Ann Lee", "first_name": "Ann"},
        "phones": [{"phone": "+1 415 555 0100", "type": "CELL", "wa_id": "14155550100"}]}]);
    let mut unsupported = msg("wamid.U", "unsupported", Value::Null);
    unsupported["errors"] = json!([{"code": 131051, "title": "Message type unknown"}]);
    let messages = json!([
        text,
        msg("wamid.I", "image", media(json!({"caption": "this one"}))),
        msg("wamid.V", "video", media(json!({"mime_type": "video/mp4"}))),
        msg(
            "wamid.A",
            "audio",
            media(json!({"mime_type": "audio/ogg; codecs=opus", "voice": true}))
        ),
        msg(
            "wamid.D",
            "document",
            media(
                json!({"mime_type": "application/pdf", "filename": "invoice.pdf", "caption": "Invoice"})
            )
        ),
        msg(
            "wamid.S",
            "sticker",
            media(json!({"mime_type": "image/webp", "animated": true}))
        ),
        msg(
            "wamid.L",
            "location",
            json!({"latitude": "37.4847", "longitude": -122.148, "name": "HQ", "address": "1 Hacker Way"})
        ),
        msg("wamid.C", "contacts", contacts_card.clone()),
        msg(
            "wamid.IB",
            "interactive",
            json!({"type": "button_reply", "button_reply": {"id": "yes", "title": "Yes"}})
        ),
        msg(
            "wamid.IL",
            "interactive",
            json!({"type": "list_reply", "list_reply": {"id": "r1", "title": "Red", "description": "The red one"}})
        ),
        msg(
            "wamid.IN",
            "interactive",
            json!({"type": "nfm_reply", "nfm_reply": {"name": "flow", "body": "Sent", "response_json": "{\"size\":\"M\"}"}})
        ),
        button,
        msg(
            "wamid.R",
            "reaction",
            json!({"message_id": "wamid.OUT", "emoji": "👍"})
        ),
        msg("wamid.R0", "reaction", json!({"message_id": "wamid.OUT"})),
        msg(
            "wamid.O",
            "order",
            json!({"catalog_id": "cat1", "text": "for Friday",
            "product_items": [{"product_retailer_id": "sku1", "quantity": 2, "item_price": 9.5, "currency": "EUR"}]})
        ),
        msg(
            "wamid.Y",
            "system",
            json!({"body": "Ann changed their phone number", "type": "customer_changed_number"})
        ),
        unsupported,
        msg("wamid.W", "request_welcome", Value::Null),
        msg("wamid.X", "hologram", json!({"depth": 3})),
    ]);
    let report = deliver(
        app,
        &notification(
            json!([{"wa_id": FROM, "profile": {"name": "Ann"}}]),
            messages,
            json!([]),
        ),
    )
    .await;
    assert_eq!(report.inbound_stored, 19, "{report:?}");
    let got = inbound(app, &key).await;
    let content = |w: &str| got[w]["content"].clone();

    assert_eq!(content("wamid.T"), json!({"body": "Does it come in red?"}));
    assert_eq!(got["wamid.T"]["text"], "Does it come in red?");
    assert_eq!(got["wamid.T"]["referral"], referral);
    assert_eq!(
        got["wamid.T"]["reply_to"],
        json!({"message_id": out_id, "wamid": "wamid.OUT"})
    );
    assert_eq!(
        content("wamid.I"),
        json!({"mime_type": "image/jpeg", "sha256": "aGFzaA==", "caption": "this one"})
    );
    assert_eq!(got["wamid.I"]["text"], "this one");
    assert_eq!(content("wamid.V")["mime_type"], "video/mp4");
    assert_eq!(
        (
            content("wamid.A")["voice"].clone(),
            got["wamid.A"]["type"].clone()
        ),
        (json!(true), json!("audio"))
    );
    assert_eq!(
        content("wamid.D"),
        json!({"mime_type": "application/pdf", "sha256": "aGFzaA==", "filename": "invoice.pdf", "caption": "Invoice"})
    );
    assert_eq!(content("wamid.S")["animated"], true);
    for w in ["wamid.I", "wamid.V", "wamid.A", "wamid.D", "wamid.S"] {
        // The network's media id and download URL need the business token: not for clients.
        assert!(
            content(w).get("id").is_none() && content(w).get("url").is_none(),
            "{w}: {}",
            content(w)
        );
    }
    assert_eq!(
        content("wamid.L"),
        json!({"latitude": 37.4847, "longitude": -122.148, "name": "HQ", "address": "1 Hacker Way"})
    );
    assert_eq!(got["wamid.L"]["text"], Value::Null);
    assert_eq!(content("wamid.C"), contacts_card);
    assert_eq!(
        content("wamid.IB"),
        json!({"type": "button_reply", "button_reply": {"id": "yes", "title": "Yes"}})
    );
    assert_eq!(
        content("wamid.IL")["list_reply"]["description"],
        "The red one"
    );
    assert_eq!(
        content("wamid.IN")["nfm_reply"]["response_json"],
        "{\"size\":\"M\"}"
    );
    assert_eq!(
        content("wamid.B"),
        json!({"payload": "STOP_PROMOS", "text": "Stop promotions"})
    );
    assert_eq!(
        got["wamid.B"]["reply_to"],
        json!({"message_id": null, "wamid": "wamid.UNKNOWN_TEMPLATE"})
    );
    assert_eq!(
        content("wamid.R"),
        json!({"message_id": out_id, "wamid": "wamid.OUT", "emoji": "👍"})
    );
    assert_eq!(
        content("wamid.R0"),
        json!({"message_id": out_id, "wamid": "wamid.OUT", "emoji": null})
    );
    assert_eq!(
        content("wamid.O")["product_items"][0]["product_retailer_id"],
        "sku1"
    );
    assert_eq!(content("wamid.Y")["type"], "customer_changed_number");
    assert_eq!(got["wamid.U"]["type"], "unsupported");
    assert!(got["wamid.U"]["content"].is_object(), "{}", got["wamid.U"]);
    assert_eq!(got["wamid.W"]["type"], "request_welcome");
    assert_eq!(content("wamid.X"), json!({"depth": 3}));
    // A type newer than Tern shows as `unsupported` (a closed set for typed clients).
    assert_eq!(got["wamid.X"]["type"], "unsupported");
    for (w, m) in &got {
        assert!(!m["content"].is_null(), "{w} lost its content: {m}");
        assert_eq!(
            (m["edited_at"].clone(), m["revoked_at"].clone()),
            (Value::Null, Value::Null),
            "{w}"
        );
    }
    // GET /messages/{id} shows the same.
    let one = got["wamid.L"]["id"].as_str().unwrap();
    let (_, _, single) = app.get(&format!("{API}/messages/{one}"), Some(&key)).await;
    assert_eq!(single["content"], content("wamid.L"));
}

async fn edits_and_deletions_change_the_original(app: &TestApp) {
    let key = setup(app).await;
    let first = wamid();
    deliver(
        app,
        &notification(
            json!([{"wa_id": FROM, "profile": {"name": "Ann"}}]),
            json!([msg(&first, "text", json!({"body": "See you at 5"}))]),
            json!([]),
        ),
    )
    .await;
    let edit = |id: String, ts: &str, body: &str| {
        json!({"from": FROM, "id": id, "timestamp": ts, "type": "edit",
            "edit": {"original_message_id": first, "message": {"type": "text", "text": {"body": body}}}})
    };
    let r = deliver(
        app,
        &notification(
            json!([]),
            json!([edit(wamid(), "1700000500", "See you at 6")]),
            json!([]),
        ),
    )
    .await;
    assert_eq!((r.messages_updated, r.inbound_stored), (1, 0));
    let got = inbound(app, &key).await;
    assert_eq!(got.len(), 1, "an edit is no new message");
    let m = &got[&first];
    assert_eq!(
        (m["text"].as_str(), m["content"].clone()),
        (Some("See you at 6"), json!({"body": "See you at 6"}))
    );
    assert_eq!(m["edited_at"], "2023-11-14T22:21:40.000Z");
    // An older edit arriving late does not win.
    deliver(
        app,
        &notification(
            json!([]),
            json!([edit(wamid(), "1700000400", "See you at 4")]),
            json!([]),
        ),
    )
    .await;
    assert_eq!(inbound(app, &key).await[&first]["text"], "See you at 6");
    // Deleted: text and content are gone, revoked_at is set.
    let revoke = json!({"from": FROM, "id": wamid(), "timestamp": "1700000600", "type": "revoke", "revoke": {"original_message_id": first}});
    deliver(app, &notification(json!([]), json!([revoke]), json!([]))).await;
    let m = inbound(app, &key).await[&first].clone();
    assert_eq!(
        (m["text"].clone(), m["content"].clone()),
        (Value::Null, Value::Null),
        "{m}"
    );
    assert_eq!(m["revoked_at"], "2023-11-14T22:23:20.000Z");
    // Out of order: an edit before its original creates the message as it reads now; the
    // original, arriving later, only brings its own time (no second message).
    let orphan = json!({"from": FROM, "id": "wamid.EDIT2", "timestamp": "1700000700", "type": "edit",
        "edit": {"original_message_id": "wamid.LATE", "message": {"type": "text", "text": {"body": "late, edited"}}}});
    deliver(app, &notification(json!([]), json!([orphan]), json!([]))).await;
    let o = inbound(app, &key).await["wamid.LATE"].clone();
    assert_eq!(
        (o["type"].as_str(), o["text"].as_str(), o["content"].clone()),
        (
            Some("text"),
            Some("late, edited"),
            json!({"body": "late, edited"})
        ),
        "{o}"
    );
    let late = msg("wamid.LATE", "text", json!({"body": "late"}));
    let r = deliver(app, &notification(json!([]), json!([late]), json!([]))).await;
    assert_eq!(r.inbound_stored, 1, "{r:?}");
    let all = inbound(app, &key).await;
    assert_eq!(all.len(), 2, "{all:?}");
    let o = &all["wamid.LATE"];
    assert_eq!(
        (
            o["text"].as_str(),
            o["created_at"].as_str(),
            o["edited_at"].as_str()
        ),
        (
            Some("late, edited"),
            Some("2023-11-14T22:13:20.000Z"),
            Some("2023-11-14T22:25:00.000Z")
        ),
        "{o}"
    );
    // A deletion before its original: the original never shows.
    let gone = json!({"from": FROM, "id": wamid(), "timestamp": "1700000800", "type": "revoke", "revoke": {"original_message_id": "wamid.GONE"}});
    deliver(app, &notification(json!([]), json!([gone]), json!([]))).await;
    deliver(
        app,
        &notification(
            json!([]),
            json!([msg(
                "wamid.GONE",
                "image",
                json!({"id": "9", "mime_type": "image/png", "caption": "oops"})
            )]),
            json!([]),
        ),
    )
    .await;
    let g = inbound(app, &key).await["wamid.GONE"].clone();
    assert_eq!(
        (g["type"].as_str(), g["text"].clone(), g["content"].clone()),
        (Some("image"), Value::Null, Value::Null),
        "{g}"
    );
    assert_eq!(
        (g["created_at"].as_str(), g["revoked_at"].as_str()),
        (
            Some("2023-11-14T22:13:20.000Z"),
            Some("2023-11-14T22:26:40.000Z")
        )
    );
    // A network retry of the original after that changes nothing.
    let r = deliver(
        app,
        &notification(
            json!([]),
            json!([msg(
                "wamid.GONE",
                "image",
                json!({"id": "9", "mime_type": "image/png"})
            )]),
            json!([]),
        ),
    )
    .await;
    assert_eq!((r.inbound_stored, r.inbound_duplicates), (0, 1));
}

/// Batches stored together and applied together (two at a time on PostgreSQL): one new
/// customer across all of them, an edit in another batch than its original.
async fn batches_applied_together_keep_every_effect(app: &TestApp) {
    let key = setup(app).await;
    let user =
        json!([{"user_id": "US.555000111222333", "profile": {"name": "Lu", "username": "lu"}}]);
    let from = |id: &str, kind: &str, object: Value| {
        let mut m = json!({"from_user_id": "US.555000111222333", "id": id, "timestamp": "1700000000", "type": kind});
        m[kind] = object;
        m
    };
    let mut bodies = vec![notification(
        user.clone(),
        json!([from("wamid.B0", "text", json!({"body": "v1"}))]),
        json!([]),
    )];
    bodies.push(notification(user.clone(), json!([{"from_user_id": "US.555000111222333", "id": "wamid.B1", "timestamp": "1700000100",
        "type": "edit", "edit": {"original_message_id": "wamid.B0", "message": {"type": "text", "text": {"body": "v2"}}}}]), json!([])));
    for i in 2..8 {
        bodies.push(notification(
            user.clone(),
            json!([from(
                &format!("wamid.B{i}"),
                "text",
                json!({"body": format!("m{i}")})
            )]),
            json!([]),
        ));
    }
    for b in &bodies {
        let (s, out) = app.post_network(&serde_json::to_vec(b).unwrap()).await;
        assert_eq!(s, 200, "{out}");
    }
    let r = tern_engine::inbox::drain(&app.db).await.unwrap();
    assert_eq!(r.inbound_stored + r.messages_updated, 8, "{r:?}");
    let contacts = app.get(&format!("{API}/contacts"), Some(&key)).await.2;
    assert_eq!(contacts["data"].as_array().unwrap().len(), 1, "{contacts}");
    let got = inbound(app, &key).await;
    assert_eq!(got.len(), 7);
    assert_eq!(got["wamid.B0"]["text"], "v2");
}

tern_store::both_backends! { TestApp;
    batches_applied_together_keep_every_effect_http => batches_applied_together_keep_every_effect,
    every_inbound_type_keeps_its_content_http => every_inbound_type_keeps_its_content,
    edits_and_deletions_change_the_original_http => edits_and_deletions_change_the_original,
}
