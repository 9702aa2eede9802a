//! Plan count limits, kept atomically: a create that must stay within a limit counts and
//! inserts in one transaction that holds the organisation's row lock, so two concurrent
//! creates at `limit - 1` cannot both pass (a plain count-then-insert let two or three in).

use uuid::Uuid;

use crate::db::{Db, Tx, with_pool, with_tx};
use crate::error::Result;

/// What a plan count limit counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Counted {
    Contacts,
    Templates,
    PhoneNumbers,
    /// Keys that are not revoked.
    ActiveApiKeys,
    WebhookSubscriptions,
    Campaigns,
}

impl Counted {
    fn count_sql(self) -> &'static str {
        match self {
            Counted::Contacts => "SELECT COUNT(*) FROM contacts WHERE org_id = $1",
            Counted::Templates => "SELECT COUNT(*) FROM templates WHERE org_id = $1",
            Counted::PhoneNumbers => "SELECT COUNT(*) FROM phone_numbers WHERE org_id = $1",
            Counted::WebhookSubscriptions => {
                // Streams (GET /events/stream) are not the customer's subscriptions.
                "SELECT COUNT(*) FROM webhook_subscriptions WHERE org_id = $1 AND kind = 'webhook'"
            }
            Counted::Campaigns => "SELECT COUNT(*) FROM campaigns WHERE org_id = $1",
            Counted::ActiveApiKeys => {
                "SELECT COUNT(*) FROM api_keys WHERE org_id = $1 AND revoked_at IS NULL"
            }
        }
    }
}

impl Tx {
    /// Counts the organisation's `what` after taking its row lock for the rest of the
    /// transaction (PostgreSQL; on SQLite `BEGIN IMMEDIATE` already serialises writers), so
    /// every create of the organisation that checks a limit this way queues here and sees
    /// the rows committed before it.
    pub async fn count_locked(&mut self, org_id: Uuid, what: Counted) -> Result<i64> {
        const LOCK: &str = "SELECT id FROM organisations WHERE id = $1 FOR NO KEY UPDATE";
        if self.backend() == crate::Backend::Postgres {
            with_tx!(self, conn => sqlx::query(LOCK).bind(org_id).execute(&mut **conn).await.map(|_| ()))?;
        }
        let n = with_tx!(self, conn => sqlx::query_scalar::<_, i64>(what.count_sql())
            .bind(org_id)
            .fetch_one(&mut **conn)
            .await)?;
        Ok(n)
    }
}

impl Db {
    /// The organisation's `what` as a plan count limit counts it, without a lock (what a
    /// page shows as "used").
    pub async fn count_rows(&self, org_id: Uuid, what: Counted) -> Result<i64> {
        let n = with_pool!(self, pool => sqlx::query_scalar::<_, i64>(what.count_sql())
            .bind(org_id)
            .fetch_one(pool)
            .await)?;
        Ok(n)
    }
}
