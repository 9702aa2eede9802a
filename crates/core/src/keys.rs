//! API keys: create, rotate and revoke — one use case each, whoever calls (the app, `tern
//! admin`) — each recording its audit entry in the transaction of the change. And the reads
//! of the app's keys page.
//!
//! Refusals (typed, so the app can explain them on the page):
//!
//! | refusal | problem |
//! |---|---|
//! | name empty or over 100 characters | `422 validation_failed` (field `name`) |
//! | unknown permission, or none | `422 validation_failed` (field `permissions`) |
//! | a permission above the creator's role | `403 permission_denied`, `details.permission` and `details.role` |
//! | plan without `public_api` | `402 plan_feature_unavailable`, `details.plan` and `details.upgrade_plan` |
//! | the plan's `api_keys` limit | `403 plan_limit_reached` with `limit` and `used` (as every count limit) |
//! | another organisation's key, an unknown key or member | `404 not_found` |
//! | revoking a revoked key / rotating a revoked key | `409 conflict` (`already_revoked` / `revoked`) |

use serde_json::json;
use tern_domain::auth::{self, KeyGrantError, Mode, Preset, Role};
use tern_domain::crypto::MasterKey;
use tern_domain::error::{ConflictReason, FieldError};
use tern_domain::plan::{self, Effective, Entitlement, Feature, Overrides};
use tern_domain::{ErrorCode, Problem, new_id, time::now_ms};
use tern_store::{ApiKey, Db, KeyRow, Org};
use uuid::Uuid;

use crate::audit::{self, Context, Entry, TARGET_KEY};
use crate::{Result, admin, limits};

/// The longest key name, in characters.
pub const MAX_NAME_CHARS: usize = 100;

/// A new key with its plaintext (shown once).
pub struct CreatedKey {
    pub key: ApiKey,
    pub plaintext: String,
}

// By hand: the plaintext is the key itself.
impl std::fmt::Debug for CreatedKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CreatedKey")
            .field("key", &self.key)
            .field("plaintext", &"[redacted]")
            .finish()
    }
}

/// What to create: for `member_id` (whose role bounds the key), a preset or named
/// permissions.
#[derive(Debug, Clone)]
pub struct NewKey<'a> {
    pub member_id: Uuid,
    pub name: &'a str,
    pub preset: Option<Preset>,
    pub permissions: &'a [String],
    /// A test key reaches the organisation's test space (made with it on first use).
    pub mode: Mode,
}

/// `402 plan_feature_unavailable` unless the organisation's plan includes the public API.
pub fn require_public_api(org: &Org) -> Result<()> {
    let o = Overrides::from_json(&org.overrides);
    if Effective::new(&org.plan, &o).has_feature(Feature::PublicApi) {
        return Ok(());
    }
    let upgrade = plan::upgrade_plan_for(&org.plan, Feature::PublicApi);
    Err(Problem::new(ErrorCode::PlanFeatureUnavailable)
        .with_message(format!(
            "the plan {:?} does not include the public API{}",
            org.plan,
            upgrade
                .map(|p| format!("; upgrade to {p}"))
                .unwrap_or_default()
        ))
        .with_detail("feature", Feature::PublicApi.as_str())
        .with_detail("plan", org.plan.clone())
        .with_detail("upgrade_plan", upgrade.map(str::to_string)))
}

/// The refusal of a grant (see the module's table).
fn grant_refused(e: KeyGrantError) -> Problem {
    match e {
        KeyGrantError::ExceedsRole { role, permission } => Problem::permission_denied(permission)
            .with_message(e.to_string())
            .with_detail("role", role),
        KeyGrantError::UnknownPermission(_) | KeyGrantError::Empty => {
            Problem::validation(vec![FieldError::new("permissions", e.to_string())])
        }
    }
}

/// The name, trimmed, or `422` unless 1 to 100 characters.
pub fn check_name(name: &str) -> Result<&str> {
    let name = name.trim();
    if name.is_empty() || name.chars().count() > MAX_NAME_CHARS {
        return Err(Problem::validation(vec![FieldError::new(
            "name",
            format!("must be 1 to {MAX_NAME_CHARS} characters"),
        )]));
    }
    Ok(name)
}

fn key_detail(key: &ApiKey) -> serde_json::Value {
    json!({"name": key.name, "prefix": key.prefix, "permissions": key.permissions,
        "mode": key.mode})
}

/// Creates a key: its permissions are the preset's or the named ones, never more than the
/// member's role allows; within the plan's key limit. Records `key.created`.
pub async fn create(
    db: &Db,
    master_key: &MasterKey,
    ctx: &Context,
    org_id: Uuid,
    new: NewKey<'_>,
) -> Result<CreatedKey> {
    let name = check_name(new.name)?;
    let org = admin::get_org(db, org_id).await?;
    let member = db
        .get_member(new.member_id)
        .await?
        .filter(|m| m.org_id == org_id)
        .ok_or_else(|| {
            Problem::not_found().with_message(format!(
                "member {} is not a member of organisation {org_id}",
                new.member_id
            ))
        })?;
    require_public_api(&org)?;
    let perms =
        auth::resolve_grant(member.role, new.preset, new.permissions).map_err(grant_refused)?;
    if new.mode == Mode::Test {
        crate::test_space::ensure(db, master_key, &org).await?;
    }
    let generated = auth::generate_key_for(new.mode);
    let key = ApiKey {
        id: new_id(),
        org_id,
        member_id: member.id,
        name: name.to_string(),
        prefix: generated.display_prefix,
        key_hash: generated.hash.to_vec(),
        permissions: perms.iter().map(|p| p.as_str().to_string()).collect(),
        created_at: now_ms(),
        last_used_at: None,
        revoked_at: None,
        replaced_by: None,
        mode: new.mode,
    };
    let mut tx = db.begin().await?;
    let o = Overrides::from_json(&org.overrides);
    limits::check_one_more(
        &mut tx,
        org_id,
        &Effective::new(&org.plan, &o),
        Entitlement::ApiKeys,
    )
    .await?;
    tx.insert_api_key(&key).await?;
    let entry = Entry::new(Some(org_id), audit::KEY_CREATED)
        .target(TARGET_KEY, key.id)
        .detail(key_detail(&key));
    audit::record_in(&mut tx, ctx, entry).await?;
    tx.commit().await?;
    Ok(CreatedKey {
        key,
        plaintext: generated.plaintext,
    })
}

/// The key `id` of `org_id`, or 404 (another organisation's key included).
async fn key_of(db: &Db, org_id: Uuid, id: Uuid) -> Result<ApiKey> {
    db.get_api_key(id)
        .await?
        .filter(|k| k.org_id == org_id)
        .ok_or_else(|| Problem::not_found().with_message(format!("API key {id} does not exist")))
}

/// Revokes a key of `org_id` (its next request is refused; its subscriptions are disabled).
/// Records `key.revoked`.
pub async fn revoke(db: &Db, ctx: &Context, org_id: Uuid, id: Uuid) -> Result<ApiKey> {
    key_of(db, org_id, id).await?;
    let mut tx = db.begin().await?;
    let Some(key) = tx.revoke_api_key(id, now_ms()).await? else {
        tx.rollback().await?;
        return Err(Problem::conflict(ConflictReason::AlreadyRevoked)
            .with_message(format!("API key {id} is already revoked")));
    };
    let entry = Entry::new(Some(org_id), audit::KEY_REVOKED)
        .target(TARGET_KEY, key.id)
        .detail(json!({"name": key.name, "prefix": key.prefix}));
    audit::record_in(&mut tx, ctx, entry).await?;
    tx.commit().await?;
    Ok(key)
}

/// Replaces a key of `org_id` by a new one with the same name, permissions and creator; the
/// old one is revoked and its subscriptions move to the new one, in one transaction with
/// `key.rotated` (target: the old key; the new id in `detail`).
pub async fn rotate(db: &Db, ctx: &Context, org_id: Uuid, id: Uuid) -> Result<CreatedKey> {
    let old = key_of(db, org_id, id).await?;
    let revoked = || {
        Problem::conflict(ConflictReason::Revoked)
            .with_message(format!("API key {id} is revoked; create a new key instead"))
    };
    if old.revoked_at.is_some() {
        return Err(revoked());
    }
    // A rotated test key stays a test key.
    let generated = auth::generate_key_for(old.mode);
    let now = now_ms();
    let key = ApiKey {
        id: new_id(),
        org_id,
        member_id: old.member_id,
        name: old.name.clone(),
        prefix: generated.display_prefix,
        key_hash: generated.hash.to_vec(),
        permissions: old.permissions.clone(),
        created_at: now,
        last_used_at: None,
        revoked_at: None,
        replaced_by: None,
        mode: old.mode,
    };
    let mut tx = db.begin().await?;
    if !tx.rotate_api_key(id, &key, now).await? {
        tx.rollback().await?;
        return Err(revoked());
    }
    let entry = Entry::new(Some(org_id), audit::KEY_ROTATED)
        .target(TARGET_KEY, old.id)
        .detail(json!({
            "name": key.name,
            "old_prefix": old.prefix,
            "new_key_id": key.id,
            "new_prefix": key.prefix,
        }));
    audit::record_in(&mut tx, ctx, entry).await?;
    tx.commit().await?;
    Ok(CreatedKey {
        key,
        plaintext: generated.plaintext,
    })
}

/// Whether a person with `role` in the organisation (as member `member_id`) may rotate or
/// revoke `key`, or create subscriptions for it: owners and admins every key of the
/// organisation, a developer the keys they created.
pub fn can_manage(role: Role, member_id: Uuid, key: &ApiKey) -> bool {
    match role {
        Role::Owner | Role::Admin => true,
        Role::Developer => key.member_id == member_id,
    }
}

/// Every key of the organisation with its creator, revoked ones included, newest first.
pub async fn list(db: &Db, org_id: Uuid) -> Result<Vec<KeyRow>> {
    Ok(db.list_org_api_keys(org_id).await?)
}

/// One key of the organisation with its creator; `None` for another organisation's.
pub async fn get(db: &Db, org_id: Uuid, id: Uuid) -> Result<Option<KeyRow>> {
    Ok(db.get_org_api_key(org_id, id).await?)
}
