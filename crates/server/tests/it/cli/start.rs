//! Starting and stopping the binary: the listen address and its errors, log colours, and
//! what a shutdown leaves counted.

use super::{Cli, id, raw_get, send_signal, wait_for_port};
use crate::common::{Backend, free_port};
use std::process::Stdio;

#[test]
fn a_port_in_use_names_the_setting_that_moves_it() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap().to_string();
    let cli = Cli::new();
    for args in [
        vec!["serve"],
        vec!["serve", "--listen", addr.as_str()],
        vec!["demo", "--listen", addr.as_str()],
    ] {
        let out = cli
            .cmd()
            .env("TERN_LISTEN", &addr)
            .args(&args)
            .stdin(Stdio::null())
            .output()
            .unwrap();
        assert!(!out.status.success(), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(&addr), "{args:?}: {err}");
        assert!(err.contains("already in use"), "{args:?}: {err}");
        assert!(
            err.contains("--listen") && err.contains("TERN_LISTEN"),
            "{args:?}: {err}"
        );
    }
    drop(taken);
}

#[test]
fn serve_listens_where_the_option_says() {
    let cli = Cli::new();
    let port = free_port();
    let mut child = cli
        .cmd()
        .env("TERN_LISTEN", "127.0.0.1:1")
        .args(["serve", "--listen", &format!("127.0.0.1:{port}")])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    wait_for_port(port);
    let response = raw_get(port, "/healthz", "none");
    assert!(response.starts_with("HTTP/1.1 200"), "{response}");
    child.kill().unwrap();
    child.wait().unwrap();
}

/// Logs to a file or a pipe carry no colour codes (the demo logs in the human format).
#[test]
fn demo_writes_no_colour_codes_when_stderr_is_not_a_terminal() {
    let cli = Cli::new();
    let port = free_port();
    // Files, not pipes: nothing drains a pipe while the demo runs.
    let out_path = cli.dir.path().join("demo.out");
    let err_path = cli.dir.path().join("demo.err");
    let mut child = cli
        .cmd()
        .env("TERN_LOG", "info")
        .args(["demo", "--listen", &format!("127.0.0.1:{port}")])
        .stdout(std::fs::File::create(&out_path).unwrap())
        .stderr(std::fs::File::create(&err_path).unwrap())
        .spawn()
        .unwrap();
    wait_for_port(port);
    let secret = format!("tern_{}", "S".repeat(40));
    let response = raw_get(port, "/api/public/v1/phone-numbers", &secret);
    assert!(response.starts_with("HTTP/1.1 401"), "{response}");
    send_signal(&child, "-TERM");
    let status = child.wait().unwrap();
    assert!(status.success(), "{status:?}");
    let stdout = std::fs::read_to_string(&out_path).unwrap();
    let stderr = std::fs::read_to_string(&err_path).unwrap();
    assert!(
        stdout.contains("API key (shown once): tern_test_"),
        "{stdout}"
    );
    assert!(stdout.contains("TEST MODE"), "{stdout}");
    assert!(stderr.contains("request finished"), "{stderr}");
    assert!(!stderr.contains('\u{1b}'), "colour codes in {stderr:?}");
    assert!(!stdout.contains('\u{1b}'), "colour codes in {stdout:?}");
}

/// On SIGTERM the request meter writes its last counts and gives back the units it held
/// before the database closes: the period's usage is exactly the requests served.
fn shutdown_leaves_usage_counting_exactly_the_requests(backend: Backend) {
    let cli = match backend {
        Backend::Sqlite => Cli::new(),
        Backend::Postgres => Cli::postgres(),
    };
    let org = id(&cli.ok(&["admin", "org", "create", "--name", "U", "--plan", "starter"]));
    let member = id(&cli.ok(&[
        "admin", "member", "add", "--org", &org, "--email", "u@u.test", "--role", "owner",
    ]));
    let created = cli.ok(&[
        "admin",
        "key",
        "create",
        "--org",
        &org,
        "--member",
        &member,
        "--name",
        "k",
        "--preset",
        "full_access",
    ]);
    let key = created["key"].as_str().unwrap().to_string();
    let port = free_port();
    let child = cli.serve(port);
    for _ in 0..5 {
        let r = raw_get(port, "/api/public/v1/contacts", &key);
        assert!(r.starts_with("HTTP/1.1 200"), "{r}");
    }
    send_signal(&child, "-TERM");
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success());
    let logs = String::from_utf8_lossy(&out.stderr);
    assert!(!logs.contains("could not give back"), "{logs}");
    let shown = cli.ok(&["admin", "org", "show", "--org", &org]);
    assert_eq!(shown["usage"]["api_requests"]["used"], 5, "{shown}");
}

#[test]
fn sqlite_shutdown_leaves_usage_counting_exactly_the_requests() {
    shutdown_leaves_usage_counting_exactly_the_requests(Backend::Sqlite);
}

#[test]
fn postgres_shutdown_leaves_usage_counting_exactly_the_requests() {
    shutdown_leaves_usage_counting_exactly_the_requests(Backend::Postgres);
}
