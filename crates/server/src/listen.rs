//! `tern listen`: a client of `GET /events/stream` for building an integration without a
//! public URL. It prints one line per event (time, type, id, and the local answer's status
//! when forwarding), posts each event body to `--forward-to` signed as Standard Webhooks
//! with a secret derived from the key (the same on every run, printed at start, stored
//! nowhere), reconnects by itself with backoff, and keeps the last event id it handled in
//! its state directory so a run started within 24 hours resumes where the last one stopped.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::Result;
use futures::StreamExt as _;
use serde_json::json;
use tern_domain::events::{self, stream::listen_secret};
use tern_domain::time::{format_ms, now_ms};

use crate::client;

/// How long a stored last event id is worth resuming from: the server keeps a stream's
/// events 24 hours after its last connection.
const RESUME_WITHIN_MS: i64 = 24 * 60 * 60 * 1000;
/// Without a byte (the server's keep-alive comes every 15 s) for this long, the connection
/// is taken for dead.
const SILENCE: Duration = Duration::from_secs(45);
const FIRST_BACKOFF: Duration = Duration::from_millis(250);
const MAX_BACKOFF: Duration = Duration::from_secs(10);

#[derive(Debug, clap::Args)]
pub struct ListenArgs {
    /// The server's base URL (as TERN_PUBLIC_URL), e.g. http://localhost:8080.
    #[arg(long, env = "TERN_API_URL")]
    pub api_url: String,
    /// An API key with developer.webhooks.manage.
    #[arg(long, env = "TERN_API_KEY", hide_env_values = true)]
    pub key: String,
    /// Post each event to this local URL, signed as Standard Webhooks.
    #[arg(long)]
    pub forward_to: Option<String>,
    /// Comma-separated event types (all when absent).
    #[arg(long)]
    pub events: Option<String>,
    /// Start from now, not from the last event a previous run handled.
    #[arg(long)]
    pub from_now: bool,
}

/// Where the last event id of `key` is kept: `$XDG_STATE_HOME/tern` (else
/// `~/.local/state/tern`), one file per key prefix.
fn state_file(key: &str) -> Option<PathBuf> {
    let dir = match std::env::var_os("XDG_STATE_HOME").filter(|d| !d.is_empty()) {
        Some(d) => PathBuf::from(d),
        None => PathBuf::from(std::env::var_os("HOME")?).join(".local/state"),
    };
    Some(
        dir.join("tern")
            .join(format!("listen-{}.json", key_prefix(key))),
    )
}

/// The key's shown prefix (its marker and 7 characters), safe as a file name.
fn key_prefix(key: &str) -> String {
    let marker = if key.starts_with("tern_test_") {
        "tern_test_".len()
    } else if key.starts_with("tern_") {
        "tern_".len()
    } else {
        0
    };
    key.chars()
        .take(marker + 7)
        .filter(|c| c.is_ascii_alphanumeric() || *c == '_')
        .collect()
}

/// The last event id a run handled, if it was saved within 24 hours.
fn load_last(path: &PathBuf) -> Option<String> {
    let text = std::fs::read_to_string(path).ok()?;
    let v: serde_json::Value = serde_json::from_str(&text).ok()?;
    let saved = v["saved_at_ms"].as_i64()?;
    (now_ms() - saved < RESUME_WITHIN_MS)
        .then(|| v["last_event_id"].as_str().map(str::to_owned))
        .flatten()
}

fn save_last(path: &PathBuf, id: &str) {
    let body = json!({"last_event_id": id, "saved_at_ms": now_ms()}).to_string();
    // Written whole then renamed: a run killed mid-write leaves the previous id.
    let tmp = path.with_extension("json.tmp");
    let written = path
        .parent()
        .map_or(Ok(()), std::fs::create_dir_all)
        .and_then(|()| std::fs::write(&tmp, body))
        .and_then(|()| std::fs::rename(&tmp, path));
    if let Err(e) = written {
        eprintln!(
            "tern: cannot save the last event id in {}: {e}",
            path.display()
        );
    }
}

/// One SSE message being read.
#[derive(Default)]
struct Message {
    event: Option<String>,
    id: Option<String>,
    data: Vec<String>,
}

/// How a connection ended.
enum Outcome {
    /// Reconnect (after a backoff unless the connection had delivered something).
    Retry { delivered: bool },
    /// Stop: the server refused for good or another listener took the stream.
    Stop(anyhow::Error),
}

pub async fn run(args: ListenArgs) -> Result<()> {
    let base = client::public_base(&args.api_url)?;
    let (signing_key, shown) = listen_secret(&args.key);
    let state = state_file(&args.key);
    let mut last = match (&state, args.from_now) {
        (Some(path), false) => load_last(path),
        _ => None,
    };
    let http = client::http()?;
    println!("Signing secret: {shown}");
    match &args.forward_to {
        Some(to) => println!("Forwarding events to {to}"),
        None => println!("Printing events (no --forward-to)"),
    }
    if let Some(id) = &last {
        println!("Resuming after event {id}");
    }
    let mut backoff = FIRST_BACKOFF;
    loop {
        let resume = last.clone();
        let outcome = connect(&http, &base, &args, resume.as_deref(), &signing_key, |id| {
            last = Some(id.to_string());
            if let Some(path) = &state {
                save_last(path, id);
            }
        })
        .await;
        match outcome {
            Outcome::Stop(e) => return Err(e),
            Outcome::Retry { delivered } => {
                if delivered {
                    backoff = FIRST_BACKOFF;
                }
                eprintln!(
                    "tern: disconnected; reconnecting in {} ms",
                    backoff.as_millis()
                );
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(MAX_BACKOFF);
            }
        }
    }
}

/// One connection: reads messages until it ends, handling each (forward, print, then
/// `handled(id)`).
async fn connect(
    http: &reqwest::Client,
    base: &str,
    args: &ListenArgs,
    last: Option<&str>,
    signing_key: &[u8],
    mut handled: impl FnMut(&str),
) -> Outcome {
    let mut url = format!("{base}/events/stream");
    if let Some(types) = &args.events {
        // Event type names need no escaping; anything else is the server's to refuse.
        let types: String = types
            .chars()
            .filter(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | ',' | '-'))
            .collect();
        url.push_str(&format!("?types={types}"));
    }
    let mut req = http
        .get(url)
        .bearer_auth(&args.key)
        .header("accept", "text/event-stream");
    if let Some(id) = last {
        req = req.header("last-event-id", id);
    }
    let res = match req.send().await {
        Ok(r) => r,
        Err(e) => {
            eprintln!("tern: cannot connect: {e}");
            return Outcome::Retry { delivered: false };
        }
    };
    let status = res.status();
    if !status.is_success() {
        let body = res.text().await.unwrap_or_default();
        let message = client::problem_message(&body);
        // The key or the request is wrong: retrying cannot help.
        if status.is_client_error() && status.as_u16() != 429 {
            return Outcome::Stop(anyhow::anyhow!("the server answered {status}: {message}"));
        }
        eprintln!("tern: the server answered {status}: {message}");
        return Outcome::Retry { delivered: false };
    }
    let mut body = res.bytes_stream();
    let mut buf: Vec<u8> = Vec::new();
    let mut msg = Message::default();
    let mut delivered = false;
    loop {
        let chunk = match tokio::time::timeout(SILENCE, body.next()).await {
            Ok(Some(Ok(c))) => c,
            Ok(Some(Err(_)) | None) | Err(_) => return Outcome::Retry { delivered },
        };
        buf.extend_from_slice(&chunk);
        while let Some(end) = buf.iter().position(|b| *b == b'\n') {
            let line: Vec<u8> = buf.drain(..=end).collect();
            let line = String::from_utf8_lossy(&line);
            let line = line.trim_end_matches(['\n', '\r']);
            if line.is_empty() {
                let done = std::mem::take(&mut msg);
                if let (Some(id), false) = (done.id.clone(), done.data.is_empty()) {
                    handle(http, args, signing_key, &done, &id).await;
                    handled(&id);
                    delivered = true;
                }
                continue;
            }
            if let Some(comment) = line.strip_prefix(':') {
                let comment = comment.trim();
                if comment.contains("took this stream over") {
                    return Outcome::Stop(anyhow::anyhow!(
                        "another connection with this key and these events took the stream over"
                    ));
                }
                if comment != "keep-alive" {
                    eprintln!("tern: {comment}");
                }
                continue;
            }
            let (field, value) = line.split_once(':').unwrap_or((line, ""));
            let value = value.strip_prefix(' ').unwrap_or(value);
            match field {
                "event" => msg.event = Some(value.to_string()),
                "id" => msg.id = Some(value.to_string()),
                "data" => msg.data.push(value.to_string()),
                _ => {}
            }
        }
    }
}

/// Forwards (when asked) and prints one event.
async fn handle(
    http: &reqwest::Client,
    args: &ListenArgs,
    signing_key: &[u8],
    msg: &Message,
    id: &str,
) {
    let kind = msg.event.as_deref().unwrap_or("message");
    let body = msg.data.join("\n");
    let answer = match &args.forward_to {
        None => String::new(),
        Some(to) => {
            let ts = now_ms() / 1000;
            let signature = events::signature_header(&[signing_key], id, ts, body.as_bytes());
            let sent = http
                .post(to)
                .header("webhook-id", id)
                .header("webhook-timestamp", ts.to_string())
                .header("webhook-signature", signature)
                .header("content-type", "application/json")
                .body(body.clone())
                .send()
                .await;
            match sent {
                Ok(r) => format!("  -> {}", r.status().as_u16()),
                Err(e) => format!("  -> failed: {e}"),
            }
        }
    };
    println!("{}  {kind}  {id}{answer}", format_ms(now_ms()));
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn key_prefixes_name_files() {
        assert_eq!(key_prefix("tern_abcdefghijkl"), "tern_abcdefg");
        assert_eq!(key_prefix("tern_test_abcdefghijkl"), "tern_test_abcdefg");
        assert_eq!(key_prefix("../../x"), "x");
    }

    #[test]
    fn last_ids_resume_within_a_day() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("tern").join("listen-x.json");
        assert_eq!(load_last(&path), None);
        save_last(&path, "evt-1");
        assert_eq!(load_last(&path).as_deref(), Some("evt-1"));
        let old = json!({"last_event_id": "evt-0", "saved_at_ms": now_ms() - RESUME_WITHIN_MS - 1});
        std::fs::write(&path, old.to_string()).unwrap();
        assert_eq!(load_last(&path), None);
    }
}
