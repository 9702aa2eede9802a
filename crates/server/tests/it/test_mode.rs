//! Test mode (APP.md §5), on SQLite and PostgreSQL: a test key and a live key of one
//! organisation never see each other's objects (`404` alike); a test key's messages go
//! through the real send path to the built-in test network and back through its signed
//! webhooks, and never reach `TERN_GRAPH_URL` (nor a live key's the test network: both
//! networks' request logs prove it); `POST /test/inbound` opens the window and fires
//! `message.received`; events say `"mode": "test"`; test sends count nowhere.

use crate::common::{APP_SECRET, Backend, TestApp, eventually_within, send};
use crate::media::fixture::FileServer;
use crate::network_webhook::{envelope, messages_change, text_message};
use serde_json::{Value, json};
use std::time::Duration;
use tern_simulator::{NumberSpec, SimHandle};

const API: &str = "/api/public/v1";
const LIVE_PN: &str = "555000777";
const LIVE_CUSTOMER: &str = "447700900777";
const TEST_CUSTOMER: &str = "14155550123";

/// Tern with its workers and test network, a live network (a simulator as
/// `TERN_GRAPH_URL`) with one live number, a receiver for event webhooks, and the owner's
/// live and test keys.
pub(crate) struct Modes {
    pub(crate) app: TestApp,
    live_sim: SimHandle,
    pub(crate) files: FileServer,
    pub(crate) live_key: String,
    pub(crate) test_key: String,
}

impl tern_store::testkit::Fixture for Modes {
    type Arg<'a> = &'a Modes;

    async fn start(backend: Backend) -> Modes {
        let files = FileServer::start().await;
        let mut args = tern_simulator::SimArgs::local(APP_SECRET);
        // The live customer writes to Tern directly (not through this simulator).
        args.no_window = true;
        let live_sim = tern_simulator::start(args).await.unwrap();
        let ca = files.ca_file.path().to_path_buf();
        let app = TestApp::builder(backend)
            .graph(&live_sim.base_url())
            .workers()
            .test_network()
            .configure(move |c| {
                c.extra_ca_file = Some(ca);
                c.allow_networks = vec!["127.0.0.1/32".parse().unwrap()];
            })
            .start()
            .await;
        live_sim
            .register_number(NumberSpec {
                id: LIVE_PN.into(),
                display_phone_number: "+14155550777".into(),
                waba_id: "waba1".into(),
                access_token: "token".into(),
                throughput_mps: None,
                verified_name: None,
            })
            .unwrap();
        app.add_number(&app.org_id, LIVE_PN, "+14155550777").await;
        let (_, live_key) = app.owner_key("full_access").await;
        let created = app
            .admin(&[
                "key",
                "create",
                "--org",
                &app.org_id,
                "--member",
                &app.owner_id,
                "--name",
                "test mode",
                "--preset",
                "full_access",
                "--mode",
                "test",
            ])
            .await
            .unwrap();
        assert_eq!(created["mode"], "test", "{created}");
        let test_key = created["key"].as_str().unwrap().to_string();
        assert!(test_key.starts_with("tern_test_"), "{test_key}");
        Modes {
            app,
            live_sim,
            files,
            live_key,
            test_key,
        }
    }

    fn arg(&self) -> &Modes {
        self
    }

    async fn stop(self) {
        self.app.stop().await;
        self.live_sim.shutdown().await;
    }
}

impl Modes {
    async fn call(&self, method: &str, path: &str, key: &str, body: Option<Value>) -> (u16, Value) {
        let url = self.app.url(&format!("{API}{path}"));
        let mut req = match method {
            "POST" => self
                .app
                .http
                .post(url)
                .header("Idempotency-Key", uuid::Uuid::new_v4().to_string()),
            _ => self.app.http.get(url),
        }
        .bearer_auth(key);
        if let Some(b) = body {
            req = req.json(&b);
        }
        let (s, _, b) = send(req).await;
        (s, b)
    }

    /// Polls `GET path` with `key` until `done` holds for the answer (bounded: 20 s).
    pub(crate) async fn until(
        &self,
        path: &str,
        key: &str,
        what: &str,
        done: impl Fn(&Value) -> bool,
    ) -> Value {
        eventually_within(Duration::from_secs(20), what, || async {
            let (s, b) = self.call("GET", path, key, None).await;
            (s == 200 && done(&b)).then_some(b)
        })
        .await
    }

    fn test_network(&self) -> &SimHandle {
        self.app.test_network.as_ref().unwrap().simulator()
    }
}

async fn test_and_live_never_meet(m: &Modes) {
    let (live, test) = (m.live_key.as_str(), m.test_key.as_str());
    // Each key sees its own mode's number only.
    let (_, numbers) = m.call("GET", "/phone-numbers", test, None).await;
    let test_numbers: Vec<&str> = numbers["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["id"].as_str().unwrap())
        .collect();
    assert_eq!(test_numbers.len(), 1, "{numbers}");
    let test_pn = test_numbers[0].to_string();
    assert_ne!(test_pn, LIVE_PN);
    let (_, numbers) = m.call("GET", "/phone-numbers", live, None).await;
    assert_eq!(numbers["data"][0]["id"], LIVE_PN, "{numbers}");
    assert_eq!(numbers["data"].as_array().unwrap().len(), 1, "{numbers}");

    // POST /test/inbound: test keys only; every problem of the body named.
    let hi = json!({"from": TEST_CUSTOMER, "type": "text", "text": {"body": "Hi"}, "profile_name": "Ada"});
    let (s, b) = m
        .call("POST", "/test/inbound", live, Some(hi.clone()))
        .await;
    assert_eq!(s, 404, "{b}");
    let (s, b) = m
        .call(
            "POST",
            "/test/inbound",
            test,
            Some(json!({"from": "+1 415", "type": "text"})),
        )
        .await;
    assert_eq!(s, 400, "{b}");
    let fields: Vec<&str> = b["details"]["fields"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["field"].as_str().unwrap())
        .collect();
    assert_eq!(fields, ["from", "text"], "{b}");

    // The test key's endpoint hears the test space's events.
    let (s, b) = m
        .call(
            "POST",
            "/webhook-subscriptions",
            test,
            Some(json!({"url": m.files.url("/hook/204"), "events": ["message.received", "message.status"]})),
        )
        .await;
    assert_eq!(s, 201, "{b}");

    let (s, b) = m.call("POST", "/test/inbound", test, Some(hi)).await;
    assert_eq!(s, 202, "{b}");
    assert!(b["wamid"].as_str().unwrap().starts_with("wamid."), "{b}");
    // The customer's message arrived through the test network's webhook: the window opens.
    m.until(
        "/conversations",
        test,
        "the test conversation's open window",
        |b| b["data"][0]["window_state"] == "open",
    )
    .await;
    let (s, sent) = m
        .call(
            "POST",
            "/messages",
            test,
            Some(json!({"to": format!("+{TEST_CUSTOMER}"), "type": "text", "text": {"body": "Hello from test mode"}})),
        )
        .await;
    assert_eq!(s, 202, "{sent}");
    let id = sent["id"].as_str().unwrap().to_string();
    let read = m
        .until(
            &format!("/messages/{id}"),
            test,
            "the test message read",
            |b| b["status"] == "read",
        )
        .await;
    assert_eq!(read["phone_number_id"], test_pn.as_str(), "{read}");

    // A live customer writes in; the live key answers through the configured network.
    let now = tern_domain::time::now_ms() / 1000;
    let inbound = envelope(vec![messages_change(
        LIVE_PN,
        vec![json!({"wa_id": LIVE_CUSTOMER, "profile": {"name": "Bo"}})],
        vec![text_message("wamid.LIVE1", LIVE_CUSTOMER, now, "Hello")],
        vec![],
    )]);
    assert_eq!(
        m.app
            .post_network(&serde_json::to_vec(&inbound).unwrap())
            .await
            .0,
        200
    );
    m.until(
        "/conversations",
        live,
        "the live conversation's open window",
        |b| b["data"][0]["window_state"] == "open",
    )
    .await;
    let (s, live_sent) = m
        .call(
            "POST",
            "/messages",
            live,
            Some(json!({"to": format!("+{LIVE_CUSTOMER}"), "type": "text", "text": {"body": "Hello live"}})),
        )
        .await;
    assert_eq!(s, 202, "{live_sent}");
    let live_id = live_sent["id"].as_str().unwrap().to_string();
    m.until(
        &format!("/messages/{live_id}"),
        live,
        "the live message sent",
        |b| b["status"] == "sent",
    )
    .await;

    // Neither key reaches the other mode's objects: 404 alike, and lists without them.
    for (key, other_message) in [(live, &id), (test, &live_id)] {
        for path in [
            format!("/messages/{other_message}"),
            format!("/messages/{other_message}/timeline"),
        ] {
            let (s, b) = m.call("GET", &path, key, None).await;
            assert_eq!(s, 404, "{path}: {b}");
        }
    }
    for (key, own, other) in [
        (live, LIVE_CUSTOMER, TEST_CUSTOMER),
        (test, TEST_CUSTOMER, LIVE_CUSTOMER),
    ] {
        let (_, b) = m.call("GET", "/contacts", key, None).await;
        let phones: Vec<&str> = b["data"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|c| c["phone"].as_str())
            .collect();
        assert!(phones.iter().any(|p| p.ends_with(own)), "{b}");
        assert!(!phones.iter().any(|p| p.ends_with(other)), "{b}");
        let other_id = contact_id(m, if key == live { test } else { live }, other).await;
        let (s, b) = m
            .call("GET", &format!("/contacts/{other_id}"), key, None)
            .await;
        assert_eq!(s, 404, "{b}");
        let (_, b) = m.call("GET", "/conversations", key, None).await;
        assert_eq!(b["data"].as_array().unwrap().len(), 1, "{b}");
    }

    // Templates, media, endpoints and idempotency keys of one mode are not the other's.
    let (s, tpl) = m
        .call(
            "POST",
            "/templates",
            test,
            Some(
                json!({"name": "test_only", "language": "en_US", "category": "utility",
                "components": [{"type": "BODY", "text": "Hello"}]}),
            ),
        )
        .await;
    assert_eq!(s, 201, "{tpl}");
    let (s, _, file) = crate::media::upload(
        &m.app,
        test,
        crate::media::fixture::jpeg(2000),
        Some("image/jpeg"),
        "a.jpg",
    )
    .await;
    assert_eq!(s, 201, "{file}");
    let (_, subs) = m.call("GET", "/webhook-subscriptions", test, None).await;
    for path in [
        format!("/templates/{}", tpl["id"].as_str().unwrap()),
        format!("/media/{}", file["media_id"].as_str().unwrap()),
        format!(
            "/webhook-subscriptions/{}/deliveries",
            subs["data"][0]["id"].as_str().unwrap()
        ),
    ] {
        let (s, b) = m.call("GET", &path, test, None).await;
        assert_eq!(s, 200, "{path}: {b}");
        let (s, b) = m.call("GET", &path, live, None).await;
        assert_eq!(s, 404, "{path}: {b}");
    }
    let (_, templates) = m.call("GET", "/templates", live, None).await;
    assert!(!templates.to_string().contains("test_only"), "{templates}");
    // The same Idempotency-Key in both modes makes two messages, not a replay.
    let mut ids = Vec::new();
    for (key, to) in [(test, TEST_CUSTOMER), (live, LIVE_CUSTOMER)] {
        let (s, _, b) = send(
            m.app
                .http
                .post(m.app.url(&format!("{API}/messages")))
                .bearer_auth(key)
                .header("Idempotency-Key", "same-key-both-modes")
                .json(&json!({"to": format!("+{to}"), "type": "text", "text": {"body": "again"}})),
        )
        .await;
        assert_eq!(s, 202, "{b}");
        ids.push(b["id"].as_str().unwrap().to_string());
    }
    assert_ne!(ids[0], ids[1]);

    // Each network saw its own number only.
    let live_paths: Vec<String> = m
        .live_sim
        .requests()
        .iter()
        .map(|r| r.path.clone())
        .collect();
    assert!(
        live_paths.iter().any(|p| p.contains(LIVE_PN)),
        "{live_paths:?}"
    );
    assert!(
        !live_paths.iter().any(|p| p.contains(&test_pn)),
        "{live_paths:?}"
    );
    let test_paths: Vec<String> = m
        .test_network()
        .requests()
        .iter()
        .map(|r| r.path.clone())
        .collect();
    assert!(
        test_paths
            .iter()
            .any(|p| p.contains(&test_pn) && p.ends_with("/messages")),
        "{test_paths:?}"
    );
    assert!(
        !test_paths.iter().any(|p| p.contains(LIVE_PN)),
        "{test_paths:?}"
    );

    // The endpoint heard the test space's events, each saying so.
    let hooks = || -> Vec<Value> {
        m.files
            .hooks
            .lock()
            .unwrap()
            .iter()
            .map(|(_, b)| serde_json::from_slice(b).unwrap())
            .collect()
    };
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    loop {
        let bodies = hooks();
        let read = bodies
            .iter()
            .any(|b| b["type"] == "message.status" && b.to_string().contains("\"read\""));
        let received = bodies.iter().any(|b| b["type"] == "message.received");
        if read && received {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the test events did not all come: {bodies:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let bodies = hooks();
    assert!(bodies.iter().all(|b| b["mode"] == "test"), "{bodies:?}");

    // Test sends count nowhere: the two live sends count, the two test sends do not.
    let live_org = m.app.db.get_org(m.app.org_uuid()).await.unwrap().unwrap();
    let space = m.app.db.get_test_space(live_org.id).await.unwrap().unwrap();
    let (start, _) = tern_domain::plan::billing_period(
        live_org.billing_period_start,
        tern_domain::time::now_ms(),
    );
    assert_eq!(
        m.app
            .db
            .messages_sent_in_period(live_org.id, start)
            .await
            .unwrap(),
        2
    );
    assert_eq!(
        m.app
            .db
            .messages_sent_in_period(space.id, start)
            .await
            .unwrap(),
        0
    );
    assert_eq!(
        m.app
            .db
            .usage_in_period(space.id, "api_requests", start)
            .await
            .unwrap(),
        0
    );
    assert_eq!(space.live_org_id, Some(live_org.id));
}

/// A template of the test space, submitted; its status once the test network decided.
async fn reviewed_template(m: &Modes, name: &str) -> Value {
    let (s, t) = m
        .call(
            "POST",
            "/templates",
            &m.test_key,
            Some(
                json!({"name": name, "language": "en_US", "category": "utility",
                "components": [{"type": "BODY", "text": "Your order is ready."}]}),
            ),
        )
        .await;
    assert_eq!(s, 201, "{t}");
    let id = t["id"].as_str().unwrap().to_string();
    let (s, b) = m
        .call(
            "POST",
            &format!("/templates/{id}/submit"),
            &m.test_key,
            None,
        )
        .await;
    assert!(s == 200 || s == 202, "{s}: {b}");
    m.until(
        &format!("/templates/{id}"),
        &m.test_key,
        "the template's review",
        |t| t["status"] == "approved" || t["status"] == "rejected",
    )
    .await
}

/// Every magic recipient's outcome reaches the message, its timeline and a
/// `message.status` event of the test space; templates are reviewed by name.
async fn magic_recipients_reach_the_message_and_its_events(m: &Modes) {
    let test = m.test_key.as_str();
    let (s, b) = m
        .call(
            "POST",
            "/webhook-subscriptions",
            test,
            Some(json!({"url": m.files.url("/hook/204"), "events": ["message.status"]})),
        )
        .await;
    assert_eq!(s, 201, "{b}");
    // Templates cost money live; the live wallet could pay for one of them only.
    m.app
        .admin(&[
            "org",
            "update",
            "--org",
            &m.app.org_id,
            "--price",
            "utility=500",
            "--wallet-balance-minor",
            "500",
        ])
        .await
        .unwrap();
    let approved = reviewed_template(m, "order_ready").await;
    assert_eq!(approved["status"], "approved", "{approved}");
    let rejected = reviewed_template(m, "reject_this_one").await;
    assert_eq!(rejected["status"], "rejected", "{rejected}");
    // A campaign of the test space is not the live organisation's.
    let (s, campaign) = m
        .call(
            "POST",
            "/campaigns",
            test,
            Some(
                json!({"name": "Test run", "template": {"name": "order_ready", "language": "en_US"},
                "audience": {"all_contacts": true}}),
            ),
        )
        .await;
    assert_eq!(s, 201, "{campaign}");
    let path = format!("/campaigns/{}", campaign["id"].as_str().unwrap());
    assert_eq!(m.call("GET", &path, test, None).await.0, 200);
    assert_eq!(m.call("GET", &path, &m.live_key, None).await.0, 404);
    let (_, live_campaigns) = m.call("GET", "/campaigns", &m.live_key, None).await;
    assert_eq!(
        live_campaigns["data"].as_array().unwrap().len(),
        0,
        "{live_campaigns}"
    );

    // (recipient, final status, the network's code of its failure or refusals)
    let cases: [(&str, &str, Option<&str>); 7] = [
        ("+15550131026", "failed", Some("131026")),
        ("+15550131047", "failed", Some("131047")),
        ("+15550131049", "failed", Some("131049")),
        ("+15550131056", "read", Some("131056")),
        ("+15550130429", "read", Some("130429")),
        ("+15550000002", "delivered", None),
        ("+15550000003", "sent", None),
    ];
    let mut ids = Vec::new();
    for (to, _, _) in cases {
        let (s, b) = m
            .call(
                "POST",
                "/messages",
                test,
                Some(json!({"to": to, "type": "template",
                    "template": {"name": "order_ready", "language": "en_US"}})),
            )
            .await;
        assert_eq!(s, 202, "{to}: {b}");
        ids.push(b["id"].as_str().unwrap().to_string());
    }
    for ((to, status, code), id) in cases.iter().zip(&ids) {
        let msg = m
            .until(
                &format!("/messages/{id}"),
                test,
                &format!("{to} {status}"),
                |b| b["status"] == *status,
            )
            .await;
        let (_, timeline) = m
            .call(
                "GET",
                &format!("/messages/{id}/timeline?limit=100"),
                test,
                None,
            )
            .await;
        let entries = timeline["data"].as_array().unwrap();
        if let Some(code) = code {
            if *status == "failed" {
                assert!(msg["failure"].to_string().contains(code), "{to}: {msg}");
                assert!(
                    entries.iter().any(|e| e["kind"] == "failed"),
                    "{to}: {timeline}"
                );
            } else {
                // Refused twice by the network, then sent: both refusals are attempts.
                let refused = entries
                    .iter()
                    .filter(|e| e["kind"] == "dispatch_attempt" && e.to_string().contains(code))
                    .count();
                assert_eq!(refused, 2, "{to}: {timeline}");
            }
        }
        assert!(
            entries
                .iter()
                .any(|e| e["kind"] == "status" && e["status"] == *status)
                || *status == "sent",
            "{to}: {timeline}"
        );
    }
    // Seven template sends, none charged: the wallet is as it was.
    let live_org = m.app.db.get_org(m.app.org_uuid()).await.unwrap().unwrap();
    assert_eq!(live_org.wallet_balance_minor, 500);
    let space = m.app.db.get_test_space(live_org.id).await.unwrap().unwrap();
    assert_eq!(space.wallet_balance_minor, 0);
    // Each final status came as a test-mode event.
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    loop {
        let bodies: Vec<Value> = m
            .files
            .hooks
            .lock()
            .unwrap()
            .iter()
            .map(|(_, b)| serde_json::from_slice(b).unwrap())
            .collect();
        let missing: Vec<&String> = ids
            .iter()
            .zip(cases)
            .filter(|(id, (_, status, _))| {
                !bodies.iter().any(|b| {
                    b["type"] == "message.status"
                        && b["mode"] == "test"
                        && b.to_string().contains(id.as_str())
                        && b.to_string().contains(&format!("\"{status}\""))
                })
            })
            .map(|(id, _)| id)
            .collect();
        if missing.is_empty() {
            assert!(bodies.iter().all(|b| b["mode"] == "test"), "{bodies:?}");
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no test-mode event for {missing:?}: {bodies:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // The test space's campaign is free too: its estimate is 0 at the live price of 500.
    let (s, c) = m.call("POST", &format!("{path}/resolve"), test, None).await;
    assert_eq!(s, 200, "{c}");
    assert!(c["recipient_count"].as_i64().unwrap() > 0, "{c}");
    assert_eq!(c["estimated_cost_minor"], 0, "{c}");
}

/// A stream follows its key's mode: each key's stream gets its own mode's events only.
async fn streams_follow_their_mode(m: &Modes) {
    use crate::webhooks::stream::{Item, Sse, trigger};
    let base = &m.app.base;
    let mut test_stream = Sse::connect(base, Some(&m.test_key), "?types=webhook.test", None).await;
    let mut live_stream = Sse::connect(base, Some(&m.live_key), "?types=webhook.test", None).await;
    for sse in [&mut test_stream, &mut live_stream] {
        assert_eq!(sse.status, 200);
        sse.comment().await;
    }
    let (test_event, n) = trigger(base, &m.test_key, "webhook.test").await;
    assert_eq!(n, 1, "the test stream only");
    let (live_event, n) = trigger(base, &m.live_key, "webhook.test").await;
    assert_eq!(n, 1, "the live stream only");
    let (_, id, body, _) = test_stream.event().await;
    assert_eq!(
        (id.as_str(), body["mode"].as_str()),
        (test_event.as_str(), Some("test"))
    );
    let (_, id, body, _) = live_stream.event().await;
    assert_eq!(
        (id.as_str(), body["mode"].as_str()),
        (live_event.as_str(), Some("live"))
    );
    for sse in [&mut test_stream, &mut live_stream] {
        while let Some(item) = sse.next(Duration::from_millis(300)).await {
            assert!(matches!(item, Item::Comment(_)), "{item:?}");
        }
    }
}

/// The id of the contact with phone `wa_id` as `key` sees it.
async fn contact_id(m: &Modes, key: &str, wa_id: &str) -> String {
    let (_, b) = m.call("GET", "/contacts", key, None).await;
    b["data"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["phone"].as_str().is_some_and(|p| p.ends_with(wa_id)))
        .and_then(|c| c["id"].as_str())
        .unwrap_or_else(|| panic!("no contact {wa_id}: {b}"))
        .to_string()
}

/// A test key's read mark and block go to the test network, never to the live one; a live
/// key cannot reach the test space's message.
async fn agents_use_the_test_network(m: &Modes) {
    let (live, test) = (m.live_key.as_str(), m.test_key.as_str());
    let hi = json!({"from": TEST_CUSTOMER, "type": "text", "text": {"body": "Hi"}});
    let (s, b) = m.call("POST", "/test/inbound", test, Some(hi)).await;
    assert_eq!(s, 202, "{b}");
    let wamid = b["wamid"].as_str().unwrap().to_string();
    let conversations = m
        .until("/conversations", test, "the test conversation", |b| {
            b["data"].as_array().is_some_and(|d| !d.is_empty())
        })
        .await;
    let conversation = conversations["data"][0]["id"].as_str().unwrap().to_string();
    // The conversation may be visible a moment before its message.
    let page = m
        .until(
            &format!("/conversations/{conversation}/messages"),
            test,
            "the customer's message",
            |b| b["data"].as_array().is_some_and(|d| !d.is_empty()),
        )
        .await;
    let message = page["data"][0].clone();
    assert_eq!(message["wamid"], wamid.as_str(), "{page}");
    let id = message["id"].as_str().unwrap().to_string();
    let contact = message["contact_id"].as_str().unwrap().to_string();

    let (s, e) = m
        .call(
            "POST",
            &format!("/messages/{id}/read"),
            live,
            Some(json!({})),
        )
        .await;
    assert_eq!(s, 404, "{e}");
    let (s, read) = m
        .call(
            "POST",
            &format!("/messages/{id}/read"),
            test,
            Some(json!({"typing_indicator": true})),
        )
        .await;
    assert_eq!(s, 200, "{read}");
    assert!(read["read_at"].is_string(), "{read}");
    let marks: Vec<Value> = m
        .test_network()
        .requests()
        .into_iter()
        .map(|r| r.body)
        .filter(|b| b["status"] == "read")
        .collect();
    assert_eq!(
        marks,
        vec![
            json!({"messaging_product": "whatsapp", "status": "read", "message_id": wamid,
                    "typing_indicator": {"type": "text"}})
        ]
    );

    let (s, e) = m
        .call("POST", &format!("/contacts/{contact}/block"), live, None)
        .await;
    assert_eq!(s, 404, "{e}");
    let (s, c) = m
        .call("POST", &format!("/contacts/{contact}/block"), test, None)
        .await;
    assert_eq!(s, 200, "{c}");
    assert!(c["blocked_at"].is_string(), "{c}");
    let pn = message["phone_number_id"].as_str().unwrap();
    assert_eq!(
        m.test_network().blocked(pn),
        vec![TEST_CUSTOMER.to_string()]
    );
    // The blocked test customer cannot write in any more.
    let again = json!({"from": TEST_CUSTOMER, "type": "text", "text": {"body": "Hello?"}});
    let (s, e) = m.call("POST", "/test/inbound", test, Some(again)).await;
    assert_eq!(s, 400, "{e}");
    assert!(
        e["details"]["fields"][0]["message"]
            .as_str()
            .is_some_and(|t| t.contains("blocked")),
        "{e}"
    );
    // The live network heard nothing of it.
    assert!(
        m.live_sim
            .requests()
            .iter()
            .all(|r| r.body["status"] != "read" && !r.path.ends_with("/block_users")),
        "{:?}",
        m.live_sim.requests()
    );
}

tern_store::both_backends! { Modes;
    test_and_live_never_meet_http => test_and_live_never_meet,
    magic_recipients_reach_the_message_and_its_events_http => magic_recipients_reach_the_message_and_its_events,
    streams_follow_their_mode_http => streams_follow_their_mode,
    agents_use_the_test_network_http => agents_use_the_test_network,
}
