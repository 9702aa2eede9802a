//! Black-box tests of the `tern` binary: admin JSON output and refusals, configuration
//! errors, and graceful shutdown.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use serde_json::Value;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

mod listen;
mod start;

struct Cli {
    dir: tempfile::TempDir,
    database_url: String,
    /// The PostgreSQL schema to drop afterwards.
    schema: Option<String>,
}

impl Drop for Cli {
    fn drop(&mut self) {
        if let Some(schema) = &self.schema {
            let _ = Command::new("psql")
                .arg(tern_store::testkit::test_pg_url())
                .args(["-qAtc", &format!("DROP SCHEMA IF EXISTS {schema} CASCADE")])
                .output();
        }
    }
}

impl Cli {
    /// The binary on a fresh SQLite database.
    fn new() -> Cli {
        let dir = tempfile::tempdir().unwrap();
        let database_url = format!("sqlite://{}", dir.path().join("t.db").display());
        Cli {
            dir,
            database_url,
            schema: None,
        }
    }

    /// The binary on a fresh PostgreSQL schema of the test database.
    fn postgres() -> Cli {
        let (database_url, schema) = crate::common::create_pg_schema();
        Cli {
            dir: tempfile::tempdir().unwrap(),
            database_url,
            schema: Some(schema),
        }
    }

    fn cmd(&self) -> Command {
        let mut c = Command::new(env!("CARGO_BIN_EXE_tern"));
        c.current_dir(self.dir.path())
            .env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("TERN_DATABASE_URL", &self.database_url);
        c
    }

    /// `tern serve` on `port`, its logs captured; answers once the port accepts.
    fn serve(&self, port: u16) -> Child {
        let child = self
            .cmd()
            .env("TERN_LISTEN", format!("127.0.0.1:{port}"))
            .arg("serve")
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        wait_for_port(port);
        child
    }

    fn run(&self, args: &[&str]) -> Output {
        self.cmd().args(args).output().unwrap()
    }

    /// Runs an admin command that must succeed and print exactly one JSON object.
    fn ok(&self, args: &[&str]) -> Value {
        let out = self.run(args);
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "{args:?} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(
            stdout.lines().count(),
            1,
            "one JSON line expected, got {stdout}"
        );
        let v: Value = serde_json::from_str(&stdout).unwrap();
        assert!(v.is_object());
        v
    }

    /// Runs a command that must be refused; returns stderr.
    fn refused(&self, args: &[&str]) -> String {
        let out = self.run(args);
        assert!(
            !out.status.success(),
            "{args:?} should fail, printed {}",
            String::from_utf8_lossy(&out.stdout)
        );
        assert!(out.stdout.is_empty(), "nothing on stdout on refusal");
        String::from_utf8_lossy(&out.stderr).to_string()
    }
}

fn id(v: &Value) -> String {
    v["id"].as_str().unwrap().to_string()
}

#[test]
fn provisioning_flow_and_refusals() {
    let cli = Cli::new();
    let org = cli.ok(&["admin", "org", "create", "--name", "Acme"]);
    assert_eq!(org["plan"], "growth");
    assert_eq!(org["features"]["public_api"], true);
    let org_id = id(&org);

    // org update: every setting, and refusals naming the bad value.
    let up = cli.ok(&[
        "admin",
        "org",
        "update",
        "--org",
        &org_id,
        "--subscription-status",
        "past_due",
        "--wallet-balance-minor",
        "5000",
        "--price",
        "marketing=99",
        "--rate-limit",
        "key-minute=10",
        "--allowance",
        "messages_sent=7",
        "--limit",
        "contacts=3",
        "--feature",
        "campaigns=off",
    ]);
    assert_eq!(up["subscription_status"], "past_due");
    assert_eq!(up["wallet"]["balance_minor"], 5000);
    assert_eq!(up["prices_minor"]["marketing"], 99);
    assert_eq!(up["rate_limits"]["key-minute"], 10);
    assert_eq!(up["allowances"]["messages_sent"], 7);
    assert_eq!(up["limits"]["contacts"], 3);
    assert_eq!(up["features"]["campaigns"], false);
    assert!(
        cli.refused(&[
            "admin", "org", "update", "--org", &org_id, "--plan", "platinum"
        ])
        .contains("platinum")
    );
    assert!(
        cli.refused(&[
            "admin",
            "org",
            "update",
            "--org",
            &org_id,
            "--rate-limit",
            "key-hour=5"
        ])
        .contains("key-hour")
    );
    assert!(
        cli.refused(&[
            "admin",
            "org",
            "update",
            "--org",
            &org_id,
            "--feature",
            "public_api=maybe"
        ])
        .contains("public_api")
    );
    assert!(
        cli.refused(&[
            "admin",
            "org",
            "update",
            "--org",
            &org_id,
            "--subscription-status",
            "frozen"
        ])
        .contains("frozen")
    );
    assert!(
        cli.refused(&[
            "admin",
            "org",
            "update",
            "--org",
            "00000000-0000-0000-0000-000000000000"
        ])
        .contains("does not exist")
    );

    // numbers
    let n = cli.ok(&[
        "admin",
        "number",
        "add",
        "--org",
        &org_id,
        "--phone-number-id",
        "555001",
        "--display-phone-number",
        "+44 20 7946 0958",
        "--waba-id",
        "w1",
        "--access-token",
        "secret-token",
    ]);
    assert_eq!(n["display_phone_number"], "+442079460958");
    assert_eq!(n["throughput_mps"], 80);
    assert!(
        !n.to_string().contains("secret-token"),
        "the access token is never printed"
    );
    assert!(
        cli.refused(&[
            "admin",
            "number",
            "add",
            "--org",
            &org_id,
            "--phone-number-id",
            "555001",
            "--display-phone-number",
            "+14155550100",
            "--waba-id",
            "w1",
            "--access-token",
            "t",
        ])
        .contains("already")
    );
    assert!(
        cli.refused(&[
            "admin",
            "number",
            "add",
            "--org",
            &org_id,
            "--phone-number-id",
            "555002",
            "--display-phone-number",
            "4155550100",
            "--waba-id",
            "w1",
            "--access-token",
            "t",
        ])
        .contains("country code")
    );
    let n = cli.ok(&[
        "admin",
        "number",
        "update",
        "--phone-number-id",
        "555001",
        "--status",
        "disconnected",
        "--throughput-mps",
        "20",
    ]);
    assert_eq!(n["status"], "disconnected");
    assert_eq!(n["throughput_mps"], 20);
    assert!(
        cli.refused(&[
            "admin",
            "number",
            "update",
            "--phone-number-id",
            "555001",
            "--status",
            "asleep"
        ])
        .contains("asleep")
    );
    assert!(
        cli.refused(&[
            "admin",
            "number",
            "update",
            "--phone-number-id",
            "nope",
            "--status",
            "connected"
        ])
        .contains("does not exist")
    );

    // members: a person without a password gets a one-time invite link.
    let added = cli.ok(&[
        "admin",
        "member",
        "add",
        "--org",
        &org_id,
        "--email",
        "Owner@Acme.test",
        "--role",
        "owner",
    ]);
    let invite_url = added["invite_url"].as_str().unwrap();
    assert!(
        invite_url.starts_with("http://127.0.0.1:8080/app/invite/") && invite_url.len() > 40,
        "{added}"
    );
    let owner = id(&added);
    let dev = id(&cli.ok(&[
        "admin",
        "member",
        "add",
        "--org",
        &org_id,
        "--email",
        "dev@acme.test",
        "--role",
        "developer",
    ]));
    assert!(
        cli.refused(&[
            "admin",
            "member",
            "add",
            "--org",
            &org_id,
            "--email",
            "owner@acme.test",
            "--role",
            "owner"
        ])
        .contains("already")
    );
    assert!(
        cli.refused(&[
            "admin", "member", "add", "--org", &org_id, "--email", "x@y.z", "--role", "boss"
        ])
        .contains("boss")
    );
    // The operator's recovery link for a person; an unknown email is refused.
    let reset = cli.ok(&["admin", "member", "reset", "--email", "OWNER@acme.test"]);
    assert_eq!(reset["email"], "owner@acme.test");
    assert!(
        reset["reset_url"]
            .as_str()
            .unwrap()
            .starts_with("http://127.0.0.1:8080/app/reset/"),
        "{reset}"
    );
    assert!(
        cli.refused(&["admin", "member", "reset", "--email", "nobody@acme.test"])
            .contains("nobody@acme.test")
    );

    // keys: developer cannot get sending; owner can.
    let err = cli.refused(&[
        "admin",
        "key",
        "create",
        "--org",
        &org_id,
        "--member",
        &dev,
        "--name",
        "k",
        "--preset",
        "send_messages",
    ]);
    assert!(err.contains("messages.send"), "{err}");
    let err = cli.refused(&[
        "admin",
        "key",
        "create",
        "--org",
        &org_id,
        "--member",
        &dev,
        "--name",
        "k",
        "--permissions",
        "campaigns.send",
    ]);
    assert!(err.contains("campaigns.send"), "{err}");
    let k = cli.ok(&[
        "admin",
        "key",
        "create",
        "--org",
        &org_id,
        "--member",
        &dev,
        "--name",
        "k",
        "--preset",
        "full_access",
    ]);
    let perms: Vec<&str> = k["permissions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p.as_str().unwrap())
        .collect();
    assert!(!perms.contains(&"messages.send") && perms.contains(&"developer.webhooks.manage"));
    let k = cli.ok(&[
        "admin",
        "key",
        "create",
        "--org",
        &org_id,
        "--member",
        &owner,
        "--name",
        "send",
        "--preset",
        "send_messages",
    ]);
    assert!(k["key"].as_str().unwrap().starts_with("tern_"));
    assert_eq!(k["mode"], "live", "{k}");
    assert_eq!(
        k.as_object().unwrap().len(),
        4,
        "exactly id, key, permissions, mode: {k}"
    );
    let key_id = id(&k);
    let r = cli.ok(&["admin", "key", "rotate", "--key-id", &key_id]);
    assert_ne!(r["key"], k["key"]);
    assert!(
        cli.refused(&["admin", "key", "rotate", "--key-id", &key_id])
            .contains("revoked")
    );
    cli.ok(&["admin", "key", "revoke", "--key-id", &id(&r)]);
    assert!(
        cli.refused(&["admin", "key", "revoke", "--key-id", &id(&r)])
            .contains("already revoked")
    );
    assert!(
        cli.refused(&[
            "admin",
            "key",
            "create",
            "--org",
            &org_id,
            "--member",
            &owner,
            "--name",
            "k",
            "--permissions",
            "messages.sned"
        ])
        .contains("messages.sned")
    );

    // A plan without the public API refuses key creation.
    let free = id(&cli.ok(&["admin", "org", "create", "--name", "Free", "--plan", "free"]));
    let fo = id(&cli.ok(&[
        "admin",
        "member",
        "add",
        "--org",
        &free,
        "--email",
        "o@free.test",
        "--role",
        "owner",
    ]));
    let err = cli.refused(&[
        "admin",
        "key",
        "create",
        "--org",
        &free,
        "--member",
        &fo,
        "--name",
        "k",
        "--preset",
        "read_only",
    ]);
    assert!(err.contains("plan_feature_unavailable"), "{err}");
    // A member of another organisation cannot be used.
    assert!(
        cli.refused(&[
            "admin",
            "key",
            "create",
            "--org",
            &free,
            "--member",
            &owner,
            "--name",
            "k",
            "--preset",
            "read_only"
        ])
        .contains("not a member")
    );

    // contact fields
    let f = cli.ok(&[
        "admin",
        "contact-field",
        "add",
        "--org",
        &org_id,
        "--key",
        "loyalty_tier",
        "--label",
        "Loyalty tier",
        "--type",
        "text",
    ]);
    assert_eq!(f["type"], "text");
    assert!(
        cli.refused(&[
            "admin",
            "contact-field",
            "add",
            "--org",
            &org_id,
            "--key",
            "loyalty_tier",
            "--label",
            "x",
            "--type",
            "text"
        ])
        .contains("already")
    );
    assert!(
        cli.refused(&[
            "admin",
            "contact-field",
            "add",
            "--org",
            &org_id,
            "--key",
            "Bad Key",
            "--label",
            "x",
            "--type",
            "text"
        ])
        .contains("--key")
    );
    assert!(
        cli.refused(&[
            "admin",
            "contact-field",
            "add",
            "--org",
            &org_id,
            "--key",
            "k2",
            "--label",
            "x",
            "--type",
            "color"
        ])
        .contains("color")
    );
}

#[test]
fn plan_count_limits_refuse_new_keys() {
    let cli = Cli::new();
    let org = id(&cli.ok(&[
        "admin", "org", "create", "--name", "Tiny", "--plan", "starter",
    ]));
    cli.ok(&[
        "admin",
        "org",
        "update",
        "--org",
        &org,
        "--limit",
        "api_keys=1",
    ]);
    let m = id(&cli.ok(&[
        "admin", "member", "add", "--org", &org, "--email", "a@b.co", "--role", "admin",
    ]));
    cli.ok(&[
        "admin",
        "key",
        "create",
        "--org",
        &org,
        "--member",
        &m,
        "--name",
        "one",
        "--preset",
        "read_only",
    ]);
    let err = cli.refused(&[
        "admin",
        "key",
        "create",
        "--org",
        &org,
        "--member",
        &m,
        "--name",
        "two",
        "--preset",
        "read_only",
    ]);
    assert!(err.contains("plan_limit_reached"), "{err}");
}

#[test]
fn bad_configuration_names_the_variable() {
    let cli = Cli::new();
    for (var, value) in [
        ("TERN_LISTEN", "not-an-address"),
        ("TERN_DATABASE_URL", "mysql://db"),
        ("TERN_SECRET_KEY", "too-short"),
        ("TERN_GRAPH_VERSION", "latest"),
        ("TERN_ALLOW_NETWORKS", "10.0.0.0/33"),
    ] {
        let out = cli
            .cmd()
            .env(var, value)
            .args(["migrate"])
            .output()
            .unwrap();
        assert!(!out.status.success());
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(var), "{var}: {err}");
    }
    let out = cli
        .cmd()
        .args(["--config", "/nonexistent/tern.toml", "migrate"])
        .output()
        .unwrap();
    assert!(!out.status.success());
}

#[test]
fn config_file_is_read_and_env_wins() {
    let cli = Cli::new();
    let path = cli.dir.path().join("tern.toml");
    std::fs::write(&path, "listen = \"bad address\"\n").unwrap();
    let out = cli
        .cmd()
        .args(["--config", path.to_str().unwrap(), "migrate"])
        .output()
        .unwrap();
    assert!(!out.status.success(), "the file's bad listen value is used");
    assert!(String::from_utf8_lossy(&out.stderr).contains("TERN_LISTEN"));
    let out = cli
        .cmd()
        .env("TERN_LISTEN", "127.0.0.1:0")
        .args(["--config", path.to_str().unwrap(), "migrate"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn openapi_command_prints_the_document() {
    let cli = Cli::new();
    let out = cli.run(&["openapi"]);
    assert!(out.status.success());
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(v["paths"]["/phone-numbers"]["get"].is_object());
}

#[test]
fn serve_exits_zero_on_sigterm_and_sigint() {
    for signal in ["-TERM", "-INT"] {
        serve_and_signal(signal);
    }
}

fn serve_and_signal(signal: &str) {
    let cli = Cli::new();
    let port = crate::common::free_port();
    let child = cli.serve(port);
    // A request carrying a key: the key must not appear in the logs.
    let secret = format!("tern_{}", "S".repeat(40));
    let response = raw_get(port, "/api/public/v1/phone-numbers", &secret);
    assert!(response.starts_with("HTTP/1.1 401"), "{response}");
    send_signal(&child, signal);
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{signal}: exit status {:?}",
        out.status
    );
    let logs = String::from_utf8_lossy(&out.stderr);
    assert!(logs.contains("request_id"), "{logs}");
    assert!(logs.contains("request finished"), "{logs}");
    assert!(!logs.contains(&secret), "the key leaked into the logs");
}

fn raw_get(port: u16, path: &str, key: &str) -> String {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    write!(s, "GET {path} HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer {key}\r\nConnection: close\r\n\r\n").unwrap();
    let mut buf = String::new();
    s.read_to_string(&mut buf).unwrap();
    buf
}

fn wait_for_port(port: u16) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(Instant::now() < deadline, "nothing listens on {port}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// `kill -<signal>` (e.g. `-TERM`) to `child`.
fn send_signal(child: &Child, signal: &str) {
    let pid = child.id().to_string();
    assert!(
        Command::new("kill")
            .args([signal, &pid])
            .status()
            .unwrap()
            .success()
    );
}
