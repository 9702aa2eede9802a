//! API-key authentication as an extractor. A handler states the permission it needs in its
//! signature (`Authed<perm::NumbersRead>`), so no endpoint can forget the check; the checks
//! themselves (key 401 → permission 403 → plan feature 402) are `tern_core::principal`'s.

use crate::error::ApiError;
use crate::state::AppState;
use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use axum::http::{HeaderMap, header};
use std::marker::PhantomData;
pub use tern_core::Principal as AuthContext;
use tern_core::principal;
pub use tern_domain::auth::{Required, perm};
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
    /// The permission and plan checks of an authenticated caller (403, 402).
    pub fn check(ctx: AuthContext) -> Result<Self, ApiError> {
        tracing::Span::current().record("org_id", tracing::field::display(ctx.org_id));
        ctx.authorize(P::PERMISSION)?;
        Ok(Authed {
            ctx,
            _p: PhantomData,
        })
    }
}

impl<P: Required + Send + Sync> FromRequestParts<AppState> for Authed<P> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        let ctx = authenticate(parts, state).await?;
        Self::check(ctx)
    }
}

/// Resolves the bearer key to its organisation, or answers 401.
pub async fn authenticate(parts: &Parts, state: &AppState) -> Result<AuthContext, ApiError> {
    let hash = key_hash(&parts.headers)?;
    let rec = state.core.lookups.auth(&hash).await?;
    context(state, rec)
}

/// The SHA-256 of the request's bearer key, or 401 when there is none or it cannot be a key.
pub fn key_hash(headers: &HeaderMap) -> Result<Vec<u8>, ApiError> {
    // A header that is not visible ASCII cannot hold a key.
    let value = headers
        .get(header::AUTHORIZATION)
        .map(|v| v.to_str().unwrap_or("\u{fffd}"));
    Ok(principal::key_hash(value)?)
}

/// The caller from the key's record (looked up by [`key_hash`]), or 401.
pub fn context(state: &AppState, rec: Option<AuthRecord>) -> Result<AuthContext, ApiError> {
    Ok(principal::from_record(&state.db, rec)?)
}
