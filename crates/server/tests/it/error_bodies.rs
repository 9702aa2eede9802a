//! Whole error answers as a client sees them (status, the `Retry-After`/`Allow` headers that
//! go with some codes, and the complete body), kept as insta snapshots in `snapshots/`: an
//! unintended change to a message, a fix, a `details` key or a status shows in review. The
//! request id is redacted (it is checked against `X-Request-Id` by `assert_error`) and the
//! server's address replaced by `{base}`. The same snapshot serves both backends, so they
//! must answer alike. Update with `INSTA_UPDATE=always cargo test -p tern --test it
//! error_bodies` and review the diff.

use crate::common::{TestApp, assert_error, send, send_oversized};
use serde_json::{Value, json};

const API: &str = "/api/public/v1";

/// The answer as snapshotted.
fn shown(app: &TestApp, s: u16, h: &reqwest::header::HeaderMap, mut b: Value) -> Value {
    assert_error(s, h, &b, s, b["code"].as_str().unwrap_or_default());
    b["request_id"] = json!("[request_id]");
    if let Some(url) = b["docs_url"].as_str() {
        b["docs_url"] = json!(url.replace(&app.base, "{base}"));
    }
    let header = |n: &str| h.get(n).map(|v| v.to_str().unwrap().to_string());
    json!({"status": s, "retry_after": header("retry-after"), "allow": header("allow"), "body": b})
}

async fn answers(app: &TestApp) -> Vec<(&'static str, Value)> {
    let (_, full) = app.owner_key("full_access").await;
    let (_, reader) = app.owner_key("read_only").await;
    let mut out = Vec::new();
    let post = |key: &str, path: &str, body: Value| {
        app.http
            .post(app.url(&format!("{API}{path}")))
            .bearer_auth(key)
            .json(&body)
    };
    let (s, h, b) = send(app.http.get(app.url(&format!("{API}/contacts")))).await;
    out.push(("unauthenticated_no_key", shown(app, s, &h, b)));
    let (s, h, b) =
        send(post(&reader, "/messages", json!({})).header("Idempotency-Key", "order-0001-a")).await;
    out.push(("permission_denied", shown(app, s, &h, b)));
    let (s, h, b) = send(post(
        &full,
        "/contacts",
        json!({"phone": "0123", "colour": 1}),
    ))
    .await;
    out.push(("validation_failed_contact", shown(app, s, &h, b)));
    let (s, h, b) = send(
        post(
            &full,
            "/messages",
            json!({"to": "+14155550100", "type": "fax"}),
        )
        .header("Idempotency-Key", "order-0002-a"),
    )
    .await;
    out.push(("unsupported_message_type", shown(app, s, &h, b)));
    let (s, h, b) = send(
        post(
            &full,
            "/messages",
            json!({"to": "+14155550100", "type": "text", "text": {"body": "hi"}}),
        )
        .header("Idempotency-Key", "order-0003-a"),
    )
    .await;
    out.push(("conflict_no_number", shown(app, s, &h, b)));
    let (s, h, b) = send(
        app.http
            .get(app.url(&format!(
                "{API}/contacts/0190f0f0-0000-7000-8000-000000000000"
            )))
            .bearer_auth(&full),
    )
    .await;
    out.push(("not_found_contact", shown(app, s, &h, b)));
    let (s, h, b) = send(
        app.http
            .put(app.url(&format!("{API}/contacts")))
            .bearer_auth(&full),
    )
    .await;
    out.push(("method_not_allowed", shown(app, s, &h, b)));
    let (s, h, b) = send_oversized(app, "POST", &format!("{API}/contacts"), &full, 2 << 20).await;
    out.push(("request_too_large", shown(app, s, &h, b)));
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
    let (s, h, b) = app.get(&format!("{API}/contacts"), Some(&full)).await;
    out.push(("plan_feature_unavailable", shown(app, s, &h, b)));
    out
}

tern_store::both_backends! { TestApp;
    error_answers_are_as_reviewed => async |app: &TestApp| {
        // One snapshot per answer for both backends (not per test module).
        let mut settings = insta::Settings::clone_current();
        settings.set_prepend_module_to_snapshot(false);
        settings.set_snapshot_suffix("");
        let _guard = settings.bind_to_scope();
        for (name, answer) in answers(app).await {
            insta::assert_json_snapshot!(format!("error_{name}"), answer);
        }
    },
}
