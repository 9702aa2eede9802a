//! The audit log of key and subscription changes: through the public API the key is the
//! actor, through `tern admin` the operator; no entry holds a secret.

use crate::common::{TestApp, send};
use serde_json::{Value, json};
use tern_core::audit::{self, AuditEntry, PageRequest};
use tern_core::testkit::assert_no_secret;

const SUBS: &str = "/api/public/v1/webhook-subscriptions";

async fn entries(app: &TestApp) -> Vec<AuditEntry> {
    let page = PageRequest {
        limit: 200,
        ..Default::default()
    };
    let mut items = audit::list(&app.db, app.org_uuid(), &page)
        .await
        .unwrap()
        .items;
    items.reverse(); // oldest first, as the test made them
    // The fixture's own invitations (`member.invited` by the operator) are not these tests'.
    items.retain(|e| !e.action.starts_with("member."));
    items
}

async fn call(
    app: &TestApp,
    key: &str,
    m: reqwest::Method,
    path: &str,
    body: Option<Value>,
) -> (u16, Value) {
    let mut req = app.http.request(m, app.url(path)).bearer_auth(key);
    if let Some(b) = body {
        req = req.json(&b);
    }
    let (s, _, b) = send(req).await;
    (s, b)
}

tern_store::both_backends! { TestApp;
    subscription_changes_by_the_api_name_the_key => async |app: &TestApp| {
        let (key_id, key) = app.owner_key("full_access").await;
        let stored = app.db.get_api_key(key_id.parse().unwrap()).await.unwrap().unwrap();
        let (s, created) = call(app, &key, reqwest::Method::POST, SUBS, Some(json!({
            "url": "https://hooks.example.com/tern", "events": ["message.status"]}))).await;
        assert_eq!(s, 201, "{created}");
        let id = created["id"].as_str().unwrap().to_string();
        let one = format!("{SUBS}/{id}");
        let (s, _) = call(app, &key, reqwest::Method::PATCH, &one, Some(json!({"enabled": false}))).await;
        assert_eq!(s, 200);
        let (s, rotated) = call(app, &key, reqwest::Method::POST, &format!("{one}/rotate-secret"), None).await;
        assert_eq!(s, 201);
        let (s, _) = call(app, &key, reqwest::Method::POST, &format!("{one}/replay"),
            Some(json!({"since": "2020-01-01T00:00:00Z"}))).await;
        assert_eq!(s, 202);
        let (s, _) = call(app, &key, reqwest::Method::DELETE, &one, None).await;
        assert_eq!(s, 204);
        // A refused change records nothing.
        let (s, _) = call(app, &key, reqwest::Method::DELETE, &one, None).await;
        assert_eq!(s, 404);

        let all = entries(app).await;
        // The operator created the key (the test's fixture), then the key acted.
        assert_eq!(all[0].action, "key.created");
        assert_eq!(all[0].actor_kind, "operator");
        let subs = &all[1..];
        let actions: Vec<&str> = subs.iter().map(|e| e.action.as_str()).collect();
        assert_eq!(actions, ["subscription.created", "subscription.updated",
            "subscription.secret_rotated", "subscription.replayed", "subscription.deleted"]);
        for e in subs {
            assert_eq!(e.actor_kind, "key");
            assert_eq!(e.actor_id.as_deref(), Some(key_id.as_str()));
            assert_eq!(e.actor_label, format!("{} ({})", stored.name, stored.prefix));
            assert_eq!((e.target_kind.as_deref(), e.target_id.as_deref()), (Some("webhook_subscription"), Some(id.as_str())));
            assert_eq!(e.address.as_deref(), Some("127.0.0.1"), "the client's address");
        }
        assert_eq!(subs[0].detail.as_ref().unwrap()["url"], json!("https://hooks.example.com/tern"));
        assert_eq!(subs[1].detail, Some(json!({"enabled": false})));
        assert_no_secret(&all, &[&key, created["secret"].as_str().unwrap(), rotated["secret"].as_str().unwrap()]);
    },

    admin_key_commands_are_the_operators => async |app: &TestApp| {
        let (id, key) = app.owner_key("read_only").await;
        let rotated = app.admin(&["key", "rotate", "--key-id", &id]).await.unwrap();
        let new_id = rotated["id"].as_str().unwrap().to_string();
        let new_key = rotated["key"].as_str().unwrap().to_string();
        let revoked = app.admin(&["key", "revoke", "--key-id", &new_id]).await.unwrap();
        assert!(revoked["revoked_at"].is_string(), "{revoked}");

        let all = entries(app).await;
        let actions: Vec<(&str, Option<&str>)> = all.iter().map(|e| (e.action.as_str(), e.target_id.as_deref())).collect();
        assert_eq!(actions, [("key.created", Some(id.as_str())), ("key.rotated", Some(id.as_str())),
            ("key.revoked", Some(new_id.as_str()))]);
        for e in &all {
            assert_eq!((e.actor_kind.as_str(), e.actor_label.as_str(), e.actor_id.as_deref()), ("operator", "operator", None));
            assert_eq!(e.target_kind.as_deref(), Some("api_key"));
        }
        assert_no_secret(&all, &[&key, &new_key]);
        // An unknown key: the same refusal as before, nothing recorded.
        let e = app.admin(&["key", "revoke", "--key-id", &uuid::Uuid::nil().to_string()]).await.unwrap_err();
        assert!(e.to_string().contains("not_found"), "{e}");
        assert_eq!(entries(app).await.len(), 3);
    },
}
