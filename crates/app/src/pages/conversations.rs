//! Conversations (APP.md §4 "Other pages"): the list with the public API's filters
//! (`contact_id`, `window_state`), latest activity first, and a conversation's read-only
//! thread, oldest to newest, each message linked to its own page. Every role sees them.

use crate::AppState;
use crate::errors::AppError;
use crate::frame::{Frame, Nav};
use crate::pages::form::Stamp;
use crate::pages::listing::{
    PAGE_SIZE, cleaned, customer_name, href, parse_position, position, status_words,
};
use crate::session::OrgMember;
use askama::Template;
use axum::Router;
use axum::extract::{Path, Query, State};
use axum::response::Html;
use axum::routing::get;
use serde::Deserialize;
use tern_core::browse;
use tern_domain::message::{Direction, MessageType, Status};
use tern_domain::send::WindowState;
use tern_domain::time::now_ms;
use tern_store::Message;
use uuid::Uuid;

pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/app/conversations", get(list))
        .route("/app/conversations/{id}", get(thread))
}

/// Messages a thread page shows.
pub const THREAD_PAGE: i64 = 50;

/// A conversation as the list shows it.
pub struct Line {
    pub id: String,
    pub contact_id: String,
    pub who: String,
    /// The phone or username under the name, when the name is not it.
    pub detail: Option<String>,
    pub number: String,
    pub open: bool,
    pub window_ends: Option<Stamp>,
    pub last_message: Option<Stamp>,
}

#[derive(Template)]
#[template(path = "conversations/list.html")]
pub struct ListPage<'a> {
    pub frame: &'a Frame,
    pub lines: Vec<Line>,
    /// The filters as given (for the form and the links).
    pub window_state: String,
    pub contact_id: String,
    /// The contact filtered on, named.
    pub contact_name: Option<String>,
    pub filtered: bool,
    pub paged: bool,
    pub first: Option<String>,
    pub next: Option<String>,
}

#[derive(Deserialize, Default)]
pub struct ListQuery {
    window_state: Option<String>,
    contact_id: Option<String>,
    after: Option<String>,
}

/// The phone or username shown under a name.
fn detail_of(who: &str, wa_id: Option<&str>, username: Option<&str>) -> Option<String> {
    let d = wa_id
        .map(|w| format!("+{w}"))
        .or_else(|| username.map(|u| format!("@{u}")))?;
    (d != who).then_some(d)
}

/// `GET /app/conversations`.
pub async fn list(
    State(state): State<AppState>,
    me: OrgMember,
    Query(q): Query<ListQuery>,
) -> Result<Html<String>, AppError> {
    let window_state = cleaned(q.window_state.as_deref(), 16);
    let open = match window_state.as_str() {
        "" => None,
        "open" => Some(true),
        "closed" => Some(false),
        _ => {
            return Err(AppError::BadRequest(
                "The window filter must be \"open\" or \"closed\". Go back to the conversations and choose again.".into(),
            ));
        }
    };
    let contact_id = cleaned(q.contact_id.as_deref(), 64);
    let contact = if contact_id.is_empty() {
        None
    } else {
        Some(Uuid::parse_str(&contact_id).map_err(|_| {
            AppError::BadRequest(
                "The contact filter must be a contact id (a UUID, as on a contact's page). Go back to the conversations and clear the filter.".into(),
            )
        })?)
    };
    let after = parse_position(q.after.as_deref());
    let now = now_ms();
    let mut rows = browse::conversations(
        &state.core,
        me.org.id,
        contact,
        open,
        now,
        after,
        PAGE_SIZE + 1,
    )
    .await?;
    let more = rows.len() as i64 > PAGE_SIZE;
    rows.truncate(PAGE_SIZE as usize);
    let filters = [
        ("window_state", window_state.as_str()),
        ("contact_id", contact_id.as_str()),
    ];
    let next = match rows.last() {
        Some(last) if more => {
            let pos = position(last.conversation.sort_ts(), last.conversation.id);
            let mut pairs = filters.to_vec();
            pairs.push(("after", &pos));
            Some(href("/app/conversations", &pairs))
        }
        _ => None,
    };
    let contact_name = match contact {
        Some(id) => match browse::contact(&state.core, me.org.id, id).await {
            Ok(p) => Some(customer_name(
                p.contact.name.as_deref(),
                p.contact.wa_id.as_deref(),
                p.contact.username.as_deref(),
                p.contact.user_id.as_deref(),
            )),
            // Another organisation's or an unknown contact: nothing is listed either.
            Err(_) => None,
        },
        None => None,
    };
    let lines = rows
        .into_iter()
        .map(|l| {
            let c = l.contact.as_ref();
            let who = customer_name(
                c.and_then(|c| c.name.as_deref()),
                c.and_then(|c| c.wa_id.as_deref()),
                c.and_then(|c| c.username.as_deref()),
                c.and_then(|c| c.user_id.as_deref()),
            );
            let detail = detail_of(
                &who,
                c.and_then(|c| c.wa_id.as_deref()),
                c.and_then(|c| c.username.as_deref()),
            );
            let conv = &l.conversation;
            Line {
                id: conv.id.to_string(),
                contact_id: conv.contact_id.to_string(),
                who,
                detail,
                number: conv.phone_number_id.clone(),
                open: conv.window_state(now) == WindowState::Open,
                window_ends: Stamp::opt(conv.window_expires_at()),
                last_message: Stamp::opt(conv.last_message_at),
            }
        })
        .collect();
    let frame = me.frame(Nav::Conversations);
    let filtered = open.is_some() || contact.is_some();
    let view = ListPage {
        frame: &frame,
        lines,
        filtered,
        paged: after.is_some(),
        first: after.map(|_| href("/app/conversations", &filters)),
        next,
        contact_name,
        window_state,
        contact_id,
    };
    Ok(Html(view.render()?))
}

/// A message of a thread.
pub struct Item {
    pub id: String,
    pub inbound: bool,
    pub kind: &'static str,
    /// The text or caption (escaped by the template); `None` for other types.
    pub text: Option<String>,
    pub template: Option<String>,
    pub status: &'static str,
    pub status_words: &'static str,
    pub failure_code: Option<String>,
    pub at: Stamp,
    /// (what, when) of the status times and edits.
    pub times: Vec<(&'static str, Stamp)>,
    pub revoked: bool,
}

impl Item {
    pub fn of(m: &Message) -> Item {
        let mut times = Vec::new();
        for (what, at) in [
            ("Sent", m.sent_at),
            ("Delivered", m.delivered_at),
            ("Read", m.read_at),
            ("Failed", m.failed_at),
            ("Edited", m.edited_at),
            ("Deleted by the customer", m.revoked_at),
        ] {
            if let Some(at) = at {
                times.push((what, Stamp::at(at)));
            }
        }
        Item {
            id: m.id.to_string(),
            inbound: m.direction == Direction::Inbound,
            kind: MessageType::shown(&m.r#type).as_str(),
            text: m.text.clone().filter(|t| !t.is_empty()),
            template: m.template_name.clone(),
            status: m.status.as_str(),
            status_words: status_words(m.status.as_str()),
            failure_code: if m.status == Status::Failed {
                m.failure_code.clone()
            } else {
                None
            },
            at: Stamp::at(m.created_at),
            times,
            revoked: m.revoked_at.is_some(),
        }
    }
}

#[derive(Template)]
#[template(path = "conversations/thread.html")]
pub struct ThreadPage<'a> {
    pub frame: &'a Frame,
    pub id: String,
    pub contact_id: String,
    pub who: String,
    pub detail: Option<String>,
    pub number: String,
    pub open: bool,
    pub window_ends: Option<Stamp>,
    /// Oldest first.
    pub items: Vec<Item>,
    pub earlier: Option<String>,
    pub later: Option<String>,
}

#[derive(Deserialize, Default)]
pub struct ThreadQuery {
    before: Option<String>,
}

/// `GET /app/conversations/{id}`: another organisation's (or an unknown) id is the 404 page.
pub async fn thread(
    State(state): State<AppState>,
    me: OrgMember,
    Path(id): Path<String>,
    Query(q): Query<ThreadQuery>,
) -> Result<Html<String>, AppError> {
    let id = Uuid::parse_str(id.trim()).map_err(|_| AppError::NotFound)?;
    let before = q
        .before
        .as_deref()
        .and_then(|b| Uuid::parse_str(b.trim()).ok());
    let t = browse::thread(&state.core, me.org.id, id, before, THREAD_PAGE + 1).await?;
    let mut messages = t.messages;
    let more = messages.len() as i64 > THREAD_PAGE;
    messages.truncate(THREAD_PAGE as usize);
    // Read newest first; shown oldest first, like a chat.
    let earlier = match messages.last() {
        Some(oldest) if more => Some(format!("/app/conversations/{id}?before={}", oldest.id)),
        _ => None,
    };
    messages.reverse();
    let c = t.contact.as_ref();
    let who = customer_name(
        c.and_then(|c| c.name.as_deref()),
        c.and_then(|c| c.wa_id.as_deref()),
        c.and_then(|c| c.username.as_deref()),
        c.and_then(|c| c.user_id.as_deref()),
    );
    let detail = detail_of(
        &who,
        c.and_then(|c| c.wa_id.as_deref()),
        c.and_then(|c| c.username.as_deref()),
    );
    let frame = me.frame(Nav::Conversations);
    let conv = &t.conversation;
    let view = ThreadPage {
        frame: &frame,
        id: conv.id.to_string(),
        contact_id: conv.contact_id.to_string(),
        who,
        detail,
        number: conv.phone_number_id.clone(),
        open: conv.window_state(now_ms()) == WindowState::Open,
        window_ends: Stamp::opt(conv.window_expires_at()),
        items: messages.iter().map(Item::of).collect(),
        earlier,
        later: before.map(|_| format!("/app/conversations/{id}")),
    };
    Ok(Html(view.render()?))
}
