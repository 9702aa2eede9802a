//! The app's pages, one module per page or group of pages.

pub mod form;
pub mod home;
pub mod keys;
pub mod sign_in;
pub mod webhook_detail;
pub mod webhooks;

use axum::response::Redirect;

/// `GET /app`: the sign-in page until the session layer knows who is asking.
pub async fn root() -> Redirect {
    Redirect::to("/app/sign-in")
}
