//! Crash safety of sending, black-box against the real binary.
//!
//! * `kill_9_during_load_loses_nothing_and_sends_nothing_twice` (SQLite and PostgreSQL):
//!   `tern serve` is killed with SIGKILL while POST /messages requests are in flight and the
//!   dispatcher is sending, then restarted on the same port and database; the client re-sends
//!   every unanswered request with the same Idempotency-Key. Nothing accepted is lost, nothing
//!   reaches the network twice, and every message ends sent/delivered/read (if it reached the
//!   network) or failed with `network_outcome_unknown` (a claim cut off by the kill).
//! * `two_servers_on_one_postgres_send_each_message_once`: two `tern serve` processes on one
//!   PostgreSQL schema share the queue and the idempotency keys.
//!
//! The network is a `tern simulator` child process: its request log (`GET /_sim/requests`)
//! shows what reached the network and how often. Every child is killed when the test ends,
//! however it ends; on failure the tails of their logs are printed. The PostgreSQL tests
//! create their schema (in `TERN_TEST_PG_URL`'s database) with `psql`, since a child process
//! needs a URL naming it.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use serde_json::{Value, json};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};
use tern_store::Db;
use tokio::task::JoinSet;

const BIN: &str = env!("CARGO_BIN_EXE_tern");
const API: &str = "/api/public/v1";
const APP_SECRET: &str = "crash-safety-app-secret";
const VERIFY_TOKEN: &str = "crash-safety-verify-token";
const PNID: &str = "106540352242922";
const DISPLAY: &str = "+14155550100";
const WABA: &str = "102290129340398";
const TOKEN: &str = "crash-safety-token";
/// The customer every message goes to (the simulator's pair limit is lifted).
const CUSTOMER: &str = "14155550123";
/// `TERN_DISPATCH_UNKNOWN_GRACE_SECS` of the servers: small, so claims cut off by the kill
/// fail soon after their 60 s lease. Not smaller: a status webhook the killed server stored
/// and had claimed is processed only after its 60 s inbox lease, i.e. a little after the
/// lease of the send claim it settles; the grace must cover that difference.
const GRACE_SECS: u64 = 10;
/// Statuses after which nothing more is expected in these tests.
const SETTLED: &[&str] = &["sent", "delivered", "read", "failed"];
const SENT: &[&str] = &["sent", "delivered", "read"];
/// How long any child gets to answer its health check.
const START_TIMEOUT: Duration = Duration::from_secs(120);

mod campaigns;
mod fixture;
mod timeline;
mod webhooks;
use crate::common::{create_pg_schema, free_port};
use fixture::*;

/// The Tern message id a send request carries: `biz_opaque_callback_data` of the body.
fn tern_id_of(send: &Value) -> Option<&str> {
    send["body"]["biz_opaque_callback_data"]
        .as_str()
        .or_else(|| send["biz_opaque_callback_data"].as_str())
}

fn brief_send(s: &Value) -> Value {
    json!({"seq": s["seq"], "at_ms": s["received_at_ms"], "status": s["response_status"],
           "wamid": s["wamid"], "forced": s["forced"], "tern_id": tern_id_of(s)})
}

fn count_by_status(list: &[Value]) -> BTreeMap<String, usize> {
    let mut counts = BTreeMap::new();
    for m in list {
        let mut s = m["status"].as_str().unwrap_or("?").to_string();
        if let Some(code) = m["failure_code"].as_str() {
            s = format!("{s}:{code}");
        }
        *counts.entry(s).or_insert(0) += 1;
    }
    counts
}

// ---------------------------------------------------------------------------------------
// The client
// ---------------------------------------------------------------------------------------

#[derive(Debug, Clone)]
enum Answer {
    /// 202 (accepted) or 200 (a replay of the key).
    Message { status: u16, id: String },
    /// Any other HTTP answer.
    Refused { status: u16, body: Value },
    /// No HTTP answer: connection refused or cut, timeout.
    Unanswered(String),
}

struct Request {
    idem: String,
    body: Value,
}

fn request(label: &str, i: usize) -> Request {
    Request {
        idem: format!("{label}-{i}-{}", uuid::Uuid::new_v4().simple()),
        body: json!({"to": format!("+{CUSTOMER}"), "type": "text",
                     "text": {"body": format!("Crash-safety message number {i}.")}}),
    }
}

async fn post_message(http: &reqwest::Client, base: &str, api_key: &str, r: &Request) -> Answer {
    let res = http
        .post(format!("{base}{API}/messages"))
        .bearer_auth(api_key)
        .header("Idempotency-Key", &r.idem)
        .json(&r.body)
        .send()
        .await;
    let res = match res {
        Ok(res) => res,
        Err(e) => return Answer::Unanswered(error_chain(&e)),
    };
    let status = res.status().as_u16();
    let bytes = match res.bytes().await {
        Ok(b) => b,
        Err(e) => return Answer::Unanswered(error_chain(&e)),
    };
    let body: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
    match (status, body["id"].as_str()) {
        (200 | 202, Some(id)) => Answer::Message {
            status,
            id: id.to_string(),
        },
        _ => Answer::Refused { status, body },
    }
}

fn error_chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut src = e.source();
    while let Some(c) = src {
        s.push_str(&format!(": {c}"));
        src = c.source();
    }
    s
}

// ---------------------------------------------------------------------------------------
// kill -9 during load
// ---------------------------------------------------------------------------------------

mod kill_9_during_load_loses_nothing_and_sends_nothing_twice {
    use super::*;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn sqlite() {
        kill_9_scenario("kill9-sqlite", Backend::Sqlite).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn postgres() {
        kill_9_scenario("kill9-postgres", Backend::Postgres).await;
    }
}

async fn kill_9_scenario(label: &'static str, backend: Backend) {
    const N: usize = 300;
    const CLIENTS: usize = 6;
    /// The server is killed once this many requests were answered 202.
    const KILL_AFTER: usize = 100;
    /// Sends whose answer the network holds back.
    const HELD: usize = 5;

    let mut fx = Fixture::new(label, backend).await;
    let mut port = free_port();
    fx.start_simulator(port).await;
    fx.provision().await;
    port = fx.serve("serve-1", port, true).await;
    let base = format!("http://127.0.0.1:{port}");
    let cid = fx.open_window(&base).await;

    // The first sends are taken by the network but their answers held back: they are
    // surely under way at the kill, and only their status webhooks can settle them.
    let r = fx
        .http
        .post(fx.sim_url(&format!("/_sim/numbers/{PNID}/force")))
        .json(&json!({"action": "hang", "ms": 120_000, "accept": true, "times": HELD}))
        .send()
        .await
        .unwrap();
    assert!(r.status().is_success(), "force hang: {r:?}");

    // Load: N requests with unique keys from a few clients; kill -9 mid-way.
    let requests: Vec<Arc<Request>> = (0..N).map(|i| Arc::new(request(label, i))).collect();
    let accepted = Arc::new(AtomicUsize::new(0));
    let kill_now = Arc::new(tokio::sync::Notify::new());
    let mut clients = JoinSet::new();
    for c in 0..CLIENTS {
        let mine: Vec<(usize, Arc<Request>)> = (c..N)
            .step_by(CLIENTS)
            .map(|i| (i, requests[i].clone()))
            .collect();
        let (http, base, key) = (fx.http.clone(), base.clone(), fx.api_key.clone());
        let (accepted, kill_now) = (accepted.clone(), kill_now.clone());
        clients.spawn(async move {
            let mut out = Vec::new();
            for (i, r) in mine {
                let a = post_message(&http, &base, &key, &r).await;
                if matches!(a, Answer::Message { status: 202, .. })
                    && accepted.fetch_add(1, Ordering::SeqCst) + 1 == KILL_AFTER
                {
                    kill_now.notify_one();
                }
                out.push((i, a));
            }
            out
        });
    }
    tokio::time::timeout(Duration::from_secs(300), kill_now.notified())
        .await
        .unwrap_or_else(|_| {
            panic!(
                "{label}: fewer than {KILL_AFTER} requests were accepted within 300 s ({} were)",
                accepted.load(Ordering::SeqCst)
            )
        });
    let (_, server) = fx.servers.pop().unwrap();
    server.kill_9();
    let accepted_at_kill = accepted.load(Ordering::SeqCst);
    let mut first: Vec<Option<Answer>> = vec![None; N];
    while let Some(done) = clients.join_next().await {
        for (i, a) in done.unwrap() {
            first[i] = Some(a);
        }
    }
    let first: Vec<Answer> = first.into_iter().map(Option::unwrap).collect();
    let reached_before_restart = fx.network_sends().await.len();

    // The first round: 202 for what the server accepted; no answer for what was cut off or
    // came after the kill. A 4xx (or a replay of a fresh key) would be a bug.
    let mut ids: Vec<Option<String>> = vec![None; N];
    let mut retry = Vec::new();
    for (i, a) in first.iter().enumerate() {
        match a {
            Answer::Message { status: 202, id } => ids[i] = Some(id.clone()),
            Answer::Message { status, id } => {
                panic!("{label}: request {i} with a fresh key answered {status} for {id}")
            }
            Answer::Refused { status, body } if *status >= 500 => {
                eprintln!("{label}: request {i} answered {status} before the kill: {body}");
                retry.push(i);
            }
            Answer::Refused { status, body } => {
                panic!("{label}: request {i} refused with {status}: {body}")
            }
            Answer::Unanswered(_) => retry.push(i),
        }
    }
    let answered_202 = N - retry.len();
    assert!(
        !retry.is_empty() && answered_202 < N,
        "{label}: the kill did not land mid-load: all {N} requests were answered"
    );
    let sample_errors: std::collections::BTreeSet<&str> = retry
        .iter()
        .filter_map(|i| match &first[*i] {
            Answer::Unanswered(e) => e.rsplit(": ").next(),
            _ => None,
        })
        .collect();
    eprintln!(
        "{label}: killed after {accepted_at_kill} answers 202; first round: {answered_202} \
         answered 202, {} unanswered ({sample_errors:?}); {reached_before_restart} sends \
         had reached the network",
        retry.len()
    );

    // Restart on the same port and database; the client repeats every unanswered request
    // with the same key and body.
    port = fx.serve("serve-2", port, true).await;
    let base = format!("http://127.0.0.1:{port}");
    let (mut replayed, mut fresh) = (0, 0);
    for &i in &retry {
        match post_message(&fx.http, &base, &fx.api_key, &requests[i]).await {
            Answer::Message { status, id } => {
                if status == 200 {
                    replayed += 1;
                } else {
                    fresh += 1;
                }
                ids[i] = Some(id);
            }
            other => panic!("{label}: repeating request {i} after the restart: {other:?}"),
        }
    }
    eprintln!(
        "{label}: repeated {} requests after the restart: {replayed} answered 200 (accepted \
         before the kill, answer lost), {fresh} answered 202",
        retry.len()
    );
    let ids: Vec<String> = ids.into_iter().map(Option::unwrap).collect();
    let distinct: HashSet<&String> = ids.iter().collect();
    assert_eq!(
        distinct.len(),
        N,
        "{label}: {N} distinct keys must give {N} distinct messages"
    );

    // Everything settles: claims cut off by the kill only after lease + grace.
    let lease = tern_engine::dispatch::DispatchConfig::default().lease;
    let limit = lease + Duration::from_secs(GRACE_SECS) + Duration::from_secs(240);
    let list = fx.wait_settled(&base, &cid, N, SETTLED, limit).await;

    // (e) One message per key, and exactly the ones the client was given.
    let listed: HashSet<String> = list
        .iter()
        .map(|m| m["id"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(
        list.len(),
        N,
        "{label}: {} outbound messages stored for {N} idempotency keys (by status {:?})",
        list.len(),
        count_by_status(&list)
    );
    let answered: HashSet<String> = ids.iter().cloned().collect();
    assert_eq!(
        listed, answered,
        "{label}: the stored messages are not the ones the client was given"
    );

    // (a) Every id the client was given can be read.
    let mut finals: HashMap<String, Value> = HashMap::new();
    for id in &ids {
        let r = fx
            .http
            .get(format!("{base}{API}/messages/{id}"))
            .bearer_auth(&fx.api_key)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200, "{label}: GET /messages/{id}");
        let m: Value = r.json().await.unwrap();
        assert_eq!(m["id"], id.as_str());
        finals.insert(id.clone(), m);
    }

    // (b) Nothing reached the network twice: no Tern id in two send requests (any request
    // that got to the simulator counts, whatever became of it).
    let sends = fx.network_sends().await;
    let mut by_id: HashMap<String, Vec<&Value>> = HashMap::new();
    for s in &sends {
        let tern_id = tern_id_of(s)
            .unwrap_or_else(|| panic!("{label}: a send without biz_opaque_callback_data: {s}"));
        by_id.entry(tern_id.to_string()).or_default().push(s);
    }
    let twice: Vec<(&String, Vec<Value>)> = by_id
        .iter()
        .filter(|(_, v)| v.len() > 1)
        .map(|(id, v)| (id, v.iter().map(|s| brief_send(s)).collect()))
        .collect();
    assert!(
        twice.is_empty(),
        "{label}: {} messages reached the network more than once: {twice:?}",
        twice.len()
    );
    let strangers: Vec<&String> = by_id.keys().filter(|id| !answered.contains(*id)).collect();
    assert!(
        strangers.is_empty(),
        "{label}: sends of unknown messages: {strangers:?}"
    );
    // The network refuses nothing here (no answer at all is possible: a forced hang, or a
    // request cut off by the kill).
    let refused: Vec<Value> = sends
        .iter()
        .filter(|s| !(s["response_status"] == 200 || s["response_status"].is_null()))
        .map(brief_send)
        .collect();
    assert!(
        refused.is_empty(),
        "{label}: the network refused sends: {refused:?}"
    );
    // What the network took (and sends statuses for).
    let taken: HashSet<String> = fx
        .network_accepted()
        .await
        .iter()
        .filter_map(|m| m["biz_opaque_callback_data"].as_str().map(str::to_owned))
        .collect();

    // (c) and (d): taken by the network → sent/delivered/read (its status webhooks settle
    // it even when the send call's answer was lost); not taken → never sent, so it can only
    // be a claim cut off by the kill: failed as network_outcome_unknown.
    let mut violations = Vec::new();
    let (mut outcome_unknown, mut left_untaken) = (0, 0);
    for id in &ids {
        let m = &finals[id];
        let status = m["status"].as_str().unwrap_or("");
        let unknown = status == "failed"
            && m["failure_code"] == tern_engine::dispatch::FAILURE_OUTCOME_UNKNOWN;
        if taken.contains(id) {
            if !SENT.contains(&status) {
                violations.push(format!("taken by the network but ended {status}: {m}"));
            }
        } else if unknown {
            outcome_unknown += 1;
            if by_id.contains_key(id) {
                // The request got to the simulator, which never processed it (cut off).
                left_untaken += 1;
            }
        } else {
            violations.push(format!(
                "never taken by the network (requests: {}) but ended {status}: {m}",
                by_id.get(id).map_or(0, Vec::len)
            ));
        }
    }
    if !violations.is_empty() {
        let mut detail = String::new();
        for v in violations.iter().take(20) {
            detail.push_str(&format!("\n  {v}"));
        }
        panic!(
            "{label}: {} messages ended wrongly (by status {:?}):{detail}",
            violations.len(),
            count_by_status(&list)
        );
    }
    // Only claims held at the kill can be cut off: at most one dispatcher's send slots, and
    // only messages accepted before the restart.
    let max_in_flight = tern_engine::dispatch::DispatchConfig::default().max_in_flight;
    let bound = max_in_flight.min(answered_202 + replayed);
    assert!(
        outcome_unknown <= bound,
        "{label}: {outcome_unknown} messages failed as outcome unknown, more than the {bound} \
         claims that can have been in flight at the kill"
    );
    // No status is lost either: webhooks the killed server had stored (answered 200) but
    // not processed are processed after the restart, once their inbox lease has run out.
    let all_read = fx
        .wait_statuses(&base, &cid, &taken, "read", Duration::from_secs(60 + 180))
        .await;
    let (failed_posts, retried_posts, undelivered_posts) = fx.webhook_summary().await;
    let counts = count_by_status(&finals.values().cloned().collect::<Vec<_>>());
    eprintln!(
        "{label}: OK: {N} messages; {} taken by the network, each once; states when all had \
         settled {counts:?}, later {:?}; \
         {outcome_unknown} cut-off claims failed as {} ({left_untaken} of them had reached the \
         simulator unprocessed); webhooks: {failed_posts} failed attempts, {retried_posts} posts \
         delivered after a retry, {undelivered_posts} not (yet) delivered",
        taken.len(),
        count_by_status(&all_read),
        tern_engine::dispatch::FAILURE_OUTCOME_UNKNOWN
    );
    fx.finish().await;
}

// ---------------------------------------------------------------------------------------
// Two servers, one PostgreSQL
// ---------------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_servers_on_one_postgres_send_each_message_once() {
    const N: usize = 200;
    const CLIENTS: usize = 4;
    const SHARED_KEYS: usize = 5;
    let label = "two-servers";

    let mut fx = Fixture::new(label, Backend::Postgres).await;
    let port_a = free_port();
    fx.start_simulator(port_a).await;
    fx.provision().await;
    // A receives the network's webhooks; both dispatch from the shared queue.
    let port_a = fx.serve("serve-a", port_a, true).await;
    let port_b = fx.serve("serve-b", free_port(), false).await;
    let (a, b) = (
        format!("http://127.0.0.1:{port_a}"),
        format!("http://127.0.0.1:{port_b}"),
    );
    let cid = fx.open_window(&a).await;

    // N messages alternating between the servers, from a few clients; meanwhile a few keys
    // are sent to both servers at once.
    let requests: Vec<Arc<Request>> = (0..N).map(|i| Arc::new(request(label, i))).collect();
    let mut clients = JoinSet::new();
    for c in 0..CLIENTS {
        let mine: Vec<(usize, Arc<Request>)> = (c..N)
            .step_by(CLIENTS)
            .map(|i| (i, requests[i].clone()))
            .collect();
        let (http, key) = (fx.http.clone(), fx.api_key.clone());
        let bases = [a.clone(), b.clone()];
        clients.spawn(async move {
            let mut out = Vec::new();
            for (i, r) in mine {
                out.push((i, post_message(&http, &bases[i % 2], &key, &r).await));
            }
            out
        });
    }
    let shared: Vec<Request> = (0..SHARED_KEYS)
        .map(|i| request("two-servers-shared", i))
        .collect();
    let mut shared_ids = Vec::new();
    for (i, r) in shared.iter().enumerate() {
        let (x, y) = tokio::join!(
            post_message(&fx.http, &a, &fx.api_key, r),
            post_message(&fx.http, &b, &fx.api_key, r)
        );
        match (&x, &y) {
            (Answer::Message { status: sx, id: ix }, Answer::Message { status: sy, id: iy }) => {
                let mut statuses = [*sx, *sy];
                statuses.sort_unstable();
                assert_eq!(
                    statuses,
                    [200, 202],
                    "shared key {i}: one server accepts, the other replays: {x:?} / {y:?}"
                );
                assert_eq!(ix, iy, "shared key {i}: both answers name one message");
                shared_ids.push(ix.clone());
            }
            _ => panic!("shared key {i}: {x:?} / {y:?}"),
        }
    }
    let mut ids: Vec<String> = vec![String::new(); N];
    while let Some(done) = clients.join_next().await {
        for (i, ans) in done.unwrap() {
            match ans {
                Answer::Message { status: 202, id } => ids[i] = id,
                other => panic!("request {i} to server {}: {other:?}", i % 2),
            }
        }
    }
    ids.extend(shared_ids);
    let answered: HashSet<String> = ids.iter().cloned().collect();
    assert_eq!(
        answered.len(),
        N + SHARED_KEYS,
        "distinct keys give distinct messages"
    );

    // No crash here: every message must be sent (and usually delivered and read).
    let list = fx
        .wait_settled(&a, &cid, N + SHARED_KEYS, SENT, Duration::from_secs(240))
        .await;
    let listed: HashSet<String> = list
        .iter()
        .map(|m| m["id"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(
        list.len(),
        N + SHARED_KEYS,
        "{} messages stored for {} keys",
        list.len(),
        N + SHARED_KEYS
    );
    assert_eq!(
        listed, answered,
        "the stored messages are the ones the clients were given"
    );

    // Each message reached the network exactly once, whichever server accepted it.
    let sends = fx.network_sends().await;
    let mut per_id: HashMap<String, usize> = HashMap::new();
    for s in &sends {
        assert_eq!(s["response_status"], 200, "the network refused a send: {s}");
        let tern_id = tern_id_of(s).unwrap().to_string();
        *per_id.entry(tern_id).or_insert(0) += 1;
    }
    let wrong: Vec<(&String, usize)> = answered
        .iter()
        .map(|id| (id, per_id.get(id).copied().unwrap_or(0)))
        .filter(|(_, n)| *n != 1)
        .collect();
    assert!(
        wrong.is_empty(),
        "messages not sent exactly once (id, sends): {wrong:?}"
    );
    assert_eq!(
        sends.len(),
        N + SHARED_KEYS,
        "no other sends reached the network"
    );
    eprintln!(
        "{label}: OK: {} messages through two servers, each sent once; final states {:?}",
        list.len(),
        count_by_status(&list)
    );
    fx.finish().await;
}
