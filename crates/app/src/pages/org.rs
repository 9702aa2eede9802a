//! The organisation's settings (APP.md §2): "Require two-factor for every member", which
//! only an owner changes, with a recent identity confirmation; everyone sees it. The change
//! goes through `people::set_two_factor_required`, which audits it.

use crate::AppState;
use crate::errors::AppError;
use crate::frame::{FlashKind, Frame, Nav};
use crate::pages::form::ConfirmStep;
use crate::pages::respond;
use crate::session::{OrgMember, redirect_with_flash, require_confirmation};
use askama::Template;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{Html, Response};
use axum::routing::{get, post};
use axum::{Form, Router};
use serde::Deserialize;
use tern_core::people;
use tern_domain::auth::Role;

pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/app/settings", get(show))
        .route("/app/settings/two-factor", post(two_factor))
}

#[derive(Template)]
#[template(path = "settings.html")]
pub struct SettingsPage<'a> {
    pub frame: &'a Frame,
    pub org_name: &'a str,
    pub required: bool,
    pub is_owner: bool,
    /// Members without two-factor (they are taken to enrolment once it is required).
    pub without_two_factor: usize,
    /// Whether the person looking has two-factor themselves.
    pub you_have_it: bool,
    pub confirm: ConfirmStep,
}

async fn page<'a>(
    state: &AppState,
    me: &'a OrgMember,
    frame: &'a Frame,
) -> Result<SettingsPage<'a>, AppError> {
    let members = people::members(&state.core, me.org.id).await?;
    Ok(SettingsPage {
        frame,
        org_name: &me.org.name,
        required: me.org.two_factor_required,
        is_owner: me.role() == Role::Owner,
        without_two_factor: members.iter().filter(|m| !m.two_factor).count(),
        you_have_it: me.signed.person().has_two_factor(),
        confirm: ConfirmStep::of(state, me),
    })
}

/// `GET /app/settings`.
pub async fn show(State(state): State<AppState>, me: OrgMember) -> Result<Html<String>, AppError> {
    let frame = me.frame(Nav::Settings);
    Ok(Html(page(&state, &me, &frame).await?.render()?))
}

/// No `Debug`: `confirm` is a password or a code.
#[derive(Deserialize)]
pub struct TwoFactorForm {
    /// The checkbox: present (any value) when ticked.
    required: Option<String>,
    confirm: Option<String>,
}

/// `POST /app/settings/two-factor`: owners only.
pub async fn two_factor(
    State(state): State<AppState>,
    me: OrgMember,
    Form(form): Form<TwoFactorForm>,
) -> Result<Response, AppError> {
    if me.role() != Role::Owner {
        return Err(AppError::Forbidden);
    }
    let required = form.required.is_some();
    if required == me.org.two_factor_required {
        return Ok(redirect_with_flash(
            &state,
            "/app/settings",
            FlashKind::Info,
            "Nothing changed.",
        ));
    }
    if let Err(words) = require_confirmation(&state, &me.signed, form.confirm.as_deref()).await {
        let frame = me.frame(Nav::Settings);
        let mut p = page(&state, &me, &frame).await?;
        p.confirm.error = Some(words);
        return respond(StatusCode::UNPROCESSABLE_ENTITY, &p);
    }
    people::set_two_factor_required(&state.core, &me.ctx(), me.org.id, required).await?;
    let text = if required {
        "Two-factor is now required: members without it set it up when they next open a page."
    } else {
        "Two-factor is no longer required for this organisation."
    };
    // Required and the owner has none: the session layer takes them to enrolment next.
    Ok(redirect_with_flash(
        &state,
        "/app/settings",
        FlashKind::Success,
        text,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame() -> Frame {
        Frame::sample("ada@acme.test", "owner", Nav::Settings)
    }

    fn settings<'a>(frame: &'a Frame, is_owner: bool, ask_confirm: bool) -> SettingsPage<'a> {
        SettingsPage {
            frame,
            org_name: "<i>Acme</i>",
            required: true,
            is_owner,
            without_two_factor: 2,
            you_have_it: true,
            confirm: ConfirmStep {
                ask: ask_confirm,
                label: "A code from your authenticator app",
                is_code: true,
                error: Some("That code is not right.".into()),
            },
        }
    }

    #[test]
    fn owners_get_the_switch_with_the_confirmation() {
        let f = frame();
        let html = settings(&f, true, true).render().unwrap();
        assert!(html.contains("name=\"required\""));
        assert!(html.contains(" checked"));
        assert!(html.contains("autocomplete=\"one-time-code\""));
        assert!(html.contains("That code is not right."));
        assert!(!html.contains("<i>Acme"));
        let html = settings(&f, true, false).render().unwrap();
        assert!(!html.contains("name=\"confirm\""));
    }

    #[test]
    fn others_see_the_setting_only() {
        let f = frame();
        let html = settings(&f, false, true).render().unwrap();
        assert!(!html.contains("name=\"required\""));
        assert!(html.contains("Only an owner can change"));
    }
}
