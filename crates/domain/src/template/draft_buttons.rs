//! The rules of a draft's BUTTONS component.

use super::*;

use crate::FieldError;
use serde_json::{Map, Value};

pub(super) fn check_buttons(obj: &Map<String, Value>, path: &str, errors: &mut Vec<FieldError>) {
    let bpath = format!("{path}.buttons");
    let Some(buttons) = obj.get("buttons").and_then(Value::as_array) else {
        errors.push(FieldError::new(bpath, "is required: an array of buttons"));
        return;
    };
    if buttons.is_empty() {
        errors.push(FieldError::new(bpath, "must hold at least one button"));
        return;
    }
    if buttons.len() > MAX_BUTTONS {
        errors.push(FieldError::new(
            bpath.clone(),
            format!("may hold at most {MAX_BUTTONS} buttons"),
        ));
    }
    let mut kinds: Vec<String> = Vec::new();
    for (j, b) in buttons.iter().enumerate() {
        let p = format!("{bpath}[{j}]");
        let Some(b) = b.as_object() else {
            errors.push(FieldError::new(p, "must be an object"));
            kinds.push(String::new());
            continue;
        };
        let Some(kind) = upper(b.get("type")) else {
            errors.push(FieldError::new(
                format!("{p}.type"),
                format!("is required: one of {}", BUTTON_TYPES.join(", ")),
            ));
            kinds.push(String::new());
            continue;
        };
        if !BUTTON_TYPES.contains(&kind.as_str()) {
            errors.push(FieldError::new(
                format!("{p}.type"),
                format!("must be one of {}", BUTTON_TYPES.join(", ")),
            ));
            kinds.push(String::new());
            continue;
        }
        check_button(&kind, b, &p, errors);
        kinds.push(kind);
    }
    for (kind, max) in [
        ("QUICK_REPLY", MAX_QUICK_REPLIES),
        ("URL", MAX_URL_BUTTONS),
        ("PHONE_NUMBER", MAX_PHONE_BUTTONS),
        ("COPY_CODE", MAX_COPY_CODE_BUTTONS),
    ] {
        let n = kinds.iter().filter(|k| *k == kind).count();
        if n > max {
            errors.push(FieldError::new(
                bpath.clone(),
                format!(
                    "may hold at most {max} {kind} button{}",
                    if max == 1 { "" } else { "s" }
                ),
            ));
        }
    }
    // Quick replies must be grouped together (all before or all after the others).
    let qr: Vec<usize> = kinds
        .iter()
        .enumerate()
        .filter(|(_, k)| *k == "QUICK_REPLY")
        .map(|(i, _)| i)
        .collect();
    if let (Some(first), Some(last)) = (qr.first(), qr.last())
        && last - first + 1 != qr.len()
    {
        errors.push(FieldError::new(
            bpath,
            "QUICK_REPLY buttons must be next to each other, not mixed with other buttons",
        ));
    }
}

pub(super) fn check_button(
    kind: &str,
    b: &Map<String, Value>,
    p: &str,
    errors: &mut Vec<FieldError>,
) {
    let label_required = matches!(kind, "QUICK_REPLY" | "URL" | "PHONE_NUMBER" | "FLOW");
    match b.get("text") {
        Some(Value::String(s)) if s.trim().is_empty() => {
            errors.push(FieldError::new(format!("{p}.text"), "must not be empty"));
        }
        Some(Value::String(s)) => {
            if chars(s) > MAX_BUTTON_TEXT_CHARS {
                errors.push(FieldError::new(
                    format!("{p}.text"),
                    format!("must be at most {MAX_BUTTON_TEXT_CHARS} characters"),
                ));
            }
            if s.contains("{{") {
                errors.push(FieldError::new(
                    format!("{p}.text"),
                    "must not contain variables",
                ));
            }
        }
        None | Some(Value::Null) if label_required => {
            errors.push(FieldError::new(format!("{p}.text"), "is required"));
        }
        None | Some(Value::Null) => {}
        Some(_) => errors.push(FieldError::new(format!("{p}.text"), "must be a string")),
    }
    match kind {
        "URL" => {
            let up = format!("{p}.url");
            let Some(url) = b.get("url").and_then(Value::as_str) else {
                errors.push(FieldError::new(up, "is required: an https URL"));
                return;
            };
            if chars(url) > MAX_URL_CHARS {
                errors.push(FieldError::new(
                    up.clone(),
                    format!("must be at most {MAX_URL_CHARS} characters"),
                ));
            }
            if !(url.starts_with("https://") || url.starts_with("http://")) || url.len() < 10 {
                errors.push(FieldError::new(up.clone(), "must be an http(s) URL"));
            }
            let (found, _) = scan(url);
            if found.is_empty() {
                return;
            }
            let only_one_at_end =
                found.len() == 1 && found[0].0 == Placeholder::Number(1) && found[0].2 == url.len();
            if !only_one_at_end {
                errors.push(FieldError::new(
                    up,
                    "may contain one variable, {{1}}, and only at the end",
                ));
                return;
            }
            match b.get("example") {
                Some(Value::Array(a)) if a.len() == 1 && a[0].as_str().is_some() => {
                    check_example_values(&format!("{p}.example"), a, errors);
                }
                Some(Value::String(s)) if value_problem(s).is_none() => {}
                _ => errors.push(FieldError::new(
                    format!("{p}.example"),
                    "is required: an array with one example URL for the variable",
                )),
            }
        }
        "PHONE_NUMBER" => {
            let pp = format!("{p}.phone_number");
            match b.get("phone_number").and_then(Value::as_str) {
                None => errors.push(FieldError::new(pp, "is required")),
                Some(n) => {
                    let digits = n.strip_prefix('+').unwrap_or(n);
                    if chars(n) > MAX_BUTTON_PHONE_CHARS
                        || digits.len() < 4
                        || !digits.bytes().all(|c| c.is_ascii_digit())
                    {
                        errors.push(FieldError::new(
                            pp,
                            format!(
                                "must be a phone number of digits with its country code, at most {MAX_BUTTON_PHONE_CHARS} characters"
                            ),
                        ));
                    }
                }
            }
        }
        "COPY_CODE" => {
            let ep = format!("{p}.example");
            match b.get("example") {
                Some(Value::String(s)) if s.trim().is_empty() => {
                    errors.push(FieldError::new(ep, "must not be empty"));
                }
                Some(Value::String(s)) if chars(s) > MAX_COUPON_CHARS => {
                    errors.push(FieldError::new(
                        ep,
                        format!("must be at most {MAX_COUPON_CHARS} characters"),
                    ));
                }
                Some(Value::String(s)) => {
                    if let Some(m) = value_problem(s) {
                        errors.push(FieldError::new(ep, m));
                    }
                }
                _ => errors.push(FieldError::new(
                    ep,
                    "is required: an example code (a string of at most 20 characters)",
                )),
            }
        }
        _ => {}
    }
}
