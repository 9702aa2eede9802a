//! One delivery attempt: the event's stored bytes POSTed to the subscription's URL with the
//! Standard Webhooks headers, through the guarded client (the URL's name is checked at every
//! connection, so a subscription cannot be turned against the machine's own networks later).
//! Redirects are not followed (a 3xx is a failure); any 2xx within the timeout is success;
//! `410 Gone` asks Tern to disable the subscription; a `Retry-After` on 429/503 is reported
//! for the schedule to honour. Connections are kept alive and reused per receiver.

use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::StreamExt;
use tern_domain::events;
use tern_domain::net_guard::Guard;

use crate::guarded;

/// How long a receiver has to answer.
pub const DELIVERY_TIMEOUT: Duration = Duration::from_secs(15);
/// How much of a receiver's answer is read (then dropped), so the connection can be reused.
const MAX_ANSWER_BYTES: usize = 64 * 1024;
/// How much of it is kept for the delivery log (APP.md §3: the first 1 KiB).
pub const KEPT_ANSWER_BYTES: usize = 1024;

/// What one attempt came to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    Succeeded,
    Failed,
    /// `410 Gone`: the receiver asks for no more deliveries.
    Gone,
}

/// One attempt, as recorded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Attempt {
    pub outcome: Outcome,
    pub response_status: Option<u16>,
    pub latency_ms: i64,
    pub error: Option<String>,
    /// The receiver's `Retry-After` on a 429 or 503, in seconds.
    pub retry_after: Option<Duration>,
    /// The first [`KEPT_ANSWER_BYTES`] of the answer, as text; `None` without an answer.
    pub response_body: Option<String>,
}

/// What to send.
pub struct Delivery<'a> {
    pub url: &'a str,
    /// The event id: `webhook-id`, the same on every attempt.
    pub event_id: &'a str,
    pub body: &'a [u8],
    /// Signing keys: the current one, then the previous one while a rotation overlaps.
    pub keys: Vec<&'a [u8]>,
}

/// Sends deliveries. Cheap to clone.
#[derive(Clone, Debug)]
pub struct Sender {
    client: reqwest::Client,
    guard: Arc<Guard>,
    timeout: Duration,
}

impl Sender {
    pub fn new(
        guard: Arc<Guard>,
        extra_roots_pem: Option<&[u8]>,
        timeout: Duration,
    ) -> Result<Sender, String> {
        let client = guarded::client(
            Arc::clone(&guard),
            extra_roots_pem,
            concat!("Tern-Webhooks/", env!("CARGO_PKG_VERSION")),
        )?;
        Ok(Sender {
            client,
            guard,
            timeout,
        })
    }

    /// One attempt at `now_s` (unix seconds, the `webhook-timestamp`).
    pub async fn attempt(&self, d: &Delivery<'_>, now_s: i64) -> Attempt {
        let started = Instant::now();
        let failed = |error: String, status: Option<u16>| Attempt {
            outcome: Outcome::Failed,
            response_status: status,
            latency_ms: elapsed_ms(started),
            error: Some(error),
            retry_after: None,
            response_body: None,
        };
        let url = match self.guard.check_url(d.url) {
            Ok(u) => u,
            Err(why) => return failed(format!("the URL is refused: {why}"), None),
        };
        let signature = events::signature_header(&d.keys, d.event_id, now_s, d.body);
        let req = self
            .client
            .post(url)
            .timeout(self.timeout)
            .header("webhook-id", d.event_id)
            .header("webhook-timestamp", now_s.to_string())
            .header("webhook-signature", signature)
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .body(d.body.to_vec());
        let resp = match req.send().await {
            Ok(r) => r,
            Err(e) => {
                let why = match guarded::refusal_in(&e) {
                    Some(r) => format!("the URL is refused: {r}"),
                    None if e.is_timeout() => {
                        format!("no answer within {} s", self.timeout.as_secs())
                    }
                    None => guarded::describe(&e),
                };
                return failed(why, None);
            }
        };
        let status = resp.status();
        let retry_after = matches!(status.as_u16(), 429 | 503)
            .then(|| {
                resp.headers()
                    .get(reqwest::header::RETRY_AFTER)
                    .and_then(|v| v.to_str().ok())
                    .and_then(|v| v.trim().parse::<u64>().ok())
                    .map(Duration::from_secs)
            })
            .flatten();
        // Read (a bounded part of) the answer so the connection goes back to the pool.
        let mut body = resp.bytes_stream();
        let mut read = 0usize;
        let mut kept: Vec<u8> = Vec::new();
        while let Some(Ok(chunk)) = body.next().await {
            let room = KEPT_ANSWER_BYTES.saturating_sub(kept.len());
            kept.extend_from_slice(&chunk[..room.min(chunk.len())]);
            read += chunk.len();
            if read > MAX_ANSWER_BYTES {
                break;
            }
        }
        let code = status.as_u16();
        let (outcome, error) = if status.is_success() {
            (Outcome::Succeeded, None)
        } else if code == 410 {
            (Outcome::Gone, Some("HTTP 410 Gone".to_string()))
        } else if status.is_redirection() {
            (
                Outcome::Failed,
                Some(format!("HTTP {code}: redirects are not followed")),
            )
        } else {
            (Outcome::Failed, Some(format!("HTTP {code}")))
        };
        Attempt {
            outcome,
            response_status: Some(code),
            latency_ms: elapsed_ms(started),
            error,
            retry_after,
            response_body: Some(answer_text(&kept)),
        }
    }
}

/// The kept bytes as text: invalid UTF-8 (or a character cut at the limit) and NUL (which
/// PostgreSQL's text refuses) become U+FFFD.
fn answer_text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).replace('\0', "\u{FFFD}")
}

fn elapsed_ms(started: Instant) -> i64 {
    i64::try_from(started.elapsed().as_millis()).unwrap_or(i64::MAX)
}
