//! The webhooks pages over HTTP with a real session (APP.md §3): create for a key the
//! person manages (the secret once), the URL guard's words next to the field, a test event's
//! attempt on the page, a replay's count, another organisation's endpoint, escaping.

use super::keys::{follow, shown_value};
use super::{PASSWORD, signed_in};
use crate::common::TestApp;
use crate::media::fixture::FileServer;
use serde_json::json;
use tern_store::testkit::Backend;
use uuid::Uuid;

/// An app whose deliveries may reach the loopback receiver (its CA trusted).
async fn app_with_receiver(backend: Backend, files: &FileServer) -> TestApp {
    let ca = files.ca_file.path().to_path_buf();
    TestApp::builder(backend)
        .configure(move |c| {
            c.extra_ca_file = Some(ca);
            c.allow_networks = vec!["127.0.0.1/32".parse().unwrap()];
        })
        .start()
        .await
}

/// The endpoint's id at `url` in the organisation.
async fn sub_at(app: &TestApp, org: &str, url: &str) -> Option<Uuid> {
    app.db
        .list_org_webhook_subscriptions(Uuid::parse_str(org).unwrap())
        .await
        .unwrap()
        .into_iter()
        .find(|(s, _)| s.url == url)
        .map(|(s, _)| s.id)
}

async fn create_test_replay(backend: Backend) {
    let files = FileServer::start().await;
    let app = app_with_receiver(backend, &files).await;
    let (key_id, key) = app.owner_key("full_access").await;
    let b = signed_in(&app, &app.org_id, "hooks@acme.test", "owner").await;
    let (s, empty) = b.get("/app/webhooks").await;
    assert_eq!(s, 200);
    assert!(empty.contains("href=\"/app/webhooks/new\""), "{empty}");
    let (_, form) = b.get("/app/webhooks/new").await;
    assert!(
        form.contains(&format!("value=\"{key_id}\"")),
        "the key to choose"
    );
    for ev in ["message.status", "message.received", "webhook.test"] {
        assert!(form.contains(&format!("value=\"{ev}\"")), "{ev}");
    }
    // The URL guard's words next to the field; nothing created.
    let (s, _, page) = b
        .post(
            "/app/webhooks",
            &[
                ("key_id", &key_id),
                ("url", "https://10.0.0.1/hook"),
                ("events", "message.status"),
                ("confirm", PASSWORD),
            ],
        )
        .await;
    assert!(s == 400 || s == 422, "{s}: {page}");
    assert!(page.contains("id=\"url-error\""), "{page}");
    assert!(
        sub_at(&app, &app.org_id, "https://10.0.0.1/hook")
            .await
            .is_none()
    );
    // Created: the secret once.
    let url = files.url("/hook/204");
    let (s, h, page) = b
        .post(
            "/app/webhooks",
            &[
                ("key_id", &key_id),
                ("url", &url),
                ("events", "message.status"),
                ("events", "webhook.test"),
                ("description", "Orders"),
            ],
        )
        .await;
    assert_eq!(s, 200, "{page}");
    assert_eq!(h["cache-control"], "no-store");
    let secret = shown_value(&page, "secret-value");
    assert!(secret.starts_with("whsec_"), "{secret}");
    assert!(page.contains("data-copy=\"#secret-value\""));
    let id = sub_at(&app, &app.org_id, &url).await.expect("created");
    // Listed under its key, never with the secret.
    let (_, list) = b.get("/app/webhooks").await;
    assert!(list.contains(&url) && list.contains("Orders"), "{list}");
    assert!(list.contains("test") && !list.contains(&secret));
    let (s, detail) = b.get(&format!("/app/webhooks/{id}")).await;
    assert_eq!(s, 200);
    assert!(!detail.contains(&secret));
    // The API sees it as the key's.
    let (s, _, body) = app
        .get("/api/public/v1/webhook-subscriptions", Some(&key))
        .await;
    assert_eq!(s, 200, "{body}");
    assert_eq!(body["data"][0]["id"], id.to_string(), "{body}");
    // A test event: the attempt on the page.
    let (s, _, page) = b
        .post(
            &format!("/app/webhooks/{id}/test"),
            &[("event_type", "webhook.test")],
        )
        .await;
    assert_eq!(s, 200, "{page}");
    assert!(page.contains("id=\"test-result\""), "{page}");
    assert!(
        page.contains("Delivered") && page.contains("answered 204"),
        "{page}"
    );
    assert!(page.contains("Delivery log"));
    // A failing endpoint, tested, then replayed: the count.
    let failing = files.url("/answer/500");
    let (s, _, page) = b
        .post(
            &format!("/app/webhooks/{id}"),
            &[
                ("url", &failing),
                ("events", "webhook.test"),
                ("description", ""),
            ],
        )
        .await;
    assert_eq!(s, 303, "{page}");
    let (_, _, page) = b
        .post(
            &format!("/app/webhooks/{id}/test"),
            &[("event_type", "webhook.test")],
        )
        .await;
    assert!(
        page.contains("Not delivered") && page.contains("answered 500"),
        "{page}"
    );
    // The answer's first 1 KiB, escaped.
    assert!(
        page.contains("&lt;b&gt;refused&lt;/b&gt;xxx") || page.contains("&#60;b&#62;refused"),
        "{page}"
    );
    assert!(!page.contains("<b>refused"));
    let log = app
        .db
        .list_webhook_attempts(
            app.org_uuid(),
            Uuid::parse_str(&key_id).unwrap(),
            id,
            None,
            None,
            10,
        )
        .await
        .unwrap();
    assert_eq!(log[0].response_body.as_deref().map(str::len), Some(1024));
    let (s, page) = follow(
        &b,
        b.post(
            &format!("/app/webhooks/{id}/replay"),
            &[("since", "2020-01-01T00:00")],
        )
        .await,
    )
    .await;
    assert_eq!(s, 200);
    assert!(page.contains("1 failed delivery was queued"), "{page}");
    let (s, _, page) = b
        .post(
            &format!("/app/webhooks/{id}/replay"),
            &[("since", "2999-01-01T00:00")],
        )
        .await;
    assert_eq!(s, 422);
    assert!(page.contains("must not be in the future"));
    // Disable, rotate (the new secret once), delete through its step.
    let (_, page) = follow(
        &b,
        b.post(
            &format!("/app/webhooks/{id}/enabled"),
            &[("enabled", "false")],
        )
        .await,
    )
    .await;
    assert!(page.contains("The endpoint is disabled"), "{page}");
    let (s, _, page) = b
        .post(&format!("/app/webhooks/{id}/rotate-secret"), &[])
        .await;
    assert_eq!(s, 200, "{page}");
    let rotated = shown_value(&page, "secret-value");
    assert!(rotated.starts_with("whsec_") && rotated != secret);
    let (s, step) = b.get(&format!("/app/webhooks/{id}/delete")).await;
    assert_eq!(s, 200);
    assert!(step.contains("Delete the endpoint"));
    let (_, page) = follow(&b, b.post(&format!("/app/webhooks/{id}/delete"), &[]).await).await;
    assert!(page.contains("is deleted"), "{page}");
    assert!(sub_at(&app, &app.org_id, &failing).await.is_none());
    app.stop().await;
    files.stop();
}

async fn others_are_404_and_escaped(backend: Backend) {
    let files = FileServer::start().await;
    let app = app_with_receiver(backend, &files).await;
    let (other, other_key) = app
        .other_org("Beta", tern_domain::auth::Preset::FullAccess)
        .await;
    let (s, _, body) = crate::common::send(
        app.http
            .post(app.url("/api/public/v1/webhook-subscriptions"))
            .bearer_auth(&other_key)
            .json(&json!({"url": files.url("/hook/204"), "events": ["webhook.test"]})),
    )
    .await;
    assert_eq!(s, 201, "{body}");
    let theirs = body["id"].as_str().unwrap().to_string();
    let b = signed_in(&app, &app.org_id, "hooks-a@acme.test", "owner").await;
    assert_eq!(b.get(&format!("/app/webhooks/{theirs}")).await.0, 404);
    for action in ["test", "replay", "delete", "enabled", "rotate-secret"] {
        let path = format!("/app/webhooks/{theirs}/{action}");
        assert_eq!(
            b.post(&path, &[("confirm", PASSWORD)]).await.0,
            404,
            "{path}"
        );
    }
    assert!(
        sub_at(&app, &other, &files.url("/hook/204"))
            .await
            .is_some()
    );
    // An owner's key's endpoint: a developer sees it, cannot act on it.
    let (key_id, _) = app.owner_key("full_access").await;
    let evil = "<script>alert(1)</script>";
    let url = files.url("/hook/204?x=\"><script>alert(2)</script>");
    let (s, _, page) = b
        .post(
            "/app/webhooks",
            &[
                ("key_id", &key_id),
                ("url", &url),
                ("events", "webhook.test"),
                ("description", evil),
                ("confirm", PASSWORD),
            ],
        )
        .await;
    assert_eq!(s, 200, "{page}");
    assert!(!page.contains("<script>alert"), "{page}");
    let id = app
        .db
        .list_org_webhook_subscriptions(app.org_uuid())
        .await
        .unwrap()
        .into_iter()
        .find(|(s, _)| s.description.as_deref() == Some(evil))
        .map(|(s, _)| s.id);
    let id = id.expect("created");
    let dev = signed_in(&app, &app.org_id, "hooks-d@acme.test", "developer").await;
    let (s, detail) = dev.get(&format!("/app/webhooks/{id}")).await;
    assert_eq!(s, 200);
    assert!(!detail.contains("Send test event"), "no actions");
    assert_eq!(
        dev.post(&format!("/app/webhooks/{id}/test"), &[]).await.0,
        404
    );
    let (_, list) = b.get("/app/webhooks").await;
    let (_, detail) = b.get(&format!("/app/webhooks/{id}")).await;
    let (_, step) = b.get(&format!("/app/webhooks/{id}/delete")).await;
    for (what, html) in [("list", &list), ("detail", &detail), ("step", &step)] {
        assert!(!html.contains("<script>alert"), "{what}: {html}");
    }
    app.stop().await;
    files.stop();
}

tern_store::both_backends! { Backend;
    create_shows_the_secret_once_test_and_replay_answer => create_test_replay,
    another_organisations_endpoint_is_404_and_payloads_are_escaped => others_are_404_and_escaped,
}
