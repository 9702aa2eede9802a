//! The status writes of many messages in one statement (the inbox applies the statuses of
//! the webhooks it claimed together): the same guarded write as
//! `Tx::update_message_status`, for a list. One status per webhook means one message per
//! report, so a pass of 100 webhooks was 100 round trips here (on PostgreSQL this saved
//! about 6 % of the status path; docs/performance.md, issue 33's third session).

use std::collections::HashSet;

use uuid::Uuid;

use crate::db::{Tx, TxInner};
use crate::error::Result;
use crate::messages::StatusChange;
use crate::sql::{ROWS_PER_STATEMENT, bump_updated_at};
use tern_domain::message::Status;

/// One message's status write: applied only if the message is still in `expected_status`
/// with the `expected_updated_at` it was read with.
#[derive(Debug, Clone, Copy)]
pub struct StatusWrite<'a> {
    pub id: Uuid,
    pub expected_status: Status,
    pub expected_updated_at: i64,
    pub change: &'a StatusChange,
}

/// The columns a status write sets, from `t` (the list) over `messages`. A message that
/// moved past `sending` has left the dispatch queue, even when its worker never recorded
/// the send call's answer (the webhook settled it).
macro_rules! set_columns {
    ($at:literal) => {
        concat!(
            "status = t.status, wamid = COALESCE(messages.wamid, t.wamid), \
             sent_at = t.sent_at, delivered_at = t.delivered_at, read_at = t.read_at, \
             failed_at = t.failed_at, failure_code = t.failure_code, failure = t.failure, \
             pricing = COALESCE(t.pricing, messages.pricing), \
             dispatch_state = CASE WHEN t.status IN ('accepted', 'sending') \
               THEN messages.dispatch_state ELSE NULL END, \
             next_attempt_at = CASE WHEN t.status IN ('accepted', 'sending') \
               THEN messages.next_attempt_at ELSE NULL END, \
             locked_until = CASE WHEN t.status IN ('accepted', 'sending') \
               THEN messages.locked_until ELSE NULL END, \
             updated_at = ",
            bump_updated_at!("messages", $at)
        )
    };
}

/// The guard: the message as it was read.
macro_rules! guard {
    () => {
        " WHERE messages.id = t.id AND messages.status = t.expected_status \
         AND messages.updated_at = t.expected_updated_at RETURNING messages.id"
    };
}

impl Tx {
    /// Writes each status change whose message is still as it was read; returns at each
    /// index whether it was written (`false`: someone else moved it first; the caller
    /// re-reads and decides again). On PostgreSQL the rows are locked in id order first
    /// (the order every status writer locks in).
    pub(crate) async fn update_message_statuses(
        &mut self,
        items: &[StatusWrite<'_>],
        at: i64,
    ) -> Result<Vec<bool>> {
        let mut written: HashSet<Uuid> = HashSet::with_capacity(items.len());
        for chunk in items.chunks(ROWS_PER_STATEMENT) {
            let failures: Vec<Option<String>> = chunk
                .iter()
                .map(|w| {
                    w.change
                        .failure
                        .as_ref()
                        .and_then(|f| serde_json::to_string(f).ok())
                })
                .collect();
            let prices: Vec<Option<String>> = chunk
                .iter()
                .map(|w| {
                    w.change
                        .pricing
                        .as_ref()
                        .and_then(|p| serde_json::to_string(p).ok())
                })
                .collect();
            match &mut self.inner {
                TxInner::Postgres(conn) => {
                    let mut ids: Vec<Uuid> = chunk.iter().map(|w| w.id).collect();
                    ids.sort_unstable();
                    sqlx::query(
                        "SELECT id FROM messages WHERE id = ANY($1) ORDER BY id FOR UPDATE",
                    )
                    .bind(&ids)
                    .execute(&mut **conn)
                    .await?;
                    let col = |f: fn(&StatusChange) -> Option<i64>| -> Vec<Option<i64>> {
                        chunk.iter().map(|w| f(w.change)).collect()
                    };
                    let rows: Vec<Uuid> = sqlx::query_scalar(concat!(
                        "UPDATE messages SET ",
                        set_columns!("$13"),
                        " FROM (SELECT id, status, wamid, sent_at, delivered_at, read_at, \
                           failed_at, failure_code, failure::jsonb AS failure, \
                           pricing::jsonb AS pricing, expected_status, expected_updated_at \
                           FROM UNNEST($1::uuid[], $2::text[], $3::text[], $4::int8[], \
                           $5::int8[], $6::int8[], $7::int8[], $8::text[], $9::text[], \
                           $10::text[], $11::text[], $12::int8[]) AS u(id, status, wamid, \
                           sent_at, delivered_at, read_at, failed_at, failure_code, failure, \
                           pricing, expected_status, expected_updated_at)) AS t",
                        guard!(),
                    ))
                    .bind(chunk.iter().map(|w| w.id).collect::<Vec<_>>())
                    .bind(
                        chunk
                            .iter()
                            .map(|w| w.change.status.as_str())
                            .collect::<Vec<_>>(),
                    )
                    .bind(
                        chunk
                            .iter()
                            .map(|w| w.change.wamid.as_deref())
                            .collect::<Vec<_>>(),
                    )
                    .bind(col(|c| c.sent_at))
                    .bind(col(|c| c.delivered_at))
                    .bind(col(|c| c.read_at))
                    .bind(col(|c| c.failed_at))
                    .bind(
                        chunk
                            .iter()
                            .map(|w| w.change.failure_code.as_deref())
                            .collect::<Vec<_>>(),
                    )
                    .bind(&failures)
                    .bind(&prices)
                    .bind(
                        chunk
                            .iter()
                            .map(|w| w.expected_status.as_str())
                            .collect::<Vec<_>>(),
                    )
                    .bind(
                        chunk
                            .iter()
                            .map(|w| w.expected_updated_at)
                            .collect::<Vec<_>>(),
                    )
                    .bind(at)
                    .fetch_all(&mut **conn)
                    .await?;
                    written.extend(rows);
                }
                TxInner::Sqlite(conn) => {
                    let mut q = sqlx::QueryBuilder::new(concat!(
                        "UPDATE messages SET ",
                        set_columns!("t.at"),
                        " FROM (SELECT column1 AS id, column2 AS status, column3 AS wamid, \
                           column4 AS sent_at, column5 AS delivered_at, column6 AS read_at, \
                           column7 AS failed_at, column8 AS failure_code, column9 AS failure, \
                           column10 AS pricing, column11 AS expected_status, \
                           column12 AS expected_updated_at, column13 AS at FROM (",
                    ));
                    q.push_values(
                        chunk.iter().zip(failures.iter().zip(&prices)),
                        |mut row, (w, (failure, price))| {
                            row.push_bind(w.id)
                                .push_bind(w.change.status.as_str())
                                .push_bind(w.change.wamid.as_deref())
                                .push_bind(w.change.sent_at)
                                .push_bind(w.change.delivered_at)
                                .push_bind(w.change.read_at)
                                .push_bind(w.change.failed_at)
                                .push_bind(w.change.failure_code.as_deref())
                                .push_bind(failure.as_deref())
                                .push_bind(price.as_deref())
                                .push_bind(w.expected_status.as_str())
                                .push_bind(w.expected_updated_at)
                                .push_bind(at);
                        },
                    );
                    q.push(")) AS t");
                    q.push(guard!());
                    let rows: Vec<Uuid> = q
                        .build_query_scalar()
                        .persistent(false)
                        .fetch_all(&mut **conn)
                        .await?;
                    written.extend(rows);
                }
            }
        }
        Ok(items.iter().map(|w| written.contains(&w.id)).collect())
    }
}
