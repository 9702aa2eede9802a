//! Message template rules: validation of a draft in the network's component format, the
//! network's status and category names, and the send-path questions asked of a stored
//! template (how many variables, which header, is there a copy-code button, does a send's
//! `variables` / `components` / `coupon_code` fit it, and a ready-to-send example).
//!
//! Variables are positional (`{{1}}`, `{{2}}`, …). As in the network, the header and the
//! body number their variables separately; Tern's `variables` shorthand of POST /messages
//! fills *every* place where a number appears, so a template with `{{1}}` in its header and
//! `{{1}}`, `{{2}}` in its body takes two values.

use crate::{ErrorCode, FieldError, Problem};
use serde_json::{Map, Value, json};

pub const MAX_NAME_CHARS: usize = 512;
pub const MAX_HEADER_TEXT_CHARS: usize = 60;
pub const MAX_BODY_CHARS: usize = 1024;
pub const MAX_FOOTER_CHARS: usize = 60;
pub const MAX_BUTTONS: usize = 10;
pub const MAX_QUICK_REPLIES: usize = 10;
pub const MAX_URL_BUTTONS: usize = 2;
pub const MAX_PHONE_BUTTONS: usize = 1;
pub const MAX_COPY_CODE_BUTTONS: usize = 1;
pub const MAX_BUTTON_TEXT_CHARS: usize = 25;
pub const MAX_URL_CHARS: usize = 2000;
pub const MAX_BUTTON_PHONE_CHARS: usize = 20;
pub const MAX_COUPON_CHARS: usize = 20;

/// Tern's template statuses.
pub const STATUSES: [&str; 6] = [
    "draft", "pending", "approved", "rejected", "paused", "disabled",
];
pub const CATEGORIES: [&str; 3] = ["marketing", "utility", "authentication"];
pub const HEADER_FORMATS: [&str; 5] = ["TEXT", "IMAGE", "VIDEO", "DOCUMENT", "LOCATION"];
pub const BUTTON_TYPES: [&str; 8] = [
    "QUICK_REPLY",
    "URL",
    "PHONE_NUMBER",
    "COPY_CODE",
    "OTP",
    "FLOW",
    "CATALOG",
    "MPM",
];

/// The `to` of [`example_message`]; POST /messages refuses it until it is replaced.
pub const RECIPIENT_PLACEHOLDER: &str = "+<RECIPIENT_PHONE>";

pub fn is_status(s: &str) -> bool {
    STATUSES.contains(&s)
}

/// Tern's status for a status of the network's template API (`APPROVED`, …); `None` for
/// values that do not say whether the template can be sent (e.g. `LIMIT_EXCEEDED`).
pub fn status_from_network(s: &str) -> Option<&'static str> {
    Some(match s.to_ascii_uppercase().as_str() {
        "APPROVED" | "REINSTATED" | "UNARCHIVED" => "approved",
        "PENDING" | "IN_APPEAL" => "pending",
        "REJECTED" => "rejected",
        "PAUSED" => "paused",
        "DISABLED" | "DELETED" | "PENDING_DELETION" | "ARCHIVED" | "LOCKED" => "disabled",
        _ => return None,
    })
}

/// `marketing` for `MARKETING`, …; `None` for an unknown category.
pub fn category_from_network(s: &str) -> Option<&'static str> {
    let lower = s.to_ascii_lowercase();
    CATEGORIES.into_iter().find(|c| *c == lower)
}

/// The network's spelling of a Tern category (`MARKETING`).
pub fn category_to_network(s: &str) -> String {
    s.to_ascii_uppercase()
}

/// A rejection reason as reported by the network, without its "no reason" values.
pub fn rejection_reason_from_network(s: Option<&str>) -> Option<String> {
    s.map(str::trim)
        .filter(|r| !r.is_empty() && !r.eq_ignore_ascii_case("NONE"))
        .map(str::to_string)
}

pub fn check_name(field: &str, name: &str, errors: &mut Vec<FieldError>) {
    if name.is_empty() {
        errors.push(FieldError::new(field, "must not be empty"));
    } else if name.chars().count() > MAX_NAME_CHARS {
        errors.push(FieldError::new(
            field,
            format!("must be at most {MAX_NAME_CHARS} characters"),
        ));
    } else if !name
        .bytes()
        .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
    {
        errors.push(FieldError::new(
            field,
            "may contain only lowercase letters, digits and underscores",
        ));
    }
}

/// A language code as the network writes it: `en`, `en_US`, `pt_BR`, `fil`, `es_419`.
pub fn is_language_code(s: &str) -> bool {
    let (lang, region) = match s.split_once('_') {
        Some((l, r)) => (l, Some(r)),
        None => (s, None),
    };
    let lang_ok = (2..=3).contains(&lang.len()) && lang.bytes().all(|b| b.is_ascii_lowercase());
    let region_ok = match region {
        None => true,
        Some(r) => {
            (r.len() == 2 && r.bytes().all(|b| b.is_ascii_uppercase()))
                || (r.len() == 3 && r.bytes().all(|b| b.is_ascii_digit()))
        }
    };
    lang_ok && region_ok
}

pub fn check_language(field: &str, language: &str, errors: &mut Vec<FieldError>) {
    if !is_language_code(language) {
        errors.push(FieldError::new(
            field,
            "must be a language code such as en, en_US or pt_BR",
        ));
    }
}

pub fn check_category(field: &str, category: &str, errors: &mut Vec<FieldError>) {
    if !CATEGORIES.contains(&category) {
        errors.push(FieldError::new(
            field,
            format!("must be one of {}", CATEGORIES.join(", ")),
        ));
    }
}

/// A draft as given to POST /templates.
#[derive(Debug, Clone, Copy)]
pub struct Draft<'a> {
    pub name: &'a str,
    pub language: &'a str,
    pub category: &'a str,
    pub components: &'a Value,
}

/// Every locally checkable rule of the network for a new template, all problems at once.
/// Paths are those of the request body (`components[1].text`).
pub fn validate_draft(d: &Draft<'_>) -> Result<(), Vec<FieldError>> {
    let mut errors = Vec::new();
    check_name("name", d.name, &mut errors);
    check_language("language", d.language, &mut errors);
    check_category("category", d.category, &mut errors);
    check_components(d.category, d.components, &mut errors);
    if errors.is_empty() {
        Ok(())
    } else {
        Err(errors)
    }
}

fn upper(v: Option<&Value>) -> Option<String> {
    v.and_then(Value::as_str).map(str::to_ascii_uppercase)
}

fn chars(s: &str) -> usize {
    s.chars().count()
}

/// A `{{…}}` placeholder found in a text.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Placeholder {
    Number(u32),
    /// Anything else between `{{` and `}}` (named parameters, typos).
    Other(String),
}

/// Placeholders in order of appearance, with their byte ranges.
fn scan(text: &str) -> (Vec<(Placeholder, usize, usize)>, bool) {
    let mut out = Vec::new();
    let mut unclosed = false;
    let mut pos = 0;
    while let Some(i) = text[pos..].find("{{") {
        let start = pos + i;
        let Some(j) = text[start + 2..].find("}}") else {
            unclosed = true;
            break;
        };
        let inner = &text[start + 2..start + 2 + j];
        let end = start + 2 + j + 2;
        let p =
            if !inner.is_empty() && inner.len() <= 3 && inner.bytes().all(|b| b.is_ascii_digit()) {
                match inner.parse::<u32>() {
                    Ok(n) if n > 0 => Placeholder::Number(n),
                    _ => Placeholder::Other(inner.to_string()),
                }
            } else {
                Placeholder::Other(inner.to_string())
            };
        out.push((p, start, end));
        pos = end;
    }
    (out, unclosed)
}

/// Distinct numbered placeholders of a text, in ascending order.
fn numbers(text: &str) -> Vec<u32> {
    let mut n: Vec<u32> = scan(text)
        .0
        .into_iter()
        .filter_map(|(p, _, _)| match p {
            Placeholder::Number(n) => Some(n),
            Placeholder::Other(_) => None,
        })
        .collect();
    n.sort_unstable();
    n.dedup();
    n
}

/// Checks the placeholders of a text: numbered, sequential from 1 without gaps, and the
/// component's own limits. Returns the number of distinct variables.
fn check_placeholders(
    path: &str,
    text: &str,
    max_vars: Option<usize>,
    is_body: bool,
    errors: &mut Vec<FieldError>,
) -> usize {
    let (found, unclosed) = scan(text);
    if unclosed {
        errors.push(FieldError::new(path, "has a '{{' without a closing '}}'"));
    }
    let others: Vec<&str> = found
        .iter()
        .filter_map(|(p, _, _)| match p {
            Placeholder::Other(s) => Some(s.as_str()),
            Placeholder::Number(_) => None,
        })
        .collect();
    if let Some(o) = others.first() {
        errors.push(FieldError::new(
            path,
            format!(
                "has the placeholder {{{{{o}}}}}; variables must be numbered {{{{1}}}}, {{{{2}}}}, … (named variables are not supported)"
            ),
        ));
    }
    let nums = numbers(text);
    let distinct = nums.len();
    if let Some(max) = max_vars
        && distinct > max
    {
        errors.push(FieldError::new(
            path,
            if max == 0 {
                "must not contain variables".to_string()
            } else {
                format!("may contain at most {max} variable")
            },
        ));
        return distinct;
    }
    if nums.iter().enumerate().any(|(i, n)| *n as usize != i + 1) {
        let list = nums
            .iter()
            .map(|n| format!("{{{{{n}}}}}"))
            .collect::<Vec<_>>()
            .join(", ");
        errors.push(FieldError::new(
            path,
            format!(
                "variables must be numbered in sequence from {{{{1}}}} without gaps (found {list})"
            ),
        ));
    }
    if is_body && !found.is_empty() {
        let trimmed_start = text.len() - text.trim_start().len();
        let trimmed_end = text.trim_end().len();
        if found.first().is_some_and(|(_, s, _)| *s == trimmed_start) {
            errors.push(FieldError::new(path, "must not start with a variable"));
        }
        if found.last().is_some_and(|(_, _, e)| *e == trimmed_end) {
            errors.push(FieldError::new(path, "must not end with a variable"));
        }
        let adjacent = found
            .windows(2)
            .any(|w| text[w[0].2..w[1].1].trim().is_empty());
        if adjacent {
            errors.push(FieldError::new(
                path,
                "must not have two variables next to each other; put words between them",
            ));
        }
    }
    distinct
}

/// The rule of the network for variable values (and so for example values): non-empty, no
/// new line, no tab, no more than four spaces in a row. `None` when the value is fine.
pub fn value_problem(v: &str) -> Option<&'static str> {
    if v.trim().is_empty() {
        Some("must not be empty")
    } else if v.contains('\n') || v.contains('\r') {
        Some("must not contain a new line")
    } else if v.contains('\t') {
        Some("must not contain a tab")
    } else if v.contains("     ") {
        Some("must not contain more than four spaces in a row")
    } else {
        None
    }
}

fn check_example_values(path: &str, values: &[Value], errors: &mut Vec<FieldError>) {
    for (i, v) in values.iter().enumerate() {
        let p = format!("{path}[{i}]");
        match v.as_str() {
            None => errors.push(FieldError::new(p, "must be a string")),
            Some(s) => {
                if let Some(m) = value_problem(s) {
                    errors.push(FieldError::new(p, m));
                }
            }
        }
    }
}

/// `example.<key>` of a component as an array, with errors for the wrong shape.
fn example_array<'a>(
    comp: &'a Map<String, Value>,
    path: &str,
    key: &str,
    errors: &mut Vec<FieldError>,
) -> Option<&'a Vec<Value>> {
    let ex_path = format!("{path}.example.{key}");
    match comp.get("example") {
        None | Some(Value::Null) => {
            errors.push(FieldError::new(
                ex_path,
                "is required: give an example value for every variable",
            ));
            None
        }
        Some(Value::Object(ex)) => match ex.get(key) {
            Some(Value::Array(a)) => Some(a),
            None | Some(Value::Null) => {
                errors.push(FieldError::new(
                    ex_path,
                    "is required: give an example value for every variable",
                ));
                None
            }
            Some(_) => {
                errors.push(FieldError::new(ex_path, "must be an array"));
                None
            }
        },
        Some(_) => {
            errors.push(FieldError::new(
                format!("{path}.example"),
                "must be an object",
            ));
            None
        }
    }
}

fn text_field<'a>(
    comp: &'a Map<String, Value>,
    path: &str,
    max: usize,
    errors: &mut Vec<FieldError>,
) -> Option<&'a str> {
    let p = format!("{path}.text");
    match comp.get("text") {
        Some(Value::String(s)) if s.trim().is_empty() => {
            errors.push(FieldError::new(p, "must not be empty"));
            None
        }
        Some(Value::String(s)) => {
            if chars(s) > max {
                errors.push(FieldError::new(
                    p,
                    format!("must be at most {max} characters"),
                ));
            }
            Some(s)
        }
        None | Some(Value::Null) => {
            errors.push(FieldError::new(p, "is required"));
            None
        }
        Some(_) => {
            errors.push(FieldError::new(p, "must be a string"));
            None
        }
    }
}

fn check_components(category: &str, components: &Value, errors: &mut Vec<FieldError>) {
    let Some(list) = components.as_array() else {
        errors.push(FieldError::new("components", "must be an array"));
        return;
    };
    if list.is_empty() {
        errors.push(FieldError::new(
            "components",
            "must contain at least a BODY component",
        ));
        return;
    }
    let mut seen: Vec<String> = Vec::new();
    let mut has_body = false;
    for (i, c) in list.iter().enumerate() {
        let path = format!("components[{i}]");
        let Some(obj) = c.as_object() else {
            errors.push(FieldError::new(path, "must be an object"));
            continue;
        };
        let Some(kind) = upper(obj.get("type")) else {
            errors.push(FieldError::new(
                format!("{path}.type"),
                "is required: one of HEADER, BODY, FOOTER, BUTTONS",
            ));
            continue;
        };
        if !matches!(kind.as_str(), "HEADER" | "BODY" | "FOOTER" | "BUTTONS") {
            errors.push(FieldError::new(
                format!("{path}.type"),
                "must be one of HEADER, BODY, FOOTER, BUTTONS",
            ));
            continue;
        }
        if seen.contains(&kind) {
            errors.push(FieldError::new(
                format!("{path}.type"),
                format!("a template has at most one {kind} component"),
            ));
            continue;
        }
        seen.push(kind.clone());
        match kind.as_str() {
            "HEADER" => check_header(category, obj, &path, errors),
            "BODY" => {
                has_body = true;
                check_body(obj, &path, errors);
            }
            "FOOTER" => {
                if let Some(text) = text_field(obj, &path, MAX_FOOTER_CHARS, errors) {
                    check_placeholders(&format!("{path}.text"), text, Some(0), false, errors);
                }
            }
            _ => check_buttons(obj, &path, errors),
        }
    }
    if !has_body {
        errors.push(FieldError::new(
            "components",
            "must contain a BODY component",
        ));
    }
}

fn check_header(
    category: &str,
    obj: &Map<String, Value>,
    path: &str,
    errors: &mut Vec<FieldError>,
) {
    let format_path = format!("{path}.format");
    let Some(format) = upper(obj.get("format")) else {
        errors.push(FieldError::new(
            format_path,
            format!("is required: one of {}", HEADER_FORMATS.join(", ")),
        ));
        return;
    };
    if !HEADER_FORMATS.contains(&format.as_str()) {
        errors.push(FieldError::new(
            format_path,
            format!("must be one of {}", HEADER_FORMATS.join(", ")),
        ));
        return;
    }
    match format.as_str() {
        "TEXT" => {
            let Some(text) = text_field(obj, path, MAX_HEADER_TEXT_CHARS, errors) else {
                return;
            };
            let n = check_placeholders(&format!("{path}.text"), text, Some(1), false, errors);
            if n > 0
                && let Some(values) = example_array(obj, path, "header_text", errors)
            {
                let p = format!("{path}.example.header_text");
                if values.len() != n {
                    errors.push(FieldError::new(
                        p.clone(),
                        format!("must hold exactly {n} value, one per variable"),
                    ));
                }
                check_example_values(&p, values, errors);
            }
        }
        media => {
            if obj.get("text").is_some_and(|t| !t.is_null()) {
                errors.push(FieldError::new(
                    format!("{path}.text"),
                    format!("is not allowed with a {media} header"),
                ));
            }
            if media == "LOCATION" {
                if category == "authentication" {
                    errors.push(FieldError::new(
                        format_path,
                        "LOCATION headers are allowed in marketing and utility templates only",
                    ));
                }
                return;
            }
            if let Some(values) = example_array(obj, path, "header_handle", errors) {
                let p = format!("{path}.example.header_handle");
                if values.len() != 1 {
                    errors.push(FieldError::new(
                        p.clone(),
                        "must hold exactly one media handle (from the network's resumable upload)",
                    ));
                }
                check_example_values(&p, values, errors);
            }
        }
    }
}

fn check_body(obj: &Map<String, Value>, path: &str, errors: &mut Vec<FieldError>) {
    let Some(text) = text_field(obj, path, MAX_BODY_CHARS, errors) else {
        return;
    };
    let n = check_placeholders(&format!("{path}.text"), text, None, true, errors);
    if n == 0 {
        return;
    }
    let Some(outer) = example_array(obj, path, "body_text", errors) else {
        return;
    };
    let p = format!("{path}.example.body_text");
    match outer.as_slice() {
        [Value::Array(values)] => {
            let inner = format!("{p}[0]");
            if values.len() != n {
                errors.push(FieldError::new(
                    inner.clone(),
                    format!(
                        "must hold exactly {n} values, one per variable (got {})",
                        values.len()
                    ),
                ));
            }
            check_example_values(&inner, values, errors);
        }
        _ => errors.push(FieldError::new(
            p,
            "must be an array holding one array of example values, e.g. [[\"Ada\", \"12345\"]]",
        )),
    }
}

fn check_buttons(obj: &Map<String, Value>, path: &str, errors: &mut Vec<FieldError>) {
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

fn check_button(kind: &str, b: &Map<String, Value>, p: &str, errors: &mut Vec<FieldError>) {
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

// ---- send-path questions over a stored template's components -------------------------------

/// Which header a template takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HeaderKind {
    None,
    Text,
    Image,
    Video,
    Document,
    Location,
}

impl HeaderKind {
    pub fn as_str(self) -> &'static str {
        match self {
            HeaderKind::None => "none",
            HeaderKind::Text => "text",
            HeaderKind::Image => "image",
            HeaderKind::Video => "video",
            HeaderKind::Document => "document",
            HeaderKind::Location => "location",
        }
    }

    /// A media header (image, video, document).
    pub fn is_media(self) -> bool {
        matches!(
            self,
            HeaderKind::Image | HeaderKind::Video | HeaderKind::Document
        )
    }
}

fn component<'a>(components: &'a Value, kind: &str) -> Option<&'a Map<String, Value>> {
    components.as_array()?.iter().find_map(|c| {
        let obj = c.as_object()?;
        obj.get("type")
            .and_then(Value::as_str)
            .is_some_and(|t| t.eq_ignore_ascii_case(kind))
            .then_some(obj)
    })
}

fn comp_text<'a>(components: &'a Value, kind: &str) -> Option<&'a str> {
    component(components, kind)?
        .get("text")
        .and_then(Value::as_str)
}

pub fn header_kind(components: &Value) -> HeaderKind {
    let Some(h) = component(components, "HEADER") else {
        return HeaderKind::None;
    };
    match upper(h.get("format")).as_deref() {
        Some("TEXT") => HeaderKind::Text,
        Some("IMAGE") => HeaderKind::Image,
        Some("VIDEO") => HeaderKind::Video,
        Some("DOCUMENT") => HeaderKind::Document,
        Some("LOCATION") => HeaderKind::Location,
        // A header without a format but with text is a text header.
        _ if h.get("text").is_some_and(Value::is_string) => HeaderKind::Text,
        _ => HeaderKind::None,
    }
}

/// Distinct numbered variables of the header text.
pub fn header_variable_count(components: &Value) -> usize {
    if header_kind(components) != HeaderKind::Text {
        return 0;
    }
    comp_text(components, "HEADER").map_or(0, |t| numbers(t).len())
}

/// Distinct numbered variables of the body text.
pub fn body_variable_count(components: &Value) -> usize {
    comp_text(components, "BODY").map_or(0, |t| numbers(t).len())
}

/// Distinct variable numbers across header and body: the length of POST /messages'
/// `variables`.
pub fn variable_count(components: &Value) -> usize {
    let mut all = comp_text(components, "BODY")
        .map(numbers)
        .unwrap_or_default();
    if header_kind(components) == HeaderKind::Text
        && let Some(t) = comp_text(components, "HEADER")
    {
        all.extend(numbers(t));
    }
    all.sort_unstable();
    all.dedup();
    all.len()
}

/// The template's buttons, `(index, TYPE, button)`.
fn buttons(components: &Value) -> Vec<(usize, String, &Map<String, Value>)> {
    component(components, "BUTTONS")
        .and_then(|b| b.get("buttons"))
        .and_then(Value::as_array)
        .map(|list| {
            list.iter()
                .enumerate()
                .filter_map(|(i, b)| {
                    let obj = b.as_object()?;
                    Some((i, upper(obj.get("type"))?, obj))
                })
                .collect()
        })
        .unwrap_or_default()
}

pub fn has_copy_code_button(components: &Value) -> bool {
    copy_code_index(components).is_some()
}

fn copy_code_index(components: &Value) -> Option<usize> {
    buttons(components)
        .into_iter()
        .find(|(_, k, _)| k == "COPY_CODE")
        .map(|(i, _, _)| i)
}

/// Indexes of URL buttons whose URL ends with a variable.
pub fn dynamic_url_buttons(components: &Value) -> Vec<usize> {
    buttons(components)
        .into_iter()
        .filter(|(_, k, b)| {
            k == "URL"
                && b.get("url")
                    .and_then(Value::as_str)
                    .is_some_and(|u| !scan(u).0.is_empty())
        })
        .map(|(i, _, _)| i)
        .collect()
}

/// True when a send must use typed `components`: a media or location header, or a URL
/// button with a variable (the `variables` shorthand cannot express them).
pub fn needs_components(components: &Value) -> bool {
    let h = header_kind(components);
    h.is_media() || h == HeaderKind::Location || !dynamic_url_buttons(components).is_empty()
}

/// Why a send's template part was refused. `ValidationFailed` (400) when a value or the
/// shape is wrong whatever the template; `TemplateNotApproved` (409) when it does not match
/// the approved template (number of variables, header kind, buttons).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SendRefusal {
    pub code: ErrorCode,
    pub fields: Vec<FieldError>,
}

impl SendRefusal {
    pub fn into_problem(self) -> Problem {
        match self.code {
            ErrorCode::ValidationFailed => Problem::validation(self.fields),
            code => {
                let message = match self.fields.as_slice() {
                    [one] => format!(
                        "The values do not match the approved template: {}: {}",
                        one.field, one.message
                    ),
                    _ => "The values do not match the approved template.".to_string(),
                };
                Problem::new(code).with_message(message).with_detail(
                    "fields",
                    serde_json::to_value(self.fields).unwrap_or(Value::Null),
                )
            }
        }
    }
}

/// The rules of a send's `template` part that hold whatever the template is: not both
/// `variables` and `components`, `coupon_code` only with `variables` (at most 20 characters),
/// every value non-empty without a new line, a tab or more than four spaces in a row, and
/// the shape of typed `components`. These are request-body errors (400); an empty list means
/// the shape is fine. Field paths are those of the message body (`template.variables[0]`).
/// [`check_send`] applies the same rules before matching against the template.
pub fn send_shape_problems(
    variables: Option<&[String]>,
    components: Option<&Value>,
    coupon_code: Option<&str>,
) -> Vec<FieldError> {
    let mut invalid = Vec::new();
    if variables.is_some() && components.is_some() {
        invalid.push(FieldError::new(
            "template",
            "give either variables or components, not both",
        ));
    }
    if let Some(code) = coupon_code {
        if components.is_some() {
            invalid.push(FieldError::new(
                "template.coupon_code",
                "goes with variables; with components put it in the copy_code button's parameter",
            ));
        } else if chars(code) > MAX_COUPON_CHARS {
            invalid.push(FieldError::new(
                "template.coupon_code",
                format!("must be at most {MAX_COUPON_CHARS} characters"),
            ));
        } else if let Some(m) = value_problem(code) {
            invalid.push(FieldError::new("template.coupon_code", m));
        }
    }
    if let Some(vars) = variables {
        for (i, v) in vars.iter().enumerate() {
            if let Some(m) = value_problem(v) {
                invalid.push(FieldError::new(format!("template.variables[{i}]"), m));
            }
        }
    }
    if let Some(c) = components {
        check_send_components_shape(c, &mut invalid);
    }
    invalid
}

/// Checks the `template` part of a POST /messages body against the stored template's
/// components. Field paths are those of the message body (`template.variables[0]`).
pub fn check_send(
    template_components: &Value,
    variables: Option<&[String]>,
    components: Option<&Value>,
    coupon_code: Option<&str>,
) -> Result<(), SendRefusal> {
    let invalid = send_shape_problems(variables, components, coupon_code);
    let mut mismatch = Vec::new();
    if !invalid.is_empty() {
        return Err(SendRefusal {
            code: ErrorCode::ValidationFailed,
            fields: invalid,
        });
    }
    let copy_code = has_copy_code_button(template_components);
    match components {
        Some(c) => match_components(template_components, c, &mut mismatch),
        None => {
            let want = variable_count(template_components);
            let got = variables.map_or(0, <[String]>::len);
            if got != want {
                mismatch.push(FieldError::new(
                    "template.variables",
                    format!("the template has {want} variable(s), {got} value(s) were given"),
                ));
            }
            let h = header_kind(template_components);
            if h.is_media() || h == HeaderKind::Location {
                mismatch.push(FieldError::new(
                    "template.components",
                    format!(
                        "is required: the template has a {} header; send it as a header parameter in components",
                        h.as_str()
                    ),
                ));
            }
            if !dynamic_url_buttons(template_components).is_empty() {
                mismatch.push(FieldError::new(
                    "template.components",
                    "is required: the template has a URL button with a variable; send it as a url button parameter in components",
                ));
            }
            if copy_code && coupon_code.is_none() {
                mismatch.push(FieldError::new(
                    "template.coupon_code",
                    "is required: the template has a copy-code button",
                ));
            }
        }
    }
    if !copy_code && coupon_code.is_some() {
        mismatch.push(FieldError::new(
            "template.coupon_code",
            "is only allowed when the template has a copy-code button",
        ));
    }
    if mismatch.is_empty() {
        Ok(())
    } else {
        Err(SendRefusal {
            code: ErrorCode::TemplateNotApproved,
            fields: mismatch,
        })
    }
}

/// Shape and value rules of a send's `components`, independent of the template.
fn check_send_components_shape(c: &Value, invalid: &mut Vec<FieldError>) {
    let Some(list) = c.as_array() else {
        invalid.push(FieldError::new("template.components", "must be an array"));
        return;
    };
    for (i, comp) in list.iter().enumerate() {
        let p = format!("template.components[{i}]");
        let Some(obj) = comp.as_object() else {
            invalid.push(FieldError::new(p, "must be an object"));
            continue;
        };
        let kind = obj
            .get("type")
            .and_then(Value::as_str)
            .map(str::to_ascii_lowercase);
        if !matches!(kind.as_deref(), Some("header" | "body" | "button")) {
            invalid.push(FieldError::new(
                format!("{p}.type"),
                "must be one of header, body, button",
            ));
            continue;
        }
        if kind.as_deref() == Some("button") {
            let sub = obj.get("sub_type").and_then(Value::as_str);
            if !matches!(
                sub.map(str::to_ascii_lowercase).as_deref(),
                Some("quick_reply" | "url" | "copy_code" | "flow" | "catalog" | "mpm")
            ) {
                invalid.push(FieldError::new(
                    format!("{p}.sub_type"),
                    "must be one of quick_reply, url, copy_code, flow, catalog, mpm",
                ));
            }
            if button_index(obj).is_none() {
                invalid.push(FieldError::new(
                    format!("{p}.index"),
                    "must be the button's position, \"0\" to \"9\"",
                ));
            }
        }
        let Some(params) = obj.get("parameters").and_then(Value::as_array) else {
            invalid.push(FieldError::new(
                format!("{p}.parameters"),
                "is required: an array",
            ));
            continue;
        };
        for (j, param) in params.iter().enumerate() {
            check_param_shape(param, &format!("{p}.parameters[{j}]"), invalid);
        }
    }
}

fn button_index(obj: &Map<String, Value>) -> Option<usize> {
    match obj.get("index")? {
        Value::String(s) if s.len() == 1 => s.parse().ok(),
        Value::Number(n) => n.as_u64().filter(|n| *n <= 9).map(|n| n as usize),
        _ => None,
    }
}

fn check_param_shape(param: &Value, p: &str, invalid: &mut Vec<FieldError>) {
    let Some(obj) = param.as_object() else {
        invalid.push(FieldError::new(p, "must be an object"));
        return;
    };
    let t = obj.get("type").and_then(Value::as_str).unwrap_or("");
    let str_value =
        |key: &str, invalid: &mut Vec<FieldError>| match obj.get(key).and_then(Value::as_str) {
            None => invalid.push(FieldError::new(
                format!("{p}.{key}"),
                "is required: a string",
            )),
            Some(v) => {
                if let Some(m) = value_problem(v) {
                    invalid.push(FieldError::new(format!("{p}.{key}"), m));
                }
            }
        };
    match t {
        "text" => str_value("text", invalid),
        "payload" => str_value("payload", invalid),
        "coupon_code" => {
            str_value("coupon_code", invalid);
            if obj
                .get("coupon_code")
                .and_then(Value::as_str)
                .is_some_and(|c| chars(c) > MAX_COUPON_CHARS)
            {
                invalid.push(FieldError::new(
                    format!("{p}.coupon_code"),
                    format!("must be at most {MAX_COUPON_CHARS} characters"),
                ));
            }
        }
        "currency" => {
            let cur = obj.get("currency").and_then(Value::as_object);
            let ok = cur.is_some_and(|c| {
                c.get("fallback_value")
                    .and_then(Value::as_str)
                    .is_some_and(|v| value_problem(v).is_none())
                    && c.get("code")
                        .and_then(Value::as_str)
                        .is_some_and(|v| v.len() == 3 && v.bytes().all(|b| b.is_ascii_uppercase()))
                    && c.get("amount_1000").and_then(Value::as_i64).is_some()
            });
            if !ok {
                invalid.push(FieldError::new(
                    format!("{p}.currency"),
                    "must be {fallback_value, code (ISO 4217), amount_1000}",
                ));
            }
        }
        "date_time" => {
            let ok = obj
                .get("date_time")
                .and_then(|d| d.get("fallback_value"))
                .and_then(Value::as_str)
                .is_some_and(|v| value_problem(v).is_none());
            if !ok {
                invalid.push(FieldError::new(
                    format!("{p}.date_time"),
                    "must be {fallback_value}",
                ));
            }
        }
        "image" | "video" | "document" => {
            let m = obj.get(t).and_then(Value::as_object);
            let ok = m.is_some_and(|m| {
                let id = m.get("id").and_then(Value::as_str).is_some_and(|s| !s.is_empty());
                let link = m
                    .get("link")
                    .and_then(Value::as_str)
                    .is_some_and(|s| s.starts_with("https://"));
                id ^ link
            });
            if !ok {
                invalid.push(FieldError::new(
                    format!("{p}.{t}"),
                    "must hold exactly one of id (an uploaded media id) or link (an https URL)",
                ));
            }
        }
        "location" => {
            let ok = obj.get("location").and_then(Value::as_object).is_some_and(|l| {
                l.get("latitude").is_some_and(Value::is_number)
                    && l.get("longitude").is_some_and(Value::is_number)
            });
            if !ok {
                invalid.push(FieldError::new(
                    format!("{p}.location"),
                    "must hold numeric latitude and longitude",
                ));
            }
        }
        "action" => {
            if !obj.get("action").is_some_and(Value::is_object) {
                invalid.push(FieldError::new(format!("{p}.action"), "must be an object"));
            }
        }
        _ => invalid.push(FieldError::new(
            format!("{p}.type"),
            "must be one of text, currency, date_time, image, video, document, location, payload, coupon_code, action",
        )),
    }
}

fn params(obj: &Map<String, Value>) -> &[Value] {
    obj.get("parameters")
        .and_then(Value::as_array)
        .map_or(&[], Vec::as_slice)
}

fn param_type(v: &Value) -> &str {
    v.get("type").and_then(Value::as_str).unwrap_or("")
}

/// Matches a (well-shaped) send `components` against the template.
fn match_components(tpl: &Value, sent: &Value, mismatch: &mut Vec<FieldError>) {
    let list = sent.as_array().map_or(&[][..], Vec::as_slice);
    let of = |kind: &'static str| {
        list.iter().enumerate().filter(move |(_, c)| {
            c.get("type")
                .and_then(Value::as_str)
                .is_some_and(|t| t.eq_ignore_ascii_case(kind))
        })
    };
    // Header.
    let h = header_kind(tpl);
    let headers: Vec<_> = of("header").collect();
    let want_header = match h {
        HeaderKind::Text => header_variable_count(tpl) > 0,
        HeaderKind::None => false,
        _ => true,
    };
    match (headers.as_slice(), want_header) {
        ([], true) => mismatch.push(FieldError::new(
            "template.components",
            format!(
                "must include a header component: the template has a {} header",
                h.as_str()
            ),
        )),
        ([(i, c)], true) => {
            let p = format!("template.components[{i}].parameters");
            let ps = c.as_object().map_or(&[][..], params);
            let want_type = match h {
                HeaderKind::Text => "text",
                other => other.as_str(),
            };
            if ps.len() != 1 {
                mismatch.push(FieldError::new(
                    p,
                    format!("must hold exactly one {want_type} parameter"),
                ));
            } else if param_type(&ps[0]) != want_type {
                mismatch.push(FieldError::new(
                    format!("{p}[0].type"),
                    format!(
                        "must be {want_type}: the template has a {} header",
                        h.as_str()
                    ),
                ));
            }
        }
        ([(i, _)], false) => mismatch.push(FieldError::new(
            format!("template.components[{i}]"),
            "is not expected: the template's header takes no parameter",
        )),
        (many, _) => {
            if let Some((i, _)) = many.get(1) {
                mismatch.push(FieldError::new(
                    format!("template.components[{i}]"),
                    "only one header component is allowed",
                ));
            }
        }
    }
    // Body.
    let want_body = body_variable_count(tpl);
    let bodies: Vec<_> = of("body").collect();
    match bodies.as_slice() {
        [] if want_body > 0 => mismatch.push(FieldError::new(
            "template.components",
            format!("must include a body component with {want_body} parameter(s)"),
        )),
        [] => {}
        [(i, c), rest @ ..] => {
            let got = c.as_object().map_or(0, |o| params(o).len());
            if got != want_body {
                mismatch.push(FieldError::new(
                    format!("template.components[{i}].parameters"),
                    format!("the template's body has {want_body} variable(s), {got} parameter(s) were given"),
                ));
            }
            if let Some((k, _)) = rest.first() {
                mismatch.push(FieldError::new(
                    format!("template.components[{k}]"),
                    "only one body component is allowed",
                ));
            }
            if let Some(ps) = c.as_object().map(params) {
                for (j, p) in ps.iter().enumerate() {
                    if !matches!(param_type(p), "text" | "currency" | "date_time") {
                        mismatch.push(FieldError::new(
                            format!("template.components[{i}].parameters[{j}].type"),
                            "must be text, currency or date_time in a body",
                        ));
                    }
                }
            }
        }
    }
    // Buttons.
    let tpl_buttons = buttons(tpl);
    let mut covered: Vec<usize> = Vec::new();
    for (i, c) in of("button") {
        let p = format!("template.components[{i}]");
        let Some(obj) = c.as_object() else { continue };
        let Some(index) = button_index(obj) else {
            continue;
        };
        let sub = obj
            .get("sub_type")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_ascii_uppercase();
        let Some((_, kind, b)) = tpl_buttons.iter().find(|(j, _, _)| *j == index) else {
            mismatch.push(FieldError::new(
                format!("{p}.index"),
                format!("the template has no button at index {index}"),
            ));
            continue;
        };
        if *kind != sub {
            mismatch.push(FieldError::new(
                format!("{p}.sub_type"),
                format!(
                    "the template's button {index} is {}",
                    kind.to_ascii_lowercase()
                ),
            ));
            continue;
        }
        if covered.contains(&index) {
            mismatch.push(FieldError::new(
                format!("{p}.index"),
                format!("button {index} is given twice"),
            ));
            continue;
        }
        covered.push(index);
        let ps = params(obj);
        let want = match kind.as_str() {
            "QUICK_REPLY" => Some("payload"),
            "COPY_CODE" => Some("coupon_code"),
            "URL" => {
                let dynamic = b
                    .get("url")
                    .and_then(Value::as_str)
                    .is_some_and(|u| !scan(u).0.is_empty());
                if !dynamic {
                    mismatch.push(FieldError::new(
                        p.clone(),
                        format!(
                            "is not expected: the template's URL button {index} has no variable"
                        ),
                    ));
                    continue;
                }
                Some("text")
            }
            _ => None,
        };
        if let Some(want) = want
            && (ps.len() != 1 || param_type(&ps[0]) != want)
        {
            mismatch.push(FieldError::new(
                format!("{p}.parameters"),
                format!("must hold exactly one {want} parameter"),
            ));
        }
    }
    for i in dynamic_url_buttons(tpl) {
        if !covered.contains(&i) {
            mismatch.push(FieldError::new(
                "template.components",
                format!(
                    "must include a url button component with index \"{i}\" for the URL's variable"
                ),
            ));
        }
    }
    if let Some(i) = copy_code_index(tpl)
        && !covered.contains(&i)
    {
        mismatch.push(FieldError::new(
            "template.components",
            format!(
                "must include a copy_code button component with index \"{i}\" and the coupon code"
            ),
        ));
    }
}

// ---- variables shorthand → network components ----------------------------------------------

/// Converts POST /messages' `variables` shorthand (and `coupon_code`) into the network's
/// send `components` array for a template. Call it only after [`check_send`] accepted the
/// same values; it does not check them again (a missing value becomes an empty string).
///
/// Mapping, consistent with [`variable_count`] and [`check_send`]:
/// - The distinct numbers used by the header text and the body text, in ascending order,
///   take the values one by one: the k-th distinct number takes `variables[k]`. For a
///   template numbered without gaps (every template that passed [`validate_draft`]) this is
///   simply "`variables[n-1]` fills every `{{n}}`", header and body alike.
/// - A text header with a variable gets `{"type":"header","parameters":[{"type":"text",
///   "text":…}]}`, one parameter per distinct number of the header text.
/// - The body gets `{"type":"body","parameters":[…]}`, one text parameter per distinct
///   number of the body text in ascending order (the network fills `{{1}}`, `{{2}}`, … from
///   them in order). A body without variables gets no component.
/// - With `coupon_code` and a copy-code button at position `i`, a
///   `{"type":"button","sub_type":"copy_code","index":"<i>","parameters":[{"type":
///   "coupon_code","coupon_code":…}]}` component is added.
/// - Nothing else: quick-reply buttons need no parameter; media / location headers and URL
///   buttons with a variable cannot be expressed with `variables` (check_send refuses them).
///
/// The result is empty when the template takes no values; the network accepts a template
/// send without `components` then.
pub fn network_components(
    template_components: &Value,
    variables: &[String],
    coupon_code: Option<&str>,
) -> Vec<Value> {
    let header_numbers = if header_kind(template_components) == HeaderKind::Text {
        comp_text(template_components, "HEADER")
            .map(numbers)
            .unwrap_or_default()
    } else {
        Vec::new()
    };
    let body_numbers = comp_text(template_components, "BODY")
        .map(numbers)
        .unwrap_or_default();
    let mut all: Vec<u32> = header_numbers
        .iter()
        .chain(body_numbers.iter())
        .copied()
        .collect();
    all.sort_unstable();
    all.dedup();
    let value_of = |n: u32| -> Value {
        let text = all
            .iter()
            .position(|m| *m == n)
            .and_then(|k| variables.get(k))
            .cloned()
            .unwrap_or_default();
        json!({"type": "text", "text": text})
    };
    let mut out = Vec::new();
    if !header_numbers.is_empty() {
        let ps: Vec<Value> = header_numbers.iter().map(|n| value_of(*n)).collect();
        out.push(json!({"type": "header", "parameters": ps}));
    }
    if !body_numbers.is_empty() {
        let ps: Vec<Value> = body_numbers.iter().map(|n| value_of(*n)).collect();
        out.push(json!({"type": "body", "parameters": ps}));
    }
    if let (Some(code), Some(i)) = (coupon_code, copy_code_index(template_components)) {
        out.push(json!({
            "type": "button",
            "sub_type": "copy_code",
            "index": i.to_string(),
            "parameters": [{"type": "coupon_code", "coupon_code": code}]
        }));
    }
    out
}

// ---- example ---------------------------------------------------------------------------------

/// A value usable as a variable: the example itself when it follows the value rule,
/// otherwise a cleaned-up version (or a generic one).
fn usable(v: Option<&str>, n: usize) -> String {
    if let Some(s) = v
        && value_problem(s).is_none()
    {
        return s.to_string();
    }
    let cleaned = v
        .unwrap_or("")
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ");
    if cleaned.is_empty() {
        format!("value {n}")
    } else {
        cleaned
    }
}

fn example_strings<'a>(comp: Option<&'a Map<String, Value>>, key: &str) -> Vec<Option<&'a str>> {
    let Some(ex) = comp.and_then(|c| c.get("example")).and_then(|e| e.get(key)) else {
        return Vec::new();
    };
    let arr = match ex {
        // body_text is [[…]]
        Value::Array(outer) if outer.first().is_some_and(Value::is_array) => {
            outer[0].as_array().map_or(&[][..], Vec::as_slice)
        }
        Value::Array(a) => a.as_slice(),
        _ => &[],
    };
    arr.iter().map(Value::as_str).collect()
}

/// A ready-to-send POST /messages body for the template, filled from its own examples, whose
/// `to` is [`RECIPIENT_PLACEHOLDER`]. Uses `variables` (and `coupon_code`) when they suffice,
/// and typed `components` when the template has a media or location header, a URL button
/// with a variable, or a copy-code button.
pub fn example_message(name: &str, language: &str, components: &Value) -> Value {
    let header = component(components, "HEADER");
    let body = component(components, "BODY");
    let body_examples = example_strings(body, "body_text");
    let header_examples = example_strings(header, "header_text");
    // Value of variable n (1-based): the body's example, else the header's.
    let value = |n: usize, from_header: bool| -> String {
        let b = body_examples.get(n - 1).copied().flatten();
        let h = header_examples.get(n - 1).copied().flatten();
        if from_header {
            usable(h.or(b), n)
        } else {
            usable(b.or(h), n)
        }
    };
    let copy_code = copy_code_index(components);
    let urls = dynamic_url_buttons(components);
    let h = header_kind(components);
    let typed =
        h.is_media() || h == HeaderKind::Location || !urls.is_empty() || copy_code.is_some();
    let mut template = json!({"name": name, "language": language});
    if !typed {
        let n = variable_count(components);
        if n > 0 {
            template["variables"] = Value::Array((1..=n).map(|i| json!(value(i, false))).collect());
        }
    } else {
        let mut comps = Vec::new();
        match h {
            HeaderKind::Text if header_variable_count(components) > 0 => {
                comps.push(json!({"type": "header", "parameters": [{"type": "text", "text": value(1, true)}]}));
            }
            HeaderKind::Image | HeaderKind::Video | HeaderKind::Document => {
                let kind = h.as_str();
                let handle = example_strings(header, "header_handle")
                    .first()
                    .copied()
                    .flatten()
                    .filter(|s| s.starts_with("https://"))
                    .map(str::to_string);
                let ext = match h {
                    HeaderKind::Image => "jpg",
                    HeaderKind::Video => "mp4",
                    _ => "pdf",
                };
                let link = handle.unwrap_or_else(|| format!("https://example.com/{kind}.{ext}"));
                comps.push(
                    json!({"type": "header", "parameters": [{"type": kind, kind: {"link": link}}]}),
                );
            }
            HeaderKind::Location => {
                comps.push(json!({"type": "header", "parameters": [{"type": "location",
                    "location": {"latitude": 51.5074, "longitude": -0.1278, "name": "Example", "address": "Example street 1"}}]}));
            }
            _ => {}
        }
        let nb = body_variable_count(components);
        if nb > 0 {
            let ps: Vec<Value> = (1..=nb)
                .map(|i| json!({"type": "text", "text": value(i, false)}))
                .collect();
            comps.push(json!({"type": "body", "parameters": ps}));
        }
        let tpl_buttons = buttons(components);
        for i in urls {
            let suffix = tpl_buttons
                .iter()
                .find(|(j, _, _)| *j == i)
                .and_then(|(_, _, b)| {
                    let url = b.get("url").and_then(Value::as_str)?;
                    let prefix = &url[..scan(url).0.first()?.1];
                    let ex = match b.get("example")? {
                        Value::Array(a) => a.first()?.as_str()?,
                        Value::String(s) => s.as_str(),
                        _ => return None,
                    };
                    Some(ex.strip_prefix(prefix).unwrap_or(ex).to_string())
                });
            comps.push(
                json!({"type": "button", "sub_type": "url", "index": i.to_string(),
                "parameters": [{"type": "text", "text": usable(suffix.as_deref(), 1)}]}),
            );
        }
        if let Some(i) = copy_code {
            let code = tpl_buttons
                .iter()
                .find(|(j, _, _)| *j == i)
                .and_then(|(_, _, b)| b.get("example").and_then(Value::as_str))
                .filter(|c| chars(c) <= MAX_COUPON_CHARS);
            comps.push(
                json!({"type": "button", "sub_type": "copy_code", "index": i.to_string(),
                "parameters": [{"type": "coupon_code", "coupon_code": usable(code, 1)}]}),
            );
        }
        template["components"] = Value::Array(comps);
    }
    json!({"type": "template", "to": RECIPIENT_PLACEHOLDER, "template": template})
}

#[cfg(test)]
mod tests {
    use super::*;

    fn draft(components: Value) -> Result<(), Vec<FieldError>> {
        validate_draft(&Draft {
            name: "order_update",
            language: "en_US",
            category: "utility",
            components: &components,
        })
    }

    fn fields(r: Result<(), Vec<FieldError>>) -> Vec<(String, String)> {
        r.expect_err("expected errors")
            .into_iter()
            .map(|f| (f.field, f.message))
            .collect()
    }

    fn has(errs: &[(String, String)], field: &str, needle: &str) -> bool {
        errs.iter().any(|(f, m)| f == field && m.contains(needle))
    }

    fn body(text: &str, examples: &[&str]) -> Value {
        if examples.is_empty() {
            json!({"type": "BODY", "text": text})
        } else {
            json!({"type": "BODY", "text": text, "example": {"body_text": [examples]}})
        }
    }

    fn full() -> Value {
        json!([
            {"type": "HEADER", "format": "TEXT", "text": "Hello {{1}}", "example": {"header_text": ["Ada"]}},
            {"type": "BODY", "text": "Hi {{1}}, your order {{2}} has shipped.", "example": {"body_text": [["Ada", "A-12"]]}},
            {"type": "FOOTER", "text": "Reply STOP to opt out"},
            {"type": "BUTTONS", "buttons": [
                {"type": "QUICK_REPLY", "text": "Thanks"},
                {"type": "QUICK_REPLY", "text": "Help"},
                {"type": "URL", "text": "Track", "url": "https://example.com/track/{{1}}", "example": ["https://example.com/track/A-12"]},
                {"type": "PHONE_NUMBER", "text": "Call us", "phone_number": "+14155550100"}
            ]}
        ])
    }

    #[test]
    fn a_complete_draft_is_valid() {
        assert_eq!(draft(full()), Ok(()));
        assert_eq!(draft(json!([body("Your code is ready.", &[])])), Ok(()));
    }

    #[test]
    fn name_rules() {
        let mut e = Vec::new();
        check_name("name", "", &mut e);
        check_name("name", "Order", &mut e);
        check_name("name", "order-update", &mut e);
        check_name("name", &"a".repeat(513), &mut e);
        assert_eq!(e.len(), 4);
        assert!(e[3].message.contains("512"));
        let mut ok = Vec::new();
        check_name("name", "order_update_2", &mut ok);
        check_name("name", &"a".repeat(512), &mut ok);
        assert!(ok.is_empty());
    }

    #[test]
    fn language_codes() {
        for ok in ["en", "en_US", "pt_BR", "fil", "es_419", "zh_HK"] {
            assert!(is_language_code(ok), "{ok}");
        }
        for bad in [
            "", "EN", "en-US", "e", "en_us", "english", "en_USA", "en_", "_US",
        ] {
            assert!(!is_language_code(bad), "{bad}");
        }
    }

    #[test]
    fn category_rules() {
        let mut e = Vec::new();
        check_category("category", "MARKETING", &mut e);
        check_category("category", "promo", &mut e);
        assert_eq!(e.len(), 2);
        for c in CATEGORIES {
            let mut ok = Vec::new();
            check_category("category", c, &mut ok);
            assert!(ok.is_empty());
        }
    }

    #[test]
    fn component_list_rules() {
        assert!(has(&fields(draft(json!({}))), "components", "array"));
        assert!(has(&fields(draft(json!([]))), "components", "BODY"));
        let e = fields(draft(json!([{"type": "FOOTER", "text": "x"}])));
        assert!(has(&e, "components", "BODY"));
        let e = fields(draft(json!([body("a", &[]), body("b", &[])])));
        assert!(has(&e, "components[1].type", "at most one BODY"));
        let e = fields(draft(
            json!([body("a", &[]), {"type": "CAROUSEL"}, {"text": "x"}, 7]),
        ));
        assert!(has(&e, "components[1].type", "one of"));
        assert!(has(&e, "components[2].type", "required"));
        assert!(has(&e, "components[3]", "object"));
    }

    #[test]
    fn header_rules() {
        let h = |header: Value| fields(draft(json!([header, body("Hello there", &[])])));
        assert!(has(
            &h(json!({"type": "HEADER"})),
            "components[0].format",
            "required"
        ));
        assert!(has(
            &h(json!({"type": "HEADER", "format": "GIFS"})),
            "components[0].format",
            "one of"
        ));
        assert!(has(
            &h(json!({"type": "HEADER", "format": "TEXT", "text": "x".repeat(61)})),
            "components[0].text",
            "60"
        ));
        assert!(has(
            &h(
                json!({"type": "HEADER", "format": "TEXT", "text": "{{1}} and {{2}}", "example": {"header_text": ["a", "b"]}})
            ),
            "components[0].text",
            "at most 1 variable"
        ));
        assert!(has(
            &h(json!({"type": "HEADER", "format": "TEXT", "text": "Hi {{1}}"})),
            "components[0].example.header_text",
            "required"
        ));
        assert!(has(
            &h(
                json!({"type": "HEADER", "format": "TEXT", "text": "Hi {{2}}", "example": {"header_text": ["a"]}})
            ),
            "components[0].text",
            "sequence"
        ));
        assert!(has(
            &h(
                json!({"type": "HEADER", "format": "TEXT", "text": "Hi {{1}}", "example": {"header_text": ["a", "b"]}})
            ),
            "components[0].example.header_text",
            "exactly 1"
        ));
        assert!(has(
            &h(json!({"type": "HEADER", "format": "IMAGE"})),
            "components[0].example.header_handle",
            "required"
        ));
        assert!(has(
            &h(
                json!({"type": "HEADER", "format": "VIDEO", "text": "x", "example": {"header_handle": ["4::aW"]}})
            ),
            "components[0].text",
            "not allowed"
        ));
        assert_eq!(
            draft(
                json!([{"type": "HEADER", "format": "DOCUMENT", "example": {"header_handle": ["4::aW"]}}, body("Hello", &[])])
            ),
            Ok(())
        );
        assert_eq!(
            draft(json!([{"type": "HEADER", "format": "LOCATION"}, body("Hello", &[])])),
            Ok(())
        );
        let auth = validate_draft(&Draft {
            name: "otp",
            language: "en",
            category: "authentication",
            components: &json!([{"type": "HEADER", "format": "LOCATION"}, body("Your code", &[])]),
        });
        assert!(has(
            &fields(auth),
            "components[0].format",
            "marketing and utility"
        ));
    }

    #[test]
    fn body_rules() {
        let b = |c: Value| fields(draft(json!([c])));
        assert!(has(
            &b(json!({"type": "BODY"})),
            "components[0].text",
            "required"
        ));
        assert!(has(
            &b(json!({"type": "BODY", "text": ""})),
            "components[0].text",
            "empty"
        ));
        assert!(has(
            &b(body(&"x".repeat(1025), &[])),
            "components[0].text",
            "1024"
        ));
        assert_eq!(draft(json!([body(&"x".repeat(1024), &[])])), Ok(()));
        assert!(has(
            &b(body("{{1}} is here", &["a"])),
            "components[0].text",
            "start"
        ));
        assert!(has(
            &b(body("Here is {{1}}", &["a"])),
            "components[0].text",
            "end"
        ));
        assert!(has(
            &b(body("Here is {{1}}  ", &["a"])),
            "components[0].text",
            "end"
        ));
        assert!(has(
            &b(body("Hi {{1}} {{2}} ok", &["a", "b"])),
            "components[0].text",
            "next to each other"
        ));
        assert!(has(
            &b(body("Hi {{1}} and {{3}} ok", &["a", "b"])),
            "components[0].text",
            "without gaps"
        ));
        assert!(has(
            &b(body("Hi {{2}} ok", &["a"])),
            "components[0].text",
            "without gaps"
        ));
        assert!(has(
            &b(body("Hi {{name}} ok", &["a"])),
            "components[0].text",
            "named"
        ));
        assert!(has(
            &b(body("Hi {{1 ok", &[])),
            "components[0].text",
            "closing"
        ));
        assert!(has(
            &b(body("Hi {{1}} ok", &[])),
            "components[0].example.body_text",
            "required"
        ));
        assert!(has(
            &b(body("Hi {{1}} ok {{2}} x", &["a"])),
            "components[0].example.body_text[0]",
            "exactly 2"
        ));
        assert!(has(
            &b(body("Hi {{1}} ok", &["a\nb"])),
            "components[0].example.body_text[0][0]",
            "new line"
        ));
        assert!(has(
            &b(json!({"type": "BODY", "text": "Hi {{1}} ok", "example": {"body_text": ["a"]}})),
            "components[0].example.body_text",
            "one array"
        ));
        assert!(has(
            &b(json!({"type": "BODY", "text": "Hi {{1}} ok", "example": "a"})),
            "components[0].example",
            "object"
        ));
        // A number may repeat; values are per distinct number.
        assert_eq!(
            draft(json!([body(
                "Hi {{1}}, really {{1}}, order {{2}}.",
                &["a", "b"]
            )])),
            Ok(())
        );
    }

    #[test]
    fn footer_rules() {
        let f = |t: &str| {
            fields(draft(
                json!([body("Hello", &[]), {"type": "FOOTER", "text": t}]),
            ))
        };
        assert!(has(&f(&"x".repeat(61)), "components[1].text", "60"));
        assert!(has(
            &f("Hi {{1}} x"),
            "components[1].text",
            "must not contain variables"
        ));
        assert!(has(
            &fields(draft(json!([body("Hello", &[]), {"type": "FOOTER"}]))),
            "components[1].text",
            "required"
        ));
    }

    #[test]
    fn button_rules() {
        let bt = |buttons: Value| {
            fields(draft(
                json!([body("Hello", &[]), {"type": "BUTTONS", "buttons": buttons}]),
            ))
        };
        let qr = |t: &str| json!({"type": "QUICK_REPLY", "text": t});
        assert!(has(
            &fields(draft(json!([body("Hello", &[]), {"type": "BUTTONS"}]))),
            "components[1].buttons",
            "required"
        ));
        assert!(has(&bt(json!([])), "components[1].buttons", "at least one"));
        let eleven: Vec<Value> = (0..11).map(|i| qr(&format!("b{i}"))).collect();
        let e = bt(Value::Array(eleven));
        assert!(has(&e, "components[1].buttons", "at most 10 buttons"));
        assert!(has(&e, "components[1].buttons", "at most 10 QUICK_REPLY"));
        let url = json!({"type": "URL", "text": "Go", "url": "https://example.com/a"});
        assert!(has(
            &bt(json!([url, url, url])),
            "components[1].buttons",
            "at most 2 URL"
        ));
        let phone = json!({"type": "PHONE_NUMBER", "text": "Call", "phone_number": "+14155550100"});
        assert!(has(
            &bt(json!([phone, phone])),
            "components[1].buttons",
            "at most 1 PHONE_NUMBER"
        ));
        let code = json!({"type": "COPY_CODE", "example": "SAVE10"});
        assert!(has(
            &bt(json!([code, code])),
            "components[1].buttons",
            "at most 1 COPY_CODE"
        ));
        assert!(has(
            &bt(json!([qr("a"), url, qr("b")])),
            "components[1].buttons",
            "next to each other"
        ));
        assert_eq!(
            draft(
                json!([body("Hello", &[]), {"type": "BUTTONS", "buttons": [url, qr("a"), qr("b"), code]}])
            ),
            Ok(())
        );
        assert!(has(
            &bt(json!([qr(&"x".repeat(26))])),
            "components[1].buttons[0].text",
            "25"
        ));
        assert!(has(
            &bt(json!([{"type": "QUICK_REPLY"}])),
            "components[1].buttons[0].text",
            "required"
        ));
        assert!(has(
            &bt(json!([{"type": "SHOUT", "text": "x"}])),
            "components[1].buttons[0].type",
            "one of"
        ));
        assert!(has(
            &bt(json!([{"type": "URL", "text": "Go"}])),
            "components[1].buttons[0].url",
            "required"
        ));
        assert!(has(
            &bt(json!([{"type": "URL", "text": "Go", "url": "ftp://x.example.com"}])),
            "components[1].buttons[0].url",
            "http"
        ));
        assert!(has(
            &bt(
                json!([{"type": "URL", "text": "Go", "url": "https://example.com/{{1}}/x", "example": ["https://example.com/a/x"]}])
            ),
            "components[1].buttons[0].url",
            "only at the end"
        ));
        assert!(has(
            &bt(json!([{"type": "URL", "text": "Go", "url": "https://example.com/{{1}}"}])),
            "components[1].buttons[0].example",
            "required"
        ));
        assert!(has(
            &bt(json!([{"type": "PHONE_NUMBER", "text": "Call", "phone_number": "call me"}])),
            "components[1].buttons[0].phone_number",
            "digits"
        ));
        assert!(has(
            &bt(
                json!([{"type": "PHONE_NUMBER", "text": "Call", "phone_number": "+1234567890123456789012"}])
            ),
            "components[1].buttons[0].phone_number",
            "20"
        ));
        assert!(has(
            &bt(json!([{"type": "COPY_CODE"}])),
            "components[1].buttons[0].example",
            "required"
        ));
        assert!(has(
            &bt(json!([{"type": "COPY_CODE", "example": "x".repeat(21)}])),
            "components[1].buttons[0].example",
            "20"
        ));
    }

    #[test]
    fn every_problem_is_reported_at_once() {
        let e = validate_draft(&Draft {
            name: "Bad Name",
            language: "english",
            category: "promo",
            components: &json!([
                {"type": "HEADER", "format": "TEXT", "text": "x".repeat(61)},
                {"type": "BODY", "text": "{{1}} starts"},
                {"type": "FOOTER", "text": "has {{1}}"}
            ]),
        })
        .expect_err("invalid");
        let names: Vec<&str> = e.iter().map(|f| f.field.as_str()).collect();
        for want in [
            "name",
            "language",
            "category",
            "components[0].text",
            "components[1].text",
            "components[1].example.body_text",
            "components[2].text",
        ] {
            assert!(names.contains(&want), "{want} missing from {names:?}");
        }
    }

    #[test]
    fn send_path_questions() {
        let t = full();
        assert_eq!(header_kind(&t), HeaderKind::Text);
        assert_eq!(header_variable_count(&t), 1);
        assert_eq!(body_variable_count(&t), 2);
        assert_eq!(variable_count(&t), 2);
        assert!(!has_copy_code_button(&t));
        assert_eq!(dynamic_url_buttons(&t), vec![2]);
        assert!(needs_components(&t));
        let plain = json!([body("Hello", &[])]);
        assert_eq!(header_kind(&plain), HeaderKind::None);
        assert_eq!(variable_count(&plain), 0);
        assert!(!needs_components(&plain));
        for (format, kind) in [
            ("IMAGE", HeaderKind::Image),
            ("video", HeaderKind::Video),
            ("DOCUMENT", HeaderKind::Document),
            ("LOCATION", HeaderKind::Location),
        ] {
            let c = json!([{"type": "HEADER", "format": format}, body("x", &[])]);
            assert_eq!(header_kind(&c), kind);
            assert!(needs_components(&c));
        }
        let code = json!([body("Hi", &[]), {"type": "BUTTONS", "buttons": [{"type": "COPY_CODE", "example": "A"}]}]);
        assert!(has_copy_code_button(&code));
        assert_eq!(HeaderKind::Image.as_str(), "image");
    }

    fn vars(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    fn refusal(r: Result<(), SendRefusal>) -> (ErrorCode, Vec<String>) {
        let r = r.expect_err("refused");
        (r.code, r.fields.into_iter().map(|f| f.field).collect())
    }

    #[test]
    fn check_send_variables() {
        let t = json!([body("Hi {{1}}, order {{2}} is ready.", &["a", "b"])]);
        assert_eq!(
            check_send(&t, Some(&vars(&["Ada", "A-1"])), None, None),
            Ok(())
        );
        assert_eq!(
            check_send(&t, Some(&vars(&["Ada", "a    b"])), None, None),
            Ok(())
        );
        for bad in ["", "  ", "a\nb", "a\tb", "a     b", "a\r\nb"] {
            let (code, f) = refusal(check_send(&t, Some(&vars(&["Ada", bad])), None, None));
            assert_eq!(code, ErrorCode::ValidationFailed, "{bad:?}");
            assert_eq!(f, vec!["template.variables[1]"]);
        }
        let (code, f) = refusal(check_send(&t, Some(&vars(&["Ada"])), None, None));
        assert_eq!(code, ErrorCode::TemplateNotApproved);
        assert_eq!(f, vec!["template.variables"]);
        let (code, _) = refusal(check_send(&t, None, None, None));
        assert_eq!(code, ErrorCode::TemplateNotApproved);
        let (code, _) = refusal(check_send(&t, Some(&vars(&["a", "b", "c"])), None, None));
        assert_eq!(code, ErrorCode::TemplateNotApproved);
        // Both forms at once: 400 even if the count is also wrong.
        let (code, f) = refusal(check_send(&t, Some(&vars(&["a"])), Some(&json!([])), None));
        assert_eq!(code, ErrorCode::ValidationFailed);
        assert_eq!(f, vec!["template"]);
        // No variables: nothing needed.
        let plain = json!([body("Hello", &[])]);
        assert_eq!(check_send(&plain, None, None, None), Ok(()));
        assert_eq!(check_send(&plain, Some(&[]), None, None), Ok(()));
        // Header and body share numbers.
        let shared = json!([
            {"type": "HEADER", "format": "TEXT", "text": "Hi {{1}}", "example": {"header_text": ["Ada"]}},
            body("Dear {{1}}, order {{2}} ok.", &["Ada", "A"])
        ]);
        assert_eq!(
            check_send(&shared, Some(&vars(&["Ada", "A"])), None, None),
            Ok(())
        );
        let p = refusal(check_send(&t, Some(&vars(&["Ada"])), None, None));
        assert_eq!(p.0.status(), 409);
    }

    #[test]
    fn check_send_coupon_code() {
        let code = json!([body("Use {{1}} today.", &["x"]), {"type": "BUTTONS", "buttons": [{"type": "COPY_CODE", "example": "SAVE"}]}]);
        assert_eq!(
            check_send(&code, Some(&vars(&["Ada"])), None, Some("SAVE10")),
            Ok(())
        );
        let (c, f) = refusal(check_send(&code, Some(&vars(&["Ada"])), None, None));
        assert_eq!(
            (c, f),
            (
                ErrorCode::TemplateNotApproved,
                vec!["template.coupon_code".to_string()]
            )
        );
        let (c, _) = refusal(check_send(
            &code,
            Some(&vars(&["Ada"])),
            None,
            Some(&"x".repeat(21)),
        ));
        assert_eq!(c, ErrorCode::ValidationFailed);
        let plain = json!([body("Hello", &[])]);
        let (c, f) = refusal(check_send(&plain, None, None, Some("SAVE")));
        assert_eq!(
            (c, f),
            (
                ErrorCode::TemplateNotApproved,
                vec!["template.coupon_code".to_string()]
            )
        );
        let (c, _) = refusal(check_send(&code, None, Some(&json!([])), Some("SAVE")));
        assert_eq!(c, ErrorCode::ValidationFailed);
    }

    #[test]
    fn check_send_components() {
        let t = json!([
            {"type": "HEADER", "format": "IMAGE", "example": {"header_handle": ["4::x"]}},
            body("Hi {{1}}, see {{2}} now.", &["a", "b"]),
            {"type": "BUTTONS", "buttons": [
                {"type": "QUICK_REPLY", "text": "Stop"},
                {"type": "URL", "text": "Go", "url": "https://example.com/{{1}}", "example": ["https://example.com/x"]}
            ]}
        ]);
        let ok = json!([
            {"type": "header", "parameters": [{"type": "image", "image": {"link": "https://example.com/a.jpg"}}]},
            {"type": "body", "parameters": [{"type": "text", "text": "Ada"},
                {"type": "currency", "currency": {"fallback_value": "$1", "code": "USD", "amount_1000": 1000}}]},
            {"type": "button", "sub_type": "url", "index": "1", "parameters": [{"type": "text", "text": "x"}]},
            {"type": "button", "sub_type": "quick_reply", "index": "0", "parameters": [{"type": "payload", "payload": "STOP"}]}
        ]);
        assert_eq!(check_send(&t, None, Some(&ok), None), Ok(()));
        // Variables cannot carry a media header.
        let (c, f) = refusal(check_send(&t, Some(&vars(&["a", "b"])), None, None));
        assert_eq!(c, ErrorCode::TemplateNotApproved);
        assert!(f.contains(&"template.components".to_string()));
        // Wrong count, wrong header type, missing url button.
        let bad = json!([
            {"type": "header", "parameters": [{"type": "video", "video": {"id": "123"}}]},
            {"type": "body", "parameters": [{"type": "text", "text": "Ada"}]}
        ]);
        let (c, f) = refusal(check_send(&t, None, Some(&bad), None));
        assert_eq!(c, ErrorCode::TemplateNotApproved);
        assert!(
            f.contains(&"template.components[0].parameters[0].type".to_string()),
            "{f:?}"
        );
        assert!(
            f.contains(&"template.components[1].parameters".to_string()),
            "{f:?}"
        );
        assert!(f.contains(&"template.components".to_string()), "{f:?}");
        // Shape and value errors are 400.
        let shape = json!([
            {"type": "footer", "parameters": []},
            {"type": "body", "parameters": [{"type": "text", "text": "a\tb"}, {"type": "image", "image": {}}]},
            {"type": "button", "sub_type": "nope", "index": "x", "parameters": []},
            "x"
        ]);
        let (c, f) = refusal(check_send(&t, None, Some(&shape), None));
        assert_eq!(c, ErrorCode::ValidationFailed);
        for want in [
            "template.components[0].type",
            "template.components[1].parameters[0].text",
            "template.components[1].parameters[1].image",
            "template.components[2].sub_type",
            "template.components[2].index",
            "template.components[3]",
        ] {
            assert!(f.contains(&want.to_string()), "{want} not in {f:?}");
        }
        // A button index the template does not have.
        let extra = json!([
            {"type": "header", "parameters": [{"type": "image", "image": {"id": "1"}}]},
            {"type": "body", "parameters": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]},
            {"type": "button", "sub_type": "url", "index": "1", "parameters": [{"type": "text", "text": "x"}]},
            {"type": "button", "sub_type": "url", "index": "5", "parameters": [{"type": "text", "text": "x"}]}
        ]);
        let (_, f) = refusal(check_send(&t, None, Some(&extra), None));
        assert_eq!(f, vec!["template.components[3].index"]);
    }

    #[test]
    fn refusal_problems() {
        let p = SendRefusal {
            code: ErrorCode::TemplateNotApproved,
            fields: vec![FieldError::new("template.variables", "the template has 2")],
        }
        .into_problem();
        assert_eq!(p.status(), 409);
        assert_eq!(p.details["fields"][0]["field"], "template.variables");
        let p = SendRefusal {
            code: ErrorCode::ValidationFailed,
            fields: vec![FieldError::new("template", "x")],
        }
        .into_problem();
        assert_eq!(p.status(), 400);
    }

    fn example_passes(components: Value) -> Value {
        let ex = example_message("t", "en_US", &components);
        assert_eq!(ex["type"], "template");
        assert_eq!(ex["to"], RECIPIENT_PLACEHOLDER);
        assert_eq!(ex["template"]["name"], "t");
        assert_eq!(ex["template"]["language"], "en_US");
        let tpl = &ex["template"];
        let vars: Option<Vec<String>> = tpl.get("variables").map(|v| {
            v.as_array()
                .expect("array")
                .iter()
                .map(|s| s.as_str().expect("string").to_string())
                .collect()
        });
        let r = check_send(
            &components,
            vars.as_deref(),
            tpl.get("components"),
            tpl.get("coupon_code").and_then(Value::as_str),
        );
        assert_eq!(r, Ok(()), "example {ex}");
        ex
    }

    #[test]
    fn examples_are_sendable() {
        let ex = example_passes(json!([body("Hi {{1}}, order {{2}} ok.", &["Ada", "A-12"])]));
        assert_eq!(ex["template"]["variables"], json!(["Ada", "A-12"]));
        let ex = example_passes(json!([body("Hello", &[])]));
        assert!(ex["template"].get("variables").is_none());
        let ex = example_passes(full());
        assert_eq!(
            ex["template"]["components"][2]["parameters"][0]["text"],
            "A-12"
        );
        assert_eq!(
            ex["template"]["components"][0]["parameters"][0]["text"],
            "Ada"
        );
        for format in ["IMAGE", "VIDEO", "DOCUMENT", "LOCATION"] {
            example_passes(json!([
                {"type": "HEADER", "format": format, "example": {"header_handle": ["4::abc"]}},
                body("Hi {{1}} ok", &["Ada"])
            ]));
        }
        let ex = example_passes(json!([
            body("Use {{1}} now.", &["x"]),
            {"type": "BUTTONS", "buttons": [{"type": "COPY_CODE", "example": "SAVE10"}]}
        ]));
        assert_eq!(
            ex["template"]["components"][1]["parameters"][0]["coupon_code"],
            "SAVE10"
        );
        // Examples that break the value rule (e.g. synced from the network) are cleaned up.
        let ex = example_passes(json!([body("Hi {{1}} and {{2}} ok", &["a\nb"])]));
        assert_eq!(ex["template"]["variables"], json!(["a b", "value 2"]));
        // Body-only template with a header variable shared.
        example_passes(json!([
            {"type": "HEADER", "format": "TEXT", "text": "For {{1}}", "example": {"header_text": ["Ada"]}},
            body("Hello there.", &[])
        ]));
    }

    #[test]
    fn network_components_from_variables() {
        // Header and body share {{1}}; the body's {{2}} takes the second value.
        let t = json!([
            {"type": "HEADER", "format": "TEXT", "text": "Hello {{1}}", "example": {"header_text": ["Ada"]}},
            body("Hi {{1}}, your order {{2}} has shipped, {{1}}.", &["Ada", "A-12"]),
            {"type": "FOOTER", "text": "Reply STOP to opt out"},
            {"type": "BUTTONS", "buttons": [
                {"type": "QUICK_REPLY", "text": "Thanks"},
                {"type": "COPY_CODE", "example": "SAVE10"}
            ]}
        ]);
        let v = vars(&["Grace", "B-7"]);
        assert_eq!(check_send(&t, Some(&v), None, Some("WELCOME5")), Ok(()));
        let c = network_components(&t, &v, Some("WELCOME5"));
        assert_eq!(
            Value::Array(c.clone()),
            json!([
                {"type": "header", "parameters": [{"type": "text", "text": "Grace"}]},
                {"type": "body", "parameters": [
                    {"type": "text", "text": "Grace"}, {"type": "text", "text": "B-7"}
                ]},
                {"type": "button", "sub_type": "copy_code", "index": "1",
                 "parameters": [{"type": "coupon_code", "coupon_code": "WELCOME5"}]}
            ])
        );
        // The result is itself a valid typed send for the same template.
        assert_eq!(check_send(&t, None, Some(&Value::Array(c)), None), Ok(()));
    }

    #[test]
    fn network_components_edge_cases() {
        // No variables, no button: nothing to send.
        let plain = json!([body("Hello", &[])]);
        assert!(network_components(&plain, &[], None).is_empty());
        // A header variable with a body without any.
        let t = json!([
            {"type": "HEADER", "format": "TEXT", "text": "For {{1}}", "example": {"header_text": ["Ada"]}},
            body("Hello there.", &[])
        ]);
        let v = vars(&["Ada"]);
        assert_eq!(check_send(&t, Some(&v), None, None), Ok(()));
        let c = network_components(&t, &v, None);
        assert_eq!(
            Value::Array(c.clone()),
            json!([{"type": "header", "parameters": [{"type": "text", "text": "Ada"}]}])
        );
        assert_eq!(check_send(&t, None, Some(&Value::Array(c)), None), Ok(()));
        // A text header without a variable gets no header component.
        let t = json!([
            {"type": "HEADER", "format": "TEXT", "text": "News"},
            body("Hi {{1}}, see {{2}} and {{3}} now.", &["a", "b", "c"])
        ]);
        let v = vars(&["a", "b", "c"]);
        let c = network_components(&t, &v, None);
        assert_eq!(c.len(), 1);
        assert_eq!(c[0]["type"], "body");
        assert_eq!(c[0]["parameters"][2]["text"], "c");
        assert_eq!(check_send(&t, None, Some(&Value::Array(c)), None), Ok(()));
        // A synced template with a gap: distinct numbers in order take the values in order.
        let gap = json!([{"type": "BODY", "text": "Hi {{2}} there"}]);
        assert_eq!(variable_count(&gap), 1);
        let c = network_components(&gap, &vars(&["x"]), None);
        assert_eq!(c[0]["parameters"], json!([{"type": "text", "text": "x"}]));
        // Coupon without a copy-code button is left out (check_send refuses it anyway).
        assert!(network_components(&plain, &[], Some("X")).is_empty());
    }

    #[test]
    fn send_shape_problems_match_check_send() {
        let t = json!([body("Hi {{1}} ok", &["a"])]);
        let bad = vars(&["a\tb"]);
        let p = send_shape_problems(Some(&bad), None, None);
        assert_eq!(p.len(), 1);
        assert_eq!(p[0].field, "template.variables[0]");
        let r = check_send(&t, Some(&bad), None, None).expect_err("refused");
        assert_eq!(r.fields, p);
        assert!(send_shape_problems(Some(&vars(&["ok"])), None, None).is_empty());
        assert_eq!(
            send_shape_problems(Some(&[]), Some(&json!([])), Some("C"))
                .into_iter()
                .map(|f| f.field)
                .collect::<Vec<_>>(),
            vec!["template", "template.coupon_code"]
        );
    }

    #[test]
    fn network_names() {
        assert_eq!(status_from_network("APPROVED"), Some("approved"));
        assert_eq!(status_from_network("in_appeal"), Some("pending"));
        assert_eq!(status_from_network("REJECTED"), Some("rejected"));
        assert_eq!(status_from_network("PAUSED"), Some("paused"));
        assert_eq!(status_from_network("DISABLED"), Some("disabled"));
        assert_eq!(status_from_network("PENDING_DELETION"), Some("disabled"));
        assert_eq!(status_from_network("LIMIT_EXCEEDED"), None);
        assert_eq!(category_from_network("MARKETING"), Some("marketing"));
        assert_eq!(category_from_network("SERVICE"), None);
        assert_eq!(category_to_network("utility"), "UTILITY");
        assert_eq!(rejection_reason_from_network(Some("NONE")), None);
        assert_eq!(rejection_reason_from_network(Some("")), None);
        assert_eq!(
            rejection_reason_from_network(Some("INVALID_FORMAT")).as_deref(),
            Some("INVALID_FORMAT")
        );
        assert!(STATUSES.iter().all(|s| is_status(s)));
        assert!(!is_status("APPROVED"));
    }
}
