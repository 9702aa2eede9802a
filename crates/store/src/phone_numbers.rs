//! The organisation's business phone numbers on the network.

use uuid::Uuid;

use crate::db::{Db, Tx, with_pool, with_tx};
use crate::error::{Result, StoreError};
use tern_domain::auth::Mode;
use tern_domain::number::NumberStatus;

/// A connected business number. `id` is the network's `phone_number_id`.
#[derive(Debug, Clone, PartialEq, sqlx::FromRow)]
pub struct PhoneNumber {
    pub id: String,
    pub org_id: Uuid,
    /// E.164.
    pub display_phone_number: String,
    pub waba_id: String,
    /// The network access token, encrypted by the caller.
    pub access_token_enc: Vec<u8>,
    #[sqlx(try_from = "String")]
    pub status: NumberStatus,
    pub throughput_mps: i64,
    pub created_at: i64,
    pub updated_at: i64,
    /// `test`: a test space's number, answered by the built-in simulator.
    #[sqlx(try_from = "String")]
    pub mode: Mode,
}

macro_rules! phone_columns {
    () => {
        "id, org_id, display_phone_number, waba_id, access_token_enc, status, throughput_mps, \
         created_at, updated_at, mode"
    };
}

macro_rules! insert_number {
    ($n:expr) => {{
        let n = $n;
        sqlx::query(concat!(
            "INSERT INTO phone_numbers (",
            phone_columns!(),
            ") VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)"
        ))
        .bind(&n.id)
        .bind(n.org_id)
        .bind(&n.display_phone_number)
        .bind(&n.waba_id)
        .bind(&n.access_token_enc)
        .bind(n.status.as_str())
        .bind(n.throughput_mps)
        .bind(n.created_at)
        .bind(n.updated_at)
        .bind(n.mode.as_str())
    }};
}

impl Tx {
    /// [`Db::insert_phone_number`] inside a transaction (a create checked against a limit).
    pub async fn insert_phone_number(&mut self, number: &PhoneNumber) -> Result<()> {
        with_tx!(self, conn => insert_number!(number).execute(&mut **conn).await.map(|r| r.rows_affected()))?;
        Ok(())
    }
}

impl Db {
    /// Inserts a number. `Conflict { "phone_numbers_pkey" }` if the id is already registered
    /// (by any organisation).
    pub async fn insert_phone_number(&self, number: &PhoneNumber) -> Result<()> {
        with_pool!(self, pool => insert_number!(number).execute(pool).await.map(|r| r.rows_affected()))?;
        Ok(())
    }

    /// Whether any live number has business account `waba_id` (its templates are live
    /// data).
    pub async fn waba_has_live_number(&self, waba_id: &str) -> Result<bool> {
        let n = with_pool!(self, pool => sqlx::query_scalar::<_, i64>(
                "SELECT COUNT(*) FROM phone_numbers WHERE waba_id = $1 AND mode = 'live'")
            .bind(waba_id)
            .fetch_one(pool)
            .await)?;
        Ok(n > 0)
    }

    pub async fn get_phone_number(&self, id: &str) -> Result<Option<PhoneNumber>> {
        let number = with_pool!(self, pool => sqlx::query_as::<_, PhoneNumber>(concat!(
                "SELECT ", phone_columns!(), " FROM phone_numbers WHERE id = $1"))
            .bind(id)
            .fetch_optional(pool)
            .await)?;
        Ok(number)
    }

    /// Sets the given fields (`None` = unchanged) and `updated_at`, returning the new row.
    /// `NotFound` if the number does not exist.
    pub async fn update_phone_number(
        &self,
        id: &str,
        status: Option<NumberStatus>,
        throughput_mps: Option<i64>,
        at: i64,
    ) -> Result<PhoneNumber> {
        // SQLite: in this process's write turn, not SQLite's busy handler.
        let _turn = self.write_turn().await?;
        let number = with_pool!(self, pool => sqlx::query_as::<_, PhoneNumber>(concat!(
                "UPDATE phone_numbers SET status = COALESCE($2, status), \
                 throughput_mps = COALESCE($3, throughput_mps), updated_at = $4 \
                 WHERE id = $1 RETURNING ", phone_columns!()))
            .bind(id)
            .bind(status.map(NumberStatus::as_str))
            .bind(throughput_mps)
            .bind(at)
            .fetch_optional(pool)
            .await)?;
        number.ok_or(StoreError::NotFound)
    }

    /// One page of the organisation's numbers ordered by id, starting after `after_id`.
    pub async fn list_phone_numbers(
        &self,
        org_id: Uuid,
        after_id: Option<&str>,
        limit: i64,
    ) -> Result<Vec<PhoneNumber>> {
        let numbers = with_pool!(self, pool => sqlx::query_as::<_, PhoneNumber>(concat!(
                "SELECT ", phone_columns!(), " FROM phone_numbers \
                 WHERE org_id = $1 AND ($2 IS NULL OR id > $2) \
                 ORDER BY id LIMIT $3"))
            .bind(org_id)
            .bind(after_id)
            .bind(limit)
            .fetch_all(pool)
            .await)?;
        Ok(numbers)
    }

    pub async fn count_phone_numbers(&self, org_id: Uuid) -> Result<i64> {
        let n = with_pool!(self, pool => sqlx::query_scalar::<_, i64>(
                "SELECT COUNT(*) FROM phone_numbers WHERE org_id = $1")
            .bind(org_id)
            .fetch_one(pool)
            .await)?;
        Ok(n)
    }
}
