//! The outer layers of every `/app` answer: request id, security headers, error pages, and
//! the refusal of API keys.

use crate::AppState;
use axum::extract::{MatchedPath, Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use std::time::Instant;
use tern_domain::Problem;
use tracing::Instrument;

/// No inline script or style, nothing from another origin, never inside a frame, forms
/// only to ourselves (APP.md §1).
pub const CSP: &str =
    "default-src 'self'; frame-ancestors 'none'; form-action 'self'; base-uri 'none'";

pub const REQUEST_ID_HEADER: &str = "x-request-id";

/// The request's id, for handlers and error pages.
#[derive(Clone, Debug)]
pub struct RequestId(pub String);

/// The outermost layer: gives the request an id and a span, renders errors as pages
/// ([`crate::errors::finish`]) and puts the security headers on every answer.
pub async fn frame(mut req: Request, next: Next) -> Response {
    // Always our own id: a client's value could be anything and must not reach a page.
    let request_id = uuid::Uuid::now_v7().to_string();
    req.extensions_mut().insert(RequestId(request_id.clone()));
    // The route template, never the path: an app address may carry a secret (an
    // invitation link's token), and no secret reaches a log line.
    let route = req
        .extensions()
        .get::<MatchedPath>()
        .map_or("unmatched", |m| m.as_str())
        .to_owned();
    let span = tracing::info_span!(
        "app_request",
        request_id = %request_id,
        method = %req.method(),
        route = %route,
    );
    let started = Instant::now();
    let res = next.run(req).instrument(span.clone()).await;
    let mut res = crate::errors::finish(res, &request_id);
    secure(res.headers_mut());
    if let Ok(v) = HeaderValue::from_str(&request_id) {
        res.headers_mut().insert(REQUEST_ID_HEADER, v);
    }
    let status = res.status().as_u16();
    span.in_scope(|| {
        tracing::info!(
            status,
            latency_ms = started.elapsed().as_secs_f64() * 1000.0,
            "app request finished"
        );
    });
    res
}

/// The security headers; `Cache-Control: no-store` unless the answer chose its own (the
/// hashed assets are cached for a year).
fn secure(h: &mut HeaderMap) {
    h.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CSP),
    );
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    h.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("same-origin"),
    );
    if !h.contains_key(header::CACHE_CONTROL) {
        h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    }
}

/// The app never takes an API key (APP.md §1): a request with `Authorization` gets the
/// public API's `401` with the flat error body, whatever the path.
pub async fn refuse_api_keys(State(state): State<AppState>, req: Request, next: Next) -> Response {
    if !req.headers().contains_key(header::AUTHORIZATION) {
        return next.run(req).await;
    }
    let request_id = req
        .extensions()
        .get::<RequestId>()
        .map(|r| r.0.clone())
        .unwrap_or_default();
    let problem = Problem::unauthenticated()
        .with_message("API keys work only under /api/public/v1; the app takes no API key.")
        .with_detail("reason", "api_key_not_accepted");
    let body = problem.to_body(&request_id, &state.docs_url(problem.code.as_str()));
    (
        StatusCode::UNAUTHORIZED,
        [(header::CONTENT_TYPE, "application/json")],
        serde_json::to_vec(&body).unwrap_or_default(),
    )
        .into_response()
}
