//! Test harness: a real `tern` server on 127.0.0.1:0 over a fresh SQLite file or a fresh
//! PostgreSQL schema, provisioned through the same admin code the CLI uses.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use serde_json::Value;
use std::net::SocketAddr;
use tern::config::Config;
use tern_core::testkit::{Seed, Seeded};
use tern_domain::auth::{Preset, Role};
use tern_domain::crypto::MasterKey;
use tern_store::Db;
use tokio::net::TcpListener;
use tokio::sync::oneshot;

pub const APP_SECRET: &str = "test-app-secret";
pub const VERIFY_TOKEN: &str = "test-verify-token";

pub use tern_store::testkit::Backend;

pub struct TestApp {
    pub base: String,
    pub addr: SocketAddr,
    pub http: reqwest::Client,
    pub db: Db,
    pub key: MasterKey,
    pub backend: Backend,
    /// A provisioned organisation with an owner and a developer.
    pub org_id: String,
    pub owner_id: String,
    pub developer_id: String,
    /// The Cloud API client of the app (also used by `admin`).
    pub cloud: tern_cloudapi::CloudApiClient,
    /// The server's core (e.g. to flush the request log).
    pub core: tern_core::Core,
    /// The built-in test network, when started with [`TestAppBuilder::test_network`].
    pub test_network: Option<std::sync::Arc<tern::test_network::SimNetwork>>,
    shutdown: Option<oneshot::Sender<()>>,
    server: Option<tokio::task::JoinHandle<()>>,
    workers: Option<tern::app::Workers>,
    /// The workers' one-pass functions ([`TestApp::settle`]).
    passes: tern::app::Passes,
    _tmp: Option<tempfile::TempDir>,
    /// Where this app's media files are (`TERN_MEDIA_STORE=file://…`).
    pub media_dir: std::path::PathBuf,
    _media_tmp: tempfile::TempDir,
}

/// `name` as an e-mail domain label.
fn other_slug(name: &str) -> String {
    name.to_lowercase().replace(' ', "-")
}

pub fn test_config() -> Config {
    // Defaults, as if no TERN_* variable were set.
    Config::load(None).expect("default config")
}

/// How a [`TestApp`] is started: `TestApp::builder(backend).workers().start().await`.
#[must_use]
pub struct TestAppBuilder {
    backend: Backend,
    workers: bool,
    test_network: bool,
    graph_url: Option<String>,
    configure: Vec<Configure>,
}

/// A change to an app's configuration.
type Configure = Box<dyn FnOnce(&mut Config)>;

impl TestAppBuilder {
    /// With the background workers running, as in `tern serve`.
    pub fn workers(mut self) -> Self {
        self.workers = true;
        self
    }

    /// With the test spaces' network running, as in `tern serve`.
    pub fn test_network(mut self) -> Self {
        self.test_network = true;
        self
    }

    /// With the Cloud API client pointed at `url` (e.g. a simulator's `base_url()`).
    pub fn graph(mut self, url: &str) -> Self {
        self.graph_url = Some(url.to_owned());
        self
    }

    /// With the configuration changed by `configure` (after the test defaults are set; in
    /// the order given).
    pub fn configure(mut self, configure: impl FnOnce(&mut Config) + 'static) -> Self {
        self.configure.push(Box::new(configure));
        self
    }

    pub async fn start(self) -> TestApp {
        let configure = self.configure;
        TestApp::start_configured(
            self.backend,
            (self.workers, self.test_network),
            self.graph_url.as_deref(),
            move |config| configure.into_iter().for_each(|f| f(config)),
        )
        .await
    }
}

/// The fixture of `tern_store::both_backends!` in these tests: an app without workers;
/// the tests are given `&TestApp`.
impl tern_store::testkit::Fixture for TestApp {
    type Arg<'a> = &'a TestApp;
    async fn start(backend: Backend) -> Self {
        TestApp::builder(backend).start().await
    }
    fn arg(&self) -> &TestApp {
        self
    }
    async fn stop(self) {
        TestApp::stop(self).await;
    }
}

impl TestApp {
    /// An app on a fresh database of `backend`, with an organisation ("Acme", growth), its
    /// owner and a developer.
    pub fn builder(backend: Backend) -> TestAppBuilder {
        TestAppBuilder {
            backend,
            workers: false,
            test_network: false,
            graph_url: None,
            configure: Vec::new(),
        }
    }

    /// Every way of starting an app (see [`TestAppBuilder`]).
    async fn start_configured(
        backend: Backend,
        (with_workers, with_test_network): (bool, bool),
        graph_url: Option<&str>,
        configure: impl FnOnce(&mut Config),
    ) -> TestApp {
        let (db, tmp) = match backend {
            Backend::Sqlite => {
                let (db, tmp) = tern_store::testkit::fresh_sqlite().await;
                (db, Some(tmp))
            }
            Backend::Postgres => (tern_store::testkit::fresh_postgres().await, None),
        };
        let key = MasterKey::from_bytes(MasterKey::generate());
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let mut config = test_config();
        config.public_url = format!("http://{addr}");
        config.app_secret = Some(APP_SECRET.to_string());
        config.verify_token = Some(VERIFY_TOKEN.to_string());
        if let Some(url) = graph_url {
            config.graph_url = url.trim_end_matches('/').to_string();
        }
        let media_tmp = tempfile::tempdir().unwrap();
        config.media_store = tern_core::media::Location::File(media_tmp.path().to_path_buf());
        configure(&mut config);
        let cloud = tern::app::cloud_client(&config).unwrap();
        let test_network = if with_test_network {
            let network = tern::test_network::SimNetwork::start(&key, &config.graph_version)
                .await
                .unwrap();
            network.call_back(addr);
            Some(network)
        } else {
            None
        };
        let state =
            tern::app::try_state_with(db.clone(), key.clone(), &config, test_network.clone())
                .unwrap();
        let passes = tern::app::Passes::new(state.core.clone(), &config);
        let core = state.core.clone();
        let workers = with_workers.then(|| {
            tern::app::Workers::start_full(
                &db,
                &state,
                tern::app::dispatch_config(&config),
                tern_engine::media::MediaWorkerConfig {
                    // Retries of a failed inbound download come quickly in tests.
                    base_backoff: std::time::Duration::from_millis(200),
                    max_backoff: std::time::Duration::from_millis(400),
                    poll_interval: std::time::Duration::from_millis(100),
                    ..Default::default()
                },
                tern::app::webhook_config(&config),
            )
        });
        let (tx, rx) = oneshot::channel::<()>();
        let server = tokio::spawn(async move {
            tern::app::serve_on(listener, state, async move {
                let _ = rx.await;
            })
            .await
            .unwrap();
        });
        let mut app = TestApp {
            base: format!("http://{addr}"),
            addr,
            http: reqwest::Client::new(),
            db,
            key,
            backend,
            org_id: String::new(),
            owner_id: String::new(),
            developer_id: String::new(),
            cloud,
            core,
            test_network,
            shutdown: Some(tx),
            server: Some(server),
            workers,
            passes,
            _tmp: tmp,
            media_dir: media_tmp.path().to_path_buf(),
            _media_tmp: media_tmp,
        };
        let acme = Seed::org("Acme")
            .member("owner@acme.test", Role::Owner)
            .member("dev@acme.test", Role::Developer)
            .create(&app.db, &app.key)
            .await;
        app.org_id = acme.org.id.to_string();
        app.owner_id = acme.members[0].id.to_string();
        app.developer_id = acme.members[1].id.to_string();
        app
    }

    /// Runs each worker's one pass until nothing moves (see `tern::app::Passes::settle`):
    /// for an app started without background workers.
    pub async fn settle(&self) -> tern::app::Settled {
        assert!(
            self.workers.is_none(),
            "settle is for an app without background workers"
        );
        self.passes.settle().await.unwrap()
    }

    pub async fn admin(&self, args: &[&str]) -> anyhow::Result<Value> {
        let cmd = tern::admin::parse(args)?;
        tern::admin::run_with_cloud(&self.db, &self.key, Some(&self.cloud), cmd).await
    }

    /// Another organisation (without members): its id.
    pub async fn new_org(&self, name: &str, plan: &str) -> String {
        self.seed(Seed::org(name).plan(plan))
            .await
            .org
            .id
            .to_string()
    }

    /// Another organisation (growth) whose owner holds a key with `preset`: (its id, the key).
    pub async fn other_org(&self, name: &str, preset: Preset) -> (String, String) {
        let other = self
            .seed(Seed::org(name).key(&format!("owner@{}.test", other_slug(name)), preset))
            .await;
        (other.org.id.to_string(), other.keys[0].plaintext.clone())
    }

    /// Writes `seed` (an organisation with what it holds) into this app's database.
    pub async fn seed(&self, seed: Seed) -> Seeded {
        seed.create(&self.db, &self.key).await
    }

    pub async fn member(&self, org: &str, email: &str, role: &str) -> String {
        let v = self
            .admin(&[
                "member", "add", "--org", org, "--email", email, "--role", role,
            ])
            .await
            .unwrap();
        v["id"].as_str().unwrap().to_string()
    }

    /// A key of the default organisation's owner with a preset.
    pub async fn owner_key(&self, preset: &str) -> (String, String) {
        self.key_for(&self.org_id, &self.owner_id, &["--preset", preset])
            .await
    }

    /// (key id, key) for a member, with `--preset P` or `--permissions a,b`.
    pub async fn key_for(&self, org: &str, member: &str, grant: &[&str]) -> (String, String) {
        let mut args = vec![
            "key", "create", "--org", org, "--member", member, "--name", "test",
        ];
        args.extend_from_slice(grant);
        let v = self.admin(&args).await.unwrap();
        (
            v["id"].as_str().unwrap().to_string(),
            v["key"].as_str().unwrap().to_string(),
        )
    }

    /// Defines the custom contact field `key` of type `kind` for this app's organisation,
    /// through `tern admin` as an operator does.
    pub async fn add_contact_field(&self, key: &str, label: &str, kind: &str) {
        self.admin(&[
            "contact-field",
            "add",
            "--org",
            &self.org_id,
            "--key",
            key,
            "--label",
            label,
            "--type",
            kind,
        ])
        .await
        .unwrap();
    }

    pub async fn add_number(&self, org: &str, pnid: &str, display: &str) {
        self.admin(&[
            "number",
            "add",
            "--org",
            org,
            "--phone-number-id",
            pnid,
            "--display-phone-number",
            display,
            "--waba-id",
            "waba1",
            "--access-token",
            "token",
        ])
        .await
        .unwrap();
    }

    /// POSTs a body to the network webhook, signed with the app secret.
    pub async fn post_network(&self, body: &[u8]) -> (u16, Value) {
        post_network_to(&self.http, &self.base, body).await
    }

    pub fn org_uuid(&self) -> uuid::Uuid {
        self.org_id.parse().unwrap()
    }

    pub fn url(&self, path: &str) -> String {
        format!("{}{}", self.base, path)
    }

    pub async fn get(
        &self,
        path: &str,
        key: Option<&str>,
    ) -> (u16, reqwest::header::HeaderMap, Value) {
        let mut req = self.http.get(self.url(path));
        if let Some(k) = key {
            req = req.bearer_auth(k);
        }
        send(req).await
    }

    pub async fn stop(mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
        if let Some(h) = self.server.take() {
            let _ = h.await;
        }
        if let Some(w) = self.workers.take() {
            w.stop().await;
        }
        let db = self.db.clone();
        if let Backend::Postgres = self.backend {
            db.drop_test_schema().await.unwrap();
        }
    }
}

/// Sends (`method`) a JSON body announced as `content_length` bytes but sends only a little more than
/// the server's limit, and reads the answer. For size limits: the server answers from `Content-Length` and closes, so
/// a client still writing megabytes would see a broken pipe instead of the answer.
pub async fn send_oversized(
    app: &TestApp,
    method: &str,
    path: &str,
    key: &str,
    content_length: usize,
) -> (u16, reqwest::header::HeaderMap, Value) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = tokio::net::TcpStream::connect(app.addr).await.unwrap();
    let head = format!(
        "{method} {path} HTTP/1.1\r\nHost: {}\r\nAuthorization: Bearer {key}\r\n\
         Content-Type: application/json\r\nContent-Length: {content_length}\r\n\
         Connection: close\r\n\r\n{{\"name\": \"",
        app.addr
    );
    stream.write_all(head.as_bytes()).await.unwrap();
    // Just past the server's limit: enough for it to refuse, little enough to sit in the
    // socket buffers once it stops reading.
    let sent = content_length.min(tern_api::JSON_BODY_LIMIT + 4096);
    stream.write_all(&vec![b'x'; sent]).await.unwrap();
    // Read until the answer's head and its Content-Length of body have arrived (the server
    // may keep the connection open waiting for the announced body, or reset it).
    let mut raw = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        let text = String::from_utf8_lossy(&raw).to_string();
        if let Some((head, body)) = text.split_once("\r\n\r\n") {
            let len = head
                .lines()
                .find_map(|l| {
                    let (k, v) = l.split_once(':')?;
                    k.eq_ignore_ascii_case("content-length")
                        .then(|| v.trim().parse::<usize>().ok())?
                })
                .unwrap_or(0);
            if body.len() >= len {
                break;
            }
        }
        let read = tokio::time::timeout(std::time::Duration::from_secs(10), stream.read(&mut buf))
            .await
            .expect("the answer arrives");
        match read {
            Ok(0) | Err(_) => break,
            Ok(n) => raw.extend_from_slice(&buf[..n]),
        }
    }
    let text = String::from_utf8_lossy(&raw).to_string();
    let (head, body) = text.split_once("\r\n\r\n").expect("an HTTP answer");
    let mut lines = head.lines();
    let status: u16 = lines
        .next()
        .and_then(|l| l.split(' ').nth(1))
        .and_then(|s| s.parse().ok())
        .expect("status line");
    let mut headers = reqwest::header::HeaderMap::new();
    for line in lines {
        if let Some((k, v)) = line.split_once(':')
            && let (Ok(k), Ok(v)) = (
                reqwest::header::HeaderName::from_bytes(k.trim().as_bytes()),
                reqwest::header::HeaderValue::from_str(v.trim()),
            )
        {
            headers.insert(k, v);
        }
    }
    let body = serde_json::from_str(body.trim()).unwrap_or(Value::Null);
    (status, headers, body)
}

pub async fn send(req: reqwest::RequestBuilder) -> (u16, reqwest::header::HeaderMap, Value) {
    let res = req.send().await.expect("request failed");
    let status = res.status().as_u16();
    let headers = res.headers().clone();
    let bytes = res.bytes().await.unwrap();
    let body = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
    (status, headers, body)
}

/// Asserts the flat error body of the contract and returns it.
pub fn assert_error(
    status: u16,
    headers: &reqwest::header::HeaderMap,
    body: &Value,
    want_status: u16,
    code: &str,
) {
    assert_eq!(status, want_status, "body: {body}");
    assert_eq!(body["code"], code, "body: {body}");
    assert!(body["message"].is_string());
    assert!(body["details"].is_object());
    assert!(body.get("error").is_none());
    let rid = headers
        .get("x-request-id")
        .expect("X-Request-Id")
        .to_str()
        .unwrap();
    assert_eq!(body["request_id"], rid);
    assert!(
        body["docs_url"]
            .as_str()
            .unwrap()
            .ends_with(&format!("/docs/errors/{code}"))
    );
    assert!(body["fix"].is_string());
}

/// Polls `probe` every 25 ms, at most `bound`, until it gives `Some`.
pub async fn eventually_within<T, F, Fut>(bound: std::time::Duration, what: &str, mut probe: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = std::time::Instant::now() + bound;
    loop {
        if let Some(v) = probe().await {
            return v;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "timed out waiting for {what}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(25)).await;
    }
}

/// Waits (bounded: 10 s) until Tern has accepted `n` of `sim`'s webhooks in all (an attempt
/// that failed, e.g. timed out on a busy machine, is retried by the simulator and counts
/// once it is accepted). The network delivers on its own time; what it delivered is then in
/// Tern's inbox, for [`TestApp::settle`] to apply.
pub async fn sim_delivered(sim: &tern_simulator::SimHandle, n: usize) {
    eventually_within(
        std::time::Duration::from_secs(10),
        &format!("the simulator's delivery {n}"),
        || async {
            let accepted = sim
                .deliveries()
                .iter()
                .filter(|d| d.response_status.is_some_and(|s| (200..300).contains(&s)))
                .count();
            (accepted >= n).then_some(())
        },
    )
    .await;
}

/// A free port below Linux's ephemeral range (32768–60999): no outgoing connection of the
/// (parallel) test suite can take it while a killed server is down, so a restart on the same
/// port (the simulator's callback URL) works.
pub fn free_port() -> u16 {
    for _ in 0..500 {
        let port: u16 = rand::random_range(20_000..32_000);
        if std::net::TcpListener::bind(("127.0.0.1", port)).is_ok() {
            return port;
        }
    }
    panic!("no free port found");
}

/// Creates a schema `t_<uuid>` (the test kit's naming, so `drop_test_schema` accepts it) in
/// the test database and returns (URL selecting it for any process, schema).
pub fn create_pg_schema() -> (String, String) {
    let base = tern_store::testkit::test_pg_url();
    let schema = format!("t_{}", uuid::Uuid::new_v4().simple());
    // The test kit does not tell which schema it created, and a child process needs a URL:
    // create the schema with psql (installed with PostgreSQL; scripts/services.sh uses it).
    let out = std::process::Command::new("psql")
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

/// POSTs a body to the network webhook of the server at `base`, signed with the app secret
/// (for tasks that do not borrow the [`TestApp`]).
pub async fn post_network_to(http: &reqwest::Client, base: &str, body: &[u8]) -> (u16, Value) {
    let sig = tern_cloudapi::sign(APP_SECRET.as_bytes(), body);
    let (s, _, b) = send(
        http.post(format!("{base}/webhooks/whatsapp"))
            .header("Content-Type", "application/json")
            .header("X-Hub-Signature-256", sig)
            .body(body.to_vec()),
    )
    .await;
    (s, b)
}
