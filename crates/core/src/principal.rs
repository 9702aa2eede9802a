//! The caller of a use case: the organisation an API key belongs to, its effective plan and
//! the key's effective permissions. Resolved from the key on every request, never from a
//! request body. The checks run in the contract's order: key (401) → permission (403) →
//! plan feature (402).

use tern_domain::auth::{self, Mode, Permission, Role};
use tern_domain::error::ConflictReason;
use tern_domain::plan::{self, Effective, Feature, Overrides};
use tern_domain::time::now_ms;
use tern_domain::{ErrorCode, Problem};
use tern_store::{AuthRecord, Db, KeyRow, Org};

use crate::audit::{Actor, Context};
use uuid::Uuid;

/// Who is calling.
#[derive(Debug, Clone)]
pub struct Principal {
    /// The organisation whose data the caller reaches: for a test key its test space (with
    /// the live organisation's plan, which is shared, and `live_org_id` set).
    pub org: Org,
    /// `org.id`.
    pub org_id: Uuid,
    /// Live or test (the key's).
    pub mode: Mode,
    pub key_id: Uuid,
    pub role: Role,
    pub permissions: Vec<Permission>,
    pub overrides: Overrides,
    /// Who acts, for the audit log: the key itself, or a person acting for a key they
    /// manage in the app ([`Principal::for_key_acting_as`]).
    pub actor: Actor,
    /// The client's address when the adapter knows it (the TCP peer of the request).
    pub address: Option<String>,
}

impl Principal {
    /// The audit context of this caller's changes.
    pub fn context(&self) -> Context {
        Context {
            actor: self.actor.clone(),
            address: self.address.clone(),
        }
    }

    /// The caller of key `row` as a person sees it in the app: the key's organisation,
    /// its permissions within its creator's role, and `ctx` (the person) as the actor. The
    /// subscriptions such a caller creates belong to the key; the audit names the person.
    /// `409` for a revoked key; `404` for a key of another organisation.
    pub fn for_key_acting_as(org: Org, row: &KeyRow, ctx: Context) -> Result<Principal, Problem> {
        if row.key.org_id != org.id {
            return Err(Problem::not_found());
        }
        if row.key.revoked_at.is_some() {
            return Err(Problem::conflict(ConflictReason::Revoked)
                .with_message(format!("API key {} is revoked", row.key.id)));
        }
        // A creator whose role no longer parses has no rights (as at authentication).
        let Some(role) = row.creator_role else {
            return Err(Problem::conflict(ConflictReason::Revoked)
                .with_message(format!("API key {} has no rights", row.key.id)));
        };
        Ok(Principal {
            org_id: org.id,
            mode: Mode::Live,
            key_id: row.key.id,
            role,
            permissions: auth::effective_permissions(role, &row.key.permissions),
            overrides: Overrides::from_json(&org.overrides),
            org,
            actor: ctx.actor,
            address: ctx.address,
        })
    }

    /// A person acting in the app for their organisation itself, not for one of its keys
    /// (pausing a campaign): every permission their role holds, the person as the actor. No
    /// key: `key_id` is nil, so nothing a key owns (subscriptions) is reachable through it.
    pub fn for_member(org: Org, role: Role, ctx: Context) -> Principal {
        Principal {
            org_id: org.id,
            mode: Mode::Live,
            key_id: Uuid::nil(),
            role,
            permissions: Permission::ALL
                .iter()
                .copied()
                .filter(|p| role.allows(*p))
                .collect(),
            overrides: Overrides::from_json(&org.overrides),
            org,
            actor: ctx.actor,
            address: ctx.address,
        }
    }

    /// The organisation whose rate-limit windows the caller's requests count in: the live
    /// one, whatever the key's mode (test requests are limited like live ones).
    pub fn quota_org_id(&self) -> Uuid {
        self.org.live_org_id.unwrap_or(self.org_id)
    }

    pub fn effective(&self) -> Effective<'_> {
        Effective::new(&self.org.plan, &self.overrides)
    }

    /// Whether the caller's sends are free: test sends debit no wallet and count against no
    /// `messages_sent` allowance (APP.md §5).
    pub fn is_free(&self) -> bool {
        self.mode == Mode::Test
    }

    pub fn has(&self, p: Permission) -> bool {
        self.permissions.contains(&p)
    }

    /// The permission check (403) and the plan's public-API feature (402) of a request.
    pub fn authorize(&self, p: Permission) -> Result<(), Problem> {
        if !self.has(p) {
            return Err(Problem::permission_denied(p.as_str()));
        }
        self.require_feature(Feature::PublicApi)
    }

    /// `402 plan_feature_unavailable` unless the plan includes `f`.
    pub fn require_feature(&self, f: Feature) -> Result<(), Problem> {
        if self.effective().has_feature(f) {
            return Ok(());
        }
        Err(Problem::new(ErrorCode::PlanFeatureUnavailable)
            .with_message(format!(
                "The organisation's plan does not include the {} feature.",
                f.as_str()
            ))
            .with_detail("feature", f.as_str())
            .with_detail("plan", self.org.plan.clone())
            .with_detail(
                "upgrade_plan",
                plan::upgrade_plan_for(&self.org.plan, f).map(str::to_string),
            ))
    }
}

fn unauthenticated(reason: &str) -> Problem {
    Problem::unauthenticated().with_detail("reason", reason)
}

/// The SHA-256 of a bearer key from an `Authorization` header value, or 401 when there is
/// none or it cannot be a key.
pub fn key_hash(authorization: Option<&str>) -> Result<Vec<u8>, Problem> {
    let Some(value) = authorization else {
        return Err(unauthenticated("missing_authorization"));
    };
    let token =
        auth::parse_bearer(value).ok_or_else(|| unauthenticated("malformed_authorization"))?;
    if !auth::looks_like_key(token) {
        return Err(unauthenticated("invalid_key"));
    }
    Ok(auth::hash_key(token).to_vec())
}

/// The caller from the key's record (looked up by its hash), or 401. Records the key's use
/// (at most once a minute, off the request path).
pub fn from_record(db: &Db, rec: Option<AuthRecord>) -> Result<Principal, Problem> {
    let Some(rec) = rec else {
        return Err(unauthenticated("invalid_key"));
    };
    if rec.key.revoked_at.is_some() {
        return Err(unauthenticated("revoked_key"));
    }
    // A member whose role no longer parses has no rights; treat like a revoked key.
    let Some(role) = rec.member_role else {
        return Err(unauthenticated("revoked_key"));
    };
    // A test key reaches its organisation's test space; one without a space reaches nothing
    // (never the live data).
    let Some(data_org_id) = rec.data_org_id() else {
        return Err(unauthenticated("invalid_key"));
    };
    note_use(db, &rec.key);
    let mode = rec.key.mode;
    let permissions = auth::effective_permissions(role, &rec.key.permissions);
    let overrides = Overrides::from_json(&rec.org.overrides);
    let actor = Actor::Key {
        id: rec.key.id,
        name: rec.key.name,
        prefix: rec.key.prefix,
    };
    let mut org = rec.org;
    if mode == Mode::Test {
        org.live_org_id = Some(org.id);
        org.id = data_org_id;
    }
    Ok(Principal {
        actor,
        address: None,
        org_id: data_org_id,
        mode,
        key_id: rec.key.id,
        role,
        permissions,
        overrides,
        org,
    })
}

/// Records `last_used_at` at most once a minute per key, off the request path, so
/// authentication stays a single read.
fn note_use(db: &Db, key: &tern_store::ApiKey) {
    let now = now_ms();
    if key.last_used_at.is_some_and(|t| now - t < 60_000) {
        return;
    }
    let db = db.clone();
    let id = key.id;
    tokio::spawn(async move {
        if let Err(e) = db.touch_api_key_last_used(id, now).await {
            tracing::warn!(error = %e, "could not record key use");
        }
    });
}
