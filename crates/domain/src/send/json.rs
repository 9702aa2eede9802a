//! The shared readers of a JSON body's fields (every problem pushed, never returned early) and value checks (https URLs, message ids).

use super::*;

use crate::FieldError;
use serde_json::{Map, Value};

pub(super) fn chars(s: &str) -> usize {
    s.chars().count()
}

// ---- parsing ---------------------------------------------------------------------------------

/// A field's value, with `null` treated as absent.
pub(super) fn get<'a>(obj: &'a Map<String, Value>, key: &str) -> Option<&'a Value> {
    obj.get(key).filter(|v| !v.is_null())
}

/// The object without its `null` members.
pub(super) fn without_nulls(obj: &Map<String, Value>) -> Value {
    Value::Object(
        obj.iter()
            .filter(|(_, v)| !v.is_null())
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect(),
    )
}

pub(super) fn join(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_string()
    } else {
        format!("{path}.{key}")
    }
}

/// Errors for members of `obj` outside `allowed` (nulls included: a typo is a typo).
pub(super) fn unknown_keys(
    obj: &Map<String, Value>,
    path: &str,
    allowed: &[&str],
    errors: &mut Vec<FieldError>,
) {
    for k in obj.keys() {
        if !allowed.contains(&k.as_str()) {
            errors.push(FieldError::new(
                join(path, k),
                format!("is not a field of {path}; allowed: {}", allowed.join(", ")),
            ));
        }
    }
}

/// A required string: `Some` when present and a string (maybe empty), with errors otherwise.
pub(super) fn req_str<'a>(
    obj: &'a Map<String, Value>,
    path: &str,
    key: &str,
    what: &str,
    errors: &mut Vec<FieldError>,
) -> Option<&'a str> {
    match get(obj, key) {
        None => {
            errors.push(FieldError::new(
                join(path, key),
                format!("is required: {what}"),
            ));
            None
        }
        Some(Value::String(s)) => Some(s),
        Some(_) => {
            errors.push(FieldError::new(join(path, key), "must be a string"));
            None
        }
    }
}

/// An optional string: `Some` when present and a string.
pub(super) fn opt_str<'a>(
    obj: &'a Map<String, Value>,
    path: &str,
    key: &str,
    errors: &mut Vec<FieldError>,
) -> Option<&'a str> {
    match get(obj, key) {
        None => None,
        Some(Value::String(s)) => Some(s),
        Some(_) => {
            errors.push(FieldError::new(join(path, key), "must be a string"));
            None
        }
    }
}

/// A text with a length limit; blank is refused. Returns it when fine.
pub(super) fn bounded_text<'a>(
    s: &'a str,
    field: &str,
    max: usize,
    errors: &mut Vec<FieldError>,
) -> Option<&'a str> {
    if s.trim().is_empty() {
        errors.push(FieldError::new(field, "must not be empty"));
        None
    } else if chars(s) > max {
        errors.push(FieldError::new(
            field,
            format!("must be at most {max} characters (got {})", chars(s)),
        ));
        None
    } else {
        Some(s)
    }
}

pub(super) fn opt_bool(
    obj: &Map<String, Value>,
    path: &str,
    key: &str,
    errors: &mut Vec<FieldError>,
) {
    if get(obj, key).is_some_and(|v| !v.is_boolean()) {
        errors.push(FieldError::new(join(path, key), "must be true or false"));
    }
}

/// An absolute `https://host[:port][/path][?query][#fragment]` URL with a plausible host
/// and no spaces, control characters, backslashes or credentials. Where the link may point
/// (private addresses, …) is checked when it is fetched.
pub fn is_https_url(s: &str) -> bool {
    let Some(scheme) = s.get(..8) else {
        return false;
    };
    if !scheme.eq_ignore_ascii_case("https://") {
        return false;
    }
    let rest = &s[8..];
    if rest
        .chars()
        .any(|c| c.is_whitespace() || c.is_control() || c == '\\')
    {
        return false;
    }
    let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let authority = &rest[..end];
    if authority.contains('@') {
        return false;
    }
    let (host, port) = if let Some(v6) = authority.strip_prefix('[') {
        let Some((inside, after)) = v6.split_once(']') else {
            return false;
        };
        if inside.parse::<std::net::Ipv6Addr>().is_err() {
            return false;
        }
        match after {
            "" => (inside, None),
            p => match p.strip_prefix(':') {
                Some(p) => (inside, Some(p)),
                None => return false,
            },
        }
    } else {
        match authority.rsplit_once(':') {
            Some((h, p)) => (h, Some(p)),
            None => (authority, None),
        }
    };
    if let Some(p) = port
        && !(!p.is_empty()
            && p.len() <= 5
            && p.bytes().all(|b| b.is_ascii_digit())
            && p.parse::<u32>().is_ok_and(|n| (1..=65535).contains(&n)))
    {
        return false;
    }
    if authority.starts_with('[') {
        return true;
    }
    let host = host.strip_suffix('.').unwrap_or(host);
    !host.is_empty()
        && host.len() <= 253
        && host.split('.').all(|label| {
            !label.is_empty()
                && chars(label) <= 63
                && !label.starts_with('-')
                && !label.ends_with('-')
                && label.chars().all(|c| c.is_alphanumeric() || c == '-')
        })
}

pub(super) fn check_url(s: &str, field: &str, errors: &mut Vec<FieldError>) -> bool {
    if chars(s) > MAX_URL_CHARS {
        errors.push(FieldError::new(
            field,
            format!("must be at most {MAX_URL_CHARS} characters"),
        ));
        false
    } else if !is_https_url(s) {
        errors.push(FieldError::new(
            field,
            "must be an absolute https URL, such as https://example.com/file.jpg",
        ));
        false
    } else {
        true
    }
}

/// A message id (`context.message_id`, `reaction.message_id`): non-empty, no whitespace.
pub(super) fn check_message_id(s: &str, field: &str, errors: &mut Vec<FieldError>) -> bool {
    if s.is_empty() {
        errors.push(FieldError::new(
            field,
            "must not be empty: the id of the message (wamid.…)",
        ));
        false
    } else if chars(s) > MAX_MESSAGE_ID_CHARS
        || s.chars().any(|c| c.is_whitespace() || c.is_control())
    {
        errors.push(FieldError::new(
            field,
            format!(
                "must be a message id (wamid.…) of at most {MAX_MESSAGE_ID_CHARS} characters without spaces"
            ),
        ));
        false
    } else {
        true
    }
}

pub(super) fn object<'a>(
    v: &'a Value,
    path: &str,
    example: &str,
    errors: &mut Vec<FieldError>,
) -> Option<&'a Map<String, Value>> {
    let o = v.as_object();
    if o.is_none() {
        errors.push(FieldError::new(
            path,
            format!("must be an object such as {example}"),
        ));
    }
    o
}
