//! POST /messages, GET /messages/{id} and the conversation endpoints over HTTP, on SQLite and
//! PostgreSQL: every acceptance rule of the contract (forms of `to`, number selection, the
//! 24-hour window, consent, templates, idempotency, billing), without the dispatcher (messages
//! stay `accepted`; sending is covered by `dispatch_e2e.rs`).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common::{TestApp, assert_error, send};
use serde_json::{Value, json};
use tern_domain::auth::Preset;
use tern_domain::time::now_ms;
use uuid::Uuid;

pub(crate) const PNID: &str = "900100";
pub(crate) const CUSTOMER: &str = "14155550123";
const API: &str = "/api/public/v1";

fn envelope(pnid: &str, from: &str, wamid: &str, ts_secs: i64) -> Value {
    json!({"object": "whatsapp_business_account", "entry": [{"id": "waba1", "changes": [{
        "field": "messages", "value": {
            "messaging_product": "whatsapp",
            "metadata": {"display_phone_number": "14155550100", "phone_number_id": pnid},
            "contacts": [{"profile": {"name": "Ada"}, "wa_id": from}],
            "messages": [{"from": from, "id": wamid, "timestamp": ts_secs.to_string(),
                          "type": "text", "text": {"body": "hello"}}]}}]}]})
}

/// The customer `from` writes to `pnid` at `ts_ms` (network time); processed at once.
pub(crate) async fn customer_writes(app: &TestApp, pnid: &str, from: &str, ts_ms: i64) {
    let wamid = format!("wamid.in.{}", Uuid::now_v7().simple());
    let body = serde_json::to_vec(&envelope(pnid, from, &wamid, ts_ms / 1000)).unwrap();
    let (s, b) = app.post_network(&body).await;
    assert_eq!(s, 200, "{b}");
    tern_engine::inbox::drain(&app.db).await.unwrap();
}

pub(crate) struct Ctx {
    pub(crate) key: String,
}

pub(crate) async fn setup(app: &TestApp) -> Ctx {
    app.add_number(&app.org_id, PNID, "+14155550100").await;
    let (_, key) = app.owner_key("full_access").await;
    Ctx { key }
}

pub(crate) async fn post(
    app: &TestApp,
    key: &str,
    idem: Option<&str>,
    body: &Value,
) -> (u16, reqwest::header::HeaderMap, Value) {
    let mut req = app
        .http
        .post(app.url(&format!("{API}/messages")))
        .bearer_auth(key)
        .json(body);
    if let Some(k) = idem {
        req = req.header("Idempotency-Key", k);
    }
    send(req).await
}

pub(crate) fn idem() -> String {
    format!("k-{}", Uuid::now_v7().simple())
}

pub(crate) fn text(to: Value, body: &str) -> Value {
    json!({"to": to, "type": "text", "text": {"body": body}})
}

/// An approved template of the organisation (network id `1234`), stored directly.
pub(crate) async fn insert_template(app: &TestApp, name: &str, components: Value, category: &str) {
    insert_approved_template(&app.db, app.org_uuid(), "waba1", name, components, category).await;
}

/// An approved `en_US` template of organisation `org` on WABA `waba`, stored directly.
pub(crate) async fn insert_approved_template(
    db: &tern_store::Db,
    org: Uuid,
    waba: &str,
    name: &str,
    components: Value,
    category: &str,
) {
    let now = now_ms();
    db.insert_template(&tern_store::Template {
        id: Uuid::now_v7(),
        org_id: org,
        waba_id: waba.into(),
        name: name.into(),
        language: "en_US".into(),
        category: category.parse().unwrap(),
        status: "approved".parse().unwrap(),
        components,
        rejection_reason: None,
        network_id: Some("1234".into()),
        created_at: now,
        updated_at: now,
    })
    .await
    .unwrap();
}

fn fields(body: &Value) -> Vec<String> {
    body["details"]["fields"]
        .as_array()
        .map(|a| {
            a.iter()
                .map(|f| f["field"].as_str().unwrap().to_string())
                .collect()
        })
        .unwrap_or_default()
}

async fn text_in_window_then_read_back(app: &TestApp) {
    let c = setup(app).await;
    customer_writes(app, PNID, CUSTOMER, now_ms() - 60_000).await;
    let k = idem();
    let body = text(json!("+1 415-555-0123"), "Your order has shipped.");
    let (s, h, m) = post(app, &c.key, Some(&k), &body).await;
    assert_eq!(s, 202, "{m}");
    assert!(h.get("idempotent-replayed").is_none());
    assert_eq!(m["status"], "accepted");
    assert_eq!(m["direction"], "outbound");
    assert_eq!(m["type"], "text");
    assert_eq!(m["text"], "Your order has shipped.");
    assert_eq!(m["phone_number_id"], PNID);
    for null in [
        "wamid",
        "template_name",
        "media_id",
        "sent_at",
        "delivered_at",
        "read_at",
        "failed_at",
        "failure_code",
        "failure",
    ] {
        assert!(m[null].is_null(), "{null}: {m}");
    }
    let id = m["id"].as_str().unwrap();
    assert!(m["created_at"].as_str().unwrap().ends_with('Z'));

    // GET answers the same object.
    let (s, _, got) = app.get(&format!("{API}/messages/{id}"), Some(&c.key)).await;
    assert_eq!(s, 200);
    assert_eq!(got, m);

    // The same key and body (keys reordered, extra whitespace) is a replay: 200, same message.
    let reordered = json!({"text": {"body": "Your order has shipped."}, "type": "text", "to": "+1 415-555-0123"});
    let (s, h, again) = post(app, &c.key, Some(&k), &reordered).await;
    assert_eq!(s, 200, "{again}");
    assert_eq!(h.get("idempotent-replayed").unwrap(), "true");
    assert_eq!(again["id"], m["id"]);
    // The same key with another body is refused.
    let (s, h, e) = post(
        app,
        &c.key,
        Some(&k),
        &text(json!("+1 415-555-0123"), "other"),
    )
    .await;
    assert_error(s, &h, &e, 409, "duplicate_request");
    // The details name the key and when it was first used: the first message's acceptance.
    assert_eq!(e["details"]["idempotency_key"], k.as_str(), "{e}");
    assert_eq!(e["details"]["first_used_at"], m["created_at"], "{e}");

    // The conversation lists both messages, newest first, and filters by direction.
    let (s, _, convs) = app.get(&format!("{API}/conversations"), Some(&c.key)).await;
    assert_eq!(s, 200, "{convs}");
    let conv = &convs["data"][0];
    assert_eq!(conv["id"], m["conversation_id"]);
    assert_eq!(conv["window_state"], "open");
    assert_eq!(conv["contact_id"], m["contact_id"]);
    // Enough to show the person without another request.
    assert_eq!(conv["contact"]["id"], m["contact_id"]);
    assert_eq!(conv["contact"]["name"], "Ada");
    assert_eq!(conv["contact"]["phone"], format!("+{CUSTOMER}"));
    assert!(conv["contact"]["username"].is_null(), "{conv}");
    let cid = conv["id"].as_str().unwrap();
    let (_, _, msgs) = app
        .get(&format!("{API}/conversations/{cid}/messages"), Some(&c.key))
        .await;
    let dirs: Vec<&str> = msgs["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["direction"].as_str().unwrap())
        .collect();
    assert_eq!(dirs, vec!["outbound", "inbound"]);
    assert_eq!(msgs["data"][1]["status"], "received");
    assert_eq!(msgs["data"][1]["text"], "hello");
    let (_, _, inbound) = app
        .get(
            &format!("{API}/conversations/{cid}/messages?direction=inbound"),
            Some(&c.key),
        )
        .await;
    assert_eq!(inbound["data"].as_array().unwrap().len(), 1);
    let (_, _, page) = app
        .get(
            &format!("{API}/conversations/{cid}/messages?limit=1"),
            Some(&c.key),
        )
        .await;
    assert_eq!(page["data"][0]["id"], m["id"]);
    let cursor = page["next_cursor"].as_str().unwrap();
    let (_, _, page2) = app
        .get(
            &format!("{API}/conversations/{cid}/messages?limit=1&cursor={cursor}"),
            Some(&c.key),
        )
        .await;
    assert_eq!(page2["data"][0]["direction"], "inbound");
    assert!(page2["next_cursor"].is_null());
    for bad in ["?direction=sideways", "?window_state=ajar"] {
        let path = if bad.contains("direction") {
            format!("{API}/conversations/{cid}/messages{bad}")
        } else {
            format!("{API}/conversations{bad}")
        };
        let (s, _, e) = app.get(&path, Some(&c.key)).await;
        assert_eq!(s, 400, "{bad}: {e}");
    }
    let (_, _, open) = app
        .get(
            &format!("{API}/conversations?window_state=closed"),
            Some(&c.key),
        )
        .await;
    assert!(open["data"].as_array().unwrap().is_empty());
    let contact = m["contact_id"].as_str().unwrap();
    let (_, _, mine) = app
        .get(
            &format!("{API}/conversations?contact_id={contact}&window_state=open"),
            Some(&c.key),
        )
        .await;
    assert_eq!(mine["data"].as_array().unwrap().len(), 1);

    // Unknown, malformed and foreign ids are all 404.
    for path in [
        format!("{API}/messages/{}", Uuid::now_v7()),
        format!("{API}/messages/nope"),
        format!("{API}/conversations/{}/messages", Uuid::now_v7()),
    ] {
        let (s, h, e) = app.get(&path, Some(&c.key)).await;
        assert_error(s, &h, &e, 404, "not_found");
    }
    let (_, other_key) = app.other_org("Other", Preset::FullAccess).await;
    let (s, _, _) = app
        .get(&format!("{API}/messages/{id}"), Some(&other_key))
        .await;
    assert_eq!(s, 404);
    let (s, _, _) = app
        .get(
            &format!("{API}/conversations/{cid}/messages"),
            Some(&other_key),
        )
        .await;
    assert_eq!(s, 404);
}

async fn idempotency_key_rules(app: &TestApp) {
    let c = setup(app).await;
    customer_writes(app, PNID, CUSTOMER, now_ms()).await;
    let body = text(json!("+14155550123"), "hi");
    for bad in [
        None,
        Some("short"),
        Some("-starts-with-dash"),
        Some("has space in it"),
        Some("ünïcode-key"),
    ] {
        let (s, h, e) = post(app, &c.key, bad, &body).await;
        assert_error(s, &h, &e, 400, "validation_failed");
        assert_eq!(fields(&e), vec!["Idempotency-Key"], "{bad:?}: {e}");
    }
    let long = "a".repeat(129);
    let (s, _, _) = post(app, &c.key, Some(&long), &body).await;
    assert_eq!(s, 400);
    let (s, _, _) = post(app, &c.key, Some(&"a".repeat(128)), &body).await;
    assert_eq!(s, 202);
    // The key is checked before the body: a bad key with a broken body names the key.
    let res = app
        .http
        .post(app.url(&format!("{API}/messages")))
        .bearer_auth(&c.key)
        .header("Content-Type", "application/json")
        .body("{not json")
        .send()
        .await
        .unwrap();
    let e: Value = res.json().await.unwrap();
    assert_eq!(fields(&e), vec!["Idempotency-Key"]);
    // A refused request does not bind its key: fix the body, retry with the same key.
    let k = "retry-me-1";
    let (s, _, e) = post(
        app,
        &c.key,
        Some(k),
        &text(json!("+14155550123"), &"x".repeat(4097)),
    )
    .await;
    assert_eq!(s, 400);
    assert_eq!(fields(&e), vec!["text.body"]);
    let (s, _, _) = post(app, &c.key, Some(k), &body).await;
    assert_eq!(s, 202);
    // Exactly 4,096 characters (multi-byte) is fine.
    let (s, _, e) = post(
        app,
        &c.key,
        Some(&idem()),
        &text(json!("+14155550123"), &"é".repeat(4096)),
    )
    .await;
    assert_eq!(s, 202, "{e}");
}

async fn concurrent_requests_with_one_key_make_one_message(app: &TestApp) {
    let c = setup(app).await;
    customer_writes(app, PNID, CUSTOMER, now_ms()).await;
    let body = text(json!("+14155550123"), "once");
    let mut tasks = Vec::new();
    for _ in 0..16 {
        let (http, url, key, body) = (
            app.http.clone(),
            app.url(&format!("{API}/messages")),
            c.key.clone(),
            body.clone(),
        );
        tasks.push(tokio::spawn(async move {
            send(
                http.post(url)
                    .bearer_auth(key)
                    .header("Idempotency-Key", "concurrent-1")
                    .json(&body),
            )
            .await
        }));
    }
    let mut ids = Vec::new();
    let mut created = 0;
    for t in tasks {
        let (s, _, m) = t.await.unwrap();
        match s {
            202 => created += 1,
            200 => {}
            other => panic!("{other}: {m}"),
        }
        ids.push(m["id"].as_str().unwrap().to_string());
    }
    assert_eq!(created, 1);
    ids.dedup();
    assert_eq!(ids.len(), 1);
    let (_, _, convs) = app.get(&format!("{API}/conversations"), Some(&c.key)).await;
    let cid = convs["data"][0]["id"].as_str().unwrap();
    let (_, _, msgs) = app
        .get(
            &format!("{API}/conversations/{cid}/messages?direction=outbound"),
            Some(&c.key),
        )
        .await;
    assert_eq!(msgs["data"].as_array().unwrap().len(), 1);
}

async fn window_consent_and_recipient_rules(app: &TestApp) {
    let c = setup(app).await;
    // Never written: only a template can start the conversation.
    let (s, h, e) = post(
        app,
        &c.key,
        Some(&idem()),
        &text(json!("+14155550123"), "hi"),
    )
    .await;
    assert_error(s, &h, &e, 409, "template_required");
    // A refused send to a new number creates nothing.
    let (_, _, contacts) = app.get(&format!("{API}/contacts"), Some(&c.key)).await;
    assert!(
        contacts["data"].as_array().unwrap().is_empty(),
        "{contacts}"
    );
    // Window closed (customer wrote 25 hours ago, by the network's clock).
    customer_writes(app, PNID, "14155550124", now_ms() - 25 * 3_600_000).await;
    let (s, h, e) = post(
        app,
        &c.key,
        Some(&idem()),
        &text(json!({"wa_id": "14155550124"}), "hi"),
    )
    .await;
    assert_error(s, &h, &e, 409, "window_expired");
    // Opted out: a reply inside the open window is still allowed, a template is not.
    customer_writes(app, PNID, "14155550125", now_ms()).await;
    let (_, _, found) = app
        .get(&format!("{API}/contacts?q=14155550125"), Some(&c.key))
        .await;
    let contact_id = found["data"][0]["id"].as_str().unwrap().to_string();
    let (s, _, b) = send(
        app.http
            .post(app.url(&format!("{API}/contacts/{contact_id}/consent")))
            .bearer_auth(&c.key)
            .json(&json!({"status": "opted_out", "source": "reply_stop"})),
    )
    .await;
    assert_eq!(s, 200, "{b}");
    let (s, _, m) = post(
        app,
        &c.key,
        Some(&idem()),
        &text(json!({"contact_id": contact_id}), "Sorry to see you go"),
    )
    .await;
    assert_eq!(s, 202, "{m}");
    assert_eq!(m["contact_id"], contact_id.as_str());
    insert_template(
        app,
        "order_update",
        json!([{"type": "BODY", "text": "Order {{1}} shipped"}]),
        "utility",
    )
    .await;
    app.admin(&[
        "org",
        "update",
        "--org",
        &app.org_id,
        "--wallet-balance-minor",
        "1000",
    ])
    .await
    .unwrap();
    let tpl = json!({"to": {"contact_id": contact_id}, "type": "template",
        "template": {"name": "order_update", "language": "en_US", "variables": ["A-1"]}});
    let (s, h, e) = post(app, &c.key, Some(&idem()), &tpl).await;
    assert_error(s, &h, &e, 409, "contact_opted_out");

    // Forms of `to`.
    let (s, h, e) = post(
        app,
        &c.key,
        Some(&idem()),
        &text(json!("14155550123"), "hi"),
    )
    .await;
    assert_error(s, &h, &e, 400, "validation_failed");
    assert_eq!(e["details"]["reason"], "to_needs_country_code");
    let (s, _, e) = post(
        app,
        &c.key,
        Some(&idem()),
        &text(json!("+<RECIPIENT_PHONE>"), "hi"),
    )
    .await;
    assert_eq!(
        (s, e["details"]["reason"].as_str()),
        (400, Some("to_placeholder"))
    );
    let (s, _, e) = post(
        app,
        &c.key,
        Some(&idem()),
        &text(
            json!({"contact_id": contact_id, "wa_id": "14155550125"}),
            "hi",
        ),
    )
    .await;
    assert_eq!(s, 400, "{e}");
    let (s, h, e) = post(
        app,
        &c.key,
        Some(&idem()),
        &text(json!({"contact_id": Uuid::now_v7().to_string()}), "hi"),
    )
    .await;
    assert_error(s, &h, &e, 404, "not_found");
    // A template to a new number creates the contact.
    let new = json!({"to": {"wa_id": "14155550126"}, "type": "template",
        "template": {"name": "order_update", "language": "en_US", "variables": ["A-2"]}});
    let (s, _, m) = post(app, &c.key, Some(&idem()), &new).await;
    assert_eq!(s, 202, "{m}");
    assert_eq!(m["template_name"], "order_update");
    assert!(m["text"].is_null());
    let (_, _, created) = app
        .get(
            &format!("{API}/contacts/{}", m["contact_id"].as_str().unwrap()),
            Some(&c.key),
        )
        .await;
    assert_eq!(created["wa_id"], "14155550126");
    // Addressing by number needs contacts.create; by contact_id it does not.
    let (_, send_only) = app
        .key_for(
            &app.org_id,
            &app.owner_id,
            &["--permissions", "messages.send,messages.read"],
        )
        .await;
    let (s, h, e) = post(app, &send_only, Some(&idem()), &new).await;
    assert_error(s, &h, &e, 403, "permission_denied");
    assert_eq!(e["details"]["permission"], "contacts.create");
    let by_id = json!({"to": {"contact_id": m["contact_id"]}, "type": "template",
        "template": {"name": "order_update", "language": "en_US", "variables": ["A-3"]}});
    let (s, _, e) = post(app, &send_only, Some(&idem()), &by_id).await;
    assert_eq!(s, 202, "{e}");
    // Without messages.send nothing is sent.
    let (_, read_only) = app.owner_key("read_only").await;
    let (s, h, e) = post(app, &read_only, Some(&idem()), &by_id).await;
    assert_error(s, &h, &e, 403, "permission_denied");
    assert_eq!(e["details"]["permission"], "messages.send");
}

async fn sending_number_selection(app: &TestApp) {
    let (_, key) = app.owner_key("full_access").await;
    let body = text(json!("+14155550123"), "hi");
    let (s, h, e) = post(app, &key, Some(&idem()), &body).await;
    assert_error(s, &h, &e, 409, "conflict");
    assert_eq!(e["details"]["reason"], "no_connected_phone_number");
    app.add_number(&app.org_id, PNID, "+14155550100").await;
    app.add_number(&app.org_id, "900200", "+14155550200").await;
    customer_writes(app, PNID, CUSTOMER, now_ms()).await;
    let (s, h, e) = post(app, &key, Some(&idem()), &body).await;
    assert_error(s, &h, &e, 400, "validation_failed");
    assert_eq!(e["details"]["reason"], "from_required");
    let numbers: Vec<&str> = e["details"]["numbers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["id"].as_str().unwrap())
        .collect();
    assert_eq!(numbers, vec![PNID, "900200"]);
    // By id, or by the number in E.164 (formatted or not).
    let mut by_id = body.clone();
    by_id["phone_number_id"] = json!(PNID);
    let by_id_key = idem();
    let (s, _, m) = post(app, &key, Some(&by_id_key), &by_id).await;
    assert_eq!((s, m["phone_number_id"].as_str()), (202, Some(PNID)), "{m}");
    let by_id_message = m["id"].clone();
    let mut by_from = body.clone();
    by_from["from"] = json!("+1 415-555-0100");
    let (s, _, m) = post(app, &key, Some(&idem()), &by_from).await;
    assert_eq!((s, m["phone_number_id"].as_str()), (202, Some(PNID)), "{m}");
    // The other number has no window with this customer.
    let mut other = body.clone();
    other["from"] = json!("900200");
    let (s, h, e) = post(app, &key, Some(&idem()), &other).await;
    assert_error(s, &h, &e, 409, "template_required");
    let mut unknown = body.clone();
    unknown["phone_number_id"] = json!("999");
    let (s, _, e) = post(app, &key, Some(&idem()), &unknown).await;
    assert_eq!(
        (s, fields(&e)),
        (400, vec!["phone_number_id".to_string()]),
        "{e}"
    );
    app.admin(&[
        "number",
        "update",
        "--phone-number-id",
        PNID,
        "--status",
        "disconnected",
    ])
    .await
    .unwrap();
    let (s, h, e) = post(app, &key, Some(&idem()), &by_id).await;
    assert_error(s, &h, &e, 409, "conflict");
    assert_eq!(e["details"]["reason"], "phone_number_not_connected");
    // A bound key still answers first when a later check would refuse: the same body is
    // replayed although its number is disconnected now, and a broken body is a
    // duplicate_request, not a validation error.
    let (s, h, again) = post(app, &key, Some(&by_id_key), &by_id).await;
    assert_eq!(s, 200, "{again}");
    assert_eq!(h.get("idempotent-replayed").unwrap(), "true");
    assert_eq!(again["id"], by_id_message);
    let (s, h, e) = post(app, &key, Some(&by_id_key), &json!({"type": "text"})).await;
    assert_error(s, &h, &e, 409, "duplicate_request");
}

async fn templates_are_checked_against_the_approved_one(app: &TestApp) {
    let c = setup(app).await;
    insert_template(
        app,
        "order_update",
        json!([
            {"type": "HEADER", "format": "TEXT", "text": "Order {{1}}"},
            {"type": "BODY", "text": "Hi {{1}}, order {{2}} ships {{3}}"}
        ]),
        "utility",
    )
    .await;
    app.admin(&[
        "org",
        "update",
        "--org",
        &app.org_id,
        "--wallet-balance-minor",
        "1000",
        "--price",
        "utility=20",
    ])
    .await
    .unwrap();
    let tpl = |vars: Value| {
        json!({"to": "+14155550123", "type": "template",
        "template": {"name": "order_update", "language": "en_US", "variables": vars}})
    };
    let (s, _, m) = post(
        app,
        &c.key,
        Some(&idem()),
        &tpl(json!(["Ada", "A-1", "today"])),
    )
    .await;
    assert_eq!(s, 202, "{m}");
    // What will be sent: components built from the variables.
    let id: Uuid = m["id"].as_str().unwrap().parse().unwrap();
    let stored = app
        .db
        .get_message(app.org_uuid(), id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(stored.request["to"], CUSTOMER);
    assert_eq!(stored.request["template"]["language"]["code"], "en_US");
    let comps = stored.request["template"]["components"].as_array().unwrap();
    assert!(
        comps
            .iter()
            .any(|c| c["type"] == "body" && c["parameters"].as_array().unwrap().len() == 3),
        "{comps:?}"
    );
    // The template debited the wallet (utility: 20).
    let org = app.db.get_org(app.org_uuid()).await.unwrap().unwrap();
    assert_eq!(org.wallet_balance_minor, 980);

    let (s, h, e) = post(app, &c.key, Some(&idem()), &tpl(json!(["Ada", "A-1"]))).await;
    assert_error(s, &h, &e, 409, "template_not_approved");
    let mut wrong_lang = tpl(json!(["Ada", "A-1", "today"]));
    wrong_lang["template"]["language"] = json!("de");
    let (s, h, e) = post(app, &c.key, Some(&idem()), &wrong_lang).await;
    assert_error(s, &h, &e, 409, "template_not_approved");
    // Value rules: every problem at once, with paths.
    let (s, h, e) = post(
        app,
        &c.key,
        Some(&idem()),
        &tpl(json!(["", "two\nlines", "a     b"])),
    )
    .await;
    assert_error(s, &h, &e, 400, "validation_failed");
    assert_eq!(
        fields(&e),
        vec![
            "template.variables[0]",
            "template.variables[1]",
            "template.variables[2]"
        ]
    );
    let mut both = tpl(json!(["a", "b", "c"]));
    both["template"]["components"] = json!([]);
    let (s, _, e) = post(app, &c.key, Some(&idem()), &both).await;
    assert_eq!(s, 400, "{e}");
}

async fn body_rules_and_media(app: &TestApp) {
    let c = setup(app).await;
    customer_writes(app, PNID, CUSTOMER, now_ms()).await;
    let to = json!("+14155550123");
    let (s, h, e) = post(
        app,
        &c.key,
        Some(&idem()),
        &json!({"to": to, "type": "fax", "fax": {}}),
    )
    .await;
    assert_error(s, &h, &e, 400, "unsupported_message_type");
    // Several problems are named at once.
    let bad = json!({"to": "14155550123", "type": "audio", "audio": {"link": "http://x.test/a.mp3", "caption": "no"}, "text": {"body": "x"}});
    let (s, _, e) = post(app, &c.key, Some(&idem()), &bad).await;
    assert_eq!(s, 400, "{e}");
    let f = fields(&e);
    for want in ["to", "audio.link", "audio.caption", "text"] {
        assert!(f.iter().any(|x| x == want), "{want} missing from {f:?}");
    }
    assert_eq!(e["details"]["reason"], "to_needs_country_code");
    let (s, _, e) = post(app, &c.key, Some(&idem()), &json!({"to": to, "type": "image", "image": {"link": "https://x.test/a.png", "media_id": "m"}})).await;
    assert_eq!(s, 400, "{e}");
    let (s, _, e) = post(app, &c.key, Some(&idem()), &json!({"to": to, "type": "document", "document": {"link": "https://x.test/a.pdf", "caption": "c".repeat(1025)}})).await;
    assert_eq!((s, fields(&e)), (400, vec!["document.caption".to_string()]));
    // Media pass every check but cannot be fetched or held yet.
    let (s, h, e) = post(
        app,
        &c.key,
        Some(&idem()),
        &json!({"to": to, "type": "image", "image": {"media_id": "abc"}}),
    )
    .await;
    assert_error(s, &h, &e, 409, "media_unavailable");
    // Other free-form types in the window.
    for body in [
        json!({"to": to, "type": "location", "location": {"latitude": 52.5, "longitude": 13.4, "name": "HQ"}}),
        json!({"to": to, "type": "reaction", "reaction": {"message_id": "wamid.X", "emoji": "👍"}}),
        json!({"to": to, "type": "interactive", "interactive": {"type": "button", "body": {"text": "Pick"},
            "action": {"buttons": [{"type": "reply", "reply": {"id": "y", "title": "Yes"}}]}}}),
        json!({"to": to, "type": "contacts", "contacts": [{"name": {"formatted_name": "Ada L", "first_name": "Ada"}}]}),
    ] {
        let (s, _, m) = post(app, &c.key, Some(&idem()), &body).await;
        assert_eq!(s, 202, "{body}: {m}");
        assert_eq!(m["type"], body["type"]);
    }
}

/// POST /messages reads the key together with the send's data (one lookup), so the body is
/// parsed first; the answers still come in the contract's order: key → permission → plan
/// feature → Idempotency-Key → body.
async fn send_checks_the_key_first(app: &TestApp) {
    let c = setup(app).await;
    customer_writes(app, PNID, CUSTOMER, now_ms()).await;
    let raw = |key: Option<&str>, idem: Option<&str>, body: &str| {
        let mut req = app
            .http
            .post(app.url(&format!("{API}/messages")))
            .header("Content-Type", "application/json")
            .body(body.to_string());
        if let Some(k) = key {
            req = req.bearer_auth(k);
        }
        if let Some(k) = idem {
            req = req.header("Idempotency-Key", k);
        }
        send(req)
    };
    let good = text(json!("+14155550123"), "hi").to_string();
    let (s, h, e) = raw(None, Some(&idem()), "{not json").await;
    assert_error(s, &h, &e, 401, "unauthenticated");
    assert_eq!(e["details"]["reason"], "missing_authorization");
    let unknown = format!("tern_{}", "A".repeat(40));
    let (s, h, e) = raw(Some(&unknown), None, "{not json").await;
    assert_error(s, &h, &e, 401, "unauthenticated");
    assert_eq!(e["details"]["reason"], "invalid_key");
    // A revoked key is refused even with a valid request.
    let (id, revoked) = app.owner_key("full_access").await;
    app.admin(&["key", "revoke", "--key-id", &id])
        .await
        .unwrap();
    let (s, h, e) = raw(Some(&revoked), Some(&idem()), &good).await;
    assert_error(s, &h, &e, 401, "unauthenticated");
    assert_eq!(e["details"]["reason"], "revoked_key");
    // The permission before the Idempotency-Key and the body.
    let (_, read_only) = app.owner_key("read_only").await;
    let (s, h, e) = raw(Some(&read_only), None, "{not json").await;
    assert_error(s, &h, &e, 403, "permission_denied");
    assert_eq!(e["details"]["permission"], "messages.send");
    // The Idempotency-Key before the body; the body before the recipient.
    let (s, h, e) = raw(Some(&c.key), None, "[]").await;
    assert_error(s, &h, &e, 400, "validation_failed");
    assert_eq!(fields(&e), vec!["Idempotency-Key"]);
    let (s, h, e) = raw(Some(&c.key), Some(&idem()), "[]").await;
    assert_error(s, &h, &e, 400, "validation_failed");
    assert_eq!(fields(&e), vec!["body"]);
    let (s, _, e) = raw(Some(&c.key), Some(&idem()), &good).await;
    assert_eq!(s, 202, "{e}");
    // The plan feature after the permission.
    app.admin(&[
        "org",
        "update",
        "--org",
        &app.org_id,
        "--feature",
        "public_api=off",
    ])
    .await
    .unwrap();
    let (s, h, e) = raw(Some(&c.key), None, "{not json").await;
    assert_error(s, &h, &e, 402, "plan_feature_unavailable");
    let (s, h, e) = raw(Some(&read_only), None, "{not json").await;
    assert_error(s, &h, &e, 403, "permission_denied");
}

tern_store::both_backends! { TestApp;
    send_checks_the_key_first_http => send_checks_the_key_first,
    text_in_window_then_read_back_http => text_in_window_then_read_back,
    idempotency_key_rules_http => idempotency_key_rules,
    concurrent_requests_with_one_key_make_one_message_http => concurrent_requests_with_one_key_make_one_message,
    window_consent_and_recipient_rules_http => window_consent_and_recipient_rules,
    sending_number_selection_http => sending_number_selection,
    templates_are_checked_against_the_approved_one_http => templates_are_checked_against_the_approved_one,
    body_rules_and_media_http => body_rules_and_media,
}
