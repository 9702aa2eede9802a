//! Client input that the rules of DESIGN.md "Hardening" refuse, on SQLite and PostgreSQL
//! alike: U+0000 anywhere (400 naming each field, never a 503 that a retry cannot cure),
//! invisible characters in names compared by eye, the order billing → media of a send, and
//! the field named when a media import body lacks `url`.

use crate::common::{Backend, TestApp, assert_error, send};
use crate::messages::{CUSTOMER, PNID, customer_writes, idem, insert_template, setup};
use serde_json::{Value, json};
use tern_domain::text::{HIDDEN_MESSAGE, NUL_KEY_MESSAGE, NUL_MESSAGE};
use tern_domain::time::now_ms;

const API: &str = "/api/public/v1";

async fn call(
    app: &TestApp,
    key: &str,
    method: &str,
    path: &str,
    body: Option<Value>,
) -> (u16, reqwest::header::HeaderMap, Value) {
    let url = app.url(&format!("{API}{path}"));
    let mut req = match method {
        "GET" => app.http.get(url),
        "DELETE" => app.http.delete(url),
        _ => app.http.post(url),
    }
    .bearer_auth(key)
    // POST /messages needs one; other endpoints ignore it.
    .header("Idempotency-Key", idem());
    if let Some(b) = body {
        req = req.json(&b);
    }
    send(req).await
}

/// The (field, message) pairs of a 400 `validation_failed`, sorted.
fn refused(s: u16, h: &reqwest::header::HeaderMap, b: &Value) -> Vec<(String, String)> {
    assert_error(s, h, b, 400, "validation_failed");
    let mut out: Vec<(String, String)> = b["details"]["fields"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            (
                f["field"].as_str().unwrap().to_string(),
                f["message"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    out.sort();
    out
}

/// method, path, body, the refusal's (field, message) pairs.
type Case = (&'static str, &'static str, Value, Vec<(String, String)>);

fn nul_at(fields: &[&str]) -> Vec<(String, String)> {
    fields
        .iter()
        .map(|f| (f.to_string(), NUL_MESSAGE.to_string()))
        .collect()
}

async fn nul_is_refused_by_field_path(app: &TestApp) {
    let key = setup(app).await.key;
    customer_writes(app, PNID, CUSTOMER, now_ms()).await;
    insert_template(
        app,
        "greet",
        json!([{"type": "BODY", "text": "Hi {{1}}", "example": {"body_text": [["Ada"]]}}]),
        "utility",
    )
    .await;
    app.add_contact_field("tier", "Tier", "text").await;
    let to = format!("+{CUSTOMER}");
    let cases: Vec<Case> = vec![
        (
            "POST",
            "/messages",
            json!({"to": to, "type": "text", "text": {"body": "a\u{0}b"}}),
            nul_at(&["text.body"]),
        ),
        (
            "POST",
            "/messages",
            json!({"to": to, "type": "template",
                   "template": {"name": "greet", "language": "en_US", "variables": ["A\u{0}da"]}}),
            nul_at(&["template.variables[0]"]),
        ),
        // Two at once, both named.
        (
            "POST",
            "/messages",
            json!({"to": to, "type": "text", "text": {"body": "\u{0}"}, "context": {"message_id": "wamid.\u{0}"}}),
            nul_at(&["context.message_id", "text.body"]),
        ),
        (
            "POST",
            "/contacts",
            json!({"phone": to, "custom_fields": {"tier": "gold\u{0}"}}),
            nul_at(&["custom_fields.tier"]),
        ),
        (
            "POST",
            "/contacts",
            json!({"phone": to, "name": "\u{0}", "custom_fields": {"ti\u{0}er": "gold"}}),
            vec![
                ("custom_fields".to_string(), NUL_KEY_MESSAGE.to_string()),
                ("name".to_string(), NUL_MESSAGE.to_string()),
            ],
        ),
        (
            "POST",
            "/templates",
            json!({"name": "promo", "language": "en_US", "category": "marketing",
                   "components": [{"type": "BODY", "text": "Sale\u{0}!"}]}),
            nul_at(&["components[0].text"]),
        ),
        (
            "POST",
            "/webhook-subscriptions",
            json!({"url": "https://example.com/hook", "events": ["message.status"],
                   "description": "ops\u{0}"}),
            nul_at(&["description"]),
        ),
        (
            "POST",
            "/campaigns",
            json!({"name": "Spring\u{0}", "template": {"name": "greet", "language": "en_US", "variables": ["x"]},
                   "audience": {"all_contacts": true}}),
            nul_at(&["name"]),
        ),
    ];
    for (method, path, body, want) in cases {
        let (s, h, b) = call(app, &key, method, path, Some(body.clone())).await;
        assert_eq!(refused(s, &h, &b), want, "{method} {path} {body}");
    }
    // The optional body of a test send (read before the subscription is looked up).
    let (s, h, b) = call(
        app,
        &key,
        "POST",
        &format!("/webhook-subscriptions/{}/test", uuid::Uuid::now_v7()),
        Some(json!({"event_type": "message.status\u{0}"})),
    )
    .await;
    assert_eq!(refused(s, &h, &b), nul_at(&["event_type"]));
    // A tag in a path.
    let (s, h, b) = call(
        app,
        &key,
        "DELETE",
        &format!("/contacts/{}/tags/a%00b", uuid::Uuid::now_v7()),
        None,
    )
    .await;
    assert_eq!(refused(s, &h, &b), nul_at(&["tag"]));
    // A search query parameter.
    let (s, h, b) = call(app, &key, "GET", "/contacts?q=a%00b", None).await;
    assert_eq!(refused(s, &h, &b), nul_at(&["q"]));
    // Nothing was stored.
    let (s, _, page) = call(app, &key, "GET", "/campaigns", None).await;
    assert_eq!(s, 200);
    assert_eq!(page["data"], json!([]), "{page}");
}

async fn names_compared_by_eye_refuse_invisible_characters(app: &TestApp) {
    let key = setup(app).await.key;
    let hidden = |fields: &[&str]| -> Vec<(String, String)> {
        fields
            .iter()
            .map(|f| (f.to_string(), HIDDEN_MESSAGE.to_string()))
            .collect()
    };
    let (s, h, b) = call(
        app,
        &key,
        "POST",
        "/contacts",
        Some(json!({"phone": "+14155550123",
                    "tags": ["vip\u{200b}", "\u{feff}vip", "vi\u{202e}p", "v\u{2060}ip", "vip"]})),
    )
    .await;
    assert_eq!(
        refused(s, &h, &b),
        hidden(&["tags[0]", "tags[1]", "tags[2]", "tags[3]"])
    );
    // NFC: a decomposed "café" and a composed one are one tag, stored composed.
    let (s, _, c) = call(
        app,
        &key,
        "POST",
        "/contacts",
        Some(json!({"phone": "+14155550123", "tags": ["cafe\u{301}"]})),
    )
    .await;
    assert_eq!(s, 201, "{c}");
    let id = c["id"].as_str().unwrap().to_string();
    assert_eq!(c["tags"], json!(["caf\u{e9}"]));
    let (s, _, c) = call(
        app,
        &key,
        "POST",
        &format!("/contacts/{id}/tags"),
        Some(json!({"tags": ["caf\u{e9}", "vip"]})),
    )
    .await;
    assert_eq!(s, 200, "{c}");
    let mut tags: Vec<String> = serde_json::from_value(c["tags"].clone()).unwrap();
    tags.sort();
    assert_eq!(tags, ["caf\u{e9}", "vip"]);
    let (s, h, b) = call(
        app,
        &key,
        "POST",
        &format!("/contacts/{id}/tags"),
        Some(json!({"tags": ["vip\u{200b}"]})),
    )
    .await;
    assert_eq!(refused(s, &h, &b), hidden(&["tags[0]"]));
    // A removal names its tag the same way: the decomposed spelling removes the stored one.
    let (s, h, b) = call(
        app,
        &key,
        "DELETE",
        &format!("/contacts/{id}/tags/vip%E2%80%8B"),
        None,
    )
    .await;
    assert_eq!(refused(s, &h, &b), hidden(&["tag"]));
    let (s, _, c) = call(
        app,
        &key,
        "DELETE",
        &format!("/contacts/{id}/tags/cafe%CC%81"),
        None,
    )
    .await;
    assert_eq!(s, 200, "{c}");
    assert_eq!(c["tags"], json!(["vip"]));
    // Campaign names and audience tags.
    let (s, h, b) = call(
        app,
        &key,
        "POST",
        "/campaigns",
        Some(
            json!({"name": "Sale\u{202e}", "template": {"name": "greet", "language": "en_US"},
                    "audience": {"tags": ["vip\u{200b}"], "exclude_tags": ["\u{feff}x"]}}),
        ),
    )
    .await;
    assert_eq!(
        refused(s, &h, &b),
        hidden(&["audience.exclude_tags[0]", "audience.tags[0]", "name"])
    );
    // Template names are lower-case ASCII: an invisible character cannot pass either.
    let (s, h, b) = call(
        app,
        &key,
        "POST",
        "/templates",
        Some(
            json!({"name": "promo\u{200b}", "language": "en_US", "category": "marketing",
                    "components": [{"type": "BODY", "text": "Sale!"}]}),
        ),
    )
    .await;
    let f = refused(s, &h, &b);
    assert!(f.iter().any(|(k, _)| k == "name"), "{f:?}");
}

/// With the `messages_sent` allowance used up, a media send answers 402 before its media is
/// looked at: an unknown `media_id` is not reported, and a `link` is not fetched.
async fn billing_answers_before_media(app: &TestApp) {
    let key = setup(app).await.key;
    customer_writes(app, PNID, CUSTOMER, now_ms()).await;
    app.admin(&[
        "org",
        "update",
        "--org",
        &app.org_id,
        "--allowance",
        "messages_sent=1",
    ])
    .await
    .unwrap();
    let to = format!("+{CUSTOMER}");
    let (s, _, m) = call(
        app,
        &key,
        "POST",
        "/messages",
        Some(json!({"to": to, "type": "text", "text": {"body": "hi"}})),
    )
    .await;
    assert_eq!(s, 202, "{m}");
    let unknown = uuid::Uuid::now_v7();
    let (s, h, e) = call(
        app,
        &key,
        "POST",
        "/messages",
        Some(json!({"to": to, "type": "image", "image": {"media_id": unknown}})),
    )
    .await;
    assert_error(s, &h, &e, 402, "usage_limit_reached");
    assert_eq!(e["details"]["meter"], "messages_sent");
    // A link to a local listener (loopback is allowed for this app): nothing connects.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let link = format!(
        "https://127.0.0.1:{}/photo.jpg",
        listener.local_addr().unwrap().port()
    );
    let (s, h, e) = call(
        app,
        &key,
        "POST",
        "/messages",
        Some(json!({"to": to, "type": "image", "image": {"link": link}})),
    )
    .await;
    assert_error(s, &h, &e, 402, "usage_limit_reached");
    // The answer came after any fetch would have connected: the connection would be queued.
    match listener.accept() {
        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
        other => panic!("the link was fetched: {other:?}"),
    }
}

async fn media_import_names_url(app: &TestApp) {
    let (_, key) = app.owner_key("full_access").await;
    for (body, want) in [
        (json!({}), ("url", "is required")),
        (
            json!({"url": 5}),
            ("url", "invalid type: integer `5`, expected a string"),
        ),
        (
            json!({"url": "https://example.com/a.jpg", "uri": "x"}),
            ("uri", "is not a known field"),
        ),
    ] {
        let (s, h, b) = call(app, &key, "POST", "/media", Some(body.clone())).await;
        assert_eq!(
            refused(s, &h, &b),
            [(want.0.to_string(), want.1.to_string())],
            "{body}"
        );
    }
}

tern_store::both_backends! { TestApp;
    nul_in_client_input_is_400_naming_each_field_http => nul_is_refused_by_field_path,
    names_compared_by_eye_refuse_invisible_characters_http => names_compared_by_eye_refuse_invisible_characters,
    media_import_without_url_names_url_http => media_import_names_url,
}

/// With an app that may connect to loopback (a send's `link`), as a deployment's
/// `TERN_ALLOW_NETWORKS` would allow.
mod loopback {
    use super::*;

    tern_store::both_backends! { Backend;
        billing_answers_before_media_http => async |backend| {
            let app = TestApp::builder(backend).configure(|c| {
                c.allow_networks = vec!["127.0.0.1/32".parse().unwrap()];
                // Before the fix the link was fetched: fail fast rather than wait 30 s.
                c.media_import_timeout = std::time::Duration::from_secs(2);
            }).start()
            .await;
            billing_answers_before_media(&app).await;
            app.stop().await;
        },
    }
}
