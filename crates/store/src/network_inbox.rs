//! The network inbox (raw signed webhook batches, stored before answering 200 and processed
//! by workers with leases) and the dedupe keys of inbound network events.

use uuid::Uuid;

use crate::db::{Backend, BeginWrite as _, Db, with_pool};
use crate::error::{Result, StoreError};

/// A claimed inbox batch. The claim is a lease: if the worker neither marks it processed nor
/// failed before the lease ends, another worker claims it again.
#[derive(Debug, Clone, PartialEq, sqlx::FromRow)]
pub struct InboxItem {
    pub id: Uuid,
    /// The raw request body, exactly as received (its signature was checked on receipt).
    pub body: Vec<u8>,
    pub received_at: i64,
    /// Claims so far, including this one.
    pub attempts: i64,
}

/// An item of a batch that could not be applied after the batch's retries, kept apart
/// ([`Db::set_aside_inbox`]) while the rest of the batch was applied.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct SetAside {
    pub inbox_id: Uuid,
    /// What the item is (e.g. `message`, `status`).
    pub kind: String,
    /// Which one within its batch (e.g. its wamid).
    pub item_key: String,
    /// The item as received.
    pub item: Vec<u8>,
    /// The last failure.
    pub error: String,
    /// Attempts of its batch.
    pub attempts: i64,
    pub created_at: i64,
}

/// Claims the oldest due batches: `$1` limit, `$2` now, `$3` lease end.
macro_rules! claim_sql {
    ($($lock:literal)?) => {
        concat!(
            "UPDATE network_inbox SET locked_until = $3, attempts = attempts + 1 \
             WHERE id IN (SELECT id FROM network_inbox \
                          WHERE processed_at IS NULL AND (locked_until IS NULL OR locked_until < $2) \
                          ORDER BY received_at, id LIMIT $1", $(" ", $lock,)? ") \
             RETURNING id, body, received_at, attempts"
        )
    };
}

impl Db {
    /// Stores a received batch and wakes this process's inbox worker (alone: the intake
    /// groups them, see [`crate::InboxQueue`]). `Conflict { "network_inbox_pkey" }` on a
    /// duplicate id.
    pub async fn insert_inbox(
        &self,
        id: Uuid,
        body: &[u8],
        signature: &str,
        received_at: i64,
    ) -> Result<()> {
        self.insert_inbox_many(&[crate::NewInboxItem {
            id,
            body: body.to_vec(),
            signature: signature.to_string(),
            received_at,
        }])
        .await
    }

    /// Claims up to `limit` unprocessed batches whose lease (or retry delay) has ended, oldest
    /// first: sets `locked_until = now + lease_ms` and counts the attempt. Safe with any
    /// number of workers and processes: a batch is never claimed by two at once
    /// (PostgreSQL: `FOR UPDATE SKIP LOCKED`; SQLite: `BEGIN IMMEDIATE`).
    pub async fn claim_inbox(&self, limit: i64, lease_ms: i64, now: i64) -> Result<Vec<InboxItem>> {
        let sql = match self.backend() {
            Backend::Sqlite => claim_sql!(),
            Backend::Postgres => claim_sql!("FOR UPDATE SKIP LOCKED"),
        };
        let mut items = with_pool!(self, pool => {
            let mut tx = pool.begin_write().await?;
            let items = sqlx::query_as::<_, InboxItem>(sql)
                .bind(limit)
                .bind(now)
                .bind(now + lease_ms)
                .fetch_all(&mut *tx)
                .await?;
            tx.commit().await?;
            items
        });
        // RETURNING does not keep the sub-select's order.
        items.sort_by_key(|item| (item.received_at, item.id));
        Ok(items)
    }

    /// Marks a batch processed at `at` (it is never claimed again). `NotFound` if missing.
    ///
    /// The lease is not checked: a worker whose lease ran out may finish after another one
    /// claimed the batch, so processing a batch must be idempotent (see
    /// [`Db::remember_network_event`]).
    pub async fn mark_inbox_processed(&self, id: Uuid, at: i64) -> Result<()> {
        // SQLite: in this process's write turn, not SQLite's busy handler.
        let _turn = self.write_turn().await?;
        let done = with_pool!(self, pool => sqlx::query(
                "UPDATE network_inbox SET processed_at = $2, locked_until = NULL, error = NULL \
                 WHERE id = $1")
            .bind(id)
            .bind(at)
            .execute(pool)
            .await
            .map(|r| r.rows_affected()))?;
        if done == 0 {
            return Err(StoreError::NotFound);
        }
        Ok(())
    }

    /// Marks batches processed at `at` in one statement (one commit for a pass's batches of
    /// statuses). Ids that are missing are skipped; as [`Db::mark_inbox_processed`],
    /// leases are not checked.
    pub async fn mark_inbox_processed_many(&self, ids: &[Uuid], at: i64) -> Result<()> {
        if ids.is_empty() {
            return Ok(());
        }
        // In a write transaction: on SQLite it takes this process's write turn instead of
        // SQLite's busy handler, which sleeps in steps of up to 100 ms.
        let mut tx = self.begin().await?;
        crate::db::with_tx!(tx, conn => {
            let mut q = sqlx::QueryBuilder::new(
                "UPDATE network_inbox SET processed_at = ");
            q.push_bind(at);
            q.push(", locked_until = NULL, error = NULL WHERE id IN (");
            let mut list = q.separated(", ");
            for id in ids {
                list.push_bind(*id);
            }
            q.push(")");
            q.build()
                .persistent(crate::sql::recurs(ids.len()))
                .execute(&mut **conn)
                .await
                .map(|r| r.rows_affected())
        })?;
        tx.commit().await
    }

    /// Records a failed attempt: keeps `error` and makes the batch claimable again from
    /// `retry_at`. A batch already processed is left processed. `NotFound` if missing.
    pub async fn mark_inbox_failed(&self, id: Uuid, error: &str, retry_at: i64) -> Result<()> {
        // SQLite: in this process's write turn, not SQLite's busy handler.
        let _turn = self.write_turn().await?;
        let done = with_pool!(self, pool => sqlx::query(
                "UPDATE network_inbox SET error = $2, \
                 locked_until = CASE WHEN processed_at IS NULL THEN $3 ELSE NULL END \
                 WHERE id = $1")
            .bind(id)
            .bind(error)
            .bind(retry_at)
            .execute(pool)
            .await
            .map(|r| r.rows_affected()))?;
        if done == 0 {
            return Err(StoreError::NotFound);
        }
        Ok(())
    }

    /// Keeps `items` of batch `id` apart and marks the batch processed at `at`, in one
    /// transaction: the rest of the batch was applied, these could not be. An item already
    /// kept (a repeated call) is left as it is. `NotFound` if the batch is missing.
    pub async fn set_aside_inbox(&self, id: Uuid, items: &[SetAside], at: i64) -> Result<()> {
        with_pool!(self, pool => {
            let mut tx = pool.begin_write().await?;
            for i in items {
                sqlx::query(
                        "INSERT INTO network_inbox_set_aside \
                         (inbox_id, item_key, kind, item, error, attempts, created_at) \
                         VALUES ($1, $2, $3, $4, $5, $6, $7) \
                         ON CONFLICT (inbox_id, kind, item_key) DO NOTHING")
                    .bind(id)
                    .bind(&i.item_key)
                    .bind(&i.kind)
                    .bind(&i.item)
                    .bind(&i.error)
                    .bind(i.attempts)
                    .bind(at)
                    .execute(&mut *tx)
                    .await?;
            }
            let done = sqlx::query(
                    "UPDATE network_inbox SET processed_at = $2, locked_until = NULL, \
                     error = NULL WHERE id = $1")
                .bind(id)
                .bind(at)
                .execute(&mut *tx)
                .await?
                .rows_affected();
            if done == 0 {
                // Rolled back: nothing is kept for a batch that does not exist.
                return Err(StoreError::NotFound);
            }
            tx.commit().await?;
        });
        Ok(())
    }

    /// The items set aside, oldest first, at most `limit`.
    pub async fn list_set_aside_inbox(&self, limit: i64) -> Result<Vec<SetAside>> {
        let rows = with_pool!(self, pool => sqlx::query_as::<_, SetAside>(
                "SELECT inbox_id, kind, item_key, item, error, attempts, created_at \
                 FROM network_inbox_set_aside ORDER BY created_at, inbox_id, kind, item_key \
                 LIMIT $1")
            .bind(limit)
            .fetch_all(pool)
            .await)?;
        Ok(rows)
    }

    /// Batches not processed yet (claimed or not): a backlog gauge.
    pub async fn count_unprocessed_inbox(&self) -> Result<i64> {
        let n = with_pool!(self, pool => sqlx::query_scalar::<_, i64>(
                "SELECT COUNT(*) FROM network_inbox WHERE processed_at IS NULL")
            .fetch_one(pool)
            .await)?;
        Ok(n)
    }

    /// Deletes batches processed before `older_than`; returns how many.
    pub async fn prune_processed_inbox(&self, older_than: i64) -> Result<u64> {
        // SQLite: in this process's write turn, not SQLite's busy handler.
        let _turn = self.write_turn().await?;
        let n = with_pool!(self, pool => sqlx::query(
                "DELETE FROM network_inbox WHERE processed_at IS NOT NULL AND processed_at < $1")
            .bind(older_than)
            .execute(pool)
            .await
            .map(|r| r.rows_affected()))?;
        Ok(n)
    }

    /// Remembers an inbound network event key (e.g. `"<wamid>:delivered"`) seen at `at`.
    /// `true` the first time the key is seen, `false` after (also for racing callers: exactly
    /// one gets `true`). Keys are kept until [`Db::prune_network_event_keys`].
    ///
    /// Remember a key once the event's effects are stored, or call
    /// [`Db::forget_network_event`] when handling it fails, so a retry is not dropped.
    pub async fn remember_network_event(&self, key: &str, at: i64) -> Result<bool> {
        // SQLite: in this process's write turn, not SQLite's busy handler.
        let _turn = self.write_turn().await?;
        let inserted = with_pool!(self, pool => sqlx::query(
                "INSERT INTO network_event_keys (key, created_at) VALUES ($1, $2) \
                 ON CONFLICT (key) DO NOTHING")
            .bind(key)
            .bind(at)
            .execute(pool)
            .await
            .map(|r| r.rows_affected()))?;
        Ok(inserted == 1)
    }

    /// Forgets a key remembered by [`Db::remember_network_event`] (its handling failed).
    pub async fn forget_network_event(&self, key: &str) -> Result<()> {
        // SQLite: in this process's write turn, not SQLite's busy handler.
        let _turn = self.write_turn().await?;
        with_pool!(self, pool => sqlx::query("DELETE FROM network_event_keys WHERE key = $1")
            .bind(key)
            .execute(pool)
            .await
            .map(|r| r.rows_affected()))?;
        Ok(())
    }

    /// Deletes event keys remembered before `older_than`; returns how many.
    pub async fn prune_network_event_keys(&self, older_than: i64) -> Result<u64> {
        // SQLite: in this process's write turn, not SQLite's busy handler.
        let _turn = self.write_turn().await?;
        let n = with_pool!(self, pool => sqlx::query(
                "DELETE FROM network_event_keys WHERE created_at < $1")
            .bind(older_than)
            .execute(pool)
            .await
            .map(|r| r.rows_affected()))?;
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A one-statement write outside a transaction queues in this process's write turn on
    /// SQLite (first come, first served) instead of meeting the other writers in SQLite's
    /// busy handler, where it was starved for 834 ms at the launch of a campaign.
    #[tokio::test]
    async fn marking_a_batch_processed_waits_for_the_write_turn() {
        let (db, _dir) = crate::testkit::fresh_sqlite().await;
        let id = Uuid::now_v7();
        db.insert_inbox(id, b"{}", "sig", 1).await.unwrap();
        let turn = db.write_turn().await.unwrap();
        assert!(turn.is_some(), "a file-backed database has write turns");
        let marking = tokio::spawn({
            let db = db.clone();
            async move { db.mark_inbox_processed(id, 2).await }
        });
        // SQLite's lock is free: only the turn can hold the write back.
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        assert!(!marking.is_finished(), "written outside the write turn");
        drop(turn);
        marking.await.unwrap().unwrap();
    }
}
