//! Customers as the network sends them (2026): known by phone, by business-scoped user id
//! (BSUID) and username, or both — contacts, merges, sends to a BSUID,
//! and (in `content`) what every inbound message carries — over HTTP on SQLite and
//! PostgreSQL.

mod content;
mod e2e;
mod identity_changes;

use crate::common::{TestApp, assert_error, send};
use crate::messages::insert_template;
use serde_json::{Value, json};
use uuid::Uuid;

pub(super) const PNID: &str = "900100";
const API: &str = "/api/public/v1";
const BSUID: &str = "US.13491208655302741918";
const BSUID2: &str = "US.20000000000000000002";

/// A `messages` notification for the number with these contacts, messages and statuses.
pub(super) fn notification(contacts: Value, messages: Value, statuses: Value) -> Value {
    json!({"object": "whatsapp_business_account", "entry": [{"id": "waba1", "changes": [{
        "field": "messages", "value": {
            "messaging_product": "whatsapp",
            "metadata": {"display_phone_number": "14155550100", "phone_number_id": PNID},
            "contacts": contacts, "messages": messages, "statuses": statuses}}]}]})
}

/// Posts a signed notification and applies it at once.
pub(super) async fn deliver(app: &TestApp, body: &Value) -> tern_core::inbox::Report {
    let (s, b) = app.post_network(&serde_json::to_vec(body).unwrap()).await;
    assert_eq!(s, 200, "{b}");
    tern_engine::inbox::drain(&app.db).await.unwrap()
}

pub(super) fn wamid() -> String {
    format!("wamid.{}", Uuid::now_v7().simple())
}

/// A text from a customer named by whichever identifiers are given.
pub(super) fn text_from(
    wa_id: Option<&str>,
    user_id: Option<&str>,
    username: Option<&str>,
    body: &str,
) -> Value {
    let mut contact = json!({"profile": {"name": "Kim"}});
    let now = (tern_domain::time::now_ms() / 1000).to_string();
    let mut message =
        json!({"id": wamid(), "timestamp": now, "type": "text", "text": {"body": body}});
    if let Some(w) = wa_id {
        contact["wa_id"] = json!(w);
        message["from"] = json!(w);
    }
    if let Some(u) = user_id {
        contact["user_id"] = json!(u);
        message["from_user_id"] = json!(u);
    }
    if let Some(n) = username {
        contact["profile"]["username"] = json!(n);
    }
    notification(json!([contact]), json!([message]), json!([]))
}

pub(super) async fn setup(app: &TestApp) -> String {
    app.add_number(&app.org_id, PNID, "+14155550100").await;
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
    app.owner_key("full_access").await.1
}

async fn post(
    app: &TestApp,
    key: &str,
    path: &str,
    body: &Value,
) -> (u16, reqwest::header::HeaderMap, Value) {
    let mut req = app
        .http
        .post(app.url(&format!("{API}{path}")))
        .bearer_auth(key)
        .json(body);
    if path == "/messages" {
        req = req.header("Idempotency-Key", format!("k-{}", Uuid::now_v7().simple()));
    }
    send(req).await
}

pub(super) async fn get(app: &TestApp, key: &str, path: &str) -> Value {
    let (s, _, b) = app.get(&format!("{API}{path}"), Some(key)).await;
    assert_eq!(s, 200, "{path}: {b}");
    b
}

async fn username_only_customers_are_contacts_that_can_be_answered(app: &TestApp) {
    let key = setup(app).await;
    deliver(
        app,
        &text_from(None, Some(BSUID), Some("kim.codes"), "hi, no phone here"),
    )
    .await;
    let found = get(app, &key, "/contacts?q=kim.codes").await;
    let c = &found["data"][0];
    assert_eq!(
        (
            c["user_id"].as_str(),
            c["username"].as_str(),
            &c["phone"],
            &c["wa_id"]
        ),
        (Some(BSUID), Some("kim.codes"), &Value::Null, &Value::Null),
        "{found}"
    );
    assert_eq!(c["name"], "Kim");
    let id = c["id"].as_str().unwrap().to_string();
    // Their conversation has an open window, as anyone's.
    let convs = get(app, &key, &format!("/conversations?contact_id={id}")).await;
    assert_eq!(convs["data"][0]["window_state"], "open", "{convs}");
    // The list shows who it is with, though the network withheld the phone.
    assert_eq!(
        convs["data"][0]["contact"],
        json!({"id": id, "name": "Kim", "phone": null, "username": "kim.codes", "user_id": BSUID}),
        "{convs}"
    );
    // A free-form reply by contact_id and by user_id goes to the BSUID (`recipient`).
    for to in [json!({"contact_id": id}), json!({"user_id": BSUID})] {
        let (s, _, m) = post(
            app,
            &key,
            "/messages",
            &json!({"to": to, "type": "text", "text": {"body": "hello Kim"}}),
        )
        .await;
        assert_eq!(s, 202, "{m}");
        assert_eq!(m["contact_id"], id.as_str());
        assert_eq!(m["content"], json!({"body": "hello Kim"}));
        let stored = app
            .db
            .get_message(app.org_uuid(), m["id"].as_str().unwrap().parse().unwrap())
            .await
            .unwrap()
            .unwrap();
        assert_eq!(
            (
                stored.request["recipient"].as_str(),
                stored.request.get("to")
            ),
            (Some(BSUID), None)
        );
        let payload = tern_cloudapi::send::build_payload("cb", &stored.request).unwrap();
        assert_eq!(
            (payload.recipient.as_deref(), payload.to.as_deref()),
            (Some(BSUID), None)
        );
    }
    // A new BSUID (outside the window: a template) creates its contact, without a phone.
    insert_template(
        app,
        "order_update",
        json!([{"type": "BODY", "text": "Your order shipped."}]),
        "utility",
    )
    .await;
    let tpl = json!({"to": {"user_id": BSUID2}, "type": "template", "template": {"name": "order_update", "language": "en_US"}});
    let (s, _, m) = post(app, &key, "/messages", &tpl).await;
    assert_eq!(s, 202, "{m}");
    let created = get(
        app,
        &key,
        &format!("/contacts/{}", m["contact_id"].as_str().unwrap()),
    )
    .await;
    assert_eq!(
        (created["user_id"].as_str(), &created["phone"]),
        (Some(BSUID2), &Value::Null)
    );
    // A malformed BSUID is named.
    let (s, h, b) = post(
        app,
        &key,
        "/messages",
        &json!({"to": {"user_id": "13491208655302741918"}, "type": "text", "text": {"body": "x"}}),
    )
    .await;
    assert_error(s, &h, &b, 400, "validation_failed");
    assert_eq!(b["details"]["fields"][0]["field"], "to.user_id", "{b}");
    // Addressing by user_id needs contacts.create, as by phone.
    let (_, narrow) = app
        .key_for(
            &app.org_id,
            &app.owner_id,
            &["--permissions", "messages.send"],
        )
        .await;
    let (s, h, b) = post(
        app,
        &narrow,
        "/messages",
        &json!({"to": {"user_id": BSUID}, "type": "text", "text": {"body": "x"}}),
    )
    .await;
    assert_error(s, &h, &b, 403, "permission_denied");
}

async fn otp_templates_need_a_phone_number(app: &TestApp) {
    let key = setup(app).await;
    let otp = json!([
        {"type": "BODY", "text": "{{1}} is your verification code."},
        {"type": "BUTTONS", "buttons": [{"type": "OTP", "otp_type": "COPY_CODE", "text": "Copy code"}]}]);
    insert_template(app, "login_code", otp, "authentication").await;
    let body = |to: Value| {
        json!({"to": to, "type": "template",
        "template": {"name": "login_code", "language": "en_US", "variables": ["123456"]}})
    };
    let (s, h, b) = post(app, &key, "/messages", &body(json!({"user_id": BSUID}))).await;
    assert_error(s, &h, &b, 409, "conflict");
    assert_eq!(b["details"]["reason"], "phone_number_required", "{b}");
    // Once the customer's phone is known the same send goes to the phone.
    deliver(
        app,
        &text_from(Some("14155550123"), Some(BSUID), None, "my number"),
    )
    .await;
    let (s, _, m) = post(app, &key, "/messages", &body(json!({"user_id": BSUID}))).await;
    assert_eq!(s, 202, "{m}");
    let stored = app
        .db
        .get_message(app.org_uuid(), m["id"].as_str().unwrap().parse().unwrap())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        (
            stored.request["to"].as_str(),
            stored.request.get("recipient")
        ),
        (Some("14155550123"), None)
    );
    // The network's own refusal (131062) is a clear failure code.
    let failed = json!([{"id": "wamid.F1", "status": "failed", "timestamp": "1700000100",
        "biz_opaque_callback_data": m["id"],
        "errors": [{"code": 131062, "title": "BSUID recipients are not supported for this message"}]}]);
    deliver(app, &notification(json!([]), json!([]), failed)).await;
    let got = get(
        app,
        &key,
        &format!("/messages/{}", m["id"].as_str().unwrap()),
    )
    .await;
    assert_eq!(
        (got["status"].as_str(), got["failure_code"].as_str()),
        (Some("failed"), Some("phone_number_required")),
        "{got}"
    );
}

async fn two_contacts_of_one_customer_merge(app: &TestApp) {
    let key = setup(app).await;
    // Known by phone (created through the API, tagged) and, separately, by username.
    let (s, _, by_phone) = post(
        app,
        &key,
        "/contacts",
        &json!({"phone": "+1 415 555 0199", "name": "Ann", "tags": ["vip"]}),
    )
    .await;
    assert_eq!(s, 201, "{by_phone}");
    deliver(app, &text_from(None, Some(BSUID), Some("ann_x"), "it's me")).await;
    let by_id = get(app, &key, &format!("/contacts?q={BSUID}")).await["data"][0].clone();
    assert_ne!(by_id["id"], by_phone["id"]);
    // A status of a message sent to the phone shows both identifiers: one contact remains,
    // the older, with everything.
    let status = json!([{"id": "wamid.S1", "status": "delivered", "timestamp": "1700000200", "recipient_id": "14155550199", "recipient_user_id": BSUID}]);
    let report = deliver(app, &notification(json!([{"wa_id": "14155550199", "user_id": BSUID, "profile": {"name": "Ann", "username": "ann_x"}}]), json!([]), status)).await;
    assert_eq!(report.contacts_updated, 1, "{report:?}");
    let merged = get(
        app,
        &key,
        &format!("/contacts/{}", by_phone["id"].as_str().unwrap()),
    )
    .await;
    assert_eq!(
        (
            merged["phone"].as_str(),
            merged["user_id"].as_str(),
            merged["username"].as_str(),
            merged["name"].as_str()
        ),
        (
            Some("+14155550199"),
            Some(BSUID),
            Some("ann_x"),
            Some("Ann")
        ),
        "{merged}"
    );
    assert_eq!(merged["tags"], json!(["vip"]));
    let (s, _, _) = app
        .get(
            &format!("{API}/contacts/{}", by_id["id"].as_str().unwrap()),
            Some(&key),
        )
        .await;
    assert_eq!(s, 404);
    let convs = get(
        app,
        &key,
        &format!(
            "/conversations?contact_id={}",
            by_phone["id"].as_str().unwrap()
        ),
    )
    .await;
    assert_eq!(convs["data"].as_array().unwrap().len(), 1, "{convs}");
    assert_eq!(convs["data"][0]["window_state"], "open");
    // POST /contacts by user_id finds the same contact.
    let (s, _, again) = post(
        app,
        &key,
        "/contacts",
        &json!({"user_id": BSUID, "name": "Ann B."}),
    )
    .await;
    assert_eq!(
        (s, again["id"].clone()),
        (200, by_phone["id"].clone()),
        "{again}"
    );
    // …and by a new one creates a contact without a phone.
    let (s, _, fresh) = post(app, &key, "/contacts", &json!({"user_id": BSUID2})).await;
    assert_eq!((s, &fresh["phone"]), (201, &Value::Null), "{fresh}");
    // Both or neither identifier, or a malformed one, are named.
    for (body, field) in [
        (
            json!({"phone": "+14155550199", "user_id": BSUID}),
            "user_id",
        ),
        (json!({"name": "x"}), "phone"),
        (json!({"user_id": "kim"}), "user_id"),
    ] {
        let (s, h, b) = post(app, &key, "/contacts", &body).await;
        assert_error(s, &h, &b, 400, "validation_failed");
        assert_eq!(b["details"]["fields"][0]["field"], field, "{body}: {b}");
    }
}

async fn template_categories_follow_the_network(app: &TestApp) {
    let key = setup(app).await;
    insert_template(
        app,
        "promo",
        json!([{"type": "BODY", "text": "Sale!"}]),
        "utility",
    )
    .await;
    let update = json!({"object": "whatsapp_business_account", "entry": [{"id": "waba1", "time": 1700000000, "changes": [{
        "field": "template_category_update", "value": {"message_template_id": "1234", "message_template_name": "promo",
            "message_template_language": "en_US", "previous_category": "UTILITY", "new_category": "MARKETING"}}]}]});
    assert_eq!(deliver(app, &update).await.templates_updated, 1);
    let list = get(app, &key, "/templates").await;
    assert_eq!(list["data"][0]["category"], "marketing", "{list}");
    // Billing uses it: a marketing price now applies to the send.
    app.admin(&[
        "org",
        "update",
        "--org",
        &app.org_id,
        "--price",
        "marketing=25",
        "--wallet-balance-minor",
        "10",
    ])
    .await
    .unwrap();
    let (s, h, b) = post(
        app,
        &key,
        "/messages",
        &json!({"to": "+14155550123", "type": "template",
        "template": {"name": "promo", "language": "en_US"}}),
    )
    .await;
    assert_error(s, &h, &b, 402, "wallet_balance_low");
    assert_eq!(b["details"]["wallet_category"], "marketing", "{b}");
}

tern_store::both_backends! { TestApp;
    username_only_customers_are_contacts_that_can_be_answered_http => username_only_customers_are_contacts_that_can_be_answered,
    otp_templates_need_a_phone_number_http => otp_templates_need_a_phone_number,
    two_contacts_of_one_customer_merge_http => two_contacts_of_one_customer_merge,
    template_categories_follow_the_network_http => template_categories_follow_the_network,
}
