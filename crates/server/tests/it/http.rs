//! Black-box HTTP tests of the public API skeleton, on SQLite and on PostgreSQL.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common::{TestApp, assert_error, send};
use serde_json::Value;
use tern_domain::auth::Preset;

async fn auth_errors(app: &TestApp) {
    let (_, key) = app.owner_key("read_only").await;
    let path = "/api/public/v1/phone-numbers";
    // Missing, malformed scheme, wrong shape, unknown but well-formed.
    let (s, h, b) = app.get(path, None).await;
    assert_error(s, &h, &b, 401, "unauthenticated");
    for header in [
        "Basic abc".to_string(),
        "Bearer".to_string(),
        "Bearer tern_short".to_string(),
        format!("Bearer {}x", key),
        format!("Bearer tern_{}", "A".repeat(40)),
        format!("Token {key}"),
    ] {
        let (s, h, b) = send(app.http.get(app.url(path)).header("Authorization", header)).await;
        assert_error(s, &h, &b, 401, "unauthenticated");
    }
    // Non-UTF-8 header bytes are refused, not a 500.
    let bad = reqwest::header::HeaderValue::from_bytes(b"Bearer \xff\xfe").unwrap();
    let (s, h, b) = send(app.http.get(app.url(path)).header("Authorization", bad)).await;
    assert_error(s, &h, &b, 401, "unauthenticated");
    // The valid key works, and a client-chosen request id is not echoed.
    let (s, h, _) = send(
        app.http
            .get(app.url(path))
            .bearer_auth(&key)
            .header("X-Request-Id", "evil\"id"),
    )
    .await;
    assert_eq!(s, 200);
    assert_ne!(h["x-request-id"], "evil\"id");
}

async fn revoked_and_rotated_keys(app: &TestApp) {
    let path = "/api/public/v1/phone-numbers";
    let (id, key) = app.owner_key("read_only").await;
    assert_eq!(app.get(path, Some(&key)).await.0, 200);
    let rotated = app
        .admin(&["key", "rotate", "--key-id", &id])
        .await
        .unwrap();
    let new_key = rotated["key"].as_str().unwrap().to_string();
    let (s, h, b) = app.get(path, Some(&key)).await;
    assert_error(s, &h, &b, 401, "unauthenticated");
    assert_eq!(b["details"]["reason"], "revoked_key");
    assert_eq!(app.get(path, Some(&new_key)).await.0, 200);
    // Rotation keeps the permissions.
    assert_eq!(rotated["id"].as_str().unwrap().len(), 36);
    let new_id = rotated["id"].as_str().unwrap().to_string();
    app.admin(&["key", "revoke", "--key-id", &new_id])
        .await
        .unwrap();
    let (s, h, b) = app.get(path, Some(&new_key)).await;
    assert_error(s, &h, &b, 401, "unauthenticated");
    // Revoking twice and rotating a revoked key are refused.
    assert!(
        app.admin(&["key", "revoke", "--key-id", &new_id])
            .await
            .is_err()
    );
    assert!(
        app.admin(&["key", "rotate", "--key-id", &new_id])
            .await
            .is_err()
    );
}

async fn permission_denied(app: &TestApp) {
    let (_, key) = app
        .key_for(
            &app.org_id,
            &app.owner_id,
            &["--permissions", "messages.read,contacts.read"],
        )
        .await;
    let (s, h, b) = app.get("/api/public/v1/phone-numbers", Some(&key)).await;
    assert_error(s, &h, &b, 403, "permission_denied");
    assert_eq!(b["details"]["permission"], "numbers.read");
}

async fn plan_without_public_api(app: &TestApp) {
    let (_, key) = app.owner_key("read_only").await;
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
    let (s, h, b) = app.get("/api/public/v1/phone-numbers", Some(&key)).await;
    assert_error(s, &h, &b, 402, "plan_feature_unavailable");
    assert_eq!(b["details"]["feature"], "public_api");
    assert_eq!(b["details"]["plan"], "growth");
    assert!(
        b["details"]
            .as_object()
            .unwrap()
            .contains_key("upgrade_plan")
    );
    // Moving to a plan without the API gives the upgrade path.
    app.admin(&[
        "org",
        "update",
        "--org",
        &app.org_id,
        "--feature",
        "public_api=on",
        "--plan",
        "free",
    ])
    .await
    .unwrap();
    // The explicit override still wins over the free plan.
    assert_eq!(
        app.get("/api/public/v1/phone-numbers", Some(&key)).await.0,
        200
    );
    let other = app.new_org("Free Co", "free").await;
    let m = app.member(&other, "o@free.test", "owner").await;
    // Key creation itself is refused when the plan lacks the API.
    let err = app
        .admin(&[
            "key",
            "create",
            "--org",
            &other,
            "--member",
            &m,
            "--name",
            "k",
            "--preset",
            "read_only",
        ])
        .await
        .unwrap_err();
    assert!(
        err.to_string().contains("plan_feature_unavailable"),
        "{err}"
    );
}

async fn pagination(app: &TestApp) {
    let (_, key) = app.owner_key("read_only").await;
    for i in 0..5 {
        app.add_number(&app.org_id, &format!("10{i}"), &format!("+1415555010{i}"))
            .await;
    }
    let mut ids = Vec::new();
    let mut cursor: Option<String> = None;
    let mut pages = 0;
    loop {
        let path = match &cursor {
            Some(c) => format!("/api/public/v1/phone-numbers?limit=2&cursor={c}"),
            None => "/api/public/v1/phone-numbers?limit=2".to_string(),
        };
        let (s, _, b) = app.get(&path, Some(&key)).await;
        assert_eq!(s, 200, "{b}");
        pages += 1;
        for item in b["data"].as_array().unwrap() {
            ids.push(item["id"].as_str().unwrap().to_string());
            assert!(
                item["display_phone_number"]
                    .as_str()
                    .unwrap()
                    .starts_with('+')
            );
            assert_eq!(item["status"], "connected");
            assert_eq!(item["throughput_mps"], 80);
            assert_eq!(item["waba_id"], "waba1");
        }
        match &b["next_cursor"] {
            Value::Null => break,
            Value::String(c) => cursor = Some(c.clone()),
            other => panic!("bad next_cursor {other}"),
        }
    }
    assert_eq!(pages, 3);
    assert_eq!(ids, ["100", "101", "102", "103", "104"]);
    // Default page size holds all five.
    let (_, _, b) = app.get("/api/public/v1/phone-numbers", Some(&key)).await;
    assert_eq!(b["data"].as_array().unwrap().len(), 5);
    assert!(b["next_cursor"].is_null());

    // Bad limits and parameters are refused, never ignored.
    for q in [
        "limit=0",
        "limit=101",
        "limit=abc",
        "limit=",
        "limit=-1",
        "limit=1.5",
        "limit=2&limit=3",
    ] {
        let (s, h, b) = app
            .get(&format!("/api/public/v1/phone-numbers?{q}"), Some(&key))
            .await;
        assert_error(s, &h, &b, 400, "validation_failed");
        assert_eq!(b["details"]["fields"][0]["field"], "limit", "{q}: {b}");
    }
    let (s, h, b) = app
        .get("/api/public/v1/phone-numbers?limt=5", Some(&key))
        .await;
    assert_error(s, &h, &b, 400, "validation_failed");
    assert_eq!(b["details"]["fields"][0]["field"], "limt");
    let (s, h, b) = app
        .get("/api/public/v1/phone-numbers?limit=%ZZ", Some(&key))
        .await;
    assert!(s == 400, "{s} {b}");
    assert_error(s, &h, &b, 400, "validation_failed");

    // Every list reads its query in one place: a bad filter, limit and cursor are named
    // together.
    for (path, filters) in [
        (
            "/api/public/v1/templates?status=nope&language=x&limit=0&cursor=abc",
            vec!["status", "language"],
        ),
        (
            "/api/public/v1/conversations?window_state=ajar&contact_id=1&limit=0&cursor=abc",
            vec!["contact_id", "window_state"],
        ),
        (
            "/api/public/v1/contacts?updated_since=yesterday&limit=0&cursor=abc",
            vec!["updated_since"],
        ),
    ] {
        let (s, h, b) = app.get(path, Some(&key)).await;
        assert_error(s, &h, &b, 400, "validation_failed");
        let mut named: Vec<&str> = b["details"]["fields"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| f["field"].as_str().unwrap())
            .collect();
        named.sort_unstable();
        let mut want = filters.clone();
        want.extend(["cursor", "limit"]);
        want.sort_unstable();
        assert_eq!(named, want, "{path}: {b}");
    }

    // Tampered and foreign cursors.
    let (_, _, first) = app
        .get("/api/public/v1/phone-numbers?limit=2", Some(&key))
        .await;
    let c = first["next_cursor"].as_str().unwrap().to_string();
    let mut tampered: Vec<char> = c.chars().collect();
    let i = tampered.len() / 2;
    tampered[i] = if tampered[i] == 'A' { 'B' } else { 'A' };
    let tampered: String = tampered.into_iter().collect();
    for bad in [tampered.as_str(), "abc", "%00", "eyJ2IjoxfQ"] {
        let (s, h, b) = app
            .get(
                &format!("/api/public/v1/phone-numbers?cursor={bad}"),
                Some(&key),
            )
            .await;
        assert_error(s, &h, &b, 400, "validation_failed");
        assert_eq!(b["details"]["fields"][0]["field"], "cursor", "{b}");
    }
    let (_, other_key) = app.other_org("Other", Preset::ReadOnly).await;
    let (s, h, b) = app
        .get(
            &format!("/api/public/v1/phone-numbers?cursor={c}"),
            Some(&other_key),
        )
        .await;
    assert_error(s, &h, &b, 400, "validation_failed");
    assert_eq!(b["details"]["fields"][0]["field"], "cursor");
    // And the other organisation sees none of these numbers.
    let (s, _, b) = app
        .get("/api/public/v1/phone-numbers", Some(&other_key))
        .await;
    assert_eq!(s, 200);
    assert_eq!(b["data"].as_array().unwrap().len(), 0);
}

async fn routing_errors(app: &TestApp) {
    let (_, key) = app.owner_key("read_only").await;
    let (s, h, b) = app.get("/api/public/v1/nope", Some(&key)).await;
    assert_error(s, &h, &b, 404, "not_found");
    // An unknown endpoint says so, not that an item is missing from the organisation.
    assert!(
        b["message"].as_str().unwrap().contains("No such endpoint"),
        "{b}"
    );
    let (s, h, b) = app.get("/nope", None).await;
    assert_error(s, &h, &b, 404, "not_found");
    let (s, h, b) = send(
        app.http
            .delete(app.url("/api/public/v1/phone-numbers"))
            .bearer_auth(&key),
    )
    .await;
    assert_error(s, &h, &b, 405, "method_not_allowed");
    let allow = h["allow"].to_str().unwrap();
    assert!(allow.contains("GET"), "{allow}");
    // A public key is refused on Tern's own API.
    let (s, h, b) = app.get("/api/app/v1/organisations", Some(&key)).await;
    assert_error(s, &h, &b, 401, "unauthenticated");
    assert_eq!(b["details"]["reason"], "api_key_not_accepted");
    // Hostile: a huge body on a GET and odd headers never produce a 5xx.
    let (s, _, _) = crate::common::send_oversized(
        app,
        "GET",
        "/api/public/v1/phone-numbers",
        &key,
        2 * 1024 * 1024,
    )
    .await;
    assert!(s < 500, "{s}");
}

async fn openapi_and_docs(app: &TestApp) {
    let (s, _, spec) = app.get("/api/public/v1/openapi.json", None).await;
    assert_eq!(s, 200);
    assert!(spec["openapi"].as_str().unwrap().starts_with("3.1"));
    let op = &spec["paths"]["/phone-numbers"]["get"];
    assert_eq!(op["operationId"], "listPhoneNumbers");
    for status in ["200", "400", "401", "402", "403", "429", "503"] {
        assert!(op["responses"][status].is_object(), "missing {status}");
    }
    // Every authenticated operation documents the quota headers: required on success,
    // Retry-After on its 429.
    for (path, item) in spec["paths"].as_object().unwrap() {
        for (method, op) in item.as_object().unwrap() {
            if op.get("security").is_none() {
                continue;
            }
            let ok = op["responses"]
                .as_object()
                .unwrap()
                .iter()
                .find(|(s, _)| s.starts_with('2'))
                .map(|(_, r)| r)
                .unwrap_or_else(|| panic!("{method} {path} has no success answer"));
            for h in [
                "RateLimit-Limit",
                "RateLimit-Remaining",
                "RateLimit-Reset",
                "RateLimit-Policy",
                "X-RateLimit-Remaining",
            ] {
                assert_eq!(ok["headers"][h]["required"], true, "{method} {path} {h}");
            }
            assert!(
                op["responses"]["429"]["headers"]["Retry-After"].is_object(),
                "{method} {path}"
            );
            assert!(
                op["responses"]["401"]["headers"]
                    .get("RateLimit-Limit")
                    .is_none()
            );
        }
    }
    assert_eq!(
        spec["components"]["schemas"]["Error"]["properties"]["code"]["$ref"],
        "#/components/schemas/ErrorCode"
    );
    // The served document's server variable defaults to this server.
    assert_eq!(
        spec["servers"][0]["variables"]["base_url"]["default"],
        app.url("")
    );
    assert!(
        spec["components"]["schemas"]["ErrorCode"]["enum"]
            .as_array()
            .unwrap()
            .iter()
            .any(|c| c == "wallet_balance_low")
    );
    let res = app
        .http
        .get(app.url("/docs/errors/validation_failed"))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    let html = res.text().await.unwrap();
    assert!(html.contains("validation_failed") && html.contains("400"));
    let (s, h, b) = app.get("/docs/errors/no_such_code", None).await;
    assert_error(s, &h, &b, 404, "not_found");
    let res = app.http.get(app.url("/docs/api/")).send().await.unwrap();
    assert_eq!(res.status(), 200);
    assert!(res.text().await.unwrap().to_lowercase().contains("swagger"));
    // The UI's assets are served by Tern itself (works offline).
    for asset in ["/docs/api/swagger-ui-bundle.js", "/docs/api/swagger-ui.css"] {
        let res = app.http.get(app.url(asset)).send().await.unwrap();
        assert_eq!(res.status(), 200, "{asset}");
    }
}

async fn health_and_metrics(app: &TestApp) {
    let (s, h, b) = app.get("/healthz", None).await;
    assert_eq!(s, 200);
    assert!(h.contains_key("x-request-id"));
    assert_eq!(b["status"], "ok");
    let (s, _, b) = app.get("/readyz", None).await;
    assert_eq!(s, 200);
    assert_eq!(b["database"], "ok");
    let res = app.http.get(app.url("/metrics")).send().await.unwrap();
    assert_eq!(res.status(), 200);
    assert!(
        res.text()
            .await
            .unwrap()
            .contains("tern_http_requests_total")
    );
}

tern_store::both_backends! { TestApp;
    auth_errors_are_401 => auth_errors,
    revoked_and_rotated_keys_work_at_once => revoked_and_rotated_keys,
    missing_permission_is_403 => permission_denied,
    plan_without_public_api_is_402 => plan_without_public_api,
    pagination_is_strict_and_signed => pagination,
    routing_errors_use_the_error_body => routing_errors,
    openapi_and_docs_are_served => openapi_and_docs,
    health_ready_and_metrics => health_and_metrics,
}
