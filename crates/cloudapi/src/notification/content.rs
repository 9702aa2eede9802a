//! The Message's `content`: an inbound message's type object in the network's shape, as
//! Tern stores it (`InboundMessage::content_object`).

use serde_json::Value;

use super::InboundContent;

pub(super) fn content_object_of(
    content: &InboundContent,
    type_name: &str,
    raw: &Value,
) -> Option<Value> {
    let obj = raw.get(type_name).filter(|o| !o.is_null());
    match content {
        InboundContent::Image(_)
        | InboundContent::Video(_)
        | InboundContent::Audio(_)
        | InboundContent::Document(_)
        | InboundContent::Sticker(_) => obj.map(|o| {
            let mut o = o.clone();
            if let Value::Object(map) = &mut o {
                map.remove("id");
                map.remove("url");
            }
            o
        }),
        InboundContent::Location(_) => obj.map(|o| {
            let mut o = o.clone();
            if let Value::Object(map) = &mut o {
                for key in ["latitude", "longitude"] {
                    if let Some(v) = map.get_mut(key)
                        && let Value::String(text) = v
                        && let Some(n) = text
                            .trim()
                            .parse::<f64>()
                            .ok()
                            .and_then(serde_json::Number::from_f64)
                    {
                        *v = Value::Number(n);
                    }
                }
            }
            o
        }),
        InboundContent::Reaction { message_id, emoji } => Some(serde_json::json!({
            "wamid": message_id,
            "emoji": emoji,
        })),
        InboundContent::RequestWelcome => Some(
            obj.cloned()
                .unwrap_or_else(|| Value::Object(Default::default())),
        ),
        InboundContent::Edit {
            type_name: inner_type,
            content: inner,
            ..
        } => {
            let edit = raw.get("edit");
            edit.and_then(|e| e.get("message"))
                .filter(|m| m.is_object())
                .and_then(|m| content_object_of(inner, inner_type, m))
                .or_else(|| edit.cloned())
        }
        _ => obj.cloned().or_else(|| message_rest(raw)),
    }
}

/// The message without its envelope fields; `None` when nothing is left.
fn message_rest(raw: &Value) -> Option<Value> {
    let Value::Object(map) = raw else {
        return None;
    };
    let rest: serde_json::Map<String, Value> = map
        .iter()
        .filter(|(k, _)| {
            !matches!(
                k.as_str(),
                "from" | "from_user_id" | "from_parent_user_id" | "id" | "timestamp" | "type"
            )
        })
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    Some(Value::Object(rest))
}
