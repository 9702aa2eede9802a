//! Event streams (`GET /events/stream`, migration `0024_event_streams`): a stream is a
//! subscription of kind `stream` (no URL, no secret), so an event is stored when a stream
//! wants it and the fan-out gives the stream one delivery row per event, like any
//! subscription's; those rows have no due time, so the HTTP workers never claim them.
//!
//! ```text
//!  connect ──► open: register (key, types) once, take the lease, base = last_seq
//!    │          Last-Event-ID E known: acknowledge the rows sent up to E (sent_seq <= seq(E))
//!    │          else: acknowledge every pending row (start from now)
//!    └─► loop: pending rows never sent, or sent before base (by an earlier connection and
//!              not acknowledged), by send then by event ──► record_sends (new sent_seq,
//!              only while this connection holds the lease) ──► written to the client
//! ```
//!
//! A send is recorded before it is written, so the client's Last-Event-ID always names a
//! recorded send: what was written after it is sent again, nothing before it is.

use sqlx::types::Json;
use uuid::Uuid;

use crate::db::{BeginWrite as _, Db, with_pool};
use crate::error::Result;
use crate::sql::bump_updated_at;

/// A stream taken by a connection ([`Db::open_event_stream`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OpenedStream {
    /// The stream's subscription id.
    pub id: Uuid,
    /// The stream's last send number when the connection took it: rows sent up to it and not
    /// acknowledged are this connection's to send again.
    pub base: i64,
    /// Whether this connection registered it.
    pub created: bool,
}

/// A row of a stream to send.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct StreamItem {
    pub delivery_id: Uuid,
    pub event_id: Uuid,
    pub event_type: String,
    /// The exact body a subscription receives.
    pub payload: String,
}

/// A stream's state (operators, tests).
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct StreamState {
    pub id: Uuid,
    pub api_key_id: Uuid,
    #[sqlx(json)]
    pub event_types: Vec<String>,
    pub lease_owner: Option<String>,
    pub last_seq: i64,
    pub seen_at: i64,
    /// Rows not acknowledged yet.
    pub pending: i64,
}

impl Db {
    /// The stream of `api_key_id` for `event_types` (sorted, as the caller normalised them),
    /// registered if it does not exist (the first connection) or renewed, its lease taken by
    /// `owner` at `now` from whoever held it (a new connection takes the stream over from a
    /// dead or older one, which notices at its next send).
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
        const STATE: &str = "INSERT INTO event_streams (subscription_id, last_seq, seen_at, \
             created_at) VALUES ($1, 0, $2, $2) ON CONFLICT DO NOTHING";
        // A stream Tern disabled (its key's member was removed) serves again for a key that
        // is valid now.
        const ENABLE: &str = "UPDATE webhook_subscriptions SET enabled = TRUE, \
             disabled_reason = NULL WHERE id = $1 AND NOT enabled";
        const TAKE: &str = "UPDATE event_streams SET lease_owner = $2, seen_at = $3 \
             WHERE subscription_id = $1 RETURNING last_seq";
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
            sqlx::query(STATE).bind(id).bind(now).execute(&mut *tx).await?;
            sqlx::query(ENABLE).bind(id).execute(&mut *tx).await?;
            let base = sqlx::query_scalar::<_, i64>(TAKE)
                .bind(id)
                .bind(owner)
                .bind(now)
                .fetch_one(&mut *tx)
                .await?;
            tx.commit().await?;
            OpenedStream { id, base, created }
        });
        Ok(opened)
    }

    /// The send number of event `event_id` on stream `id`; `None` when it is not a row of the
    /// stream that was sent (unknown, of another stream, or gone with an expired stream).
    pub async fn stream_sent_seq(&self, id: Uuid, event_id: Uuid) -> Result<Option<i64>> {
        let seq = with_pool!(self, pool => sqlx::query_scalar::<_, Option<i64>>(
                "SELECT sent_seq FROM webhook_deliveries WHERE event_id = $1 AND subscription_id = $2")
            .bind(event_id)
            .bind(id)
            .fetch_optional(pool)
            .await)?;
        Ok(seq.flatten())
    }

    /// Acknowledges (marks `succeeded`) the stream's pending rows sent up to send number
    /// `upto`, or every pending row with `None` (the stream starts from now). Returns how
    /// many.
    pub async fn ack_stream(&self, id: Uuid, upto: Option<i64>, now: i64) -> Result<u64> {
        const SENT: &str = concat!(
            "UPDATE webhook_deliveries SET status = 'succeeded', updated_at = ",
            bump_updated_at!("webhook_deliveries", "$3"),
            " WHERE subscription_id = $1 AND status = 'pending' AND sent_seq IS NOT NULL \
               AND sent_seq <= $2"
        );
        const ALL: &str = concat!(
            "UPDATE webhook_deliveries SET status = 'succeeded', updated_at = ",
            bump_updated_at!("webhook_deliveries", "$2"),
            " WHERE subscription_id = $1 AND status = 'pending'"
        );
        let n = match upto {
            Some(upto) => with_pool!(self, pool => sqlx::query(SENT)
                .bind(id)
                .bind(upto)
                .bind(now)
                .execute(pool)
                .await
                .map(|r| r.rows_affected()))?,
            None => with_pool!(self, pool => sqlx::query(ALL)
                .bind(id)
                .bind(now)
                .execute(pool)
                .await
                .map(|r| r.rows_affected()))?,
        };
        Ok(n)
    }

    /// The next `limit` rows of stream `id` for a connection that took it at `base`: pending
    /// rows sent up to `base` (by an earlier connection, not acknowledged) in their send
    /// order, then rows never sent, oldest event first. A row committed late (its event
    /// older than one already sent) is simply among the rows never sent. Each part is read
    /// through its own partial index, so the rows this connection sent (pending until a
    /// reconnect acknowledges them) cost nothing.
    pub async fn stream_pending(&self, id: Uuid, base: i64, limit: i64) -> Result<Vec<StreamItem>> {
        const AGAIN: &str = "SELECT d.id AS delivery_id, d.event_id, e.type AS event_type, \
             e.payload FROM webhook_deliveries d JOIN events e ON e.id = d.event_id \
             WHERE d.subscription_id = $1 AND d.status = 'pending' AND d.sent_seq IS NOT NULL \
               AND d.sent_seq <= $2 ORDER BY d.sent_seq LIMIT $3";
        const NEW: &str = "SELECT d.id AS delivery_id, d.event_id, e.type AS event_type, \
             e.payload FROM webhook_deliveries d JOIN events e ON e.id = d.event_id \
             WHERE d.subscription_id = $1 AND d.status = 'pending' \
               AND d.next_attempt_at IS NULL AND d.sent_seq IS NULL \
             ORDER BY d.created_at, d.event_id LIMIT $2";
        let mut rows = with_pool!(self, pool => sqlx::query_as::<_, StreamItem>(AGAIN)
            .bind(id)
            .bind(base)
            .bind(limit)
            .fetch_all(pool)
            .await)?;
        let left = limit - i64::try_from(rows.len()).unwrap_or(limit);
        if left > 0 {
            rows.extend(
                with_pool!(self, pool => sqlx::query_as::<_, StreamItem>(NEW)
                .bind(id)
                .bind(left)
                .fetch_all(pool)
                .await)?,
            );
        }
        Ok(rows)
    }

    /// Records that `deliveries` (rows of stream `id`, in this order) are being sent by
    /// `owner`: each gets the stream's next send number. `false`, nothing recorded, when
    /// `owner` no longer holds the stream (another connection took it over).
    pub async fn record_stream_sends(
        &self,
        id: Uuid,
        owner: &str,
        deliveries: &[Uuid],
        now: i64,
    ) -> Result<bool> {
        if deliveries.is_empty() {
            return self.renew_stream_lease(id, owner, now).await;
        }
        const TAKE: &str = "UPDATE event_streams SET last_seq = last_seq + $3, seen_at = $4 \
             WHERE subscription_id = $1 AND lease_owner = $2 RETURNING last_seq";
        let n = i64::try_from(deliveries.len()).unwrap_or(i64::MAX);
        let held = with_pool!(self, pool => {
            let mut tx = pool.begin_write().await?;
            let last = sqlx::query_scalar::<_, i64>(TAKE)
                .bind(id)
                .bind(owner)
                .bind(n)
                .bind(now)
                .fetch_optional(&mut *tx)
                .await?;
            match last {
                None => false,
                Some(last) => {
                    let first = last - n + 1;
                    let mut q = sqlx::QueryBuilder::new(
                        "UPDATE webhook_deliveries SET sent_seq = CASE id",
                    );
                    for (i, d) in deliveries.iter().enumerate() {
                        q.push(" WHEN ")
                            .push_bind(*d)
                            .push(" THEN ")
                            .push_bind(first + i64::try_from(i).unwrap_or(0));
                    }
                    q.push(" END WHERE subscription_id = ").push_bind(id);
                    q.push(" AND id IN ");
                    crate::sql::push_id_list(&mut q, deliveries.iter().copied());
                    // Each batch size would be another statement cached per connection.
                    q.build().persistent(false).execute(&mut *tx).await?;
                    tx.commit().await?;
                    true
                }
            }
        });
        Ok(held)
    }

    /// Notes that `owner` still serves stream `id` at `now` (so it does not expire); `false`
    /// when another connection took it over.
    pub async fn renew_stream_lease(&self, id: Uuid, owner: &str, now: i64) -> Result<bool> {
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

    /// Deletes the streams no connection held since `cutoff`, with their rows (cascade).
    /// Returns how many.
    pub async fn prune_event_streams(&self, cutoff: i64) -> Result<u64> {
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
        const SQL: &str = "SELECT s.id, s.api_key_id, s.event_types, t.lease_owner, t.last_seq, \
             t.seen_at, (SELECT COUNT(*) FROM webhook_deliveries d WHERE d.subscription_id = s.id \
               AND d.status = 'pending') AS pending \
             FROM webhook_subscriptions s JOIN event_streams t ON t.subscription_id = s.id \
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
