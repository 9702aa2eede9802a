//! The body of `POST` and `PATCH /webhook-subscriptions`: every problem by its field path.

use serde_json::Value;

use super::EventType;
use crate::names::name_enum;
use crate::net_guard::Guard;
use crate::validate::Fields;
use crate::{FieldError, Problem};

name_enum!(
    /// Why Tern disabled a subscription (its `disabled_reason`); enabling it again clears it.
    DisabledReason {
        /// The receiver answered `410 Gone`.
        Gone = "gone",
        /// The key that created it was revoked: its receivers get nothing more.
        KeyRevoked = "key_revoked",
    }
);

/// Longest target URL.
pub const MAX_URL_LEN: usize = 2048;
/// Longest description.
pub const MAX_DESCRIPTION_CHARS: usize = 500;

/// A new subscription, as asked for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewSubscription {
    pub url: String,
    pub events: Vec<EventType>,
    pub description: Option<String>,
    pub enabled: bool,
}

/// A change to a subscription: `None` leaves a field as it is; `description: Some(None)`
/// clears it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SubscriptionChange {
    pub url: Option<String>,
    pub events: Option<Vec<EventType>>,
    pub description: Option<Option<String>>,
    pub enabled: Option<bool>,
}

/// Reads a `POST` body. The URL must pass the address guard (https, no credentials, no
/// private or special address literal); its name is checked again at every delivery.
pub fn parse_new(body: &Value, guard: &Guard) -> Result<NewSubscription, Problem> {
    let mut f = Fields::new(body)?;
    let url: Option<String> = f.required("url");
    let events: Option<Vec<String>> = f.required("events");
    let description: Option<String> = f.optional("description");
    let enabled: Option<bool> = f.optional("enabled");
    let url = url.and_then(|u| check_url(&u, guard, f.errors()));
    let events = events.and_then(|e| check_events(&e, f.errors()));
    if let Some(d) = &description {
        check_description(d, f.errors());
    }
    f.finish()?;
    match (url, events) {
        (Some(url), Some(events)) => Ok(NewSubscription {
            url,
            events,
            description,
            enabled: enabled.unwrap_or(true),
        }),
        // Not reached: a missing or refused field was reported above.
        _ => Err(Problem::field("body", "is incomplete")),
    }
}

/// Reads the optional body of `POST /webhook-subscriptions/{id}/test`: `{"event_type": T}`
/// asks for a sample event of type T; no body (or `{}`) for `webhook.test`.
pub fn parse_test(body: Option<&Value>) -> Result<EventType, Problem> {
    let Some(body) = body else {
        return Ok(EventType::WebhookTest);
    };
    let mut f = Fields::new(body)?;
    let kind: Option<String> = f.optional("event_type");
    let kind = match kind {
        None => Some(EventType::WebhookTest),
        Some(k) => {
            let parsed = EventType::parse(&k);
            if parsed.is_none() {
                f.errors().push(FieldError::new(
                    "event_type",
                    format!("must be one of {}", EventType::names()),
                ));
            }
            parsed
        }
    };
    f.finish()?;
    kind.ok_or_else(|| Problem::field("event_type", "is not an event type"))
}

/// Reads the body of `POST /webhook-subscriptions/{id}/replay`: `{"since": T}` (RFC 3339,
/// not in the future at `now`) → epoch ms.
pub fn parse_replay(body: &Value, now: i64) -> Result<i64, Problem> {
    let mut f = Fields::new(body)?;
    let since: Option<String> = f.required("since");
    let since = since.and_then(|s| match crate::time::parse_rfc3339_ms(&s) {
        Some(ms) if ms <= now => Some(ms),
        Some(_) => {
            f.errors()
                .push(FieldError::new("since", "must not be in the future"));
            None
        }
        None => {
            f.errors().push(FieldError::new(
                "since",
                "must be an RFC 3339 date-time, e.g. 2026-01-31T12:00:00Z",
            ));
            None
        }
    });
    f.finish()?;
    since.ok_or_else(|| Problem::field("since", "is required"))
}

/// Reads a `PATCH` body.
pub fn parse_change(body: &Value, guard: &Guard) -> Result<SubscriptionChange, Problem> {
    let mut f = Fields::new(body)?;
    let url: Option<String> = f.optional("url");
    let events: Option<Vec<String>> = f.optional("events");
    let description: Option<Option<String>> = f.nullable("description");
    let enabled: Option<bool> = f.optional("enabled");
    let url = url.and_then(|u| check_url(&u, guard, f.errors()));
    let events = events.and_then(|e| check_events(&e, f.errors()));
    if let Some(Some(d)) = &description {
        check_description(d, f.errors());
    }
    f.finish()?;
    Ok(SubscriptionChange {
        url,
        events,
        description,
        enabled,
    })
}

fn check_url(raw: &str, guard: &Guard, errors: &mut Vec<FieldError>) -> Option<String> {
    if raw.len() > MAX_URL_LEN {
        errors.push(FieldError::new(
            "url",
            format!("is longer than {MAX_URL_LEN} characters"),
        ));
        return None;
    }
    match guard.check_url(raw) {
        Ok(u) => Some(u.to_string()),
        Err(why) => {
            errors.push(FieldError::new("url", why.to_string()));
            None
        }
    }
}

fn check_events(names: &[String], errors: &mut Vec<FieldError>) -> Option<Vec<EventType>> {
    if names.is_empty() {
        errors.push(FieldError::new(
            "events",
            format!("must name at least one event type: {}", EventType::names()),
        ));
        return None;
    }
    let before = errors.len();
    let mut out: Vec<EventType> = Vec::new();
    for (i, n) in names.iter().enumerate() {
        match EventType::parse(n) {
            Some(t) if out.contains(&t) => {
                errors.push(FieldError::new(format!("events[{i}]"), "is listed twice"))
            }
            Some(t) => out.push(t),
            None => errors.push(FieldError::new(
                format!("events[{i}]"),
                format!("is not an event type; use {}", EventType::names()),
            )),
        }
    }
    (errors.len() == before).then_some(out)
}

fn check_description(d: &str, errors: &mut Vec<FieldError>) {
    if d.chars().count() > MAX_DESCRIPTION_CHARS {
        errors.push(FieldError::new(
            "description",
            format!("is longer than {MAX_DESCRIPTION_CHARS} characters"),
        ));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn fields(p: Problem) -> Vec<String> {
        p.details["fields"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| f["field"].as_str().unwrap().to_string())
            .collect()
    }

    #[test]
    fn new_subscriptions() {
        let g = Guard::new(Vec::new());
        let s = parse_new(
            &json!({"url": "https://hooks.example.com/tern", "events": ["message.status", "message.received"]}),
            &g,
        )
        .unwrap();
        assert_eq!(s.url, "https://hooks.example.com/tern");
        assert_eq!(
            s.events,
            vec![EventType::MessageStatus, EventType::MessageReceived]
        );
        assert!(s.enabled);
        // every problem at once, by path
        let p = parse_new(
            &json!({"url": "http://hooks.example.com", "events": ["message.status", "nope", "message.status"], "description": "x".repeat(501), "extra": 1}),
            &g,
        )
        .unwrap_err();
        assert_eq!(
            fields(p),
            ["url", "events[1]", "events[2]", "description", "extra"]
        );
        assert_eq!(
            fields(parse_new(&json!({}), &g).unwrap_err()),
            ["url", "events"]
        );
        assert_eq!(
            fields(parse_new(&json!({"url": "https://x.example", "events": []}), &g).unwrap_err()),
            ["events"]
        );
        // the guard: private, loopback, metadata and credentials are refused
        for url in [
            "https://127.0.0.1/h",
            "https://10.1.2.3/h",
            "https://169.254.169.254/latest",
            "https://[::1]/h",
            "https://u:p@hooks.example.com/h",
        ] {
            let p = parse_new(&json!({"url": url, "events": ["webhook.test"]}), &g).unwrap_err();
            assert_eq!(fields(p), ["url"], "{url}");
        }
        // unless the operator allowed the network
        let allowed = Guard::new(vec!["127.0.0.0/8".parse().unwrap()]);
        assert!(
            parse_new(
                &json!({"url": "https://127.0.0.1:8443/h", "events": ["webhook.test"]}),
                &allowed
            )
            .is_ok()
        );
    }

    #[test]
    fn changes() {
        let g = Guard::new(Vec::new());
        let c = parse_change(&json!({"enabled": false, "description": null}), &g).unwrap();
        assert_eq!(c.enabled, Some(false));
        assert_eq!(c.description, Some(None));
        assert_eq!(c.url, None);
        let p = parse_change(&json!({"events": ["x"], "url": "ftp://a"}), &g).unwrap_err();
        assert_eq!(fields(p), ["url", "events[0]"]);
    }
}
