//! `ApiError` carries a domain [`Problem`] out of a handler. The body is rendered later by
//! the frame middleware, which knows the request id and the public URL, so the body's
//! `request_id` always equals the `X-Request-Id` header.

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use std::sync::Arc;
use tern_domain::{ErrorCode, FieldError, Problem};
use tern_store::StoreError;

#[derive(Debug)]
pub struct ApiError(pub Problem);

/// Marker left in the response extensions for the frame middleware to render.
#[derive(Clone)]
pub struct PendingProblem(pub Arc<Problem>);

impl From<Problem> for ApiError {
    fn from(p: Problem) -> Self {
        ApiError(p)
    }
}

impl From<StoreError> for ApiError {
    fn from(e: StoreError) -> Self {
        ApiError(e.into())
    }
}

impl ApiError {
    pub fn code(&self) -> ErrorCode {
        self.0.code
    }

    pub fn fields(fields: Vec<FieldError>) -> Self {
        ApiError(Problem::validation(fields))
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        problem_response(self.0)
    }
}

pub fn problem_response(p: Problem) -> Response {
    let status = StatusCode::from_u16(p.status()).unwrap_or(StatusCode::SERVICE_UNAVAILABLE);
    let mut res = status.into_response();
    if let Some(secs) = p.retry_after {
        res.headers_mut()
            .insert(header::RETRY_AFTER, HeaderValue::from(secs));
    }
    res.extensions_mut().insert(PendingProblem(Arc::new(p)));
    res
}

/// The flat error body of the contract (see [`Problem::to_body`]).
pub fn render_body(p: &Problem, request_id: &str, docs_url: String) -> serde_json::Value {
    p.to_body(request_id, &docs_url)
}
