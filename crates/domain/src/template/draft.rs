//! The rules of a new template in the network's component format: name, language, category, header, body, footer, placeholders and their examples (every problem at once, by path).

use super::*;

use crate::FieldError;
use serde_json::{Map, Value};

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
    if Category::parse(category).is_none() {
        errors.push(FieldError::new(
            field,
            format!("must be one of {}", Category::names()),
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

pub(super) fn upper(v: Option<&Value>) -> Option<String> {
    v.and_then(Value::as_str).map(str::to_ascii_uppercase)
}

pub(super) fn chars(s: &str) -> usize {
    s.chars().count()
}

/// A `{{…}}` placeholder found in a text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Placeholder {
    Number(u32),
    /// Anything else between `{{` and `}}` (named parameters, typos).
    Other(String),
}

/// Placeholders in order of appearance, with their byte ranges.
pub(super) fn scan(text: &str) -> (Vec<(Placeholder, usize, usize)>, bool) {
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
pub(super) fn numbers(text: &str) -> Vec<u32> {
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
pub(super) fn check_placeholders(
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

pub(super) fn check_example_values(path: &str, values: &[Value], errors: &mut Vec<FieldError>) {
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
pub(super) fn example_array<'a>(
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

pub(super) fn text_field<'a>(
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

pub(super) fn check_components(category: &str, components: &Value, errors: &mut Vec<FieldError>) {
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
        if !COMPONENT_TYPES.contains(&kind.as_str()) {
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

pub(super) fn check_header(
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

pub(super) fn check_body(obj: &Map<String, Value>, path: &str, errors: &mut Vec<FieldError>) {
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
