//! A message's timeline entries (APP.md §4: `{"at", "kind", …fields}`, as the public API
//! serialises them) in words for the message page. Read from the JSON shape rather than the
//! domain type so the page shows every kind the API has, and an unknown kind still shows
//! its fields.

use crate::pages::form::Stamp;
use serde_json::Value;
use std::collections::HashMap;

/// How an entry looks: good news, bad news, or neither.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tone {
    Good,
    Bad,
    Plain,
}

impl Tone {
    pub fn as_str(self) -> &'static str {
        match self {
            Tone::Good => "good",
            Tone::Bad => "bad",
            Tone::Plain => "plain",
        }
    }
}

/// The Replay button of a failed webhook delivery.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReplayButton {
    pub subscription_id: String,
    pub event_id: String,
    /// Whether this person may replay it (they manage the endpoint's key); else the words
    /// say who can.
    pub allowed: bool,
}

/// One entry in words.
#[derive(Debug, Clone)]
pub struct EntryView {
    /// A stable id for the page (focus survives a live refresh).
    pub key: String,
    pub at: Option<Stamp>,
    pub kind: String,
    pub title: String,
    pub details: Vec<String>,
    /// "Next attempt at …" (a retry).
    pub next_at: Option<Stamp>,
    pub tone: Tone,
    /// A link the entry leads to (its campaign): (address, words).
    pub link: Option<(String, String)>,
    pub replay: Option<ReplayButton>,
}

fn text(e: &Value, key: &str) -> Option<String> {
    match e.get(key)? {
        Value::String(s) if !s.is_empty() => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        Value::Bool(b) => Some(b.to_string()),
        _ => None,
    }
}

fn int(e: &Value, key: &str) -> Option<i64> {
    e.get(key).and_then(Value::as_i64)
}

fn stamp(e: &Value, key: &str) -> Option<Stamp> {
    let s = e.get(key)?.as_str()?;
    tern_domain::time::parse_rfc3339_ms(s).map(Stamp::at_seconds)
}

/// `"HTTP 500"`, or that no answer came.
fn answer(e: &Value, key: &str) -> String {
    match int(e, key) {
        Some(code) => format!("HTTP {code}"),
        None => "no answer".to_string(),
    }
}

fn latency(e: &Value) -> Option<String> {
    int(e, "latency_ms").map(|ms| format!("{ms} ms"))
}

fn status_words(s: &str) -> &str {
    match s {
        "accepted" => "accepted",
        "sending" => "sending",
        "sent" => "sent",
        "delivered" => "delivered",
        "read" => "read",
        "failed" => "failed",
        other => other,
    }
}

/// Why a status report changed nothing, in words.
fn not_applied_words(reason: Option<&str>) -> &'static str {
    match reason {
        Some("duplicate") => "not applied: a duplicate of a report already received",
        Some("out_of_order") => "not applied: it arrived after a later status and changed nothing",
        Some("after_final") => "not applied: the message had already reached a final status",
        _ => "not applied",
    }
}

/// The words of one entry (without its Replay button, see [`views`]).
pub fn view(index: usize, e: &Value) -> EntryView {
    let kind = text(e, "kind").unwrap_or_else(|| "unknown".to_string());
    let mut details: Vec<String> = Vec::new();
    let mut tone = Tone::Plain;
    let mut next_at = None;
    let mut link = None;
    let mut push = |label: &str, v: Option<String>| {
        if let Some(v) = v {
            details.push(format!("{label}: {v}"));
        }
    };
    let attempt = int(e, "attempt").unwrap_or(0);
    let title = match kind.as_str() {
        "accepted" => {
            push("Request id", text(e, "request_id"));
            push(
                "Key",
                match (text(e, "key_name"), text(e, "key_id")) {
                    (Some(n), Some(id)) => Some(format!("{n} ({id})")),
                    (n, id) => n.or(id),
                },
            );
            push("Idempotency-Key", text(e, "idempotency_key"));
            "Accepted by the API".to_string()
        }
        "replayed" => {
            push("Request id", text(e, "request_id"));
            "The same request came again (same Idempotency-Key and body): answered with this message, nothing sent twice".to_string()
        }
        "dispatch_attempt" => {
            let outcome = text(e, "outcome").unwrap_or_default();
            push("Answer", Some(answer(e, "http_status")));
            push(
                "Error",
                match (text(e, "error_code"), text(e, "error_message")) {
                    (Some(c), Some(m)) => Some(format!("{c} — {m}")),
                    (c, m) => c.or(m),
                },
            );
            push("Latency", latency(e));
            next_at = stamp(e, "next_attempt_at");
            match outcome.as_str() {
                "sent" => {
                    tone = Tone::Good;
                    format!("Sent to the network (attempt {attempt})")
                }
                "retry" => {
                    tone = Tone::Bad;
                    format!("Attempt {attempt} refused by the network for now: will try again")
                }
                "failed" => {
                    tone = Tone::Bad;
                    format!("Attempt {attempt} failed: the network refused the message")
                }
                "unknown" => format!(
                    "Attempt {attempt}: no answer from the network (it may have the message; its status reports will tell)"
                ),
                other => format!("Attempt {attempt}: {other}"),
            }
        }
        "media_upload" => {
            push("Media id", text(e, "media_id"));
            push("Network media id", text(e, "network_media_id"));
            if text(e, "outcome").as_deref() == Some("uploaded") {
                tone = Tone::Good;
                "Media uploaded to the network".to_string()
            } else {
                tone = Tone::Bad;
                "Media upload failed".to_string()
            }
        }
        "status" => {
            let status = text(e, "status").unwrap_or_default();
            let applied = e.get("applied").and_then(Value::as_bool).unwrap_or(false);
            if let Some(t) = stamp(e, "network_timestamp") {
                details.push(format!("Network's time: {}", t.text));
            }
            if let Some(p) = e.get("pricing").filter(|p| p.is_object()) {
                let cat = p.get("category").and_then(Value::as_str);
                let billable = p.get("billable").and_then(Value::as_bool);
                details.push(match (cat, billable) {
                    (Some(c), Some(true)) => format!("Pricing: {c}, billable"),
                    (Some(c), Some(false)) => format!("Pricing: {c}, not billable"),
                    (Some(c), None) => format!("Pricing: {c}"),
                    _ => format!("Pricing: {p}"),
                });
            }
            let words = status_words(&status);
            if applied {
                if status == "failed" {
                    tone = Tone::Bad;
                } else {
                    tone = Tone::Good;
                }
                format!("Status report: {words} (applied)")
            } else {
                format!(
                    "Status report: {words} ({})",
                    not_applied_words(e.get("reason").and_then(Value::as_str))
                )
            }
        }
        "failed" => {
            tone = Tone::Bad;
            push("Why", text(e, "explanation"));
            push("Fix", text(e, "fix"));
            push(
                "Network's code",
                match (text(e, "provider_code"), text(e, "provider_message")) {
                    (Some(c), Some(m)) => Some(format!("{c} — {m}")),
                    (c, m) => c.or(m),
                },
            );
            format!(
                "Failed: {}",
                text(e, "failure_code").unwrap_or_else(|| "unknown".into())
            )
        }
        "event" => {
            push("Event id", text(e, "event_id"));
            format!(
                "Event {} written for the webhooks that want it",
                text(e, "event_type").unwrap_or_default()
            )
        }
        "webhook_attempt" => {
            let host = text(e, "host").unwrap_or_else(|| "the receiver".into());
            push("Event id", text(e, "event_id"));
            push("Endpoint", text(e, "subscription_id"));
            push("Latency", latency(e));
            next_at = stamp(e, "next_attempt_at");
            let answered = answer(e, "response_status");
            if text(e, "outcome").as_deref() == Some("succeeded") {
                tone = Tone::Good;
                format!("Webhook attempt {attempt} to {host}: {answered}, delivered")
            } else {
                tone = Tone::Bad;
                let end = if next_at.is_some() {
                    "failed, will try again"
                } else {
                    "failed, no more attempts"
                };
                format!("Webhook attempt {attempt} to {host}: {answered}, {end}")
            }
        }
        "received" => {
            push("wamid", text(e, "wamid"));
            "Received from the customer".to_string()
        }
        "edited" => {
            push("wamid of the notice", text(e, "wamid"));
            "The customer edited the message".to_string()
        }
        "revoked" => {
            push("wamid of the notice", text(e, "wamid"));
            "The customer deleted the message".to_string()
        }
        "read_marked" => {
            push("wamid", text(e, "wamid"));
            "Marked as read".to_string()
        }
        "campaign" => {
            if let Some(id) = text(e, "campaign_id") {
                link = Some((
                    format!("/app/campaigns/{id}"),
                    "Open the campaign".to_string(),
                ));
            }
            "Sent by a campaign".to_string()
        }
        other => {
            // A kind this page does not know yet: its fields as they are.
            if let Some(o) = e.as_object() {
                for (k, v) in o.iter().filter(|(k, _)| *k != "at" && *k != "kind") {
                    details.push(format!("{}: {}", k.replace('_', " "), v));
                }
            }
            other.replace('_', " ")
        }
    };
    EntryView {
        key: format!("entry-{index}"),
        at: stamp(e, "at"),
        kind,
        title,
        details,
        next_at,
        tone,
        link,
        replay: None,
    }
}

/// Every entry in words, with a Replay button on the last attempt of each delivery (an
/// event to an endpoint) when that attempt failed. `may_replay(subscription_id)`: whether the
/// person manages that endpoint's key.
pub fn views(entries: &[Value], may_replay: impl Fn(&str) -> bool) -> Vec<EntryView> {
    let mut last: HashMap<(String, String), usize> = HashMap::new();
    for (i, e) in entries.iter().enumerate() {
        if e.get("kind").and_then(Value::as_str) == Some("webhook_attempt")
            && let (Some(s), Some(ev)) = (text(e, "subscription_id"), text(e, "event_id"))
        {
            last.insert((s, ev), i);
        }
    }
    let mut out: Vec<EntryView> = entries
        .iter()
        .enumerate()
        .map(|(i, e)| view(i, e))
        .collect();
    for ((sub, event), i) in last {
        let failed = text(&entries[i], "outcome").as_deref() != Some("succeeded");
        if failed && let Some(v) = out.get_mut(i) {
            v.replay = Some(ReplayButton {
                allowed: may_replay(&sub),
                subscription_id: sub,
                event_id: event,
            });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn kinds_read_in_words() {
        let v = view(
            0,
            &json!({"at": "2026-01-31T12:00:00.000Z", "kind": "dispatch_attempt", "attempt": 2,
                "outcome": "sent", "http_status": 200, "error_code": null, "error_message": null,
                "latency_ms": 31, "next_attempt_at": null}),
        );
        assert_eq!(v.title, "Sent to the network (attempt 2)");
        assert_eq!(v.details, ["Answer: HTTP 200", "Latency: 31 ms"]);
        assert_eq!(v.tone, Tone::Good);
        assert_eq!(v.at.unwrap().iso, "2026-01-31T12:00:00.000Z");
        let v = view(
            1,
            &json!({"at": "2026-01-31T12:00:00.000Z", "kind": "status", "status": "delivered",
                "applied": false, "reason": "out_of_order", "pricing": null,
                "network_timestamp": "2026-01-31T11:59:59.000Z"}),
        );
        assert!(
            v.title.starts_with("Status report: delivered (not applied"),
            "{}",
            v.title
        );
        let v = view(
            2,
            &json!({"at": "2026-01-31T12:00:00.000Z", "kind": "webhook_attempt", "attempt": 1,
                "host": "hooks.example.com", "response_status": 500, "outcome": "failed",
                "latency_ms": 12, "next_attempt_at": "2026-01-31T12:00:05.000Z",
                "subscription_id": "s1", "event_id": "e1"}),
        );
        assert_eq!(
            v.title,
            "Webhook attempt 1 to hooks.example.com: HTTP 500, failed, will try again"
        );
        assert!(v.next_at.is_some());
        let v = view(3, &json!({"at": "x", "kind": "brand_new", "n": 1}));
        assert_eq!(v.title, "brand new");
        assert_eq!(v.details, ["n: 1"]);
        assert!(v.at.is_none());
    }

    #[test]
    fn replay_goes_on_the_last_failed_attempt_of_each_delivery() {
        let a = |n: i64, outcome: &str, sub: &str| {
            json!({"kind": "webhook_attempt", "attempt": n, "outcome": outcome,
                "subscription_id": sub, "event_id": "e1"})
        };
        let entries = vec![
            a(1, "failed", "s1"),
            a(2, "succeeded", "s1"),
            a(1, "failed", "s2"),
            a(2, "failed", "s2"),
        ];
        let v = views(&entries, |s| s == "s2");
        assert!(v[0].replay.is_none() && v[1].replay.is_none() && v[2].replay.is_none());
        let r = v[3].replay.as_ref().unwrap();
        assert_eq!((r.subscription_id.as_str(), r.allowed), ("s2", true));
    }
}
