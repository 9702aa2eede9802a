//! Signing in (APP.md §2): the form of the first step (email, password) and the template of
//! the second (a two-factor or recovery code). The POST handlers come with the session
//! layer; the CSRF token of both forms is the pre-session cookie's until then.

use crate::AppState;
use crate::csrf::PreSession;
use crate::errors::AppError;
use askama::Template;
use axum::extract::State;
use axum::http::{HeaderMap, header};
use axum::response::{Html, IntoResponse, Response};

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
}

/// The second step, for a person with two-factor authentication.
#[derive(Template)]
#[template(path = "sign_in_code.html")]
pub struct SignInCodePage<'a> {
    pub csrf_token: &'a str,
    pub error: Option<&'a str>,
}

/// `GET /app/sign-in`: the form, with the pre-session cookie (kept when the browser has
/// one, so a second tab's form works too) and its token.
pub async fn show(State(state): State<AppState>, headers: HeaderMap) -> Result<Response, AppError> {
    let pre = PreSession::from_headers(&headers);
    let token = pre.token();
    let page = SignInPage {
        csrf_token: &token,
        email: "",
        error: None,
    };
    let html = page.render()?;
    Ok((
        [(header::SET_COOKIE, pre.set_cookie(state.secure_cookies))],
        Html(html),
    )
        .into_response())
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
        }
        .render()
        .unwrap();
        assert!(html.contains(WRONG));
        assert!(!html.contains("<script>x"));
        let code = SignInCodePage {
            csrf_token: "t",
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
