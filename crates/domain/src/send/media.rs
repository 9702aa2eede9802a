//! Image, video, audio, document and sticker messages: exactly one of an https link or a media id.

use super::*;

use crate::FieldError;
use serde_json::Value;

pub(super) fn parse_media(kind: Kind, v: &Value, errors: &mut Vec<FieldError>) -> Option<Parsed> {
    let k = kind.as_str();
    let o = object(
        v,
        k,
        "{\"link\": \"https://…\"} or {\"media_id\": \"…\"}",
        errors,
    )?;
    let before = errors.len();
    let mut allowed = vec!["link", "media_id"];
    if kind.takes_caption() {
        allowed.push("caption");
    }
    if kind == Kind::Document {
        allowed.push("filename");
    }
    if kind == Kind::Audio {
        allowed.push("voice");
    }
    for key in o.keys() {
        if allowed.contains(&key.as_str()) {
            continue;
        }
        let message = match key.as_str() {
            "caption" => format!(
                "is not allowed on {k} messages; only image, video and document take a caption"
            ),
            "filename" => "is allowed on document messages only".to_string(),
            "voice" => "is allowed on audio messages only".to_string(),
            "id" => "is not accepted: give media_id (the id returned by POST /media) or link (an https URL)".to_string(),
            _ => format!("is not a field of {k}; allowed: {}", allowed.join(", ")),
        };
        errors.push(FieldError::new(format!("{k}.{key}"), message));
    }
    let link = opt_str(o, k, "link", errors);
    let media_id = opt_str(o, k, "media_id", errors);
    let media = match (get(o, "link"), get(o, "media_id")) {
        (Some(_), Some(_)) => {
            errors.push(FieldError::new(
                k,
                "give exactly one of link or media_id, not both",
            ));
            None
        }
        (None, None) => {
            errors.push(FieldError::new(
                k,
                "must hold link (an https URL) or media_id (the id returned by POST /media)",
            ));
            None
        }
        _ => match (link, media_id) {
            (Some(l), _) => {
                check_url(l, &format!("{k}.link"), errors).then(|| MediaRef::Link(l.to_string()))
            }
            (_, Some(id)) if id.trim().is_empty() => {
                errors.push(FieldError::new(
                    format!("{k}.media_id"),
                    "must not be empty",
                ));
                None
            }
            (_, Some(id)) => Some(MediaRef::Id(id.to_string())),
            _ => None,
        },
    };
    let mut caption = None;
    if kind.takes_caption()
        && let Some(c) = opt_str(o, k, "caption", errors)
    {
        if c.trim().is_empty() {
            errors.push(FieldError::new(
                format!("{k}.caption"),
                "must not be empty; leave caption out for no caption",
            ));
        } else if chars(c) > MAX_CAPTION_CHARS {
            errors.push(FieldError::new(
                format!("{k}.caption"),
                format!(
                    "must be at most {MAX_CAPTION_CHARS} characters (got {})",
                    chars(c)
                ),
            ));
        } else {
            caption = Some(c.to_string());
        }
    }
    if kind == Kind::Document
        && let Some(f) = opt_str(o, k, "filename", errors)
    {
        let p = format!("{k}.filename");
        if f.trim().is_empty() {
            errors.push(FieldError::new(p, "must not be empty"));
        } else if chars(f) > MAX_FILENAME_CHARS {
            errors.push(FieldError::new(
                p,
                format!("must be at most {MAX_FILENAME_CHARS} characters"),
            ));
        } else if f.chars().any(|c| matches!(c, '/' | '\\') || c.is_control()) {
            errors.push(FieldError::new(
                p,
                "must be a file name without '/', '\\' or control characters",
            ));
        }
    }
    if kind == Kind::Audio {
        opt_bool(o, k, "voice", errors);
    }
    if errors.len() != before {
        return None;
    }
    Some(Parsed {
        text: caption,
        media,
        template: None,
        content: without_nulls(o),
    })
}
