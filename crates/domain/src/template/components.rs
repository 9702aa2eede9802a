//! Questions asked of a stored template: its header kind, how many variables, which buttons.

use super::*;

use serde_json::{Map, Value};

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

pub(super) fn component<'a>(components: &'a Value, kind: &str) -> Option<&'a Map<String, Value>> {
    components.as_array()?.iter().find_map(|c| {
        let obj = c.as_object()?;
        obj.get("type")
            .and_then(Value::as_str)
            .is_some_and(|t| t.eq_ignore_ascii_case(kind))
            .then_some(obj)
    })
}

pub(super) fn comp_text<'a>(components: &'a Value, kind: &str) -> Option<&'a str> {
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
pub(super) fn buttons(components: &Value) -> Vec<(usize, String, &Map<String, Value>)> {
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

pub(super) fn copy_code_index(components: &Value) -> Option<usize> {
    buttons(components)
        .into_iter()
        .find(|(_, k, _)| k == "COPY_CODE")
        .map(|(i, _, _)| i)
}

/// Whether a send of this template needs the customer's phone number: an authentication
/// template with a one-tap, zero-tap or copy-code button (the network refuses those for a
/// business-scoped user id, error 131062).
pub fn needs_phone_number(category: super::Category, components: &Value) -> bool {
    category == super::Category::Authentication
        && buttons(components).into_iter().any(|(_, kind, b)| {
            kind == "COPY_CODE"
                || (kind == "OTP"
                    && upper(b.get("otp_type")).is_some_and(|t| {
                        matches!(t.as_str(), "ONE_TAP" | "ZERO_TAP" | "COPY_CODE")
                    }))
        })
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
