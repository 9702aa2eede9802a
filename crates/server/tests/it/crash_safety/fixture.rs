//! The crash-safety fixture: a database, the simulator and `tern serve` child processes.

use super::*;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Backend {
    Sqlite,
    Postgres,
}

// ---------------------------------------------------------------------------------------
// Child processes
// ---------------------------------------------------------------------------------------

/// A `tern` child process writing stdout and stderr to a log file; killed (SIGKILL) when
/// dropped.
pub(super) struct Proc {
    pub(super) child: Child,
}

impl Proc {
    pub(super) fn spawn(dir: &Path, log: &Path, args: &[String], env: &[(String, String)]) -> Proc {
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

    pub(super) fn pid(&self) -> u32 {
        self.child.id()
    }

    pub(super) fn has_exited(&mut self) -> bool {
        !matches!(self.child.try_wait(), Ok(None))
    }

    /// `kill -9 PID`, then reaps the process.
    pub(super) fn kill_9(mut self) {
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

pub(super) fn tail(path: &Path, lines: usize) -> String {
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

pub(super) struct Fixture {
    pub(super) label: &'static str,
    // Children first: they are killed before the directory holding their files goes.
    pub(super) servers: Vec<(u16, Proc)>,
    pub(super) sim: Option<Proc>,
    pub(super) sim_port: u16,
    pub(super) db_url: String,
    /// The test's own handle on the servers' database (diagnostics, checks).
    pub(super) db: Db,
    pub(super) schema: Option<String>,
    pub(super) http: reqwest::Client,
    pub(super) logs: Vec<(String, PathBuf)>,
    pub(super) api_key: String,
    /// The organisation `provision` created.
    pub(super) org_id: String,
    /// More environment for every child (`tern serve`, `tern admin`).
    pub(super) extra_env: Vec<(String, String)>,
    pub(super) dir: tempfile::TempDir,
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

impl Fixture {
    pub(super) async fn new(label: &'static str, backend: Backend) -> Fixture {
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
            org_id: String::new(),
            extra_env: Vec::new(),
            dir,
        }
    }

    pub(super) fn log_path(&mut self, name: &str) -> PathBuf {
        let path = self
            .dir
            .path()
            .join(format!("{name}-{}.log", self.logs.len()));
        self.logs.push((name.to_string(), path.clone()));
        path
    }

    /// Spawns a child and waits until `health` answers 200; `Err` (with its log) if it exits
    /// first (e.g. its port was taken).
    pub(super) async fn spawn_ready(
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

    pub(super) fn sim_url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.sim_port)
    }

    pub(super) fn callback_url(port: u16) -> String {
        format!("http://127.0.0.1:{port}/webhooks/whatsapp")
    }

    /// `tern simulator` with the number registered at a high throughput and no pair limit,
    /// immediate statuses, and webhook retries long enough to outlast a server restart.
    pub(super) async fn start_simulator(&mut self, callback_port: u16) {
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

    /// The environment of every child: the fixture's, then `extra_env` (which wins).
    pub(super) fn env(&self) -> Vec<(String, String)> {
        let mut env: Vec<(String, String)> = Vec::new();
        env.extend([
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
        ]);
        // Later entries win (`Command::envs` sets them in order).
        env.extend(self.extra_env.iter().cloned());
        env
    }

    /// `tern serve` on `port`.
    pub(super) async fn start_server(&mut self, name: &str, port: u16) -> Result<(), String> {
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
    pub(super) async fn serve(&mut self, name: &str, port: u16, callback: bool) -> u16 {
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
    pub(super) async fn admin(&self, args: &[&str]) -> Value {
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
    pub(super) async fn provision(&mut self) {
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
        self.org_id = org.clone();
        // The children wrote where the test looks (for PostgreSQL: the URL selected the schema).
        let found = self.db.get_org(org.parse().unwrap()).await.unwrap();
        assert!(
            found.is_some(),
            "the organisation created by `tern admin` is not in the test's database"
        );
    }

    /// The customer writes in (through the simulator, so both the network and Tern see the
    /// window open); returns the conversation once Tern has it open.
    pub(super) async fn open_window(&self, base: &str) -> String {
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
    pub(super) async fn outbound_messages(&self, base: &str, cid: &str) -> Vec<Value> {
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
    pub(super) async fn network_sends(&self) -> Vec<Value> {
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

    pub(super) async fn sim_get(&self, path: &str) -> Value {
        let r = self.http.get(self.sim_url(path)).send().await.unwrap();
        assert_eq!(r.status(), 200, "GET {path} on the simulator");
        r.json().await.unwrap()
    }

    /// The messages the simulator accepted (`GET /_sim/messages`).
    pub(super) async fn network_accepted(&self) -> Vec<Value> {
        self.sim_get("/_sim/messages").await["data"]
            .as_array()
            .unwrap()
            .clone()
    }

    /// (failed webhook attempts, posts delivered after a retry, posts not delivered yet).
    pub(super) async fn webhook_summary(&self) -> (usize, usize, usize) {
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
    pub(super) async fn wait_settled(
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
    pub(super) async fn wait_statuses(
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
    pub(super) async fn finish(mut self) {
        self.servers.clear();
        self.sim = None;
        if self.schema.is_some() {
            self.db.clone().drop_test_schema().await.unwrap();
        }
    }
}
