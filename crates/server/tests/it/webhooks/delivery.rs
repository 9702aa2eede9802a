//! Event webhooks delivered, on both backends, to a loopback HTTPS receiver by the delivery
//! workers' passes (`settle`); every delivery checked with the official Standard Webhooks
//! library.
//!
//! * every event type fires where DESIGN.md says, through the real flows (the simulator's
//!   statuses, inbound messages and edits, a template review, a consent change), once per
//!   status reached, to every subscription listing it, as the exact stored body;
//! * a failing receiver is retried on the schedule until it recovers, an exhausted delivery
//!   fails and can be replayed, `410 Gone` disables the subscription, a deleted subscription
//!   stops its deliveries;
//! * a hanging receiver holds only its own slots while another keeps receiving (the running
//!   workers: that test is about their concurrency);
//! * test sends (`webhook.test` and samples), the deliveries log, signatures after a rotation.

use super::python_verifies_all;
use crate::common::{
    APP_SECRET, Backend, TestApp, TestAppBuilder, assert_error, send, sim_delivered,
};
use crate::media::fixture::FileServer;
use axum::http::HeaderMap;
use serde_json::{Value, json};
use std::collections::{BTreeMap, HashSet};
use std::sync::atomic::Ordering;
use std::time::Duration;
use tern_domain::events::RetrySchedule;
use tern_simulator::{CustomerSpec, NumberSpec, TemplateSeed};

const API: &str = "/api/public/v1";
const SUBS: &str = "/api/public/v1/webhook-subscriptions";
const PN: &str = "555000333";

/// Polls `probe` (bounded: 30 s) until it gives `Some`.
async fn eventually<T, F, Fut>(what: &str, probe: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    crate::common::eventually_within(Duration::from_secs(30), what, probe).await
}

/// An app whose deliveries may reach the receiver (its CA trusted, loopback allowed) and are
/// retried on `schedule` (`"0,0"`: each retry due at once, so one `settle` makes them all).
pub(super) fn app_for(backend: Backend, files: &FileServer, schedule: &str) -> TestAppBuilder {
    let ca = files.ca_file.path().to_path_buf();
    let schedule = RetrySchedule::parse(schedule).unwrap();
    TestApp::builder(backend).configure(move |c| {
        c.extra_ca_file = Some(ca);
        c.allow_networks = vec!["127.0.0.1/32".parse().unwrap()];
        c.webhook_retry_schedule = schedule;
    })
}

/// A subscription of `key` to `events` at `url`: (id, secret).
pub(super) async fn subscribe(
    app: &TestApp,
    key: &str,
    url: &str,
    events: &[&str],
) -> (String, String) {
    let (s, _, b) = send(
        app.http
            .post(app.url(SUBS))
            .bearer_auth(key)
            .json(&json!({"url": url, "events": events})),
    )
    .await;
    assert_eq!(s, 201, "{b}");
    (
        b["id"].as_str().unwrap().to_string(),
        b["secret"].as_str().unwrap().to_string(),
    )
}

/// What the receiver got at `path`: headers, exact body, parsed body.
pub(super) fn received(files: &FileServer, path: &str) -> Vec<(HeaderMap, Vec<u8>, Value)> {
    files
        .hooks
        .lock()
        .unwrap()
        .iter()
        .filter(|(h, _)| h.get("x-test-path").is_some_and(|p| p == path))
        .map(|(h, b)| (h.clone(), b.clone(), serde_json::from_slice(b).unwrap()))
        .collect()
}

/// Every delivery verifies with `secret` (official library), and carries its own id.
fn assert_signed(secret: &str, got: &[(HeaderMap, Vec<u8>, Value)]) {
    let items: Vec<_> = got
        .iter()
        .map(|(h, b, _)| (secret.to_string(), h.clone(), b.clone()))
        .collect();
    assert!(python_verifies_all(&items).iter().all(|ok| *ok));
    for (h, _, v) in got {
        assert_eq!(h["webhook-id"].to_str().unwrap(), v["id"].as_str().unwrap());
        assert_eq!(h["content-type"], "application/json");
        assert_eq!(v["version"], 1);
        assert!(v["created_at"].is_string() && v["data"].is_object(), "{v}");
    }
}

pub(super) async fn new_contact(app: &TestApp, key: &str, phone: &str) -> String {
    let (s, _, c) = send(
        app.http
            .post(app.url(&format!("{API}/contacts")))
            .bearer_auth(key)
            .json(&json!({"phone": phone})),
    )
    .await;
    assert!(s == 200 || s == 201, "{c}");
    c["id"].as_str().unwrap().to_string()
}

pub(super) async fn consent(app: &TestApp, key: &str, contact: &str, status: &str) {
    let (s, _, b) = send(
        app.http
            .post(app.url(&format!("{API}/contacts/{contact}/consent")))
            .bearer_auth(key)
            .json(&json!({"status": status, "source": "web_form"})),
    )
    .await;
    assert_eq!(s, 200, "{b}");
}

async fn attempts(app: &TestApp, key: &str, sub: &str, query: &str) -> Value {
    app.get(&format!("{SUBS}/{sub}/deliveries{query}"), Some(key))
        .await
        .2
}

async fn every_event_type_fires_where_it_should(backend: Backend) {
    let files = FileServer::start().await;
    let mut args = tern_simulator::SimArgs::local(APP_SECRET);
    // `read` well after `delivered`, so each is applied by its own settle, in the network's
    // order: one settle applies its notifications concurrently (on PostgreSQL), and a `read`
    // written first leaves `delivered` no step of its own (no event).
    args.read_delay_ms = 600;
    let sim = tern_simulator::start(args).await.unwrap();
    let app = app_for(backend, &files, "0,0")
        .graph(&sim.base_url())
        .start()
        .await;
    sim.set_callback_url(Some(app.url("/webhooks/whatsapp")));
    app.add_number(&app.org_id, PN, "+14155550333").await;
    sim.register_number(NumberSpec {
        id: PN.into(),
        display_phone_number: "+14155550333".into(),
        waba_id: "waba1".into(),
        access_token: "token".into(),
        throughput_mps: None,
        verified_name: None,
    })
    .unwrap();
    let key = app.owner_key("full_access").await.1;
    let all = [
        "message.status",
        "message.received",
        "message.updated",
        "template.status",
        "contact.consent",
    ];
    let (all_id, all_secret) = subscribe(&app, &key, &files.url("/hook/204"), &all).await;
    let (_, inbound_secret) =
        subscribe(&app, &key, &files.url("/hook/200"), &["message.received"]).await;
    // Disabled subscriptions get nothing.
    let (off, _) = subscribe(&app, &key, &files.url("/hook/202"), &all).await;
    let (s, _, _) = send(
        app.http
            .patch(app.url(&format!("{SUBS}/{off}")))
            .bearer_auth(&key)
            .json(&json!({"enabled": false})),
    )
    .await;
    assert_eq!(s, 200);

    // A customer writes, is answered (sent → delivered → read), edits their message.
    let ada = sim
        .register_customer(CustomerSpec {
            wa_id: Some("447700900777".into()),
            profile_name: Some("Ada".into()),
            ..CustomerSpec::default()
        })
        .unwrap();
    let ada_phone = ada.wa_id.clone().unwrap();
    let written = sim
        .inject_inbound(json!({"phone_number_id": PN, "from": ada_phone, "type": "text", "text": {"body": "Hi!"}}))
        .unwrap();
    sim_delivered(&sim, 1).await;
    app.settle().await;
    let page = app.get(&format!("{API}/contacts"), Some(&key)).await.2;
    let contact = page["data"][0].clone();
    assert!(contact["id"].is_string(), "{page}");
    let (s, _, m) = send(
        app.http
            .post(app.url(&format!("{API}/messages")))
            .bearer_auth(&key)
            .header("Idempotency-Key", "k-events-1")
            .json(&json!({"to": {"contact_id": contact["id"]}, "type": "text", "text": {"body": "Hello Ada"}})),
    )
    .await;
    assert_eq!(s, 202, "{m}");
    let id = m["id"].as_str().unwrap().to_string();
    // Sent; the network's three statuses come back (sent, delivered, then read).
    app.settle().await;
    sim_delivered(&sim, 3).await;
    app.settle().await;
    sim_delivered(&sim, 4).await;
    app.settle().await;
    let read = app.get(&format!("{API}/messages/{id}"), Some(&key)).await.2;
    assert_eq!(read["status"], "read", "{read}");
    sim.inject_inbound(json!({"phone_number_id": PN, "from": ada_phone, "type": "edit",
        "edit": {"original_message_id": written["wamid"], "message": {"type": "text", "text": {"body": "Hi again!"}}}}))
        .unwrap();
    sim_delivered(&sim, 5).await;
    // Consent, and a template's review.
    consent(&app, &key, contact["id"].as_str().unwrap(), "opted_in").await;
    let tpl = sim.seed_template(TemplateSeed {
        waba_id: "waba1".into(),
        name: "order_update".into(),
        language: "en_US".into(),
        category: "UTILITY".into(),
        status: "PENDING".into(),
        parameter_format: None,
        components: vec![json!({"type": "BODY", "text": "Your order shipped."})],
    });
    app.admin(&["template", "sync", "--org", &app.org_id])
        .await
        .unwrap();
    sim.set_template_status(&tpl.id, "APPROVED", None).unwrap();
    sim_delivered(&sim, 6).await;
    // A draft submitted for review: draft → pending.
    let (s, _, draft) = send(
        app.http
            .post(app.url(&format!("{API}/templates")))
            .bearer_auth(&key)
            .json(
                &json!({"name": "welcome_note", "language": "en_US", "category": "utility",
                "waba_id": "waba1",
                "components": [{"type": "BODY", "text": "Welcome aboard."}]}),
            ),
    )
    .await;
    assert_eq!(s, 201, "{draft}");
    let (s, _, submitted) = send(
        app.http
            .post(app.url(&format!(
                "{API}/templates/{}/submit",
                draft["id"].as_str().unwrap()
            )))
            .bearer_auth(&key),
    )
    .await;
    assert_eq!(s, 200, "{submitted}");
    // The simulator reviews the submission: approved.
    sim_delivered(&sim, 7).await;

    app.settle().await;
    let got = received(&files, "/hook/204");
    let kinds: BTreeMap<&str, usize> = got.iter().fold(BTreeMap::new(), |mut m, (_, _, v)| {
        *m.entry(v["type"].as_str().unwrap()).or_default() += 1;
        m
    });
    assert_eq!(
        (
            kinds.get("message.status"),
            kinds.get("message.received"),
            kinds.get("message.updated"),
            kinds.get("contact.consent")
        ),
        (Some(&3), Some(&1), Some(&1), Some(&1)),
        "{kinds:?}"
    );
    assert_signed(&all_secret, &got);
    // Once per status reached; the last is the Message exactly as the API shows it now.
    let statuses: Vec<&str> = got
        .iter()
        .filter(|(_, _, v)| v["type"] == "message.status")
        .map(|(_, _, v)| v["data"]["status"].as_str().unwrap())
        .collect();
    assert_eq!(
        statuses.iter().copied().collect::<HashSet<_>>(),
        HashSet::from(["sent", "delivered", "read"])
    );
    let last_read = got
        .iter()
        .find(|(_, _, v)| v["type"] == "message.status" && v["data"]["status"] == "read")
        .unwrap();
    assert_eq!(last_read.2["data"], read);
    let of = |t: &str| {
        got.iter()
            .find(|(_, _, v)| v["type"] == t)
            .unwrap()
            .2
            .clone()
    };
    assert_eq!(
        (
            of("message.received")["data"]["text"].as_str(),
            of("message.received")["data"]["direction"].as_str()
        ),
        (Some("Hi!"), Some("inbound"))
    );
    let updated = of("message.updated");
    assert_eq!(updated["data"]["text"], "Hi again!");
    assert!(updated["data"]["edited_at"].is_string());
    assert_eq!(
        of("contact.consent")["data"]["consent"]["status"],
        "opted_in"
    );
    // The seeded template's review, and the submission (draft → pending; the simulator may
    // approve it later, which fires again).
    let templates: HashSet<(String, String)> = got
        .iter()
        .filter(|(_, _, v)| v["type"] == "template.status")
        .map(|(_, _, v)| {
            (
                v["data"]["name"].as_str().unwrap().to_string(),
                v["data"]["status"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    assert!(
        templates.contains(&("order_update".into(), "approved".into())),
        "{templates:?}"
    );
    assert!(
        templates.contains(&(
            "welcome_note".into(),
            submitted["status"].as_str().unwrap().into()
        )),
        "{templates:?}"
    );

    // The other subscription got the same inbound event (same id, same bytes).
    let inbound = received(&files, "/hook/200");
    assert_signed(&inbound_secret, &inbound);
    let ours = got
        .iter()
        .find(|(_, _, v)| v["type"] == "message.received")
        .unwrap();
    assert_eq!((inbound.len(), &inbound[0].1), (1, &ours.1));
    assert!(received(&files, "/hook/202").is_empty());

    // A message the network takes, then fails: `sent`, then `failed` with its failure.
    app.admin(&[
        "org",
        "update",
        "--org",
        &app.org_id,
        "--wallet-balance-minor",
        "5000",
    ])
    .await
    .unwrap();
    sim.register_customer(CustomerSpec {
        wa_id: Some("447700900778".into()),
        behaviour: tern_simulator::Behaviour::NotOnWhatsapp,
        ..CustomerSpec::default()
    })
    .unwrap();
    let (s, _, m) = send(
        app.http
            .post(app.url(&format!("{API}/messages")))
            .bearer_auth(&key)
            .header("Idempotency-Key", "k-events-2")
            .json(&json!({"to": "+447700900778", "type": "template",
                "template": {"name": "order_update", "language": "en_US"}})),
    )
    .await;
    assert_eq!(s, 202, "{m}");
    app.settle().await;
    sim_delivered(&sim, 8).await;
    app.settle().await;
    let failed = received(&files, "/hook/204")
        .into_iter()
        .find(|(_, _, v)| {
            v["type"] == "message.status"
                && v["data"]["id"] == m["id"]
                && v["data"]["status"] == "failed"
        })
        .expect("the failed status");
    assert_eq!(
        (
            failed.2["data"]["status"].as_str(),
            failed.2["data"]["failure"]["code"].as_str()
        ),
        (Some("failed"), Some("recipient_not_on_whatsapp"))
    );
    let got = received(&files, "/hook/204");

    // Every attempt is in the log, succeeded at the first try.
    let log = attempts(&app, &key, &all_id, "").await;
    assert_eq!(log["data"].as_array().unwrap().len(), got.len(), "{log}");
    for a in log["data"].as_array().unwrap() {
        assert_eq!(
            (
                a["status"].as_str(),
                a["attempt"].as_i64(),
                a["response_status"].as_i64()
            ),
            (Some("succeeded"), Some(1), Some(204)),
            "{a}"
        );
    }
    sim.shutdown().await;
    files.stop();
    app.stop().await;
}

async fn failing_receivers(backend: Backend) {
    let files = FileServer::start().await;
    let app = app_for(backend, &files, "0,0").start().await;
    let key = app.owner_key("full_access").await.1;
    let flaky_path = format!("/flaky/{}/2", uuid::Uuid::new_v4().simple());
    let ev = ["contact.consent"];
    let (flaky, flaky_secret) = subscribe(&app, &key, &files.url(&flaky_path), &ev).await;
    let (dead, _) = subscribe(&app, &key, &files.url("/hook/500"), &ev).await;
    let (gone, _) = subscribe(&app, &key, &files.url("/hook/410"), &ev).await;
    let contact = new_contact(&app, &key, "+447700900123").await;
    consent(&app, &key, &contact, "opted_out").await;
    app.settle().await;

    // 500, 500, then 204: three attempts of one event, under one webhook-id.
    let got = received(&files, &flaky_path);
    assert_eq!(got.len(), 3);
    assert_signed(&flaky_secret, &got);
    let ids: HashSet<_> = got
        .iter()
        .map(|(h, _, _)| h["webhook-id"].clone())
        .collect();
    assert_eq!(ids.len(), 1);
    assert!(got.windows(2).all(|w| w[0].1 == w[1].1), "the same bytes");
    let log = attempts(&app, &key, &flaky, "").await;
    let brief: Vec<(i64, String, Option<i64>)> = log["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| {
            (
                a["attempt"].as_i64().unwrap(),
                a["status"].as_str().unwrap().to_string(),
                a["response_status"].as_i64(),
            )
        })
        .collect();
    assert_eq!(
        brief,
        [
            (3, "succeeded".to_string(), Some(204)),
            (2, "failed".to_string(), Some(500)),
            (1, "failed".to_string(), Some(500))
        ]
    );
    // Filter and pages.
    let ok = attempts(&app, &key, &flaky, "?status=succeeded").await;
    assert_eq!(ok["data"].as_array().unwrap().len(), 1);
    let first = attempts(&app, &key, &flaky, "?limit=2").await;
    assert_eq!(first["data"].as_array().unwrap().len(), 2);
    let cursor = first["next_cursor"].as_str().unwrap();
    let second = attempts(&app, &key, &flaky, &format!("?limit=2&cursor={cursor}")).await;
    assert_eq!(second["data"][0]["attempt"], 1);
    let (s, h, b) = app
        .get(
            &format!("{SUBS}/{flaky}/deliveries?status=late"),
            Some(&key),
        )
        .await;
    assert_error(s, &h, &b, 400, "validation_failed");

    // A receiver that never recovers: the schedule is spent (3 attempts), the delivery fails.
    let log = attempts(&app, &key, &dead, "?status=failed").await;
    assert_eq!(log["data"].as_array().unwrap().len(), 3, "{log}");
    assert_eq!(received(&files, "/hook/500").len(), 3);
    // … and is replayed on request, with the whole schedule again.
    let since = tern_domain::time::format_ms(tern_domain::time::now_ms() - 60_000);
    let replay = |sub: String, body: Value, k: String| {
        let app = &app;
        async move {
            send(
                app.http
                    .post(app.url(&format!("{SUBS}/{sub}/replay")))
                    .bearer_auth(k)
                    .json(&body),
            )
            .await
        }
    };
    let (s, _, b) = replay(dead.clone(), json!({"since": since}), key.clone()).await;
    assert_eq!((s, b["count"].as_u64()), (202, Some(1)), "{b}");
    app.settle().await;
    assert_eq!(received(&files, "/hook/500").len(), 6);
    let (s, h, b) = replay(
        dead.clone(),
        json!({"since": "2999-01-01T00:00:00Z"}),
        key.clone(),
    )
    .await;
    assert_error(s, &h, &b, 400, "validation_failed");
    assert_eq!(b["details"]["fields"][0]["field"], "since");
    let (_, other) = app.owner_key("full_access").await;
    let (s, _, _) = replay(dead.clone(), json!({"since": since}), other.clone()).await;
    assert_eq!(s, 404);

    // 410 Gone: one attempt, and the subscription is disabled.
    let page = app.get(SUBS, Some(&key)).await.2;
    let sub = page["data"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["id"] == gone.as_str())
        .unwrap();
    assert_eq!(
        (&sub["enabled"], sub["disabled_reason"].as_str()),
        (&json!(false), Some("gone")),
        "{sub}"
    );
    assert_eq!(received(&files, "/hook/410").len(), 1);
    files.stop();
    app.stop().await;
}

/// Makes every delivery waiting for a retry due now: the clock moved past the schedule.
async fn retries_due_now(app: &TestApp) {
    app.db
        .execute_test_sql(
            "UPDATE webhook_deliveries SET next_attempt_at = 0 \
             WHERE status = 'pending' AND next_attempt_at IS NOT NULL",
        )
        .await
        .unwrap();
}

async fn deleted_subscription(backend: Backend) {
    let files = FileServer::start().await;
    // Retries due a minute later (the 503's `Retry-After: 7` is within the schedule), so one
    // is waiting when the subscription is deleted; the test moves the clock past it.
    let app = app_for(backend, &files, "60,60").start().await;
    let key = app.owner_key("full_access").await.1;
    let ev = ["contact.consent"];
    let (doomed, _) = subscribe(&app, &key, &files.url("/hook/503"), &ev).await;
    subscribe(&app, &key, &files.url("/hook/204"), &ev).await;
    let contact = new_contact(&app, &key, "+447700900125").await;
    consent(&app, &key, &contact, "opted_in").await;
    app.settle().await;
    assert_eq!(received(&files, "/hook/503").len(), 1);
    // Not yet due: nothing is retried; once due, it is.
    app.settle().await;
    assert_eq!(received(&files, "/hook/503").len(), 1);
    retries_due_now(&app).await;
    app.settle().await;
    assert_eq!(received(&files, "/hook/503").len(), 2);

    // Deleted, its waiting retry is never made; the others go on.
    let (s, _, _) = send(
        app.http
            .delete(app.url(&format!("{SUBS}/{doomed}")))
            .bearer_auth(&key),
    )
    .await;
    assert_eq!(s, 204);
    retries_due_now(&app).await;
    consent(&app, &key, &contact, "opted_out").await;
    app.settle().await;
    assert_eq!(received(&files, "/hook/503").len(), 2);
    assert_eq!(received(&files, "/hook/204").len(), 2);
    files.stop();
    app.stop().await;
}

/// Kept on the running workers, with their polling waits: the subject is their concurrency
/// (a hanging receiver holds its slots while the workers go on), which one `settle` pass,
/// waiting for every attempt it starts, cannot show.
async fn hanging_receiver(backend: Backend) {
    let files = FileServer::start().await;
    let app = app_for(backend, &files, "1,1").workers().start().await;
    let key = app.owner_key("full_access").await.1;
    let ev = ["contact.consent"];
    let (_, _) = subscribe(&app, &key, &files.url("/hold-hook"), &ev).await;
    let (_, fast_secret) = subscribe(&app, &key, &files.url("/hook/204"), &ev).await;
    let contact = new_contact(&app, &key, "+447700900124").await;
    const N: usize = 40;
    for i in 0..N {
        consent(
            &app,
            &key,
            &contact,
            if i % 2 == 0 { "opted_in" } else { "opted_out" },
        )
        .await;
    }
    // The hanging receiver holds its slots; the other gets every event meanwhile.
    let fast = eventually("every event at the live receiver", || async {
        let got = received(&files, "/hook/204");
        (got.len() == N).then_some(got)
    })
    .await;
    assert_signed(&fast_secret, &fast);
    let held = files.held.load(Ordering::SeqCst);
    assert!(
        (1..=tern_engine::webhooks::WebhookWorkerConfig::default().per_subscription)
            .contains(&held),
        "{held} requests held"
    );
    assert!(received(&files, "/hold-hook").is_empty());
    // Released, it gets all of them too.
    files.hold.add_permits(10_000);
    eventually("every event at the released receiver", || async {
        let ids: HashSet<_> = received(&files, "/hold-hook")
            .iter()
            .map(|(h, _, _)| h["webhook-id"].clone())
            .collect();
        (ids.len() == N).then_some(())
    })
    .await;
    files.stop();
    app.stop().await;
}

/// `n` consent changes of one contact (`phone`) to a subscription at `/paced-hook`, stored
/// before a delivery worker with `config` starts on its own (the backlog is there first);
/// the worker runs until the receiver has them all. Returns the most requests it had at
/// once.
async fn paced_backlog_delivered(
    backend: Backend,
    phone: &str,
    n: usize,
    config: tern_engine::webhooks::WebhookWorkerConfig,
) -> usize {
    let files = FileServer::start().await;
    let app = app_for(backend, &files, "1,1").start().await;
    let key = app.owner_key("full_access").await.1;
    subscribe(&app, &key, &files.url("/paced-hook"), &["contact.consent"]).await;
    let contact = new_contact(&app, &key, phone).await;
    for i in 0..n {
        let to = if i % 2 == 0 { "opted_in" } else { "opted_out" };
        consent(&app, &key, &contact, to).await;
    }
    let cancel = tokio_util::sync::CancellationToken::new();
    let worker = tokio::spawn(tern_engine::webhooks::run(
        app.core.clone(),
        config,
        cancel.clone(),
    ));
    eventually("every event at the receiver", || async {
        (received(&files, "/paced-hook").len() >= n).then_some(())
    })
    .await;
    cancel.cancel();
    worker.await.unwrap();
    let peak = files.paced.1.load(Ordering::SeqCst);
    files.stop();
    app.stop().await;
    peak
}

/// A receiver that answers well gets more than its starting share of slots once it has
/// them all in use, and never more than the ceiling.
async fn concurrency_follows_the_answers(backend: Backend) {
    let config = tern_engine::webhooks::WebhookWorkerConfig {
        per_subscription: 4,
        per_subscription_max: 24,
        busy_rest: 0,
        ..Default::default()
    };
    let peak = paced_backlog_delivered(backend, "+447700900125", 200, config).await;
    assert!((5..=24).contains(&peak), "{peak} requests at once");
}

/// A subscription held at its ceiling gets its next deliveries as soon as its attempts are
/// recorded: the recorder wakes the claimer. With a poll interval longer than the test's
/// wait, a claimer left asleep after a claim that found the ceiling full would never deliver
/// the rest.
async fn recorded_attempts_free_the_ceiling_at_once(backend: Backend) {
    let config = tern_engine::webhooks::WebhookWorkerConfig {
        per_subscription: 1,
        per_subscription_max: 1,
        poll_interval: Duration::from_secs(3_600),
        busy_rest: 0,
        ..Default::default()
    };
    let peak = paced_backlog_delivered(backend, "+447700900126", 40, config).await;
    assert_eq!(peak, 1, "one request at once");
}

async fn test_sends(backend: Backend) {
    let files = FileServer::start().await;
    // A retry would be due at once: the `settle` below would make it.
    let app = app_for(backend, &files, "0").start().await;
    let key = app.owner_key("full_access").await.1;
    let (id, secret) = subscribe(&app, &key, &files.url("/hook/204"), &["message.status"]).await;
    let test = |sub: String, body: Option<Value>, k: String| {
        let app = &app;
        async move {
            let mut req = app
                .http
                .post(app.url(&format!("{SUBS}/{sub}/test")))
                .bearer_auth(k);
            if let Some(b) = body {
                req = req.json(&b);
            }
            send(req).await
        }
    };
    let (s, _, a) = test(id.clone(), None, key.clone()).await;
    assert_eq!(s, 200, "{a}");
    assert_eq!(
        (
            a["event_type"].as_str(),
            a["status"].as_str(),
            a["attempt"].as_i64(),
            a["response_status"].as_i64()
        ),
        (Some("webhook.test"), Some("succeeded"), Some(1), Some(204))
    );
    let got = received(&files, "/hook/204");
    assert_eq!(got.len(), 1);
    assert_signed(&secret, &got);
    assert_eq!(got[0].2["type"], "webhook.test");
    assert_eq!(got[0].2["data"]["subscription_id"], id.as_str());
    assert_eq!(got[0].2["id"], a["event_id"]);

    // A sample of another type has that type's shape.
    let (s, _, a) = test(
        id.clone(),
        Some(json!({"event_type": "message.status"})),
        key.clone(),
    )
    .await;
    assert_eq!((s, a["event_type"].as_str()), (200, Some("message.status")));
    let sample = &received(&files, "/hook/204")[1].2;
    assert_eq!(sample["type"], "message.status");
    for field in [
        "id",
        "status",
        "direction",
        "content",
        "failure",
        "wamid",
        "sent_at",
    ] {
        assert!(sample["data"].get(field).is_some(), "{field}: {sample}");
    }
    let (s, h, b) = test(
        id.clone(),
        Some(json!({"event_type": "message.sent", "x": 1})),
        key.clone(),
    )
    .await;
    assert_error(s, &h, &b, 400, "validation_failed");
    let fields: Vec<&str> = b["details"]["fields"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["field"].as_str().unwrap())
        .collect();
    assert_eq!(fields, ["event_type", "x"]);
    let (_, other) = app.owner_key("full_access").await;
    let (s, _, _) = test(id.clone(), None, other.clone()).await;
    assert_eq!(s, 404);
    let (s, h, b) = app
        .get(&format!("{SUBS}/{id}/deliveries"), Some(&other))
        .await;
    assert_error(s, &h, &b, 404, "not_found");

    // After a rotation both secrets verify, each with the official library.
    let (s, _, r) = send(
        app.http
            .post(app.url(&format!("{SUBS}/{id}/rotate-secret")))
            .bearer_auth(&key),
    )
    .await;
    assert_eq!(s, 201);
    let new_secret = r["secret"].as_str().unwrap().to_string();
    // A disabled subscription is still tested on request.
    let (s, _, _) = send(
        app.http
            .patch(app.url(&format!("{SUBS}/{id}")))
            .bearer_auth(&key)
            .json(&json!({"enabled": false})),
    )
    .await;
    assert_eq!(s, 200);
    let (s, _, a) = test(id.clone(), None, key.clone()).await;
    assert_eq!((s, a["status"].as_str()), (200, Some("succeeded")));
    let last = received(&files, "/hook/204").pop().unwrap();
    assert!(last.0["webhook-signature"].to_str().unwrap().contains(' '));
    assert_signed(&new_secret, std::slice::from_ref(&last));
    assert_signed(&secret, std::slice::from_ref(&last));

    // A failed test is answered with its attempt and not retried.
    let (bad, _) = subscribe(&app, &key, &files.url("/hook/500"), &["message.status"]).await;
    let (s, _, a) = test(bad.clone(), None, key.clone()).await;
    assert_eq!(
        (
            s,
            a["status"].as_str(),
            a["response_status"].as_i64(),
            a["error"].as_str()
        ),
        (200, Some("failed"), Some(500), Some("HTTP 500"))
    );
    app.settle().await;
    assert_eq!(received(&files, "/hook/500").len(), 1);
    let log = attempts(&app, &key, &bad, "").await;
    assert_eq!(log["data"].as_array().unwrap().len(), 1);
    files.stop();
    app.stop().await;
}

tern_store::both_backends! { Backend;
    every_event_type_fires_where_it_should,
    failing_receivers_are_retried_failed_replayed_or_disabled => failing_receivers,
    a_deleted_subscription_stops_its_retries => deleted_subscription,
    a_hanging_receiver_does_not_hold_up_others => hanging_receiver,
    a_receiver_gets_the_concurrency_its_answers_allow => concurrency_follows_the_answers,
    a_capped_receiver_is_served_again_when_its_attempts_are_recorded =>
        recorded_attempts_free_the_ceiling_at_once,
    test_sends_rotation_and_samples => test_sends,
}
