//! Event streams without I/O: the `types` filter of `GET /events/stream` (validated like a
//! subscription's `events`, normalised so one key with the same filter is one stream), the
//! body of `POST /events/trigger`, and the signing secret `tern listen` derives from its key.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use serde_json::Value;

use super::{EventType, SECRET_PREFIX};
use crate::crypto::hmac_sha256;
use crate::{FieldError, Problem};

/// The stream's filter from the query's `types` (comma-separated): the types sorted by
/// name, every type when absent. `400` naming `types[i]` for an unknown or repeated type.
pub fn parse_types(raw: Option<&str>) -> Result<Vec<EventType>, Problem> {
    let Some(raw) = raw else {
        return Ok(normalise(EventType::ALL.to_vec()));
    };
    let mut errors = Vec::new();
    let mut out: Vec<EventType> = Vec::new();
    for (i, name) in raw.split(',').map(str::trim).enumerate() {
        match EventType::parse(name) {
            Some(t) if out.contains(&t) => {
                errors.push(FieldError::new(format!("types[{i}]"), "is listed twice"));
            }
            Some(t) => out.push(t),
            None => errors.push(FieldError::new(
                format!("types[{i}]"),
                format!("is not an event type; use {}", EventType::names()),
            )),
        }
    }
    if errors.is_empty() {
        Ok(normalise(out))
    } else {
        Err(Problem::validation(errors))
    }
}

fn normalise(mut types: Vec<EventType>) -> Vec<EventType> {
    types.sort_by_key(|t| t.as_str());
    types
}

/// Reads the body of `POST /events/trigger`: `{"type": T}`.
pub fn parse_trigger(body: &Value) -> Result<EventType, Problem> {
    let mut f = crate::validate::Fields::new(body)?;
    let kind: Option<String> = f.required("type");
    let kind = kind.and_then(|k| {
        let parsed = EventType::parse(&k);
        if parsed.is_none() {
            f.errors().push(FieldError::new(
                "type",
                format!("must be one of {}", EventType::names()),
            ));
        }
        parsed
    });
    f.finish()?;
    kind.ok_or_else(|| Problem::field("type", "is required"))
}

/// What `tern listen` signs with: HMAC-SHA256 of this label keyed by the API key, so the
/// same key always gives the same secret and nothing is stored.
const LISTEN_SECRET_LABEL: &[u8] = b"tern listen: Standard Webhooks signing secret v1";

/// The signing secret of `tern listen` for `api_key`: its raw key and the `whsec_…` text.
pub fn listen_secret(api_key: &str) -> (Vec<u8>, String) {
    let key = hmac_sha256(api_key.as_bytes(), LISTEN_SECRET_LABEL).to_vec();
    let shown = format!("{SECRET_PREFIX}{}", STANDARD.encode(&key));
    (key, shown)
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
    fn types_are_validated_and_normalised() {
        assert_eq!(parse_types(None).unwrap().len(), EventType::ALL.len());
        let a = parse_types(Some("message.status,contact.consent")).unwrap();
        let b = parse_types(Some("contact.consent, message.status")).unwrap();
        assert_eq!(a, b);
        assert_eq!(a, [EventType::ContactConsent, EventType::MessageStatus]);
        let p = parse_types(Some("message.status,nope,message.status")).unwrap_err();
        assert_eq!(fields(p), ["types[1]", "types[2]"]);
        assert_eq!(fields(parse_types(Some("")).unwrap_err()), ["types[0]"]);
    }

    #[test]
    fn trigger_bodies() {
        assert_eq!(
            parse_trigger(&json!({"type": "template.status"})).unwrap(),
            EventType::TemplateStatus
        );
        assert_eq!(fields(parse_trigger(&json!({})).unwrap_err()), ["type"]);
        assert_eq!(
            fields(parse_trigger(&json!({"type": "x", "extra": 1})).unwrap_err()),
            ["type", "extra"]
        );
    }

    #[test]
    fn the_listen_secret_is_derived_from_the_key() {
        let (k1, s1) = listen_secret("tern_abc");
        let (_, s2) = listen_secret("tern_abc");
        let (_, other) = listen_secret("tern_abd");
        assert_eq!(s1, s2);
        assert_ne!(s1, other);
        assert!(s1.starts_with("whsec_"));
        assert_eq!(super::super::decode_secret(&s1).unwrap(), k1);
        assert_eq!(k1.len(), 32);
    }
}
