//! The app's pages, one module per page or group of pages.

pub mod audit;
pub mod form;
pub mod home;
pub mod keys;
pub mod links;
pub mod members;
pub mod org;
pub mod profile;
pub mod sessions;
pub mod sign_in;
pub mod two_factor;
pub mod webhook_detail;
pub mod webhooks;

use crate::AppState;
use crate::session::{OrgMember, SIGN_IN, Signed};
use axum::extract::State;
use axum::response::{IntoResponse, Redirect, Response};

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
