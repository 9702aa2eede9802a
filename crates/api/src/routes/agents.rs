//! Conversations for agents: mark a customer's message read (with a typing indicator),
//! block and unblock a customer (`tern_core::agents`).

use crate::auth::{Authed, perm};
use crate::error::ApiError;
use crate::extract::{ApiJson, path_id};
use crate::state::AppState;
use axum::Json;
use axum::extract::{Path, State};
use serde::Deserialize;
use serde_json::Value;
use tern_domain::validate::Fields;
use utoipa::ToSchema;

pub use tern_core::views::{Contact, Message};

/// What to show the customer besides the blue ticks.
// The body's schema (OpenAPI); the handler reads the body with `validate::Fields`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct MarkReadRequest {
    /// Also show the customer that the business is typing; the network ends the indicator
    /// when the reply is sent, or after 25 seconds.
    #[schema(default = false)]
    pub typing_indicator: Option<bool>,
}

/// Mark a customer's message read.
///
/// Marks the inbound message read at the network (blue ticks), and with it the earlier
/// unread messages of the conversation; with `typing_indicator`, the customer also sees that
/// the business is typing. Sets the messages' `read_at` and adds a `read_marked` entry to
/// each one's timeline. Repeating it is harmless (`200`, `read_at` kept). Refused: the
/// business's own message (`409` `not_inbound`), a message older than 30 days (`409`
/// `too_old`); when the network cannot be reached, `503` and nothing is recorded.
#[utoipa::path(
    post,
    path = "/messages/{message_id}/read",
    tag = "Messages",
    operation_id = "markMessageRead",
    params(("message_id" = String, Path, format = Uuid)),
    request_body = MarkReadRequest,
    responses((status = 200, description = "The message, with its `read_at`.", body = Message)),
    security(("bearer" = []))
)]
pub async fn mark_read(
    auth: Authed<perm::MessagesSend>,
    State(state): State<AppState>,
    Path(id): Path<String>,
    ApiJson(body): ApiJson<Value>,
) -> Result<Json<Message>, ApiError> {
    let id = path_id(&id)?;
    let mut f = Fields::new(&body)?;
    let typing: Option<bool> = f.optional("typing_indicator");
    f.finish()?;
    let m = tern_core::agents::mark_read(&state.core, &auth, id, typing.unwrap_or(false)).await?;
    Ok(Json(m.into()))
}

/// Block a customer.
///
/// Blocks the customer at the network on every number of the organisation they wrote to in
/// the last 24 hours (the network blocks no one else: otherwise `409`
/// `block_needs_recent_message`). The contact's `blocked_at` is set; sends to them are
/// refused (`409` `contact_blocked`) and campaigns skip them (`blocked`). Blocking a blocked
/// contact answers `200` with the contact unchanged.
#[utoipa::path(
    post,
    path = "/contacts/{contact_id}/block",
    tag = "Contacts",
    operation_id = "blockContact",
    params(("contact_id" = String, Path, format = Uuid)),
    responses((status = 200, description = "The contact, with its `blocked_at`.", body = Contact)),
    security(("bearer" = []))
)]
pub async fn block_contact(
    auth: Authed<perm::ContactsUpdate>,
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> Result<Json<Contact>, ApiError> {
    let id = path_id(&id)?;
    let c = tern_core::agents::block(&state.core, &auth, id).await?;
    Ok(Json(c.into()))
}

/// Unblock a customer.
///
/// Unblocks the customer at the network on the organisation's numbers and clears
/// `blocked_at`. Unblocking a contact that is not blocked answers `200` with the contact
/// unchanged.
#[utoipa::path(
    delete,
    path = "/contacts/{contact_id}/block",
    tag = "Contacts",
    operation_id = "unblockContact",
    params(("contact_id" = String, Path, format = Uuid)),
    responses((status = 200, description = "The contact, `blocked_at` null.", body = Contact)),
    security(("bearer" = []))
)]
pub async fn unblock_contact(
    auth: Authed<perm::ContactsUpdate>,
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> Result<Json<Contact>, ApiError> {
    let id = path_id(&id)?;
    let c = tern_core::agents::unblock(&state.core, &auth, id).await?;
    Ok(Json(c.into()))
}
