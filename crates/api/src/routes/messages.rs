//! Sending messages (`POST /messages`) and reading them back (`GET /messages/{id}`).
//!
//! The handler is an adapter over `tern_core::messages::send::accept`: it reads the key and
//! the send's data in one batched lookup (`Core::lookups`), runs the checks that belong to
//! the request itself in the contract's order — key → permission → plan feature →
//! Idempotency-Key format → body — and hands the rest (sending number → recipient →
//! consent → window and template → billing → media → acceptance, or the bound key's
//! replay) to the use case.

use crate::auth::{self, Authed, perm};
use crate::error::ApiError;
use crate::extract::{ApiJson, path_id};
use crate::request_log::CreatedMessage;
use crate::state::AppState;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::{Extension, Json};
use serde_json::{Value, json};
use tern_core::messages::send::{self as accept, Send, Sent};
use tern_domain::Problem;
use tern_domain::send::{self, Recipient};
use tern_domain::time::now_ms;
use tern_store::{ContactRef, SendContext};

pub use tern_core::views::{Failure, Message, ReplyTo};

/// The body of `POST /messages`: the network's message shapes, with `to` and the sending
/// number as Tern adds them. The rules are enforced by `tern_domain::send::parse_send`.
pub struct SendMessageRequest;

fn media_schema(caption: bool, filename: bool) -> Value {
    let mut props = json!({
        "link": {"type": "string", "format": "uri", "pattern": "^https://", "description": "An https URL."},
        "media_id": {"type": "string", "format": "uuid", "description": "The `media_id` of a file uploaded or imported with POST /media."}
    });
    if caption {
        props["caption"] = json!({"type": "string", "maxLength": send::MAX_CAPTION_CHARS});
    }
    if filename {
        props["filename"] =
            json!({"type": "string", "minLength": 1, "maxLength": send::MAX_FILENAME_CHARS});
    }
    json!({"type": "object", "description": "Exactly one of link / media_id.",
           "properties": props, "additionalProperties": false})
}

/// The parts every send request shares, named once so a generated client has one type for
/// each (`RecipientByContactId`, not one copy per message type).
fn shared_send_schemas() -> Vec<(String, Value)> {
    let text = |max: usize| {
        json!({"type": "object", "required": ["text"], "additionalProperties": false,
               "properties": {"text": {"type": "string", "minLength": 1, "maxLength": max}}})
    };
    vec![
        (
            "RecipientByContactId".into(),
            json!({"type": "object", "description": "A contact of the organisation, by Tern's id.",
            "properties": {"contact_id": {"type": "string", "format": "uuid"}}, "required": ["contact_id"], "additionalProperties": false}),
        ),
        (
            "RecipientByWaId".into(),
            json!({"type": "object", "description": "A phone number as the network writes it: digits only, no `+`.",
            "properties": {"wa_id": {"type": "string", "pattern": "^[1-9][0-9]{6,14}$"}}, "required": ["wa_id"], "additionalProperties": false}),
        ),
        (
            "RecipientByUserId".into(),
            json!({"type": "object", "description": "A business-scoped user id, for a customer known by username.",
            "properties": {"user_id": {"type": "string", "pattern": "^[A-Z]{2}\\.(ENT\\.)?[A-Za-z0-9]{1,128}$", "example": "US.13491208655302741918"}}, "required": ["user_id"], "additionalProperties": false}),
        ),
        (
            "ReplyContext".into(),
            json!({"type": "object", "description": "Reply to (quote) an earlier message.",
            "properties": {"message_id": {"type": "string", "minLength": 1, "maxLength": send::MAX_MESSAGE_ID_CHARS, "description": "The network's id (`wamid.…`) of the message answered."}},
            "required": ["message_id"], "additionalProperties": false}),
        ),
        (
            "Interactive".into(),
            json!({"type": "object", "required": ["type", "action"], "additionalProperties": true,
            "description": "The network's interactive object: `type` with its `action`, and `header`, `body`, `footer` as that type allows (`body` is required for `button` and `list`; its text is at most 1,024 characters for `button`, 4,096 for `list`).",
            "properties": {
                "type": {"type": "string", "enum": send::INTERACTIVE_TYPES},
                "header": {"type": "object", "required": ["type"], "additionalProperties": true,
                           "description": "`{\"type\": \"text\", \"text\": …}` or a media header (`image`, `video`, `document` holding `link` or `media_id`).",
                           "properties": {"type": {"type": "string", "enum": ["text", "image", "video", "document"]},
                                          "text": {"type": "string", "minLength": 1, "maxLength": send::MAX_INTERACTIVE_HEADER_CHARS}}},
                "body": text(send::MAX_LIST_BODY_CHARS),
                "footer": text(send::MAX_INTERACTIVE_FOOTER_CHARS),
                "action": {"type": "object", "additionalProperties": true,
                           "description": "The type's action: `buttons` (button), `button` and `sections` (list), `name` and `parameters` (cta_url, flow, …).",
                           "properties": {
                               "buttons": {"type": "array", "minItems": 1, "maxItems": send::MAX_REPLY_BUTTONS, "items": {"$ref": "#/components/schemas/ReplyButton"}},
                               "button": {"type": "string", "minLength": 1, "maxLength": send::MAX_LIST_BUTTON_CHARS, "description": "A list's button text."},
                               "sections": {"type": "array", "minItems": 1, "maxItems": send::MAX_LIST_SECTIONS, "items": {"type": "object", "additionalProperties": true}},
                               "name": {"type": "string"},
                               "parameters": {"type": "object", "additionalProperties": true}
                           }}
            }}),
        ),
        (
            "ReplyButton".into(),
            json!({"type": "object", "required": ["type", "reply"],
            "properties": {"type": {"type": "string", "const": "reply"},
                           "reply": {"type": "object", "required": ["id", "title"],
                                     "properties": {"id": {"type": "string", "minLength": 1, "maxLength": send::MAX_REPLY_BUTTON_ID_CHARS},
                                                    "title": {"type": "string", "minLength": 1, "maxLength": send::MAX_REPLY_BUTTON_TITLE_CHARS}}}}}),
        ),
    ]
}

/// The component name of the send request of one message type (`SendTextRequest`, …).
pub fn send_variant_name(kind: send::Kind) -> String {
    let k = kind.as_str();
    format!("Send{}{}Request", k[..1].to_uppercase(), &k[1..])
}

/// The schemas of `POST /messages`: `SendMessageRequest`, a `oneOf` discriminated by
/// `type`, and one complete object per message type, so a typed client cannot send
/// `type=text` without `text`. Written as JSON (utoipa's types cannot say `const`); the
/// document's finishing step installs them under `components.schemas`.
pub fn send_schemas() -> Vec<(String, Value)> {
    let value = json!({"type": "string", "minLength": 1, "pattern": "^[^\\n\\t\\r]*[^\\s][^\\n\\t\\r]*$", "description": "Non-empty; no new line, no tab, no more than four spaces in a row."});
    let common = json!({
        "to": {"description": "A phone number in international format (`+` and the country code; spaces and dashes allowed), or an object with exactly one of `contact_id` / `wa_id` / `user_id` (a business-scoped user id, for a customer known by username). Addressing by phone number or user_id also needs `contacts.create`.",
               "oneOf": [
                   {"type": "string", "minLength": 2, "pattern": "^\\+", "example": "+14155550123",
                    "description": "`+`, the country code and the number. A template's `example` holds the placeholder `+<RECIPIENT_PHONE>`, which is refused: put the recipient's number in its place."},
                   {"$ref": "#/components/schemas/RecipientByContactId"},
                   {"$ref": "#/components/schemas/RecipientByWaId"},
                   {"$ref": "#/components/schemas/RecipientByUserId"}
               ]},
        "phone_number_id": {"type": "string", "minLength": 1, "description": "The sending number (`id` from GET /phone-numbers). Required when the organisation has several numbers (or use `from`)."},
        "from": {"type": "string", "minLength": 1, "description": "Alternative selector of the sending number: a phone_number_id or the number in E.164."},
        "context": {"$ref": "#/components/schemas/ReplyContext"},
        "messaging_product": {"type": "string", "const": "whatsapp", "description": "Accepted for compatibility with the network's body; may be left out."},
        "recipient_type": {"type": "string", "const": "individual", "description": "Accepted for compatibility with the network's body; may be left out."}
    });
    let object = |k: send::Kind| -> Value {
        use send::Kind::*;
        match k {
            Text => json!({"type": "object", "required": ["body"], "additionalProperties": false,
                           "properties": {"body": {"type": "string", "minLength": 1, "maxLength": send::MAX_TEXT_CHARS}, "preview_url": {"type": "boolean"}}}),
            Image | Video => media_schema(true, false),
            Audio | Sticker => media_schema(false, false),
            Document => media_schema(true, true),
            Location => {
                json!({"type": "object", "required": ["latitude", "longitude"], "additionalProperties": false,
                               "properties": {"latitude": {"type": "number", "minimum": -90, "maximum": 90}, "longitude": {"type": "number", "minimum": -180, "maximum": 180}, "name": {"type": "string"}, "address": {"type": "string"}}})
            }
            Contacts => {
                json!({"type": "array", "minItems": 1, "items": {"type": "object", "additionalProperties": true, "required": ["name"],
                               "description": "A contact card in the network's format (`name.formatted_name` required; `phones`, `emails`, `addresses`, `org`, `urls`, `birthday`).",
                               "properties": {"name": {"type": "object", "required": ["formatted_name"], "additionalProperties": true, "properties": {"formatted_name": {"type": "string", "minLength": 1}}}}}})
            }
            Interactive => json!({"$ref": "#/components/schemas/Interactive"}),
            Reaction => {
                json!({"type": "object", "required": ["message_id", "emoji"], "additionalProperties": false,
                               "properties": {"message_id": {"type": "string", "minLength": 1}, "emoji": {"type": "string", "description": "One emoji; empty removes the reaction."}}})
            }
            Template => {
                json!({"type": "object", "required": ["name", "language"], "additionalProperties": false,
                "description": "An approved template. `variables` (one value per numbered variable, in order) and `components` (the network's typed parameters) are never sent together; every value is non-empty with no new line, tab or more than four spaces in a row.",
                "properties": {
                    "name": {"type": "string", "minLength": 1},
                    "language": {"type": "string", "minLength": 2},
                    "variables": {"type": "array", "items": value},
                    "coupon_code": value,
                    "components": {"type": "array", "items": {"type": "object", "additionalProperties": true, "required": ["type"],
                                   "description": "A component's parameters in the network's shape, e.g. `{\"type\": \"body\", \"parameters\": [{\"type\": \"text\", \"text\": \"Ada\"}]}`.",
                                   "properties": {"type": {"type": "string"}}}}
                }})
            }
        }
    };
    let mut out = shared_send_schemas();
    let mut mapping = serde_json::Map::new();
    let mut variants = Vec::new();
    for kind in send::Kind::ALL {
        let k = kind.as_str();
        let name = send_variant_name(kind);
        let mut properties = common.clone();
        properties["type"] = json!({"type": "string", "const": k});
        properties[k] = object(kind);
        out.push((
            name.clone(),
            json!({"type": "object", "required": ["type", "to", k], "additionalProperties": false,
                   "description": format!("A `{k}` message."), "properties": properties}),
        ));
        let reference = format!("#/components/schemas/{name}");
        mapping.insert(k.to_string(), json!(reference));
        variants.push(json!({"$ref": reference}));
    }
    out.push((
        "SendMessageRequest".to_string(),
        json!({
            "description": "A message in the network's own shape: `type` selects the kind and the object named like the type is required.",
            "oneOf": variants,
            "discriminator": {"propertyName": "type", "mapping": mapping},
            "example": {"to": "+14155550123", "type": "text", "text": {"body": "Your order has shipped."}}
        }),
    ));
    out
}

/// Only names the schema for the operation; [`send_schemas`] is the content.
impl utoipa::PartialSchema for SendMessageRequest {
    fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
        utoipa::openapi::schema::ObjectBuilder::new().into()
    }
}

impl utoipa::ToSchema for SendMessageRequest {}

/// Send a message.
#[utoipa::path(
    post,
    path = "/messages",
    tag = "Messages",
    operation_id = "sendMessage",
    params(
        ("Idempotency-Key" = String, Header, min_length = 8, max_length = 128, pattern = "^[A-Za-z0-9][A-Za-z0-9._:-]{7,127}$",
         description = "Unique per intended message; repeat it when retrying."),
    ),
    request_body = SendMessageRequest,
    responses(
        (status = 202, description = "Accepted for delivery (not yet delivered).", body = Message),
        (status = 200, description = "A repeat of an accepted request (same key, same body): the message in its current state. Nothing is sent again.", body = Message,
         headers(("Idempotent-Replayed" = String, description = "`true`"))),
    ),
    security(("bearer" = []))
)]
pub async fn send_message(
    State(state): State<AppState>,
    slot: Option<Extension<auth::RateSlot>>,
    request_id: Option<Extension<crate::frame::RequestId>>,
    headers: HeaderMap,
    body: Result<ApiJson<Value>, ApiError>,
) -> Result<Response, ApiError> {
    // The key and the reads of the send are one lookup, so the recipient is taken from the
    // body before the key is checked; the answers keep the contract's order all the same.
    let hash = auth::key_hash(&headers)?;
    let parsed = body.as_ref().ok().map(|ApiJson(b)| send::parse_send(b));
    let contact = match parsed {
        Some(Ok(ref req)) => Some(match &req.recipient {
            Recipient::ContactId(id) => ContactRef::Id(*id),
            Recipient::WaId(p) | Recipient::Phone(p) => ContactRef::WaId(p.wa_id()),
            Recipient::UserId(u) => ContactRef::UserId(u),
        }),
        _ => None,
    };
    let (found, early) = tokio::join!(
        state.core.lookups.send(&hash, contact),
        state.core.limiter.early(&hash, 1)
    );
    let found = found?;
    let (rec, options) = match found {
        Some(SendContext { auth, options }) => (Some(auth), options),
        None => (None, Vec::new()),
    };
    let slot = slot.as_ref().map(|Extension(s)| s);
    let ctx = auth::context(&state, &hash, rec)?;
    let auth = Authed::<perm::MessagesSend>::admit(&state, ctx, slot, 1, (hash, early)).await?;

    let key_header = headers
        .get(send::IDEMPOTENCY_KEY_HEADER)
        .map(|v| v.to_str().unwrap_or("\u{fffd}"));
    let key = send::check_idempotency_key(key_header)?.to_string();
    let ApiJson(body) = body?;
    let fingerprint = send::fingerprint(&body);
    let now = now_ms();
    let sent = match parsed {
        Some(Ok(request)) => {
            let send = Send {
                request,
                options: &options,
                idempotency_key: &key,
                fingerprint: &fingerprint,
                now,
                request_id: request_id.as_ref().map(|Extension(r)| r.0.as_str()),
            };
            accept::accept(&state.core, &auth, send).await?
        }
        // A bound key still answers first (replay, or duplicate_request for another body).
        Some(Err(p)) => {
            let request_id = request_id.as_ref().map(|Extension(r)| r.0.as_str());
            accept::refused(&state.core, &auth, (&key, &fingerprint), request_id, now, p).await?
        }
        // Not reached: a broken body was answered above.
        None => return Err(ApiError(Problem::unavailable())),
    };
    Ok(match sent {
        Sent::Accepted(m) => {
            let id = m.id;
            let mut resp = (StatusCode::ACCEPTED, Json(Message::from(m))).into_response();
            resp.extensions_mut().insert(CreatedMessage(id));
            resp
        }
        Sent::Replayed(m) => {
            let id = m.id;
            let mut resp = (StatusCode::OK, Json(Message::from(m))).into_response();
            resp.headers_mut()
                .insert("idempotent-replayed", HeaderValue::from_static("true"));
            resp.extensions_mut().insert(CreatedMessage(id));
            resp
        }
    })
}

/// One message: its status and, if it failed, why.
#[utoipa::path(
    get,
    path = "/messages/{message_id}",
    tag = "Messages",
    operation_id = "getMessage",
    params(("message_id" = String, Path, format = Uuid)),
    responses((status = 200, description = "The message.", body = Message)),
    security(("bearer" = []))
)]
pub async fn get_message(
    auth: Authed<perm::MessagesRead>,
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> Result<Json<Message>, ApiError> {
    let id = path_id(&id)?;
    let m = state
        .db
        .get_message(auth.org_id, id)
        .await?
        .ok_or_else(|| ApiError(Problem::not_found()))?;
    Ok(Json(m.into()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_message_type_has_a_complete_request_schema() {
        let schemas: std::collections::HashMap<String, Value> =
            send_schemas().into_iter().collect();
        let union = &schemas["SendMessageRequest"];
        assert_eq!(
            union["oneOf"].as_array().unwrap().len(),
            send::Kind::ALL.len()
        );
        for kind in send::Kind::ALL {
            let k = kind.as_str();
            let v = &schemas[&send_variant_name(kind)];
            assert_eq!(v["required"], json!(["type", "to", k]));
            assert_eq!(v["properties"]["type"]["const"], json!(k));
            assert_eq!(
                union["discriminator"]["mapping"][k],
                json!(format!("#/components/schemas/{}", send_variant_name(kind)))
            );
        }
        assert_eq!(
            schemas["SendTextRequest"]["properties"]["text"]["properties"]["body"]["maxLength"],
            json!(send::MAX_TEXT_CHARS)
        );
    }
}
