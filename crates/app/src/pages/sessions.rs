//! The person's sessions (APP.md §2, §7): each open session's start, last activity, address
//! and user agent, the current one marked; signing out of another one, or everywhere.
//!
//! | route | what |
//! |---|---|
//! | `GET /app/sessions` | the list |
//! | `POST /app/sessions/{id}/end` | ends that session (this one: signed out) |
//! | `POST /app/sessions/end-all` | ends every session, this one included → the sign-in page |

use crate::AppState;
use crate::errors::AppError;
use crate::frame::{FlashKind, Frame, Nav};
use crate::session::{SIGN_IN, Signed, clear_session_cookie, redirect_with_flash};
use askama::Template;
use axum::Router;
use axum::extract::{Path, State};
use axum::http::header;
use axum::response::{Html, IntoResponse, Redirect, Response};
use axum::routing::{get, post};
use tern_core::people;
use tern_domain::time::{format_ms, now_ms};
use tern_store::AppSession;
use uuid::Uuid;

/// The sessions routes.
pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/app/sessions", get(show))
        .route("/app/sessions/end-all", post(end_all))
        .route("/app/sessions/{id}/end", post(end_one))
}

/// One session as the page shows it.
pub struct Row {
    pub id: String,
    pub current: bool,
    /// "Firefox on Linux", or "Unknown browser".
    pub device: String,
    pub started_iso: String,
    pub started_utc: String,
    pub seen_iso: String,
    pub seen_utc: String,
    pub address: String,
    pub user_agent: String,
}

#[derive(Template)]
#[template(path = "sessions.html")]
pub struct SessionsPage<'a> {
    pub frame: &'a Frame,
    pub sessions: Vec<Row>,
}

/// `2026-11-21 09:11 UTC`: what shows without the script (which puts the browser's time).
fn utc(ms: i64) -> String {
    let iso = format_ms(ms);
    format!("{} {} UTC", &iso[..10], &iso[11..16])
}

fn row(s: &AppSession, current: Uuid) -> Row {
    let ua = s.user_agent.as_deref().unwrap_or("");
    Row {
        id: s.id.to_string(),
        current: s.id == current,
        device: device(ua),
        started_iso: format_ms(s.created_at),
        started_utc: utc(s.created_at),
        seen_iso: format_ms(s.last_seen_at),
        seen_utc: utc(s.last_seen_at),
        address: s.address.clone().unwrap_or_else(|| "Unknown".into()),
        user_agent: if ua.is_empty() {
            "Not sent".into()
        } else {
            ua.to_string()
        },
    }
}

/// Whether `s` still signs in at `now`: not ended, neither idle nor too old (a session past
/// its time is only marked ended when next used).
fn open(s: &AppSession, settings: &people::PeopleSettings, now: i64) -> bool {
    s.ended_at.is_none()
        && now < s.last_seen_at + settings.session_idle_ms
        && now < s.created_at + settings.session_max_ms
}

/// `GET /app/sessions`: the open sessions, the current one first.
pub async fn show(State(state): State<AppState>, me: Signed) -> Result<Html<String>, AppError> {
    let current = me.0.view.session.id;
    let now = now_ms();
    let mut list: Vec<AppSession> = people::sessions(&state.core, me.person().id)
        .await?
        .into_iter()
        .filter(|s| s.id == current || open(s, &state.core.people, now))
        .collect();
    // The current one first, then the most recently used.
    list.sort_by_key(|s| (s.id != current, std::cmp::Reverse(s.last_seen_at)));
    let frame = me.frame(Nav::None);
    let page = SessionsPage {
        frame: &frame,
        sessions: list.iter().map(|s| row(s, current)).collect(),
    };
    crate::errors::render(&page)
}

fn to_sign_in(state: &AppState) -> Response {
    let mut res = Redirect::to(SIGN_IN).into_response();
    res.headers_mut()
        .append(header::SET_COOKIE, clear_session_cookie(state));
    res
}

/// `POST /app/sessions/{id}/end`: ends one of the person's sessions (another person's, or an
/// unknown id: the `404` page).
pub async fn end_one(
    State(state): State<AppState>,
    me: Signed,
    Path(id): Path<String>,
) -> Result<Response, AppError> {
    let id = Uuid::parse_str(&id).map_err(|_| AppError::NotFound)?;
    people::end_session(&state.core, me.person().id, id).await?;
    if id == me.0.view.session.id {
        return Ok(to_sign_in(&state));
    }
    Ok(redirect_with_flash(
        &state,
        "/app/sessions",
        FlashKind::Success,
        "That session is signed out.",
    ))
}

/// `POST /app/sessions/end-all`: every session of the person ends, this one included.
pub async fn end_all(State(state): State<AppState>, me: Signed) -> Result<Response, AppError> {
    people::sign_out_everywhere(&state.core, me.person().id).await?;
    Ok(to_sign_in(&state))
}

/// A short name for a user agent ("Firefox on Windows"): enough to tell one's devices apart.
/// The whole string is shown too.
pub fn device(ua: &str) -> String {
    let browser = [
        ("Edg/", "Edge"),
        ("OPR/", "Opera"),
        ("Firefox/", "Firefox"),
        ("Chromium/", "Chromium"),
        ("Chrome/", "Chrome"),
        ("Safari/", "Safari"),
        ("curl/", "curl"),
    ]
    .iter()
    .find(|(needle, _)| ua.contains(needle))
    .map(|(_, name)| *name);
    let os = [
        ("Android", "Android"),
        ("iPhone", "iPhone"),
        ("iPad", "iPad"),
        ("Windows", "Windows"),
        ("Mac OS X", "macOS"),
        ("CrOS", "ChromeOS"),
        ("Linux", "Linux"),
    ]
    .iter()
    .find(|(needle, _)| ua.contains(needle))
    .map(|(_, name)| *name);
    match (browser, os) {
        (Some(b), Some(o)) => format!("{b} on {o}"),
        (Some(b), None) => b.to_string(),
        (None, Some(o)) => format!("A browser on {o}"),
        (None, None) => "Unknown browser".to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pages::profile::tests::{EVIL, assert_escaped, frame};

    #[test]
    fn the_list_marks_the_current_session_and_escapes() {
        let frame = frame();
        let mk = |current: bool| Row {
            id: if current { "s-1" } else { "s-2" }.into(),
            current,
            device: device(EVIL),
            started_iso: format_ms(0),
            started_utc: utc(0),
            seen_iso: format_ms(60_000),
            seen_utc: utc(60_000),
            address: "192.0.2.1".into(),
            user_agent: EVIL.into(),
        };
        let page = SessionsPage {
            frame: &frame,
            sessions: vec![mk(true), mk(false)],
        };
        let html = page.render().unwrap();
        assert_escaped(&html);
        assert_eq!(html.matches("This session").count(), 1);
        assert!(!html.contains("/app/sessions/s-1/end"));
        assert!(html.contains("action=\"/app/sessions/s-2/end\""));
        assert!(html.contains("action=\"/app/sessions/end-all\""));
        assert!(
            html.contains(
                "<time datetime=\"1970-01-01T00:01:00.000Z\">1970-01-01 00:01 UTC</time>"
            )
        );
    }

    #[test]
    fn devices_and_times_read_plainly() {
        let firefox = "Mozilla/5.0 (X11; Linux x86_64; rv:128.0) Gecko/20100101 Firefox/128.0";
        assert_eq!(device(firefox), "Firefox on Linux");
        let chrome = "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36";
        assert_eq!(device(chrome), "Chrome on Windows");
        let safari = "Mozilla/5.0 (iPhone; CPU iPhone OS 17_0 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.0 Mobile/15E148 Safari/604.1";
        assert_eq!(device(safari), "Safari on iPhone");
        assert_eq!(device(""), "Unknown browser");
        assert_eq!(utc(0), "1970-01-01 00:00 UTC");
    }
}
