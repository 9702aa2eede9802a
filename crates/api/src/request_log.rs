//! The request log's part of the frame (APP.md §4): for each request under
//! [`crate::PUBLIC_PREFIX`] the frame takes what the request says ([`begin`]: method, path,
//! user agent, Idempotency-Key, the client's address) and, once answered, what the answer
//! says ([`end`]: status, latency, route, the caller admission found, the error body the frame
//! rendered, the message accepted) and hands one entry to `tern_core::request_log`, which
//! never waits. Nothing else is read: not the request body, not a 2xx answer's body, never the
//! `Authorization` header.

use crate::auth::RateSlot;
use crate::frame::Unmatched;
use crate::state::AppState;
use axum::extract::{ConnectInfo, MatchedPath, Request};
use axum::http::header;
use axum::response::Response;
use std::net::SocketAddr;
use std::time::Duration;
use tern_core::request_log::{self as log, cut, cut_bytes};
use tern_domain::time::now_ms;
use tern_store::RequestLogRow;
use uuid::Uuid;

/// Left in an answer's extensions by a handler that accepted a message (POST /messages),
/// so the log links the request to it.
#[derive(Debug, Clone, Copy)]
pub struct CreatedMessage(pub Uuid);

/// The authenticated caller, left by admission in the request's [`RateSlot`].
#[derive(Debug, Clone)]
pub struct Caller {
    pub org_id: Uuid,
    pub key_id: Uuid,
    pub key_name: Option<String>,
    pub key_prefix: Option<String>,
}

impl Caller {
    pub fn of(p: &tern_core::Principal) -> Caller {
        let (key_name, key_prefix) = match &p.actor {
            tern_core::audit::Actor::Key { name, prefix, .. } => {
                (Some(name.clone()), Some(prefix.clone()))
            }
            _ => (None, None),
        };
        Caller {
            org_id: p.org_id,
            key_id: p.key_id,
            key_name,
            key_prefix,
        }
    }
}

/// The error body the frame rendered: its `code` and its bytes.
pub(crate) struct Rendered {
    pub code: &'static str,
    pub body: bytes::Bytes,
}

/// What the request said, kept until it is answered.
pub(crate) struct Begun {
    id: Uuid,
    at: i64,
    method: String,
    path: String,
    user_agent: Option<String>,
    idempotency_key: Option<String>,
    address: Option<String>,
    slot: RateSlot,
}

/// `path` below the public API's prefix (`/messages`), or `None` outside it.
fn below_prefix(path: &str) -> Option<&str> {
    match path.strip_prefix(crate::PUBLIC_PREFIX)? {
        "" => Some("/"),
        rest if rest.starts_with('/') => Some(rest),
        _ => None,
    }
}

/// Starts the entry of request `id` when the log is on and the request is the public API's;
/// leaves the slot where admission names the caller.
pub(crate) fn begin(state: &AppState, id: Uuid, req: &mut Request) -> Option<Begun> {
    if !state.core.request_log.enabled() {
        return None;
    }
    let path = cut(below_prefix(req.uri().path())?, log::MAX_PATH_CHARS);
    let headers = req.headers();
    let text = |name: &str, max: usize| {
        headers
            .get(name)
            .map(|v| cut(&String::from_utf8_lossy(v.as_bytes()), max))
    };
    let user_agent = text(header::USER_AGENT.as_str(), log::MAX_USER_AGENT_CHARS);
    let idempotency_key = text("idempotency-key", log::MAX_IDEMPOTENCY_KEY_CHARS);
    let address = req
        .extensions()
        .get::<ConnectInfo<SocketAddr>>()
        .map(|c| c.0.ip().to_string());
    let slot = RateSlot::default();
    req.extensions_mut().insert(slot.clone());
    Some(Begun {
        id,
        at: now_ms(),
        method: cut(req.method().as_str(), 16),
        path,
        user_agent,
        idempotency_key,
        address,
        slot,
    })
}

/// Hands the finished entry to the log's writer.
pub(crate) fn end(
    state: &AppState,
    b: Begun,
    res: &Response,
    route: Option<&MatchedPath>,
    elapsed: Duration,
    rendered: Option<&Rendered>,
) {
    let caller = b.slot.take_caller();
    let route = route
        .filter(|_| res.extensions().get::<Unmatched>().is_none())
        .and_then(|r| below_prefix(r.as_str()))
        // A nested router's fallback matches a wildcard of axum's own: no operation.
        .filter(|r| !r.contains("__private__"))
        .map(str::to_owned);
    let (error_code, error_body) = match rendered {
        Some(r) => (
            Some(r.code.to_owned()),
            Some(cut_bytes(&r.body, log::MAX_ERROR_BODY_BYTES)),
        ),
        None => (None, None),
    };
    let (org_id, key_id, key_name, key_prefix) = match caller {
        Some(c) => (Some(c.org_id), Some(c.key_id), c.key_name, c.key_prefix),
        None => (None, None, None, None),
    };
    state.core.request_log.record(RequestLogRow {
        id: b.id,
        org_id,
        at: b.at,
        method: b.method,
        route,
        path: b.path,
        status: i64::from(res.status().as_u16()),
        error_code,
        key_id,
        key_name,
        key_prefix,
        latency_ms: i64::try_from(elapsed.as_millis()).unwrap_or(i64::MAX),
        address: b.address,
        user_agent: b.user_agent,
        idempotency_key: b.idempotency_key,
        error_body,
        message_id: res.extensions().get::<CreatedMessage>().map(|m| m.0),
    });
}

#[cfg(test)]
mod tests {
    use super::below_prefix;

    #[test]
    fn only_the_public_api_is_below_the_prefix() {
        assert_eq!(below_prefix("/api/public/v1/messages"), Some("/messages"));
        assert_eq!(below_prefix("/api/public/v1"), Some("/"));
        assert_eq!(below_prefix("/api/public/v1x"), None);
        assert_eq!(below_prefix("/app/requests"), None);
        assert_eq!(below_prefix("/healthz"), None);
    }
}
