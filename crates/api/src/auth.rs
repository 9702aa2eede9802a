//! API-key authentication as an extractor. A handler states the permission it needs in its
//! signature (`Authed<perm::NumbersRead>`), so no endpoint can forget the check; the checks
//! themselves (key 401 → permission 403 → plan feature 402) are `tern_core::principal`'s.

use crate::error::ApiError;
use crate::state::AppState;
use axum::extract::FromRequestParts;
use axum::extract::Request;
use axum::http::request::Parts;
use axum::http::{HeaderMap, HeaderValue, Method, header};
use axum::middleware::Next;
use axum::response::Response;
use std::marker::PhantomData;
use std::sync::{Arc, Mutex};
pub use tern_core::Principal as AuthContext;
use tern_core::{admission, principal, rate};
pub use tern_domain::auth::{Required, perm};
use tern_domain::quota::{self, RateHeaders};
use tern_store::AuthRecord;

#[derive(Debug)]
pub struct Authed<P> {
    pub ctx: AuthContext,
    _p: PhantomData<P>,
}

impl<P> std::ops::Deref for Authed<P> {
    type Target = AuthContext;
    fn deref(&self) -> &AuthContext {
        &self.ctx
    }
}

impl<P: Required> Authed<P> {
    /// The checks of an authenticated caller (`core::admission`: 403, 402, 429), with the
    /// RateLimit headers left in `slot` for the answer.
    pub async fn admit(
        state: &AppState,
        ctx: AuthContext,
        slot: Option<&RateSlot>,
        weight: u64,
        lookahead: Lookahead,
    ) -> Result<Self, ApiError> {
        tracing::Span::current().record("org_id", tracing::field::display(ctx.org_id));
        // The key is known from here on: a refusal below is logged with it.
        if let Some(slot) = slot
            && state.core.request_log.enabled()
        {
            slot.put_caller(crate::request_log::Caller::of(&ctx));
        }
        let (hash, early) = lookahead;
        let a = admission::admit(&state.core, &ctx, P::PERMISSION, weight, early).await;
        state.core.limiter.remember(&hash, &ctx);
        if let (Some(slot), Some(h)) = (slot, a.headers) {
            slot.put(h);
        }
        a.result?;
        Ok(Authed {
            ctx,
            _p: PhantomData,
        })
    }
}

impl<P: Required + Send + Sync> FromRequestParts<AppState> for Authed<P> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        let hash = key_hash(&parts.headers)?;
        let weight = request_weight(&parts.method, parts.uri.path());
        let (rec, early) = tokio::join!(
            state.core.lookups.auth(&hash),
            state.core.limiter.early(&hash, weight)
        );
        let mut ctx = context(state, &hash, rec?)?;
        // For the audit log of the changes this key makes (the TCP peer's address).
        ctx.address = parts
            .extensions
            .get::<axum::extract::ConnectInfo<std::net::SocketAddr>>()
            .map(|c| c.0.ip().to_string());
        let slot = parts.extensions.get::<RateSlot>();
        Self::admit(state, ctx, slot, weight, (hash, early)).await
    }
}

/// A request's weight against the quotas: an upload (`POST /media`) counts as 5.
fn request_weight(method: &Method, path: &str) -> u64 {
    let path = path.strip_prefix(crate::PUBLIC_PREFIX).unwrap_or(path);
    if method == Method::POST && path == "/media" {
        quota::UPLOAD_WEIGHT
    } else {
        1
    }
}

/// Where the admission leaves the RateLimit headers of the request's answer and, for the
/// request log, who the caller is.
#[derive(Clone, Default, Debug)]
pub struct RateSlot(Arc<Mutex<Slot>>);

#[derive(Default, Debug)]
struct Slot {
    headers: Option<RateHeaders>,
    caller: Option<crate::request_log::Caller>,
}

impl RateSlot {
    fn lock(&self) -> std::sync::MutexGuard<'_, Slot> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn put(&self, h: RateHeaders) {
        self.lock().headers = Some(h);
    }

    fn take(&self) -> Option<RateHeaders> {
        self.lock().headers.take()
    }

    fn put_caller(&self, c: crate::request_log::Caller) {
        self.lock().caller = Some(c);
    }

    pub(crate) fn take_caller(&self) -> Option<crate::request_log::Caller> {
        self.lock().caller.take()
    }
}

/// Middleware of the public API: the answer to an admitted or refused authenticated
/// request carries the RateLimit headers (and their `X-RateLimit-*` copies).
pub async fn rate_headers(mut req: Request, next: Next) -> Response {
    // The frame left one when the request log records this request.
    let slot = match req.extensions().get::<RateSlot>() {
        Some(s) => s.clone(),
        None => {
            let s = RateSlot::default();
            req.extensions_mut().insert(s.clone());
            s
        }
    };
    let mut res = next.run(req).await;
    if let Some(h) = slot.take() {
        let hs = res.headers_mut();
        for (names, value) in [
            (["ratelimit-limit", "x-ratelimit-limit"], h.limit),
            (
                ["ratelimit-remaining", "x-ratelimit-remaining"],
                h.remaining,
            ),
            (["ratelimit-reset", "x-ratelimit-reset"], h.reset_secs),
        ] {
            for n in names {
                hs.insert(n, HeaderValue::from(value));
            }
        }
        if let Ok(v) = HeaderValue::from_str(&h.policy) {
            hs.insert("ratelimit-policy", v);
        }
    }
    res
}

/// A key's hash with what the limiter started for it during the lookup.
pub type Lookahead = (Vec<u8>, Option<(rate::Hint, rate::Early)>);

/// The SHA-256 of the request's bearer key, or 401 when there is none or it cannot be a key.
pub fn key_hash(headers: &HeaderMap) -> Result<Vec<u8>, ApiError> {
    // A header that is not visible ASCII cannot hold a key.
    let value = headers
        .get(header::AUTHORIZATION)
        .map(|v| v.to_str().unwrap_or("\u{fffd}"));
    Ok(principal::key_hash(value)?)
}

/// The caller from the key's record (looked up by [`key_hash`]), or 401.
pub fn context(
    state: &AppState,
    hash: &[u8],
    rec: Option<AuthRecord>,
) -> Result<AuthContext, ApiError> {
    principal::from_record(&state.db, rec).map_err(|p| {
        state.core.limiter.forget(hash);
        ApiError(p)
    })
}
