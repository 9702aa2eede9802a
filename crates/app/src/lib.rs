//! The app: Tern's server-rendered pages for people, mounted at `/app` (APP.md §1).
//!
//! An adapter over `core`, like the public API: pages read through the store and write
//! through core use cases. This crate holds the frame every page shares — the layout, the
//! security headers, error pages, embedded assets and the CSRF building blocks. The session
//! layer and the people's pages are added on top of it.
//!
//! Layers, outermost first (each `/app` answer passes through all of them):
//! 1. [`headers::frame`]: request id, security headers, `Cache-Control`, and the rendering of
//!    every error (ours or the framework's) as an error page in the app's style;
//! 2. [`headers::refuse_api_keys`]: `Authorization` → `401` with the API's flat error body;
//! 3. the panic catcher ([`errors::panic_page`]): a panic becomes the `500` page;
//! 4. [`session::layer`]: the session of the `tern_session` cookie (who is asking, the
//!    session's CSRF token), the client's address, the one-time flash message;
//! 5. [`csrf::guard`]: every request other than GET/HEAD is same-origin and carries the
//!    token, or gets the `403` page before any handler runs.
//!
//! The session layer belongs between 3 and 4 (added after the guard in [`router`], so it
//! runs first): it inserts [`csrf::ExpectedCsrf`] with the session's token, which the guard
//! then expects instead of the pre-session cookie's.

pub mod assets;
pub mod csrf;
pub mod errors;
pub mod forms;
pub mod frame;
pub mod headers;
pub mod pages;
pub mod session;

pub use errors::AppError;
pub use frame::Frame;

use axum::Router;
use axum::extract::DefaultBodyLimit;
use axum::routing::{any, get, post};
use std::sync::Arc;
use tern_core::Core;
use tower_http::catch_panic::CatchPanicLayer;

/// Where the server mounts [`router`].
pub const PREFIX: &str = "/app";

/// Largest form body accepted (64 KiB): the app's forms are short; anything larger is
/// refused with the `413` page before a handler reads it.
pub const FORM_BODY_LIMIT: usize = 64 * 1024;

/// The app's settings.
#[derive(Clone, Debug)]
pub struct AppConfig {
    /// `TERN_PUBLIC_URL` (or the listen address when unset): its origin is the only one
    /// whose forms are accepted, and `https` makes every cookie `Secure`.
    pub public_url: String,
    /// The test network's magic recipients, for the test mode page (the server has them
    /// from the simulator).
    pub magic_recipients: Vec<pages::test_mode::MagicLine>,
}

/// Shared, cheaply cloned state of the app's handlers.
#[derive(Clone)]
pub struct AppState(Arc<Inner>);

pub struct Inner {
    /// The use cases: every write goes through them.
    pub core: Core,
    pub config: AppConfig,
    /// The origin of `public_url` (`https://tern.example.com`), as browsers send it in
    /// `Origin`.
    pub origin: String,
    /// Whether cookies carry `Secure` (the public URL is https).
    pub secure_cookies: bool,
}

impl AppState {
    pub fn new(core: Core, config: AppConfig) -> Self {
        let public_url = config.public_url.trim_end_matches('/').to_string();
        let (origin, secure_cookies) = match url::Url::parse(&public_url) {
            Ok(u) => (u.origin().ascii_serialization(), u.scheme() == "https"),
            // The server checks TERN_PUBLIC_URL at start; this keeps the app strict anyway
            // (no browser sends this as its origin, so every form is refused).
            Err(_) => (public_url.clone(), public_url.starts_with("https:")),
        };
        AppState(Arc::new(Inner {
            core,
            config: AppConfig {
                public_url,
                magic_recipients: config.magic_recipients,
            },
            origin,
            secure_cookies,
        }))
    }

    /// The documentation page of an error code, as the public API links it.
    pub fn docs_url(&self, code: &str) -> String {
        format!("{}/docs/errors/{code}", self.config.public_url)
    }
}

impl std::ops::Deref for AppState {
    type Target = Inner;
    fn deref(&self) -> &Inner {
        &self.0
    }
}

/// The app's routes, with their full paths under [`PREFIX`], to be merged into the server's
/// router (`tern_api::router(..).merge(tern_app::router(..))`).
///
/// Full paths and a catch-all rather than `nest` + `fallback`: a nested router answers
/// neither `/app/` nor, once merged, leaves the API its own fallback; this way `/app`,
/// `/app/` and every unknown `/app/…` address get the app's layers and its 404 page.
pub fn router(state: AppState) -> Router {
    Router::new()
        .route("/app", get(pages::root))
        .route("/app/", get(pages::root))
        .route(
            "/app/sign-in",
            get(pages::sign_in::show).post(pages::sign_in::submit),
        )
        .route("/app/sign-in/code", post(pages::sign_in::submit_code))
        .route("/app/sign-out", post(pages::sign_in::sign_out))
        .route("/app/org", post(pages::sign_in::switch_org))
        .route(
            "/app/invite/{token}",
            get(pages::links::show).post(pages::links::submit),
        )
        .route(
            "/app/reset/{token}",
            get(pages::links::show).post(pages::links::submit),
        )
        .route(
            "/app/link/{token}",
            get(pages::links::show).post(pages::links::submit),
        )
        .route("/app/assets/{file}", get(assets::serve))
        .merge(pages::profile::routes())
        .merge(pages::two_factor::routes())
        .merge(pages::sessions::routes())
        .merge(pages::keys::routes())
        .merge(pages::webhooks::routes())
        .merge(pages::members::routes())
        .merge(pages::audit::routes())
        .merge(pages::org::routes())
        .merge(pages::requests::routes())
        .merge(pages::overview::routes())
        .merge(pages::conversations::routes())
        .merge(pages::contacts::routes())
        .merge(pages::templates::routes())
        .merge(pages::usage::routes())
        .merge(pages::messages::routes())
        .merge(pages::campaigns::routes())
        .merge(pages::test_mode::routes())
        .route("/app/{*rest}", any(errors::not_found))
        .layer(DefaultBodyLimit::max(FORM_BODY_LIMIT))
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            csrf::guard,
        ))
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            session::layer,
        ))
        .layer(CatchPanicLayer::custom(errors::panic_page))
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            headers::refuse_api_keys,
        ))
        .layer(axum::middleware::from_fn(headers::frame))
        .with_state(state)
}
