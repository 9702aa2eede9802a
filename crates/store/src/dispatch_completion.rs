//! The final outcomes of many claims written together (the dispatcher records a batch of
//! the network's answers at once): the guarded write of `Tx::complete_dispatch`, for a list.

use sqlx::types::Json;
use uuid::Uuid;

use crate::db::{Tx, TxInner};
use crate::dispatch::{DispatchLease, DispatchWrite, holds_lease};
use crate::error::Result;
use crate::messages::StatusChange;
use crate::sql::{ROWS_PER_STATEMENT, bump_updated_at};
use tern_domain::message::Status;

/// One claim's final outcome for `status_writes().complete_dispatches` (the arguments of
/// `complete_dispatch`).
#[derive(Debug, Clone, Copy)]
pub struct DispatchCompletion<'a> {
    pub id: Uuid,
    pub lease: &'a DispatchLease,
    pub expected_status: Status,
    pub expected_updated_at: i64,
    pub change: &'a StatusChange,
}

impl Tx {
    /// [`Tx::complete_dispatch`] for many claims, answered in `items`' order. On PostgreSQL
    /// the rows are locked in id order by one statement (the order every status writer
    /// locks in) and written by one more: round trips, not rows, were the cost, since 64
    /// sequential updates held a batch's transaction for about a second while an API burst
    /// kept the machine busy. SQLite gets one `UPDATE … FROM (VALUES …)` a chunk: a statement
    /// per claim was a round trip to the connection's thread each (issue 33, ninth session).
    pub(crate) async fn complete_dispatches(
        &mut self,
        items: &[DispatchCompletion<'_>],
        at: i64,
    ) -> Result<Vec<DispatchWrite>> {
        if items.is_empty() {
            return Ok(Vec::new());
        }
        let applied: Vec<Uuid> = match &mut self.inner {
            TxInner::Postgres(conn) => {
                let mut ids: Vec<Uuid> = items.iter().map(|c| c.id).collect();
                ids.sort_unstable();
                sqlx::query("SELECT id FROM messages WHERE id = ANY($1) ORDER BY id FOR UPDATE")
                    .bind(&ids)
                    .execute(&mut **conn)
                    .await?;
                let failures: Vec<Option<String>> = items
                    .iter()
                    .map(|c| {
                        c.change
                            .failure
                            .as_ref()
                            .and_then(|f| serde_json::to_string(f).ok())
                    })
                    .collect();
                let applied: Vec<Uuid> = sqlx::query_scalar(concat!(
                    "UPDATE messages SET status = t.status, wamid = COALESCE(messages.wamid, t.wamid), \
                     sent_at = t.sent_at, delivered_at = t.delivered_at, read_at = t.read_at, \
                     failed_at = t.failed_at, failure_code = t.failure_code, failure = t.failure::jsonb, \
                     dispatch_state = NULL, next_attempt_at = NULL, locked_until = NULL, updated_at = ",
                    bump_updated_at!("messages", "$14"),
                    " FROM UNNEST($1::uuid[], $2::text[], $3::text[], $4::int8[], $5::int8[], \
                       $6::int8[], $7::int8[], $8::text[], $9::text[], $10::text[], $11::int8[], \
                       $12::text[], $13::int8[]) AS t(id, status, wamid, sent_at, delivered_at, \
                       read_at, failed_at, failure_code, failure, owner, attempt, expected_status, \
                       expected_updated_at) \
                     WHERE messages.id = t.id AND messages.lease_owner = t.owner \
                       AND messages.attempts = t.attempt AND messages.status = t.expected_status \
                       AND messages.updated_at = t.expected_updated_at \
                     RETURNING messages.id"
                ))
                .bind(items.iter().map(|c| c.id).collect::<Vec<_>>())
                .bind(
                    items
                        .iter()
                        .map(|c| c.change.status.as_str())
                        .collect::<Vec<_>>(),
                )
                .bind(
                    items
                        .iter()
                        .map(|c| c.change.wamid.as_deref())
                        .collect::<Vec<_>>(),
                )
                .bind(items.iter().map(|c| c.change.sent_at).collect::<Vec<_>>())
                .bind(
                    items
                        .iter()
                        .map(|c| c.change.delivered_at)
                        .collect::<Vec<_>>(),
                )
                .bind(items.iter().map(|c| c.change.read_at).collect::<Vec<_>>())
                .bind(items.iter().map(|c| c.change.failed_at).collect::<Vec<_>>())
                .bind(
                    items
                        .iter()
                        .map(|c| c.change.failure_code.as_deref())
                        .collect::<Vec<_>>(),
                )
                .bind(&failures)
                .bind(
                    items
                        .iter()
                        .map(|c| c.lease.owner.as_str())
                        .collect::<Vec<_>>(),
                )
                .bind(items.iter().map(|c| c.lease.attempt).collect::<Vec<_>>())
                .bind(
                    items
                        .iter()
                        .map(|c| c.expected_status.as_str())
                        .collect::<Vec<_>>(),
                )
                .bind(
                    items
                        .iter()
                        .map(|c| c.expected_updated_at)
                        .collect::<Vec<_>>(),
                )
                .bind(at)
                .fetch_all(&mut **conn)
                .await?;
                applied
            }
            TxInner::Sqlite(conn) => {
                let mut applied = Vec::with_capacity(items.len());
                for chunk in items.chunks(ROWS_PER_STATEMENT) {
                    let mut q = sqlx::QueryBuilder::new(concat!(
                        "UPDATE messages SET status = t.column2, \
                         wamid = COALESCE(messages.wamid, t.column3), sent_at = t.column4, \
                         delivered_at = t.column5, read_at = t.column6, failed_at = t.column7, \
                         failure_code = t.column8, failure = t.column9, dispatch_state = NULL, \
                         next_attempt_at = NULL, locked_until = NULL, updated_at = ",
                        bump_updated_at!("messages", "t.column14"),
                        " FROM ("
                    ));
                    q.push_values(chunk, |mut row, c| {
                        row.push_bind(c.id)
                            .push_bind(c.change.status.as_str())
                            .push_bind(c.change.wamid.as_deref())
                            .push_bind(c.change.sent_at)
                            .push_bind(c.change.delivered_at)
                            .push_bind(c.change.read_at)
                            .push_bind(c.change.failed_at)
                            .push_bind(c.change.failure_code.as_deref())
                            .push_bind(c.change.failure.as_ref().map(Json))
                            .push_bind(c.lease.owner.as_str())
                            .push_bind(c.lease.attempt)
                            .push_bind(c.expected_status.as_str())
                            .push_bind(c.expected_updated_at)
                            .push_bind(at);
                    });
                    q.push(
                        ") AS t WHERE messages.id = t.column1 AND messages.lease_owner = t.column10 \
                         AND messages.attempts = t.column11 AND messages.status = t.column12 \
                         AND messages.updated_at = t.column13 RETURNING messages.id",
                    );
                    applied.extend(
                        q.build_query_scalar::<Uuid>()
                            .persistent(false)
                            .fetch_all(&mut **conn)
                            .await?,
                    );
                }
                applied
            }
        };
        let applied: std::collections::HashSet<Uuid> = applied.into_iter().collect();
        let mut out = Vec::with_capacity(items.len());
        for c in items {
            out.push(if applied.contains(&c.id) {
                DispatchWrite::Applied
            } else if holds_lease!(self, c.id, c.lease) {
                DispatchWrite::Moved
            } else {
                DispatchWrite::LeaseLost
            });
        }
        Ok(out)
    }
}
