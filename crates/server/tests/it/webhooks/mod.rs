//! Event webhooks (issue 14, in progress): one signed delivery attempt against a loopback
//! HTTPS receiver, each delivery checked by the official Standard Webhooks library
//! (PyPI `standardwebhooks`, installed into .venv by scripts/test.sh).

mod delivery;
mod keys;
pub(crate) mod stream;
mod subscriptions;

use crate::media::fixture::FileServer;
use std::sync::Arc;
use std::time::Duration;
use tern_core::webhooks::send::{Delivery, Outcome, Sender};
use tern_domain::events;
use tern_domain::net_guard::Guard;

fn sender(files: &FileServer, timeout: Duration) -> Sender {
    let pem = std::fs::read(files.ca_file.path()).unwrap();
    let guard = Arc::new(Guard::new(vec!["127.0.0.1/32".parse().unwrap()]));
    Sender::new(guard, Some(&pem), timeout).unwrap()
}

/// Verifies received deliveries with the official library, all in one Python process:
/// one verdict per `(secret, headers, body)`.
pub(crate) fn python_verifies_all(items: &[(String, axum::http::HeaderMap, Vec<u8>)]) -> Vec<bool> {
    use base64::Engine as _;
    let python = concat!(env!("CARGO_MANIFEST_DIR"), "/../../.venv/bin/python");
    let script = "import sys, json, base64\n\
        from standardwebhooks.webhooks import Webhook\n\
        for line in sys.stdin:\n\
        \x20   d = json.loads(line)\n\
        \x20   try:\n\
        \x20       Webhook(d['secret']).verify(base64.b64decode(d['body']), d['headers'])\n\
        \x20       print('ok')\n\
        \x20   except Exception as e:\n\
        \x20       print('bad', e)\n";
    let mut input = String::new();
    for (secret, headers, body) in items {
        let h = |n: &str| {
            headers
                .get(n)
                .and_then(|v| v.to_str().ok())
                .unwrap_or_default()
                .to_string()
        };
        let line = serde_json::json!({
            "secret": secret,
            "headers": {"webhook-id": h("webhook-id"), "webhook-timestamp": h("webhook-timestamp"), "webhook-signature": h("webhook-signature")},
            "body": base64::engine::general_purpose::STANDARD.encode(body),
        });
        input.push_str(&line.to_string());
        input.push('\n');
    }
    let mut child = std::process::Command::new(python)
        .args(["-c", script])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("python in .venv (scripts/test.sh installs standardwebhooks)");
    use std::io::Write as _;
    child
        .stdin
        .take()
        .unwrap()
        .write_all(input.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "the verifier failed");
    let verdicts: Vec<bool> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| l == "ok")
        .collect();
    assert_eq!(verdicts.len(), items.len());
    verdicts
}

/// Verifies a received delivery with the official library; returns its verdict.
fn python_verifies(secret: &str, headers: &axum::http::HeaderMap, body: &[u8]) -> bool {
    let h = |n: &str| headers.get(n).unwrap().to_str().unwrap().to_string();
    let python = concat!(env!("CARGO_MANIFEST_DIR"), "/../../.venv/bin/python");
    let script = "import sys, json\n\
        from standardwebhooks.webhooks import Webhook\n\
        secret, wid, ts, sig = sys.argv[1:5]\n\
        body = sys.stdin.buffer.read()\n\
        Webhook(secret).verify(body, {'webhook-id': wid, 'webhook-timestamp': ts, 'webhook-signature': sig})\n";
    let mut child = std::process::Command::new(python)
        .args([
            "-c",
            script,
            secret,
            &h("webhook-id"),
            &h("webhook-timestamp"),
            &h("webhook-signature"),
        ])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("python in .venv (scripts/test.sh installs standardwebhooks)");
    use std::io::Write as _;
    child.stdin.take().unwrap().write_all(body).unwrap();
    child.wait().unwrap().success()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_delivery_is_signed_as_standard_webhooks_says() {
    let files = FileServer::start().await;
    let s = sender(&files, Duration::from_secs(15));
    let (key, shown) = events::new_secret();
    let (old_key, old_shown) = events::new_secret();
    let body = events::event_body(
        "evt_01",
        events::EventType::WebhookTest,
        1_700_000_000_000,
        tern_domain::auth::Mode::Live,
        &serde_json::json!({"hello": "world"}),
    );
    let now = tern_domain::time::now_ms() / 1000;
    let url = files.url("/hook/204");
    let d = Delivery {
        url: &url,
        event_id: "evt_01",
        body: &body,
        keys: vec![&key, &old_key],
    };
    let a = s.attempt(&d, now).await;
    assert_eq!(
        (a.outcome, a.response_status, a.error.as_deref()),
        (Outcome::Succeeded, Some(204), None)
    );
    let (headers, got) = files.hooks.lock().unwrap()[0].clone();
    assert_eq!(got, body, "the exact bytes");
    assert_eq!(headers["webhook-id"], "evt_01");
    assert_eq!(headers["webhook-timestamp"], now.to_string().as_str());
    assert_eq!(headers["content-type"], "application/json");
    assert!(
        headers["user-agent"]
            .to_str()
            .unwrap()
            .starts_with("Tern-Webhooks/")
    );
    // both signatures of a rotation verify, each with the official library
    assert!(python_verifies(&shown, &headers, &got));
    assert!(python_verifies(&old_shown, &headers, &got));
    let (_, stranger) = events::new_secret();
    assert!(!python_verifies(&stranger, &headers, &got));
    let mut tampered = got.clone();
    tampered[2] ^= 1;
    assert!(!python_verifies(&shown, &headers, &tampered));
    files.stop();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_to_a_receiver_are_reused() {
    let files = FileServer::start().await;
    let s = sender(&files, Duration::from_secs(15));
    let (key, _) = events::new_secret();
    let url = files.url("/hook/204");
    for i in 0..5 {
        let id = format!("evt_{i}");
        let d = Delivery {
            url: &url,
            event_id: &id,
            body: b"{}",
            keys: vec![&key],
        };
        assert_eq!(s.attempt(&d, 1).await.outcome, Outcome::Succeeded);
    }
    // One TLS connection (one client port) carried all five deliveries.
    let peers: std::collections::HashSet<String> = files
        .hooks
        .lock()
        .unwrap()
        .iter()
        .map(|(h, _)| h["x-test-peer"].to_str().unwrap().to_string())
        .collect();
    assert_eq!(peers.len(), 1, "{peers:?}");
    files.stop();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn receivers_answers_become_outcomes() {
    let files = FileServer::start().await;
    let s = sender(&files, Duration::from_secs(1));
    let (key, _) = events::new_secret();
    // nothing allowed: a name that resolves to loopback is refused at connection time
    let strict = Sender::new(
        Arc::new(Guard::new(Vec::new())),
        Some(&std::fs::read(files.ca_file.path()).unwrap()),
        Duration::from_secs(1),
    )
    .unwrap();
    let url = format!("https://localhost:{}/hook/200", files.addr.port());
    let d = Delivery {
        url: &url,
        event_id: "evt_03",
        body: b"{}",
        keys: vec![&key],
    };
    let a = strict.attempt(&d, 1).await;
    assert_eq!((a.outcome, a.response_status), (Outcome::Failed, None));
    assert!(a.error.as_deref().unwrap().contains("refused"), "{a:?}");
    assert!(files.hooks.lock().unwrap().is_empty());
    let attempt = |path: String| {
        let s = s.clone();
        let key = key.clone();
        async move {
            let d = Delivery {
                url: &path,
                event_id: "evt_02",
                body: b"{}",
                keys: vec![&key],
            };
            s.attempt(&d, 1).await
        }
    };
    let a = attempt(files.url("/hook/500")).await;
    assert_eq!((a.outcome, a.response_status), (Outcome::Failed, Some(500)));
    let a = attempt(files.url("/hook/410")).await;
    assert_eq!((a.outcome, a.response_status), (Outcome::Gone, Some(410)));
    let a = attempt(files.url("/hook/503")).await;
    assert_eq!(
        (a.outcome, a.retry_after),
        (Outcome::Failed, Some(Duration::from_secs(7)))
    );
    // a redirect is a failure and is not followed
    let before = files.hooks.lock().unwrap().len();
    let a = attempt(files.url("/hook/302")).await;
    assert_eq!((a.outcome, a.response_status), (Outcome::Failed, Some(302)));
    assert_eq!(files.hooks.lock().unwrap().len(), before + 1);
    // a receiver that does not answer in time
    let a = attempt(files.url("/slow")).await;
    assert_eq!(a.outcome, Outcome::Failed);
    assert!(a.error.unwrap().contains("no answer"), "timeout");
    // an address that is not allowed is never connected to
    let port = files.addr.port();
    let a = attempt(format!("https://127.0.0.2:{port}/hook/200")).await;
    assert_eq!((a.outcome, a.response_status), (Outcome::Failed, None));
    assert!(a.error.unwrap().contains("refused"));
    files.stop();
}
