//! Tern's HTTP layer: routing, extractors, error rendering and the OpenAPI document.
//!
//! Handlers stay thin: they parse and check input with `tern-domain`, call the store, and
//! shape responses. Every error leaves through [`error::ApiError`], which renders the
//! catalog's flat error body.

pub mod auth;
pub mod error;
pub mod extract;
pub mod frame;
pub mod openapi;
pub mod pagination;
pub mod request_log;
pub mod routes;
pub mod state;

pub use error::ApiError;
pub use state::{AppState, NetworkWebhook, StateConfig};

/// Path prefix of the public API.
pub const PUBLIC_PREFIX: &str = "/api/public/v1";

/// Largest JSON body accepted (1 MiB). Uploads have their own limit.
pub const JSON_BODY_LIMIT: usize = 1024 * 1024;

pub use routes::router;
