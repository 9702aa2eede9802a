//! Contacts, custom fields, tags and consent over HTTP, on SQLite and PostgreSQL.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common::{TestApp, assert_error, send};
use serde_json::{Value, json};
use tern_domain::auth::Preset;

impl TestApp {
    async fn post_json(
        &self,
        path: &str,
        key: &str,
        body: Value,
    ) -> (u16, reqwest::header::HeaderMap, Value) {
        send(self.http.post(self.url(path)).bearer_auth(key).json(&body)).await
    }
    async fn patch_json(
        &self,
        path: &str,
        key: &str,
        body: Value,
    ) -> (u16, reqwest::header::HeaderMap, Value) {
        send(self.http.patch(self.url(path)).bearer_auth(key).json(&body)).await
    }
}

const C: &str = "/api/public/v1/contacts";

async fn full_key(app: &TestApp) -> String {
    app.owner_key("full_access").await.1
}

async fn create_and_update(app: &TestApp) {
    let key = full_key(app).await;
    app.add_contact_field("tier", "Tier", "text").await;
    app.add_contact_field("score", "Score", "number").await;
    let (s, _, c) = app
        .post_json(C, &key, json!({"phone": "+1 415-555-0123", "name": "Ada", "custom_fields": {"tier": "gold"}, "tags": ["vip", " vip ", "new"]}))
        .await;
    assert_eq!(s, 201, "{c}");
    assert_eq!(c["wa_id"], "14155550123");
    assert_eq!(c["phone"], "+14155550123");
    assert_eq!(c["name"], "Ada");
    assert_eq!(c["custom_fields"], json!({"tier": "gold"}));
    assert_eq!(c["tags"], json!(["new", "vip"]));
    assert_eq!(c["consent"]["status"], "unknown");
    assert!(c["created_at"].as_str().unwrap().ends_with('Z'));
    let id = c["id"].as_str().unwrap().to_string();
    // Same number again (other formatting): 200, the same contact, fields merged.
    let (s, _, c2) = app
        .post_json(
            C,
            &key,
            json!({"phone": "+14155550123", "custom_fields": {"score": 7}}),
        )
        .await;
    assert_eq!(s, 200, "{c2}");
    assert_eq!(c2["id"], id.as_str());
    assert_eq!(c2["name"], "Ada");
    assert_eq!(c2["custom_fields"], json!({"tier": "gold", "score": 7}));
    // PATCH: partial; null removes; name can be cleared.
    let (s, _, c3) = app
        .patch_json(
            &format!("{C}/{id}"),
            &key,
            json!({"custom_fields": {"tier": null}}),
        )
        .await;
    assert_eq!(s, 200, "{c3}");
    assert_eq!(c3["custom_fields"], json!({"score": 7}));
    assert_eq!(c3["name"], "Ada");
    let (_, _, c4) = app
        .patch_json(&format!("{C}/{id}"), &key, json!({"name": null}))
        .await;
    assert!(c4["name"].is_null());
    let (s, _, got) = app.get(&format!("{C}/{id}"), Some(&key)).await;
    assert_eq!(s, 200);
    assert_eq!(got["custom_fields"], json!({"score": 7}));
}

async fn validation_errors(app: &TestApp) {
    let key = full_key(app).await;
    app.add_contact_field("score", "Score", "number").await;
    let (s, h, b) = app
        .post_json(C, &key, json!({"phone": "14155550123"}))
        .await;
    assert_error(s, &h, &b, 400, "validation_failed");
    assert_eq!(b["details"]["reason"], "to_needs_country_code");
    assert_eq!(b["details"]["fields"][0]["field"], "phone");
    let (s, h, b) = app.post_json(C, &key, json!({"phone": "+999123"})).await;
    assert_error(s, &h, &b, 400, "validation_failed");
    // Every problem at once.
    let (s, h, b) = app
        .post_json(C, &key, json!({"phone": "+14155550024", "name": " ", "custom_fields": {"score": "high", "nope": 1}, "tags": ["", "ok"]}))
        .await;
    assert_error(s, &h, &b, 400, "validation_failed");
    let fields: Vec<&str> = b["details"]["fields"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["field"].as_str().unwrap())
        .collect();
    for f in [
        "name",
        "custom_fields.score",
        "custom_fields.nope",
        "tags[0]",
    ] {
        assert!(fields.contains(&f), "{f} missing in {fields:?}");
    }
    // Wrong types, unknown fields, bad JSON, wrong content type.
    let (s, h, b) = app.post_json(C, &key, json!({"phone": 5})).await;
    assert_error(s, &h, &b, 400, "validation_failed");
    assert_eq!(b["details"]["fields"][0]["field"], "phone");
    let (s, h, b) = app
        .post_json(C, &key, json!({"phone": "+14155550025", "colour": "red"}))
        .await;
    assert_error(s, &h, &b, 400, "validation_failed");
    let (s, h, b) = send(
        app.http
            .post(app.url(C))
            .bearer_auth(&key)
            .header("Content-Type", "application/json")
            .body("{\"phone\":"),
    )
    .await;
    assert_error(s, &h, &b, 400, "validation_failed");
    let (s, h, b) = send(
        app.http
            .post(app.url(C))
            .bearer_auth(&key)
            .header("Content-Type", "text/plain")
            .body("{}"),
    )
    .await;
    assert_error(s, &h, &b, 400, "validation_failed");
    assert_eq!(b["details"]["fields"][0]["field"], "Content-Type");
    // Too large.
    let (s, h, b) = crate::common::send_oversized(app, "POST", C, &key, 2 * 1024 * 1024).await;
    assert_error(s, &h, &b, 413, "request_too_large");
    // PATCH with an unknown custom field or a bad type.
    let (_, _, c) = app
        .post_json(C, &key, json!({"phone": "+14155550027"}))
        .await;
    let id = c["id"].as_str().unwrap();
    let (s, h, b) = app
        .patch_json(
            &format!("{C}/{id}"),
            &key,
            json!({"custom_fields": {"unknown": 1}}),
        )
        .await;
    assert_error(s, &h, &b, 400, "validation_failed");
    assert_eq!(b["details"]["fields"][0]["field"], "custom_fields.unknown");
}

async fn isolation_and_not_found(app: &TestApp) {
    let key = full_key(app).await;
    let (_, _, c) = app
        .post_json(C, &key, json!({"phone": "+14155550200"}))
        .await;
    let id = c["id"].as_str().unwrap().to_string();
    let (_, other_key) = app.other_org("Other", Preset::FullAccess).await;
    // Every route answers 404 for another organisation's contact, and for malformed ids.
    for cid in [
        id.as_str(),
        "not-a-uuid",
        "00000000-0000-0000-0000-000000000000",
    ] {
        let (s, h, b) = app.get(&format!("{C}/{cid}"), Some(&other_key)).await;
        assert_error(s, &h, &b, 404, "not_found");
        let (s, h, b) = app
            .patch_json(&format!("{C}/{cid}"), &other_key, json!({"name": "x"}))
            .await;
        assert_error(s, &h, &b, 404, "not_found");
        let (s, h, b) = app
            .post_json(
                &format!("{C}/{cid}/consent"),
                &other_key,
                json!({"status": "opted_out"}),
            )
            .await;
        assert_error(s, &h, &b, 404, "not_found");
        let (s, h, b) = app
            .post_json(
                &format!("{C}/{cid}/tags"),
                &other_key,
                json!({"tags": ["x"]}),
            )
            .await;
        assert_error(s, &h, &b, 404, "not_found");
        let (s, h, b) = send(
            app.http
                .delete(app.url(&format!("{C}/{cid}/tags/x")))
                .bearer_auth(&other_key),
        )
        .await;
        assert_error(s, &h, &b, 404, "not_found");
    }
    let (_, _, list) = app.get(C, Some(&other_key)).await;
    assert_eq!(list["data"].as_array().unwrap().len(), 0);
    // The same phone in the other organisation is a separate contact.
    let (s, _, c2) = app
        .post_json(C, &other_key, json!({"phone": "+14155550200"}))
        .await;
    assert_eq!(s, 201);
    assert_ne!(c2["id"], id.as_str());
}

async fn permissions(app: &TestApp) {
    let (_, read) = app.owner_key("read_only").await;
    let (s, h, b) = app
        .post_json(C, &read, json!({"phone": "+14155550300"}))
        .await;
    assert_error(s, &h, &b, 403, "permission_denied");
    assert_eq!(b["details"]["permission"], "contacts.create");
    let (_, create) = app
        .key_for(
            &app.org_id,
            &app.owner_id,
            &["--permissions", "contacts.create"],
        )
        .await;
    let (s, _, c) = app
        .post_json(C, &create, json!({"phone": "+14155550300"}))
        .await;
    assert_eq!(s, 201);
    let id = c["id"].as_str().unwrap();
    let (s, h, b) = app
        .patch_json(&format!("{C}/{id}"), &create, json!({"name": "x"}))
        .await;
    assert_error(s, &h, &b, 403, "permission_denied");
    assert_eq!(b["details"]["permission"], "contacts.update");
    let (s, h, b) = app.get(C, Some(&create)).await;
    assert_error(s, &h, &b, 403, "permission_denied");
    assert_eq!(b["details"]["permission"], "contacts.read");
}

async fn consent_and_tags(app: &TestApp) {
    let key = full_key(app).await;
    let (_, _, c) = app
        .post_json(C, &key, json!({"phone": "+14155550400"}))
        .await;
    let id = c["id"].as_str().unwrap().to_string();
    let (s, _, c) = app
        .post_json(
            &format!("{C}/{id}/consent"),
            &key,
            json!({"status": "opted_in", "source": "web_form"}),
        )
        .await;
    assert_eq!(s, 200, "{c}");
    assert_eq!(c["consent"]["status"], "opted_in");
    assert_eq!(c["consent"]["source"], "web_form");
    assert!(c["consent"]["updated_at"].is_string());
    let (_, _, c) = app
        .post_json(
            &format!("{C}/{id}/consent"),
            &key,
            json!({"status": "opted_out", "source": "reply_stop"}),
        )
        .await;
    assert_eq!(c["consent"]["status"], "opted_out");
    // An older decision does not replace a newer one.
    let (_, _, c) = app
        .post_json(
            &format!("{C}/{id}/consent"),
            &key,
            json!({"status": "opted_in", "at": "2020-01-01T00:00:00Z"}),
        )
        .await;
    assert_eq!(c["consent"]["status"], "opted_out");
    for bad in [
        json!({"status": "maybe"}),
        json!({"status": "opted_in", "at": "yesterday"}),
        json!({}),
    ] {
        let (s, h, b) = app.post_json(&format!("{C}/{id}/consent"), &key, bad).await;
        assert_error(s, &h, &b, 400, "validation_failed");
    }
    // Tags: idempotent add, remove, remove absent, counts.
    let (_, _, c) = app
        .post_json(
            &format!("{C}/{id}/tags"),
            &key,
            json!({"tags": ["b", "a", "b"]}),
        )
        .await;
    assert_eq!(c["tags"], json!(["a", "b"]));
    let (_, _, c) = app
        .post_json(&format!("{C}/{id}/tags"), &key, json!({"tags": ["a"]}))
        .await;
    assert_eq!(c["tags"], json!(["a", "b"]));
    let (s, _, c) = send(
        app.http
            .delete(app.url(&format!("{C}/{id}/tags/a")))
            .bearer_auth(&key),
    )
    .await;
    assert_eq!(s, 200);
    assert_eq!(c["tags"], json!(["b"]));
    let (s, _, _) = send(
        app.http
            .delete(app.url(&format!("{C}/{id}/tags/zzz")))
            .bearer_auth(&key),
    )
    .await;
    assert_eq!(s, 200);
    let (_, _, c2) = app
        .post_json(
            C,
            &key,
            json!({"phone": "+14155550401", "tags": ["b", "c"]}),
        )
        .await;
    assert_eq!(c2["tags"], json!(["b", "c"]));
    let (s, _, tags) = app.get("/api/public/v1/tags", Some(&key)).await;
    assert_eq!(s, 200);
    assert_eq!(
        tags["data"],
        json!([{"tag": "b", "contact_count": 2}, {"tag": "c", "contact_count": 1}])
    );
    let (s, h, b) = app
        .post_json(&format!("{C}/{id}/tags"), &key, json!({"tags": []}))
        .await;
    assert_error(s, &h, &b, 400, "validation_failed");
}

async fn search_and_sync(app: &TestApp) {
    let key = full_key(app).await;
    let mut ids = Vec::new();
    for (i, name) in [
        "Ada Lovelace",
        "Grace Hopper",
        "Alan Turing",
        "ada byron",
        "Linus",
    ]
    .iter()
    .enumerate()
    {
        let (_, _, c) = app
            .post_json(
                C,
                &key,
                json!({"phone": format!("+141555505{i:02}"), "name": name}),
            )
            .await;
        ids.push(c["id"].as_str().unwrap().to_string());
    }
    let names = |v: &Value| -> Vec<String> {
        v["data"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["name"].as_str().unwrap_or("").to_string())
            .collect()
    };
    let (_, _, r) = app.get(&format!("{C}?q=ADA"), Some(&key)).await;
    assert_eq!(
        names(&r),
        ["ada byron", "Ada Lovelace"],
        "case-insensitive, newest first"
    );
    let (_, _, r) = app.get(&format!("{C}?q=5550502"), Some(&key)).await;
    assert_eq!(names(&r), ["Alan Turing"]);
    let (_, _, r) = app.get(&format!("{C}?q=%25"), Some(&key)).await;
    assert_eq!(r["data"].as_array().unwrap().len(), 0, "% is literal");
    // Paging through search results.
    let (_, _, p1) = app.get(&format!("{C}?q=a&limit=2"), Some(&key)).await;
    let cur = p1["next_cursor"].as_str().unwrap().to_string();
    let (s, _, p2) = app
        .get(&format!("{C}?q=a&limit=2&cursor={cur}"), Some(&key))
        .await;
    assert_eq!(s, 200);
    assert!(!p2["data"].as_array().unwrap().is_empty());
    // A cursor from one filter does not continue another.
    let (s, h, b) = app
        .get(&format!("{C}?q=b&limit=2&cursor={cur}"), Some(&key))
        .await;
    assert_error(s, &h, &b, 400, "validation_failed");
    // Incremental sync: everything after a point, oldest change first, no repeats, no gaps.
    let (_, _, all) = app
        .get(
            &format!("{C}?updated_since=2000-01-01T00:00:00Z&limit=2"),
            Some(&key),
        )
        .await;
    let mut seen: Vec<String> = all["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["id"].as_str().unwrap().to_string())
        .collect();
    let mut cursor = all["next_cursor"].as_str().map(str::to_string);
    while let Some(c) = cursor {
        let (_, _, page) = app
            .get(
                &format!("{C}?updated_since=2000-01-01T00:00:00Z&limit=2&cursor={c}"),
                Some(&key),
            )
            .await;
        seen.extend(
            page["data"]
                .as_array()
                .unwrap()
                .iter()
                .map(|c| c["id"].as_str().unwrap().to_string()),
        );
        cursor = page["next_cursor"].as_str().map(str::to_string);
    }
    assert_eq!(seen, ids, "oldest change first, each once");
    // A change moves a contact to the end of the sync order.
    let since = all["data"][0]["updated_at"].as_str().unwrap().to_string();
    app.patch_json(&format!("{C}/{}", ids[0]), &key, json!({"name": "Ada L."}))
        .await;
    let (_, _, after) = app
        .get(&format!("{C}?updated_since={since}&limit=100"), Some(&key))
        .await;
    let after_ids: Vec<&str> = after["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["id"].as_str().unwrap())
        .collect();
    assert_eq!(after_ids.last().copied(), Some(ids[0].as_str()));
    assert!(!after_ids[..after_ids.len() - 1].contains(&ids[0].as_str()));
    // Bad parameters.
    for q in [
        "updated_since=yesterday",
        "q=a&updated_since=2000-01-01T00:00:00Z",
        "q=",
        "sort=name",
    ] {
        let (s, h, b) = app.get(&format!("{C}?{q}"), Some(&key)).await;
        assert_error(s, &h, &b, 400, "validation_failed");
    }
}

async fn fields_and_plan_limit(app: &TestApp) {
    let key = full_key(app).await;
    for k in ["b_field", "a_field"] {
        app.add_contact_field(k, k, "boolean").await;
    }
    let (s, _, f) = app.get("/api/public/v1/contact-fields", Some(&key)).await;
    assert_eq!(s, 200);
    assert_eq!(f["data"][0]["key"], "a_field");
    assert_eq!(f["data"][0]["type"], "boolean");
    app.admin(&[
        "org",
        "update",
        "--org",
        &app.org_id,
        "--limit",
        "contacts=2",
    ])
    .await
    .unwrap();
    assert_eq!(
        app.post_json(C, &key, json!({"phone": "+14155550601"}))
            .await
            .0,
        201
    );
    assert_eq!(
        app.post_json(C, &key, json!({"phone": "+14155550602"}))
            .await
            .0,
        201
    );
    let (s, h, b) = app
        .post_json(C, &key, json!({"phone": "+14155550603"}))
        .await;
    assert_error(s, &h, &b, 402, "plan_limit_reached");
    assert_eq!(
        b["details"],
        json!({"entitlement": "contacts", "limit": 2, "used": 2})
    );
    // Updating an existing contact is still allowed at the limit.
    assert_eq!(
        app.post_json(C, &key, json!({"phone": "+14155550601", "name": "x"}))
            .await
            .0,
        200
    );
}

/// Every body names every problem at once, a missing field by its own name.
async fn bodies_name_every_problem(app: &TestApp) {
    let key = full_key(app).await;
    let paths = |b: &Value| -> Vec<String> {
        b["details"]["fields"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| f["field"].as_str().unwrap().to_string())
            .collect()
    };
    let (s, h, b) = app.post_json(C, &key, json!({})).await;
    assert_error(s, &h, &b, 400, "validation_failed");
    assert_eq!(paths(&b), ["phone"], "{b}");
    assert_eq!(
        b["details"]["fields"][0]["message"],
        "is required (or give user_id for a customer known by username)"
    );
    let bad = json!({"phone": 5, "name": "", "tags": ["ok", ""], "x": 1});
    let (s, h, b) = app.post_json(C, &key, bad).await;
    assert_error(s, &h, &b, 400, "validation_failed");
    assert_eq!(paths(&b), ["phone", "name", "tags[1]", "x"], "{b}");

    let (_, _, c) = app
        .post_json(C, &key, json!({"phone": "+14155550031"}))
        .await;
    let id = c["id"].as_str().unwrap();
    let one = format!("{C}/{id}");
    let (s, h, b) = app
        .patch_json(&one, &key, json!({"name": 5, "custom_fields": [], "y": 1}))
        .await;
    assert_error(s, &h, &b, 400, "validation_failed");
    assert_eq!(paths(&b), ["name", "custom_fields", "y"], "{b}");
    // A partial update may be empty.
    assert_eq!(app.patch_json(&one, &key, json!({})).await.0, 200);

    let consent = format!("{one}/consent");
    let (s, h, b) = app.post_json(&consent, &key, json!({})).await;
    assert_error(s, &h, &b, 400, "validation_failed");
    assert_eq!(paths(&b), ["status"], "{b}");
    let bad = json!({"status": "maybe", "source": "", "at": "yesterday"});
    let (s, h, b) = app.post_json(&consent, &key, bad).await;
    assert_error(s, &h, &b, 400, "validation_failed");
    assert_eq!(paths(&b), ["status", "source", "at"], "{b}");

    let tags = format!("{one}/tags");
    let (s, h, b) = app.post_json(&tags, &key, json!({})).await;
    assert_error(s, &h, &b, 400, "validation_failed");
    assert_eq!(paths(&b), ["tags"], "{b}");
    let (s, h, b) = app
        .post_json(&tags, &key, json!({"tags": ["ok", 5], "z": true}))
        .await;
    assert_error(s, &h, &b, 400, "validation_failed");
    assert_eq!(paths(&b), ["tags[1]", "z"], "{b}");
}

tern_store::both_backends! { TestApp;
    bodies_name_every_problem_by_path => bodies_name_every_problem,
    create_update_and_merge => create_and_update,
    validation_errors_name_every_field => validation_errors,
    other_organisations_contacts_are_404 => isolation_and_not_found,
    contact_permissions => permissions,
    consent_and_tags_work => consent_and_tags,
    search_and_incremental_sync => search_and_sync,
    contact_fields_and_plan_limit => fields_and_plan_limit,
}
