//! The `Idempotency-Key` header rule and the canonical-JSON fingerprint of a body.

use super::*;

use crate::Problem;
use serde_json::Value;
use sha2::{Digest, Sha256};

pub(super) fn describe_char(c: char) -> String {
    match c {
        ' ' => "a space".to_string(),
        c if c.is_control() => format!("the control character U+{:04X}", c as u32),
        c => format!("'{c}'"),
    }
}

/// Checks the `Idempotency-Key` header and returns it unchanged. Missing, empty and
/// malformed keys are `400 validation_failed` with `details.fields[0].field =
/// "Idempotency-Key"` and a message saying what is wrong.
pub fn check_idempotency_key(v: Option<&str>) -> Result<&str, Problem> {
    let field = |m: String| Err(Problem::field(IDEMPOTENCY_KEY_HEADER, m));
    let Some(key) = v else {
        return field(format!(
            "is required: send a unique key for each intended message ({KEY_RULE}; a UUID works), and the same key again when retrying"
        ));
    };
    if key.is_empty() {
        return field(format!(
            "is empty: send a unique key for each intended message ({KEY_RULE})"
        ));
    }
    let mut problems = Vec::new();
    if let Some(c) = key
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | ':' | '-')))
    {
        problems.push(format!(
            "contains {}; only letters, digits, '.', '_', ':' and '-' are allowed",
            describe_char(c)
        ));
    }
    if key
        .chars()
        .next()
        .is_some_and(|c| !c.is_ascii_alphanumeric())
    {
        problems.push("must start with a letter or a digit".to_string());
    }
    let n = chars(key);
    if n < IDEMPOTENCY_KEY_MIN_CHARS {
        problems.push(format!(
            "is too short ({n} characters); use {IDEMPOTENCY_KEY_MIN_CHARS} to {IDEMPOTENCY_KEY_MAX_CHARS}"
        ));
    } else if n > IDEMPOTENCY_KEY_MAX_CHARS {
        problems.push(format!(
            "is too long ({n} characters); use {IDEMPOTENCY_KEY_MIN_CHARS} to {IDEMPOTENCY_KEY_MAX_CHARS}"
        ));
    }
    if problems.is_empty() {
        Ok(key)
    } else {
        field(problems.join("; "))
    }
}

// ---- fingerprint -----------------------------------------------------------------------------

/// The canonical JSON text of a value: object keys sorted (by their UTF-8 bytes) at every
/// level, no whitespace, strings escaped and numbers printed as serde_json prints them.
pub fn canonical_json(v: &Value) -> String {
    let mut out = String::new();
    write_canonical(v, &mut out);
    out
}

pub(super) fn write_string(s: &str, out: &mut String) {
    // Serialising a string cannot fail.
    out.push_str(&serde_json::to_string(s).unwrap_or_default());
}

pub(super) fn write_canonical(v: &Value, out: &mut String) {
    match v {
        Value::Null => out.push_str("null"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Number(n) => out.push_str(&n.to_string()),
        Value::String(s) => write_string(s, out),
        Value::Array(a) => {
            out.push('[');
            for (i, item) in a.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_canonical(item, out);
            }
            out.push(']');
        }
        Value::Object(m) => {
            let mut keys: Vec<&String> = m.keys().collect();
            keys.sort();
            out.push('{');
            for (i, k) in keys.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_string(k, out);
                out.push(':');
                write_canonical(&m[k.as_str()], out);
            }
            out.push('}');
        }
    }
}

/// SHA-256 of [`canonical_json`]: the body fingerprint bound to an `Idempotency-Key`. Key
/// order and whitespace do not change it; any change of a value does.
pub fn fingerprint(body: &Value) -> [u8; 32] {
    Sha256::digest(canonical_json(body).as_bytes()).into()
}
