//! `tern listen` and `tern trigger` end to end, on both backends: the real binary serving
//! (`tern serve`, killed with SIGKILL and started again mid-stream), the real binary
//! listening and forwarding to a local receiver written in Python that verifies every
//! request with the official Standard Webhooks library, and the real binary triggering.
//! Every event reaches the receiver exactly once, in order, across a server restart and a
//! listener restart (which resumes from its stored last event id).

use serde_json::{Value, json};
use std::io::{BufRead as _, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tern_store::testkit::Backend;

const BIN: &str = env!("CARGO_BIN_EXE_tern");
const PYTHON: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../.venv/bin/python");
const RECEIVER: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/it/cli/listen_receiver.py"
);

/// A child process whose stdout lines are collected; killed when dropped.
struct Proc {
    child: Child,
    lines: Arc<Mutex<Vec<String>>>,
}

impl Proc {
    fn spawn(mut cmd: Command) -> Proc {
        let mut child = cmd
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let lines = Arc::new(Mutex::new(Vec::new()));
        let out = child.stdout.take().unwrap();
        let sink = Arc::clone(&lines);
        std::thread::spawn(move || {
            for line in BufReader::new(out).lines() {
                let Ok(line) = line else { break };
                sink.lock().unwrap().push(line);
            }
        });
        Proc { child, lines }
    }

    fn lines(&self) -> Vec<String> {
        self.lines.lock().unwrap().clone()
    }

    /// Waits (bounded) until a line satisfies `pick`.
    async fn line(&self, what: &str, pick: impl Fn(&str) -> bool) -> String {
        crate::common::eventually_within(Duration::from_secs(30), what, || {
            let found = self.lines().into_iter().find(|l| pick(l));
            async move { found }
        })
        .await
    }

    fn kill(mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `tern serve` on `port` over `database_url`.
fn serve(database_url: &str, port: u16, ca: &std::path::Path) -> Proc {
    let mut c = Command::new(BIN);
    c.env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("TERN_DATABASE_URL", database_url)
        .env("TERN_LISTEN", format!("127.0.0.1:{port}"))
        .env("TERN_LOG", "warn")
        // The subscription's receiver is a loopback HTTPS server with its own CA.
        .env("TERN_ALLOW_NETWORKS", "127.0.0.1/32")
        .env("TERN_EXTRA_CA_FILE", ca)
        .arg("serve");
    let p = Proc::spawn(c);
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(
            std::time::Instant::now() < deadline,
            "nothing listens on {port}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    p
}

/// `tern listen` forwarding to `to`, its state in `state`.
fn listen(api: &str, key: &str, to: &str, state: &std::path::Path) -> Proc {
    let mut c = Command::new(BIN);
    c.env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("XDG_STATE_HOME", state)
        .args(["listen", "--api-url", api, "--key", key, "--forward-to", to])
        .args(["--events", "contact.consent,template.status"]);
    Proc::spawn(c)
}

/// `tern trigger TYPE`: its one JSON line.
fn trigger_cli(api: &str, key: &str, kind: &str) -> Value {
    let out = Command::new(BIN)
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .args(["trigger", kind, "--api-url", api, "--key", key])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "tern trigger failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// What the receiver verified, in arrival order: (event id, type).
fn forwarded(receiver: &Proc) -> Vec<(String, String)> {
    receiver
        .lines()
        .iter()
        .filter(|l| l.starts_with('{'))
        .map(|l| {
            let v: Value = serde_json::from_str(l).unwrap();
            assert_eq!(v["ok"], true, "the official library verified it: {v}");
            assert_eq!(v["webhook_id"], v["id"], "webhook-id is the event id");
            (
                v["id"].as_str().unwrap().to_string(),
                v["type"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

async fn wait_forwarded(receiver: &Proc, n: usize) -> Vec<(String, String)> {
    crate::common::eventually_within(Duration::from_secs(30), &format!("{n} forwarded"), || {
        let got = forwarded(receiver);
        async move { (got.len() >= n).then_some(got) }
    })
    .await
}

/// Waits until a `tern listen` holds the organisation's stream.
async fn held(db: &tern_store::Db, org: uuid::Uuid, not_by: Option<&str>) -> String {
    crate::common::eventually_within(Duration::from_secs(30), "the stream held", || async {
        let s = db.list_event_streams(org).await.unwrap();
        s.first()
            .and_then(|s| s.lease_owner.clone())
            .filter(|o| Some(o.as_str()) != not_by)
    })
    .await
}

async fn listen_forwards_every_event_once_across_restarts(backend: Backend) {
    let dir = tempfile::tempdir().unwrap();
    let (database_url, schema) = match backend {
        Backend::Sqlite => (
            format!("sqlite://{}", dir.path().join("t.db").display()),
            None,
        ),
        Backend::Postgres => {
            let (url, schema) = crate::common::create_pg_schema();
            (url, Some(schema))
        }
    };
    let db = tern_store::Db::connect(&database_url).await.unwrap();
    db.migrate().await.unwrap();
    let config = tern::config::Config::load(None).unwrap();
    let master = tern::app::master_key(&db, &config).await.unwrap();
    let seeded = tern_core::testkit::Seed::org("Listeners")
        .key("dev@listeners.test", tern_domain::auth::Preset::FullAccess)
        .create(&db, &master)
        .await;
    let org = seeded.org.id;
    let key = seeded.keys[0].plaintext.clone();
    let core = tern::app::state(db.clone(), master.clone(), &config)
        .core
        .clone();
    let files = crate::media::fixture::FileServer::start().await;

    let port = crate::common::free_port();
    let api = format!("http://127.0.0.1:{port}");
    let server = serve(&database_url, port, files.ca_file.path());
    let (_, secret) = tern_domain::events::stream::listen_secret(&key);
    let mut rc = Command::new(PYTHON);
    rc.args([RECEIVER, &secret]);
    let receiver = Proc::spawn(rc);
    let port_line = receiver
        .line("the receiver's port", |l| l.starts_with("PORT "))
        .await;
    let to = format!("http://127.0.0.1:{}/hook", &port_line[5..]);
    let state = dir.path().join("state");
    let listener = listen(&api, &key, &to, &state);
    let shown = listener
        .line("the secret", |l| l.starts_with("Signing secret: "))
        .await;
    assert_eq!(
        shown,
        format!("Signing secret: {secret}"),
        "derived from the key"
    );
    let first_owner = held(&db, org, None).await;

    // `tern trigger` reaches a subscription and the stream.
    let (s, _, b) = crate::common::send(
        reqwest::Client::new()
            .post(format!("{api}/api/public/v1/webhook-subscriptions"))
            .bearer_auth(&key)
            .json(&json!({"url": files.url("/hook/204"), "events": ["template.status"]})),
    )
    .await;
    assert_eq!(s, 201, "{b}");
    let t = trigger_cli(&api, &key, "template.status");
    assert_eq!(t["recipients"], 2, "{t}");
    let mut want = vec![(
        t["event_id"].as_str().unwrap().to_string(),
        "template.status".to_string(),
    )];
    let hooks =
        crate::common::eventually_within(Duration::from_secs(30), "the subscription", || {
            let n = files.hooks.lock().unwrap().len();
            async move { (n > 0).then_some(n) }
        })
        .await;
    assert_eq!(hooks, 1);
    let principal = seeded.principal();
    let fire = |n: usize| {
        let (core, principal) = (core.clone(), principal.clone());
        async move {
            let mut ids = Vec::new();
            for _ in 0..n {
                let kind = tern_domain::events::EventType::ContactConsent;
                let t = tern_core::webhooks::trigger::trigger(&core, &principal, kind)
                    .await
                    .unwrap();
                ids.push((t.event_id.to_string(), "contact.consent".to_string()));
            }
            ids
        }
    };
    want.extend(fire(3).await);
    assert_eq!(wait_forwarded(&receiver, want.len()).await, want);

    // The server dies mid-stream; events are written while it is down and after it is back.
    server.kill();
    want.extend(fire(2).await);
    let server = serve(&database_url, port, files.ca_file.path());
    want.extend(fire(2).await);
    assert_eq!(
        wait_forwarded(&receiver, want.len()).await,
        want,
        "none missed, none twice"
    );

    // The listener stops; it resumes from the last event id it stored.
    held(&db, org, Some(&first_owner)).await;
    let last = want.last().unwrap().0.clone();
    // Stored after the local answer: wait for it before stopping the listener.
    let stored = state
        .join("tern")
        .join(format!("listen-{}.json", &key[..12]));
    crate::common::eventually_within(Duration::from_secs(30), "the stored id", || {
        let text = std::fs::read_to_string(&stored).unwrap_or_default();
        let has = text.contains(&last);
        async move { has.then_some(()) }
    })
    .await;
    listener.kill();
    want.extend(fire(2).await);
    let listener = listen(&api, &key, &to, &state);
    listener
        .line("resuming", |l| l == format!("Resuming after event {last}"))
        .await;
    assert_eq!(wait_forwarded(&receiver, want.len()).await, want);
    want.extend(fire(1).await);
    assert_eq!(wait_forwarded(&receiver, want.len()).await, want);
    // One line per event: time, type, id and the local answer.
    for (id, kind) in &want[want.len() - 3..] {
        listener
            .line("the event's line", |l| {
                l.contains(&format!("  {kind}  {id}  -> 204"))
            })
            .await;
    }
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(forwarded(&receiver), want, "nothing more");

    drop((listener, receiver, server));
    files.stop();
    drop(core);
    if schema.is_some() {
        db.drop_test_schema().await.unwrap();
    }
}

tern_store::both_backends! { Backend;
    listen_forwards_every_event_once_across_restarts,
}
