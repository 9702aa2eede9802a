//! The organisation's business phone numbers on the network.

use uuid::Uuid;

use crate::db::{Db, with_pool};
use crate::error::{Result, StoreError};

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
    /// `connected` | `disconnected`.
    pub status: String,
    pub throughput_mps: i64,
    pub created_at: i64,
    pub updated_at: i64,
}

macro_rules! phone_columns {
    () => {
        "id, org_id, display_phone_number, waba_id, access_token_enc, status, throughput_mps, \
         created_at, updated_at"
    };
}

impl Db {
    /// Inserts a number. `Conflict { "phone_numbers_pkey" }` if the id is already registered
    /// (by any organisation).
    pub async fn insert_phone_number(&self, number: &PhoneNumber) -> Result<()> {
        with_pool!(self, pool => sqlx::query(concat!(
                "INSERT INTO phone_numbers (", phone_columns!(), ") \
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)"))
            .bind(&number.id)
            .bind(number.org_id)
            .bind(&number.display_phone_number)
            .bind(&number.waba_id)
            .bind(&number.access_token_enc)
            .bind(&number.status)
            .bind(number.throughput_mps)
            .bind(number.created_at)
            .bind(number.updated_at)
            .execute(pool)
            .await
            .map(|r| r.rows_affected()))?;
        Ok(())
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
        status: Option<&str>,
        throughput_mps: Option<i64>,
        at: i64,
    ) -> Result<PhoneNumber> {
        let number = with_pool!(self, pool => sqlx::query_as::<_, PhoneNumber>(concat!(
                "UPDATE phone_numbers SET status = COALESCE($2, status), \
                 throughput_mps = COALESCE($3, throughput_mps), updated_at = $4 \
                 WHERE id = $1 RETURNING ", phone_columns!()))
            .bind(id)
            .bind(status)
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
