//! One-time links (APP.md §2, §7): an invitation or a reset (`/app/invite/{token}`,
//! `/app/reset/{token}`) where the person sets name and password, and a sign-in link
//! (`/app/link/{token}`, printed by `tern demo`). Showing the page never uses the link (a
//! link preview or a prefetch cannot spend it): the form's POST does. An invitation is used
//! up only when its password is set; a refused password leaves it valid.

use crate::AppState;
use crate::errors::AppError;
use crate::pages::{pre_session_page, respond};
use crate::session::ClientInfo;
use askama::Template;
use axum::Form;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode, Uri};
use axum::response::Response;
use serde::Deserialize;
use tern_core::people;
use tern_domain::people::LinkPurpose;

#[derive(Template)]
#[template(path = "link.html")]
pub struct LinkPage<'a> {
    pub csrf_token: &'a str,
    /// The form's own address (the link).
    pub action: &'a str,
    pub email: &'a str,
    pub name: &'a str,
    /// Whether the form sets a password (invitation, reset) or only signs in.
    pub sets_password: bool,
    pub is_reset: bool,
    pub org_name: Option<&'a str>,
    pub name_error: Option<&'a str>,
    pub password_error: Option<&'a str>,
    pub error: Option<&'a str>,
}

#[derive(Template)]
#[template(path = "link_gone.html")]
pub struct LinkGone;

fn gone() -> Result<Response, AppError> {
    respond(StatusCode::NOT_FOUND, &LinkGone)
}

/// A token has the shape Tern gives links (32 bytes, base64url): anything else is not looked up.
fn plausible(token: &str) -> bool {
    token.len() == 43
        && token
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

struct Errors<'a> {
    name: Option<&'a str>,
    password: Option<&'a str>,
    other: Option<&'a str>,
}

async fn render(
    state: &AppState,
    headers: &HeaderMap,
    token: &str,
    path: &str,
    name: Option<&str>,
    errors: Errors<'_>,
    status: StatusCode,
) -> Result<Response, AppError> {
    if !plausible(token) {
        return gone();
    }
    let Some(info) = people::link_info(&state.core, token).await? else {
        return gone();
    };
    pre_session_page(state, headers, status, |csrf_token| {
        LinkPage {
            csrf_token,
            action: path,
            email: &info.person.email,
            name: name.unwrap_or(&info.person.name),
            sets_password: !matches!(info.purpose, LinkPurpose::SignIn),
            is_reset: matches!(info.purpose, LinkPurpose::Reset),
            org_name: info.org_name.as_deref(),
            name_error: errors.name,
            password_error: errors.password,
            error: errors.other,
        }
        .render()
    })
}

/// The link's own address (the form posts back to it).
fn path_of(uri: &Uri) -> String {
    uri.path().to_string()
}

/// `GET /app/{invite|reset|link}/{token}`.
pub async fn show(
    State(state): State<AppState>,
    headers: HeaderMap,
    uri: Uri,
    Path(token): Path<String>,
) -> Result<Response, AppError> {
    let no_errors = Errors {
        name: None,
        password: None,
        other: None,
    };
    render(
        &state,
        &headers,
        &token,
        &path_of(&uri),
        None,
        no_errors,
        StatusCode::OK,
    )
    .await
}

#[derive(Deserialize)]
pub struct LinkForm {
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    password: Option<String>,
}

/// `POST /app/{invite|reset|link}/{token}`: sets name and password (when the link is for
/// that) and signs the person in.
pub async fn submit(
    State(state): State<AppState>,
    headers: HeaderMap,
    ClientInfo(client): ClientInfo,
    uri: Uri,
    Path(token): Path<String>,
    Form(form): Form<LinkForm>,
) -> Result<Response, AppError> {
    if !plausible(&token) {
        return gone();
    }
    let result = people::use_link(
        &state.core,
        &token,
        form.name.as_deref(),
        form.password.as_deref(),
        &client,
    )
    .await;
    match result {
        Ok(started) => Ok(super::sign_in::started(&state, started).await),
        Err(p) if p.code == tern_domain::ErrorCode::NotFound => gone(),
        Err(p) if p.code == tern_domain::ErrorCode::ValidationFailed => {
            let name_error = crate::forms::words_for(&p, "name");
            let password_error = crate::forms::words_for(&p, "password");
            let other =
                (name_error.is_none() && password_error.is_none()).then(|| crate::forms::words(&p));
            render(
                &state,
                &headers,
                &token,
                &path_of(&uri),
                form.name.as_deref(),
                Errors {
                    name: name_error.as_deref(),
                    password: password_error.as_deref(),
                    other: other.as_deref(),
                },
                StatusCode::UNPROCESSABLE_ENTITY,
            )
            .await
        }
        Err(p) => Err(p.into()),
    }
}
