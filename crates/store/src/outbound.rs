//! Accepting an outbound message: the idempotency key, the billing effects and the queued
//! message are written in one transaction, so a message exists exactly when its key is bound
//! (and its debit and usage were recorded), whatever crashes or races happen.

use sqlx::types::Json;
use uuid::Uuid;

use crate::db::{BeginWrite as _, Db, with_pool};
use crate::error::{Result, StoreError};
use crate::messages::Message;

/// A bound idempotency key.
#[derive(Debug, Clone, PartialEq, sqlx::FromRow)]
pub struct IdempotencyRecord {
    pub key: String,
    /// SHA-256 of the canonical request body.
    pub fingerprint: Vec<u8>,
    pub message_id: Option<Uuid>,
    pub created_at: i64,
    pub expires_at: i64,
}

/// Billing effects of accepting a message, checked and applied inside the transaction.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Charges {
    /// Debit the wallet by this amount (a template message); refused when the balance is
    /// lower.
    pub debit_minor: Option<i64>,
    /// Count one `messages_sent` in the period starting at `.0`; refused when `.1` (the
    /// allowance) is already used.
    pub messages_sent: Option<(i64, i64)>,
}

/// What [`Db::accept_message`] did.
#[derive(Debug, Clone, PartialEq)]
pub enum Acceptance {
    /// The key was free: the message is stored and queued.
    Accepted,
    /// The key is bound (another request won the race): nothing was written.
    KeyTaken(IdempotencyRecord),
    /// The wallet cannot cover `debit_minor`: nothing was written.
    WalletLow { balance_minor: i64 },
    /// The `messages_sent` allowance is used up: nothing was written.
    AllowanceUsed { used: i64 },
}

impl Db {
    /// The organisation's idempotency key if it is bound and not expired at `now`.
    pub async fn get_idempotency_key(
        &self,
        org_id: Uuid,
        key: &str,
        now: i64,
    ) -> Result<Option<IdempotencyRecord>> {
        let rec = with_pool!(self, pool => sqlx::query_as::<_, IdempotencyRecord>(
                "SELECT key, fingerprint, message_id, created_at, expires_at FROM idempotency_keys \
                 WHERE org_id = $1 AND key = $2 AND expires_at > $3 AND state = 'completed'")
            .bind(org_id)
            .bind(key)
            .bind(now)
            .fetch_optional(pool)
            .await)?;
        Ok(rec)
    }

    /// Stores an outbound message `m` (status `accepted`, queued for dispatch now) bound to
    /// the idempotency `key` until `key_expires_at`, applies `charges`, and records the
    /// message in its conversation — all or nothing.
    ///
    /// A key bound by a concurrent request makes this a no-op answering
    /// [`Acceptance::KeyTaken`] with the winner's record (on PostgreSQL the loser waits for
    /// the winner's commit; on SQLite writers are serialised). An expired key is reused.
    pub async fn accept_message(
        &self,
        m: &Message,
        key: &str,
        fingerprint: &[u8],
        key_expires_at: i64,
        charges: &Charges,
    ) -> Result<Acceptance> {
        let now = m.created_at;
        with_pool!(self, pool => {
            let mut tx = pool.begin_write().await?;
            let bound: Option<Uuid> = sqlx::query_scalar(
                    "INSERT INTO idempotency_keys (org_id, key, fingerprint, message_id, state, \
                     created_at, expires_at) VALUES ($1, $2, $3, $4, 'completed', $5, $6) \
                     ON CONFLICT (org_id, key) DO UPDATE SET fingerprint = excluded.fingerprint, \
                       message_id = excluded.message_id, state = 'completed', \
                       created_at = excluded.created_at, expires_at = excluded.expires_at, \
                       locked_until = NULL \
                     WHERE idempotency_keys.expires_at <= $5 \
                     RETURNING message_id")
                .bind(m.org_id)
                .bind(key)
                .bind(fingerprint)
                .bind(m.id)
                .bind(now)
                .bind(key_expires_at)
                .fetch_optional(&mut *tx)
                .await?;
            if bound.is_none() {
                let rec = sqlx::query_as::<_, IdempotencyRecord>(
                        "SELECT key, fingerprint, message_id, created_at, expires_at \
                         FROM idempotency_keys WHERE org_id = $1 AND key = $2")
                    .bind(m.org_id)
                    .bind(key)
                    .fetch_one(&mut *tx)
                    .await?;
                tx.rollback().await?;
                return Ok(Acceptance::KeyTaken(rec));
            }
            if let Some((period_start, allowance)) = charges.messages_sent {
                let counted: Option<i64> = sqlx::query_scalar(
                        "INSERT INTO usage_counters (org_id, meter, period_start, count) \
                         VALUES ($1, 'messages_sent', $2, 1) \
                         ON CONFLICT (org_id, meter, period_start) \
                         DO UPDATE SET count = usage_counters.count + 1 \
                         WHERE usage_counters.count < $3 RETURNING count")
                    .bind(m.org_id)
                    .bind(period_start)
                    .bind(allowance)
                    .fetch_optional(&mut *tx)
                    .await?;
                // The allowance may be 0: the insert itself must respect it.
                if counted.is_none_or(|c| c > allowance) {
                    tx.rollback().await?;
                    return Ok(Acceptance::AllowanceUsed { used: allowance });
                }
            }
            if let Some(amount) = charges.debit_minor.filter(|a| *a > 0) {
                let balance: Option<i64> = sqlx::query_scalar(
                        "UPDATE organisations SET wallet_balance_minor = wallet_balance_minor - $2 \
                         WHERE id = $1 AND wallet_balance_minor >= $2 RETURNING wallet_balance_minor")
                    .bind(m.org_id)
                    .bind(amount)
                    .fetch_optional(&mut *tx)
                    .await?;
                if balance.is_none() {
                    let balance: i64 = sqlx::query_scalar(
                            "SELECT wallet_balance_minor FROM organisations WHERE id = $1")
                        .bind(m.org_id)
                        .fetch_optional(&mut *tx)
                        .await?
                        .ok_or(StoreError::NotFound)?;
                    tx.rollback().await?;
                    return Ok(Acceptance::WalletLow { balance_minor: balance });
                }
                sqlx::query(
                        "INSERT INTO wallet_ledger (id, org_id, amount_minor, reason, message_id, created_at) \
                         VALUES ($1, $2, $3, 'message_debit', $4, $5)")
                    .bind(Uuid::now_v7())
                    .bind(m.org_id)
                    .bind(-amount)
                    .bind(m.id)
                    .bind(now)
                    .execute(&mut *tx)
                    .await?;
            }
            sqlx::query(concat!(
                    "INSERT INTO messages (",
                    crate::messages::message_columns!(),
                    ", attempts, next_attempt_at, dispatch_state) VALUES ($1, $2, $3, $4, $5, $6, $7, \
                     $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20, $21, $22, $23, \
                     0, $16, 'queued')"))
                .bind(m.id)
                .bind(m.org_id)
                .bind(m.conversation_id)
                .bind(m.contact_id)
                .bind(&m.phone_number_id)
                .bind(&m.direction)
                .bind(&m.r#type)
                .bind(&m.status)
                .bind(&m.template_name)
                .bind(&m.template_language)
                .bind(&m.text)
                .bind(m.media_id)
                .bind(&m.wamid)
                .bind(Json(&m.request))
                .bind(m.campaign_id)
                .bind(m.created_at)
                .bind(m.sent_at)
                .bind(m.delivered_at)
                .bind(m.read_at)
                .bind(m.failed_at)
                .bind(&m.failure_code)
                .bind(m.failure.as_ref().map(Json))
                .bind(m.updated_at)
                .execute(&mut *tx)
                .await?;
            sqlx::query(
                    "UPDATE conversations SET last_message_at = $2 \
                     WHERE id = $1 AND (last_message_at IS NULL OR last_message_at < $2)")
                .bind(m.conversation_id)
                .bind(now)
                .execute(&mut *tx)
                .await?;
            tx.commit().await?;
            Ok(Acceptance::Accepted)
        })
    }

    /// Deletes idempotency keys that expired before `now`; returns how many.
    pub async fn prune_idempotency_keys(&self, now: i64) -> Result<u64> {
        let n = with_pool!(self, pool => sqlx::query(
                "DELETE FROM idempotency_keys WHERE expires_at <= $1")
            .bind(now)
            .execute(pool)
            .await
            .map(|r| r.rows_affected()))?;
        Ok(n)
    }

    /// `messages_sent` counted in the period starting at `period_start`.
    pub async fn messages_sent_in_period(&self, org_id: Uuid, period_start: i64) -> Result<i64> {
        let n = with_pool!(self, pool => sqlx::query_scalar::<_, i64>(
                "SELECT count FROM usage_counters \
                 WHERE org_id = $1 AND meter = 'messages_sent' AND period_start = $2")
            .bind(org_id)
            .bind(period_start)
            .fetch_optional(pool)
            .await)?;
        Ok(n.unwrap_or(0))
    }
}
