//! Signing in (APP.md §2, §7): the first step (email, password), the second (a two-factor
//! or recovery code, carried by the sealed `pending` token of the first), signing out and
//! switching organisation. The CSRF token of the signed-out forms is the pre-session
//! cookie's. Every failure answers the same words, whatever failed; only the per-address
//! limit answers `429`. Every attempt is in the audit log.

use crate::AppState;
use crate::errors::AppError;
use crate::pages::pre_session_page;
use crate::session::{self, ClientInfo, Signed};
use askama::Template;
use axum::Form;
use axum::extract::{Query, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Redirect, Response};
use serde::Deserialize;
use tern_core::people::{self, SignIn, SignInOutcome, SignInRefused, Started};

/// The one answer to every failed sign-in, whatever failed (APP.md §2).
pub const WRONG: &str = "Email, password or code is wrong";

/// The first step.
#[derive(Template)]
#[template(path = "sign_in.html")]
pub struct SignInPage<'a> {
    pub csrf_token: &'a str,
    /// The email typed before a failure, kept in the field.
    pub email: &'a str,
    /// [`WRONG`] after a failure.
    pub error: Option<&'a str>,
    /// A note above the form ("You are signed out.").
    pub notice: Option<&'a str>,
}

/// The second step, for a person with two-factor authentication.
#[derive(Template)]
#[template(path = "sign_in_code.html")]
pub struct SignInCodePage<'a> {
    pub csrf_token: &'a str,
    /// The sealed token of the password step.
    pub pending: &'a str,
    pub error: Option<&'a str>,
}

#[derive(Deserialize)]
pub struct ShowQuery {
    #[serde(default)]
    signed_out: Option<String>,
}

/// `GET /app/sign-in`: the form, with the pre-session cookie (kept when the browser has
/// one, so a second tab's form works too) and its token. A signed-in person goes home.
pub async fn show(
    State(state): State<AppState>,
    headers: HeaderMap,
    signed: Option<Signed>,
    Query(q): Query<ShowQuery>,
) -> Result<Response, AppError> {
    if signed.is_some() {
        return Ok(Redirect::to("/app").into_response());
    }
    let notice = q.signed_out.is_some().then_some("You are signed out.");
    page(&state, &headers, "", None, notice, StatusCode::OK)
}

fn page(
    state: &AppState,
    headers: &HeaderMap,
    email: &str,
    error: Option<&str>,
    notice: Option<&str>,
    status: StatusCode,
) -> Result<Response, AppError> {
    pre_session_page(state, headers, status, |csrf_token| {
        SignInPage {
            csrf_token,
            email,
            error,
            notice,
        }
        .render()
    })
}

fn code_page(
    state: &AppState,
    headers: &HeaderMap,
    pending: &str,
    error: Option<&str>,
    status: StatusCode,
) -> Result<Response, AppError> {
    pre_session_page(state, headers, status, |csrf_token| {
        SignInCodePage {
            csrf_token,
            pending,
            error,
        }
        .render()
    })
}

/// Records an attempt in the audit log; a failure to record never changes the answer.
pub async fn audit(state: &AppState, outcome: &SignInOutcome) {
    if let Err(e) = people::record_sign_in(&state.core, outcome).await {
        tracing::warn!(error = %e, "could not record a sign-in in the audit log");
    }
}

/// The answer to a session just started: its cookie (a new token at every sign-in) and the
/// way home.
pub async fn started(state: &AppState, s: Started) -> Response {
    audit(state, &s.outcome).await;
    (
        [(header::SET_COOKIE, session::session_cookie(state, &s.token))],
        Redirect::to("/app"),
    )
        .into_response()
}

async fn refused(
    state: &AppState,
    e: SignInRefused,
    wrong_page: impl FnOnce() -> Result<Response, AppError>,
) -> Result<Response, AppError> {
    if let Some(o) = e.outcome() {
        audit(state, o).await;
    }
    match e {
        SignInRefused::Wrong(_) => wrong_page(),
        SignInRefused::Throttled(_) => Err(AppError::TooManyRequests { retry_after: 60 }),
        SignInRefused::Unavailable(p) => Err(p.into()),
    }
}

#[derive(Deserialize)]
pub struct SignInForm {
    #[serde(default)]
    email: String,
    #[serde(default)]
    password: String,
}

/// `POST /app/sign-in`.
pub async fn submit(
    State(state): State<AppState>,
    headers: HeaderMap,
    ClientInfo(client): ClientInfo,
    Form(form): Form<SignInForm>,
) -> Result<Response, AppError> {
    let email = form.email.trim();
    match people::sign_in(&state.core, email, &form.password, &client).await {
        Ok(SignIn::Started(s)) => Ok(started(&state, s).await),
        Ok(SignIn::NeedsCode(p)) => code_page(&state, &headers, &p.token, None, StatusCode::OK),
        Err(e) => {
            refused(&state, e, || {
                page(
                    &state,
                    &headers,
                    email,
                    Some(WRONG),
                    None,
                    StatusCode::UNAUTHORIZED,
                )
            })
            .await
        }
    }
}

#[derive(Deserialize)]
pub struct CodeForm {
    #[serde(default)]
    pending: String,
    #[serde(default)]
    code: String,
}

/// `POST /app/sign-in/code`: a TOTP code (accepted once) or an unused recovery code.
pub async fn submit_code(
    State(state): State<AppState>,
    headers: HeaderMap,
    ClientInfo(client): ClientInfo,
    Form(form): Form<CodeForm>,
) -> Result<Response, AppError> {
    match people::sign_in_code(&state.core, &form.pending, form.code.trim(), &client).await {
        Ok(s) => Ok(started(&state, s).await),
        Err(e) => {
            refused(&state, e, || {
                code_page(
                    &state,
                    &headers,
                    &form.pending,
                    Some(WRONG),
                    StatusCode::UNAUTHORIZED,
                )
            })
            .await
        }
    }
}

/// `POST /app/sign-out`: ends this session.
pub async fn sign_out(State(state): State<AppState>, me: Signed) -> Result<Response, AppError> {
    people::sign_out(&state.core, me.view().session.id).await?;
    Ok((
        [(header::SET_COOKIE, session::clear_session_cookie(&state))],
        Redirect::to("/app/sign-in?signed_out=1"),
    )
        .into_response())
}

#[derive(Deserialize)]
pub struct SwitchForm {
    #[serde(default)]
    org_id: String,
}

/// `POST /app/org`: shows another of the person's organisations.
pub async fn switch_org(
    State(state): State<AppState>,
    me: Signed,
    Form(form): Form<SwitchForm>,
) -> Result<Response, AppError> {
    let org_id = form
        .org_id
        .trim()
        .parse::<uuid::Uuid>()
        .map_err(|_| AppError::NotFound)?;
    people::switch_org(&state.core, me.view().session.id, me.person().id, org_id).await?;
    Ok(Redirect::to("/app").into_response())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_error_slot_and_the_email_are_escaped() {
        let html = SignInPage {
            csrf_token: "t",
            email: "\"><script>x</script>",
            error: Some(WRONG),
            notice: None,
        }
        .render()
        .unwrap();
        assert!(html.contains(WRONG));
        assert!(!html.contains("<script>x"));
        let code = SignInCodePage {
            csrf_token: "t",
            pending: "p",
            error: None,
        }
        .render()
        .unwrap();
        assert!(code.contains("name=\"code\""));
        assert!(
            code.contains("Enter the 6-digit code from your authenticator app, or a recovery code")
        );
    }
}
