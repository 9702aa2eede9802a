//! A message's timeline entries (migration `0020_message_timeline`).
//!
//! Entries are written where the thing happens, in the transaction already running there:
//! [`Tx::add_timeline`] collects them and [`Tx::commit`] writes them all in one statement
//! (as the transaction's events), so a change and its entry commit together and a batch of
//! changes costs one insert however many entries. Queue writes that run without a [`Tx`]
//! (a retry, an unknown outcome, the sweep, webhook attempts) insert theirs in their own
//! transaction with [`insert_pg`] / [`insert_sqlite`].

use sqlx::{PgConnection, SqliteConnection};
use tern_domain::timeline::Detail;
use uuid::Uuid;

use crate::db::{Db, Tx, TxInner, with_pool};
use crate::error::Result;
use crate::sql::ROWS_PER_STATEMENT;

/// A stored entry.
#[derive(Debug, Clone, PartialEq)]
pub struct TimelineRow {
    pub message_id: Uuid,
    /// When Tern recorded it (epoch ms).
    pub at: i64,
    /// UUID v7 taken when the entry was made (order within one millisecond).
    pub id: Uuid,
    pub detail: Detail,
}

/// An entry to write: its detail already serialised.
#[derive(Debug, Clone)]
pub(crate) struct NewRow {
    message_id: Uuid,
    at: i64,
    id: Uuid,
    kind: &'static str,
    data: String,
}

impl NewRow {
    pub(crate) fn new(message_id: Uuid, at: i64, detail: &Detail) -> NewRow {
        NewRow {
            message_id,
            at,
            id: Uuid::now_v7(),
            kind: detail.kind(),
            // A detail is plain data: serialising it cannot fail.
            data: serde_json::to_string(detail).unwrap_or_default(),
        }
    }
}

/// Most entries a message's timeline is read with (a message has a few dozen; a
/// pathological one stops here rather than costing an unbounded read).
pub const MAX_ENTRIES: i64 = 2_000;

impl Tx {
    /// Adds an entry about message `message_id` at `at`, written at [`Tx::commit`] with the
    /// transaction's other entries in one statement.
    pub fn add_timeline(&mut self, message_id: Uuid, at: i64, detail: &Detail) {
        self.pending_timeline
            .push(NewRow::new(message_id, at, detail));
    }

    /// Writes the entries [`Tx::add_timeline`] collected (called by [`Tx::commit`]).
    pub(crate) async fn flush_timeline(&mut self) -> Result<()> {
        if self.pending_timeline.is_empty() {
            return Ok(());
        }
        let rows = std::mem::take(&mut self.pending_timeline);
        match &mut self.inner {
            TxInner::Postgres(conn) => insert_pg(conn, &rows).await,
            TxInner::Sqlite(conn) => insert_sqlite(conn, &rows).await,
        }
    }
}

/// Inserts `rows` on PostgreSQL: one prepared statement over arrays, whatever the count.
pub(crate) async fn insert_pg(conn: &mut PgConnection, rows: &[NewRow]) -> Result<()> {
    if rows.is_empty() {
        return Ok(());
    }
    sqlx::query(
        "INSERT INTO message_timeline (message_id, at, id, kind, data) \
         SELECT * FROM UNNEST($1::uuid[], $2::int8[], $3::uuid[], $4::text[], $5::text[])",
    )
    .bind(rows.iter().map(|r| r.message_id).collect::<Vec<_>>())
    .bind(rows.iter().map(|r| r.at).collect::<Vec<_>>())
    .bind(rows.iter().map(|r| r.id).collect::<Vec<_>>())
    .bind(rows.iter().map(|r| r.kind).collect::<Vec<_>>())
    .bind(rows.iter().map(|r| r.data.as_str()).collect::<Vec<_>>())
    .execute(conn)
    .await?;
    Ok(())
}

/// Inserts `rows` on SQLite: multi-row `VALUES`, one statement a chunk. Each statement is a
/// round trip to the connection's SQLite thread (sqlx hands it over a channel), which costs
/// more than the rows, so a batch's entries go in as few statements as possible; only the
/// counts that recur are kept prepared ([`crate::sql::recurs`]).
pub(crate) async fn insert_sqlite(conn: &mut SqliteConnection, rows: &[NewRow]) -> Result<()> {
    for chunk in rows.chunks(ROWS_PER_STATEMENT) {
        let mut q = sqlx::QueryBuilder::new(
            "INSERT INTO message_timeline (message_id, at, id, kind, data) ",
        );
        q.push_values(chunk, |mut b, r| {
            b.push_bind(r.message_id)
                .push_bind(r.at)
                .push_bind(r.id)
                .push_bind(r.kind)
                .push_bind(r.data.as_str());
        });
        q.build()
            .persistent(crate::sql::recurs(chunk.len()))
            .execute(&mut *conn)
            .await?;
    }
    Ok(())
}

impl Db {
    /// Adds one entry in a transaction of its own (a thing that happened with no other
    /// write to join: a replay answered, a failed upload).
    pub async fn add_timeline(&self, message_id: Uuid, at: i64, detail: &Detail) -> Result<()> {
        let mut tx = self.begin().await?;
        tx.add_timeline(message_id, at, detail);
        tx.commit().await
    }

    /// The stored entries of message `message_id`, oldest first (at most [`MAX_ENTRIES`]).
    /// The caller checks first that the message is the organisation's. An entry this
    /// version cannot read (written by a newer one) is skipped.
    pub async fn timeline_rows(&self, message_id: Uuid) -> Result<Vec<TimelineRow>> {
        let rows = with_pool!(self, pool => sqlx::query_as::<_, (i64, Uuid, String)>(
                "SELECT at, id, data FROM message_timeline WHERE message_id = $1 \
                 ORDER BY at, id LIMIT $2")
            .bind(message_id)
            .bind(MAX_ENTRIES)
            .fetch_all(pool)
            .await)?;
        Ok(rows
            .into_iter()
            .filter_map(|(at, id, data)| {
                let detail = serde_json::from_str::<Detail>(&data)
                    .map_err(
                        |e| tracing::warn!(%message_id, error = %e, "timeline entry unreadable"),
                    )
                    .ok()?;
                Some(TimelineRow {
                    message_id,
                    at,
                    id,
                    detail,
                })
            })
            .collect())
    }

    /// Who accepted message `message_id` of the organisation: the key (id and current
    /// name), the request id and the Idempotency-Key. `None` when the message is not the
    /// organisation's.
    pub async fn message_origin(&self, org_id: Uuid, message_id: Uuid) -> Result<Option<Origin>> {
        let row = with_pool!(self, pool => sqlx::query_as::<_, Origin>(
                "SELECT m.api_key_id, k.name AS key_name, m.request_id, m.idempotency_key \
                 FROM messages m LEFT JOIN api_keys k ON k.id = m.api_key_id \
                 WHERE m.org_id = $1 AND m.id = $2")
            .bind(org_id)
            .bind(message_id)
            .fetch_optional(pool)
            .await)?;
        Ok(row)
    }
}

/// Who accepted an outbound message ([`Db::message_origin`]); every field NULL for
/// campaign and inbound messages.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct Origin {
    pub api_key_id: Option<Uuid>,
    /// The key's current name.
    pub key_name: Option<String>,
    pub request_id: Option<String>,
    pub idempotency_key: Option<String>,
}
