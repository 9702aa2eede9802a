//! The app's pages, one module per page or group of pages.

pub mod audit;
pub mod campaigns;
pub mod contacts;
pub mod conversations;
pub mod form;
pub mod home;
pub mod keys;
pub mod links;
pub mod listing;
pub mod members;
pub mod message;
pub mod messages;
pub mod org;
pub mod overview;
pub mod profile;
pub mod requests;
pub mod sessions;
pub mod sign_in;
pub mod templates;
pub mod test_mode;
pub mod timeline_view;
pub mod two_factor;
pub mod usage;
pub mod webhook_detail;
pub mod webhooks;

use crate::AppState;
use crate::csrf::PreSession;
use crate::errors::AppError;
use crate::session::{OrgMember, SIGN_IN, Signed};
use askama::Template;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{Html, IntoResponse, Redirect, Response};

/// Page `t` with `status`.
pub(crate) fn respond(status: StatusCode, t: &impl Template) -> Result<Response, AppError> {
    Ok((status, Html(t.render()?)).into_response())
}

/// A page for someone not signed in: `render` gets the CSRF token of their pre-session,
/// whose cookie goes with the page.
pub(crate) fn pre_session_page(
    state: &AppState,
    headers: &HeaderMap,
    status: StatusCode,
    render: impl FnOnce(&str) -> Result<String, askama::Error>,
) -> Result<Response, AppError> {
    let pre = PreSession::from_headers(headers);
    let html = render(&pre.token())?;
    Ok((
        status,
        [(header::SET_COOKIE, pre.set_cookie(state.secure_cookies))],
        Html(html),
    )
        .into_response())
}

/// `GET /app`: the home page of a signed-in person, else the sign-in page.
pub async fn root(State(state): State<AppState>, signed: Option<Signed>) -> Response {
    let Some(signed) = signed else {
        return Redirect::to(SIGN_IN).into_response();
    };
    let me = match OrgMember::of(signed, &state).await {
        Ok(me) => me,
        Err(res) => return res,
    };
    match home::show(&state, &me).await {
        Ok(html) => html.into_response(),
        Err(e) => e.into_response(),
    }
}
