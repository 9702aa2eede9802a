//! The network components of a send by variables, and a ready-to-send example message.

use super::*;

use serde_json::{Map, Value, json};

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
pub(super) fn usable(v: Option<&str>, n: usize) -> String {
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

pub(super) fn example_strings<'a>(
    comp: Option<&'a Map<String, Value>>,
    key: &str,
) -> Vec<Option<&'a str>> {
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
