//! Conversations (one per contact and business number) and their messages.

use crate::auth::{Authed, perm};
use crate::error::ApiError;
use crate::extract::path_id;
use crate::pagination::{ListQuery, Page};
use crate::routes::messages::Message;
use crate::state::AppState;
use axum::Json;
use axum::extract::{Path, RawQuery, State};
use serde::Serialize;
use tern_domain::Problem;
use tern_domain::message::Direction;
use tern_domain::send::WindowState;
use tern_domain::time::{format_ms, now_ms};
use utoipa::ToSchema;
use uuid::Uuid;

/// A conversation between a contact and one of the organisation's numbers.
#[derive(Debug, Serialize, ToSchema)]
pub struct Conversation {
    #[schema(format = Uuid)]
    pub id: String,
    #[schema(format = Uuid)]
    pub contact_id: String,
    /// Who the conversation is with, enough to show the person without another request.
    pub contact: ConversationContact,
    pub phone_number_id: String,
    /// `open` while free-form messages may be sent (24 hours from the customer's last
    /// message, by the network's clock), else `closed`.
    #[schema(example = "open", pattern = "^(open|closed)$")]
    pub window_state: String,
    /// When the window closes (or closed); null when the customer never wrote.
    #[schema(format = DateTime)]
    pub window_expires_at: Option<String>,
    /// The network's time of the customer's last message.
    #[schema(format = DateTime)]
    pub last_inbound_at: Option<String>,
    /// The latest message in either direction.
    #[schema(format = DateTime)]
    pub last_message_at: Option<String>,
    #[schema(format = DateTime)]
    pub created_at: String,
}

/// The contact of a conversation: name and whichever identities the network gave.
#[derive(Debug, Serialize, ToSchema)]
pub struct ConversationContact {
    #[schema(format = Uuid)]
    pub id: String,
    /// The customer's profile name or the name the organisation gave them.
    pub name: Option<String>,
    /// E.164 with `+`; null when the network withholds the phone (a username customer).
    #[schema(example = "+14155550123")]
    pub phone: Option<String>,
    /// The customer's WhatsApp username, when they have one.
    pub username: Option<String>,
    /// Business-scoped user id (`US.…`), when known.
    pub user_id: Option<String>,
}

impl ConversationContact {
    fn from_row(c: tern_store::ConversationContact) -> Self {
        ConversationContact {
            id: c.id.to_string(),
            name: c.name,
            phone: c.wa_id.map(|w| format!("+{w}")),
            username: c.username,
            user_id: c.user_id,
        }
    }

    /// A contact that vanished between the two reads (deleted meanwhile): only its id.
    fn only_id(id: uuid::Uuid) -> Self {
        ConversationContact {
            id: id.to_string(),
            name: None,
            phone: None,
            username: None,
            user_id: None,
        }
    }
}

impl Conversation {
    fn from_row(c: tern_store::Conversation, contact: ConversationContact, now: i64) -> Self {
        Conversation {
            id: c.id.to_string(),
            contact_id: c.contact_id.to_string(),
            contact,
            // A customer who never wrote has no open window: `closed` too.
            window_state: if c.window_state(now) == WindowState::Open {
                "open"
            } else {
                "closed"
            }
            .to_string(),
            window_expires_at: c.window_expires_at().map(format_ms),
            last_inbound_at: c.last_inbound_at.map(format_ms),
            last_message_at: c.last_message_at.map(format_ms),
            created_at: format_ms(c.created_at),
            phone_number_id: c.phone_number_id,
        }
    }
}

/// List conversations, latest activity first.
#[utoipa::path(
    get,
    path = "/conversations",
    tag = "Conversations",
    operation_id = "listConversations",
    params(
        ("contact_id" = Option<String>, Query, format = Uuid, description = "Only this contact's conversations."),
        ("window_state" = Option<String>, Query, pattern = "^(open|closed)$", description = "`open` or `closed`."),
        ("limit" = Option<i64>, Query, minimum = 1, maximum = 100, description = "Page size, 1 to 100 (default 25)."),
        ("cursor" = Option<String>, Query, min_length = 1, description = "The `next_cursor` of the previous page."),
    ),
    responses((status = 200, description = "A page of conversations.", body = Page<Conversation>)),
    security(("bearer" = []))
)]
pub async fn list_conversations(
    auth: Authed<perm::MessagesRead>,
    State(state): State<AppState>,
    RawQuery(query): RawQuery,
) -> Result<Json<Page<Conversation>>, ApiError> {
    let mut q = ListQuery::parse(query.as_deref(), &["contact_id", "window_state"])?;
    let contact = q.filter("contact_id", |c| {
        Uuid::parse_str(c).map_err(|_| "must be a contact id (UUID)".into())
    });
    let open = q.filter("window_state", |w| match w {
        "open" => Ok(true),
        "closed" => Ok(false),
        _ => Err("must be open or closed".into()),
    });
    let list = q.finish(&state, &auth, "conversations", &[])?;
    let after = list.after_ts_id()?;
    // One clock for the filter and for the window_state shown, so they agree.
    let now = now_ms();
    let rows = state
        .db
        .list_conversations(
            auth.org_id,
            contact,
            open.map(|o| (o, now)),
            after,
            list.fetch_limit(),
        )
        .await?;
    let ids: Vec<Uuid> = rows.iter().map(|c| c.contact_id).collect();
    let mut people: std::collections::HashMap<Uuid, tern_store::ConversationContact> = state
        .db
        .conversation_contacts(auth.org_id, &ids)
        .await?
        .into_iter()
        .map(|c| (c.id, c))
        .collect();
    Ok(Json(list.page(
        &state,
        &auth,
        rows,
        |c| vec![c.sort_ts().to_string(), c.id.to_string()],
        |c| {
            let contact = people
                .remove(&c.contact_id)
                .map(ConversationContact::from_row)
                .unwrap_or_else(|| ConversationContact::only_id(c.contact_id));
            Conversation::from_row(c, contact, now)
        },
    )))
}

/// Messages of one conversation, newest first; inbound messages included.
#[utoipa::path(
    get,
    path = "/conversations/{conversation_id}/messages",
    tag = "Conversations",
    operation_id = "listConversationMessages",
    params(
        ("conversation_id" = String, Path, format = Uuid),
        ("direction" = Option<String>, Query, pattern = "^(inbound|outbound)$", description = "`inbound` or `outbound`."),
        ("limit" = Option<i64>, Query, minimum = 1, maximum = 100, description = "Page size, 1 to 100 (default 25)."),
        ("cursor" = Option<String>, Query, min_length = 1, description = "The `next_cursor` of the previous page."),
    ),
    responses((status = 200, description = "A page of messages.", body = Page<Message>)),
    security(("bearer" = []))
)]
pub async fn list_conversation_messages(
    auth: Authed<perm::MessagesRead>,
    State(state): State<AppState>,
    Path(id): Path<String>,
    RawQuery(query): RawQuery,
) -> Result<Json<Page<Message>>, ApiError> {
    let id = path_id(&id)?;
    let mut q = ListQuery::parse(query.as_deref(), &["direction"])?;
    let direction = q.filter("direction", |d| {
        Direction::parse(d).ok_or_else(|| "must be inbound or outbound".into())
    });
    let list = q.finish(&state, &auth, &format!("conversation_messages:{id}"), &[])?;
    let before = list.after_id()?;
    if state.db.get_conversation(auth.org_id, id).await?.is_none() {
        return Err(ApiError(Problem::not_found()));
    }
    let rows = state
        .db
        .list_conversation_messages(auth.org_id, id, direction, before, list.fetch_limit())
        .await?;
    Ok(Json(list.page(
        &state,
        &auth,
        rows,
        |m| vec![m.id.to_string()],
        Message::from,
    )))
}
