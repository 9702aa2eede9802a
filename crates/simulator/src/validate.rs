//! Validation of `POST /{pnid}/messages` bodies, with the network's error codes.
//!
//! Rules (reference §1.2–§1.4): top-level parameter problems → 100; a missing required
//! field inside a type object → 131008; a present but invalid value → 131009; template
//! problems → 132000 (parameter count), 132001 (no such template/language or not approved),
//! 132005 (rendered text too long), 132012 (parameter format), 132015/132016 (paused/disabled),
//! 132018 (parameter text with new lines, tabs or more than 4 consecutive spaces); an
//! authentication template with one-tap / zero-tap / copy-code buttons sent to a BSUID →
//! 131062 (those need a phone number).

use serde_json::Value;

use crate::customers::{is_bsuid, is_parent_bsuid};
use crate::graph::GraphErr;
use crate::model::{Number, TemplateRec, digits};

const TYPES: [&str; 11] = [
    "text",
    "image",
    "video",
    "audio",
    "document",
    "sticker",
    "location",
    "contacts",
    "interactive",
    "reaction",
    "template",
];

/// What the simulator needs to know about an accepted send.
#[derive(Clone, Debug, PartialEq)]
pub struct ValidSend {
    /// `to` (or `recipient`) as given (echoed as `contacts[0].input`).
    pub to: String,
    /// Normalised digits; empty for BSUID sends.
    pub wa_id: String,
    /// The BSUID or parent BSUID given as `recipient` when there was no `to`.
    pub recipient: Option<String>,
    pub message_type: String,
    /// Lowercase pricing category: `service` or the template's category.
    pub category: String,
    pub biz_opaque_callback_data: Option<String>,
    /// For reactions: the wamid reacted to.
    pub reaction_target: Option<String>,
    /// Media ids referenced (must exist, else async 131053).
    pub media_id: Option<String>,
    /// Audio sent as a voice note (gets `played`).
    pub voice: bool,
}

impl ValidSend {
    pub fn is_template(&self) -> bool {
        self.message_type == "template"
    }
}

pub fn validate_send(
    body: &Value,
    number: &Number,
    templates: &[TemplateRec],
) -> Result<ValidSend, GraphErr> {
    if !body.is_object() {
        return Err(GraphErr::invalid_param("Invalid parameter"));
    }
    match body.get("messaging_product").and_then(Value::as_str) {
        Some("whatsapp") => {}
        Some(_) => {
            return Err(GraphErr::invalid_param(
                "Param messaging_product must be one of {WHATSAPP} - got an invalid value.",
            ));
        }
        None => {
            return Err(GraphErr::invalid_param(
                "The parameter messaging_product is required.",
            ));
        }
    }
    if let Some(rt) = body.get("recipient_type")
        && !matches!(rt.as_str(), Some("individual" | "group"))
    {
        return Err(GraphErr::invalid_param(
            "Param recipient_type must be one of {INDIVIDUAL, GROUP}.",
        ));
    }
    // `to` (a phone) wins over `recipient` (a BSUID) when both are given.
    let (to, wa_id, recipient) = match (body.get("to"), body.get("recipient")) {
        (Some(Value::String(s)), _) => (s.clone(), normalise_recipient(s)?, None),
        (Some(_), _) => return Err(GraphErr::invalid_param("Param to must be a string.")),
        (None, Some(Value::String(r))) if is_bsuid(r) || is_parent_bsuid(r) => {
            (r.clone(), String::new(), Some(r.clone()))
        }
        (None, Some(Value::String(r))) => {
            return Err(GraphErr::bad_value(format!(
                "The recipient {r:?} is not a valid business-scoped user id."
            )));
        }
        (None, Some(_)) => {
            return Err(GraphErr::invalid_param("Param recipient must be a string."));
        }
        (None, None) => return Err(GraphErr::invalid_param("The parameter to is required.")),
    };
    if recipient.is_none() && wa_id == number.display_digits() {
        return Err(GraphErr::new(131021).details("Recipient cannot be the sender."));
    }
    let msg_type = match body.get("type") {
        None => "text".to_owned(), // the network defaults to text
        Some(Value::String(t)) if TYPES.contains(&t.as_str()) => t.clone(),
        Some(_) => {
            return Err(GraphErr::invalid_param(format!(
                "Param type must be one of {{{}}}.",
                TYPES.join(", ").to_uppercase()
            )));
        }
    };
    let biz = match body.get("biz_opaque_callback_data") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) if s.chars().count() <= 512 => Some(s.clone()),
        Some(_) => {
            return Err(GraphErr::bad_value(
                "biz_opaque_callback_data must be a string of at most 512 characters.",
            ));
        }
    };
    if let Some(ctx) = body.get("context")
        && ctx.get("message_id").and_then(Value::as_str).is_none()
    {
        return Err(GraphErr::missing("context.message_id"));
    }
    let obj = body
        .get(&msg_type)
        .ok_or_else(|| GraphErr::missing(&msg_type))?;

    let mut out = ValidSend {
        to,
        wa_id,
        recipient,
        message_type: msg_type.clone(),
        category: "service".into(),
        biz_opaque_callback_data: biz,
        reaction_target: None,
        media_id: None,
        voice: false,
    };
    match msg_type.as_str() {
        "text" => {
            let text = req_str(obj, "body", "text.body")?;
            if text.is_empty() {
                return Err(GraphErr::bad_value("text.body must not be empty."));
            }
            if text.chars().count() > 4096 {
                return Err(GraphErr::invalid_param(
                    "Param text['body'] must be at most 4096 characters long.",
                ));
            }
            if let Some(p) = obj.get("preview_url")
                && !p.is_boolean()
            {
                return Err(GraphErr::bad_value("text.preview_url must be a boolean."));
            }
        }
        "image" | "video" | "audio" | "document" | "sticker" => {
            out.media_id = validate_media(&msg_type, obj)?;
            out.voice = msg_type == "audio" && obj.get("voice") == Some(&Value::Bool(true));
        }
        "location" => {
            let lat = obj
                .get("latitude")
                .ok_or_else(|| GraphErr::missing("location.latitude"))?;
            let lon = obj
                .get("longitude")
                .ok_or_else(|| GraphErr::missing("location.longitude"))?;
            let (Some(lat), Some(lon)) = (number_like(lat), number_like(lon)) else {
                return Err(GraphErr::bad_value(
                    "latitude and longitude must be numbers.",
                ));
            };
            if !(-90.0..=90.0).contains(&lat) || !(-180.0..=180.0).contains(&lon) {
                return Err(GraphErr::bad_value("latitude/longitude out of range."));
            }
        }
        "contacts" => {
            let list = obj
                .as_array()
                .filter(|a| !a.is_empty())
                .ok_or_else(|| GraphErr::bad_value("contacts must be a non-empty array."))?;
            for c in list {
                let formatted = c.get("name").and_then(|n| n.get("formatted_name"));
                if formatted.and_then(Value::as_str).is_none_or(str::is_empty) {
                    return Err(GraphErr::missing("contacts[].name.formatted_name"));
                }
            }
        }
        "interactive" => validate_interactive(obj)?,
        "reaction" => {
            let target = req_str(obj, "message_id", "reaction.message_id")?;
            match obj.get("emoji") {
                Some(Value::String(_)) => {}
                Some(_) => return Err(GraphErr::bad_value("reaction.emoji must be a string.")),
                None => return Err(GraphErr::missing("reaction.emoji")),
            }
            out.reaction_target = Some(target.to_owned());
        }
        "template" => {
            let tpl = validate_template(obj, &number.waba_id, templates)?;
            if out.recipient.is_some() && needs_phone(tpl) {
                let mut e = GraphErr::new(131062).details(
                    "Authentication templates with one-tap, zero-tap or copy-code buttons need a \
                     phone number recipient.",
                );
                e.message = "(#131062) BSUID recipients are not supported for this message".into();
                return Err(e);
            }
            out.category = tpl.category.to_lowercase();
        }
        _ => {}
    }
    Ok(out)
}

/// An authentication template whose buttons include an OTP button (one-tap, zero-tap or
/// copy-code) or a COPY_CODE button: the network delivers those only to phone numbers.
fn needs_phone(tpl: &TemplateRec) -> bool {
    const OTP: [&str; 3] = ["ONE_TAP", "ZERO_TAP", "COPY_CODE"];
    let str_of = |v: &Value, k: &str| v.get(k).and_then(Value::as_str).map(str::to_uppercase);
    tpl.category.eq_ignore_ascii_case("AUTHENTICATION")
        && component(&tpl.components, "buttons")
            .and_then(|c| c.get("buttons"))
            .and_then(Value::as_array)
            .is_some_and(|buttons| {
                buttons.iter().any(|b| match str_of(b, "type").as_deref() {
                    Some("COPY_CODE") => true,
                    Some("OTP") => str_of(b, "otp_type").is_none_or(|t| OTP.contains(&t.as_str())),
                    _ => false,
                })
            })
}

/// Strip `+ - ( ) . space`; require 6..=15 digits.
fn normalise_recipient(to: &str) -> Result<String, GraphErr> {
    let allowed = |c: char| c.is_ascii_digit() || matches!(c, '+' | '-' | '(' | ')' | ' ' | '.');
    let d = digits(to);
    if !to.chars().all(allowed) || !(6..=15).contains(&d.len()) {
        return Err(GraphErr::bad_value(format!(
            "The recipient phone number {to:?} is not a valid phone number."
        )));
    }
    Ok(d)
}

fn req_str<'a>(obj: &'a Value, key: &str, path: &str) -> Result<&'a str, GraphErr> {
    match obj.get(key) {
        Some(Value::String(s)) => Ok(s),
        Some(_) => Err(GraphErr::bad_value(format!("{path} must be a string."))),
        None => Err(GraphErr::missing(path)),
    }
}

fn number_like(v: &Value) -> Option<f64> {
    match v {
        Value::Number(n) => n.as_f64(),
        Value::String(s) => s.parse().ok(),
        _ => None,
    }
}

fn validate_media(kind: &str, obj: &Value) -> Result<Option<String>, GraphErr> {
    let id = obj.get("id");
    let link = obj.get("link");
    let media_id = match (id, link) {
        (Some(_), Some(_)) => {
            return Err(GraphErr::bad_value(format!(
                "{kind} must have either an id or a link, not both."
            )));
        }
        (None, None) => return Err(GraphErr::missing(&format!("{kind}.id or {kind}.link"))),
        (Some(Value::String(s)), None) if !s.is_empty() => Some(s.clone()),
        (None, Some(Value::String(l))) if l.starts_with("https://") || l.starts_with("http://") => {
            None
        }
        _ => {
            return Err(GraphErr::bad_value(format!(
                "{kind}.id / {kind}.link is not valid."
            )));
        }
    };
    let caption_ok = matches!(kind, "image" | "video" | "document");
    if let Some(c) = obj.get("caption") {
        if !caption_ok {
            return Err(GraphErr::bad_value(format!(
                "{kind} messages cannot have a caption."
            )));
        }
        match c.as_str() {
            Some(s) if s.chars().count() <= 1024 => {}
            _ => {
                return Err(GraphErr::bad_value(
                    "caption must be a string of at most 1024 characters.",
                ));
            }
        }
    }
    if let Some(f) = obj.get("filename") {
        if kind != "document" {
            return Err(GraphErr::bad_value(format!(
                "{kind} messages cannot have a filename."
            )));
        }
        if !f.is_string() {
            return Err(GraphErr::bad_value("filename must be a string."));
        }
    }
    Ok(media_id)
}

fn text_len(v: Option<&Value>) -> Option<usize> {
    v.and_then(Value::as_str).map(|s| s.chars().count())
}

fn validate_interactive(obj: &Value) -> Result<(), GraphErr> {
    let kind = req_str(obj, "type", "interactive.type")?;
    let needs_body = matches!(
        kind,
        "button" | "list" | "cta_url" | "flow" | "product_list"
    );
    const KNOWN: [&str; 9] = [
        "button",
        "list",
        "cta_url",
        "flow",
        "product",
        "product_list",
        "catalog_message",
        "location_request_message",
        "address_message",
    ];
    if !KNOWN.contains(&kind) {
        return Err(GraphErr::bad_value(format!(
            "interactive.type {kind:?} is not supported."
        )));
    }
    if needs_body {
        let len = text_len(obj.get("body").and_then(|b| b.get("text")))
            .ok_or_else(|| GraphErr::missing("interactive.body.text"))?;
        let max = if kind == "list" { 4096 } else { 1024 };
        if len == 0 || len > max {
            return Err(GraphErr::bad_value(format!(
                "interactive.body.text must be 1 to {max} characters."
            )));
        }
    }
    if let Some(len) = text_len(obj.get("footer").and_then(|f| f.get("text")))
        && len > 60
    {
        return Err(GraphErr::bad_value(
            "interactive.footer.text must be at most 60 characters.",
        ));
    }
    let action = obj
        .get("action")
        .ok_or_else(|| GraphErr::missing("interactive.action"))?;
    match kind {
        "button" => {
            let buttons = action
                .get("buttons")
                .and_then(Value::as_array)
                .ok_or_else(|| GraphErr::missing("interactive.action.buttons"))?;
            if buttons.is_empty() || buttons.len() > 3 {
                return Err(GraphErr::bad_value(
                    "interactive buttons: 1 to 3 buttons allowed.",
                ));
            }
            let mut titles = Vec::new();
            for b in buttons {
                let reply = b
                    .get("reply")
                    .ok_or_else(|| GraphErr::missing("buttons[].reply"))?;
                let id = text_len(reply.get("id"))
                    .ok_or_else(|| GraphErr::missing("buttons[].reply.id"))?;
                let title = reply
                    .get("title")
                    .and_then(Value::as_str)
                    .ok_or_else(|| GraphErr::missing("buttons[].reply.title"))?;
                if id == 0 || id > 256 || title.is_empty() || title.chars().count() > 20 {
                    return Err(GraphErr::bad_value(
                        "button reply id must be 1-256 and title 1-20 characters.",
                    ));
                }
                if titles.contains(&title) {
                    return Err(GraphErr::bad_value("button titles must be unique."));
                }
                titles.push(title);
            }
        }
        "list" => {
            let button = text_len(action.get("button"))
                .ok_or_else(|| GraphErr::missing("interactive.action.button"))?;
            if button == 0 || button > 20 {
                return Err(GraphErr::bad_value(
                    "list button text must be 1 to 20 characters.",
                ));
            }
            let sections = action
                .get("sections")
                .and_then(Value::as_array)
                .ok_or_else(|| GraphErr::missing("interactive.action.sections"))?;
            if sections.is_empty() || sections.len() > 10 {
                return Err(GraphErr::bad_value("list: 1 to 10 sections allowed."));
            }
            let mut rows_total = 0;
            for s in sections {
                if text_len(s.get("title")).is_some_and(|l| l > 24) {
                    return Err(GraphErr::bad_value(
                        "section title must be at most 24 characters.",
                    ));
                }
                let rows = s
                    .get("rows")
                    .and_then(Value::as_array)
                    .ok_or_else(|| GraphErr::missing("sections[].rows"))?;
                rows_total += rows.len();
                for r in rows {
                    let id = text_len(r.get("id")).ok_or_else(|| GraphErr::missing("rows[].id"))?;
                    let title = text_len(r.get("title"))
                        .ok_or_else(|| GraphErr::missing("rows[].title"))?;
                    let desc = text_len(r.get("description")).unwrap_or(0);
                    if id == 0 || id > 200 || title == 0 || title > 24 || desc > 72 {
                        return Err(GraphErr::bad_value(
                            "row id must be 1-200, title 1-24 and description at most 72 characters.",
                        ));
                    }
                }
            }
            if rows_total == 0 || rows_total > 10 {
                return Err(GraphErr::bad_value("list: 1 to 10 rows in total allowed."));
            }
        }
        "cta_url" => {
            let params = action
                .get("parameters")
                .ok_or_else(|| GraphErr::missing("interactive.action.parameters"))?;
            let dt = text_len(params.get("display_text"))
                .ok_or_else(|| GraphErr::missing("action.parameters.display_text"))?;
            if dt == 0 || dt > 20 {
                return Err(GraphErr::bad_value(
                    "display_text must be 1 to 20 characters.",
                ));
            }
            if params.get("url").and_then(Value::as_str).is_none() {
                return Err(GraphErr::missing("action.parameters.url"));
            }
        }
        _ => {}
    }
    Ok(())
}

/// Placeholders (`{{1}}`, `{{name}}`) in order of first appearance.
pub fn placeholders(text: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let mut rest = text;
    while let Some(start) = rest.find("{{") {
        let after = &rest[start + 2..];
        let Some(end) = after.find("}}") else { break };
        let name = after[..end].trim().to_owned();
        if !out.contains(&name) {
            out.push(name);
        }
        rest = &after[end + 2..];
    }
    out
}

fn component<'a>(components: &'a [Value], kind: &str) -> Option<&'a Value> {
    components.iter().find(|c| {
        c.get("type")
            .and_then(Value::as_str)
            .is_some_and(|t| t.eq_ignore_ascii_case(kind))
    })
}

fn validate_template<'a>(
    obj: &Value,
    waba_id: &str,
    templates: &'a [TemplateRec],
) -> Result<&'a TemplateRec, GraphErr> {
    let name = req_str(obj, "name", "template.name")?;
    let lang = obj
        .get("language")
        .and_then(|l| l.get("code"))
        .and_then(Value::as_str)
        .ok_or_else(|| GraphErr::missing("template.language.code"))?;
    let tpl = templates
        .iter()
        .find(|t| t.waba_id == waba_id && t.name == name && t.language == lang)
        .ok_or_else(|| {
            GraphErr::new(132001)
                .details(format!("template name ({name}) does not exist in {lang}"))
        })?;
    match tpl.status.as_str() {
        "APPROVED" => {}
        "PAUSED" => {
            return Err(GraphErr::new(132015).details(format!("Template {name} is paused.")));
        }
        "DISABLED" => {
            return Err(GraphErr::new(132016).details(format!("Template {name} is disabled.")));
        }
        _ => {
            return Err(GraphErr::new(132001)
                .details(format!("template name ({name}) is not approved in {lang}")));
        }
    }
    let sent: &[Value] = match obj.get("components") {
        None | Some(Value::Null) => &[],
        Some(Value::Array(a)) => a,
        Some(_) => return Err(GraphErr::bad_value("template.components must be an array.")),
    };
    let named = tpl.parameter_format == "named";
    let mut rendered_len = 0usize;
    for kind in ["header", "body"] {
        let defined = component(&tpl.components, kind);
        let params: &[Value] = component(sent, kind)
            .and_then(|c| c.get("parameters"))
            .and_then(Value::as_array)
            .map(Vec::as_slice)
            .unwrap_or(&[]);
        let format = defined
            .and_then(|d| d.get("format"))
            .and_then(Value::as_str)
            .unwrap_or("TEXT")
            .to_uppercase();
        if kind == "header" && format != "TEXT" {
            // media / location header: exactly one parameter of that type
            if params.len() != 1 {
                return Err(GraphErr::new(132000).details(format!(
                    "header: expected 1 parameter, received {}",
                    params.len()
                )));
            }
            let ptype = params[0].get("type").and_then(Value::as_str).unwrap_or("");
            if !ptype.eq_ignore_ascii_case(&format) {
                return Err(GraphErr::new(132012).details(format!(
                    "header: parameter type {ptype} does not match format {format}"
                )));
            }
            continue;
        }
        let text = defined
            .and_then(|d| d.get("text"))
            .and_then(Value::as_str)
            .unwrap_or("");
        let expected = placeholders(text);
        if params.len() != expected.len() {
            return Err(GraphErr::new(132000).details(format!(
                "{kind}: number of localizable_params ({}) does not match the expected number of params ({})",
                params.len(),
                expected.len()
            )));
        }
        let mut values = Vec::new();
        for p in params {
            let value = check_param(p, kind)?;
            let pname = p.get("parameter_name").and_then(Value::as_str);
            match (named, pname) {
                (true, Some(n)) if expected.iter().any(|e| e == n) => {}
                (true, _) => {
                    return Err(GraphErr::new(132012).details(format!(
                        "{kind}: named template expects parameter_name one of {expected:?}"
                    )));
                }
                (false, Some(_)) => {
                    return Err(GraphErr::new(132012).details(format!(
                        "{kind}: positional template does not take parameter_name"
                    )));
                }
                (false, None) => {}
            }
            values.push(value);
        }
        let placeholder_chars: usize = expected.iter().map(|e| e.chars().count() + 4).sum();
        rendered_len += text.chars().count().saturating_sub(placeholder_chars)
            + values.iter().map(|v| v.chars().count()).sum::<usize>();
        if kind == "header" && rendered_len > 60 {
            return Err(GraphErr::new(132005).details("header text too long"));
        }
        if kind == "body" && rendered_len > 1024 {
            return Err(GraphErr::new(132005).details("body text too long"));
        }
        rendered_len = 0;
    }
    Ok(tpl)
}

/// One header/body parameter; returns the text it contributes.
fn check_param(p: &Value, kind: &str) -> Result<String, GraphErr> {
    let ptype = p
        .get("type")
        .and_then(Value::as_str)
        .ok_or_else(|| GraphErr::missing(&format!("{kind}.parameters[].type")))?;
    match ptype {
        "text" => {
            let t = req_str(p, "text", &format!("{kind}.parameters[].text"))?;
            if t.is_empty() || t.contains(['\n', '\t']) || t.contains("     ") {
                return Err(GraphErr::new(132018).details(
                    "Param text cannot have new-line/tab characters or more than 4 consecutive spaces",
                ));
            }
            Ok(t.to_owned())
        }
        "currency" => p
            .get("currency")
            .and_then(|c| c.get("fallback_value"))
            .and_then(Value::as_str)
            .map(str::to_owned)
            .ok_or_else(|| GraphErr::missing("currency.fallback_value")),
        "date_time" => p
            .get("date_time")
            .and_then(|c| c.get("fallback_value"))
            .and_then(Value::as_str)
            .map(str::to_owned)
            .ok_or_else(|| GraphErr::missing("date_time.fallback_value")),
        "image" | "video" | "document" | "location" => Err(GraphErr::new(132012).details(format!(
            "{kind}: parameter of type {ptype} not allowed here"
        ))),
        other => Err(GraphErr::bad_value(format!(
            "parameter type {other} is not valid"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn placeholders_in_order() {
        assert_eq!(placeholders("Hi {{1}}, order {{2}} {{1}}"), vec!["1", "2"]);
        assert_eq!(placeholders("{{ name }} {{x"), vec!["name"]);
        assert!(placeholders("none").is_empty());
    }
}
