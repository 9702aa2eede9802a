//! One message's page (APP.md §4): its fields and its whole story (the timeline), which
//! refreshes itself until its story ends — final, quiet for a minute, no webhook retry
//! waiting ([`settled`]) — (app.js polls the `live`
//! fragment every 2 s; without script, a Refresh link), with "Replay" next to a failed
//! webhook delivery for a person who manages that endpoint's key. Another organisation's
//! message, or an unknown id, is the 404 page.

use crate::AppState;
use crate::errors::AppError;
use crate::frame::{FlashKind, Frame, Nav};
use crate::pages::form::{FormFields, Stamp};
use crate::pages::messages::{customer_label, direction_words, status_words};
use crate::pages::respond;
use crate::pages::timeline_view::{self, EntryView};
use crate::pages::webhooks::{acting_for, manages};
use crate::session::{OrgMember, redirect_with_flash};
use askama::Template;
use axum::Router;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::Response;
use axum::routing::{get, post};
use serde::Deserialize;
use serde_json::Value;
use std::collections::HashMap;
use tern_core::explorer::{self, Detail};
use tern_core::keys;
use tern_core::webhooks::{Redelivered, redeliver, subscriptions};
use tern_domain::message::Direction;
use tern_domain::time::now_ms;
use uuid::Uuid;

/// Timeline entries shown at once (a message has a few dozen; a later page is a link).
pub const TIMELINE_PAGE: u32 = 200;

pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/app/messages/{id}", get(show))
        .route("/app/messages/{id}/live", get(live))
        .route("/app/messages/{id}/replay", post(replay))
}

/// The message's failure as shown.
#[derive(Debug, Clone)]
pub struct FailureView {
    pub code: String,
    pub message: String,
    pub provider: Option<String>,
    /// What to do about it (from the timeline's `failed` entry).
    pub fix: Option<String>,
}

/// What changes while the page is open: status, times, failure, timeline.
#[derive(Debug, Clone)]
pub struct LiveView {
    pub id: String,
    /// Nothing more will change: the page stops refreshing.
    pub is_final: bool,
    pub status: String,
    pub status_words: &'static str,
    pub times: Vec<(&'static str, Stamp)>,
    pub failure: Option<FailureView>,
    pub entries: Vec<EntryView>,
    /// The address of the timeline's next page.
    pub more: Option<String>,
    pub csrf_token: String,
}

/// What does not change.
#[derive(Debug, Clone)]
pub struct MessageView {
    pub id: String,
    pub direction: &'static str,
    pub outbound: bool,
    /// "To" or "From".
    pub counterpart_label: &'static str,
    pub counterpart: String,
    pub contact_id: String,
    pub number: String,
    pub kind: String,
    pub text: Option<String>,
    pub template: Option<String>,
    /// (id, name)
    pub campaign: Option<(String, String)>,
    pub wamid: Option<String>,
}

#[derive(Template)]
#[template(path = "messages/show.html")]
pub struct ShowPage {
    pub frame: Frame,
    pub message: MessageView,
    pub live: LiveView,
}

#[derive(Template)]
#[template(path = "messages/live.html")]
pub struct LiveFragment {
    pub live: LiveView,
}

#[derive(Debug, Deserialize, Default)]
pub struct TimelineQuery {
    /// The timeline's page cursor.
    pub cursor: Option<String>,
}

/// The timeline of the message: entries as the public API serialises them, oldest first,
/// and the next page's cursor.
async fn timeline_entries(
    state: &AppState,
    org_id: Uuid,
    message_id: Uuid,
    cursor: Option<&str>,
) -> Result<(Vec<Value>, Option<String>), AppError> {
    let p =
        tern_core::timeline::page(&state.core, org_id, message_id, cursor, TIMELINE_PAGE).await?;
    let entries = p
        .entries
        .iter()
        .filter_map(|e| serde_json::to_value(e).ok())
        .collect();
    Ok((entries, p.next_cursor))
}

/// How long after its last entry a final message's page still refreshes itself: the events
/// of its last status are delivered after it.
const SETTLE_MS: i64 = 60_000;

/// Whether the story has ended: the message is final, nothing was recorded in the last
/// [`SETTLE_MS`], and no webhook delivery waits for a later attempt.
fn settled(terminal: bool, entries: &[Value], now: i64) -> bool {
    let ms = |e: &Value, key: &str| {
        e.get(key)
            .and_then(Value::as_str)
            .and_then(tern_domain::time::parse_rfc3339_ms)
    };
    let latest = entries.iter().filter_map(|e| ms(e, "at")).max();
    let retry_due = entries.iter().any(|e| {
        e.get("kind").and_then(Value::as_str) == Some("webhook_attempt")
            && ms(e, "next_attempt_at").is_some_and(|t| t > now)
    });
    terminal && !retry_due && latest.is_none_or(|t| now - t > SETTLE_MS)
}

fn message_view(d: &Detail) -> MessageView {
    let m = &d.message;
    let outbound = m.direction == Direction::Outbound;
    MessageView {
        id: m.id.to_string(),
        direction: direction_words(m.direction),
        outbound,
        counterpart_label: if outbound { "To" } else { "From" },
        counterpart: d
            .contact
            .as_ref()
            .map(customer_label)
            .unwrap_or_else(|| "(contact removed)".into()),
        contact_id: m.contact_id.to_string(),
        number: d
            .number
            .as_ref()
            .map(|n| n.display_phone_number.clone())
            .unwrap_or_else(|| m.phone_number_id.clone()),
        kind: m.r#type.clone(),
        text: m.text.clone(),
        template: m
            .template_name
            .as_ref()
            .map(|n| match &m.template_language {
                Some(l) => format!("{n} ({l})"),
                None => n.clone(),
            }),
        campaign: d
            .campaign
            .as_ref()
            .map(|c| (c.id.to_string(), c.name.clone())),
        wamid: m.wamid.clone(),
    }
}

/// Whose endpoints the person may replay deliveries of: the subscriptions named in the
/// entries whose key they manage.
async fn replayable(
    state: &AppState,
    me: &OrgMember,
    entries: &[Value],
) -> Result<HashMap<String, bool>, AppError> {
    let mut out = HashMap::new();
    for e in entries {
        if e.get("kind").and_then(Value::as_str) != Some("webhook_attempt") {
            continue;
        }
        let Some(sub) = e.get("subscription_id").and_then(Value::as_str) else {
            continue;
        };
        if out.contains_key(sub) {
            continue;
        }
        let allowed = match may_replay(state, me, sub).await {
            Ok(_) => true,
            Err(AppError::NotFound | AppError::Refused(_)) => false,
            Err(e) => return Err(e),
        };
        out.insert(sub.to_string(), allowed);
    }
    Ok(out)
}

/// The Principal that replays deliveries of endpoint `sub` (its key, the person acting), or
/// why not: `NotFound` (not the organisation's, or deleted), `Refused` with the words.
async fn may_replay(
    state: &AppState,
    me: &OrgMember,
    sub: &str,
) -> Result<tern_core::Principal, AppError> {
    let id = Uuid::parse_str(sub).map_err(|_| AppError::NotFound)?;
    let (_, key) = subscriptions::get_in_org(&state.core, me.org.id, id).await?;
    let row = keys::get(&state.core.db, me.org.id, key.id)
        .await?
        .ok_or(AppError::NotFound)?;
    if !manages(me, &row) {
        return Err(AppError::Refused(format!(
            "Only owners, admins and the creator of the key \"{}\" can replay deliveries to this endpoint.",
            row.key.name
        )));
    }
    acting_for(me, &row).map_err(|e| match e {
        AppError::BadRequest(w) => AppError::Refused(w),
        other => other,
    })
}

fn failure_view(d: &Detail, entries: &[Value]) -> Option<FailureView> {
    let f = d.message.failure.as_ref()?;
    let fix = entries
        .iter()
        .rev()
        .find(|e| e.get("kind").and_then(Value::as_str) == Some("failed"))
        .and_then(|e| e.get("fix"))
        .and_then(Value::as_str)
        .map(str::to_string);
    Some(FailureView {
        code: f.code.clone(),
        message: f.message.clone(),
        provider: match (&f.provider_code, &f.provider_message) {
            (Some(c), Some(m)) => Some(format!("{c} — {m}")),
            (c, m) => c.clone().or(m.clone()),
        },
        fix,
    })
}

/// The message `id` of the organisation and its live part.
async fn load(
    state: &AppState,
    me: &OrgMember,
    id: &str,
    cursor: Option<&str>,
) -> Result<(Detail, LiveView), AppError> {
    let id = Uuid::parse_str(id).map_err(|_| AppError::NotFound)?;
    let d = explorer::message(&state.core, me.org.id, id).await?;
    let (entries, next) = timeline_entries(state, me.org.id, id, cursor).await?;
    let allowed = replayable(state, me, &entries).await?;
    let m = &d.message;
    let times = [
        (
            if m.direction == Direction::Inbound {
                "Received"
            } else {
                "Accepted"
            },
            Some(m.created_at),
        ),
        ("Sent", m.sent_at),
        ("Delivered", m.delivered_at),
        ("Read", m.read_at),
        ("Failed", m.failed_at),
        ("Edited by the customer", m.edited_at),
        ("Deleted by the customer", m.revoked_at),
    ]
    .into_iter()
    .filter_map(|(label, at)| at.map(|ms| (label, Stamp::at_seconds(ms))))
    .collect();
    let live = LiveView {
        id: m.id.to_string(),
        is_final: settled(m.status.is_terminal(), &entries, now_ms()),
        status: m.status.as_str().to_string(),
        status_words: status_words(m.status),
        times,
        failure: failure_view(&d, &entries),
        entries: timeline_view::views(&entries, |s| allowed.get(s).copied().unwrap_or(false)),
        more: next.map(|c| {
            let c: String = url::form_urlencoded::byte_serialize(c.as_bytes()).collect();
            format!("/app/messages/{}?cursor={c}", m.id)
        }),
        csrf_token: me.frame(Nav::Messages).csrf_token,
    };
    Ok((d, live))
}

/// `GET /app/messages/{id}`.
pub async fn show(
    State(state): State<AppState>,
    me: OrgMember,
    Path(id): Path<String>,
    Query(q): Query<TimelineQuery>,
) -> Result<Response, AppError> {
    let (d, live) = load(&state, &me, &id, q.cursor.as_deref()).await?;
    let page = ShowPage {
        frame: me.frame(Nav::Messages),
        message: message_view(&d),
        live,
    };
    respond(StatusCode::OK, &page)
}

/// `GET /app/messages/{id}/live`: the part of the page that changes (an HTML fragment).
pub async fn live(
    State(state): State<AppState>,
    me: OrgMember,
    Path(id): Path<String>,
) -> Result<Response, AppError> {
    let (_, live) = load(&state, &me, &id, None).await?;
    respond(StatusCode::OK, &LiveFragment { live })
}

/// `POST /app/messages/{id}/replay` (`subscription_id`, `event_id`): that delivery queued
/// again now; the outcome in words on the message page.
pub async fn replay(
    State(state): State<AppState>,
    me: OrgMember,
    Path(id): Path<String>,
    form: FormFields,
) -> Result<Response, AppError> {
    let id = Uuid::parse_str(&id).map_err(|_| AppError::NotFound)?;
    // The message must be the organisation's (the page the button was on).
    explorer::message(&state.core, me.org.id, id).await?;
    let here = format!("/app/messages/{id}");
    let event = Uuid::parse_str(form.get("event_id").unwrap_or_default()).map_err(|_| {
        AppError::BadRequest(
            "The form could not be read. Go back, reload the page and try again.".into(),
        )
    })?;
    let p = match may_replay(&state, &me, form.get("subscription_id").unwrap_or_default()).await {
        Ok(p) => p,
        Err(AppError::Refused(words)) => {
            return Ok(redirect_with_flash(&state, &here, FlashKind::Error, &words));
        }
        Err(AppError::NotFound) => {
            return Ok(redirect_with_flash(
                &state,
                &here,
                FlashKind::Error,
                "This webhook endpoint no longer exists: nothing was replayed.",
            ));
        }
        Err(e) => return Err(e),
    };
    let (kind, words) = match redeliver(&state.core, &p, p_sub(&form)?, event).await? {
        Redelivered::Queued => (
            FlashKind::Success,
            // A final message's page no longer refreshes itself: say how to see the attempt.
            "The delivery is queued again: it is sent within moments. Reload this page to see its attempt in the timeline.",
        ),
        Redelivered::Disabled => (
            FlashKind::Error,
            "The endpoint is disabled, so nothing is delivered to it: enable it on its page first, then replay.",
        ),
        Redelivered::AlreadySucceeded => (
            FlashKind::Info,
            "The receiver already took this delivery: nothing was replayed.",
        ),
        Redelivered::InFlight => (
            FlashKind::Info,
            "An attempt at this delivery is being made right now: wait for its result below.",
        ),
        Redelivered::NoDelivery => (
            FlashKind::Error,
            "This endpoint has no delivery of that event: nothing was replayed.",
        ),
    };
    Ok(redirect_with_flash(&state, &here, kind, words))
}

fn p_sub(form: &FormFields) -> Result<Uuid, AppError> {
    Uuid::parse_str(form.get("subscription_id").unwrap_or_default()).map_err(|_| AppError::NotFound)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const NOW: i64 = 1_769_860_800_000; // 2026-01-31T12:00:00Z

    #[test]
    fn a_final_message_settles_a_minute_after_its_last_entry_unless_a_retry_waits() {
        let at = |s: &str| json!({"kind": "status", "at": s});
        let recent = [at("2026-01-31T11:59:30.000Z")];
        let old = [at("2026-01-31T11:58:00.000Z")];
        assert!(!settled(false, &old, NOW), "not final");
        assert!(
            !settled(true, &recent, NOW),
            "its last event may still be delivered"
        );
        assert!(settled(true, &old, NOW));
        assert!(settled(true, &[], NOW));
        let waiting = json!({"kind": "webhook_attempt", "at": "2026-01-31T11:50:00.000Z",
            "next_attempt_at": "2026-01-31T13:00:00.000Z"});
        assert!(
            !settled(true, &[waiting], NOW),
            "a delivery retry is still to come"
        );
    }
}
