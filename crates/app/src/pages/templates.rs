//! Message templates (APP.md §4 "Other pages"): the list with the public API's filters
//! (`status`, `language`), and a template's page with its components and its `example` —
//! the ready-to-send `POST /messages` body the API shows (the same core view), with a copy
//! button. Read-only; every role sees them.

use crate::AppState;
use crate::errors::AppError;
use crate::frame::{Frame, Nav};
use crate::pages::form::Stamp;
use crate::pages::listing::{PAGE_SIZE, cleaned, href, parse_position, position};
use crate::session::OrgMember;
use askama::Template;
use axum::Router;
use axum::extract::{Path, Query, State};
use axum::response::Html;
use axum::routing::get;
use serde::Deserialize;
use serde_json::Value;
use tern_core::browse;
use tern_domain::template::TemplateStatus;
use uuid::Uuid;

pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/app/templates", get(list))
        .route("/app/templates/{id}", get(show))
}

/// A status in words: (tag class, words, what it means).
fn status_words(s: TemplateStatus) -> (&'static str, &'static str, &'static str) {
    match s {
        TemplateStatus::Draft => (
            "",
            "Draft",
            "Created in Tern, not yet submitted for review.",
        ),
        TemplateStatus::Pending => (
            "warn",
            "Pending",
            "In review at the network; it cannot be sent yet.",
        ),
        TemplateStatus::Approved => ("on", "Approved", "Ready to send."),
        TemplateStatus::Rejected => (
            "off",
            "Rejected",
            "The network refused it; see the reason, change it and submit a new one.",
        ),
        TemplateStatus::Paused => (
            "warn",
            "Paused",
            "The network paused it after poor feedback; sends are refused until it is active again.",
        ),
        TemplateStatus::Disabled => (
            "off",
            "Disabled",
            "The network disabled it; it can no longer be sent.",
        ),
    }
}

/// A template as the list shows it.
pub struct Row {
    pub id: String,
    pub name: String,
    pub language: String,
    pub category: &'static str,
    pub status_class: &'static str,
    pub status: &'static str,
    pub updated: Stamp,
}

impl Row {
    fn of(t: &tern_store::Template) -> Row {
        let (status_class, status, _) = status_words(t.status);
        Row {
            id: t.id.to_string(),
            name: t.name.clone(),
            language: t.language.clone(),
            category: t.category.as_str(),
            status_class,
            status,
            updated: Stamp::at(t.updated_at),
        }
    }
}

/// A status filter choice.
pub struct Choice {
    pub value: &'static str,
    pub label: &'static str,
    pub selected: bool,
}

#[derive(Template)]
#[template(path = "templates/list.html")]
pub struct ListPage<'a> {
    pub frame: &'a Frame,
    pub rows: Vec<Row>,
    pub statuses: Vec<Choice>,
    pub language: String,
    pub filtered: bool,
    pub paged: bool,
    pub first: Option<String>,
    pub next: Option<String>,
}

#[derive(Deserialize, Default)]
pub struct ListQuery {
    status: Option<String>,
    language: Option<String>,
    after: Option<String>,
}

/// `GET /app/templates`.
pub async fn list(
    State(state): State<AppState>,
    me: OrgMember,
    Query(q): Query<ListQuery>,
) -> Result<Html<String>, AppError> {
    let status_raw = cleaned(q.status.as_deref(), 16);
    let status = if status_raw.is_empty() {
        None
    } else {
        Some(TemplateStatus::parse(&status_raw).ok_or_else(|| {
            AppError::BadRequest(format!(
                "The status filter must be one of {}. Go back to the templates and choose again.",
                TemplateStatus::names()
            ))
        })?)
    };
    let language = cleaned(q.language.as_deref(), 16);
    let after = parse_position(q.after.as_deref());
    let lang = (!language.is_empty()).then_some(language.as_str());
    let mut rows =
        browse::templates(&state.core, me.org.id, status, lang, after, PAGE_SIZE + 1).await?;
    let more = rows.len() as i64 > PAGE_SIZE;
    rows.truncate(PAGE_SIZE as usize);
    let filters = [
        ("status", status_raw.as_str()),
        ("language", language.as_str()),
    ];
    let next = match rows.last() {
        Some(last) if more => {
            let pos = position(last.created_at, last.id);
            let mut pairs = filters.to_vec();
            pairs.push(("after", &pos));
            Some(href("/app/templates", &pairs))
        }
        _ => None,
    };
    let frame = me.frame(Nav::Templates);
    let mut statuses = vec![Choice {
        value: "",
        label: "Any status",
        selected: status.is_none(),
    }];
    statuses.extend(TemplateStatus::ALL.iter().map(|s| Choice {
        value: s.as_str(),
        label: status_words(*s).1,
        selected: status == Some(*s),
    }));
    let view = ListPage {
        frame: &frame,
        rows: rows.iter().map(Row::of).collect(),
        statuses,
        filtered: status.is_some() || lang.is_some(),
        paged: after.is_some(),
        first: after.map(|_| href("/app/templates", &filters)),
        next,
        language,
    };
    Ok(Html(view.render()?))
}

/// A component as the page shows it.
pub struct Component {
    /// `HEADER`, `BODY`, `FOOTER` or `BUTTONS`, in words.
    pub kind: String,
    /// A header's format (`TEXT`, `IMAGE`, …), lower case.
    pub format: Option<String>,
    pub text: Option<String>,
    /// Buttons: (type, text, target — a URL or phone number).
    pub buttons: Vec<(String, String, Option<String>)>,
}

fn text_of(v: &Value, key: &str) -> Option<String> {
    v.get(key).and_then(Value::as_str).map(str::to_string)
}

fn components(v: &Value) -> Vec<Component> {
    let Some(list) = v.as_array() else {
        return Vec::new();
    };
    list.iter()
        .map(|c| {
            let kind = text_of(c, "type").unwrap_or_default();
            let buttons = c
                .get("buttons")
                .and_then(Value::as_array)
                .map(|bs| {
                    bs.iter()
                        .map(|b| {
                            (
                                text_of(b, "type")
                                    .unwrap_or_default()
                                    .to_lowercase()
                                    .replace('_', " "),
                                text_of(b, "text").unwrap_or_default(),
                                text_of(b, "url").or_else(|| text_of(b, "phone_number")),
                            )
                        })
                        .collect()
                })
                .unwrap_or_default();
            let mut words = kind.to_lowercase();
            if let Some(first) = words.get_mut(..1) {
                first.make_ascii_uppercase();
            }
            Component {
                kind: words,
                format: text_of(c, "format").map(|f| f.to_lowercase()),
                text: text_of(c, "text"),
                buttons,
            }
        })
        .collect()
}

#[derive(Template)]
#[template(path = "templates/show.html")]
pub struct ShowPage<'a> {
    pub frame: &'a Frame,
    pub row: Row,
    pub status_meaning: &'static str,
    pub rejection_reason: Option<String>,
    pub waba_id: String,
    pub created: Stamp,
    pub components: Vec<Component>,
    /// The components as the network holds them (pretty JSON).
    pub components_json: String,
    /// The `POST /messages` body that sends it (pretty JSON).
    pub example: String,
    pub sendable: bool,
}

/// `GET /app/templates/{id}`: another organisation's (or an unknown) id is the 404 page.
pub async fn show(
    State(state): State<AppState>,
    me: OrgMember,
    Path(id): Path<String>,
) -> Result<Html<String>, AppError> {
    let id = Uuid::parse_str(id.trim()).map_err(|_| AppError::NotFound)?;
    let t = browse::template(&state.core, me.org.id, id).await?;
    let (_, _, status_meaning) = status_words(t.status);
    let pretty = |v: &Value| serde_json::to_string_pretty(v).unwrap_or_else(|_| v.to_string());
    let row = Row::of(&t);
    let view_components = components(&t.components);
    let components_json = pretty(&t.components);
    let sendable = t.status == TemplateStatus::Approved;
    let created = Stamp::at(t.created_at);
    // The API's own view of the template: its `example` is exactly what GET /templates/{id}
    // shows.
    let api = tern_core::views::Template::from(t);
    let frame = me.frame(Nav::Templates);
    let view = ShowPage {
        frame: &frame,
        row,
        status_meaning,
        rejection_reason: api.rejection_reason.clone(),
        waba_id: api.waba_id.clone(),
        created,
        components: view_components,
        components_json,
        example: pretty(&api.example),
        sendable,
    };
    Ok(Html(view.render()?))
}
