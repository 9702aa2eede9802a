//! The person's profile (APP.md §2): the display name, the email (read-only) and a password
//! change, which ends the person's other sessions.
//!
//! | route | what |
//! |---|---|
//! | `GET /app/profile` | the page |
//! | `POST /app/profile` | `name` → saved, or the page again with the words next to the field |
//! | `POST /app/profile/password` | `current_password`, `password` → changed (other sessions end) |

use crate::AppState;
use crate::errors::AppError;
use crate::forms::words_for;
use crate::frame::{FlashKind, Frame, Nav};
use crate::session::{Signed, redirect_with_flash};
use askama::Template;
use axum::Router;
use axum::extract::{Form, State};
use axum::http::StatusCode;
use axum::response::{Html, IntoResponse, Response};
use axum::routing::{get, post};
use serde::Deserialize;
use tern_core::people;

/// The profile's routes.
pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/app/profile", get(show).post(save_name))
        .route("/app/profile/password", post(change_password))
}

#[derive(Template)]
#[template(path = "profile.html")]
pub struct ProfilePage<'a> {
    pub frame: &'a Frame,
    /// The name field's value (what was typed, after a refusal).
    pub name: &'a str,
    pub email: &'a str,
    pub name_error: Option<String>,
    pub current_error: Option<String>,
    pub password_error: Option<String>,
}

impl<'a> ProfilePage<'a> {
    fn new(frame: &'a Frame, me: &'a Signed) -> Self {
        let p = me.person();
        ProfilePage {
            frame,
            name: &p.name,
            email: &p.email,
            name_error: None,
            current_error: None,
            password_error: None,
        }
    }
}

/// `GET /app/profile`.
pub async fn show(me: Signed) -> Result<Html<String>, AppError> {
    let frame = me.frame(Nav::None);
    crate::errors::render(&ProfilePage::new(&frame, &me))
}

#[derive(Deserialize)]
pub struct NameForm {
    #[serde(default)]
    name: String,
}

/// `POST /app/profile`: saves the name.
pub async fn save_name(
    State(state): State<AppState>,
    me: Signed,
    Form(form): Form<NameForm>,
) -> Result<Response, AppError> {
    match people::set_name(&state.core, me.person().id, &form.name).await {
        Ok(()) => Ok(redirect_with_flash(
            &state,
            "/app/profile",
            FlashKind::Success,
            "Your name is saved.",
        )),
        Err(p) => {
            let words = words_for(&p, "name").ok_or_else(|| AppError::from(p))?;
            let frame = me.frame(Nav::None);
            let mut page = ProfilePage::new(&frame, &me);
            page.name = &form.name;
            page.name_error = Some(words);
            refused(&page)
        }
    }
}

/// The password form. Debug by hand: both fields are secrets.
#[derive(Deserialize)]
pub struct PasswordForm {
    #[serde(default)]
    current_password: String,
    #[serde(default)]
    password: String,
}

impl std::fmt::Debug for PasswordForm {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("PasswordForm(<redacted>)")
    }
}

/// `POST /app/profile/password`: changes the password; the person's other sessions end and
/// this one stays.
pub async fn change_password(
    State(state): State<AppState>,
    me: Signed,
    Form(form): Form<PasswordForm>,
) -> Result<Response, AppError> {
    let session_id = me.0.view.session.id;
    let result = people::change_password(
        &state.core,
        &me.ctx(),
        me.person().id,
        session_id,
        &form.current_password,
        &form.password,
    )
    .await;
    match result {
        Ok(ended) => Ok(redirect_with_flash(
            &state,
            "/app/profile",
            FlashKind::Success,
            &changed_words(ended),
        )),
        Err(p) => {
            let current_error = words_for(&p, "current_password");
            let password_error = words_for(&p, "password");
            if current_error.is_none() && password_error.is_none() {
                return Err(p.into());
            }
            let frame = me.frame(Nav::None);
            let mut page = ProfilePage::new(&frame, &me);
            page.current_error = current_error;
            page.password_error = password_error;
            refused(&page)
        }
    }
}

/// What the page says after a password change.
fn changed_words(ended: u64) -> String {
    match ended {
        0 => "Your password is changed. You had no other session open.".to_string(),
        1 => "Your password is changed. Your other session was signed out.".to_string(),
        n => format!("Your password is changed. Your {n} other sessions were signed out."),
    }
}

/// A form shown again with the reasons it was refused (`422`, so scripts and tests can tell
/// it from a success).
pub(crate) fn refused(page: &impl Template) -> Result<Response, AppError> {
    Ok((StatusCode::UNPROCESSABLE_ENTITY, Html(page.render()?)).into_response())
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::frame::{OrgChoice, Person};

    pub const EVIL: &str = "<script>alert(1)</script>";

    /// A frame whose person, organisation and flash carry markup.
    pub fn frame() -> Frame {
        Frame {
            person: Person {
                name: EVIL.into(),
                email: "ada@example.com".into(),
            },
            orgs: vec![OrgChoice {
                id: "o1".into(),
                name: "Acme <b>".into(),
                role: "owner".into(),
            }],
            current_org: "o1".into(),
            csrf_token: "tok-123".into(),
            nav: Nav::None,
            flash: vec![],
        }
    }

    /// Nothing of `EVIL` or the organisation's markup reaches the page unescaped.
    pub fn assert_escaped(html: &str) {
        assert!(!html.contains("<script>"), "{html}");
        assert!(!html.contains("Acme <b>"), "{html}");
        assert!(html.contains("&#60;script&#62;") || html.contains("&lt;script&gt;"));
    }

    #[test]
    fn the_profile_escapes_and_labels_every_field() {
        let frame = frame();
        let page = ProfilePage {
            frame: &frame,
            name: EVIL,
            email: "ada@example.com",
            name_error: Some("<i>no</i>".into()),
            current_error: None,
            password_error: Some("The password is too short: use at least 12 characters.".into()),
        };
        let html = page.render().unwrap();
        assert_escaped(&html);
        assert!(!html.contains("<i>no</i>"));
        for id in ["name", "email", "current_password", "password"] {
            assert!(html.contains(&format!("<label for=\"{id}\">")), "{id}");
        }
        assert!(html.contains("use at least 12 characters"));
        assert!(html.contains("aria-invalid=\"true\""));
        // The layout's two forms and the page's two.
        assert_eq!(html.matches("value=\"tok-123\"").count(), 4);
    }

    #[test]
    fn words_after_a_change_and_no_secret_in_debug() {
        assert!(changed_words(2).contains("2 other sessions"));
        assert!(
            !format!(
                "{:?}",
                PasswordForm {
                    current_password: "a".into(),
                    password: "hunter2".into()
                }
            )
            .contains("hunter2")
        );
    }
}
