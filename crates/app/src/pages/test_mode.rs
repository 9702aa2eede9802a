//! Test mode (APP.md §5): what a test key reaches, the test space's number, the magic
//! recipients (the table the server is given by the test network) and how a customer writes
//! in. Read-only; every role sees it.

use crate::AppState;
use crate::errors::AppError;
use crate::frame::{Frame, Nav};
use crate::session::OrgMember;
use askama::Template;
use axum::Router;
use axum::extract::State;
use axum::response::Html;
use axum::routing::get;

pub fn routes() -> Router<AppState> {
    Router::new().route("/app/test-mode", get(show))
}

/// A magic recipient as the page lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MagicLine {
    /// As people write it: `+1 555 013 1026`, or a `user_id`.
    pub recipient: String,
    /// What happens, in one line.
    pub outcome: String,
}

#[derive(Template)]
#[template(path = "test_mode.html")]
pub struct TestModePage<'a> {
    pub frame: &'a Frame,
    pub public_url: &'a str,
    /// The test space's number, once the organisation has a test key.
    pub number: Option<String>,
    pub magic: &'a [MagicLine],
}

pub async fn show(State(state): State<AppState>, me: OrgMember) -> Result<Html<String>, AppError> {
    let space = state
        .core
        .db
        .get_test_space(me.org.id)
        .await
        .map_err(tern_domain::Problem::from)?;
    let number = match space {
        Some(space) => tern_core::test_space::number(&state.core.db, space.id)
            .await?
            .map(|n| n.display_phone_number),
        None => None,
    };
    let frame = me.frame(Nav::Keys);
    let page = TestModePage {
        frame: &frame,
        public_url: &state.config.public_url,
        number,
        magic: &state.config.magic_recipients,
    };
    Ok(Html(page.render()?))
}
