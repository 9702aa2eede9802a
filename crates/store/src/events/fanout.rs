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
    created_at: i64,
    fanout: String,
}

impl Db {
    /// Fans out up to `limit` events, oldest first: one pending delivery, due at the
    /// event's `created_at`, per subscriber that still exists, written with the clearing of
    /// `fanout` in one transaction (a crash leaves the event to fan out again, never half
    /// done). Safe with several workers and processes (PostgreSQL: `FOR UPDATE SKIP LOCKED`;
    /// SQLite: `BEGIN IMMEDIATE`). Returns (events fanned out, deliveries queued for the
    /// HTTP workers); rows queued for streams are not counted (no worker sends them) but
    /// wake this process's streams.
    pub async fn fan_out_events(&self, limit: i64) -> Result<(usize, usize)> {
        if limit <= 0 {
            return Ok((0, 0));
        }
        let (pick, live) = match self.backend() {
            Backend::Sqlite => (
                "SELECT id, created_at, fanout FROM events WHERE fanout IS NOT NULL \
                 ORDER BY created_at, id LIMIT $1",
                "",
            ),
            // KEY SHARE: a subscription deleted meanwhile waits for this transaction rather
            // than failing its delivery inserts on the foreign key.
            Backend::Postgres => (
                "SELECT id, created_at, fanout FROM events WHERE fanout IS NOT NULL \
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
                existing.extend(q.build_query_as::<(Uuid, bool)>().fetch_all(&mut *tx).await?);
            }
            // A stream's delivery has no due time: the HTTP workers never claim it, the
            // stream's connection sends it (module `streams`).
            let rows: Vec<(Uuid, Uuid, Option<i64>, i64)> = wanted
                .iter()
                .flat_map(|(i, subs)| {
                    let e = &events[*i];
                    let existing = &existing;
                    subs.iter().filter_map(move |s| {
                        let stream = *existing.get(s)?;
                        Some((e.id, *s, (!stream).then_some(e.created_at), e.created_at))
                    })
                })
                .collect();
            let to_streams = rows.iter().filter(|r| r.2.is_none()).count();
            for chunk in rows.chunks(CHUNK) {
                let mut q = sqlx::QueryBuilder::new(
                    "INSERT INTO webhook_deliveries (id, event_id, subscription_id, status, \
                     attempts, next_attempt_at, created_at, updated_at) ",
                );
                q.push_values(chunk, |mut row, (event_id, sub, due, at)| {
                    row.push_bind(Uuid::now_v7())
                        .push_bind(*event_id)
                        .push_bind(*sub)
                        .push("'pending'")
                        .push("0")
                        .push_bind(*due)
                        .push_bind(*at)
                        .push_bind(*at);
                });
                q.push(" ON CONFLICT (event_id, subscription_id) DO NOTHING");
                q.build().execute(&mut *tx).await?;
            }
            for chunk in events.chunks(CHUNK) {
                let mut q = sqlx::QueryBuilder::new("UPDATE events SET fanout = NULL WHERE id IN ");
                push_id_list(&mut q, chunk.iter().map(|e| e.id));
                q.build().execute(&mut *tx).await?;
            }
            tx.commit().await?;
            (events.len(), rows.len() - to_streams, to_streams)
        });
        let (events, deliveries, to_streams) = done;
        if to_streams > 0 {
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
