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

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Backend {
    Sqlite,
    Postgres,
}

// ---------------------------------------------------------------------------------------
// Child processes
// ---------------------------------------------------------------------------------------

/// A `tern` child process writing stdout and stderr to a log file; killed (SIGKILL) when
/// dropped.
struct Proc {
    child: Child,
}

impl Proc {
    fn spawn(dir: &Path, log: &Path, args: &[String], env: &[(String, String)]) -> Proc {
        let file = std::fs::File::create(log).unwrap();
        let child = Command::new(BIN)
            .current_dir(dir)
            .env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .envs(env.iter().map(|(k, v)| (k, v)))
            .args(args)
            .stdin(Stdio::null())
            .stdout(file.try_clone().unwrap())
            .stderr(file)
            .spawn()
            .unwrap();
        Proc { child }
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }

    fn has_exited(&mut self) -> bool {
        !matches!(self.child.try_wait(), Ok(None))
    }

    /// `kill -9 PID`, then reaps the process.
    fn kill_9(mut self) {
        let status = Command::new("kill")
            .args(["-9", &self.pid().to_string()])
            .status()
            .expect("run kill");
        assert!(status.success(), "kill -9 {} failed", self.pid());
        let exit = self.child.wait().unwrap();
        assert!(!exit.success(), "killed server exited with {exit:?}");
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        if matches!(self.child.try_wait(), Ok(None)) {
            let _ = self.child.kill();
        }
        let _ = self.child.wait();
    }
}

/// A free port below Linux's ephemeral range (32768–60999): no outgoing connection of the
/// (parallel) test suite can take it while a killed server is down, so a restart on the same
/// port (the simulator's callback URL) works.
fn free_port() -> u16 {
    for _ in 0..500 {
        let port: u16 = rand::random_range(20_000..32_000);
        if std::net::TcpListener::bind(("127.0.0.1", port)).is_ok() {
            return port;
        }
    }
    panic!("no free port found");
}

fn tail(path: &Path, lines: usize) -> String {
    let text = std::fs::read(path)
        .map(|b| String::from_utf8_lossy(&b).into_owned())
        .unwrap_or_else(|e| format!("(cannot read {}: {e})", path.display()));
    let all: Vec<&str> = text.lines().collect();
    let warnings: Vec<&str> = all
        .iter()
        .copied()
        .filter(|l| l.contains("WARN") || l.contains("ERROR") || l.contains("panicked"))
        .collect();
    let mut out = String::new();
    if !warnings.is_empty() {
        out.push_str(&format!(
            "  -- {} warning/error lines (last 40):\n",
            warnings.len()
        ));
        for l in &warnings[warnings.len().saturating_sub(40)..] {
            out.push_str(&format!("  {l}\n"));
        }
    }
    out.push_str(&format!("  -- last {lines} lines:\n"));
    for l in &all[all.len().saturating_sub(lines)..] {
        out.push_str(&format!("  {l}\n"));
    }
    out
}

// ---------------------------------------------------------------------------------------
// The fixture: database, simulator, servers
// ---------------------------------------------------------------------------------------

struct Fixture {
    label: &'static str,
    // Children first: they are killed before the directory holding their files goes.
    servers: Vec<(u16, Proc)>,
    sim: Option<Proc>,
    sim_port: u16,
    db_url: String,
    /// The test's own handle on the servers' database (diagnostics, checks).
    db: Db,
    schema: Option<String>,
    http: reqwest::Client,
    logs: Vec<(String, PathBuf)>,
    api_key: String,
    dir: tempfile::TempDir,
}

impl Drop for Fixture {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!("==== {}: logs of the child processes", self.label);
            for (name, path) in &self.logs {
                eprintln!("==== {name} ({})\n{}", path.display(), tail(path, 30));
            }
        }
        // The fields drop next: every child is killed.
    }
}

/// Creates a schema `t_<uuid>` (the test kit's naming, so `drop_test_schema` accepts it) in
/// the test database and returns (URL selecting it for any process, schema).
fn create_pg_schema() -> (String, String) {
    let base = tern_store::testkit::test_pg_url();
    let schema = format!("t_{}", uuid::Uuid::new_v4().simple());
    // The test kit does not tell which schema it created, and a child process needs a URL:
    // create the schema with psql (installed with PostgreSQL; scripts/services.sh uses it).
    let out = Command::new("psql")
        .arg(&base)
        .args(["-v", "ON_ERROR_STOP=1", "-qAtc"])
        .arg(format!("CREATE SCHEMA {schema}"))
        .output()
        .unwrap_or_else(|e| {
            panic!("psql is needed to create the PostgreSQL test schema ({e}); scripts/services.sh installs it")
        });
    assert!(
        out.status.success(),
        "CREATE SCHEMA via psql at {base} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let sep = if base.contains('?') { '&' } else { '?' };
    // libpq-style startup options, understood by sqlx: every connection's search_path.
    (
        format!("{base}{sep}options=-csearch_path%3D{schema}"),
        schema,
    )
}

impl Fixture {
    async fn new(label: &'static str, backend: Backend) -> Fixture {
        let dir = tempfile::tempdir().unwrap();
        let (db_url, db, schema) = match backend {
            Backend::Sqlite => {
                let url = format!("sqlite://{}", dir.path().join("tern.db").display());
                let db = Db::connect(&url).await.unwrap();
                (url, db, None)
            }
            Backend::Postgres => {
                let (url, schema) = create_pg_schema();
                let db = Db::connect_postgres_in_schema(
                    &tern_store::testkit::test_pg_url(),
                    &schema,
                    Some(2),
                )
                .await
                .unwrap();
                (url, db, Some(schema))
            }
        };
        Fixture {
            label,
            servers: Vec::new(),
            sim: None,
            sim_port: 0,
            db_url,
            db,
            schema,
            http: reqwest::Client::builder()
                .timeout(Duration::from_secs(60))
                .build()
                .unwrap(),
            logs: Vec::new(),
            api_key: String::new(),
            dir,
        }
    }

    fn log_path(&mut self, name: &str) -> PathBuf {
        let path = self
            .dir
            .path()
            .join(format!("{name}-{}.log", self.logs.len()));
        self.logs.push((name.to_string(), path.clone()));
        path
    }

    /// Spawns a child and waits until `health` answers 200; `Err` (with its log) if it exits
    /// first (e.g. its port was taken).
    async fn spawn_ready(
        &mut self,
        name: &str,
        args: Vec<String>,
        env: Vec<(String, String)>,
        health: String,
    ) -> Result<Proc, String> {
        let log = self.log_path(name);
        let mut proc = Proc::spawn(self.dir.path(), &log, &args, &env);
        let deadline = Instant::now() + START_TIMEOUT;
        loop {
            if let Ok(r) = self
                .http
                .get(&health)
                .timeout(Duration::from_secs(5))
                .send()
                .await
                && r.status() == 200
            {
                return Ok(proc);
            }
            if proc.has_exited() {
                return Err(format!("{name} exited at start:\n{}", tail(&log, 30)));
            }
            assert!(
                Instant::now() < deadline,
                "{name} did not answer {health} within {START_TIMEOUT:?}"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    fn sim_url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.sim_port)
    }

    fn callback_url(port: u16) -> String {
        format!("http://127.0.0.1:{port}/webhooks/whatsapp")
    }

    /// `tern simulator` with the number registered at a high throughput and no pair limit,
    /// immediate statuses, and webhook retries long enough to outlast a server restart.
    async fn start_simulator(&mut self, callback_port: u16) {
        let mut last_err = String::new();
        for _ in 0..3 {
            let port = free_port();
            let args: Vec<String> = [
                "simulator",
                "--listen",
                &format!("127.0.0.1:{port}"),
                "--callback-url",
                &Self::callback_url(callback_port),
                "--app-secret",
                APP_SECRET,
                "--verify-token",
                VERIFY_TOKEN,
                "--seed",
                "7",
                "--number",
                &format!("{PNID}:{DISPLAY}:{WABA}:{TOKEN}:1000"),
                "--sent-delay-ms",
                "0",
                "--delivered-delay-ms",
                "0",
                "--read-delay-ms",
                "0",
                "--pair-burst",
                "1000000",
                "--pair-period-ms",
                "1",
                "--no-window",
                "--webhook-max-attempts",
                "20",
                "--webhook-retry-base-ms",
                "100",
                "--webhook-timeout-ms",
                "10000",
            ]
            .map(String::from)
            .to_vec();
            let health = format!("http://127.0.0.1:{port}/_sim/health");
            match self
                .spawn_ready("simulator", args, Vec::new(), health)
                .await
            {
                Ok(p) => {
                    self.sim = Some(p);
                    self.sim_port = port;
                    return;
                }
                Err(e) => last_err = e,
            }
        }
        panic!("the simulator did not start: {last_err}");
    }

    fn env(&self) -> Vec<(String, String)> {
        vec![
            ("TERN_DATABASE_URL".into(), self.db_url.clone()),
            (
                "TERN_GRAPH_URL".into(),
                format!("http://127.0.0.1:{}", self.sim_port),
            ),
            ("TERN_APP_SECRET".into(), APP_SECRET.into()),
            ("TERN_VERIFY_TOKEN".into(), VERIFY_TOKEN.into()),
            (
                "TERN_MEDIA_STORE".into(),
                format!("file://{}", self.dir.path().join("media").display()),
            ),
            (
                "TERN_DISPATCH_UNKNOWN_GRACE_SECS".into(),
                GRACE_SECS.to_string(),
            ),
            ("TERN_LOG".into(), "info".into()),
        ]
    }

    /// `tern serve` on `port`.
    async fn start_server(&mut self, name: &str, port: u16) -> Result<(), String> {
        let mut env = self.env();
        env.push(("TERN_LISTEN".into(), format!("127.0.0.1:{port}")));
        let health = format!("http://127.0.0.1:{port}/healthz");
        let proc = self
            .spawn_ready(name, vec!["serve".into()], env, health)
            .await?;
        self.servers.push((port, proc));
        Ok(())
    }

    /// `tern serve` on `port`; should the port have been taken (by another test: it was
    /// only checked free), on another one, moving the simulator's callback there when
    /// `callback`. Returns the port.
    async fn serve(&mut self, name: &str, port: u16, callback: bool) -> u16 {
        let mut port = port;
        for _ in 0..3 {
            match self.start_server(name, port).await {
                Ok(()) => return port,
                Err(e) => {
                    eprintln!("{}: {name} on port {port} failed ({e}); moving", self.label);
                    port = free_port();
                    if callback {
                        let r = self
                            .http
                            .put(self.sim_url("/_sim/callback"))
                            .json(&json!({"url": Self::callback_url(port)}))
                            .send()
                            .await
                            .unwrap();
                        assert!(r.status().is_success(), "PUT /_sim/callback: {r:?}");
                    }
                }
            }
        }
        panic!("{}: {name} did not start", self.label);
    }

    /// `tern admin …`: must succeed and print one JSON object.
    async fn admin(&self, args: &[&str]) -> Value {
        let out = tokio::process::Command::new(BIN)
            .current_dir(self.dir.path())
            .env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .envs(self.env())
            .env("TERN_LOG", "warn")
            .arg("admin")
            .args(args)
            .output()
            .await
            .unwrap();
        assert!(
            out.status.success(),
            "tern admin {args:?} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
            panic!(
                "tern admin {args:?} printed no JSON ({e}): {}",
                String::from_utf8_lossy(&out.stdout)
            )
        })
    }

    /// Organisation, the simulator's number, an owner and their key, as an operator would.
    async fn provision(&mut self) {
        let org = self
            .admin(&["org", "create", "--name", "Crash Safety"])
            .await["id"]
            .as_str()
            .unwrap()
            .to_string();
        self.admin(&[
            "number",
            "add",
            "--org",
            &org,
            "--phone-number-id",
            PNID,
            "--display-phone-number",
            DISPLAY,
            "--waba-id",
            WABA,
            "--access-token",
            TOKEN,
        ])
        .await;
        let member = self
            .admin(&[
                "member",
                "add",
                "--org",
                &org,
                "--email",
                "owner@crash.test",
                "--role",
                "owner",
            ])
            .await["id"]
            .as_str()
            .unwrap()
            .to_string();
        self.api_key = self
            .admin(&[
                "key",
                "create",
                "--org",
                &org,
                "--member",
                &member,
                "--name",
                "crash",
                "--preset",
                "full_access",
            ])
            .await["key"]
            .as_str()
            .unwrap()
            .to_string();
        // The children wrote where the test looks (for PostgreSQL: the URL selected the schema).
        let found = self.db.get_org(org.parse().unwrap()).await.unwrap();
        assert!(
            found.is_some(),
            "the organisation created by `tern admin` is not in the test's database"
        );
    }

    /// The customer writes in (through the simulator, so both the network and Tern see the
    /// window open); returns the conversation once Tern has it open.
    async fn open_window(&self, base: &str) -> String {
        let r = self
            .http
            .post(self.sim_url("/_sim/inbound"))
            .json(
                &json!({"phone_number_id": PNID, "from": CUSTOMER, "profile_name": "Ada",
                          "type": "text", "text": {"body": "Hello!"}}),
            )
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 201, "inject inbound: {:?}", r.text().await);
        let deadline = Instant::now() + Duration::from_secs(120);
        loop {
            let v: Value = self
                .http
                .get(format!("{base}{API}/conversations"))
                .bearer_auth(&self.api_key)
                .send()
                .await
                .unwrap()
                .json()
                .await
                .unwrap();
            if let Some(c) = v["data"].as_array().and_then(|d| d.first())
                && c["window_state"] == "open"
            {
                return c["id"].as_str().unwrap().to_string();
            }
            assert!(
                Instant::now() < deadline,
                "the inbound message did not open a window in Tern: {v}"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Every outbound message of the conversation (all pages).
    async fn outbound_messages(&self, base: &str, cid: &str) -> Vec<Value> {
        let mut out = Vec::new();
        let mut cursor: Option<String> = None;
        loop {
            let mut url =
                format!("{base}{API}/conversations/{cid}/messages?direction=outbound&limit=100");
            if let Some(c) = &cursor {
                url.push_str(&format!("&cursor={c}"));
            }
            let r = self
                .http
                .get(&url)
                .bearer_auth(&self.api_key)
                .send()
                .await
                .unwrap();
            assert_eq!(r.status(), 200, "GET {url}");
            let v: Value = r.json().await.unwrap();
            out.extend(v["data"].as_array().unwrap().iter().cloned());
            match v["next_cursor"].as_str() {
                Some(c) => cursor = Some(c.to_string()),
                None => return out,
            }
        }
    }

    /// The simulator's log of send requests (POST …/messages).
    async fn network_sends(&self) -> Vec<Value> {
        let v: Value = self
            .http
            .get(self.sim_url("/_sim/requests?method=POST&path_contains=/messages"))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        v["data"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|r| r["path"].as_str().is_some_and(|p| p.ends_with("/messages")))
            .cloned()
            .collect()
    }

    async fn sim_get(&self, path: &str) -> Value {
        let r = self.http.get(self.sim_url(path)).send().await.unwrap();
        assert_eq!(r.status(), 200, "GET {path} on the simulator");
        r.json().await.unwrap()
    }

    /// The messages the simulator accepted (`GET /_sim/messages`).
    async fn network_accepted(&self) -> Vec<Value> {
        self.sim_get("/_sim/messages").await["data"]
            .as_array()
            .unwrap()
            .clone()
    }

    /// (failed webhook attempts, posts delivered after a retry, posts not delivered yet).
    async fn webhook_summary(&self) -> (usize, usize, usize) {
        let v = self.sim_get("/_sim/webhooks").await;
        let mut posts: HashMap<(u64, bool), (bool, bool)> = HashMap::new();
        let mut failed = 0;
        for d in v["data"].as_array().unwrap() {
            let key = (d["post_id"].as_u64().unwrap(), d["duplicate"] == true);
            let ok = d["response_status"] == 200;
            failed += usize::from(!ok);
            let e = posts.entry(key).or_insert((false, false));
            e.0 |= ok;
            e.1 |= ok && d["attempt"].as_u64() > Some(1);
        }
        let retried = posts.values().filter(|(_, r)| *r).count();
        let undelivered = posts.values().filter(|(ok, _)| !*ok).count();
        (failed, retried, undelivered)
    }

    /// Polls until the conversation holds at least `want` outbound messages and every one
    /// is in one of `done`; panics with the stragglers after `limit`.
    async fn wait_settled(
        &self,
        base: &str,
        cid: &str,
        want: usize,
        done: &[&str],
        limit: Duration,
    ) -> Vec<Value> {
        let deadline = Instant::now() + limit;
        let mut last_report = Instant::now();
        loop {
            let list = self.outbound_messages(base, cid).await;
            let pending: Vec<&Value> = list
                .iter()
                .filter(|m| !done.contains(&m["status"].as_str().unwrap_or("")))
                .collect();
            if list.len() >= want && pending.is_empty() {
                return list;
            }
            if last_report.elapsed() > Duration::from_secs(10) {
                eprintln!(
                    "{}: waiting: {} of {want} messages, {} not yet {done:?}: {:?}",
                    self.label,
                    list.len(),
                    pending.len(),
                    count_by_status(&list)
                );
                last_report = Instant::now();
            }
            if Instant::now() > deadline {
                let mut detail = String::new();
                for m in pending.iter().take(20) {
                    let id: uuid::Uuid = m["id"].as_str().unwrap().parse().unwrap();
                    let info = self.db.dispatch_info(id).await;
                    detail.push_str(&format!("\n  {m}\n    queue: {info:?}"));
                }
                panic!(
                    "{}: after {limit:?}, {} of {want} messages exist and {} are stuck outside \
                     {done:?} (by status {:?}); first ones:{detail}",
                    self.label,
                    list.len(),
                    pending.len(),
                    count_by_status(&list)
                );
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    }

    /// Polls until every message of `ids` has `status`; panics with the others after
    /// `limit`. Returns the conversation's outbound messages.
    async fn wait_statuses(
        &self,
        base: &str,
        cid: &str,
        ids: &HashSet<String>,
        status: &str,
        limit: Duration,
    ) -> Vec<Value> {
        let deadline = Instant::now() + limit;
        loop {
            let list = self.outbound_messages(base, cid).await;
            let behind: Vec<&Value> = list
                .iter()
                .filter(|m| ids.contains(m["id"].as_str().unwrap_or("")) && m["status"] != status)
                .collect();
            if behind.is_empty() {
                return list;
            }
            if Instant::now() > deadline {
                let mut detail = String::new();
                for m in behind.iter().take(20) {
                    let id: uuid::Uuid = m["id"].as_str().unwrap().parse().unwrap();
                    let info = self.db.dispatch_info(id).await;
                    detail.push_str(&format!("\n  {m}\n    queue: {info:?}"));
                }
                panic!(
                    "{}: after {limit:?}, {} messages the network took did not reach {status} \
                     (the network sent every status); first ones:{detail}",
                    self.label,
                    behind.len()
                );
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    }

    /// Kills the children and drops the PostgreSQL schema (success path only: on failure
    /// the schema is left for inspection).
    async fn finish(mut self) {
        self.servers.clear();
        self.sim = None;
        if self.schema.is_some() {
            self.db.clone().drop_test_schema().await.unwrap();
        }
    }
}

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
