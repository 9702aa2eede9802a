//! Running campaigns with the workers against the simulator, on both backends: a 2,000-
//! recipient campaign paused and resumed several times sends each recipient exactly one
//! message (the simulator's request log is the proof); scheduled launch, expiry, and the
//! wallet and error-threshold auto-pauses.

use super::*;
use crate::common::{APP_SECRET, Backend, eventually_within};
use std::collections::HashMap;
use std::time::Duration;
use tern_domain::time::now_ms;
use tern_simulator::{Behaviour, NumberSpec, RecipientSpec, SimHandle, TemplateSeed};

const WABA: &str = "waba1";

struct Run {
    app: TestApp,
    sim: SimHandle,
    key: String,
}

/// Tern with its workers, the simulator as the network (statuses batched), one number at
/// `mps` on both sides, and template `promo` (one variable) approved on both sides.
async fn start(backend: Backend, mps: i64) -> Run {
    // Statuses come batched, as from a busy number: several in one notification, often a
    // message's sent, delivered and read together (the status writer's batch path).
    let args = tern_simulator::SimArgs {
        batch_window_ms: 150,
        ..tern_simulator::SimArgs::local(APP_SECRET)
    };
    let sim = tern_simulator::start(args).await.unwrap();
    let app = TestApp::builder(backend)
        .graph(&sim.base_url())
        .workers()
        .start()
        .await;
    sim.set_callback_url(Some(app.url("/webhooks/whatsapp")));
    sim.register_number(NumberSpec {
        id: PNID.into(),
        display_phone_number: "+14155550100".into(),
        waba_id: WABA.into(),
        access_token: "token".into(),
        throughput_mps: Some(mps as u32),
        verified_name: None,
    })
    .unwrap();
    app.add_number(&app.org_id, PNID, "+14155550100").await;
    app.db
        .update_phone_number(PNID, None, Some(mps), now_ms())
        .await
        .unwrap();
    let components =
        json!([{"type": "BODY", "text": "Hello {{1}}.", "example": {"body_text": [["Ada"]]}}]);
    sim.seed_template(TemplateSeed {
        waba_id: WABA.into(),
        name: "promo".into(),
        language: "en_US".into(),
        category: "marketing".into(),
        status: "approved".into(),
        parameter_format: None,
        components: components.as_array().unwrap().clone(),
    });
    insert_template(&app, "promo", components, "marketing").await;
    let key = app.owner_key("full_access").await.1;
    Run { app, sim, key }
}

/// `n` contacts tagged `tag`, named `C<i>`, phones from `base`.
async fn contacts(app: &TestApp, n: usize, base: u64, tag: &str) -> Vec<String> {
    let org = app.org_uuid();
    let mut phones = Vec::with_capacity(n);
    for chunk in (0..n).collect::<Vec<_>>().chunks(100) {
        let mut tasks = tokio::task::JoinSet::new();
        for &i in chunk {
            let db = app.db.clone();
            let tag = tag.to_string();
            let wa = (base + i as u64).to_string();
            tasks.spawn(async move {
                let (c, _) = db
                    .upsert_contact_by_wa_id(
                        org,
                        &wa,
                        Some(&format!("C{i}")),
                        None,
                        uuid::Uuid::now_v7(),
                        now_ms(),
                    )
                    .await
                    .unwrap();
                db.add_contact_tags(org, c.id, &[tag], now_ms())
                    .await
                    .unwrap();
                wa
            });
        }
        while let Some(wa) = tasks.join_next().await {
            phones.push(wa.unwrap());
        }
    }
    phones
}

/// Sends the simulator took (200), per recipient.
fn sends_per_recipient(sim: &SimHandle) -> HashMap<String, Vec<Value>> {
    let mut per: HashMap<String, Vec<Value>> = HashMap::new();
    for r in sim.requests() {
        if r.method == "POST" && r.path.ends_with("/messages") && r.response_status == Some(200) {
            let to = r.body["to"]
                .as_str()
                .unwrap_or_default()
                .trim_start_matches('+')
                .to_string();
            per.entry(to).or_default().push(r.body.clone());
        }
    }
    per
}

fn sent_count(sim: &SimHandle) -> usize {
    sends_per_recipient(sim).values().map(Vec::len).sum()
}

async fn status_of(r: &Run, id: &str) -> Value {
    let (s, _, c) = call(&r.app, &r.key, "GET", &format!("/campaigns/{id}"), None).await;
    assert_eq!(s, 200, "{c}");
    c
}

async fn wait_status(r: &Run, id: &str, want: &str, bound: Duration) -> Value {
    eventually_within(bound, &format!("campaign {want}"), || async {
        let c = status_of(r, id).await;
        (c["status"] == want).then_some(c)
    })
    .await
}

async fn launch(r: &Run, tag: &str, extra: Value) -> String {
    let id = draft(r, tag, extra).await;
    let (s, l) = act(&r.app, &r.key, &id, "launch", None).await;
    assert_eq!(s, 200, "{l}");
    id
}

/// A draft campaign of template `promo` to the contacts tagged `tag`.
async fn draft(r: &Run, tag: &str, extra: Value) -> String {
    let mut body = json!({"name": "Run", "template": {"name": "promo", "language": "en_US",
                           "variables": [{"field": "name", "fallback": "friend"}]},
                          "audience": {"tags": [tag]}});
    if let (Some(b), Some(e)) = (body.as_object_mut(), extra.as_object()) {
        b.extend(e.clone());
    }
    let c = create(&r.app, &r.key, body).await;
    c["id"].as_str().unwrap().to_string()
}

/// Sets the organisation's marketing price and, if given, its wallet balance.
async fn billing(r: &Run, price: i64, wallet: Option<i64>) {
    let price = format!("marketing={price}");
    let mut args = vec!["org", "update", "--org", &r.app.org_id, "--price", &price];
    let wallet = wallet.map(|w| w.to_string());
    if let Some(w) = &wallet {
        args.extend(["--wallet-balance-minor", w]);
    }
    r.app.admin(&args).await.unwrap();
}

fn wallet_low(s: u16, e: &Value, required: i64, balance: i64) {
    assert_eq!(
        (s, e["code"].as_str()),
        (402, Some("wallet_balance_low")),
        "{e}"
    );
    let d = &e["details"];
    assert_eq!(
        (
            d["required_minor"].as_i64(),
            d["balance_minor"].as_i64(),
            d["wallet_category"].as_str()
        ),
        (Some(required), Some(balance), Some("marketing")),
        "{e}"
    );
}

async fn paused_and_resumed_sends_each_recipient_once(backend: Backend) {
    const N: usize = 2_000;
    let r = start(backend, 400).await;
    let phones = contacts(&r.app, N, 447_700_100_000, "all").await;
    let id = launch(&r, "all", json!({})).await;
    for at in [300, 900, 1_500] {
        eventually_within(Duration::from_secs(60), "sends before pausing", || async {
            (sent_count(&r.sim) >= at).then_some(())
        })
        .await;
        let (s, p) = act(&r.app, &r.key, &id, "pause", None).await;
        assert_eq!((s, p["status"].as_str()), (200, Some("paused")), "{p}");
        // Sends already claimed when the pause landed finish; then nothing goes.
        tokio::time::sleep(Duration::from_millis(300)).await;
        let settled = sent_count(&r.sim);
        tokio::time::sleep(Duration::from_millis(1_000)).await;
        assert_eq!(sent_count(&r.sim), settled, "nothing is sent while paused");
        assert!(settled < N, "paused before the end ({settled})");
        // The rest waits: not yet messaged, or queued and held while paused.
        let p = progress(&r.app, &r.key, &id).await;
        let waiting = p["pending"].as_i64().unwrap() + p["queued"].as_i64().unwrap();
        assert!(waiting > 0, "{p}");
        assert_eq!(p["status"], "paused");
        let (s, c) = act(&r.app, &r.key, &id, "resume", None).await;
        assert_eq!(s, 200, "{c}");
    }
    let done = wait_status(&r, &id, "completed", Duration::from_secs(120)).await;
    assert!(done["completed_at"].is_string());
    let per = sends_per_recipient(&r.sim);
    assert_eq!(per.len(), N, "every recipient reached");
    for wa in &phones {
        let sends = per.get(wa).map(Vec::len).unwrap_or_default();
        assert_eq!(sends, 1, "recipient {wa} got {sends} messages");
    }
    // The value filled in for each recipient is its contact's name.
    let body = &per[&phones[7]][0];
    let param = &body["template"]["components"][0]["parameters"][0]["text"];
    assert!(param.as_str().unwrap().starts_with('C'), "{body}");
    // Progress settles with every recipient sent (and further).
    let p = eventually_within(Duration::from_secs(30), "statuses settled", || async {
        let p = progress(&r.app, &r.key, &id).await;
        (p["queued"] == 0
            && p["sent"].as_i64().unwrap()
                + p["delivered"].as_i64().unwrap()
                + p["read"].as_i64().unwrap()
                == N as i64)
            .then_some(p)
    })
    .await;
    assert_eq!(p["total"], N);
    // Recipients point at their messages, which carry the campaign id.
    let (_, _, page) = call(
        &r.app,
        &r.key,
        "GET",
        &format!("/campaigns/{id}/recipients?limit=3"),
        None,
    )
    .await;
    let m = page["data"][0]["message_id"].as_str().unwrap();
    let (s, _, msg) = call(&r.app, &r.key, "GET", &format!("/messages/{m}"), None).await;
    assert_eq!(s, 200);
    assert_eq!(msg["campaign_id"], id.as_str());
    assert_eq!(msg["type"], "template");
    r.sim.shutdown().await;
    r.app.stop().await;
}

async fn schedules_expiry_and_auto_pauses(backend: Backend) {
    let r = start(backend, 50).await;
    // Due launch: scheduled a moment ahead, it launches and completes by itself.
    contacts(&r.app, 3, 447_700_200_000, "few").await;
    let c = create(&r.app, &r.key, json!({"name": "Later", "template": {"name": "promo", "language": "en_US", "variables": ["x"]},
                                          "audience": {"tags": ["few"]}})).await;
    let id = c["id"].as_str().unwrap().to_string();
    let at = tern_domain::time::format_ms(now_ms() + 1_200);
    let (s, c) = act(
        &r.app,
        &r.key,
        &id,
        "schedule",
        Some(json!({"scheduled_at": at})),
    )
    .await;
    assert_eq!((s, c["status"].as_str()), (200, Some("scheduled")), "{c}");
    let done = wait_status(&r, &id, "completed", Duration::from_secs(30)).await;
    assert!(done["launched_at"].is_string());
    assert_eq!(sent_count(&r.sim), 3);

    // Expiry: a campaign paused past its expires_at ends the rest as expired on resume.
    contacts(&r.app, 4, 447_700_300_000, "exp").await;
    let expires = tern_domain::time::format_ms(now_ms() + 1_000);
    let c = create(&r.app, &r.key, json!({"name": "Exp", "template": {"name": "promo", "language": "en_US", "variables": ["x"]},
                                          "audience": {"tags": ["exp"]}, "expires_at": expires})).await;
    let id = c["id"].as_str().unwrap().to_string();
    act(&r.app, &r.key, &id, "resolve", None).await;
    tokio::time::sleep(Duration::from_millis(1_100)).await;
    let (s, c) = act(&r.app, &r.key, &id, "launch", None).await;
    assert_eq!(s, 200, "{c}");
    wait_status(&r, &id, "completed", Duration::from_secs(30)).await;
    let p = progress(&r.app, &r.key, &id).await;
    assert_eq!(
        (p["expired"].as_i64(), p["total"].as_i64()),
        (Some(4), Some(4)),
        "{p}"
    );
    assert_eq!(sent_count(&r.sim), 3, "nothing sent after expiry");

    // Prices: room for two of five template messages. The launch is refused for the wallet
    // (the estimate, after resolve) and the campaign stays ready.
    billing(&r, 100, Some(250)).await;
    contacts(&r.app, 5, 447_700_400_000, "wallet").await;
    let id = draft(&r, "wallet", json!({})).await;
    let (s, e) = act(&r.app, &r.key, &id, "launch", None).await;
    wallet_low(s, &e, 500, 250);
    let c = status_of(&r, &id).await;
    assert_eq!(
        (
            c["status"].as_str(),
            c["recipient_count"].as_i64(),
            c["estimated_cost_minor"].as_i64()
        ),
        (Some("ready"), Some(5), Some(500)),
        "{c}"
    );
    assert_eq!(sent_count(&r.sim), 3, "nothing sent");
    // Covered: it runs, and each message keeps the network's price from its statuses.
    billing(&r, 100, Some(500)).await;
    let (s, c) = act(&r.app, &r.key, &id, "launch", None).await;
    assert_eq!(s, 200, "{c}");
    wait_status(&r, &id, "completed", Duration::from_secs(30)).await;
    let (_, _, page) = call(
        &r.app,
        &r.key,
        "GET",
        &format!("/campaigns/{id}/recipients"),
        None,
    )
    .await;
    let m = page["data"][0]["message_id"].as_str().unwrap().to_string();
    let msg = eventually_within(Duration::from_secs(10), "pricing reported", || async {
        let (_, _, msg) = call(&r.app, &r.key, "GET", &format!("/messages/{m}"), None).await;
        msg["pricing"].is_object().then_some(msg)
    })
    .await;
    assert_eq!(
        msg["pricing"],
        json!({"billable": true, "pricing_model": "PMP", "category": "marketing", "type": "regular"}),
        "{msg}"
    );
    // A scheduled launch the wallet (now empty) cannot cover pauses; resume is checked
    // against the recipients left.
    contacts(&r.app, 3, 447_700_410_000, "wallet2").await;
    let id = draft(&r, "wallet2", json!({})).await;
    let at = tern_domain::time::format_ms(now_ms() + 1_000);
    let (s, c) = act(
        &r.app,
        &r.key,
        &id,
        "schedule",
        Some(json!({"scheduled_at": at})),
    )
    .await;
    assert_eq!(s, 200, "{c}");
    let c = wait_status(&r, &id, "paused", Duration::from_secs(30)).await;
    assert_eq!(c["pause_reason"], "wallet_balance_low");
    let (s, e) = act(&r.app, &r.key, &id, "resume", None).await;
    wallet_low(s, &e, 300, 0);
    billing(&r, 100, Some(300)).await;
    let (s, c) = act(&r.app, &r.key, &id, "resume", None).await;
    assert_eq!(s, 200, "{c}");
    wait_status(&r, &id, "completed", Duration::from_secs(30)).await;
    assert_eq!(sent_count(&r.sim), 11);
    // Billing off: the estimate is 0 and nothing is refused.
    billing(&r, 0, Some(0)).await;

    // Error threshold: recipients the network cannot reach fail; at 20 failures that are at
    // least a fifth of the last outcomes the campaign pauses itself.
    let bad = contacts(&r.app, 200, 447_700_500_000, "bad").await;
    for wa in &bad {
        r.sim
            .register_recipient(RecipientSpec {
                wa_id: wa.clone(),
                behaviour: Behaviour::NotOnWhatsapp,
                fail_code: None,
                profile_name: None,
            })
            .unwrap();
    }
    r.app
        .db
        .update_phone_number(PNID, None, Some(20), now_ms())
        .await
        .unwrap();
    let id = launch(&r, "bad", json!({})).await;
    assert_eq!(status_of(&r, &id).await["estimated_cost_minor"], 0);
    let c = wait_status(&r, &id, "paused", Duration::from_secs(60)).await;
    assert_eq!(c["pause_reason"], "error_threshold");
    let p = eventually_within(Duration::from_secs(10), "failures counted", || async {
        let p = progress(&r.app, &r.key, &id).await;
        (p["failed"].as_i64().unwrap() >= 20).then_some(p)
    })
    .await;
    assert!(
        p["pending"].as_i64().unwrap() > 0,
        "paused before the end: {p}"
    );
    assert!(
        p["failure_codes"]
            .as_object()
            .unwrap()
            .values()
            .map(|v| v.as_i64().unwrap())
            .sum::<i64>()
            >= 20,
        "{p}"
    );
    r.sim.shutdown().await;
    r.app.stop().await;
}

/// Sent (or further) per the progress.
fn sent_of(p: &Value) -> i64 {
    ["sent", "delivered", "read"]
        .iter()
        .map(|k| p[k].as_i64().unwrap())
        .sum()
}

/// Waits until nothing is queued and every send the simulator took for `phones` is counted.
async fn settled(r: &Run, id: &str, phones: &[String]) -> Value {
    eventually_within(Duration::from_secs(30), "progress settled", || async {
        let p = progress(&r.app, &r.key, id).await;
        let per = sends_per_recipient(&r.sim);
        let took: usize = phones
            .iter()
            .filter_map(|wa| per.get(wa))
            .map(Vec::len)
            .sum();
        (p["queued"] == 0 && sent_of(&p) == took as i64).then_some(p)
    })
    .await
}

/// Every recipient reached got one message, and `n` of the `phones` were reached.
fn each_at_most_once(sim: &SimHandle, phones: &[String], n: usize) {
    let per = sends_per_recipient(sim);
    for wa in phones {
        let sends = per.get(wa).map(Vec::len).unwrap_or_default();
        assert!(sends <= 1, "recipient {wa} got {sends} messages");
    }
    assert_eq!(phones.iter().filter(|wa| per.contains_key(*wa)).count(), n);
}

/// A small campaign is queued whole at once (the fan-out keeps 50 messages ahead), so at
/// 1 msg/s most of it still waits in the queue when it expires: those end `expired`
/// (their messages failed as `campaign_expired`, never sent) instead of going out.
async fn expiry_ends_queued_messages(backend: Backend) {
    const N: i64 = 20;
    let r = start(backend, 1).await;
    let phones = contacts(&r.app, N as usize, 447_700_600_000, "slow").await;
    let expires = tern_domain::time::format_ms(now_ms() + 5_000);
    let id = launch(&r, "slow", json!({"expires_at": expires})).await;
    wait_status(&r, &id, "completed", Duration::from_secs(60)).await;
    let p = settled(&r, &id, &phones).await;
    let (sent, expired, failed) = (
        sent_of(&p),
        p["expired"].as_i64().unwrap(),
        p["failed"].as_i64().unwrap(),
    );
    assert!(expired > 0 && sent < N, "{p}");
    assert_eq!(
        (sent + expired + failed, p["total"].as_i64()),
        (N, Some(N)),
        "{p}"
    );
    assert_eq!(p["pending"], 0, "{p}");
    each_at_most_once(&r.sim, &phones, sent as usize);
    // The expired recipients keep their message, which failed before the network saw it.
    let (s, _, page) = call(
        &r.app,
        &r.key,
        "GET",
        &format!("/campaigns/{id}/recipients?status=expired&limit=100"),
        None,
    )
    .await;
    assert_eq!(s, 200, "{page}");
    let rows = page["data"].as_array().unwrap();
    assert_eq!(rows.len() as i64, expired, "{page}");
    let m = rows[0]["message_id"].as_str().expect("queued at expiry");
    let (s, _, msg) = call(&r.app, &r.key, "GET", &format!("/messages/{m}"), None).await;
    assert_eq!(s, 200);
    assert_eq!(msg["status"], "failed", "{msg}");
    assert_eq!(msg["failure_code"], "campaign_expired", "{msg}");
    assert!(msg["wamid"].is_null(), "{msg}");

    // Paused past its expiry, a campaign ends by itself: its held messages do not wait for
    // a resume.
    let late = contacts(&r.app, 5, 447_700_650_000, "late").await;
    let expires = tern_domain::time::format_ms(now_ms() + 2_000);
    let id = launch(&r, "late", json!({"expires_at": expires})).await;
    let (s, c) = act(&r.app, &r.key, &id, "pause", None).await;
    assert_eq!(s, 200, "{c}");
    let done = wait_status(&r, &id, "completed", Duration::from_secs(30)).await;
    assert!(done["pause_reason"].is_null(), "{done}");
    let p = settled(&r, &id, &late).await;
    let per = sends_per_recipient(&r.sim);
    let reached = late.iter().filter(|wa| per.contains_key(*wa)).count() as i64;
    assert_eq!(
        (sent_of(&p), p["expired"].as_i64()),
        (reached, Some(5 - reached)),
        "{p}"
    );
    r.sim.shutdown().await;
    r.app.stop().await;
}

/// Every recipient is queued at once (50 ahead), then a check fails mid-run (the template
/// paused, the subscription restricted, the number disconnected): the campaign pauses with
/// that reason, its queued messages stay in the queue (none fails), and they go after
/// resume, each exactly once.
async fn a_failed_check_pauses_the_queued_messages(backend: Backend) {
    const N: usize = 20;
    let r = start(backend, 2).await;
    let phones = contacts(&r.app, N, 447_700_700_000, "held").await;
    let id = launch(&r, "held", json!({})).await;
    let template = |status: &'static str| {
        let db = r.app.db.clone();
        async move {
            db.apply_template_status(
                WABA,
                None,
                "promo",
                Some("en_US"),
                status.parse().unwrap(),
                None,
                now_ms(),
            )
            .await
            .unwrap();
        }
    };
    let subscription = |status: &'static str| {
        let (app, org) = (&r.app, r.app.org_id.clone());
        async move {
            app.admin(&[
                "org",
                "update",
                "--org",
                &org,
                "--subscription-status",
                status,
            ])
            .await
            .unwrap();
        }
    };
    let number = |status: &'static str| {
        let app = &r.app;
        async move {
            app.admin(&[
                "number",
                "update",
                "--phone-number-id",
                PNID,
                "--status",
                status,
            ])
            .await
            .unwrap();
        }
    };
    for (at, reason) in [
        (2, "template_not_approved"),
        (6, "subscription_restricted"),
        (10, "phone_number_not_connected"),
    ] {
        eventually_within(
            Duration::from_secs(30),
            "sends before the check fails",
            || async { (sent_count(&r.sim) >= at).then_some(()) },
        )
        .await;
        match reason {
            "template_not_approved" => template("paused").await,
            "subscription_restricted" => subscription("restricted").await,
            _ => number("disconnected").await,
        }
        let c = wait_status(&r, &id, "paused", Duration::from_secs(30)).await;
        assert_eq!(c["pause_reason"], reason);
        // Sends already claimed when the pause landed finish; then nothing goes.
        tokio::time::sleep(Duration::from_millis(600)).await;
        let held = sent_count(&r.sim);
        tokio::time::sleep(Duration::from_millis(1_500)).await;
        assert_eq!(sent_count(&r.sim), held, "nothing is sent while paused");
        assert!(held < N, "paused before the end ({held})");
        let p = progress(&r.app, &r.key, &id).await;
        assert_eq!(p["pending"], 0, "every recipient was queued: {p}");
        assert!(p["queued"].as_i64().unwrap() > 0, "{p}");
        // Resume checks again: refused while the check still fails.
        let (s, e) = act(&r.app, &r.key, &id, "resume", None).await;
        assert!(s == 402 || s == 409, "{s} {e}");
        match reason {
            "template_not_approved" => template("approved").await,
            "subscription_restricted" => subscription("active").await,
            _ => number("connected").await,
        }
        let (s, c) = act(&r.app, &r.key, &id, "resume", None).await;
        assert_eq!(s, 200, "{c}");
    }
    wait_status(&r, &id, "completed", Duration::from_secs(60)).await;
    let p = settled(&r, &id, &phones).await;
    assert_eq!(
        (sent_of(&p), p["failed"].as_i64()),
        (N as i64, Some(0)),
        "{p}"
    );
    each_at_most_once(&r.sim, &phones, N);
    r.sim.shutdown().await;
    r.app.stop().await;
}

tern_store::both_backends! { Backend;
    expiry_ends_queued_messages,
    a_failed_check_pauses_the_queued_messages,
    paused_and_resumed_sends_each_recipient_once,
    schedules_expiry_and_auto_pauses,
}
