//! Deferred fan-out: an event is stored as one row naming its subscribers (`events.fanout`),
//! and [`Db::fan_out_events`] turns a batch of such rows into pending deliveries later,
//! off the change's transaction. The delivery workers call it when they have room, so a
//! backlog stays one row per event until it is about to be sent.
//!
//! A subscription deleted between the event and its fan-out gets nothing (as if deleted a
//! moment before); one disabled in between gets a delivery, which a worker closes unsent
//! (`failed`), as for a delivery queued before the disabling.

use std::collections::{BTreeMap, BTreeSet};

use uuid::Uuid;

use crate::db::{Backend, BeginWrite as _, Db, with_pool};
use crate::error::Result;
use crate::sql::{ROWS_PER_STATEMENT as CHUNK, push_id_list};

/// `events.fanout` for `subscribers`: a JSON array of their ids.
pub(super) fn encode(subscribers: &[Uuid]) -> String {
    // A list of UUIDs always serialises.
    serde_json::to_string(subscribers).unwrap_or_else(|_| "[]".to_owned())
}

/// The subscribers named by `events.fanout`; unreadable text names none (never written so).
fn decode(fanout: &str) -> Vec<Uuid> {
    serde_json::from_str(fanout).unwrap_or_else(|e| {
        tracing::warn!(error = %e, "unreadable events.fanout: no deliveries for it");
        Vec::new()
    })
}

#[derive(sqlx::FromRow)]
struct Pending {
    id: Uuid,
    org_id: Uuid,
    created_at: i64,
    fanout: String,
}

impl Db {
    /// Fans out up to `limit` events, oldest first: one pending delivery, due at the
    /// event's `created_at`, per subscriber that still exists, written with the clearing of
    /// `fanout` in one transaction (a crash leaves the event to fan out again, never half
    /// done). Safe with several workers and processes (PostgreSQL: `FOR UPDATE SKIP LOCKED`;
    /// SQLite: `BEGIN IMMEDIATE`). Returns (events fanned out, deliveries queued for the
    /// HTTP workers). Events that streams want are numbered in their organisation's stream
    /// order, in the same transaction, and wake this process's streams.
    pub async fn fan_out_events(&self, limit: i64) -> Result<(usize, usize)> {
        if limit <= 0 {
            return Ok((0, 0));
        }
        let (pick, live) = match self.backend() {
            Backend::Sqlite => (
                "SELECT id, org_id, created_at, fanout FROM events WHERE fanout IS NOT NULL \
                 ORDER BY created_at, id LIMIT $1",
                "",
            ),
            // KEY SHARE: a subscription deleted meanwhile waits for this transaction rather
            // than failing its delivery inserts on the foreign key.
            Backend::Postgres => (
                "SELECT id, org_id, created_at, fanout FROM events WHERE fanout IS NOT NULL \
                 ORDER BY created_at, id LIMIT $1 FOR UPDATE SKIP LOCKED",
                " FOR KEY SHARE",
            ),
        };
        // Most calls find nothing: a read first, so SQLite's write lock is not taken for it
        // (PostgreSQL's pick below is as cheap and locks nothing when it finds nothing).
        if self.backend() == Backend::Sqlite && !self.events_to_fan_out().await? {
            return Ok((0, 0));
        }
        let done = with_pool!(self, pool => {
            let mut tx = pool.begin_write().await?;
            let events = sqlx::query_as::<_, Pending>(pick)
                .bind(limit)
                .fetch_all(&mut *tx)
                .await?;
            if events.is_empty() {
                return Ok((0, 0));
            }
            let wanted: Vec<(usize, Vec<Uuid>)> = events
                .iter()
                .enumerate()
                .map(|(i, e)| (i, decode(&e.fanout)))
                .collect();
            let named: Vec<Uuid> = wanted
                .iter()
                .flat_map(|(_, subs)| subs.iter().copied())
                .collect::<BTreeSet<_>>()
                .into_iter()
                .collect();
            // Each subscriber that still exists, and whether it is a stream.
            let mut existing = BTreeMap::new();
            for chunk in named.chunks(CHUNK) {
                let mut q = sqlx::QueryBuilder::new(
                    "SELECT id, kind = 'stream' FROM webhook_subscriptions WHERE id IN ",
                );
                push_id_list(&mut q, chunk.iter().copied());
                q.push(live);
                existing.extend(
                    q.build_query_as::<(Uuid, bool)>()
                        .persistent(crate::sql::recurs(chunk.len()))
                        .fetch_all(&mut *tx)
                        .await?,
                );
            }
            // A subscriber that is a stream gets no row: the event is numbered in its
            // organisation's stream order instead (module `streams`), once for all of them.
            let mut rows: Vec<(Uuid, Uuid, i64)> = Vec::new();
            let mut to_streams: BTreeMap<Uuid, Vec<Uuid>> = BTreeMap::new();
            for (i, subs) in &wanted {
                let e = &events[*i];
                let mut for_streams = false;
                for s in subs {
                    match existing.get(s) {
                        Some(true) => for_streams = true,
                        Some(false) => rows.push((e.id, *s, e.created_at)),
                        None => {}
                    }
                }
                if for_streams {
                    to_streams.entry(e.org_id).or_default().push(e.id);
                }
            }
            for chunk in rows.chunks(CHUNK) {
                let mut q = sqlx::QueryBuilder::new(
                    "INSERT INTO webhook_deliveries (id, event_id, subscription_id, status, \
                     attempts, next_attempt_at, created_at, updated_at) ",
                );
                q.push_values(chunk, |mut row, (event_id, sub, at)| {
                    row.push_bind(Uuid::now_v7())
                        .push_bind(*event_id)
                        .push_bind(*sub)
                        .push("'pending'")
                        .push("0")
                        .push_bind(*at)
                        .push_bind(*at)
                        .push_bind(*at);
                });
                q.push(" ON CONFLICT (event_id, subscription_id) DO NOTHING");
                q.build()
                    .persistent(crate::sql::recurs(chunk.len()))
                    .execute(&mut *tx)
                    .await?;
            }
            // Organisations in id order: two fan-outs never wait on each other's heads.
            let mut streamed = 0;
            for (org_id, ids) in &to_streams {
                let n = i64::try_from(ids.len()).unwrap_or(i64::MAX);
                // The head's row lock is held to the commit: numbers become visible in order.
                let last = sqlx::query_scalar::<_, i64>(
                    "INSERT INTO stream_heads (org_id, last_seq) VALUES ($1, $2) \
                     ON CONFLICT (org_id) DO UPDATE SET last_seq = stream_heads.last_seq + $2 \
                     RETURNING last_seq",
                )
                .bind(org_id)
                .bind(n)
                .fetch_one(&mut *tx)
                .await?;
                let first = last - n + 1;
                for (c, chunk) in ids.chunks(CHUNK).enumerate() {
                    let mut q = sqlx::QueryBuilder::new("UPDATE events SET stream_seq = CASE id");
                    for (i, id) in chunk.iter().enumerate() {
                        let seq = first + i64::try_from(c * CHUNK + i).unwrap_or(0);
                        q.push(" WHEN ").push_bind(*id).push(" THEN ").push_bind(seq);
                    }
                    q.push(" END WHERE id IN ");
                    push_id_list(&mut q, chunk.iter().copied());
                    q.build()
                        .persistent(crate::sql::recurs(chunk.len()))
                        .execute(&mut *tx)
                        .await?;
                }
                streamed += ids.len();
            }
            for chunk in events.chunks(CHUNK) {
                let mut q = sqlx::QueryBuilder::new("UPDATE events SET fanout = NULL WHERE id IN ");
                push_id_list(&mut q, chunk.iter().map(|e| e.id));
                q.build()
                    .persistent(crate::sql::recurs(chunk.len()))
                    .execute(&mut *tx)
                    .await?;
            }
            tx.commit().await?;
            (events.len(), rows.len(), streamed)
        });
        let (events, deliveries, streamed) = done;
        if streamed > 0 {
            // Every open stream of this process looks at its rows.
            self.wakeups.streams.notify_waiters();
        }
        Ok((events, deliveries))
    }

    /// Whether any event waits for its fan-out.
    async fn events_to_fan_out(&self) -> Result<bool> {
        let any = with_pool!(self, pool => sqlx::query_scalar::<_, i64>(
                "SELECT COUNT(*) FROM (SELECT 1 FROM events WHERE fanout IS NOT NULL LIMIT 1) t")
            .fetch_one(pool)
            .await)?;
        Ok(any > 0)
    }
}
