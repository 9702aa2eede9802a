//! Whether a send's `variables` / `components` / `coupon_code` fit the approved template.

use super::*;

use crate::{ErrorCode, FieldError, Problem};
use serde_json::{Map, Value};

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
pub(super) fn check_send_components_shape(c: &Value, invalid: &mut Vec<FieldError>) {
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

pub(super) fn button_index(obj: &Map<String, Value>) -> Option<usize> {
    match obj.get("index")? {
        Value::String(s) if s.len() == 1 => s.parse().ok(),
        Value::Number(n) => n.as_u64().filter(|n| *n <= 9).map(|n| n as usize),
        _ => None,
    }
}

pub(super) fn check_param_shape(param: &Value, p: &str, invalid: &mut Vec<FieldError>) {
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

pub(super) fn params(obj: &Map<String, Value>) -> &[Value] {
    obj.get("parameters")
        .and_then(Value::as_array)
        .map_or(&[], Vec::as_slice)
}

pub(super) fn param_type(v: &Value) -> &str {
    v.get("type").and_then(Value::as_str).unwrap_or("")
}

/// Matches a (well-shaped) send `components` against the template.
pub(super) fn match_components(tpl: &Value, sent: &Value, mismatch: &mut Vec<FieldError>) {
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
