//! `kill -9` during dispatch leaves no gap in a message's timeline (SQLite and PostgreSQL):
//! `tern serve` is killed while the network holds the answer to the message's send (it
//! took the message); the next process's sweep writes the lost claim as an `unknown`
//! attempt, then the network's status webhooks (held back until then) settle the message:
//! `sent`, `delivered` and `read`, each recorded (applied or not, and why).

use super::*;

mod kill_9_during_dispatch_leaves_no_gap_in_the_timeline {
    use super::*;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn sqlite() {
        scenario("timeline-kill9-sqlite", Backend::Sqlite).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn postgres() {
        scenario("timeline-kill9-postgres", Backend::Postgres).await;
    }
}

/// Sets the simulator's callback (`None`: its webhooks fail and are retried later).
async fn callback(fx: &Fixture, url: Option<String>) {
    let r = fx
        .http
        .put(fx.sim_url("/_sim/callback"))
        .json(&json!({ "url": url }))
        .send()
        .await
        .unwrap();
    assert!(r.status().is_success(), "PUT /_sim/callback: {r:?}");
}

async fn get(fx: &Fixture, url: &str) -> Value {
    let r = fx
        .http
        .get(url)
        .bearer_auth(&fx.api_key)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200, "GET {url}");
    r.json().await.unwrap()
}

/// Polls `probe` every 250 ms until it gives `Some`, at most `limit`.
async fn poll<T, F, Fut>(what: &str, limit: Duration, mut probe: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = Instant::now() + limit;
    loop {
        if let Some(v) = probe().await {
            return v;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

async fn scenario(label: &'static str, backend: Backend) {
    let mut fx = Fixture::new(label, backend).await;
    // The message must not fail as `network_outcome_unknown` before its statuses arrive.
    fx.extra_env = vec![("TERN_DISPATCH_UNKNOWN_GRACE_SECS".into(), "600".into())];
    let mut port = free_port();
    fx.start_simulator(port).await;
    fx.provision().await;
    port = fx.serve("serve-1", port, true).await;
    let base = format!("http://127.0.0.1:{port}");
    fx.open_window(&base).await;

    // The network takes the message but holds its answer, and its webhooks cannot reach
    // Tern for now (the simulator retries them).
    callback(&fx, None).await;
    let r = fx
        .http
        .post(fx.sim_url(&format!("/_sim/numbers/{PNID}/force")))
        .json(&json!({"action": "hang", "ms": 120_000, "accept": true, "times": 1}))
        .send()
        .await
        .unwrap();
    assert!(r.status().is_success(), "force hang: {r:?}");
    let r = fx
        .http
        .post(format!("{base}{API}/messages"))
        .bearer_auth(&fx.api_key)
        .header("Idempotency-Key", "timeline-kill9")
        .json(
            &json!({"to": format!("+{CUSTOMER}"), "type": "text", "text": {"body": "In flight."}}),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 202);
    let rid = r.headers()["x-request-id"].to_str().unwrap().to_string();
    let id = r.json::<Value>().await.unwrap()["id"]
        .as_str()
        .unwrap()
        .to_string();
    // The send is under way (the network has it): kill -9.
    poll(
        "the send to reach the network",
        Duration::from_secs(60),
        || async {
            let sends = fx.network_sends().await;
            sends
                .iter()
                .any(|s| tern_id_of(s) == Some(id.as_str()))
                .then_some(())
        },
    )
    .await;
    let (_, server) = fx.servers.pop().unwrap();
    server.kill_9();

    // The next process: once the claim's lease has run out, its sweep records the lost
    // attempt.
    port = fx.serve("serve-2", port, false).await;
    let base = format!("http://127.0.0.1:{port}");
    let timeline = format!("{base}{API}/messages/{id}/timeline?limit=100");
    let lease = tern_engine::dispatch::DispatchConfig::default().lease;
    poll(
        "the sweep's attempt",
        lease + Duration::from_secs(60),
        || async {
            let t = get(&fx, &timeline).await;
            t["data"]
                .as_array()
                .unwrap()
                .iter()
                .any(|e| e["kind"] == "dispatch_attempt")
                .then_some(())
        },
    )
    .await;
    // Then the network's webhooks get through.
    callback(&fx, Some(Fixture::callback_url(port))).await;
    let message = format!("{base}{API}/messages/{id}");
    poll(
        "the message to be read",
        Duration::from_secs(120),
        || async { (get(&fx, &message).await["status"] == "read").then_some(()) },
    )
    .await;
    // The three reports arrive together, each in a webhook of its own, and are applied as
    // they are stored: `read` may be applied while the others are still on their way.
    poll(
        "all three reports in the timeline",
        Duration::from_secs(60),
        || async {
            let t = get(&fx, &timeline).await;
            let reports = t["data"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|e| e["kind"] == "status")
                .count();
            (reports >= 3).then_some(())
        },
    )
    .await;

    let page = get(&fx, &timeline).await;
    assert!(page["next_cursor"].is_null(), "{page}");
    let all = page["data"].as_array().unwrap();
    let dump = serde_json::to_string_pretty(all).unwrap();
    let kinds: Vec<&str> = all.iter().map(|e| e["kind"].as_str().unwrap()).collect();
    assert_eq!(
        kinds,
        ["accepted", "dispatch_attempt", "status", "status", "status"],
        "{label}: {dump}"
    );
    assert_eq!(all[0]["request_id"].as_str(), Some(rid.as_str()), "{dump}");
    assert_eq!(all[0]["idempotency_key"], "timeline-kill9", "{dump}");
    let a = &all[1];
    assert_eq!(
        (
            a["attempt"].as_i64(),
            a["outcome"].as_str(),
            a["http_status"].as_i64(),
            a["latency_ms"].as_i64()
        ),
        (Some(1), Some("unknown"), None, None),
        "{dump}"
    );
    assert!(a["error_message"].is_string(), "{dump}");
    // The network's retried webhooks arrive together, in any order, all naming (nearly)
    // the same time. A step fills its time and the lower steps' (a later step proves the
    // earlier ones), so a lower step arriving after a higher one changes nothing unless it
    // names an earlier time: recorded, not applied, and why.
    let mut reached = 0;
    // (rank, network time) of the applied reports so far.
    let mut applied: Vec<(i32, String)> = Vec::new();
    let mut seen = Vec::new();
    for e in &all[2..] {
        let status = e["status"].as_str().unwrap();
        let ts = e["network_timestamp"].as_str().unwrap().to_string();
        let rank = match status {
            "sent" => 1,
            "delivered" => 2,
            "read" => 3,
            other => panic!("{label}: a `{other}` report: {dump}"),
        };
        let earlier = applied.iter().all(|(r, t)| *r < rank || ts < *t);
        let fills = rank > reached || earlier;
        let want = if fills {
            Value::Null
        } else if reached == 3 {
            json!("after_final")
        } else {
            json!("out_of_order")
        };
        assert_eq!(
            (e["applied"].as_bool(), &e["reason"]),
            (Some(fills), &want),
            "{label}: {status}: {dump}"
        );
        if fills {
            applied.push((rank, ts));
        }
        reached = reached.max(rank);
        seen.push(status);
    }
    seen.sort_unstable();
    assert_eq!(seen, ["delivered", "read", "sent"], "{label}: {dump}");
    let sends = fx.network_sends().await;
    assert_eq!(
        sends
            .iter()
            .filter(|s| tern_id_of(s) == Some(id.as_str()))
            .count(),
        1,
        "sent once"
    );
    eprintln!("{label}: OK: {}", kinds.join(", "));
    fx.finish().await;
}
