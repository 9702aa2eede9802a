//! Webhook subscriptions over HTTP on both backends: a key's own, the guard on `url`, every
//! problem by path, the secret shown once, rotation, deletion, the plan's count limit.

use crate::common::{TestApp, assert_error, send};
use serde_json::{Value, json};

const BASE: &str = "/api/public/v1/webhook-subscriptions";

async fn call(
    app: &TestApp,
    key: &str,
    method: reqwest::Method,
    path: &str,
    body: Option<Value>,
) -> (u16, reqwest::header::HeaderMap, Value) {
    let mut req = app.http.request(method, app.url(path)).bearer_auth(key);
    if let Some(b) = body {
        req = req.json(&b);
    }
    send(req).await
}

tern_store::both_backends! { TestApp;
    subscriptions_belong_to_their_key_http => async |app: &TestApp| {
        let (_, key) = app.owner_key("full_access").await;
        let (_, other) = app.owner_key("full_access").await;
        let (s, _, created) = call(app, &key, reqwest::Method::POST, BASE, Some(json!({
            "url": "https://hooks.example.com/tern", "events": ["message.status", "message.received"],
            "description": "orders"}))).await;
        assert_eq!(s, 201, "{created}");
        let secret = created["secret"].as_str().unwrap().to_string();
        assert!(secret.starts_with("whsec_") && tern_domain::events::decode_secret(&secret).unwrap().len() == 32);
        assert_eq!(created["events"], json!(["message.status", "message.received"]));
        assert_eq!((created["enabled"].as_bool(), created["disabled_reason"].is_null()), (Some(true), true));
        let id = created["id"].as_str().unwrap().to_string();
        let one = format!("{BASE}/{id}");

        // listed for its key, without the secret; invisible to another key of the organisation
        let (s, _, page) = call(app, &key, reqwest::Method::GET, BASE, None).await;
        assert_eq!(s, 200);
        assert_eq!(page["data"].as_array().unwrap().len(), 1);
        assert!(page["data"][0].get("secret").is_none());
        let (_, _, theirs) = call(app, &other, reqwest::Method::GET, BASE, None).await;
        assert_eq!(theirs["data"], json!([]));
        for (m, body) in [(reqwest::Method::PATCH, Some(json!({"enabled": false}))), (reqwest::Method::DELETE, None)] {
            let (s, h, b) = call(app, &other, m, &one, body).await;
            assert_error(s, &h, &b, 404, "not_found");
        }
        let (s, _, _) = call(app, &other, reqwest::Method::POST, &format!("{one}/rotate-secret"), None).await;
        assert_eq!(s, 404);

        // changes
        let (s, _, b) = call(app, &key, reqwest::Method::PATCH, &one, Some(json!({"events": ["template.status"], "enabled": false, "description": null}))).await;
        assert_eq!(s, 200, "{b}");
        assert_eq!((b["events"].clone(), b["enabled"].as_bool(), b["description"].is_null()), (json!(["template.status"]), Some(false), true));
        assert!(b.get("secret").is_none());

        // rotation: a new secret, once
        let (s, _, r) = call(app, &key, reqwest::Method::POST, &format!("{one}/rotate-secret"), None).await;
        assert_eq!(s, 201, "{r}");
        let rotated = r["secret"].as_str().unwrap();
        assert!(rotated.starts_with("whsec_") && rotated != secret);

        // deletion
        let (s, _, _) = call(app, &key, reqwest::Method::DELETE, &one, None).await;
        assert_eq!(s, 204);
        let (s, _, _) = call(app, &key, reqwest::Method::DELETE, &one, None).await;
        assert_eq!(s, 404);
    },

    subscription_bodies_name_every_problem_http => async |app: &TestApp| {
        let (_, key) = app.owner_key("full_access").await;
        let (s, h, b) = call(app, &key, reqwest::Method::POST, BASE, Some(json!({
            "url": "https://127.0.0.1/hook", "events": ["message.status", "message.sent"], "colour": 1}))).await;
        assert_error(s, &h, &b, 400, "validation_failed");
        let fields: Vec<&str> = b["details"]["fields"].as_array().unwrap().iter().map(|f| f["field"].as_str().unwrap()).collect();
        assert_eq!(fields, ["url", "events[1]", "colour"]);
        for url in ["http://hooks.example.com", "https://10.0.0.8/h", "https://169.254.169.254/", "https://u:p@hooks.example.com/", "https://[::1]/"] {
            let (s, _, b) = call(app, &key, reqwest::Method::POST, BASE, Some(json!({"url": url, "events": ["webhook.test"]}))).await;
            assert_eq!((s, b["details"]["fields"][0]["field"].as_str()), (400, Some("url")), "{url}: {b}");
        }
        let (s, _, b) = call(app, &key, reqwest::Method::POST, BASE, Some(json!({"url": "https://hooks.example.com", "events": []}))).await;
        assert_eq!((s, b["details"]["fields"][0]["field"].as_str()), (400, Some("events")));
        // the permission
        let (_, reader) = app.key_for(&app.org_id, &app.owner_id, &["--permissions", "messages.read"]).await;
        let (s, h, b) = call(app, &reader, reqwest::Method::GET, BASE, None).await;
        assert_error(s, &h, &b, 403, "permission_denied");
        assert_eq!(b["details"]["permission"], "developer.webhooks.manage");
    },

    the_plan_limits_subscriptions_http => async |app: &TestApp| {
        let (_, key) = app.owner_key("full_access").await;
        let limit = 25; // the growth plan
        for i in 0..limit {
            let (s, _, b) = call(app, &key, reqwest::Method::POST, BASE, Some(json!({"url": format!("https://hooks.example.com/{i}"), "events": ["message.status"]}))).await;
            assert_eq!(s, 201, "{b}");
        }
        let (s, h, b) = call(app, &key, reqwest::Method::POST, BASE, Some(json!({"url": "https://hooks.example.com/x", "events": ["message.status"]}))).await;
        assert_error(s, &h, &b, 402, "plan_limit_reached");
        assert_eq!(b["details"]["entitlement"], "webhook_subscriptions", "{b}");
        assert_eq!(b["details"]["limit"], limit);
    },
}
