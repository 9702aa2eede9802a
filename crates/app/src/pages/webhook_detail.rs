//! One webhook endpoint's page (APP.md §3): its details, the delivery log (newest first, a
//! page at a time), and — for a person who manages its key — edit, enable/disable, rotate
//! the secret (identity confirmation; the new secret shown once), send a test event (the
//! attempt shown on the page), replay failed deliveries since a time, and delete (a confirm
//! step). Another organisation's endpoint, or an unknown one, is the 404 page.

use crate::AppState;
use crate::errors::AppError;
use crate::frame::{FlashKind, Frame, Nav};
use crate::pages::form::{FieldProblems, FormFields, Stamp, parse_local_utc};
use crate::pages::keys::respond_secret;
use crate::pages::respond;
use crate::pages::webhooks::{
    EventChoice, SecretPage, SubView, acting_for, event_choices, manages, refusal_words,
    subscription_body,
};
use crate::session::{OrgMember, confirm_label, redirect_with_flash, require_confirmation};
use askama::Template;
use axum::Router;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::Response;
use axum::routing::{get, post};
use serde::Deserialize;
use serde_json::json;
use tern_core::Principal;
use tern_core::keys;
use tern_core::webhooks::{deliver, subscriptions};
use tern_domain::events::EventType;
use tern_domain::time::now_ms;
use tern_store::{KeyRow, KeySummary, Subscription, WebhookAttempt};
use uuid::Uuid;

/// Attempts per page of the log.
pub const LOG_PAGE: i64 = 25;

pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/app/webhooks/{id}", get(show).post(edit))
        .route("/app/webhooks/{id}/enabled", post(set_enabled))
        .route("/app/webhooks/{id}/delete", get(delete_form).post(delete))
        .route("/app/webhooks/{id}/rotate-secret", post(rotate_secret))
        .route("/app/webhooks/{id}/test", post(test))
        .route("/app/webhooks/{id}/replay", post(replay))
}

/// One attempt of the log.
#[derive(Debug, Clone)]
pub struct AttemptView {
    pub at: Stamp,
    pub event_type: String,
    pub event_id: String,
    pub attempt: i64,
    pub succeeded: bool,
    pub response_status: Option<i64>,
    pub latency_ms: i64,
    pub error: Option<String>,
    /// The start of the receiver's answer (at most 1 KiB).
    pub answer: Option<String>,
}

impl AttemptView {
    fn of(a: &WebhookAttempt) -> AttemptView {
        AttemptView {
            at: Stamp::at(a.created_at),
            event_type: a.event_type.clone(),
            event_id: a.event_id.to_string(),
            attempt: a.attempt,
            succeeded: a.status == tern_store::AttemptStatus::Succeeded,
            response_status: a.response_status,
            latency_ms: a.latency_ms,
            error: a.error.clone(),
            answer: a.response_body.clone().filter(|b| !b.is_empty()),
        }
    }
}

#[derive(Template)]
#[template(path = "webhooks/show.html")]
pub struct ShowPage {
    pub frame: Frame,
    pub sub: SubView,
    pub key_name: String,
    pub key_prefix: String,
    pub key_revoked: bool,
    pub manage: bool,
    pub log: Vec<AttemptView>,
    /// The `before` of the next (older) page of the log.
    pub older: Option<String>,
    /// The edit form's values and problems.
    pub edit_url: String,
    pub events: Vec<EventChoice>,
    pub edit_description: String,
    pub edit_summary: Option<String>,
    pub problems: FieldProblems,
    /// The test form's types and the attempt of a test just sent.
    /// (type, selected): the endpoint's first event type is chosen first (what it receives).
    pub test_types: Vec<(&'static str, bool)>,
    pub test_result: Option<AttemptView>,
    pub replay_error: Option<String>,
    pub need_confirm: bool,
    pub confirm_label: &'static str,
    pub confirm_error: Option<String>,
}

impl ShowPage {
    pub fn other_problems(&self) -> Vec<String> {
        self.problems.others(&["url", "events", "description"])
    }
}

/// The endpoint `id` of the organisation with its key, or `404`.
async fn find(
    state: &AppState,
    me: &OrgMember,
    id: &str,
) -> Result<(Subscription, KeySummary, Option<KeyRow>), AppError> {
    let id = Uuid::parse_str(id).map_err(|_| AppError::NotFound)?;
    let (sub, key) = subscriptions::get_in_org(&state.core, me.org.id, id).await?;
    let row = keys::get(&state.core.db, me.org.id, key.id).await?;
    Ok((sub, key, row))
}

/// The endpoint `id` with the key the person acts for; `404` unless they manage it.
async fn managed(
    state: &AppState,
    me: &OrgMember,
    id: &str,
) -> Result<(Subscription, KeyRow), AppError> {
    let (sub, _, row) = find(state, me, id).await?;
    let row = row
        .filter(|r| keys::can_manage(me.role(), me.member.id, &r.key))
        .ok_or(AppError::NotFound)?;
    Ok((sub, row))
}

/// The endpoint `id` and the Principal that changes it: its key with the person acting.
async fn managed_as(
    state: &AppState,
    me: &OrgMember,
    id: &str,
) -> Result<(Subscription, Principal), AppError> {
    let (sub, row) = managed(state, me, id).await?;
    let p = acting_for(me, &row)?;
    Ok((sub, p))
}

fn parse_before(s: &str) -> Option<(i64, Uuid)> {
    let (at, id) = s.split_once('_')?;
    Some((at.parse().ok()?, Uuid::parse_str(id).ok()?))
}

async fn show_page(
    state: &AppState,
    me: &OrgMember,
    id: &str,
    before: Option<&str>,
) -> Result<ShowPage, AppError> {
    let (sub, key, row) = find(state, me, id).await?;
    let before = before.and_then(parse_before);
    let mut attempts = state
        .core
        .db
        .list_webhook_attempts(me.org.id, key.id, sub.id, None, before, LOG_PAGE + 1)
        .await
        .map_err(|e| AppError::Internal(e.to_string()))?;
    let older = (attempts.len() as i64 > LOG_PAGE).then(|| {
        attempts.truncate(LOG_PAGE as usize);
        attempts
            .last()
            .map(|a| format!("{}_{}", a.created_at, a.id))
            .unwrap_or_default()
    });
    Ok(ShowPage {
        frame: me.frame(Nav::Webhooks),
        sub: SubView::of(&sub),
        key_name: key.name.clone(),
        key_prefix: key.prefix.clone(),
        key_revoked: key.revoked_at.is_some(),
        manage: row.as_ref().is_some_and(|r| manages(me, r)),
        log: attempts.iter().map(AttemptView::of).collect(),
        older,
        edit_url: sub.url.clone(),
        events: event_choices(&sub.event_types),
        edit_description: sub.description.clone().unwrap_or_default(),
        edit_summary: None,
        problems: FieldProblems::default(),
        test_types: {
            let first = sub
                .event_types
                .first()
                .map_or(EventType::WebhookTest.as_str(), String::as_str);
            EventType::ALL
                .iter()
                .map(|e| (e.as_str(), e.as_str() == first))
                .collect()
        },
        test_result: None,
        replay_error: None,
        need_confirm: !me.confirmed(state),
        confirm_label: confirm_label(&me.signed),
        confirm_error: None,
    })
}

fn here(id: &Uuid) -> String {
    format!("/app/webhooks/{id}")
}

#[derive(Debug, Deserialize)]
pub struct LogQuery {
    pub before: Option<String>,
}

/// `GET /app/webhooks/{id}`.
pub async fn show(
    State(state): State<AppState>,
    me: OrgMember,
    Path(id): Path<String>,
    Query(q): Query<LogQuery>,
) -> Result<Response, AppError> {
    let page = show_page(&state, &me, &id, q.before.as_deref()).await?;
    respond(StatusCode::OK, &page)
}

/// `POST /app/webhooks/{id}`: URL, events and description.
pub async fn edit(
    State(state): State<AppState>,
    me: OrgMember,
    Path(id): Path<String>,
    form: FormFields,
) -> Result<Response, AppError> {
    let (sub, p) = managed_as(&state, &me, &id).await?;
    let body = subscription_body(&form, true);
    match subscriptions::update(&state.core, &p, sub.id, &body, now_ms()).await {
        Ok(_) => Ok(redirect_with_flash(
            &state,
            &here(&sub.id),
            FlashKind::Success,
            "The endpoint is saved.",
        )),
        Err(e) => {
            let status = StatusCode::from_u16(e.status()).unwrap_or(StatusCode::BAD_REQUEST);
            let mut page = show_page(&state, &me, &id, None).await?;
            page.edit_summary = Some(refusal_words(&e, &mut page.problems)?);
            page.edit_url = form.text("url");
            page.events = event_choices(&form.all("events"));
            page.edit_description = form.text("description");
            respond(status, &page)
        }
    }
}

/// `POST /app/webhooks/{id}/enabled` (`enabled` = `true` or `false`).
pub async fn set_enabled(
    State(state): State<AppState>,
    me: OrgMember,
    Path(id): Path<String>,
    form: FormFields,
) -> Result<Response, AppError> {
    let (sub, row) = managed(&state, &me, &id).await?;
    let enabled = match form.get("enabled") {
        Some("true") => true,
        Some("false") => false,
        _ => return Err(AppError::BadRequest("Choose enable or disable.".into())),
    };
    let p = acting_for(&me, &row)?;
    subscriptions::update(
        &state.core,
        &p,
        sub.id,
        &json!({"enabled": enabled}),
        now_ms(),
    )
    .await?;
    let words = if enabled {
        "The endpoint is enabled: new events are delivered to it."
    } else {
        "The endpoint is disabled: no event is delivered to it until it is enabled again."
    };
    Ok(redirect_with_flash(
        &state,
        &here(&sub.id),
        FlashKind::Success,
        words,
    ))
}

#[derive(Template)]
#[template(path = "webhooks/delete.html")]
pub struct DeletePage {
    pub frame: Frame,
    pub sub: SubView,
}

/// `GET /app/webhooks/{id}/delete`: the confirm step.
pub async fn delete_form(
    State(state): State<AppState>,
    me: OrgMember,
    Path(id): Path<String>,
) -> Result<Response, AppError> {
    let (sub, _) = managed(&state, &me, &id).await?;
    let page = DeletePage {
        frame: me.frame(Nav::Webhooks),
        sub: SubView::of(&sub),
    };
    respond(StatusCode::OK, &page)
}

/// `POST /app/webhooks/{id}/delete`.
pub async fn delete(
    State(state): State<AppState>,
    me: OrgMember,
    Path(id): Path<String>,
) -> Result<Response, AppError> {
    let (sub, p) = managed_as(&state, &me, &id).await?;
    subscriptions::delete(&state.core, &p, sub.id).await?;
    Ok(redirect_with_flash(
        &state,
        "/app/webhooks",
        FlashKind::Success,
        &format!("The endpoint {} is deleted.", sub.url),
    ))
}

/// `POST /app/webhooks/{id}/rotate-secret`: after a confirmation, the new secret once.
pub async fn rotate_secret(
    State(state): State<AppState>,
    me: OrgMember,
    Path(id): Path<String>,
    form: FormFields,
) -> Result<Response, AppError> {
    let (sub, p) = managed_as(&state, &me, &id).await?;
    if let Err(words) = require_confirmation(&state, &me.signed, form.get("confirm")).await {
        let mut page = show_page(&state, &me, &id, None).await?;
        page.need_confirm = true;
        page.confirm_error = Some(words);
        return respond(StatusCode::UNPROCESSABLE_ENTITY, &page);
    }
    let w = subscriptions::rotate(&state.core, &p, sub.id, now_ms()).await?;
    respond_secret(&SecretPage::of(me.frame(Nav::Webhooks), w, true))
}

/// `POST /app/webhooks/{id}/test` (`event_type`): the attempt shown on the page.
pub async fn test(
    State(state): State<AppState>,
    me: OrgMember,
    Path(id): Path<String>,
    form: FormFields,
) -> Result<Response, AppError> {
    let (sub, p) = managed_as(&state, &me, &id).await?;
    let kind = EventType::parse(form.get("event_type").unwrap_or("webhook.test"))
        .ok_or_else(|| AppError::BadRequest("Choose an event type from the list.".into()))?;
    let attempt = deliver::test(&state.core, &p, sub.id, kind).await?;
    let mut page = show_page(&state, &me, &id, None).await?;
    page.test_result = Some(AttemptView::of(&attempt));
    respond(StatusCode::OK, &page)
}

/// `POST /app/webhooks/{id}/replay` (`since`, a `datetime-local` value in UTC).
pub async fn replay(
    State(state): State<AppState>,
    me: OrgMember,
    Path(id): Path<String>,
    form: FormFields,
) -> Result<Response, AppError> {
    let (sub, p) = managed_as(&state, &me, &id).await?;
    let since = match parse_local_utc(form.get("since").unwrap_or_default()) {
        Some(ms) if ms <= now_ms() => ms,
        found => {
            let mut page = show_page(&state, &me, &id, None).await?;
            page.replay_error = Some(if found.is_some() {
                "The time must not be in the future.".into()
            } else {
                "Enter a date and time, e.g. 2026-01-31 12:00.".into()
            });
            return respond(StatusCode::UNPROCESSABLE_ENTITY, &page);
        }
    };
    let n = deliver::replay(&state.core, &p, sub.id, since).await?;
    let words = match n {
        0 => "No failed delivery since that time: nothing was queued.".to_string(),
        1 => "1 failed delivery was queued to be sent again.".to_string(),
        n => format!("{n} failed deliveries were queued to be sent again."),
    };
    Ok(redirect_with_flash(
        &state,
        &here(&sub.id),
        FlashKind::Success,
        &words,
    ))
}
