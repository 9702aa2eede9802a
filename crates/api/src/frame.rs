//! The outermost middleware: gives every request an id, a tracing span and metrics, and
//! renders every error response — ours and the framework's (unknown route, wrong method,
//! body too large, panics) — as the contract's flat JSON body.

use crate::error::{PendingProblem, render_body};
use crate::request_log::Rendered;
use crate::state::AppState;
use axum::body::Body;
use axum::extract::{MatchedPath, Request, State};
use axum::http::{HeaderValue, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use std::time::Instant;
use tern_domain::{ErrorCode, Problem};
use tracing::Instrument;

pub const REQUEST_ID_HEADER: &str = "x-request-id";

/// The request's id, available to handlers as an extension.
#[derive(Clone, Debug)]
pub struct RequestId(pub String);

pub async fn frame(State(state): State<AppState>, mut req: Request, next: Next) -> Response {
    // Always our own id: a client-supplied value could be arbitrary bytes and must not end
    // up in logs or bodies unchecked.
    let id = uuid::Uuid::now_v7();
    let request_id = id.to_string();
    req.extensions_mut().insert(RequestId(request_id.clone()));
    let logged = crate::request_log::begin(&state, id, &mut req);
    let method = req.method().clone();
    let path = req.uri().path().to_string();
    let route = req.extensions().get::<MatchedPath>().cloned();
    let span = tracing::info_span!(
        "request",
        request_id = %request_id,
        method = %method,
        path = %path,
        org_id = tracing::field::Empty,
    );
    let started = Instant::now();
    let res = next.run(req).instrument(span.clone()).await;
    let (mut res, rendered) = finish(&state, res, &request_id);
    if let Ok(v) = HeaderValue::from_str(&request_id) {
        res.headers_mut().insert(REQUEST_ID_HEADER, v);
    }
    let elapsed = started.elapsed();
    state.core.api_load.served(elapsed);
    if let Some(b) = logged {
        crate::request_log::end(&state, b, &res, route.as_ref(), elapsed, rendered.as_ref());
    }
    let status = res.status().as_u16();
    // Labels from fixed sets only: a client's method or path never names a new series.
    let (method_label, route) = (method_label(&method), route_label(route.as_ref(), &res));
    metrics::counter!(
        "tern_http_requests_total",
        "method" => method_label,
        "route" => route.clone(),
        "status" => status_label(status)
    )
    .increment(1);
    metrics::histogram!(
        "tern_http_request_duration_seconds",
        "method" => method_label,
        "route" => route
    )
    .record(elapsed.as_secs_f64());
    span.in_scope(|| {
        tracing::info!(
            status,
            latency_ms = elapsed.as_secs_f64() * 1000.0,
            "request finished"
        );
    });
    res
}

/// The method as a metrics label: the standard methods by name, anything else `other`.
fn method_label(m: &Method) -> &'static str {
    match *m {
        Method::GET => "GET",
        Method::HEAD => "HEAD",
        Method::POST => "POST",
        Method::PUT => "PUT",
        Method::PATCH => "PATCH",
        Method::DELETE => "DELETE",
        Method::OPTIONS => "OPTIONS",
        Method::TRACE => "TRACE",
        Method::CONNECT => "CONNECT",
        _ => "other",
    }
}

/// The route template the router matched (`/api/public/v1/media/{media_id}`), or
/// `unmatched` when none did (a fallback, or a catch-all that answered "no such endpoint").
fn route_label(route: Option<&MatchedPath>, res: &Response) -> String {
    match route {
        Some(r) if res.extensions().get::<Unmatched>().is_none() => r.as_str().to_owned(),
        _ => "unmatched".to_owned(),
    }
}

/// The status as a metrics label; the server chooses it, but only a real HTTP status
/// (100–599) is named.
fn status_label(status: u16) -> String {
    if (100..600).contains(&status) {
        status.to_string()
    } else {
        "other".to_owned()
    }
}

/// Marks the answer of a catch-all route that matched no operation (counted as the
/// `unmatched` route).
#[derive(Debug, Clone, Copy)]
pub struct Unmatched;

/// Marks an error response that is complete as it is (a `416` with its `Content-Range`),
/// not a bare framework error to be rendered as a problem.
#[derive(Debug, Clone, Copy)]
pub struct Complete;

/// Renders a pending problem, or turns a bare framework error into one; answers the body
/// rendered too (for the request log).
fn finish(state: &AppState, res: Response, request_id: &str) -> (Response, Option<Rendered>) {
    let problem = if let Some(p) = res.extensions().get::<PendingProblem>() {
        Some((*p.0).clone())
    } else if res.status().as_u16() >= 400
        && !is_json(&res)
        && res.extensions().get::<Complete>().is_none()
    {
        Some(framework_problem(&res))
    } else {
        None
    };
    let Some(problem) = problem else {
        return (res, None);
    };
    let status = StatusCode::from_u16(problem.status()).unwrap_or(StatusCode::SERVICE_UNAVAILABLE);
    let body = render_body(&problem, request_id, state.docs_url(problem.code.as_str()));
    let (mut parts, _) = res.into_parts();
    parts.status = status;
    parts.headers.remove(header::CONTENT_LENGTH);
    parts.headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    if let Some(secs) = problem.retry_after {
        parts
            .headers
            .insert(header::RETRY_AFTER, HeaderValue::from(secs));
    }
    parts.extensions.remove::<PendingProblem>();
    let bytes = bytes::Bytes::from(serde_json::to_vec(&body).unwrap_or_default());
    let rendered = Rendered {
        code: problem.code.as_str(),
        body: bytes.clone(),
    };
    (
        Response::from_parts(parts, Body::from(bytes)),
        Some(rendered),
    )
}

fn is_json(res: &Response) -> bool {
    res.headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/json"))
}

/// No route matched: the endpoint, not an item of the organisation, does not exist.
pub fn unknown_endpoint() -> Problem {
    Problem::not_found().with_message(
        "No such endpoint: the method and path name no operation of the API (see /api/public/v1/openapi.json).",
    )
}

/// Errors produced by the framework itself (no handler ran, or an extractor we do not
/// wrap refused the request).
fn framework_problem(res: &Response) -> Problem {
    match res.status().as_u16() {
        404 => unknown_endpoint(),
        // The router adds the `Allow` header after this layer has run (it wraps each route),
        // so the methods are named there only, not in `details`.
        405 => Problem::new(ErrorCode::MethodNotAllowed),
        413 => Problem::new(ErrorCode::RequestTooLarge)
            .with_detail("limit_bytes", crate::JSON_BODY_LIMIT as u64),
        401 => Problem::unauthenticated(),
        429 => Problem::new(ErrorCode::RateLimited).with_retry_after(1),
        s if s >= 500 => Problem::unavailable(),
        _ => Problem::field("request", "is not valid"),
    }
}

/// Turns a caught panic into a 503 with a logged cause; the process keeps serving.
pub fn panic_response(err: Box<dyn std::any::Any + Send + 'static>) -> Response {
    let detail = err
        .downcast_ref::<String>()
        .cloned()
        .or_else(|| err.downcast_ref::<&str>().map(|s| (*s).to_string()))
        .unwrap_or_else(|| "unknown".into());
    tracing::error!(panic = %detail, "handler panicked");
    crate::error::ApiError(Problem::unavailable()).into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_come_from_fixed_sets() {
        assert_eq!(method_label(&Method::GET), "GET");
        assert_eq!(method_label(&Method::DELETE), "DELETE");
        for made_up in ["FOO", "get", "BREW", "X-ANYTHING"] {
            let m = Method::from_bytes(made_up.as_bytes()).unwrap();
            assert_eq!(method_label(&m), "other", "{made_up}");
        }
        let res = Response::new(Body::empty());
        assert_eq!(route_label(None, &res), "unmatched");
        assert_eq!(status_label(404), "404");
    }
}
