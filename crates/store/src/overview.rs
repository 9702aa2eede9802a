//! Reads of the app's overview and usage pages: the organisation's messages of a recent
//! window counted by number, status and failure code; each webhook subscription's recent
//! failures; the wallet's latest ledger entries. Read-only, bounded by indexes.

use uuid::Uuid;

use crate::db::{Db, with_pool};
use crate::error::Result;
use tern_domain::message::Status;

/// How many of the organisation's messages since a time share a number, status and
/// failure code.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct MessageCount {
    pub phone_number_id: String,
    #[sqlx(try_from = "String")]
    pub status: Status,
    pub failure_code: Option<String>,
    pub count: i64,
}

/// A webhook subscription with its failures since a time.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct SubscriptionHealth {
    pub id: Uuid,
    pub url: String,
    pub enabled: bool,
    pub disabled_reason: Option<String>,
    /// Failed attempts (each retry counts) recorded since the time.
    pub failed_attempts: i64,
    /// Deliveries given up (failed for good) since the time.
    pub failed_deliveries: i64,
    /// The latest failed attempt since the time.
    pub last_failure_at: Option<i64>,
}

/// One entry of the organisation's wallet ledger.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct LedgerEntry {
    pub id: Uuid,
    /// Negative for a debit.
    pub amount_minor: i64,
    /// `top_up`, `message_debit`, `message_refund` or `adjustment`.
    pub reason: String,
    pub message_id: Option<Uuid>,
    pub created_at: i64,
}

/// The smallest UUID v7 of millisecond `ms` (ids are v7, so `id >= floor(t)` is "created at
/// or after `t`" for the index on `(org_id, id)`).
fn v7_floor(ms: i64) -> Uuid {
    Uuid::from_u128(u128::from(ms.max(0) as u64) << 80)
}

impl Db {
    /// The organisation's messages created at or after `since` (epoch ms), counted by
    /// number, status and failure code. Both bounds are given — on the id (UUID v7, for an
    /// index on `(org_id, id)`) and on `created_at` (for one on `(org_id, created_at)`) —
    /// so whichever index the table has bounds the scan to the window.
    pub async fn message_counts_since(
        &self,
        org_id: Uuid,
        since: i64,
    ) -> Result<Vec<MessageCount>> {
        const SQL: &str = "SELECT phone_number_id, status, failure_code, COUNT(*) AS count \
             FROM messages WHERE org_id = $1 AND id >= $2 AND created_at >= $3 \
             GROUP BY phone_number_id, status, failure_code";
        let rows = with_pool!(self, pool => sqlx::query_as::<_, MessageCount>(SQL)
            .bind(org_id)
            .bind(v7_floor(since))
            .bind(since)
            .fetch_all(pool)
            .await)?;
        Ok(rows)
    }

    /// Every webhook subscription of the organisation (oldest first) with its failed
    /// attempts and failed deliveries since `since`; the per-subscription indexes of the
    /// attempt log and of the deliveries bound each count.
    pub async fn webhook_health_since(
        &self,
        org_id: Uuid,
        since: i64,
    ) -> Result<Vec<SubscriptionHealth>> {
        const SQL: &str = "SELECT s.id, s.url, s.enabled, s.disabled_reason, \
             (SELECT COUNT(*) FROM webhook_attempts a WHERE a.subscription_id = s.id \
                AND a.created_at >= $2 AND a.status = 'failed') AS failed_attempts, \
             (SELECT COUNT(*) FROM webhook_deliveries d WHERE d.subscription_id = s.id \
                AND d.status = 'failed' AND d.updated_at >= $2) AS failed_deliveries, \
             (SELECT MAX(a.created_at) FROM webhook_attempts a WHERE a.subscription_id = s.id \
                AND a.created_at >= $2 AND a.status = 'failed') AS last_failure_at \
             FROM webhook_subscriptions s WHERE s.org_id = $1 AND s.kind = 'webhook' \
             ORDER BY s.created_at, s.id";
        let rows = with_pool!(self, pool => sqlx::query_as::<_, SubscriptionHealth>(SQL)
            .bind(org_id)
            .bind(since)
            .fetch_all(pool)
            .await)?;
        Ok(rows)
    }

    /// The organisation's latest `limit` wallet ledger entries, newest first (ids are v7).
    pub async fn list_wallet_ledger(&self, org_id: Uuid, limit: i64) -> Result<Vec<LedgerEntry>> {
        const SQL: &str = "SELECT id, amount_minor, reason, message_id, created_at \
             FROM wallet_ledger WHERE org_id = $1 ORDER BY id DESC LIMIT $2";
        let rows = with_pool!(self, pool => sqlx::query_as::<_, LedgerEntry>(SQL)
            .bind(org_id)
            .bind(limit)
            .fetch_all(pool)
            .await)?;
        Ok(rows)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_floor_sorts_before_every_id_of_its_millisecond() {
        let id = Uuid::now_v7();
        let ms = i64::try_from(id.get_timestamp().unwrap().to_unix().0).unwrap() * 1000
            + i64::from(id.get_timestamp().unwrap().to_unix().1 / 1_000_000);
        assert!(v7_floor(ms) <= id);
        assert!(v7_floor(ms + 1) > id);
        assert_eq!(v7_floor(-5), Uuid::nil());
    }
}
