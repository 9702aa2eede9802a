//! Timelines of messages that went through the network (the simulator), on SQLite and
//! PostgreSQL: retried twice then sent, reported out of order and read, with its
//! `message.status` event failing once at a receiver then delivered; an idempotent replay;
//! a campaign message; a media message's upload.
//!
//! The simulator is the network for sends and uploads but has no callback: the tests post
//! the network's status reports themselves (signed), in the order they choose.

use super::{API, kinds, walk};
use crate::common::{APP_SECRET, Backend, TestApp, send};
use crate::media::fixture::{FileServer, jpeg};
use crate::network_webhook::{envelope, messages_change, status, text_message};
use serde_json::{Value, json};
use std::time::Duration;
use tern_domain::auth::Preset;
use tern_domain::events::RetrySchedule;
use tern_simulator::{ForcedAction, NumberSpec, SimHandle, TemplateSeed};

const PN: &str = "555000444";
const CUSTOMER: &str = "447700900444";

/// Tern (passes run by `settle`) with the simulator as its network, a receiver for event
/// webhooks whose retries are due at once, the owner's key, and a customer who wrote in.
pub(super) struct Net {
    app: TestApp,
    sim: SimHandle,
    files: FileServer,
    key_id: String,
    key: String,
}

impl tern_store::testkit::Fixture for Net {
    type Arg<'a> = &'a Net;

    async fn start(backend: Backend) -> Net {
        let files = FileServer::start().await;
        let mut args = tern_simulator::SimArgs::local(APP_SECRET);
        // The customer writes to Tern directly (not through the simulator).
        args.no_window = true;
        let sim = tern_simulator::start(args).await.unwrap();
        let ca = files.ca_file.path().to_path_buf();
        let app = TestApp::builder(backend)
            .graph(&sim.base_url())
            .configure(move |c| {
                c.extra_ca_file = Some(ca);
                c.allow_networks = vec!["127.0.0.1/32".parse().unwrap()];
                c.webhook_retry_schedule = RetrySchedule::parse("0,0").unwrap();
            })
            .start()
            .await;
        sim.register_number(NumberSpec {
            id: PN.into(),
            display_phone_number: "+14155550444".into(),
            waba_id: "waba1".into(),
            access_token: "token".into(),
            throughput_mps: None,
            verified_name: None,
        })
        .unwrap();
        app.add_number(&app.org_id, PN, "+14155550444").await;
        let (key_id, key) = app.owner_key("full_access").await;
        let net = Net {
            app,
            sim,
            files,
            key_id,
            key,
        };
        let now = tern_domain::time::now_ms() / 1000;
        net.network(
            vec![text_message("wamid.HELLO", CUSTOMER, now, "Hello!")],
            vec![],
        )
        .await;
        net
    }

    fn arg(&self) -> &Net {
        self
    }

    async fn stop(self) {
        self.sim.shutdown().await;
        self.files.stop();
        self.app.stop().await;
    }
}

impl Net {
    /// A signed notification of the network (messages, statuses), then every pass.
    async fn network(&self, messages: Vec<Value>, statuses: Vec<Value>) {
        let contacts = vec![json!({"wa_id": CUSTOMER, "profile": {"name": "Ada"}})];
        let body = serde_json::to_vec(&envelope(vec![messages_change(
            PN, contacts, messages, statuses,
        )]))
        .unwrap();
        assert_eq!(self.app.post_network(&body).await.0, 200);
        self.app.settle().await;
    }

    /// `POST /messages` to the customer: (status, the request's id, body).
    async fn post_message(&self, idem: &str, body: Value) -> (u16, String, Value) {
        let mut body = body;
        body["to"] = json!(format!("+{CUSTOMER}"));
        let (s, h, b) = send(
            self.app
                .http
                .post(self.app.url(&format!("{API}/messages")))
                .bearer_auth(&self.key)
                .header("Idempotency-Key", idem)
                .json(&body),
        )
        .await;
        let rid = h["x-request-id"].to_str().unwrap().to_string();
        (s, rid, b)
    }

    async fn message(&self, id: &str) -> Value {
        let (s, _, m) = self
            .app
            .get(&format!("{API}/messages/{id}"), Some(&self.key))
            .await;
        assert_eq!(s, 200, "{m}");
        m
    }

    /// Runs the passes until message `id` has left `accepted`/`sending` (retries come due
    /// after their backoff); bounded.
    async fn until_sent(&self, id: &str) -> Value {
        let deadline = std::time::Instant::now() + Duration::from_secs(60);
        loop {
            self.app.settle().await;
            let m = self.message(id).await;
            if !matches!(m["status"].as_str(), Some("accepted" | "sending")) {
                return m;
            }
            assert!(std::time::Instant::now() < deadline, "not sent: {m}");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    async fn timeline(&self, id: &str) -> Vec<Value> {
        walk(&self.app, &self.key, id.parse().unwrap(), 100).await
    }
}

fn graph_error(code: i64) -> ForcedAction {
    ForcedAction::Error {
        code,
        subcode: None,
        http_status: None,
        title: None,
        details: None,
    }
}

/// The entries of `kind`.
fn of<'a>(all: &'a [Value], kind: &str) -> Vec<&'a Value> {
    all.iter().filter(|e| e["kind"] == kind).collect()
}

async fn retried_reported_read_and_notified(n: &Net) {
    // A receiver of message.status that answers 500 once, then 204.
    let hook = n
        .files
        .url(&format!("/flaky/{}/1", uuid::Uuid::new_v4().simple()));
    let (s, _, sub) = send(
        n.app
            .http
            .post(n.app.url(&format!("{API}/webhook-subscriptions")))
            .bearer_auth(&n.key)
            .json(&json!({"url": hook, "events": ["message.status"]})),
    )
    .await;
    assert_eq!(s, 201, "{sub}");
    // The network refuses the first two sends with retryable errors.
    n.sim.force(PN, graph_error(130429), 1).unwrap();
    n.sim.force(PN, graph_error(131000), 1).unwrap();
    let (s, rid, m) = n
        .post_message(
            "tl-story",
            json!({"type": "text", "text": {"body": "Your order shipped."}}),
        )
        .await;
    assert_eq!(s, 202, "{m}");
    let id = m["id"].as_str().unwrap().to_string();
    let sent = n.until_sent(&id).await;
    assert_eq!(sent["status"], "sent", "{sent}");
    let wamid = sent["wamid"].as_str().unwrap().to_string();
    // The network reports: sent, read before delivered, then delivered again.
    let t = tern_domain::time::now_ms() / 1000;
    for (st, ts) in [
        ("sent", t + 1),
        ("read", t + 3),
        ("delivered", t + 2),
        ("delivered", t + 2),
    ] {
        n.network(vec![], vec![status(&wamid, st, ts, None)]).await;
    }
    assert_eq!(n.message(&id).await["status"], "read");

    let all = n.timeline(&id).await;
    let dump = serde_json::to_string_pretty(&all).unwrap();
    // The whole story, in order: each event right after the change that caused it, its
    // attempts next; the network's late `delivered` reaches no new step (no event).
    assert_eq!(
        kinds(&all),
        [
            "accepted",
            "dispatch_attempt",
            "dispatch_attempt",
            "dispatch_attempt",
            "event",
            "webhook_attempt",
            "webhook_attempt",
            "status",
            "status",
            "event",
            "webhook_attempt",
            "status",
            "status",
        ],
        "{dump}"
    );
    // Accepted: the POST's request id, the key and the Idempotency-Key.
    let a = &all[0];
    assert_eq!(
        (
            a["kind"].as_str(),
            a["request_id"].as_str(),
            a["key_id"].as_str(),
            a["key_name"].as_str(),
            a["idempotency_key"].as_str()
        ),
        (
            Some("accepted"),
            Some(rid.as_str()),
            Some(n.key_id.as_str()),
            Some("test"),
            Some("tl-story")
        ),
        "{dump}"
    );
    // Three claims: two refused for now (the network's answer, when the next is due), sent.
    let attempts = of(&all, "dispatch_attempt");
    let brief: Vec<(i64, &str, Option<i64>, Option<&str>)> = attempts
        .iter()
        .map(|e| {
            (
                e["attempt"].as_i64().unwrap(),
                e["outcome"].as_str().unwrap(),
                e["http_status"].as_i64(),
                e["error_code"].as_str(),
            )
        })
        .collect();
    assert_eq!(
        brief,
        [
            (1, "retry", Some(400), Some("130429")),
            (2, "retry", Some(500), Some("131000")),
            (3, "sent", Some(200), None),
        ],
        "{dump}"
    );
    for e in &attempts[..2] {
        assert!(
            e["next_attempt_at"].as_str().unwrap() > e["at"].as_str().unwrap(),
            "{e}"
        );
        assert!(
            e["error_message"].is_string() && e["latency_ms"].is_i64(),
            "{e}"
        );
    }
    assert!(attempts[2]["next_attempt_at"].is_null() && attempts[2]["latency_ms"].is_i64());
    // Every report, applied or not, and why.
    let reports: Vec<(&str, bool, Option<&str>)> = of(&all, "status")
        .iter()
        .map(|e| {
            (
                e["status"].as_str().unwrap(),
                e["applied"].as_bool().unwrap(),
                e["reason"].as_str(),
            )
        })
        .collect();
    assert_eq!(
        reports,
        [
            ("sent", false, Some("duplicate")),
            ("read", true, None),
            ("delivered", true, None),
            ("delivered", false, Some("after_final")),
        ],
        "{dump}"
    );
    // An event per status reached, each followed by its attempts: the first failed once
    // (500, retried at once), then succeeded.
    let events = of(&all, "event");
    assert!(
        events.iter().all(|e| e["event_type"] == "message.status"),
        "{dump}"
    );
    let hooks = of(&all, "webhook_attempt");
    let brief: Vec<(i64, &str, Option<i64>, bool)> = hooks
        .iter()
        .map(|e| {
            (
                e["attempt"].as_i64().unwrap(),
                e["outcome"].as_str().unwrap(),
                e["response_status"].as_i64(),
                e["next_attempt_at"].is_string(),
            )
        })
        .collect();
    assert_eq!(
        brief[..2],
        [
            (1, "failed", Some(500), true),
            (2, "succeeded", Some(204), false)
        ],
        "{dump}"
    );
    assert_eq!(hooks.len(), events.len() + 1, "{dump}");
    for h in &hooks {
        assert_eq!(
            (h["host"].as_str(), h["subscription_id"].as_str()),
            (Some("127.0.0.1"), sub["id"].as_str()),
            "{h}"
        );
        assert!(events.iter().any(|e| e["event_id"] == h["event_id"]), "{h}");
    }
    assert_eq!(hooks[0]["event_id"], hooks[1]["event_id"]);
    // In order: `at` never goes back, and each attempt comes after its event.
    let ats: Vec<&str> = all.iter().map(|e| e["at"].as_str().unwrap()).collect();
    assert!(ats.windows(2).all(|w| w[0] <= w[1]), "{ats:?}");
    for h in &hooks {
        let at = |x: &Value| all.iter().position(|e| e == x).unwrap();
        let ev = events
            .iter()
            .find(|e| e["event_id"] == h["event_id"])
            .unwrap();
        assert!(at(ev) < at(h), "{dump}");
    }
}

async fn an_idempotent_replay(n: &Net) {
    let body = json!({"type": "text", "text": {"body": "Once."}});
    let (s, first, m) = n.post_message("tl-replay", body.clone()).await;
    assert_eq!(s, 202, "{m}");
    let (s, second, again) = n.post_message("tl-replay", body).await;
    assert_eq!((s, &again["id"]), (200, &m["id"]), "{again}");
    assert_ne!(first, second);
    let all = n.timeline(m["id"].as_str().unwrap()).await;
    assert_eq!(kinds(&all), ["accepted", "replayed"], "{all:?}");
    assert_eq!(all[0]["request_id"].as_str(), Some(first.as_str()));
    assert_eq!(all[1]["request_id"].as_str(), Some(second.as_str()));
    // Nothing was sent twice.
    n.until_sent(m["id"].as_str().unwrap()).await;
    let all = n.timeline(m["id"].as_str().unwrap()).await;
    assert_eq!(of(&all, "dispatch_attempt").len(), 1, "{all:?}");
}

async fn a_campaign_message(n: &Net) {
    let components =
        json!([{"type": "BODY", "text": "Hello {{1}}.", "example": {"body_text": [["Ada"]]}}]);
    n.sim.seed_template(TemplateSeed {
        waba_id: "waba1".into(),
        name: "promo".into(),
        language: "en_US".into(),
        category: "marketing".into(),
        status: "approved".into(),
        parameter_format: None,
        components: components.as_array().unwrap().clone(),
    });
    crate::messages::insert_template(&n.app, "promo", components, "marketing").await;
    crate::campaigns::contact(
        &n.app,
        &n.key,
        json!({"phone": "+447700900445", "tags": ["tl"]}),
    )
    .await;
    let c = crate::campaigns::create(
        &n.app,
        &n.key,
        json!({"name": "Spring", "template": {"name": "promo", "language": "en_US",
               "variables": [{"field": "name", "fallback": "friend"}]},
               "audience": {"tags": ["tl"]}}),
    )
    .await;
    let cid = c["id"].as_str().unwrap();
    let (s, l) = crate::campaigns::act(&n.app, &n.key, cid, "launch", None).await;
    assert_eq!(s, 200, "{l}");
    n.app.settle().await;
    let (s, _, page) = n
        .app
        .get(&format!("{API}/campaigns/{cid}/recipients"), Some(&n.key))
        .await;
    assert_eq!(s, 200, "{page}");
    let id = page["data"][0]["message_id"].as_str().unwrap().to_string();
    n.until_sent(&id).await;
    let all = n.timeline(&id).await;
    assert_eq!(kinds(&all), ["campaign", "dispatch_attempt"], "{all:?}");
    assert_eq!(all[0]["campaign_id"].as_str(), Some(cid));
    assert_eq!(all[1]["outcome"], "sent");
}

async fn a_media_upload(n: &Net) {
    let (s, _, up) =
        crate::media::upload(&n.app, &n.key, jpeg(20_000), Some("image/jpeg"), "a.jpg").await;
    assert_eq!(s, 201, "{up}");
    let media_id = up["media_id"].as_str().unwrap();
    let (s, _, m) = n
        .post_message(
            "tl-media",
            json!({"type": "image", "image": {"media_id": media_id}}),
        )
        .await;
    assert_eq!(s, 202, "{m}");
    let id = m["id"].as_str().unwrap().to_string();
    assert_eq!(n.until_sent(&id).await["status"], "sent");
    let all = n.timeline(&id).await;
    assert_eq!(
        kinds(&all),
        ["accepted", "media_upload", "dispatch_attempt"],
        "{all:?}"
    );
    let u = &all[1];
    assert_eq!(
        (u["media_id"].as_str(), u["outcome"].as_str()),
        (Some(media_id), Some("uploaded")),
        "{u}"
    );
    // The network's id of the upload is the one the send used.
    let network_id = u["network_media_id"].as_str().unwrap();
    let sends: Vec<_> = n
        .sim
        .requests()
        .into_iter()
        .filter(|r| r.method == "POST" && r.path.ends_with("/messages"))
        .collect();
    assert_eq!(
        sends.last().unwrap().body["image"]["id"].as_str(),
        Some(network_id)
    );
}

/// The network's `pricing` of a status report (reference §3.4).
fn priced(mut s: Value, category: &str, kind: &str) -> Value {
    s["pricing"] = json!({"billable": kind == "regular", "pricing_model": "PMP",
                          "category": category, "type": kind});
    s
}

async fn the_latest_reported_pricing_is_the_messages(n: &Net) {
    let (s, _, m) = n
        .post_message(
            "tl-priced",
            json!({"type": "text", "text": {"body": "On its way."}}),
        )
        .await;
    assert_eq!(s, 202, "{m}");
    let id = m["id"].as_str().unwrap().to_string();
    let sent = n.until_sent(&id).await;
    assert!(sent["pricing"].is_null(), "no report yet: {sent}");
    let wamid = sent["wamid"].as_str().unwrap().to_string();
    let t = tern_domain::time::now_ms() / 1000;
    // One notification: sent with a price, delivered without one (the price stays).
    n.network(
        vec![],
        vec![
            priced(
                status(&wamid, "sent", t, None),
                "service",
                "free_customer_service",
            ),
            status(&wamid, "delivered", t + 1, None),
        ],
    )
    .await;
    let m = n.message(&id).await;
    assert_eq!(m["status"], "delivered");
    assert_eq!(
        m["pricing"],
        json!({"billable": false, "pricing_model": "PMP", "category": "service",
               "type": "free_customer_service"}),
        "{m}"
    );
    // A later report with another price replaces it; so does one whose status is stale
    // (the latest report's price, in the order Tern received them).
    n.network(
        vec![],
        vec![priced(
            status(&wamid, "read", t + 2, None),
            "utility",
            "regular",
        )],
    )
    .await;
    let m = n.message(&id).await;
    assert_eq!(
        (m["status"].as_str(), m["pricing"]["category"].as_str()),
        (Some("read"), Some("utility")),
        "{m}"
    );
    assert_eq!(
        (
            m["pricing"]["type"].as_str(),
            m["pricing"]["billable"].as_bool()
        ),
        (Some("regular"), Some(true))
    );
    n.network(
        vec![],
        vec![priced(
            status(&wamid, "delivered", t + 1, None),
            "marketing",
            "regular",
        )],
    )
    .await;
    let m = n.message(&id).await;
    assert_eq!(
        (m["status"].as_str(), m["pricing"]["category"].as_str()),
        (Some("read"), Some("marketing")),
        "{m}"
    );
    // Each report's price is in its timeline entry.
    let all = n.timeline(&id).await;
    let prices: Vec<Option<&str>> = of(&all, "status")
        .iter()
        .map(|e| e["pricing"]["category"].as_str())
        .collect();
    assert_eq!(
        prices,
        [Some("service"), None, Some("utility"), Some("marketing")]
    );
    // Another organisation's key does not see the message.
    let (_, other) = n.app.other_org("Other", Preset::FullAccess).await;
    let (s, _, _) = n
        .app
        .get(&format!("{API}/messages/{id}"), Some(&other))
        .await;
    assert_eq!(s, 404);
}

tern_store::both_backends! { Net;
    pricing_of_the_latest_report_is_kept => the_latest_reported_pricing_is_the_messages,
    timeline_of_a_message_retried_reported_out_of_order_read_and_notified => retried_reported_read_and_notified,
    timeline_of_an_idempotent_replay => an_idempotent_replay,
    timeline_of_a_campaign_message => a_campaign_message,
    timeline_of_a_media_message_has_its_upload => a_media_upload,
}
