//! Contacts (APP.md §4 "Other pages"): search as the public API's `GET /contacts?q=`
//! (name, username, user id or phone digits), each contact's tags, consent and custom
//! fields, and a contact's page with its conversations. Read-only; every role sees them.

use crate::AppState;
use crate::errors::AppError;
use crate::frame::{Frame, Nav};
use crate::pages::form::Stamp;
use crate::pages::listing::{PAGE_SIZE, cleaned, customer_name, href, parse_position, position};
use crate::session::OrgMember;
use askama::Template;
use axum::Router;
use axum::extract::{Path, Query, State};
use axum::response::Html;
use axum::routing::get;
use serde::Deserialize;
use serde_json::Value;
use tern_core::browse;
use tern_domain::send::WindowState;
use tern_domain::time::now_ms;
use tern_store::{Contact, ContactField};
use uuid::Uuid;

pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/app/contacts", get(list))
        .route("/app/contacts/{id}", get(show))
}

/// Longest search accepted (longer input is cut).
const MAX_Q: usize = 200;

/// Consent in words: (tag class, words).
fn consent_words(status: &str) -> (&'static str, &'static str) {
    match status {
        "opted_in" => ("on", "Opted in"),
        "opted_out" => ("off", "Opted out"),
        _ => ("", "Unknown"),
    }
}

/// A custom field's value as text.
fn field_value(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Bool(true) => "yes".into(),
        Value::Bool(false) => "no".into(),
        Value::Null => "—".into(),
        other => other.to_string(),
    }
}

/// The contact's custom fields as (label, value), in the organisation's field order, then
/// values of fields no longer defined, by key.
fn custom_fields(c: &Contact, defs: &[ContactField]) -> Vec<(String, String)> {
    let Some(values) = c.custom_fields.as_object() else {
        return Vec::new();
    };
    let mut out: Vec<(String, String)> = defs
        .iter()
        .filter_map(|d| {
            values
                .get(&d.key)
                .map(|v| (d.label.clone(), field_value(v)))
        })
        .collect();
    out.extend(
        values
            .iter()
            .filter(|(k, _)| !defs.iter().any(|d| &d.key == *k))
            .map(|(k, v)| (k.clone(), field_value(v))),
    );
    out
}

/// A contact as the list shows it.
pub struct Row {
    pub id: String,
    pub who: String,
    pub phone: Option<String>,
    pub username: Option<String>,
    pub tags: Vec<String>,
    pub consent_class: &'static str,
    pub consent: &'static str,
    pub fields: Vec<(String, String)>,
    pub last_inbound: Option<Stamp>,
}

impl Row {
    fn of(c: &Contact, defs: &[ContactField]) -> Row {
        let (consent_class, consent) = consent_words(c.consent_status.as_str());
        Row {
            id: c.id.to_string(),
            who: customer_name(
                c.name.as_deref(),
                c.wa_id.as_deref(),
                c.username.as_deref(),
                c.user_id.as_deref(),
            ),
            phone: c.wa_id.as_ref().map(|w| format!("+{w}")),
            username: c.username.clone(),
            tags: c.tags.clone(),
            consent_class,
            consent,
            fields: custom_fields(c, defs),
            last_inbound: Stamp::opt(c.last_inbound_at),
        }
    }
}

#[derive(Template)]
#[template(path = "contacts/list.html")]
pub struct ListPage<'a> {
    pub frame: &'a Frame,
    pub q: String,
    pub rows: Vec<Row>,
    pub paged: bool,
    pub first: Option<String>,
    pub next: Option<String>,
}

#[derive(Deserialize, Default)]
pub struct ListQuery {
    q: Option<String>,
    after: Option<String>,
}

/// `GET /app/contacts`.
pub async fn list(
    State(state): State<AppState>,
    me: OrgMember,
    Query(query): Query<ListQuery>,
) -> Result<Html<String>, AppError> {
    let q = cleaned(query.q.as_deref(), MAX_Q);
    let after = parse_position(query.after.as_deref());
    let search = (!q.is_empty()).then_some(q.as_str());
    let mut contacts =
        browse::contacts(&state.core, me.org.id, search, after, PAGE_SIZE + 1).await?;
    let defs = browse::contact_fields(&state.core, me.org.id).await?;
    let more = contacts.len() as i64 > PAGE_SIZE;
    contacts.truncate(PAGE_SIZE as usize);
    let next = match contacts.last() {
        Some(last) if more => {
            let pos = position(last.created_at, last.id);
            Some(href("/app/contacts", &[("q", &q), ("after", &pos)]))
        }
        _ => None,
    };
    let frame = me.frame(Nav::Contacts);
    let view = ListPage {
        frame: &frame,
        rows: contacts.iter().map(|c| Row::of(c, &defs)).collect(),
        paged: after.is_some(),
        first: after.map(|_| href("/app/contacts", &[("q", &q)])),
        next,
        q,
    };
    Ok(Html(view.render()?))
}

/// A conversation of the contact's page.
pub struct ConvRow {
    pub id: String,
    pub number: String,
    pub open: bool,
    pub last_message: Option<Stamp>,
}

#[derive(Template)]
#[template(path = "contacts/show.html")]
pub struct ShowPage<'a> {
    pub frame: &'a Frame,
    pub row: Row,
    pub name: Option<String>,
    pub user_id: Option<String>,
    pub parent_user_id: Option<String>,
    pub consent_updated: Option<Stamp>,
    pub consent_source: Option<String>,
    pub created: Stamp,
    pub updated: Stamp,
    pub conversations: Vec<ConvRow>,
}

/// `GET /app/contacts/{id}`: another organisation's (or an unknown) id is the 404 page.
pub async fn show(
    State(state): State<AppState>,
    me: OrgMember,
    Path(id): Path<String>,
) -> Result<Html<String>, AppError> {
    let id = Uuid::parse_str(id.trim()).map_err(|_| AppError::NotFound)?;
    let p = browse::contact(&state.core, me.org.id, id).await?;
    let now = now_ms();
    let c = &p.contact;
    let frame = me.frame(Nav::Contacts);
    let view = ShowPage {
        frame: &frame,
        row: Row::of(c, &p.fields),
        name: c.name.clone(),
        user_id: c.user_id.clone(),
        parent_user_id: c.parent_user_id.clone(),
        consent_updated: Stamp::opt(c.consent_updated_at),
        consent_source: c.consent_source.clone(),
        created: Stamp::at(c.created_at),
        updated: Stamp::at(c.updated_at),
        conversations: p
            .conversations
            .iter()
            .map(|conv| ConvRow {
                id: conv.id.to_string(),
                number: conv.phone_number_id.clone(),
                open: conv.window_state(now) == WindowState::Open,
                last_message: Stamp::opt(conv.last_message_at),
            })
            .collect(),
    };
    Ok(Html(view.render()?))
}
