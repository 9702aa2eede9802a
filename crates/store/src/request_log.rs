//! The request log: one row per request to the public API (APP.md §4), written in batches
//! by `tern_core::request_log`'s writer ([`Db::insert_request_log`]), read by the app newest
//! first, pruned by age. The row's id is the request id, a UUID v7: ids sort by time, so the
//! retention deletes a range of the primary key.

use uuid::Uuid;

use crate::db::{Db, Tx, with_pool, with_tx};
use crate::error::Result;
use crate::sql::split_after;

/// One request as recorded. Never a request body, never a key value or secret.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct RequestLogRow {
    /// The request id (`X-Request-Id`).
    pub id: Uuid,
    /// The organisation of the key; `None` when the request did not authenticate.
    pub org_id: Option<Uuid>,
    /// When the request arrived (epoch ms).
    pub at: i64,
    pub method: String,
    /// The route template below the API's prefix (`/messages/{message_id}`); `None` when
    /// no operation matched.
    pub route: Option<String>,
    /// The path below the API's prefix, without the query.
    pub path: String,
    pub status: i64,
    /// The `code` of the error body.
    pub error_code: Option<String>,
    pub key_id: Option<Uuid>,
    pub key_name: Option<String>,
    pub key_prefix: Option<String>,
    pub latency_ms: i64,
    /// The client's address (the TCP peer).
    pub address: Option<String>,
    pub user_agent: Option<String>,
    pub idempotency_key: Option<String>,
    /// Tern's JSON error body of a 4xx/5xx answer.
    pub error_body: Option<String>,
    /// The message the request accepted (POST /messages).
    pub message_id: Option<Uuid>,
}

/// What narrows an organisation's log; `None` is "any".
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RequestLogFilter {
    pub key_id: Option<Uuid>,
    /// Statuses from `.0` up to but not including `.1` (e.g. 400..500).
    pub status: Option<(i64, i64)>,
    pub error_code: Option<String>,
    pub method: Option<String>,
    pub route: Option<String>,
    /// From this instant (epoch ms, inclusive).
    pub since: Option<i64>,
    /// Before this instant (epoch ms, exclusive).
    pub until: Option<i64>,
}

macro_rules! request_log_columns {
    () => {
        "id, org_id, at, method, route, path, status, error_code, key_id, key_name, key_prefix, \
         latency_ms, address, user_agent, idempotency_key, error_body, message_id"
    };
}

/// Rows per statement: 17 columns each stays well under SQLite's 32,766 parameters.
const ROWS_PER_INSERT: usize = 500;

impl Tx {
    /// Records `rows` (multi-row inserts of up to 500). A row whose id is already recorded
    /// is left as it is.
    pub async fn insert_request_log(&mut self, rows: &[RequestLogRow]) -> Result<()> {
        for chunk in rows.chunks(ROWS_PER_INSERT) {
            with_tx!(self, conn => {
                let mut q = sqlx::QueryBuilder::new(concat!(
                    "INSERT INTO request_log (",
                    request_log_columns!(),
                    ") "
                ));
                q.push_values(chunk, |mut b, r| {
                    b.push_bind(r.id)
                        .push_bind(r.org_id)
                        .push_bind(r.at)
                        .push_bind(&r.method)
                        .push_bind(&r.route)
                        .push_bind(&r.path)
                        .push_bind(r.status)
                        .push_bind(&r.error_code)
                        .push_bind(r.key_id)
                        .push_bind(&r.key_name)
                        .push_bind(&r.key_prefix)
                        .push_bind(r.latency_ms)
                        .push_bind(&r.address)
                        .push_bind(&r.user_agent)
                        .push_bind(&r.idempotency_key)
                        .push_bind(&r.error_body)
                        .push_bind(r.message_id);
                });
                q.push(" ON CONFLICT (id) DO NOTHING");
                q.build().persistent(false).execute(&mut **conn).await.map(drop)
            })?;
        }
        Ok(())
    }
}

impl Db {
    /// Records `rows` in one transaction of their own.
    pub async fn insert_request_log(&self, rows: &[RequestLogRow]) -> Result<()> {
        let mut tx = self.begin().await?;
        tx.insert_request_log(rows).await?;
        tx.commit().await
    }

    /// The organisation's requests matching `filter`, newest first (`at`, then id),
    /// strictly before the keyset position `before`, at most `limit`.
    pub async fn list_request_log(
        &self,
        org_id: Uuid,
        filter: &RequestLogFilter,
        before: Option<(i64, Uuid)>,
        limit: i64,
    ) -> Result<Vec<RequestLogRow>> {
        const SQL: &str = concat!(
            "SELECT ",
            request_log_columns!(),
            " FROM request_log WHERE org_id = $1 \
               AND ($2 IS NULL OR key_id = $2) \
               AND ($3 IS NULL OR (status >= $3 AND status < $4)) \
               AND ($5 IS NULL OR error_code = $5) \
               AND ($6 IS NULL OR method = $6) \
               AND ($7 IS NULL OR route = $7) \
               AND ($8 IS NULL OR at >= $8) \
               AND ($9 IS NULL OR at < $9) \
               AND ($10 IS NULL OR at < $10 OR (at = $10 AND id < $11)) \
             ORDER BY at DESC, id DESC LIMIT $12"
        );
        let (before_at, before_id) = split_after(before);
        let (lo, hi) = split_after(filter.status);
        let rows = with_pool!(self, pool => sqlx::query_as::<_, RequestLogRow>(SQL)
            .bind(org_id)
            .bind(filter.key_id)
            .bind(lo)
            .bind(hi)
            .bind(&filter.error_code)
            .bind(&filter.method)
            .bind(&filter.route)
            .bind(filter.since)
            .bind(filter.until)
            .bind(before_at)
            .bind(before_id)
            .bind(limit)
            .fetch_all(pool)
            .await)?;
        Ok(rows)
    }

    /// One request by its id, whatever its organisation (the caller checks it).
    pub async fn get_request_log(&self, id: Uuid) -> Result<Option<RequestLogRow>> {
        const SQL: &str = concat!(
            "SELECT ",
            request_log_columns!(),
            " FROM request_log WHERE id = $1"
        );
        let row = with_pool!(self, pool => sqlx::query_as::<_, RequestLogRow>(SQL)
            .bind(id)
            .fetch_optional(pool)
            .await)?;
        Ok(row)
    }

    /// Deletes up to `limit` requests whose id is below `cutoff_id` (a UUID v7 of the
    /// cut-off instant, see [`v7_floor`]): the oldest, in one bounded statement. Answers how
    /// many went.
    pub async fn prune_request_log(&self, cutoff_id: Uuid, limit: i64) -> Result<u64> {
        // SQLite: in this process's write turn, not SQLite's busy handler.
        let _turn = self.write_turn().await?;
        let n = with_pool!(self, pool => sqlx::query(
                "DELETE FROM request_log WHERE id IN ( \
                   SELECT id FROM request_log WHERE id < $1 ORDER BY id LIMIT $2)")
            .bind(cutoff_id)
            .bind(limit)
            .execute(pool)
            .await
            .map(|r| r.rows_affected()))?;
        Ok(n)
    }
}

/// The smallest UUID v7 of the millisecond `ms`: every v7 id made at or after `ms` is
/// greater or equal, every one made before is smaller (ids compare as bytes on both
/// backends, and a v7 id starts with its 48-bit big-endian millisecond).
pub fn v7_floor(ms: i64) -> Uuid {
    let ms = u64::try_from(ms.max(0)).unwrap_or(0) & 0xFFFF_FFFF_FFFF;
    let mut b = [0u8; 16];
    b[..6].copy_from_slice(&ms.to_be_bytes()[2..]);
    b[6] = 0x70; // version 7
    b[8] = 0x80; // RFC 4122 variant
    Uuid::from_bytes(b)
}

#[cfg(test)]
mod tests {
    use super::v7_floor;

    #[test]
    fn the_floor_orders_with_real_v7_ids() {
        let now = uuid::Uuid::now_v7();
        let mut head = [0u8; 8];
        head[2..].copy_from_slice(&now.as_bytes()[..6]);
        let ms = i64::from_be_bytes(head);
        assert!(v7_floor(ms) <= now);
        assert!(v7_floor(ms + 1) > now);
        assert_eq!(v7_floor(ms).get_version_num(), 7);
    }
}
