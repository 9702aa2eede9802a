//! Campaigns under `kill -9` (SQLite and PostgreSQL) and with two `tern serve` processes on
//! one PostgreSQL, one of them killed mid-run: every recipient ends with exactly one
//! message in Tern, the network received at most one send per recipient, and exactly one
//! for every recipient whose message reached the network.

use super::*;

const RECIPIENTS: usize = 400;
const TAG: &str = "crash";

mod kill_9_mid_campaign_messages_each_recipient_once {
    use super::*;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn sqlite() {
        scenario("campaign-kill-9-sqlite", Backend::Sqlite, false).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn postgres_two_processes() {
        scenario("campaign-kill-9-pg-two", Backend::Postgres, true).await;
    }
}

/// The template on both sides and the tagged audience; returns the recipients' phones.
async fn audience(fx: &Fixture) -> Vec<String> {
    let components =
        json!([{"type": "BODY", "text": "Hi {{1}}!", "example": {"body_text": [["Ada"]]}}]);
    let r = fx
        .http
        .post(fx.sim_url("/_sim/templates"))
        .json(
            &json!({"waba_id": WABA, "name": "crash_promo", "language": "en_US",
                      "category": "marketing", "components": components}),
        )
        .send()
        .await
        .unwrap();
    assert!(r.status().is_success(), "seed template: {r:?}");
    let org: uuid::Uuid = fx.org_id.parse().unwrap();
    let now = tern_domain::time::now_ms();
    crate::messages::insert_approved_template(
        &fx.db,
        org,
        WABA,
        "crash_promo",
        components,
        "marketing",
    )
    .await;
    let mut phones = Vec::with_capacity(RECIPIENTS);
    for i in 0..RECIPIENTS {
        let wa = format!("4477001{i:05}");
        let (c, _) = fx
            .db
            .upsert_contact_by_wa_id(
                org,
                &wa,
                Some(&format!("P{i}")),
                None,
                uuid::Uuid::now_v7(),
                now,
            )
            .await
            .unwrap();
        fx.db
            .add_contact_tags(org, c.id, &[TAG.to_string()], now)
            .await
            .unwrap();
        phones.push(wa);
    }
    phones
}

async fn api(
    fx: &Fixture,
    base: &str,
    method: &str,
    path: &str,
    body: Option<Value>,
) -> (u16, Value) {
    let url = format!("{base}{API}{path}");
    let mut req = match method {
        "GET" => fx.http.get(url),
        _ => fx.http.post(url),
    }
    .bearer_auth(&fx.api_key);
    if let Some(b) = body {
        req = req.json(&b);
    }
    let r = req.send().await.unwrap();
    let status = r.status().as_u16();
    (status, r.json().await.unwrap_or(Value::Null))
}

async fn scenario(label: &'static str, backend: Backend, two: bool) {
    let mut fx = Fixture::new(label, backend).await;
    let mut port = free_port();
    fx.start_simulator(port).await;
    fx.provision().await;
    port = fx.serve("serve-1", port, true).await;
    let first = format!("http://127.0.0.1:{port}");
    // The second process shares the database: it dispatches too, and takes the campaign
    // over once the first one's lease lapses after the kill.
    let second = if two {
        Some(format!(
            "http://127.0.0.1:{}",
            fx.serve("serve-2", free_port(), false).await
        ))
    } else {
        None
    };
    let phones = audience(&fx).await;
    // Slow enough that the kill lands mid-run.
    fx.db
        .update_phone_number(PNID, None, Some(100), tern_domain::time::now_ms())
        .await
        .unwrap();
    let (s, c) = api(
        &fx,
        &first,
        "POST",
        "/campaigns",
        Some(json!({
        "name": "Crash", "template": {"name": "crash_promo", "language": "en_US",
                                       "variables": [{"field": "name"}]},
        "audience": {"tags": [TAG]}})),
    )
    .await;
    assert_eq!(s, 201, "{c}");
    let id = c["id"].as_str().unwrap().to_string();
    let (s, c) = api(
        &fx,
        &first,
        "POST",
        &format!("/campaigns/{id}/launch"),
        None,
    )
    .await;
    assert_eq!(s, 200, "{c}");

    // Kill the process working the campaign once part of it went out.
    let deadline = Instant::now() + Duration::from_secs(120);
    while fx.network_sends().await.len() < RECIPIENTS / 4 {
        assert!(
            Instant::now() < deadline,
            "the campaign did not start sending"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let (_, killed) = fx.servers.remove(0);
    killed.kill_9();
    let base = match second {
        Some(b) => b,
        None => {
            let p = fx.serve("serve-1-again", port, true).await;
            format!("http://127.0.0.1:{p}")
        }
    };
    if two {
        // The network's webhooks now go to the survivor.
        let r = fx
            .http
            .put(fx.sim_url("/_sim/callback"))
            .json(&json!({"url": Fixture::callback_url(base.rsplit(':').next().unwrap().parse().unwrap())}))
            .send()
            .await
            .unwrap();
        assert!(r.status().is_success());
    }

    // Claims cut off by the kill settle by webhook or fail after lease + grace (70 s).
    let deadline = Instant::now() + Duration::from_secs(240);
    let done = loop {
        let (s, c) = api(&fx, &base, "GET", &format!("/campaigns/{id}"), None).await;
        assert_eq!(s, 200, "{c}");
        if c["status"] == "completed" {
            break c;
        }
        assert!(
            Instant::now() < deadline,
            "the campaign did not complete: {c}"
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    };
    assert_eq!(done["recipient_count"], RECIPIENTS);

    // Tern: every recipient has exactly one message, each a distinct one of this campaign.
    let mut messages = HashSet::new();
    let mut cursor: Option<String> = None;
    let mut by_status: BTreeMap<String, usize> = BTreeMap::new();
    loop {
        let q = cursor
            .as_ref()
            .map(|c| format!("&cursor={c}"))
            .unwrap_or_default();
        let (s, page) = api(
            &fx,
            &base,
            "GET",
            &format!("/campaigns/{id}/recipients?limit=100{q}"),
            None,
        )
        .await;
        assert_eq!(s, 200, "{page}");
        for r in page["data"].as_array().unwrap() {
            let m = r["message_id"]
                .as_str()
                .unwrap_or_else(|| panic!("no message: {r}"));
            assert!(messages.insert(m.to_string()), "message {m} twice");
            *by_status
                .entry(r["status"].as_str().unwrap().to_string())
                .or_default() += 1;
        }
        match page["next_cursor"].as_str() {
            Some(c) => cursor = Some(c.to_string()),
            None => break,
        }
    }
    assert_eq!(messages.len(), RECIPIENTS, "{by_status:?}");

    // The network: at most one send per recipient; exactly one for each that was sent.
    let mut per: HashMap<String, usize> = HashMap::new();
    for s in fx.network_sends().await {
        if s["response_status"] == 200 {
            let to = s["body"]["to"]
                .as_str()
                .unwrap_or_default()
                .trim_start_matches('+')
                .to_string();
            *per.entry(to).or_default() += 1;
        }
    }
    for (to, n) in &per {
        assert_eq!(*n, 1, "recipient {to} received {n} sends");
    }
    let sent = by_status
        .iter()
        .filter(|(s, _)| SENT.contains(&s.as_str()))
        .map(|(_, n)| n)
        .sum::<usize>();
    assert!(
        per.len() >= sent,
        "{} network sends for {sent} sent recipients",
        per.len()
    );
    assert!(phones.iter().filter(|p| per.contains_key(*p)).count() == per.len());
    // Only claims the kill cut off may have failed.
    for (status, n) in &by_status {
        assert!(
            SENT.contains(&status.as_str()) || status == "failed",
            "{n} recipients {status}"
        );
    }
    let (_, p) = api(
        &fx,
        &base,
        "GET",
        &format!("/campaigns/{id}/progress"),
        None,
    )
    .await;
    assert_eq!(p["total"], RECIPIENTS, "{p}");
    assert!(
        p["failure_codes"]
            .as_object()
            .unwrap()
            .keys()
            .all(|k| k == "network_outcome_unknown"),
        "{p}"
    );
}
