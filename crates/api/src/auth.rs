//! API-key authentication as an extractor. A handler states the permission it needs in its
//! signature (`Authed<NumbersRead>`), so no endpoint can forget the check, and the checks
//! run in the contract's order: key (401) → permission (403) → plan feature (402).

use crate::error::ApiError;
use crate::state::AppState;
use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use axum::http::{HeaderMap, header};
use std::marker::PhantomData;
use tern_domain::auth::{self, Permission, Role};
use tern_domain::plan::{Effective, Feature, Overrides};
use tern_domain::{ErrorCode, Problem};
use tern_store::{AuthRecord, Org};
use uuid::Uuid;

/// Who is calling: resolved from the key on every request, never from the request body.
#[derive(Debug, Clone)]
pub struct AuthContext {
    pub org: Org,
    pub org_id: Uuid,
    pub key_id: Uuid,
    pub role: Role,
    pub permissions: Vec<Permission>,
    pub overrides: Overrides,
}

impl AuthContext {
    pub fn effective(&self) -> Effective<'_> {
        Effective::new(&self.org.plan, &self.overrides)
    }

    pub fn has(&self, p: Permission) -> bool {
        self.permissions.contains(&p)
    }
}

/// A permission named at type level.
pub trait Required {
    const PERMISSION: Permission;
}

macro_rules! permission_markers {
    ($($name:ident),+ $(,)?) => {
        $(
            #[derive(Debug)]
            pub struct $name;
            impl Required for $name {
                const PERMISSION: Permission = Permission::$name;
            }
        )+
    };
}

pub mod perm {
    use super::{Permission, Required};
    permission_markers!(
        MessagesSend,
        MessagesRead,
        ContactsCreate,
        ContactsRead,
        ContactsUpdate,
        TemplatesRead,
        TemplatesCreate,
        TemplatesSubmit,
        CampaignsRead,
        CampaignsCreate,
        CampaignsUpdate,
        CampaignsSend,
        DeveloperWebhooksManage,
        NumbersRead,
    );
}

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
        if !ctx.has(P::PERMISSION) {
            return Err(Problem::permission_denied(P::PERMISSION.as_str()).into());
        }
        check_public_api(&ctx)?;
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

fn check_public_api(ctx: &AuthContext) -> Result<(), ApiError> {
    if ctx.effective().has_feature(Feature::PublicApi) {
        return Ok(());
    }
    let mut p = Problem::new(ErrorCode::PlanFeatureUnavailable)
        .with_message("The organisation's plan does not include the public API.")
        .with_detail("feature", Feature::PublicApi.as_str())
        .with_detail("plan", ctx.org.plan.clone());
    p = p.with_detail(
        "upgrade_plan",
        tern_domain::plan::upgrade_plan_for(&ctx.org.plan, Feature::PublicApi).map(str::to_string),
    );
    Err(p.into())
}

/// Resolves the bearer key to its organisation, or answers 401.
pub async fn authenticate(parts: &Parts, state: &AppState) -> Result<AuthContext, ApiError> {
    let hash = key_hash(&parts.headers)?;
    let rec = state.lookups.auth(&hash).await?;
    context(state, rec)
}

fn unauthenticated(reason: &str) -> ApiError {
    ApiError(Problem::unauthenticated().with_detail("reason", reason))
}

/// The SHA-256 of the request's bearer key, or 401 when there is none or it cannot be a key.
pub fn key_hash(headers: &HeaderMap) -> Result<Vec<u8>, ApiError> {
    let Some(value) = headers.get(header::AUTHORIZATION) else {
        return Err(unauthenticated("missing_authorization"));
    };
    let token = value
        .to_str()
        .ok()
        .and_then(auth::parse_bearer)
        .ok_or_else(|| unauthenticated("malformed_authorization"))?;
    if !auth::looks_like_key(token) {
        return Err(unauthenticated("invalid_key"));
    }
    Ok(auth::hash_key(token).to_vec())
}

/// The caller from the key's record (looked up by [`key_hash`]), or 401.
pub fn context(state: &AppState, rec: Option<AuthRecord>) -> Result<AuthContext, ApiError> {
    let Some(rec) = rec else {
        return Err(unauthenticated("invalid_key"));
    };
    if rec.key.revoked_at.is_some() {
        return Err(unauthenticated("revoked_key"));
    }
    // A member whose role no longer parses has no rights; treat like a revoked key.
    let Some(role) = Role::parse(&rec.member_role) else {
        return Err(unauthenticated("revoked_key"));
    };
    maybe_touch(state, &rec.key);
    let permissions = auth::effective_permissions(role, &rec.key.permissions);
    let overrides = Overrides::from_json(&rec.org.overrides);
    Ok(AuthContext {
        org_id: rec.org.id,
        key_id: rec.key.id,
        role,
        permissions,
        overrides,
        org: rec.org,
    })
}

/// Records `last_used_at` at most once a minute per key, off the request path, so
/// authentication stays a single read.
fn maybe_touch(state: &AppState, key: &tern_store::ApiKey) {
    let now = tern_domain::time::now_ms();
    if key.last_used_at.is_some_and(|t| now - t < 60_000) {
        return;
    }
    let db = state.db.clone();
    let id = key.id;
    tokio::spawn(async move {
        if let Err(e) = db.touch_api_key_last_used(id, now).await {
            tracing::warn!(error = %e, "could not record key use");
        }
    });
}
