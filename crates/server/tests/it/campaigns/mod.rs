//! Campaigns over HTTP on SQLite and PostgreSQL: the API and its refusals, every action in
//! every state, audiences and variables (this file, without workers); fan-out against the
//! simulator with pause/resume, schedules, expiry and auto-pause (`run.rs`); `kill -9` and
//! two processes (`crash_safety::campaigns`).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod run;

use crate::common::{TestApp, assert_error, send};
use crate::messages::{PNID, insert_template};
use serde_json::{Value, json};
use tern_domain::auth::Preset;

pub(crate) const API: &str = "/api/public/v1";

pub(crate) async fn call(
    app: &TestApp,
    key: &str,
    method: &str,
    path: &str,
    body: Option<Value>,
) -> (u16, reqwest::header::HeaderMap, Value) {
    let url = app.url(&format!("{API}{path}"));
    let mut req = match method {
        "GET" => app.http.get(url),
        _ => app.http.post(url),
    }
    .bearer_auth(key);
    if let Some(b) = body {
        req = req.json(&b);
    }
    send(req).await
}

/// `POST /campaigns/{id}/{action}`: the status code and body.
pub(crate) async fn act(
    app: &TestApp,
    key: &str,
    id: &str,
    action: &str,
    body: Option<Value>,
) -> (u16, Value) {
    let (s, _, b) = call(app, key, "POST", &format!("/campaigns/{id}/{action}"), body).await;
    (s, b)
}

/// A contact by phone with tags; returns its id.
pub(crate) async fn contact(app: &TestApp, key: &str, body: Value) -> String {
    let (s, _, c) = call(app, key, "POST", "/contacts", Some(body)).await;
    assert!(s == 200 || s == 201, "{s} {c}");
    c["id"].as_str().unwrap().to_string()
}

/// A body-text template with `vars` variables, approved (in Tern's store).
pub(crate) async fn approved_template(app: &TestApp, name: &str, vars: usize) {
    let text: String = (1..=vars).map(|i| format!(" {{{{{i}}}}}")).collect();
    let examples: Vec<String> = (1..=vars).map(|i| format!("v{i}")).collect();
    let mut body = json!({"type": "BODY", "text": format!("Hello{text}.")});
    if vars > 0 {
        body["example"] = json!({"body_text": [examples]});
    }
    insert_template(app, name, json!([body]), "marketing").await;
}

pub(crate) fn fields(body: &Value) -> Vec<String> {
    body["details"]["fields"]
        .as_array()
        .map(|a| {
            a.iter()
                .map(|f| f["field"].as_str().unwrap().to_string())
                .collect()
        })
        .unwrap_or_default()
}

pub(crate) async fn create(app: &TestApp, key: &str, body: Value) -> Value {
    let (s, _, c) = call(app, key, "POST", "/campaigns", Some(body)).await;
    assert_eq!(s, 201, "{c}");
    c
}

async fn progress(app: &TestApp, key: &str, id: &str) -> Value {
    let (s, _, p) = call(app, key, "GET", &format!("/campaigns/{id}/progress"), None).await;
    assert_eq!(s, 200, "{p}");
    p
}

async fn setup(app: &TestApp) -> String {
    app.add_number(&app.org_id, PNID, "+14155550100").await;
    app.owner_key("full_access").await.1
}

async fn create_rules_and_refusals(app: &TestApp) {
    let key = setup(app).await;
    // Every problem of the body at once.
    let (s, h, e) = call(
        app,
        &key,
        "POST",
        "/campaigns",
        Some(json!({"name": "", "template": {"language": "xx-1"},
                    "audience": {"tags": [], "all_contacts": true}, "expires_at": "yesterday"})),
    )
    .await;
    assert_error(s, &h, &e, 400, "validation_failed");
    let f = fields(&e);
    for want in [
        "name",
        "template.name",
        "template.language",
        "audience",
        "expires_at",
    ] {
        assert!(f.contains(&want.to_string()), "{want}: {f:?}");
    }
    // A number that is not the organisation's.
    let (s, h, e) = call(
        app,
        &key,
        "POST",
        "/campaigns",
        Some(json!({"name": "n", "phone_number_id": "nope", "template": {"name": "t", "language": "en_US"},
                    "audience": {"all_contacts": true}})),
    )
    .await;
    assert_error(s, &h, &e, 400, "validation_failed");
    assert_eq!(fields(&e), vec!["phone_number_id"]);
    let c = create(
        app,
        &key,
        json!({"name": "Spring", "template": {"name": "promo", "language": "en_US", "variables": [{"field": "name", "fallback": "there"}]},
               "audience": {"all_contacts": true}}),
    )
    .await;
    assert_eq!(c["status"], "draft");
    assert_eq!(c["phone_number_id"], PNID);
    assert!(c["recipient_count"].is_null());
    assert_eq!(c["template"]["variables"][0]["field"], "name");
    assert_eq!(c["progress"]["total"], 0);
    let id = c["id"].as_str().unwrap();
    // Read back, listed, filtered.
    let (s, _, got) = call(app, &key, "GET", &format!("/campaigns/{id}"), None).await;
    assert_eq!(s, 200);
    assert_eq!(got["id"], c["id"]);
    let (_, _, page) = call(app, &key, "GET", "/campaigns?status=draft", None).await;
    assert_eq!(page["data"].as_array().unwrap().len(), 1);
    let (_, _, page) = call(app, &key, "GET", "/campaigns?status=running", None).await;
    assert_eq!(page["data"].as_array().unwrap().len(), 0);
    let (s, h, e) = call(app, &key, "GET", "/campaigns?status=done", None).await;
    assert_error(s, &h, &e, 400, "validation_failed");
    // Unknown and another organisation's ids are 404.
    let (s, h, e) = call(
        app,
        &key,
        "GET",
        &format!("/campaigns/{}", uuid::Uuid::now_v7()),
        None,
    )
    .await;
    assert_error(s, &h, &e, 404, "not_found");
    let (_, other_key) = app.other_org("Other", Preset::FullAccess).await;
    let (s, h, e) = call(app, &other_key, "GET", &format!("/campaigns/{id}"), None).await;
    assert_error(s, &h, &e, 404, "not_found");
    let (s, e) = act(app, &other_key, id, "launch", None).await;
    assert_eq!(s, 404, "{e}");
    // Permissions: a developer cannot send campaigns.
    let (_, dev_key) = app
        .key_for(&app.org_id, &app.developer_id, &["--preset", "full_access"])
        .await;
    let (s, e) = act(app, &dev_key, id, "launch", None).await;
    assert_eq!(
        (s, e["code"].as_str()),
        (403, Some("permission_denied")),
        "{e}"
    );
    // The plan feature gates every endpoint.
    app.admin(&[
        "org",
        "update",
        "--org",
        &app.org_id,
        "--feature",
        "campaigns=off",
    ])
    .await
    .unwrap();
    for (m, p) in [
        ("GET", "/campaigns".to_string()),
        ("GET", format!("/campaigns/{id}")),
        ("GET", format!("/campaigns/{id}/progress")),
        ("POST", format!("/campaigns/{id}/pause")),
    ] {
        let (s, h, e) = call(app, &key, m, &p, None).await;
        assert_error(s, &h, &e, 402, "plan_feature_unavailable");
    }
    app.admin(&[
        "org",
        "update",
        "--org",
        &app.org_id,
        "--feature",
        "campaigns=on",
        "--limit",
        "campaigns=1",
    ])
    .await
    .unwrap();
    // Creation counts against the campaigns entitlement.
    let (s, h, e) = call(
        app,
        &key,
        "POST",
        "/campaigns",
        Some(json!({"name": "Second", "template": {"name": "promo", "language": "en_US"}, "audience": {"all_contacts": true}})),
    )
    .await;
    assert_error(s, &h, &e, 402, "plan_limit_reached");
}

async fn every_action_in_every_state(app: &TestApp) {
    app.add_number(&app.org_id, PNID, "+14155550100").await;
    let (key_id, key) = app.owner_key("full_access").await;
    approved_template(app, "promo", 1).await;
    // A subscription to campaign.status: every status change below is one event.
    app.db
        .insert_webhook_subscription(&tern_store::NewSubscription {
            id: uuid::Uuid::now_v7(),
            org_id: app.org_uuid(),
            api_key_id: key_id.parse().unwrap(),
            url: "https://hooks.example.com/tern".into(),
            event_types: vec!["campaign.status".into()],
            secret_enc: vec![1, 2, 3],
            enabled: true,
            description: None,
            created_at: tern_domain::time::now_ms(),
        })
        .await
        .unwrap();
    let body = json!({"name": "S", "template": {"name": "promo", "language": "en_US", "variables": ["x"]},
                      "audience": {"tags": ["vip"]}});
    // An empty audience cannot resolve.
    let c = create(app, &key, body.clone()).await;
    let id = c["id"].as_str().unwrap().to_string();
    let (s, e) = act(app, &key, &id, "resolve", None).await;
    assert_eq!(s, 409, "{e}");
    assert_eq!(e["details"]["reason"], "audience_empty");
    contact(app, &key, json!({"phone": "+14155550201", "tags": ["vip"]})).await;
    let conflict = |s: u16, e: &Value, status: &str| {
        assert_eq!(s, 409, "{e}");
        assert_eq!(e["details"]["reason"], "invalid_campaign_state", "{e}");
        assert_eq!(e["details"]["status"], status, "{e}");
    };
    // draft: pause and resume refused; resolve → ready.
    for a in ["pause", "resume"] {
        let (s, e) = act(app, &key, &id, a, None).await;
        conflict(s, &e, "draft");
    }
    let (s, r) = act(app, &key, &id, "resolve", None).await;
    assert_eq!(s, 200, "{r}");
    assert_eq!(r["status"], "ready");
    assert_eq!(r["recipient_count"], 1);
    assert!(r["resolved_at"].is_string());
    // ready: resolve again is fine; schedule in the past refused; in the future → scheduled.
    let (s, _) = act(app, &key, &id, "resolve", None).await;
    assert_eq!(s, 200);
    let (s, e) = act(
        app,
        &key,
        &id,
        "schedule",
        Some(json!({"scheduled_at": "2020-01-01T00:00:00Z"})),
    )
    .await;
    assert_eq!(s, 400, "{e}");
    assert_eq!(fields(&e), vec!["scheduled_at"]);
    let (s, r) = act(
        app,
        &key,
        &id,
        "schedule",
        Some(json!({"scheduled_at": "2099-01-01T00:00:00Z"})),
    )
    .await;
    assert_eq!((s, r["status"].as_str()), (200, Some("scheduled")), "{r}");
    assert_eq!(r["scheduled_at"], "2099-01-01T00:00:00.000Z");
    // scheduled: resolve and pause refused; unschedule → ready; schedule again.
    let (s, e) = act(app, &key, &id, "resolve", None).await;
    conflict(s, &e, "scheduled");
    let (s, e) = act(app, &key, &id, "pause", None).await;
    conflict(s, &e, "scheduled");
    let (s, r) = act(
        app,
        &key,
        &id,
        "schedule",
        Some(json!({"scheduled_at": null})),
    )
    .await;
    assert_eq!((s, r["status"].as_str()), (200, Some("ready")), "{r}");
    assert!(r["scheduled_at"].is_null());
    act(
        app,
        &key,
        &id,
        "schedule",
        Some(json!({"scheduled_at": "2099-01-01T00:00:00Z"})),
    )
    .await;
    // launch from scheduled → running.
    let (s, r) = act(app, &key, &id, "launch", None).await;
    assert_eq!((s, r["status"].as_str()), (200, Some("running")), "{r}");
    assert!(r["launched_at"].is_string());
    for a in ["resolve", "launch", "resume"] {
        let (s, e) = act(app, &key, &id, a, None).await;
        conflict(s, &e, "running");
    }
    let (s, e) = act(
        app,
        &key,
        &id,
        "schedule",
        Some(json!({"scheduled_at": "2099-01-01T00:00:00Z"})),
    )
    .await;
    conflict(s, &e, "running");
    // running → paused (manual) → running.
    let (s, r) = act(app, &key, &id, "pause", None).await;
    assert_eq!(
        (s, r["status"].as_str(), r["pause_reason"].as_str()),
        (200, Some("paused"), Some("manual"))
    );
    for a in ["pause", "launch", "resolve"] {
        let (s, e) = act(app, &key, &id, a, None).await;
        conflict(s, &e, "paused");
    }
    let (s, r) = act(app, &key, &id, "resume", None).await;
    assert_eq!((s, r["status"].as_str()), (200, Some("running")), "{r}");
    assert!(r["pause_reason"].is_null());

    // launch from draft resolves first.
    let c2 = create(app, &key, body.clone()).await;
    let (s, r) = act(app, &key, c2["id"].as_str().unwrap(), "launch", None).await;
    assert_eq!((s, r["status"].as_str()), (200, Some("running")), "{r}");
    assert_eq!(r["recipient_count"], 1);
    // Launch checks the template: not approved → 409 template_not_approved, still ready.
    let c3 = create(
        app,
        &key,
        json!({"name": "T", "template": {"name": "missing", "language": "en_US"}, "audience": {"tags": ["vip"]}}),
    )
    .await;
    let id3 = c3["id"].as_str().unwrap();
    act(app, &key, id3, "resolve", None).await;
    let (s, h, e) = call(app, &key, "POST", &format!("/campaigns/{id3}/launch"), None).await;
    assert_error(s, &h, &e, 409, "template_not_approved");
    // … and the variables against the template (one expected, none given).
    let c4 = create(
        app,
        &key,
        json!({"name": "V", "template": {"name": "promo", "language": "en_US"}, "audience": {"tags": ["vip"]}}),
    )
    .await;
    let (s, e) = act(app, &key, c4["id"].as_str().unwrap(), "launch", None).await;
    assert_eq!(
        (s, e["code"].as_str()),
        (409, Some("template_not_approved")),
        "{e}"
    );
    assert_eq!(fields(&e), vec!["template.variables"]);
    let (_, _, c3) = call(app, &key, "GET", &format!("/campaigns/{id3}"), None).await;
    assert_eq!(c3["status"], "ready");
    // The changes above: resolve, schedule, unschedule, schedule, launch, pause, resume (7);
    // launch from draft (resolve + launch: 2); the third's resolve (1). No event for a
    // refused action or a second resolve of a ready campaign.
    app.db.fan_out_events(1_000).await.unwrap();
    assert_eq!(app.db.webhook_delivery_states().await.unwrap().len(), 10);
}

async fn audiences_variables_and_recipients(app: &TestApp) {
    let key = setup(app).await;
    app.add_contact_field("city", "City", "text").await;
    approved_template(app, "promo", 2).await;
    let ada = contact(app, &key, json!({"phone": "+14155550301", "name": "Ada", "tags": ["vip", "uk"], "custom_fields": {"city": "London"}})).await;
    let bob = contact(app, &key, json!({"phone": "+14155550302", "tags": ["vip"]})).await;
    let cy = contact(app, &key, json!({"phone": "+14155550303", "name": "Cy", "tags": ["uk"], "custom_fields": {"city": "Leeds"}})).await;
    let dee = contact(app, &key, json!({"phone": "+14155550304", "name": "Dee", "tags": ["vip", "uk", "blocked"], "custom_fields": {"city": "York"}})).await;
    let eve = contact(app, &key, json!({"phone": "+14155550305", "name": "Eve", "tags": ["vip"], "custom_fields": {"city": "Bath"}})).await;
    let (s, _, _) = call(
        app,
        &key,
        "POST",
        &format!("/contacts/{eve}/consent"),
        Some(json!({"status": "opted_out"})),
    )
    .await;
    assert_eq!(s, 200);
    let resolved = |audience: Value, vars: Value| {
        let key = key.clone();
        async move {
            let c = create(app, &key, json!({"name": "A", "template": {"name": "promo", "language": "en_US", "variables": vars}, "audience": audience})).await;
            let id = c["id"].as_str().unwrap().to_string();
            let (s, r) = act(app, &key, &id, "resolve", None).await;
            assert_eq!(s, 200, "{r}");
            id
        }
    };
    let recipients = |id: String, q: &'static str| {
        let key = key.clone();
        async move {
            let (s, _, page) = call(
                app,
                &key,
                "GET",
                &format!("/campaigns/{id}/recipients{q}"),
                None,
            )
            .await;
            assert_eq!(s, 200, "{page}");
            page
        }
    };
    let vars = json!([{"field": "name", "fallback": "there"}, {"field": "custom_fields.city"}]);
    // tags any, minus an excluded tag: Ada, Bob (no city, no fallback → variable_invalid),
    // Eve (opted out).
    let id = resolved(
        json!({"tags": ["vip"], "exclude_tags": ["blocked"]}),
        vars.clone(),
    )
    .await;
    let p = progress(app, &key, &id).await;
    assert_eq!(
        (
            p["total"].as_i64(),
            p["pending"].as_i64(),
            p["skipped"].as_i64()
        ),
        (Some(3), Some(1), Some(2)),
        "{p}"
    );
    assert_eq!(
        p["skipped_reasons"],
        json!({"opted_out": 1, "variable_invalid": 1})
    );
    assert_eq!(p["failure_codes"], json!({}));
    let sum: i64 = [
        "pending",
        "queued",
        "sent",
        "delivered",
        "read",
        "failed",
        "skipped",
        "expired",
    ]
    .iter()
    .map(|k| p[k].as_i64().unwrap())
    .sum();
    assert_eq!(sum, p["total"].as_i64().unwrap());
    let page = recipients(id.clone(), "?status=skipped").await;
    let mut got: Vec<(String, String)> = page["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["contact_id"].as_str().unwrap().to_string(),
                r["reason"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    got.sort();
    let mut want = vec![
        (bob.clone(), "variable_invalid".to_string()),
        (eve.clone(), "opted_out".to_string()),
    ];
    want.sort();
    assert_eq!(got, want);
    let page = recipients(id.clone(), "?status=pending").await;
    assert_eq!(page["data"][0]["contact_id"], ada.as_str());
    assert!(page["data"][0]["message_id"].is_null());
    // Paginated in contact order.
    let first = recipients(id.clone(), "?limit=2").await;
    assert_eq!(first["data"].as_array().unwrap().len(), 2);
    let cursor = first["next_cursor"].as_str().unwrap().to_string();
    let (s, _, second) = call(
        app,
        &key,
        "GET",
        &format!("/campaigns/{id}/recipients?limit=2&cursor={cursor}"),
        None,
    )
    .await;
    assert_eq!(s, 200);
    assert_eq!(second["data"].as_array().unwrap().len(), 1);
    assert!(second["next_cursor"].is_null());
    let (s, h, e) = call(
        app,
        &key,
        "GET",
        &format!("/campaigns/{id}/recipients?status=nope"),
        None,
    )
    .await;
    assert_error(s, &h, &e, 400, "validation_failed");
    // tags all.
    let id = resolved(
        json!({"tags": ["vip", "uk"], "tag_match": "all"}),
        json!(["a", "b"]),
    )
    .await;
    let page = recipients(id, "").await;
    let mut ids: Vec<&str> = page["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["contact_id"].as_str().unwrap())
        .collect();
    ids.sort();
    let mut want = vec![ada.as_str(), dee.as_str()];
    want.sort();
    assert_eq!(ids, want);
    // contact ids, deduplicated (and ids that are no contact of the organisation dropped).
    let id = resolved(
        json!({"contact_ids": [cy, cy, bob, uuid::Uuid::now_v7()]}),
        vars.clone(),
    )
    .await;
    let p = progress(app, &key, &id).await;
    assert_eq!(
        (p["total"].as_i64(), p["pending"].as_i64()),
        (Some(2), Some(1)),
        "{p}"
    );
    // all contacts.
    let id = resolved(json!({"all_contacts": true}), json!(["a", "b"])).await;
    let p = progress(app, &key, &id).await;
    assert_eq!(
        (
            p["total"].as_i64(),
            p["pending"].as_i64(),
            p["skipped"].as_i64()
        ),
        (Some(5), Some(4), Some(1))
    );
    // The values filled in per recipient are the ones sent: checked in run.rs.
}

/// A campaign body (create, schedule) with several problems: one 400 naming each by its path,
/// at every level, and nothing stored.
async fn a_bad_body_names_every_problem(app: &TestApp) {
    let key = setup(app).await;
    let (s, h, e) = call(
        app,
        &key,
        "POST",
        "/campaigns",
        Some(json!({
            "name": 7,
            "phone_number_id": "",
            "template": {"name": "promo", "language": "english", "variables": ["ok", {"field": "age"}], "colour": "red"},
            "audience": {"contact_ids": ["not-a-uuid"], "exclude_tags": [""]},
            "expires_at": "tomorrow",
            "priority": "high"
        })),
    )
    .await;
    assert_error(s, &h, &e, 400, "validation_failed");
    let mut f = fields(&e);
    f.sort();
    assert_eq!(
        f,
        [
            "audience.contact_ids[0]",
            "audience.exclude_tags[0]",
            "expires_at",
            "name",
            "phone_number_id",
            "priority",
            "template.colour",
            "template.language",
            "template.variables[1].field",
        ],
        "{e}"
    );
    let (_, _, page) = call(app, &key, "GET", "/campaigns", None).await;
    assert_eq!(page["data"], json!([]), "{page}");
    // Missing members, each named.
    let (s, h, e) = call(app, &key, "POST", "/campaigns", Some(json!({}))).await;
    assert_error(s, &h, &e, 400, "validation_failed");
    assert_eq!(fields(&e), ["name", "template", "audience"]);
    // The schedule body, read the same way.
    let c = create(
        app,
        &key,
        json!({"name": "Spring", "template": {"name": "promo", "language": "en_US"},
               "audience": {"all_contacts": true}}),
    )
    .await;
    let id = c["id"].as_str().unwrap();
    let (s, e) = act(
        app,
        &key,
        id,
        "schedule",
        Some(json!({"scheduled_at": 5, "expires_at": "2020-01-01T00:00:00Z", "at": "noon"})),
    )
    .await;
    assert_eq!(s, 400, "{e}");
    assert_eq!(fields(&e), ["scheduled_at", "expires_at", "at"], "{e}");
    let (s, e) = act(app, &key, id, "schedule", Some(json!({}))).await;
    assert_eq!(
        (s, fields(&e)),
        (400, vec!["scheduled_at".to_string()]),
        "{e}"
    );
}

tern_store::both_backends! { TestApp;
    create_rules_and_refusals_http => create_rules_and_refusals,
    every_action_in_every_state_http => every_action_in_every_state,
    audiences_variables_and_recipients_http => audiences_variables_and_recipients,
    a_bad_body_names_every_problem_http => a_bad_body_names_every_problem,
}
