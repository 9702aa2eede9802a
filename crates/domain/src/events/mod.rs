//! Events Tern pushes to customers' webhooks, without I/O: the event types, the body (built
//! once, so the bytes signed are the bytes stored and sent), Standard Webhooks signing
//! (`whsec_` secrets, `v1,<base64 HMAC-SHA256>` over `id.timestamp.body`, several
//! signatures during a secret rotation), and the retry schedule.

use std::time::Duration;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use serde_json::Value;

use crate::crypto::hmac_sha256;
use crate::names::name_enum;

pub mod concurrency;
pub mod stream;
pub mod subscription;

name_enum!(
    /// What happened (DESIGN.md "Events").
    EventType {
        /// A message reached `sent`, `delivered`, `read` or `failed`; data: the Message.
        MessageStatus = "message.status",
        /// A customer wrote; data: the inbound Message.
        MessageReceived = "message.received",
        /// A customer edited or deleted a message; data: the Message after the change.
        MessageUpdated = "message.updated",
        /// A template's review status changed; data: the Template.
        TemplateStatus = "template.status",
        /// A contact's consent changed; data: the Contact.
        ContactConsent = "contact.consent",
        /// A campaign's status changed; data: the Campaign.
        CampaignStatus = "campaign.status",
        /// Sent on request (`POST /webhook-subscriptions/{id}/test`).
        WebhookTest = "webhook.test",
    }
);

/// The body's `version` (independent of the API's path version).
pub const EVENT_VERSION: u32 = 1;

/// The body of an event: `{"id", "type", "version", "created_at", "data"}`, serialised once.
pub fn event_body(
    id: &str,
    kind: EventType,
    created_at_ms: i64,
    mode: crate::auth::Mode,
    data: &Value,
) -> Vec<u8> {
    let body = serde_json::json!({
        "id": id,
        "type": kind.as_str(),
        "version": EVENT_VERSION,
        "mode": mode.as_str(),
        "created_at": crate::time::format_ms(created_at_ms),
        "data": data,
    });
    serde_json::to_vec(&body).unwrap_or_default()
}

/// Prefix of a signing secret as shown to customers.
pub const SECRET_PREFIX: &str = "whsec_";
/// Bytes of a new signing secret (the spec asks for 24 to 64).
pub const SECRET_BYTES: usize = 32;
/// How long the previous secret still signs after a rotation.
pub const ROTATION_OVERLAP_MS: i64 = 24 * 60 * 60 * 1000;

/// A new signing secret: its raw key and the `whsec_…` text shown once.
pub fn new_secret() -> (Vec<u8>, String) {
    use rand::RngCore as _;
    let mut key = vec![0u8; SECRET_BYTES];
    rand::rng().fill_bytes(&mut key);
    let shown = format!("{SECRET_PREFIX}{}", STANDARD.encode(&key));
    (key, shown)
}

/// The raw key of a `whsec_…` secret (the prefix is optional, as in the official libraries).
pub fn decode_secret(shown: &str) -> Option<Vec<u8>> {
    let b64 = shown.strip_prefix(SECRET_PREFIX).unwrap_or(shown);
    STANDARD.decode(b64).ok().filter(|k| !k.is_empty())
}

/// One `v1,<base64>` signature of `id.timestamp.body` with `key`.
pub fn sign(key: &[u8], msg_id: &str, timestamp_s: i64, body: &[u8]) -> String {
    let mut signed = Vec::with_capacity(msg_id.len() + body.len() + 24);
    signed.extend_from_slice(msg_id.as_bytes());
    signed.push(b'.');
    signed.extend_from_slice(timestamp_s.to_string().as_bytes());
    signed.push(b'.');
    signed.extend_from_slice(body);
    format!("v1,{}", STANDARD.encode(hmac_sha256(key, &signed)))
}

/// The `webhook-signature` header: one signature per key, space-separated (the current key
/// first, then the previous one during a rotation).
pub fn signature_header(keys: &[&[u8]], msg_id: &str, timestamp_s: i64, body: &[u8]) -> String {
    keys.iter()
        .map(|k| sign(k, msg_id, timestamp_s, body))
        .collect::<Vec<_>>()
        .join(" ")
}

/// Whether any `v1` entry of a `webhook-signature` header is `key`'s signature (constant-time
/// comparison). Receivers do this; Tern uses it in tests and in its own receiver checks.
pub fn verify(key: &[u8], header: &str, msg_id: &str, timestamp_s: i64, body: &[u8]) -> bool {
    use subtle::ConstantTimeEq as _;
    let want = sign(key, msg_id, timestamp_s, body);
    header
        .split(' ')
        .filter(|e| e.starts_with("v1,"))
        .any(|e| bool::from(e.as_bytes().ct_eq(want.as_bytes())))
}

/// When deliveries are tried again after a failed attempt: 5 s, 5 min, 30 min, 2 h, 5 h,
/// 10 h, 10 h (about 27 hours in all), then the delivery has failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RetrySchedule(Vec<Duration>);

impl Default for RetrySchedule {
    fn default() -> Self {
        RetrySchedule(
            [5, 300, 1800, 7200, 18_000, 36_000, 36_000]
                .into_iter()
                .map(Duration::from_secs)
                .collect(),
        )
    }
}

impl RetrySchedule {
    /// No retries: the first failed attempt is final (test sends).
    pub fn none() -> RetrySchedule {
        RetrySchedule(Vec::new())
    }

    /// `TERN_WEBHOOK_RETRY_SCHEDULE`: comma-separated whole seconds, e.g. `1,1,2`.
    pub fn parse(s: &str) -> Result<RetrySchedule, String> {
        let delays = s
            .split(',')
            .map(|p| {
                p.trim()
                    .parse::<u64>()
                    .map(Duration::from_secs)
                    .map_err(|_| format!("{:?} is not a whole number of seconds", p.trim()))
            })
            .collect::<Result<Vec<_>, _>>()?;
        if delays.is_empty() || delays.len() > 20 {
            return Err("give 1 to 20 delays".into());
        }
        Ok(RetrySchedule(delays))
    }

    /// Attempts in all: the first plus one per delay.
    pub fn max_attempts(&self) -> usize {
        self.0.len() + 1
    }

    /// The delay after failed attempt `attempt` (1-based), or `None` when it was the last.
    /// `jitter` in [0, 1) spreads retries by up to ±10 %; `retry_after` (a receiver's
    /// `Retry-After` on 429/503) is honoured, capped at twice the scheduled delay.
    pub fn delay_after(
        &self,
        attempt: usize,
        jitter: f64,
        retry_after: Option<Duration>,
    ) -> Option<Duration> {
        let base = *self.0.get(attempt.checked_sub(1)?)?;
        let factor = 0.9 + 0.2 * jitter.clamp(0.0, 1.0);
        let jittered = base.mul_f64(factor);
        Some(match retry_after {
            Some(r) => r.max(jittered).min(base * 2),
            None => jittered,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn event_types_round_trip() {
        for t in EventType::ALL {
            assert_eq!(EventType::parse(t.as_str()), Some(*t));
        }
        assert_eq!(EventType::parse("message.sent"), None);
    }

    #[test]
    fn body_has_the_decided_fields() {
        let b = event_body(
            "evt_1",
            EventType::MessageStatus,
            0,
            crate::auth::Mode::Test,
            &serde_json::json!({"x": 1}),
        );
        let v: Value = serde_json::from_slice(&b).unwrap();
        assert_eq!(v["id"], "evt_1");
        assert_eq!(v["type"], "message.status");
        assert_eq!(v["version"], 1);
        assert_eq!(v["mode"], "test");
        assert_eq!(v["created_at"], "1970-01-01T00:00:00.000Z");
        assert_eq!(v["data"]["x"], 1);
    }

    #[test]
    fn signatures_follow_standard_webhooks() {
        // The example of the Standard Webhooks specification.
        let key = decode_secret("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw").unwrap();
        let sig = sign(
            &key,
            "msg_p5jXN8AQM9LWM0D4loKWxJek",
            1614265330,
            br#"{"test": 2432232314}"#,
        );
        assert_eq!(sig, "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=");
        let other = decode_secret("whsec_c2VjcmV0LXR3by1zZWNyZXQtdHdvLXNlY3JldC10d28=").unwrap();
        let header = signature_header(
            &[&other, &key],
            "msg_p5jXN8AQM9LWM0D4loKWxJek",
            1614265330,
            br#"{"test": 2432232314}"#,
        );
        assert!(header.contains(' '));
        for k in [&key, &other] {
            assert!(verify(
                k,
                &header,
                "msg_p5jXN8AQM9LWM0D4loKWxJek",
                1614265330,
                br#"{"test": 2432232314}"#
            ));
        }
        assert!(!verify(
            &key,
            &header,
            "msg_p5jXN8AQM9LWM0D4loKWxJek",
            1614265331,
            br#"{"test": 2432232314}"#
        ));
        assert!(!verify(
            &key,
            &header,
            "msg_p5jXN8AQM9LWM0D4loKWxJek",
            1614265330,
            br#"{"test": 2432232315}"#
        ));
    }

    #[test]
    fn new_secrets_decode_to_their_key() {
        let (key, shown) = new_secret();
        assert!(shown.starts_with("whsec_"));
        assert_eq!(key.len(), SECRET_BYTES);
        assert_eq!(decode_secret(&shown), Some(key));
        assert_eq!(decode_secret("whsec_"), None);
        assert_eq!(decode_secret("whsec_***"), None);
    }

    #[test]
    fn retry_schedule() {
        let s = RetrySchedule::default();
        assert_eq!(s.max_attempts(), 8);
        assert_eq!(s.delay_after(1, 0.5, None), Some(Duration::from_secs(5)));
        assert_eq!(
            s.delay_after(7, 0.5, None),
            Some(Duration::from_secs(36_000))
        );
        assert_eq!(s.delay_after(8, 0.5, None), None);
        assert_eq!(s.delay_after(0, 0.5, None), None);
        let lo = s.delay_after(2, 0.0, None).unwrap();
        let hi = s.delay_after(2, 0.999, None).unwrap();
        assert!(
            lo >= Duration::from_secs(270) && hi <= Duration::from_secs(330),
            "{lo:?} {hi:?}"
        );
        // Retry-After is honoured, capped at twice the scheduled delay
        assert_eq!(
            s.delay_after(1, 0.5, Some(Duration::from_secs(8))),
            Some(Duration::from_secs(8))
        );
        assert_eq!(
            s.delay_after(1, 0.5, Some(Duration::from_secs(3600))),
            Some(Duration::from_secs(10))
        );
        let t = RetrySchedule::parse("1, 1,2").unwrap();
        assert_eq!(t.max_attempts(), 4);
        assert!(RetrySchedule::parse("").is_err());
        assert!(RetrySchedule::parse("1,x").is_err());
    }
}
