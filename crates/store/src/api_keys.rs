//! API keys and the per-request authentication lookup.

use sqlx::types::Json;
use tern_domain::auth::{Mode, Role};
use tern_domain::events::subscription::DisabledReason;
use tern_domain::plan::SubscriptionStatus;
use uuid::Uuid;

use crate::db::{Db, Pool, Tx, with_pool, with_tx};
use crate::error::{Result, StoreError};
use crate::orgs::Org;
use crate::sql::{Numbered, bump_updated_at};

/// Disables the enabled subscriptions of key `$1` for reason `$2` at `$3` (those already
/// disabled keep their reason).
const DISABLE_KEY_SUBSCRIPTIONS: &str = concat!(
    "UPDATE webhook_subscriptions SET enabled = FALSE, disabled_reason = $2, updated_at = ",
    bump_updated_at!("webhook_subscriptions", "$3"),
    " WHERE api_key_id = $1 AND enabled"
);

/// Granularity of `api_keys.last_used_at`: [`Db::touch_api_key_last_used`] only writes when
/// the stored value is at least this much older, so authenticated requests rarely write.
pub const LAST_USED_GRANULARITY_MS: i64 = 60_000;

/// An API key. Only the SHA-256 hash of the key and a short display prefix are stored.
#[derive(Debug, Clone, PartialEq, sqlx::FromRow)]
pub struct ApiKey {
    pub id: Uuid,
    pub org_id: Uuid,
    /// The member who created the key; the key never exceeds this member's role.
    pub member_id: Uuid,
    pub name: String,
    pub prefix: String,
    /// SHA-256 of the full key (32 bytes).
    pub key_hash: Vec<u8>,
    #[sqlx(json)]
    pub permissions: Vec<String>,
    pub created_at: i64,
    pub last_used_at: Option<i64>,
    pub revoked_at: Option<i64>,
    /// Set when the key was revoked by [`Db::rotate_api_key`].
    pub replaced_by: Option<Uuid>,
    /// Live keys reach the organisation's data; test keys its test space.
    #[sqlx(try_from = "String")]
    pub mode: Mode,
}

/// What the API needs to authenticate a request: the key (possibly revoked, the caller
/// decides), its creator's current role and the organisation.
#[derive(Debug, Clone, PartialEq)]
pub struct AuthRecord {
    pub key: ApiKey,
    /// The creator's role; `None` if the stored name is no longer a role or the creator was
    /// removed from the organisation (no rights either way).
    pub member_role: Option<Role>,
    /// The live organisation (a test key's too: plans are shared).
    pub org: Org,
    /// The organisation's test space, read for test keys only.
    pub test_org_id: Option<Uuid>,
}

impl AuthRecord {
    /// The organisation whose data the key reaches: the live one, or for a test key its
    /// test space (`None` when it has none: such a key reaches nothing).
    pub fn data_org_id(&self) -> Option<Uuid> {
        data_org_id(&self.key, self.test_org_id)
    }
}

/// The organisation whose data `key` reaches, given its organisation's test space.
fn data_org_id(key: &ApiKey, test_org_id: Option<Uuid>) -> Option<Uuid> {
    match key.mode {
        Mode::Live => Some(key.org_id),
        Mode::Test => test_org_id,
    }
}

macro_rules! key_columns {
    () => {
        "id, org_id, member_id, name, prefix, key_hash, permissions, created_at, last_used_at, \
         revoked_at, replaced_by, mode"
    };
}

/// Flat row of the auth join; columns are aliased because keys and orgs share names.
/// The key, its creator's role and its organisation; `$extra` is prepended to the columns.
macro_rules! auth_select {
    ($($extra:tt)*) => {
        concat!(
            "SELECT ",
            $($extra)*,
            "k.id, k.org_id, k.member_id, k.name, k.prefix, k.key_hash, k.permissions, \
             k.created_at, k.last_used_at, k.revoked_at, k.replaced_by, k.mode, \
             t.id AS test_org_id, \
             CASE WHEN m.removed_at IS NULL THEN m.role ELSE '' END AS member_role, \
             o.name AS o_name, o.plan AS o_plan, \
             o.subscription_status AS o_subscription_status, \
             o.wallet_balance_minor AS o_wallet_balance_minor, \
             o.wallet_currency AS o_wallet_currency, o.overrides AS o_overrides, \
             o.billing_period_start AS o_billing_period_start, \
             o.created_at AS o_created_at, o.updated_at AS o_updated_at, \
             o.two_factor_required AS o_two_factor_required \
             FROM api_keys k \
             JOIN members m ON m.id = k.member_id \
             JOIN organisations o ON o.id = k.org_id \
             LEFT JOIN organisations t ON k.mode = 'test' AND t.live_org_id = k.org_id"
        )
    };
}

pub(crate) use auth_select;

/// In a statement over [`auth_select`]: the organisation whose data the key reaches (the
/// test space for a test key; NULL, so nothing matches, when a test key has none).
macro_rules! data_org {
    () => {
        "(CASE WHEN k.mode = 'test' THEN t.id ELSE k.org_id END)"
    };
}

pub(crate) use data_org;

#[derive(sqlx::FromRow)]
pub(crate) struct AuthRow {
    #[sqlx(flatten)]
    pub(crate) key: ApiKey,
    pub(crate) test_org_id: Option<Uuid>,
    member_role: String,
    o_name: String,
    o_plan: String,
    #[sqlx(try_from = "String")]
    o_subscription_status: SubscriptionStatus,
    o_wallet_balance_minor: i64,
    o_wallet_currency: String,
    o_overrides: Json<serde_json::Value>,
    o_billing_period_start: i64,
    o_created_at: i64,
    o_updated_at: i64,
    o_two_factor_required: bool,
}

impl AuthRow {
    /// As [`AuthRecord::data_org_id`].
    pub(crate) fn data_org_id(&self) -> Option<Uuid> {
        data_org_id(&self.key, self.test_org_id)
    }
}

impl From<AuthRow> for AuthRecord {
    fn from(r: AuthRow) -> Self {
        let org = Org {
            id: r.key.org_id,
            name: r.o_name,
            plan: r.o_plan,
            subscription_status: r.o_subscription_status,
            wallet_balance_minor: r.o_wallet_balance_minor,
            wallet_currency: r.o_wallet_currency,
            overrides: r.o_overrides.0,
            billing_period_start: r.o_billing_period_start,
            created_at: r.o_created_at,
            updated_at: r.o_updated_at,
            two_factor_required: r.o_two_factor_required,
            live_org_id: None,
        };
        AuthRecord {
            key: r.key,
            member_role: Role::parse(&r.member_role),
            org,
            test_org_id: r.test_org_id,
        }
    }
}

/// The insert statement for a key, bound and ready to execute on a pool or a transaction.
macro_rules! insert_key {
    ($key:expr) => {{
        let key: &ApiKey = $key;
        sqlx::query(concat!(
            "INSERT INTO api_keys (",
            key_columns!(),
            ") VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)"
        ))
        .bind(key.id)
        .bind(key.org_id)
        .bind(key.member_id)
        .bind(&key.name)
        .bind(&key.prefix)
        .bind(&key.key_hash)
        .bind(Json(&key.permissions))
        .bind(key.created_at)
        .bind(key.last_used_at)
        .bind(key.revoked_at)
        .bind(key.replaced_by)
        .bind(key.mode.as_str())
    }};
}

impl Tx {
    /// [`Db::insert_api_key`] inside a transaction (a create checked against a limit).
    pub async fn insert_api_key(&mut self, key: &ApiKey) -> Result<()> {
        with_tx!(self, conn => insert_key!(key).execute(&mut **conn).await.map(|r| r.rows_affected()))?;
        Ok(())
    }

    /// Revokes key `id` at `at` unless it already is, disabling its enabled webhook
    /// subscriptions (`key_revoked`) in this transaction. `None` (nothing written) when it is
    /// missing or already revoked.
    pub async fn revoke_api_key(&mut self, id: Uuid, at: i64) -> Result<Option<ApiKey>> {
        let key = with_tx!(self, conn => sqlx::query_as::<_, ApiKey>(concat!(
                "UPDATE api_keys SET revoked_at = $2 WHERE id = $1 AND revoked_at IS NULL \
                 RETURNING ", key_columns!()))
            .bind(id)
            .bind(at)
            .fetch_optional(&mut **conn)
            .await)?;
        if key.is_some() {
            with_tx!(self, conn => sqlx::query(DISABLE_KEY_SUBSCRIPTIONS)
                .bind(id)
                .bind(DisabledReason::KeyRevoked.as_str())
                .bind(at)
                .execute(&mut **conn)
                .await
                .map(|r| r.rows_affected()))?;
        }
        Ok(key)
    }

    /// Replaces `old_id` by `new`: inserts `new`, marks the old key revoked at `at` with
    /// `replaced_by = new.id` and moves the old key's webhook subscriptions to the new key
    /// (they keep receiving). `false` when the old key is not an unrevoked key of
    /// `new.org_id`: the caller then rolls back (the new key was inserted).
    pub async fn rotate_api_key(&mut self, old_id: Uuid, new: &ApiKey, at: i64) -> Result<bool> {
        self.insert_api_key(new).await?;
        // Conditional update: of two concurrent rotations only one matches the row.
        let done = with_tx!(self, conn => sqlx::query(
                "UPDATE api_keys SET revoked_at = $2, replaced_by = $3 \
                 WHERE id = $1 AND org_id = $4 AND revoked_at IS NULL")
            .bind(old_id)
            .bind(at)
            .bind(new.id)
            .bind(new.org_id)
            .execute(&mut **conn)
            .await
            .map(|r| r.rows_affected()))?;
        if done != 1 {
            return Ok(false);
        }
        with_tx!(self, conn => sqlx::query(
                "UPDATE webhook_subscriptions SET api_key_id = $2 WHERE api_key_id = $1")
            .bind(old_id)
            .bind(new.id)
            .execute(&mut **conn)
            .await
            .map(|r| r.rows_affected()))?;
        Ok(true)
    }
}

impl Db {
    /// Inserts a key. `Conflict { "api_keys_pkey" }` or `Conflict { "api_keys_key_hash_key" }`
    /// on a duplicate id or hash.
    pub async fn insert_api_key(&self, key: &ApiKey) -> Result<()> {
        with_pool!(self, pool => insert_key!(key).execute(pool).await.map(|r| r.rows_affected()))?;
        Ok(())
    }

    pub async fn get_api_key(&self, id: Uuid) -> Result<Option<ApiKey>> {
        let key = with_pool!(self, pool => sqlx::query_as::<_, ApiKey>(concat!(
                "SELECT ", key_columns!(), " FROM api_keys WHERE id = $1"))
            .bind(id)
            .fetch_optional(pool)
            .await)?;
        Ok(key)
    }

    /// Revokes a key at `at` and returns it; in the same transaction its enabled webhook
    /// subscriptions are disabled (`key_revoked`): a revoked key's receivers get nothing more.
    /// `NotFound` if missing; `Conflict { "already_revoked" }` if it was already revoked (the
    /// first revocation time is kept).
    pub async fn revoke_api_key(&self, id: Uuid, at: i64) -> Result<ApiKey> {
        let mut tx = self.begin().await?;
        if let Some(key) = tx.revoke_api_key(id, at).await? {
            tx.commit().await?;
            return Ok(key);
        }
        tx.rollback().await?;
        // The update is the atomic part; this read only tells the two failures apart.
        match self.get_api_key(id).await? {
            Some(_) => Err(StoreError::conflict("already_revoked")),
            None => Err(StoreError::NotFound),
        }
    }

    /// Replaces `old_id` by `new` in one transaction (see [`Tx::rotate_api_key`]). The old key
    /// must exist in `new.org_id` (`NotFound` otherwise) and not be revoked
    /// (`Conflict { "already_revoked" }`); on any error nothing is written.
    pub async fn rotate_api_key(&self, old_id: Uuid, new: &ApiKey, at: i64) -> Result<()> {
        let mut tx = self.begin().await?;
        if tx.rotate_api_key(old_id, new, at).await? {
            tx.commit().await?;
            return Ok(());
        }
        tx.rollback().await?;
        match self.get_api_key(old_id).await? {
            Some(old) if old.org_id == new.org_id => Err(StoreError::conflict("already_revoked")),
            _ => Err(StoreError::NotFound),
        }
    }

    /// Looks a key up by the SHA-256 of its value, with its creator's role and its
    /// organisation, in one indexed join. Revoked keys are returned too.
    pub async fn find_auth_by_hash(&self, hash: &[u8]) -> Result<Option<AuthRecord>> {
        let row = with_pool!(self, pool => sqlx::query_as::<_, AuthRow>(
                concat!(auth_select!(""), " WHERE k.key_hash = $1"))
            .bind(hash)
            .fetch_optional(pool)
            .await)?;
        Ok(row.map(AuthRecord::from))
    }

    /// [`Db::find_auth_by_hash`] for several hashes at once, answers in their order.
    /// PostgreSQL: one statement; SQLite: one connection (statements there are cheap).
    pub async fn find_auth_by_hashes(&self, hashes: &[Vec<u8>]) -> Result<Vec<Option<AuthRecord>>> {
        let mut out: Vec<Option<AuthRecord>> = hashes.iter().map(|_| None).collect();
        match &self.pool {
            Pool::Sqlite(pool) => {
                let mut conn = pool.acquire().await?;
                for (slot, hash) in out.iter_mut().zip(hashes) {
                    let row = sqlx::query_as::<_, AuthRow>(concat!(
                        auth_select!(""),
                        " WHERE k.key_hash = $1"
                    ))
                    .bind(hash)
                    .fetch_optional(&mut *conn)
                    .await?;
                    *slot = row.map(AuthRecord::from);
                }
            }
            Pool::Postgres(pool) => {
                let rows = sqlx::query_as::<_, Numbered<AuthRow>>(concat!(
                    auth_select!("h.i AS i, "),
                    " JOIN UNNEST($1::bytea[]) WITH ORDINALITY AS h(hash, i) ON k.key_hash = h.hash"
                ))
                .bind(hashes)
                .fetch_all(pool)
                .await?;
                for Numbered { i, row } in rows {
                    if let Some(slot) = usize::try_from(i - 1).ok().and_then(|i| out.get_mut(i)) {
                        *slot = Some(AuthRecord::from(row));
                    }
                }
            }
        }
        Ok(out)
    }

    /// Number of keys of the organisation that are not revoked (plan count limits).
    pub async fn count_active_api_keys(&self, org_id: Uuid) -> Result<i64> {
        let n = with_pool!(self, pool => sqlx::query_scalar::<_, i64>(
                "SELECT COUNT(*) FROM api_keys WHERE org_id = $1 AND revoked_at IS NULL")
            .bind(org_id)
            .fetch_one(pool)
            .await)?;
        Ok(n)
    }

    /// Records that the key was used at `at`. Writes only when the stored value is older
    /// than [`LAST_USED_GRANULARITY_MS`] (or absent), and never moves it backwards, so it
    /// is cheap to call on every request. Unknown ids are ignored.
    pub async fn touch_api_key_last_used(&self, id: Uuid, at: i64) -> Result<()> {
        let _turn = self.write_turn().await?;
        with_pool!(self, pool => sqlx::query(
                "UPDATE api_keys SET last_used_at = $2 \
                 WHERE id = $1 AND (last_used_at IS NULL OR last_used_at <= $2 - $3)")
            .bind(id)
            .bind(at)
            .bind(LAST_USED_GRANULARITY_MS)
            .execute(pool)
            .await
            .map(|r| r.rows_affected()))?;
        Ok(())
    }
}

/// What a list of subscriptions shows of the key that owns each.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeySummary {
    pub id: Uuid,
    pub name: String,
    pub prefix: String,
    /// The member who created the key (who may manage it besides owners and admins).
    pub member_id: Uuid,
    pub revoked_at: Option<i64>,
}

/// A key with its creator, as the app's keys page shows it.
#[derive(Debug, Clone, PartialEq)]
pub struct KeyRow {
    pub key: ApiKey,
    pub created_by_email: String,
    /// `None` if the stored name is no longer a role.
    pub creator_role: Option<Role>,
}

#[derive(sqlx::FromRow)]
struct KeyRowRaw {
    #[sqlx(flatten)]
    key: ApiKey,
    created_by_email: String,
    creator_role: String,
}

impl From<KeyRowRaw> for KeyRow {
    fn from(r: KeyRowRaw) -> Self {
        KeyRow {
            key: r.key,
            created_by_email: r.created_by_email,
            creator_role: Role::parse(&r.creator_role),
        }
    }
}

macro_rules! key_row_select {
    () => {
        "SELECT k.id, k.org_id, k.member_id, k.name, k.prefix, k.key_hash, k.permissions, \
         k.created_at, k.last_used_at, k.revoked_at, k.replaced_by, k.mode, \
         m.email AS created_by_email, m.role AS creator_role \
         FROM api_keys k JOIN members m ON m.id = k.member_id"
    };
}

impl Db {
    /// Every key of the organisation with its creator, revoked ones included, newest first.
    pub async fn list_org_api_keys(&self, org_id: Uuid) -> Result<Vec<KeyRow>> {
        const SQL: &str = concat!(
            key_row_select!(),
            " WHERE k.org_id = $1 ORDER BY k.created_at DESC, k.id DESC"
        );
        let rows = with_pool!(self, pool => sqlx::query_as::<_, KeyRowRaw>(SQL)
            .bind(org_id)
            .fetch_all(pool)
            .await)?;
        Ok(rows.into_iter().map(KeyRow::from).collect())
    }

    /// One key of the organisation with its creator; another organisation's is `None`.
    pub async fn get_org_api_key(&self, org_id: Uuid, id: Uuid) -> Result<Option<KeyRow>> {
        const SQL: &str = concat!(key_row_select!(), " WHERE k.id = $1 AND k.org_id = $2");
        let row = with_pool!(self, pool => sqlx::query_as::<_, KeyRowRaw>(SQL)
            .bind(id)
            .bind(org_id)
            .fetch_optional(pool)
            .await)?;
        Ok(row.map(KeyRow::from))
    }
}
