//! Event streams (`GET /events/stream`, migrations `0024_event_streams` and
//! `0025_stream_cursor`): a stream is a subscription of kind `stream` (no URL, no secret), so
//! an event is stored when a stream wants it; the fan-out numbers such an event in its
//! organisation's stream order (`events.stream_seq`), and a stream is a position in that
//! order. Nothing is written per event per stream.
//!
//! ```text
//!  connect ──► open: register (key, types) once at the organisation's head (start_seq),
//!    │          take the lease
//!    │          Last-Event-ID E, an event of the stream's types numbered after start_seq:
//!    │            position = E's number; else position = the head now (start from now)
//!    └─► loop: events of the stream's types numbered after the position, in number order
//!              ──► (still holding the lease?) ──► written to the client, position moves
//! ```
//!
//! The numbers are given under the organisation's `stream_heads` row lock, held to the
//! fan-out's commit, so a reader that sees number N sees every number before it: a position
//! never skips an event committed late.

use sqlx::types::Json;
use uuid::Uuid;

use crate::db::{BeginWrite as _, Db, with_pool};
use crate::error::Result;

/// A stream taken by a connection ([`Db::open_event_stream`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OpenedStream {
    /// The stream's subscription id.
    pub id: Uuid,
    /// The organisation's head when the stream was registered: its events come after it.
    pub start_seq: i64,
    /// Whether this connection registered it.
    pub created: bool,
}

/// An event of a stream to send.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct StreamItem {
    pub event_id: Uuid,
    pub event_type: String,
    /// The exact body a subscription receives.
    pub payload: String,
    /// Its number in the organisation's stream order (the position after sending it).
    pub stream_seq: i64,
}

/// A stream's state (operators, tests).
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct StreamState {
    pub id: Uuid,
    pub api_key_id: Uuid,
    #[sqlx(json)]
    pub event_types: Vec<String>,
    pub lease_owner: Option<String>,
    pub start_seq: i64,
    pub seen_at: i64,
}

impl Db {
    /// The stream of `api_key_id` for `event_types` (sorted, as the caller normalised them),
    /// registered at the organisation's head if it does not exist (the first connection) or
    /// renewed, its lease taken by `owner` at `now` from whoever held it (a new connection
    /// takes the stream over from a dead or older one, which notices at its next send).
    pub async fn open_event_stream(
        &self,
        org_id: Uuid,
        api_key_id: Uuid,
        event_types: &[String],
        owner: &str,
        now: i64,
    ) -> Result<OpenedStream> {
        const FIND: &str = "SELECT id FROM webhook_subscriptions WHERE api_key_id = $1 \
             AND org_id = $2 AND kind = 'stream' AND event_types = $3";
        // No target: the conflict is the (key, types) of a concurrent first connection.
        const REGISTER: &str = "INSERT INTO webhook_subscriptions (id, org_id, api_key_id, url, \
             event_types, secret_enc, enabled, created_at, updated_at, kind) \
             VALUES ($1, $2, $3, '', $4, $5, TRUE, $6, $6, 'stream') ON CONFLICT DO NOTHING";
        const STATE: &str = "INSERT INTO event_streams (subscription_id, start_seq, seen_at, \
             created_at) VALUES ($1, COALESCE((SELECT last_seq FROM stream_heads \
             WHERE org_id = $3), 0), $2, $2) ON CONFLICT DO NOTHING";
        // A stream Tern disabled (its key's member was removed) serves again for a key that
        // is valid now.
        const ENABLE: &str = "UPDATE webhook_subscriptions SET enabled = TRUE, \
             disabled_reason = NULL WHERE id = $1 AND NOT enabled";
        const TAKE: &str = "UPDATE event_streams SET lease_owner = $2, seen_at = $3 \
             WHERE subscription_id = $1 RETURNING start_seq";
        let opened = with_pool!(self, pool => {
            let mut tx = pool.begin_write().await?;
            let mut created = false;
            let found = sqlx::query_scalar::<_, Uuid>(FIND)
                .bind(api_key_id)
                .bind(org_id)
                .bind(Json(event_types))
                .fetch_optional(&mut *tx)
                .await?;
            let id = match found {
                Some(id) => id,
                None => {
                    let id = Uuid::now_v7();
                    let n = sqlx::query(REGISTER)
                        .bind(id)
                        .bind(org_id)
                        .bind(api_key_id)
                        .bind(Json(event_types))
                        .bind(Vec::<u8>::new())
                        .bind(now)
                        .execute(&mut *tx)
                        .await?
                        .rows_affected();
                    created = n == 1;
                    if created {
                        id
                    } else {
                        sqlx::query_scalar::<_, Uuid>(FIND)
                            .bind(api_key_id)
                            .bind(org_id)
                            .bind(Json(event_types))
                            .fetch_one(&mut *tx)
                            .await?
                    }
                }
            };
            sqlx::query(STATE).bind(id).bind(now).bind(org_id).execute(&mut *tx).await?;
            sqlx::query(ENABLE).bind(id).execute(&mut *tx).await?;
            let start_seq = sqlx::query_scalar::<_, i64>(TAKE)
                .bind(id)
                .bind(owner)
                .bind(now)
                .fetch_one(&mut *tx)
                .await?;
            tx.commit().await?;
            OpenedStream { id, start_seq, created }
        });
        Ok(opened)
    }

    /// The organisation's stream head: the number of its last event numbered for streams
    /// (0 before any). A stream starting from now starts here.
    pub async fn stream_head(&self, org_id: Uuid) -> Result<i64> {
        let head = with_pool!(self, pool => sqlx::query_scalar::<_, i64>(
                "SELECT last_seq FROM stream_heads WHERE org_id = $1")
            .bind(org_id)
            .fetch_optional(pool)
            .await)?;
        Ok(head.unwrap_or(0))
    }

    /// The position of event `event_id` in the stream order of organisation `org_id`, when
    /// it is one a stream of `event_types` registered at `start_seq` was sent: numbered after
    /// `start_seq` and of one of the types. `None` otherwise (unknown, another
    /// organisation's or stream's, never numbered, pruned).
    pub async fn stream_position_of(
        &self,
        org_id: Uuid,
        event_types: &[String],
        start_seq: i64,
        event_id: Uuid,
    ) -> Result<Option<i64>> {
        let found = with_pool!(self, pool => sqlx::query_as::<_, (Option<i64>, String)>(
                "SELECT stream_seq, type FROM events WHERE id = $1 AND org_id = $2")
            .bind(event_id)
            .bind(org_id)
            .fetch_optional(pool)
            .await)?;
        Ok(found
            .and_then(|(seq, kind)| seq.filter(|s| *s > start_seq && event_types.contains(&kind))))
    }

    /// Up to `limit` events of organisation `org_id` of `event_types` numbered after
    /// `position`, in number order.
    pub async fn stream_events_after(
        &self,
        org_id: Uuid,
        event_types: &[String],
        position: i64,
        limit: i64,
    ) -> Result<Vec<StreamItem>> {
        if event_types.is_empty() {
            return Ok(Vec::new());
        }
        let rows = with_pool!(self, pool => {
            let mut q = sqlx::QueryBuilder::new(
                "SELECT id AS event_id, type AS event_type, payload, stream_seq FROM events \
                 WHERE org_id = ",
            );
            q.push_bind(org_id)
                .push(" AND stream_seq > ")
                .push_bind(position)
                .push(" AND type IN (");
            let mut list = q.separated(", ");
            for t in event_types {
                list.push_bind(t.as_str());
            }
            q.push(") ORDER BY stream_seq LIMIT ").push_bind(limit);
            q.build_query_as::<StreamItem>().fetch_all(pool).await
        })?;
        Ok(rows)
    }

    /// Whether `owner` still holds stream `id` (a read: checked before each batch is sent).
    pub async fn holds_stream(&self, id: Uuid, owner: &str) -> Result<bool> {
        let held = with_pool!(self, pool => sqlx::query_scalar::<_, i64>(
                "SELECT COUNT(*) FROM event_streams WHERE subscription_id = $1 AND lease_owner = $2")
            .bind(id)
            .bind(owner)
            .fetch_one(pool)
            .await)?;
        Ok(held == 1)
    }

    /// Notes that `owner` still serves stream `id` at `now` (so it does not expire); `false`
    /// when another connection took it over.
    pub async fn renew_stream_lease(&self, id: Uuid, owner: &str, now: i64) -> Result<bool> {
        // SQLite: in this process's write turn, not SQLite's busy handler.
        let _turn = self.write_turn().await?;
        let n = with_pool!(self, pool => sqlx::query(
                "UPDATE event_streams SET seen_at = $3 WHERE subscription_id = $1 AND lease_owner = $2")
            .bind(id)
            .bind(owner)
            .bind(now)
            .execute(pool)
            .await
            .map(|r| r.rows_affected()))?;
        Ok(n == 1)
    }

    /// `owner`'s connection to stream `id` ended at `now` (the 24 hours start); nothing when
    /// another connection holds it.
    pub async fn release_event_stream(&self, id: Uuid, owner: &str, now: i64) -> Result<()> {
        // SQLite: in this process's write turn, not SQLite's busy handler.
        let _turn = self.write_turn().await?;
        with_pool!(self, pool => sqlx::query(
                "UPDATE event_streams SET lease_owner = NULL, seen_at = $3 \
                 WHERE subscription_id = $1 AND lease_owner = $2")
            .bind(id)
            .bind(owner)
            .bind(now)
            .execute(pool)
            .await
            .map(drop))?;
        Ok(())
    }

    /// Deletes the streams no connection held since `cutoff`.
    /// Returns how many.
    pub async fn prune_event_streams(&self, cutoff: i64) -> Result<u64> {
        // SQLite: in this process's write turn, not SQLite's busy handler.
        let _turn = self.write_turn().await?;
        let n = with_pool!(self, pool => sqlx::query(
                "DELETE FROM webhook_subscriptions WHERE kind = 'stream' AND id IN ( \
                   SELECT subscription_id FROM event_streams WHERE seen_at < $1)")
            .bind(cutoff)
            .execute(pool)
            .await
            .map(|r| r.rows_affected()))?;
        Ok(n)
    }

    /// The organisation's streams, oldest first (operators, tests).
    pub async fn list_event_streams(&self, org_id: Uuid) -> Result<Vec<StreamState>> {
        const SQL: &str = "SELECT s.id, s.api_key_id, s.event_types, t.lease_owner, t.start_seq, \
             t.seen_at FROM webhook_subscriptions s JOIN event_streams t ON t.subscription_id = s.id \
             WHERE s.org_id = $1 AND s.kind = 'stream' ORDER BY t.created_at, s.id";
        let rows = with_pool!(self, pool => sqlx::query_as::<_, StreamState>(SQL)
            .bind(org_id)
            .fetch_all(pool)
            .await)?;
        Ok(rows)
    }

    /// How many events of the organisation are stored (operators, tests: an event is stored
    /// only when a subscription or a stream wants it).
    pub async fn count_org_events(&self, org_id: Uuid) -> Result<i64> {
        let n = with_pool!(self, pool => sqlx::query_scalar::<_, i64>(
                "SELECT COUNT(*) FROM events WHERE org_id = $1")
            .bind(org_id)
            .fetch_one(pool)
            .await)?;
        Ok(n)
    }
}
