//! Templates over HTTP against a real in-process network simulator whose webhooks reach
//! Tern's `/webhooks/whatsapp`: create / list / get, validation, limits, submission and
//! review, network errors, and the sync of templates created outside Tern. Every test runs
//! on SQLite and PostgreSQL.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common::{APP_SECRET, Backend, TestApp, assert_error, send};
use serde_json::{Value, json};
use std::time::Duration;
use tern_domain::auth::Preset;
use tern_simulator::{NumberSpec, ReviewMode, SimHandle, TemplateSeed};

const PNID: &str = "100000000000001";
const WABA: &str = "200000000000001";
const TOKEN: &str = "sim-token-1";

/// A simulator with manual template review, and a Tern app pointed at it (and it at Tern),
/// with one number registered on both sides.
async fn setup(backend: Backend) -> (TestApp, SimHandle) {
    let mut args = tern_simulator::SimArgs::local(APP_SECRET);
    args.template_review = ReviewMode::Manual;
    let sim = tern_simulator::start(args).await.unwrap();
    let app = TestApp::builder(backend)
        .graph(&sim.base_url())
        .start()
        .await;
    sim.set_callback_url(Some(app.url("/webhooks/whatsapp")));
    register(
        &app,
        &sim,
        &app.org_id.clone(),
        PNID,
        "+14155550100",
        WABA,
        TOKEN,
    )
    .await;
    (app, sim)
}

async fn register(
    app: &TestApp,
    sim: &SimHandle,
    org: &str,
    pnid: &str,
    display: &str,
    waba: &str,
    token: &str,
) {
    sim.register_number(NumberSpec {
        id: pnid.into(),
        display_phone_number: display.into(),
        waba_id: waba.into(),
        access_token: token.into(),
        throughput_mps: None,
        verified_name: None,
    })
    .unwrap();
    app.admin(&[
        "number",
        "add",
        "--org",
        org,
        "--phone-number-id",
        pnid,
        "--display-phone-number",
        display,
        "--waba-id",
        waba,
        "--access-token",
        token,
    ])
    .await
    .unwrap();
}

/// The fixture of these tests: an app and a simulator pointed at each other ([`setup`]).
struct Simulated {
    app: TestApp,
    sim: SimHandle,
}

impl tern_store::testkit::Fixture for Simulated {
    type Arg<'a> = (&'a TestApp, &'a SimHandle);
    async fn start(backend: Backend) -> Self {
        let (app, sim) = setup(backend).await;
        Simulated { app, sim }
    }
    fn arg(&self) -> (&TestApp, &SimHandle) {
        (&self.app, &self.sim)
    }
    async fn stop(self) {
        self.sim.shutdown().await;
        self.app.stop().await;
    }
}

async fn post(
    app: &TestApp,
    path: &str,
    key: &str,
    body: Option<&Value>,
) -> (u16, reqwest::header::HeaderMap, Value) {
    let mut req = app.http.post(app.url(path)).bearer_auth(key);
    if let Some(b) = body {
        req = req.json(b);
    }
    send(req).await
}

fn api(path: &str) -> String {
    format!("/api/public/v1{path}")
}

fn draft(name: &str, language: &str) -> Value {
    json!({
        "name": name,
        "language": language,
        "category": "utility",
        "components": [
            {"type": "HEADER", "format": "TEXT", "text": "Order {{1}}", "example": {"header_text": ["A-12"]}},
            {"type": "BODY", "text": "Hi {{1}}, your order {{2}} has shipped.",
             "example": {"body_text": [["Ada", "A-12"]]}},
            {"type": "FOOTER", "text": "Reply STOP to opt out"},
            {"type": "BUTTONS", "buttons": [{"type": "QUICK_REPLY", "text": "Thanks"}]}
        ]
    })
}

async fn create(app: &TestApp, key: &str, body: &Value) -> Value {
    let (s, _, b) = post(app, &api("/templates"), key, Some(body)).await;
    assert_eq!(s, 201, "{b}");
    b
}

fn field_names(body: &Value) -> Vec<String> {
    body["details"]["fields"]
        .as_array()
        .map(|a| {
            a.iter()
                .map(|f| f["field"].as_str().unwrap().to_string())
                .collect()
        })
        .unwrap_or_default()
}

/// Drains the inbox until the template reaches `status` (the simulator's webhook is
/// delivered asynchronously).
async fn wait_status(app: &TestApp, key: &str, id: &str, status: &str) -> Value {
    let mut last = Value::Null;
    for _ in 0..200 {
        tern_engine::inbox::drain(&app.db).await.unwrap();
        let (s, _, b) = app.get(&api(&format!("/templates/{id}")), Some(key)).await;
        assert_eq!(s, 200, "{b}");
        if b["status"] == status {
            return b;
        }
        last = b;
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    panic!("template never reached {status}: {last}");
}

/// Every item of a filtered list, following `next_cursor`.
async fn list_all(app: &TestApp, key: &str, query: &str) -> Vec<Value> {
    let mut out = Vec::new();
    let mut cursor: Option<String> = None;
    loop {
        let q = match &cursor {
            Some(c) => format!("/templates?{query}&limit=100&cursor={c}"),
            None => format!("/templates?{query}&limit=100"),
        };
        let (s, _, page) = app.get(&api(&q), Some(key)).await;
        assert_eq!(s, 200, "{page}");
        out.extend(page["data"].as_array().unwrap().iter().cloned());
        match page["next_cursor"].as_str() {
            Some(c) => cursor = Some(c.to_string()),
            None => return out,
        }
    }
}

fn sim_template_id(sim: &SimHandle, name: &str, language: &str) -> String {
    sim.templates()
        .into_iter()
        .find(|t| t.name == name && t.language == language)
        .map(|t| t.id)
        .expect("template on the network")
}

/// The example's `template` part passes the send-path check of the template's components.
fn assert_example_sendable(t: &Value) {
    let mut ex = t["example"].clone();
    assert_eq!(ex["type"], "template");
    assert_eq!(ex["to"], "+<RECIPIENT_PHONE>");
    assert_eq!(ex["template"]["name"], t["name"]);
    assert_eq!(ex["template"]["language"], t["language"]);
    ex["to"] = json!("+447700900123");
    let tpl = &ex["template"];
    let vars: Option<Vec<String>> = tpl["variables"]
        .as_array()
        .map(|a| a.iter().map(|v| v.as_str().unwrap().to_string()).collect());
    tern_domain::template::check_send(
        &t["components"],
        vars.as_deref(),
        tpl.get("components"),
        tpl["coupon_code"].as_str(),
    )
    .unwrap_or_else(|e| panic!("example {ex} refused: {e:?}"));
}

async fn create_list_get_with_filters_and_paging((app, _sim): (&TestApp, &SimHandle)) {
    let (_, key) = app.owner_key("full_access").await;
    let a = create(app, &key, &draft("order_shipped", "en_US")).await;
    // Shape of the Template object.
    assert!(uuid::Uuid::parse_str(a["id"].as_str().unwrap()).is_ok());
    assert_eq!(a["name"], "order_shipped");
    assert_eq!(a["language"], "en_US");
    assert_eq!(a["category"], "utility");
    assert_eq!(a["status"], "draft");
    assert_eq!(a["waba_id"], WABA);
    assert!(a["rejection_reason"].is_null());
    assert_eq!(a["components"], draft("x", "en")["components"]);
    let created_at = a["created_at"].as_str().unwrap();
    assert!(
        created_at.ends_with('Z') && created_at.len() == 24,
        "{created_at}"
    );
    assert_eq!(a["updated_at"], a["created_at"]);
    assert_eq!(
        a["example"]["template"]["variables"],
        json!(["Ada", "A-12"])
    );
    assert_example_sendable(&a);
    let b = create(app, &key, &draft("order_shipped", "pt_BR")).await;
    let c = create(app, &key, &draft("welcome", "en_US")).await;

    // Newest first.
    let (s, _, page) = app.get(&api("/templates"), Some(&key)).await;
    assert_eq!(s, 200, "{page}");
    let ids: Vec<&Value> = page["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| &t["id"])
        .collect();
    assert_eq!(ids, vec![&c["id"], &b["id"], &a["id"]]);
    assert!(page["next_cursor"].is_null());
    assert!(page["data"][0]["example"].is_object());

    // Filters.
    let (_, _, en) = app.get(&api("/templates?language=en_US"), Some(&key)).await;
    let ids: Vec<&Value> = en["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| &t["id"])
        .collect();
    assert_eq!(ids, vec![&c["id"], &a["id"]]);
    let (_, _, drafts) = app
        .get(&api("/templates?status=draft&language=pt_BR"), Some(&key))
        .await;
    assert_eq!(drafts["data"].as_array().unwrap().len(), 1);
    assert_eq!(drafts["data"][0]["id"], b["id"]);
    let (_, _, approved) = app
        .get(&api("/templates?status=approved"), Some(&key))
        .await;
    assert_eq!(approved["data"], json!([]));

    // Paging, with the cursor bound to the filters.
    let (_, _, p1) = app.get(&api("/templates?limit=2"), Some(&key)).await;
    assert_eq!(p1["data"].as_array().unwrap().len(), 2);
    let cursor = p1["next_cursor"].as_str().unwrap().to_string();
    let (s, _, p2) = app
        .get(
            &api(&format!("/templates?limit=2&cursor={cursor}")),
            Some(&key),
        )
        .await;
    assert_eq!(s, 200, "{p2}");
    assert_eq!(p2["data"].as_array().unwrap().len(), 1);
    assert_eq!(p2["data"][0]["id"], a["id"]);
    assert!(p2["next_cursor"].is_null());
    let (s, h, e) = app
        .get(
            &api(&format!("/templates?limit=2&status=draft&cursor={cursor}")),
            Some(&key),
        )
        .await;
    assert_error(s, &h, &e, 400, "validation_failed");
    assert_eq!(field_names(&e), vec!["cursor"]);
    let (_, _, en1) = app
        .get(&api("/templates?limit=1&language=en_US"), Some(&key))
        .await;
    let c1 = en1["next_cursor"].as_str().unwrap().to_string();
    let (_, _, en2) = app
        .get(
            &api(&format!("/templates?limit=1&language=en_US&cursor={c1}")),
            Some(&key),
        )
        .await;
    assert_eq!(en2["data"][0]["id"], a["id"]);

    // Strict query parameters.
    for (q, field) in [
        ("status=APPROVED", "status"),
        ("status=live", "status"),
        ("language=english", "language"),
        ("language=", "language"),
        ("lang=en", "lang"),
        ("limit=0", "limit"),
        ("status=draft&status=pending", "status"),
    ] {
        let (s, h, e) = app.get(&api(&format!("/templates?{q}")), Some(&key)).await;
        assert_error(s, &h, &e, 400, "validation_failed");
        assert_eq!(field_names(&e), vec![field], "{q}");
    }

    // One template.
    let (s, _, one) = app
        .get(
            &api(&format!("/templates/{}", a["id"].as_str().unwrap())),
            Some(&key),
        )
        .await;
    assert_eq!(s, 200, "{one}");
    assert_eq!(one, a);
    for id in [uuid::Uuid::now_v7().to_string(), "not-a-uuid".to_string()] {
        let (s, h, e) = app.get(&api(&format!("/templates/{id}")), Some(&key)).await;
        assert_error(s, &h, &e, 404, "not_found");
    }

    // Another organisation's template is not found, nor listed.
    let (other, other_key) = app.other_org("Other", Preset::FullAccess).await;
    app.admin(&[
        "number",
        "add",
        "--org",
        &other,
        "--phone-number-id",
        "100000000000009",
        "--display-phone-number",
        "+14155550109",
        "--waba-id",
        "200000000000009",
        "--access-token",
        "other-token",
    ])
    .await
    .unwrap();
    let foreign = create(app, &other_key, &draft("order_shipped", "en_US")).await;
    assert_eq!(foreign["waba_id"], "200000000000009");
    let (s, h, e) = app
        .get(
            &api(&format!("/templates/{}", foreign["id"].as_str().unwrap())),
            Some(&key),
        )
        .await;
    assert_error(s, &h, &e, 404, "not_found");
    let (_, _, mine) = app.get(&api("/templates"), Some(&key)).await;
    assert_eq!(mine["data"].as_array().unwrap().len(), 3);

    // Permissions: read-only keys list but cannot create or submit.
    let (_, ro) = app.owner_key("read_only").await;
    let (s, _, _) = app.get(&api("/templates"), Some(&ro)).await;
    assert_eq!(s, 200);
    let (s, h, e) = post(app, &api("/templates"), &ro, Some(&draft("x", "en"))).await;
    assert_error(s, &h, &e, 403, "permission_denied");
    assert_eq!(e["details"]["permission"], "templates.create");
    let (s, h, e) = post(
        app,
        &api(&format!("/templates/{}/submit", a["id"].as_str().unwrap())),
        &ro,
        None,
    )
    .await;
    assert_error(s, &h, &e, 403, "permission_denied");
    assert_eq!(e["details"]["permission"], "templates.submit");
}

async fn validation_errors_are_reported_at_once((app, _sim): (&TestApp, &SimHandle)) {
    let (_, key) = app.owner_key("full_access").await;
    let bad = json!({
        "name": "Order Shipped",
        "language": "english",
        "category": "promo",
        "components": [
            {"type": "HEADER", "format": "TEXT", "text": "x".repeat(61)},
            {"type": "BODY", "text": "{{1}} is here and {{3}}"},
            {"type": "FOOTER", "text": "Call {{1}} now"},
            {"type": "BUTTONS", "buttons": [
                {"type": "QUICK_REPLY", "text": "A"},
                {"type": "URL", "text": "Go", "url": "https://example.com/{{1}}"},
                {"type": "QUICK_REPLY", "text": "B"},
                {"type": "COPY_CODE", "example": "x".repeat(21)}
            ]}
        ]
    });
    let (s, h, e) = post(app, &api("/templates"), &key, Some(&bad)).await;
    assert_error(s, &h, &e, 400, "validation_failed");
    let fields = field_names(&e);
    for want in [
        "name",
        "language",
        "category",
        "components[0].text",
        "components[1].text",
        "components[1].example.body_text",
        "components[2].text",
        "components[3].buttons",
        "components[3].buttons[1].example",
        "components[3].buttons[3].example",
    ] {
        assert!(
            fields.contains(&want.to_string()),
            "{want} not in {fields:?}"
        );
    }
    assert!(e["details"]["fields"][0]["message"].is_string());

    // Structure errors.
    for (body, field) in [
        (
            json!({"name": "a", "language": "en", "category": "utility", "components": []}),
            "components",
        ),
        (
            json!({"name": "a", "language": "en", "category": "utility", "components": [{"type": "FOOTER", "text": "x"}]}),
            "components",
        ),
        (
            json!({"name": "a", "language": "en", "category": "utility", "components": [{"type": "BODY", "text": "Hi {{1}} there"}]}),
            "components[0].example.body_text",
        ),
        (
            json!({"name": "a", "language": "en", "category": "utility", "components": [{"type": "HEADER", "format": "IMAGE"}, {"type": "BODY", "text": "Hi"}]}),
            "components[0].example.header_handle",
        ),
        (
            json!({"name": "a", "language": "en", "category": "utility", "components": [{"type": "BODY", "text": "x".repeat(1025)}]}),
            "components[0].text",
        ),
        (
            json!({"name": "a", "language": "en", "category": "utility", "components": {"type": "BODY"}}),
            "components",
        ),
    ] {
        let (s, h, e) = post(app, &api("/templates"), &key, Some(&body)).await;
        assert_error(s, &h, &e, 400, "validation_failed");
        assert_eq!(field_names(&e), vec![field], "{body}");
    }
    // Body shape: missing fields, unknown fields, wrong types.
    let (s, h, e) = post(
        app,
        &api("/templates"),
        &key,
        Some(&json!({"name": "a", "language": "en", "components": []})),
    )
    .await;
    assert_error(s, &h, &e, 400, "validation_failed");
    let (s, h, e) = post(
        app,
        &api("/templates"),
        &key,
        Some(
            &json!({"name": "a", "language": "en", "category": "utility",
        "components": [{"type": "BODY", "text": "Hi"}], "status": "approved"}),
        ),
    )
    .await;
    assert_error(s, &h, &e, 400, "validation_failed");
    let (s, h, e) = post(
        app,
        &api("/templates"),
        &key,
        Some(&json!({"name": 5, "language": "en", "category": "utility", "components": []})),
    )
    .await;
    assert_error(s, &h, &e, 400, "validation_failed");
    // Every problem at once: the wrong type and the draft rule on the other fields.
    assert_eq!(field_names(&e), vec!["name", "components"]);
    // A missing field is named, not `body`; the other fields' problems come with it.
    let (s, h, e) = post(app, &api("/templates"), &key, Some(&json!({}))).await;
    assert_error(s, &h, &e, 400, "validation_failed");
    assert_eq!(
        field_names(&e),
        vec!["name", "language", "category", "components"]
    );
    let (s, h, e) = post(
        app,
        &api("/templates"),
        &key,
        Some(&json!({"name": "Bad Name", "category": "utility",
                     "components": [{"type": "BODY"}], "extra": 1})),
    )
    .await;
    assert_error(s, &h, &e, 400, "validation_failed");
    let names = field_names(&e);
    for want in ["language", "name", "components[0].text", "extra"] {
        assert!(names.contains(&want.to_string()), "{want} not in {names:?}");
    }

    // waba_id: unknown, and required once the numbers span two WABAs.
    let ok = json!({"name": "a", "language": "en", "category": "utility", "components": [{"type": "BODY", "text": "Hi"}]});
    let mut unknown = ok.clone();
    unknown["waba_id"] = json!("999");
    let (s, h, e) = post(app, &api("/templates"), &key, Some(&unknown)).await;
    assert_error(s, &h, &e, 400, "validation_failed");
    assert_eq!(field_names(&e), vec!["waba_id"]);
    app.admin(&[
        "number",
        "add",
        "--org",
        &app.org_id,
        "--phone-number-id",
        "100000000000002",
        "--display-phone-number",
        "+14155550102",
        "--waba-id",
        "200000000000002",
        "--access-token",
        "t2",
    ])
    .await
    .unwrap();
    let (s, h, e) = post(app, &api("/templates"), &key, Some(&ok)).await;
    assert_error(s, &h, &e, 400, "validation_failed");
    assert_eq!(field_names(&e), vec!["waba_id"]);
    assert!(
        e["details"]["fields"][0]["message"]
            .as_str()
            .unwrap()
            .contains("required")
    );
    let mut chosen = ok.clone();
    chosen["waba_id"] = json!("200000000000002");
    let t = create(app, &key, &chosen).await;
    assert_eq!(t["waba_id"], "200000000000002");

    // An organisation without numbers cannot hold templates yet.
    let (_, lone_key) = app.other_org("Lone", Preset::FullAccess).await;
    let (s, h, e) = post(app, &api("/templates"), &lone_key, Some(&ok)).await;
    assert_error(s, &h, &e, 409, "conflict");
    assert_eq!(e["details"]["reason"], "no_phone_number");
}

async fn duplicates_and_plan_limit((app, _sim): (&TestApp, &SimHandle)) {
    let (_, key) = app.owner_key("full_access").await;
    create(app, &key, &draft("order_shipped", "en_US")).await;
    let (s, h, e) = post(
        app,
        &api("/templates"),
        &key,
        Some(&draft("order_shipped", "en_US")),
    )
    .await;
    assert_error(s, &h, &e, 409, "conflict");
    assert_eq!(e["details"]["reason"], "template_exists");
    assert_eq!(e["details"]["name"], "order_shipped");
    assert_eq!(e["details"]["language"], "en_US");
    // Same name in another language is another template.
    create(app, &key, &draft("order_shipped", "de")).await;

    app.admin(&[
        "org",
        "update",
        "--org",
        &app.org_id,
        "--limit",
        "templates=3",
    ])
    .await
    .unwrap();
    create(app, &key, &draft("third", "en")).await;
    let (s, h, e) = post(app, &api("/templates"), &key, Some(&draft("fourth", "en"))).await;
    assert_error(s, &h, &e, 402, "plan_limit_reached");
    assert_eq!(e["details"]["entitlement"], "templates");
    assert_eq!(e["details"]["limit"], 3);
    assert_eq!(e["details"]["used"], 3);
    let (_, _, all) = app.get(&api("/templates"), Some(&key)).await;
    assert_eq!(all["data"].as_array().unwrap().len(), 3);
}

mod review;
use review::*;

tern_store::both_backends! { Simulated;
    create_list_get_with_filters_and_paging,
    validation_errors_are_reported_at_once,
    duplicates_and_plan_limit,
    submit_then_review_approves_or_rejects,
    network_errors_on_submit,
    sync_from_the_network_through_the_admin_command,
}
