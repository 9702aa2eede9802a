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
use crate::state::AppState;
use axum::Json;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use serde_json::{Value, json};
use tern_core::messages::send::{self as accept, Send, Sent};
use tern_domain::send::{self, Recipient};
use tern_domain::time::{format_ms, now_ms};
use tern_domain::{Problem, failure};
use tern_store::{ContactRef, SendContext};
use utoipa::ToSchema;

/// Why a message failed.
#[derive(Debug, Serialize, ToSchema)]
pub struct Failure {
    /// Tern's failure code (same as the message's `failure_code`).
    #[schema(example = "recipient_not_on_whatsapp")]
    pub code: String,
    /// A plain explanation.
    pub message: String,
    /// The network's error code, when the network gave one.
    #[schema(example = "131026")]
    pub provider_code: Option<String>,
    /// The network's own wording.
    pub provider_message: Option<String>,
    /// A link to fix the cause; present only when the network offers one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub provider_href: Option<String>,
}

/// A message, outbound (sent through Tern) or inbound (from a customer).
#[derive(Debug, Serialize, ToSchema)]
pub struct Message {
    #[schema(format = Uuid)]
    pub id: String,
    #[schema(format = Uuid)]
    pub conversation_id: String,
    #[schema(format = Uuid)]
    pub contact_id: String,
    /// The business number that sent or received it.
    pub phone_number_id: String,
    /// `outbound` or `inbound`.
    #[schema(example = "outbound")]
    pub direction: String,
    #[serde(rename = "type")]
    #[schema(example = "text")]
    pub r#type: String,
    /// `accepted`, `sending`, `sent`, `delivered`, `read` or `failed` (outbound);
    /// `received` (inbound).
    #[schema(example = "accepted")]
    pub status: String,
    pub template_name: Option<String>,
    /// The body of a text message, the caption of a media message, else null.
    pub text: Option<String>,
    pub media_id: Option<String>,
    /// The network's message id; null until the message has reached the network.
    pub wamid: Option<String>,
    /// Set when a campaign sent the message.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(format = Uuid)]
    pub campaign_id: Option<String>,
    #[schema(format = DateTime)]
    pub created_at: String,
    #[schema(format = DateTime)]
    pub sent_at: Option<String>,
    #[schema(format = DateTime)]
    pub delivered_at: Option<String>,
    #[schema(format = DateTime)]
    pub read_at: Option<String>,
    #[schema(format = DateTime)]
    pub failed_at: Option<String>,
    pub failure_code: Option<String>,
    pub failure: Option<Failure>,
    /// The type's object in the network's shape: as accepted (outbound), as received or
    /// last edited (inbound), e.g. location `{latitude, longitude, name, address}`,
    /// interactive `{type, button_reply|list_reply|nfm_reply}`, reaction `{message_id,
    /// wamid, emoji}`; null once the customer deleted the message.
    #[schema(value_type = Option<Object>)]
    pub content: Option<Value>,
    /// The message this one answers; `message_id` is null when Tern does not hold it.
    pub reply_to: Option<ReplyTo>,
    /// The click-to-WhatsApp ad the customer came from (inbound only), as the network
    /// sends it (`source_url`, `source_id`, `source_type`, `headline`, `body`, `ctwa_clid`, …).
    #[schema(value_type = Option<Object>)]
    pub referral: Option<Value>,
    /// When the customer last edited the message.
    #[schema(format = DateTime)]
    pub edited_at: Option<String>,
    /// When the customer deleted the message (`text` and `content` are then null).
    #[schema(format = DateTime)]
    pub revoked_at: Option<String>,
}

/// The message another one answers.
#[derive(Debug, Serialize, ToSchema)]
pub struct ReplyTo {
    /// Tern's id of that message; null when Tern does not hold it.
    #[schema(format = Uuid)]
    pub message_id: Option<String>,
    /// The network's id of that message.
    pub wamid: String,
}

impl From<failure::Failure> for Failure {
    fn from(f: failure::Failure) -> Self {
        Failure {
            code: f.code,
            message: f.message,
            provider_code: f.provider_code,
            provider_message: f.provider_message,
            provider_href: f.provider_href,
        }
    }
}

impl From<tern_store::Message> for Message {
    fn from(m: tern_store::Message) -> Self {
        let content = tern_core::messages::content(&m);
        Message {
            id: m.id.to_string(),
            conversation_id: m.conversation_id.to_string(),
            contact_id: m.contact_id.to_string(),
            phone_number_id: m.phone_number_id,
            direction: m.direction.as_str().to_string(),
            r#type: m.r#type,
            status: m.status.as_str().to_string(),
            template_name: m.template_name,
            text: m.text,
            media_id: m.media_id.map(|id| id.to_string()),
            wamid: m.wamid,
            campaign_id: m.campaign_id.map(|id| id.to_string()),
            created_at: format_ms(m.created_at),
            sent_at: m.sent_at.map(format_ms),
            delivered_at: m.delivered_at.map(format_ms),
            read_at: m.read_at.map(format_ms),
            failed_at: m.failed_at.map(format_ms),
            failure_code: m.failure_code,
            failure: m.failure.map(Failure::from),
            content,
            reply_to: m.reply_to.map(|r| ReplyTo {
                message_id: r.message_id.map(|id| id.to_string()),
                wamid: r.wamid,
            }),
            referral: m.referral,
            edited_at: m.edited_at.map(format_ms),
            revoked_at: m.revoked_at.map(format_ms),
        }
    }
}

/// The body of `POST /messages`: the network's message shapes, with `to` and the sending
/// number as Tern adds them. The rules are enforced by `tern_domain::send::parse_send`.
pub struct SendMessageRequest;

fn media_schema(caption: bool, filename: bool) -> Value {
    let mut props = json!({
        "link": {"type": "string", "format": "uri", "pattern": "^https://", "description": "An https URL."},
        "media_id": {"type": "string", "minLength": 1, "description": "The id of a file uploaded earlier."}
    });
    if caption {
        props["caption"] = json!({"type": "string", "maxLength": 1024});
    }
    if filename {
        props["filename"] = json!({"type": "string", "minLength": 1, "maxLength": 240});
    }
    json!({"type": "object", "description": "Exactly one of link / media_id.",
           "properties": props, "additionalProperties": false})
}

fn send_schema() -> Value {
    let value = json!({"type": "string", "minLength": 1, "pattern": "^[^\\n\\t\\r]*[^\\s][^\\n\\t\\r]*$", "description": "Non-empty; no new line, no tab, no more than four spaces in a row."});
    json!({
        "type": "object",
        "required": ["type", "to"],
        "description": "A message in the network's own shape: `type` selects the kind and the object named like the type is required.",
        "properties": {
            "type": {"type": "string", "enum": ["text", "image", "video", "audio", "document", "sticker", "location", "contacts", "interactive", "reaction", "template"]},
            "to": {"description": "A phone number in international format (`+` and the country code; spaces and dashes allowed), or an object with exactly one of `contact_id` / `wa_id` / `user_id` (a business-scoped user id, for a customer known by username). Addressing by phone number or user_id also needs `contacts.create`.",
                   "oneOf": [
                       {"type": "string", "pattern": "^\\+[0-9 ().-]{7,40}$", "example": "+14155550123"},
                       {"type": "object", "properties": {"contact_id": {"type": "string", "format": "uuid"}}, "required": ["contact_id"], "additionalProperties": false},
                       {"type": "object", "properties": {"wa_id": {"type": "string", "pattern": "^[1-9][0-9]{6,14}$"}}, "required": ["wa_id"], "additionalProperties": false},
                       {"type": "object", "properties": {"user_id": {"type": "string", "pattern": "^[A-Z]{2}\\.(ENT\\.)?[A-Za-z0-9]{1,128}$", "example": "US.13491208655302741918"}}, "required": ["user_id"], "additionalProperties": false}
                   ]},
            "phone_number_id": {"type": "string", "minLength": 1, "description": "The sending number (`id` from GET /phone-numbers). Required when the organisation has several numbers (or use `from`)."},
            "from": {"type": "string", "minLength": 1, "description": "Alternative selector of the sending number: a phone_number_id or the number in E.164."},
            "context": {"type": "object", "properties": {"message_id": {"type": "string", "minLength": 1}}, "required": ["message_id"], "description": "Reply to (quote) an earlier message."},
            "text": {"type": "object", "required": ["body"], "additionalProperties": false,
                     "properties": {"body": {"type": "string", "minLength": 1, "maxLength": 4096}, "preview_url": {"type": "boolean"}}},
            "image": media_schema(true, false),
            "video": media_schema(true, false),
            "audio": media_schema(false, false),
            "document": media_schema(true, true),
            "sticker": media_schema(false, false),
            "location": {"type": "object", "required": ["latitude", "longitude"],
                         "properties": {"latitude": {"type": "number", "minimum": -90, "maximum": 90}, "longitude": {"type": "number", "minimum": -180, "maximum": 180}, "name": {"type": "string"}, "address": {"type": "string"}}},
            "contacts": {"type": "array", "minItems": 1, "items": {"type": "object", "description": "A contact card in the network's format (`name.formatted_name` required)."}},
            "interactive": {"type": "object", "description": "The network's interactive object (button, list, cta_url, flow, …).", "required": ["type"]},
            "reaction": {"type": "object", "required": ["message_id", "emoji"], "properties": {"message_id": {"type": "string", "minLength": 1}, "emoji": {"type": "string"}}},
            "template": {"type": "object", "required": ["name", "language"], "additionalProperties": false,
                         "description": "An approved template. `variables` (one value per numbered variable, in order) and `components` (the network's typed parameters) are never sent together; every value is non-empty with no new line, tab or more than four spaces in a row.",
                         "properties": {
                             "name": {"type": "string", "minLength": 1},
                             "language": {"type": "string", "minLength": 2},
                             "variables": {"type": "array", "items": value},
                             "coupon_code": value,
                             "components": {"type": "array", "items": {"type": "object"}}
                         }}
        },
        "example": {"to": "+14155550123", "type": "text", "text": {"body": "Your order has shipped."}}
    })
}

impl utoipa::PartialSchema for SendMessageRequest {
    fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
        serde_json::from_value(send_schema())
            .unwrap_or_else(|_| utoipa::openapi::schema::ObjectBuilder::new().into())
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
    let found = state.core.lookups.send(&hash, contact).await?;
    let (rec, options) = match found {
        Some(SendContext { auth, options }) => (Some(auth), options),
        None => (None, Vec::new()),
    };
    let auth = Authed::<perm::MessagesSend>::check(auth::context(&state, rec)?)?;

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
            };
            accept::accept(&state.core, &auth, send).await?
        }
        // A bound key still answers first (replay, or duplicate_request for another body).
        Some(Err(p)) => accept::refused(&state.core, &auth, &key, &fingerprint, now, p).await?,
        // Not reached: a broken body was answered above.
        None => return Err(ApiError(Problem::unavailable())),
    };
    Ok(match sent {
        Sent::Accepted(m) => (StatusCode::ACCEPTED, Json(Message::from(m))).into_response(),
        Sent::Replayed(m) => {
            let mut resp = (StatusCode::OK, Json(Message::from(m))).into_response();
            resp.headers_mut()
                .insert("idempotent-replayed", HeaderValue::from_static("true"));
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
    fn send_schema_is_a_valid_schema() {
        let schema = <SendMessageRequest as utoipa::PartialSchema>::schema();
        let v = serde_json::to_value(schema).unwrap();
        assert_eq!(v["required"], json!(["type", "to"]));
        assert_eq!(
            v["properties"]["text"]["properties"]["body"]["maxLength"],
            json!(4096)
        );
    }
}
