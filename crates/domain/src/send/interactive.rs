//! Interactive messages: reply buttons, lists, call-to-action URLs, flows and the other types passed through.

use super::*;

use crate::FieldError;
use serde_json::{Map, Value};

/// `path.text` of an object member (`header`, `body`, `footer`) when present.
pub(super) fn part_text(
    o: &Map<String, Value>,
    key: &str,
    required: bool,
    max: usize,
    errors: &mut Vec<FieldError>,
) {
    let p = format!("interactive.{key}");
    match get(o, key) {
        None if required => errors.push(FieldError::new(
            p,
            "is required: an object such as {\"text\": \"…\"}",
        )),
        None => {}
        Some(Value::Object(part)) => {
            if let Some(t) = req_str(part, &p, "text", "the text", errors) {
                bounded_text(t, &format!("{p}.text"), max, errors);
            }
        }
        Some(_) => errors.push(FieldError::new(
            p,
            "must be an object such as {\"text\": \"…\"}",
        )),
    }
}

pub(super) fn parse_interactive(v: &Value, errors: &mut Vec<FieldError>) -> Option<Parsed> {
    let o = object(
        v,
        "interactive",
        "{\"type\": \"button\", \"body\": {\"text\": \"…\"}, \"action\": {…}}",
        errors,
    )?;
    let before = errors.len();
    let t = match get(o, "type") {
        Some(Value::String(s)) if INTERACTIVE_TYPES.contains(&s.as_str()) => Some(s.as_str()),
        _ => {
            errors.push(FieldError::new(
                "interactive.type",
                format!("must be one of {}", INTERACTIVE_TYPES.join(", ")),
            ));
            None
        }
    };
    let needs_body = matches!(t, Some("button" | "list" | "cta_url"));
    let body_max = if t == Some("list") {
        MAX_LIST_BODY_CHARS
    } else {
        MAX_INTERACTIVE_BODY_CHARS
    };
    part_text(o, "body", needs_body, body_max, errors);
    part_text(o, "footer", false, MAX_INTERACTIVE_FOOTER_CHARS, errors);
    // Header: text everywhere; media only on button and cta_url.
    if let Some(h) = get(o, "header") {
        let allowed: &[&str] = match t {
            Some("button" | "cta_url") => &["text", "image", "video", "document"],
            Some("list" | "flow") => &["text"],
            _ => &[],
        };
        match h.as_object() {
            None => errors.push(FieldError::new("interactive.header", "must be an object")),
            Some(h) if !allowed.is_empty() => {
                let ht = h.get("type").and_then(Value::as_str).unwrap_or("");
                if !allowed.contains(&ht) {
                    errors.push(FieldError::new(
                        "interactive.header.type",
                        format!(
                            "must be one of {} for a {} message",
                            allowed.join(", "),
                            t.unwrap_or("")
                        ),
                    ));
                } else if ht == "text" {
                    if let Some(text) =
                        req_str(h, "interactive.header", "text", "the header text", errors)
                    {
                        bounded_text(
                            text,
                            "interactive.header.text",
                            MAX_INTERACTIVE_HEADER_CHARS,
                            errors,
                        );
                    }
                } else if !get(h, ht).is_some_and(Value::is_object) {
                    errors.push(FieldError::new(
                        format!("interactive.header.{ht}"),
                        "is required: an object with link (an https URL) or id",
                    ));
                }
            }
            Some(_) => {}
        }
    }
    let action = match get(o, "action") {
        Some(Value::Object(a)) => Some(a),
        None => {
            errors.push(FieldError::new(
                "interactive.action",
                "is required: an object",
            ));
            None
        }
        Some(_) => {
            errors.push(FieldError::new("interactive.action", "must be an object"));
            None
        }
    };
    if let (Some(t), Some(a)) = (t, action) {
        match t {
            "button" => check_reply_buttons(a, errors),
            "list" => check_list(a, errors),
            "cta_url" => check_cta_url(a, errors),
            "flow" => check_flow(a, errors),
            _ => {}
        }
    }
    (errors.len() == before).then(|| Parsed::content(without_nulls(o)))
}

pub(super) fn check_reply_buttons(a: &Map<String, Value>, errors: &mut Vec<FieldError>) {
    let p = "interactive.action.buttons";
    let Some(buttons) = get(a, "buttons").and_then(Value::as_array) else {
        errors.push(FieldError::new(
            p,
            "is required: an array of 1 to 3 buttons such as {\"type\": \"reply\", \"reply\": {\"id\": \"yes\", \"title\": \"Yes\"}}",
        ));
        return;
    };
    if buttons.is_empty() || buttons.len() > MAX_REPLY_BUTTONS {
        errors.push(FieldError::new(
            p,
            format!(
                "must hold 1 to {MAX_REPLY_BUTTONS} buttons (got {})",
                buttons.len()
            ),
        ));
    }
    let mut ids: Vec<&str> = Vec::new();
    let mut titles: Vec<&str> = Vec::new();
    for (i, b) in buttons.iter().enumerate() {
        let bp = format!("{p}[{i}]");
        let Some(b) = b.as_object() else {
            errors.push(FieldError::new(bp, "must be an object"));
            continue;
        };
        if b.get("type").and_then(Value::as_str) != Some("reply") {
            errors.push(FieldError::new(format!("{bp}.type"), "must be \"reply\""));
        }
        let Some(reply) = get(b, "reply").and_then(Value::as_object) else {
            errors.push(FieldError::new(
                format!("{bp}.reply"),
                "is required: an object with id and title",
            ));
            continue;
        };
        let rp = format!("{bp}.reply");
        if let Some(id) = req_str(reply, &rp, "id", "the button's id", errors)
            && bounded_text(id, &format!("{rp}.id"), MAX_REPLY_BUTTON_ID_CHARS, errors).is_some()
        {
            if ids.contains(&id) {
                errors.push(FieldError::new(
                    format!("{rp}.id"),
                    "must be unique among the buttons",
                ));
            }
            ids.push(id);
        }
        if let Some(title) = req_str(reply, &rp, "title", "the button's label", errors)
            && bounded_text(
                title,
                &format!("{rp}.title"),
                MAX_REPLY_BUTTON_TITLE_CHARS,
                errors,
            )
            .is_some()
        {
            if titles.contains(&title) {
                errors.push(FieldError::new(
                    format!("{rp}.title"),
                    "must be unique among the buttons",
                ));
            }
            titles.push(title);
        }
    }
}

pub(super) fn check_list(a: &Map<String, Value>, errors: &mut Vec<FieldError>) {
    let ap = "interactive.action";
    if let Some(b) = req_str(a, ap, "button", "the label of the list's button", errors) {
        bounded_text(
            b,
            "interactive.action.button",
            MAX_LIST_BUTTON_CHARS,
            errors,
        );
    }
    let p = "interactive.action.sections";
    let Some(sections) = get(a, "sections").and_then(Value::as_array) else {
        errors.push(FieldError::new(
            p,
            "is required: an array of 1 to 10 sections, each with rows",
        ));
        return;
    };
    if sections.is_empty() || sections.len() > MAX_LIST_SECTIONS {
        errors.push(FieldError::new(
            p,
            format!(
                "must hold 1 to {MAX_LIST_SECTIONS} sections (got {})",
                sections.len()
            ),
        ));
    }
    let mut total_rows = 0;
    let mut ids: Vec<&str> = Vec::new();
    for (i, s) in sections.iter().enumerate() {
        let sp = format!("{p}[{i}]");
        let Some(s) = s.as_object() else {
            errors.push(FieldError::new(sp, "must be an object with rows"));
            continue;
        };
        match get(s, "title") {
            None if sections.len() > 1 => errors.push(FieldError::new(
                format!("{sp}.title"),
                "is required when the list has more than one section",
            )),
            None => {}
            Some(Value::String(t)) => {
                bounded_text(
                    t,
                    &format!("{sp}.title"),
                    MAX_LIST_SECTION_TITLE_CHARS,
                    errors,
                );
            }
            Some(_) => errors.push(FieldError::new(format!("{sp}.title"), "must be a string")),
        }
        let Some(rows) = get(s, "rows").and_then(Value::as_array) else {
            errors.push(FieldError::new(
                format!("{sp}.rows"),
                "is required: an array of rows such as {\"id\": \"r1\", \"title\": \"…\"}",
            ));
            continue;
        };
        if rows.is_empty() {
            errors.push(FieldError::new(
                format!("{sp}.rows"),
                "must hold at least one row",
            ));
        }
        total_rows += rows.len();
        for (j, r) in rows.iter().enumerate() {
            let rp = format!("{sp}.rows[{j}]");
            let Some(r) = r.as_object() else {
                errors.push(FieldError::new(rp, "must be an object with id and title"));
                continue;
            };
            if let Some(id) = req_str(r, &rp, "id", "the row's id", errors)
                && bounded_text(id, &format!("{rp}.id"), MAX_LIST_ROW_ID_CHARS, errors).is_some()
            {
                if ids.contains(&id) {
                    errors.push(FieldError::new(
                        format!("{rp}.id"),
                        "must be unique among all rows",
                    ));
                }
                ids.push(id);
            }
            if let Some(t) = req_str(r, &rp, "title", "the row's title", errors) {
                bounded_text(t, &format!("{rp}.title"), MAX_LIST_ROW_TITLE_CHARS, errors);
            }
            if let Some(d) = opt_str(r, &rp, "description", errors)
                && chars(d) > MAX_LIST_ROW_DESCRIPTION_CHARS
            {
                errors.push(FieldError::new(
                    format!("{rp}.description"),
                    format!("must be at most {MAX_LIST_ROW_DESCRIPTION_CHARS} characters"),
                ));
            }
        }
    }
    if total_rows > MAX_LIST_ROWS {
        errors.push(FieldError::new(
            p,
            format!("may hold at most {MAX_LIST_ROWS} rows in total (got {total_rows})"),
        ));
    }
}

pub(super) fn check_cta_url(a: &Map<String, Value>, errors: &mut Vec<FieldError>) {
    if a.get("name").and_then(Value::as_str) != Some("cta_url") {
        errors.push(FieldError::new(
            "interactive.action.name",
            "must be \"cta_url\"",
        ));
    }
    let pp = "interactive.action.parameters";
    let Some(ps) = get(a, "parameters").and_then(Value::as_object) else {
        errors.push(FieldError::new(
            pp,
            "is required: an object with display_text and url",
        ));
        return;
    };
    if let Some(d) = req_str(ps, pp, "display_text", "the button's label", errors) {
        bounded_text(
            d,
            "interactive.action.parameters.display_text",
            MAX_CTA_DISPLAY_TEXT_CHARS,
            errors,
        );
    }
    if let Some(u) = req_str(ps, pp, "url", "an https URL", errors) {
        check_url(u, "interactive.action.parameters.url", errors);
    }
}

pub(super) fn check_flow(a: &Map<String, Value>, errors: &mut Vec<FieldError>) {
    if a.get("name").and_then(Value::as_str) != Some("flow") {
        errors.push(FieldError::new(
            "interactive.action.name",
            "must be \"flow\"",
        ));
    }
    let pp = "interactive.action.parameters";
    let Some(ps) = get(a, "parameters").and_then(Value::as_object) else {
        errors.push(FieldError::new(
            pp,
            "is required: an object with flow_message_version, flow_id or flow_name, and flow_cta",
        ));
        return;
    };
    if ps.get("flow_message_version").and_then(Value::as_str) != Some("3") {
        errors.push(FieldError::new(
            format!("{pp}.flow_message_version"),
            "must be \"3\"",
        ));
    }
    let id = get(ps, "flow_id");
    let name = get(ps, "flow_name");
    if id.is_some() == name.is_some() {
        errors.push(FieldError::new(
            pp,
            "must hold exactly one of flow_id or flow_name",
        ));
    }
    for (key, v) in [("flow_id", id), ("flow_name", name)] {
        if let Some(v) = v
            && v.as_str().is_none_or(|s| s.trim().is_empty())
        {
            errors.push(FieldError::new(
                format!("{pp}.{key}"),
                "must be a non-empty string",
            ));
        }
    }
    if let Some(c) = req_str(ps, pp, "flow_cta", "the button's label", errors) {
        bounded_text(c, &format!("{pp}.flow_cta"), MAX_FLOW_CTA_CHARS, errors);
    }
    if let Some(fa) = opt_str(ps, pp, "flow_action", errors)
        && !matches!(fa, "navigate" | "data_exchange")
    {
        errors.push(FieldError::new(
            format!("{pp}.flow_action"),
            "must be navigate or data_exchange",
        ));
    }
}
