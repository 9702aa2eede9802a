//! The app's pages, one module per page or group of pages.

pub mod audit;
pub mod home;
pub mod members;
pub mod org;
pub mod sign_in;

use axum::response::Redirect;

/// `GET /app`: the sign-in page until the session layer knows who is asking.
pub async fn root() -> Redirect {
    Redirect::to("/app/sign-in")
}
