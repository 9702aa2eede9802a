//! Organisations and their members.

use serde_json::Value;
use sqlx::types::Json;
use tern_domain::auth::Role;
use tern_domain::plan::SubscriptionStatus;
use uuid::Uuid;

use crate::db::{Db, Tx, with_pool, with_tx};
use crate::error::{Result, StoreError};

/// An organisation (tenant) with its billing state.
#[derive(Debug, Clone, PartialEq, sqlx::FromRow)]
pub struct Org {
    pub id: Uuid,
    pub name: String,
    pub plan: String,
    #[sqlx(try_from = "String")]
    pub subscription_status: SubscriptionStatus,
    pub wallet_balance_minor: i64,
    pub wallet_currency: String,
    /// Per-organisation overrides of the plan (features, limits, allowances, rate limits,
    /// prices). Shape owned by the billing code; `{}` when none.
    #[sqlx(json)]
    pub overrides: Value,
    /// Epoch ms.
    pub billing_period_start: i64,
    pub created_at: i64,
    pub updated_at: i64,
    /// Members must use two-factor authentication in the app (an owner's setting).
    pub two_factor_required: bool,
    /// Set on an organisation's test space: the live organisation it belongs to.
    pub live_org_id: Option<Uuid>,
}

impl Org {
    /// Whether this is an organisation's test space (APP.md §5).
    pub fn is_test_space(&self) -> bool {
        self.live_org_id.is_some()
    }
}

/// A person in an organisation. `email` is stored lower-cased.
#[derive(Debug, Clone, PartialEq, sqlx::FromRow)]
pub struct Member {
    pub id: Uuid,
    pub org_id: Uuid,
    pub email: String,
    #[sqlx(try_from = "String")]
    pub role: Role,
    pub created_at: i64,
}

macro_rules! org_columns {
    () => {
        "id, name, plan, subscription_status, wallet_balance_minor, wallet_currency, overrides, \
         billing_period_start, created_at, updated_at, two_factor_required, live_org_id"
    };
}

/// The insert statement for an organisation, bound and ready to execute.
macro_rules! insert_org {
    ($org:expr) => {{
        let org: &Org = $org;
        sqlx::query(concat!(
            "INSERT INTO organisations (",
            org_columns!(),
            ") VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)"
        ))
        .bind(org.id)
        .bind(&org.name)
        .bind(&org.plan)
        .bind(org.subscription_status.as_str())
        .bind(org.wallet_balance_minor)
        .bind(&org.wallet_currency)
        .bind(Json(&org.overrides))
        .bind(org.billing_period_start)
        .bind(org.created_at)
        .bind(org.updated_at)
        .bind(org.two_factor_required)
        .bind(org.live_org_id)
    }};
}

impl Tx {
    /// Whether `org_id` is an organisation's test space (`false` when missing).
    pub async fn org_is_test_space(&mut self, org_id: Uuid) -> Result<bool> {
        let live = with_tx!(self, conn => sqlx::query_scalar::<_, Option<Uuid>>(
                "SELECT live_org_id FROM organisations WHERE id = $1")
            .bind(org_id)
            .fetch_optional(&mut **conn)
            .await)?;
        Ok(live.flatten().is_some())
    }

    /// [`Db::insert_org`] inside a transaction (a test space with its number).
    /// `Conflict { "organisations_live_org_id_key" }` when the live organisation already has
    /// a test space.
    pub async fn insert_org(&mut self, org: &Org) -> Result<()> {
        with_tx!(self, conn => insert_org!(org).execute(&mut **conn).await.map(|r| r.rows_affected()))?;
        Ok(())
    }
}

impl Db {
    /// Inserts an organisation. `Conflict { "organisations_pkey" }` if the id exists.
    pub async fn insert_org(&self, org: &Org) -> Result<()> {
        with_pool!(self, pool => insert_org!(org).execute(pool).await.map(|r| r.rows_affected()))?;
        Ok(())
    }

    /// The test space of organisation `live_org_id`, if it has one.
    pub async fn get_test_space(&self, live_org_id: Uuid) -> Result<Option<Org>> {
        let org = with_pool!(self, pool => sqlx::query_as::<_, Org>(concat!(
                "SELECT ", org_columns!(), " FROM organisations WHERE live_org_id = $1"))
            .bind(live_org_id)
            .fetch_optional(pool)
            .await)?;
        Ok(org)
    }

    pub async fn get_org(&self, id: Uuid) -> Result<Option<Org>> {
        let org = with_pool!(self, pool => sqlx::query_as::<_, Org>(concat!(
                "SELECT ", org_columns!(), " FROM organisations WHERE id = $1"))
            .bind(id)
            .fetch_optional(pool)
            .await)?;
        Ok(org)
    }

    /// Overwrites the organisation's settings (name, plan, subscription status, currency,
    /// overrides, billing period, `updated_at`), and its test space's with them (plans are
    /// shared). `NotFound` if it does not exist.
    ///
    /// `wallet_balance_minor` is deliberately **not** written: the balance only moves through
    /// [`Db::adjust_wallet`], an atomic increment with a ledger entry, so a concurrent debit
    /// is never lost to a read-modify-write of the whole row.
    pub async fn update_org(&self, org: &Org) -> Result<()> {
        // SQLite: in this process's write turn, not SQLite's busy handler.
        let _turn = self.write_turn().await?;
        let done = with_pool!(self, pool => sqlx::query(
                "UPDATE organisations SET name = $2, plan = $3, subscription_status = $4, \
                 wallet_currency = $5, overrides = $6, billing_period_start = $7, updated_at = $8 \
                 WHERE id = $1 OR live_org_id = $1")
            .bind(org.id)
            .bind(&org.name)
            .bind(&org.plan)
            .bind(org.subscription_status.as_str())
            .bind(&org.wallet_currency)
            .bind(Json(&org.overrides))
            .bind(org.billing_period_start)
            .bind(org.updated_at)
            .execute(pool)
            .await
            .map(|r| r.rows_affected()))?;
        if done == 0 {
            return Err(StoreError::NotFound);
        }
        Ok(())
    }

    /// Adds `amount_minor` (negative = debit) to the organisation's wallet and records a
    /// ledger entry, in one transaction. Returns the new balance.
    ///
    /// With `message_id` set, a second entry with the same `(message_id, reason)` is refused
    /// with `Conflict { "wallet_ledger_message_id_reason_key" }` and the balance is unchanged,
    /// so a retried debit or refund applies once. `NotFound` if the organisation is missing.
    pub async fn adjust_wallet(
        &self,
        org_id: Uuid,
        amount_minor: i64,
        reason: &str,
        message_id: Option<Uuid>,
        at: i64,
    ) -> Result<i64> {
        with_pool!(self, pool => {
            use crate::db::BeginWrite as _;
            let mut tx = pool.begin_write().await?;
            // Ledger first: its unique index rejects a duplicate before the balance moves.
            sqlx::query(
                "INSERT INTO wallet_ledger (id, org_id, amount_minor, reason, message_id, created_at) \
                 SELECT $1, id, $3, $4, $5, $6 FROM organisations WHERE id = $2")
                .bind(Uuid::now_v7())
                .bind(org_id)
                .bind(amount_minor)
                .bind(reason)
                .bind(message_id)
                .bind(at)
                .execute(&mut *tx)
                .await?;
            let balance: Option<i64> = sqlx::query_scalar(
                "UPDATE organisations SET wallet_balance_minor = wallet_balance_minor + $2 \
                 WHERE id = $1 RETURNING wallet_balance_minor")
                .bind(org_id)
                .bind(amount_minor)
                .fetch_optional(&mut *tx)
                .await?;
            let balance = balance.ok_or(StoreError::NotFound)?;
            tx.commit().await?;
            Ok(balance)
        })
    }

    /// Inserts a member with its email lower-cased and returns the stored row.
    /// `Conflict { "members_org_id_email_key" }` if the email (in any case) is already a
    /// member of that organisation.
    pub async fn insert_member(&self, member: &Member) -> Result<Member> {
        // SQLite: in this process's write turn, not SQLite's busy handler.
        let _turn = self.write_turn().await?;
        let stored = with_pool!(self, pool => sqlx::query_as::<_, Member>(
                "INSERT INTO members (id, org_id, email, role, created_at) \
                 VALUES ($1, $2, $3, $4, $5) \
                 RETURNING id, org_id, email, role, created_at")
            .bind(member.id)
            .bind(member.org_id)
            .bind(member.email.to_lowercase())
            .bind(member.role.as_str())
            .bind(member.created_at)
            .fetch_one(pool)
            .await)?;
        Ok(stored)
    }

    /// A current member (`None` for a removed one).
    pub async fn get_member(&self, id: Uuid) -> Result<Option<Member>> {
        let member = with_pool!(self, pool => sqlx::query_as::<_, Member>(
                "SELECT id, org_id, email, role, created_at FROM members \
                 WHERE id = $1 AND removed_at IS NULL")
            .bind(id)
            .fetch_optional(pool)
            .await)?;
        Ok(member)
    }
}
