//! Events and outbound webhooks (migration `0009_event_webhooks`).
//!
//! * `webhook_subscriptions`: endpoints, owned by the API key that created them (every
//!   method taking `api_key_id` answers `None`/`false`/empty for another key's), fed every
//!   event of the organisation whose type they list.
//! * `events`: the outbox. [`Tx::emit_event`] writes the event in the caller's transaction,
//!   so an event exists exactly when the change it reports does, with the subscriptions it
//!   goes to in `fanout`: one row however many subscribers, so a hot change (a status)
//!   does not pay for fifty. The delivery workers turn `fanout` into delivery rows later, in
//!   batches ([`Db::fan_out_events`], module `fanout`). `payload` is the exact body (TEXT on
//!   both backends, never re-serialised): the bytes signed and sent are the stored ones, on
//!   every attempt.
//! * `webhook_deliveries` ([`deliveries`]): one event for one subscription, a job queue with leases like the
//!   inbound media queue's:
//!
//! ```text
//!  emit (due now) ──► pending ── claim (lease) ──► leased ── attempt: succeeded ──► succeeded
//!                       ▲                                  ├─ attempt: retry ──► pending
//!                       ├── lease ends (worker died) ◄─────┤
//!                       └── replay ◄── failed ◄────────────┴─ attempt: failed
//! ```
//!
//!   A claim moves `next_attempt_at` to the end of its lease: a pending delivery is due
//!   exactly when `next_attempt_at <= now`, which one index serves, and the earliest due time
//!   ([`Db::next_webhook_delivery_due`]) is right for leased deliveries too.
//! * `webhook_attempts`: every attempt, listed per subscription newest first.

use sqlx::types::Json;
use tern_domain::events::subscription::DisabledReason;
use uuid::Uuid;

use crate::db::{Backend, Db, Tx, with_pool, with_tx};

mod deliveries;
mod fanout;
mod streams;
use crate::error::Result;
use crate::sql::{ROWS_PER_STATEMENT, bump_updated_at};
pub use streams::{OpenedStream, StreamItem, StreamState};

/// A closed set of names stored as text (`as_str`, `parse`, `TryFrom<String>` for rows).
macro_rules! stored_name {
    ($(#[$m:meta])* $ty:ident { $($(#[$vm:meta])* $v:ident = $s:literal),+ $(,)? }) => {
        $(#[$m])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum $ty { $($(#[$vm])* $v),+ }

        impl $ty {
            pub const ALL: &'static [$ty] = &[$($ty::$v),+];
            pub fn as_str(self) -> &'static str {
                match self { $($ty::$v => $s),+ }
            }
            pub fn parse(s: &str) -> Option<$ty> {
                Self::ALL.iter().copied().find(|v| v.as_str() == s)
            }
        }

        impl TryFrom<String> for $ty {
            type Error = tern_domain::UnknownName;
            fn try_from(s: String) -> std::result::Result<Self, Self::Error> {
                $ty::parse(&s).ok_or(tern_domain::UnknownName { kind: stringify!($ty), value: s })
            }
        }
    };
}

stored_name!(
    /// Where a delivery stands (`webhook_deliveries.status`).
    DeliveryStatus {
        /// Waiting for its next attempt (or leased by a worker making it).
        Pending = "pending",
        Succeeded = "succeeded",
        /// Retries ran out, or the subscription went away (`410`) or was disabled.
        Failed = "failed",
    }
);

stored_name!(
    /// The outcome of one attempt (`webhook_attempts.status`).
    AttemptStatus {
        Succeeded = "succeeded",
        Failed = "failed",
    }
);

/// A subscription row.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct Subscription {
    pub id: Uuid,
    pub org_id: Uuid,
    /// The key that created it, the only one that sees it.
    pub api_key_id: Uuid,
    pub url: String,
    #[sqlx(json)]
    pub event_types: Vec<String>,
    /// Encrypted by the caller.
    pub secret_enc: Vec<u8>,
    /// The secret before the last rotation, which also signs until
    /// `previous_secret_expires_at`.
    pub previous_secret_enc: Option<Vec<u8>>,
    pub previous_secret_expires_at: Option<i64>,
    pub enabled: bool,
    pub description: Option<String>,
    /// Why it was disabled by Tern (e.g. `gone`); cleared when enabled again.
    pub disabled_reason: Option<String>,
    pub created_at: i64,
    pub updated_at: i64,
}

/// A subscription to create ([`Db::insert_webhook_subscription`]); enabled.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewSubscription {
    pub id: Uuid,
    pub org_id: Uuid,
    pub api_key_id: Uuid,
    pub url: String,
    pub event_types: Vec<String>,
    pub secret_enc: Vec<u8>,
    pub enabled: bool,
    pub description: Option<String>,
    pub created_at: i64,
}

/// The fields a `PATCH` may change; `None` keeps the stored value.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SubscriptionPatch {
    pub url: Option<String>,
    pub event_types: Option<Vec<String>>,
    /// `Some(true)` also clears `disabled_reason`.
    pub enabled: Option<bool>,
    /// `Some(None)` clears the description.
    pub description: Option<Option<String>>,
}

/// An event waiting in its transaction for the commit ([`Tx::insert_event`]).
#[derive(Debug)]
pub(crate) struct PendingEvent {
    event: NewEvent,
    /// `events.fanout`: who it goes to.
    fanout: String,
}

/// An event to store ([`Tx::emit_event`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewEvent {
    pub id: Uuid,
    pub org_id: Uuid,
    pub event_type: String,
    /// The exact body to sign and send.
    pub payload: String,
    pub created_at: i64,
    /// The message it is about (`message.*` events): the event and its delivery attempts
    /// are entries of that message's timeline.
    pub message_id: Option<Uuid>,
}

/// A delivery row (operators, tests).
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct Delivery {
    pub id: Uuid,
    pub event_id: Uuid,
    pub subscription_id: Uuid,
    #[sqlx(try_from = "String")]
    pub status: DeliveryStatus,
    /// Attempts recorded so far.
    pub attempts: i64,
    pub next_attempt_at: Option<i64>,
    pub locked_until: Option<i64>,
    pub lease_owner: Option<String>,
    pub last_status_code: Option<i64>,
    pub last_error: Option<String>,
    pub created_at: i64,
    pub updated_at: i64,
}

/// A claimed delivery: everything the worker needs to send it.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct DeliveryJob {
    pub delivery_id: Uuid,
    pub subscription_id: Uuid,
    pub org_id: Uuid,
    pub event_id: Uuid,
    pub event_type: String,
    pub payload: String,
    pub event_created_at: i64,
    /// The 1-based number of the attempt this claim is for.
    pub attempt: i64,
    /// The claiming worker; [`Db::record_webhook_attempt`] must name it.
    pub lease_owner: String,
    pub locked_until: i64,
    pub url: String,
    pub secret_enc: Vec<u8>,
    pub previous_secret_enc: Option<Vec<u8>>,
    pub previous_secret_expires_at: Option<i64>,
    /// A disabled subscription's delivery is claimed too, so the worker can close it.
    pub enabled: bool,
    /// The message the event is about (`message.*` events).
    pub message_id: Option<Uuid>,
}

/// What one attempt did ([`Db::record_webhook_attempt`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AttemptRecord {
    pub id: Uuid,
    pub response_status: Option<i64>,
    pub latency_ms: i64,
    pub error: Option<String>,
    pub created_at: i64,
    /// The start of the receiver's answer (at most 1 KiB, as text); `None` without one.
    pub response_body: Option<String>,
}

/// One attempt to record ([`Db::record_webhook_attempts`]): the claimed delivery, the
/// claimer that made it, what happened and what becomes of the delivery.
#[derive(Debug, Clone, Copy)]
pub struct Recording<'a> {
    pub delivery_id: Uuid,
    pub owner: &'a str,
    pub attempt: &'a AttemptRecord,
    pub outcome: DeliveryOutcome,
    /// The message the event is about and the receiver's host: the attempt is an entry of
    /// that message's timeline, written with it.
    pub message: Option<(Uuid, &'a str)>,
}

/// What becomes of the delivery after an attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeliveryOutcome {
    Succeeded,
    /// Failed; due again at `next_attempt_at`.
    Retry {
        next_attempt_at: i64,
    },
    /// Failed for good.
    Failed,
}

/// A row of a subscription's attempt log.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct WebhookAttempt {
    pub id: Uuid,
    pub delivery_id: Uuid,
    pub subscription_id: Uuid,
    pub event_id: Uuid,
    pub event_type: String,
    pub attempt: i64,
    #[sqlx(try_from = "String")]
    pub status: AttemptStatus,
    pub response_status: Option<i64>,
    pub latency_ms: i64,
    pub error: Option<String>,
    pub created_at: i64,
    /// The start of the receiver's answer (at most 1 KiB, as text).
    pub response_body: Option<String>,
}

macro_rules! subscription_columns {
    () => {
        "id, org_id, api_key_id, url, event_types, secret_enc, previous_secret_enc, \
         previous_secret_expires_at, enabled, description, disabled_reason, created_at, updated_at"
    };
}

// After `subscription_columns!`, which it uses.
mod subscriptions;

/// The enabled subscriptions of org `$1` listing type `$2` (PostgreSQL: JSON containment).
/// No lock: the event names them, and a subscription deleted before the fan-out is skipped
/// then.
/// SQLite looks for the quoted name in the JSON text rather than parsing every
/// subscription's array (a status change with 50 subscriptions paid 50 parses inside the
/// single writer): exact for the names Tern stores, which never need escaping in JSON.
const MATCHING_SQLITE: &str = "SELECT id FROM webhook_subscriptions \
     WHERE org_id = $1 AND enabled AND instr(event_types, '\"' || $2 || '\"') > 0 \
     ORDER BY id";
const MATCHING_POSTGRES: &str = "SELECT id FROM webhook_subscriptions \
     WHERE org_id = $1 AND enabled AND event_types @> jsonb_build_array($2::text) \
     ORDER BY id";

pub(crate) const INSERT_EVENT: &str =
    "INSERT INTO events (id, org_id, type, payload, created_at) VALUES ($1, $2, $3, $4, $5)";
const INSERT_FANNED_EVENT: &str = "INSERT INTO events (id, org_id, type, payload, created_at, \
     fanout, message_id) VALUES ($1, $2, $3, $4, $5, $6, $7)";

impl Tx {
    /// The enabled subscriptions of the organisation that list `event_type`, by id: who an
    /// event of that type goes to. Empty means the event need not be built at all.
    pub async fn webhook_subscribers(
        &mut self,
        org_id: Uuid,
        event_type: &str,
    ) -> Result<Vec<Uuid>> {
        let sql = match self.backend() {
            Backend::Sqlite => MATCHING_SQLITE,
            Backend::Postgres => MATCHING_POSTGRES,
        };
        let subs = with_tx!(self, conn => sqlx::query_scalar::<_, Uuid>(sql)
            .bind(org_id)
            .bind(event_type)
            .fetch_all(&mut **conn)
            .await)?;
        Ok(subs)
    }

    /// Stores `event` for `subscribers` (from [`Tx::webhook_subscribers`] in this
    /// transaction), as one row: it commits (or rolls back) with the change it reports, and
    /// this process's delivery workers are woken at commit to fan it out into one pending
    /// delivery per subscriber, due at its `created_at` ([`Db::fan_out_events`]). Nothing is
    /// stored for no subscribers.
    ///
    /// The row is written at [`Tx::commit`], with the transaction's other events in one
    /// statement: a notification's statuses wrote one insert each (on SQLite, a hop to the
    /// connection's thread and back per event, inside the single writer's turn). So an
    /// error such as a duplicate event id surfaces at commit.
    pub async fn insert_event(&mut self, event: &NewEvent, subscribers: &[Uuid]) -> Result<()> {
        if subscribers.is_empty() {
            return Ok(());
        }
        if let Some(message_id) = event.message_id {
            self.add_timeline(
                message_id,
                event.created_at,
                &tern_domain::timeline::Detail::Event {
                    event_id: event.id,
                    event_type: event.event_type.clone(),
                },
            );
        }
        self.pending_events.push(PendingEvent {
            event: event.clone(),
            fanout: fanout::encode(subscribers),
        });
        self.queued_deliveries = true;
        Ok(())
    }

    /// Writes the events [`Tx::insert_event`] collected (called by [`Tx::commit`]).
    pub(crate) async fn flush_events(&mut self) -> Result<()> {
        if self.pending_events.is_empty() {
            return Ok(());
        }
        let pending = std::mem::take(&mut self.pending_events);
        match &mut self.inner {
            crate::db::TxInner::Postgres(conn) => {
                // Arrays: one prepared statement whatever the count.
                let ids: Vec<Uuid> = pending.iter().map(|p| p.event.id).collect();
                let orgs: Vec<Uuid> = pending.iter().map(|p| p.event.org_id).collect();
                let types: Vec<&str> = pending
                    .iter()
                    .map(|p| p.event.event_type.as_str())
                    .collect();
                let payloads: Vec<&str> =
                    pending.iter().map(|p| p.event.payload.as_str()).collect();
                let times: Vec<i64> = pending.iter().map(|p| p.event.created_at).collect();
                let fanouts: Vec<&str> = pending.iter().map(|p| p.fanout.as_str()).collect();
                let messages: Vec<Option<Uuid>> =
                    pending.iter().map(|p| p.event.message_id).collect();
                sqlx::query(
                    "INSERT INTO events (id, org_id, type, payload, created_at, fanout, \
                     message_id) SELECT * FROM UNNEST($1::uuid[], $2::uuid[], $3::text[], \
                     $4::text[], $5::int8[], $6::text[], $7::uuid[])",
                )
                .bind(&ids)
                .bind(&orgs)
                .bind(&types)
                .bind(&payloads)
                .bind(&times)
                .bind(&fanouts)
                .bind(&messages)
                .execute(&mut **conn)
                .await?;
            }
            crate::db::TxInner::Sqlite(conn) => {
                if let [one] = pending.as_slice() {
                    sqlx::query(INSERT_FANNED_EVENT)
                        .bind(one.event.id)
                        .bind(one.event.org_id)
                        .bind(&one.event.event_type)
                        .bind(&one.event.payload)
                        .bind(one.event.created_at)
                        .bind(&one.fanout)
                        .bind(one.event.message_id)
                        .execute(&mut **conn)
                        .await?;
                    return Ok(());
                }
                for chunk in pending.chunks(ROWS_PER_STATEMENT) {
                    let mut q = sqlx::QueryBuilder::new(
                        "INSERT INTO events (id, org_id, type, payload, created_at, fanout, \
                         message_id) ",
                    );
                    q.push_values(chunk, |mut row, p| {
                        row.push_bind(p.event.id)
                            .push_bind(p.event.org_id)
                            .push_bind(&p.event.event_type)
                            .push_bind(&p.event.payload)
                            .push_bind(p.event.created_at)
                            .push_bind(&p.fanout)
                            .push_bind(p.event.message_id);
                    });
                    // Each batch size would be another statement cached per connection.
                    q.build().persistent(false).execute(&mut **conn).await?;
                }
            }
        }
        Ok(())
    }

    /// Stores `event` for every enabled subscription of its organisation that lists its type
    /// ([`Tx::webhook_subscribers`] + [`Tx::insert_event`]). Returns how many deliveries it
    /// queues (after the fan-out).
    pub async fn emit_event(&mut self, event: &NewEvent) -> Result<usize> {
        let subs = self
            .webhook_subscribers(event.org_id, &event.event_type)
            .await?;
        self.insert_event(event, &subs).await?;
        Ok(subs.len())
    }
}

/// The insert of a subscription, on a pool or in a transaction.
macro_rules! insert_subscription {
    ($s:expr) => {
        sqlx::query_as::<_, Subscription>(concat!(
            "INSERT INTO webhook_subscriptions (id, org_id, api_key_id, url, event_types, \
             secret_enc, enabled, description, created_at, updated_at) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $9) RETURNING ",
            subscription_columns!()
        ))
        .bind($s.id)
        .bind($s.org_id)
        .bind($s.api_key_id)
        .bind(&$s.url)
        .bind(Json(&$s.event_types))
        .bind(&$s.secret_enc)
        .bind($s.enabled)
        .bind(&$s.description)
        .bind($s.created_at)
    };
}

impl Tx {
    /// [`Db::insert_webhook_subscription`] inside a transaction (a create checked against the
    /// plan's limit).
    pub async fn insert_webhook_subscription(
        &mut self,
        s: &NewSubscription,
    ) -> Result<Subscription> {
        let row = with_tx!(self, conn => insert_subscription!(s).fetch_one(&mut **conn).await)?;
        Ok(row)
    }
}

impl Db {
    /// Creates a subscription (enabled). `Conflict { "webhook_subscriptions_pkey" }` on a
    /// duplicate id.
    pub async fn insert_webhook_subscription(&self, s: &NewSubscription) -> Result<Subscription> {
        let row = with_pool!(self, pool => insert_subscription!(s).fetch_one(pool).await)?;
        Ok(row)
    }

    /// One subscription of the key; another key's (even of the same organisation) is `None`.
    pub async fn get_webhook_subscription(
        &self,
        org_id: Uuid,
        api_key_id: Uuid,
        id: Uuid,
    ) -> Result<Option<Subscription>> {
        const SQL: &str = concat!(
            "SELECT ",
            subscription_columns!(),
            " FROM webhook_subscriptions WHERE id = $1 AND org_id = $2 AND api_key_id = $3 \
               AND kind = 'webhook'"
        );
        let row = with_pool!(self, pool => sqlx::query_as::<_, Subscription>(SQL)
            .bind(id)
            .bind(org_id)
            .bind(api_key_id)
            .fetch_optional(pool)
            .await)?;
        Ok(row)
    }

    /// The key's subscriptions with ids after `after`, by id, at most `limit`.
    pub async fn list_webhook_subscriptions(
        &self,
        org_id: Uuid,
        api_key_id: Uuid,
        after: Option<Uuid>,
        limit: i64,
    ) -> Result<Vec<Subscription>> {
        const SQL: &str = concat!(
            "SELECT ",
            subscription_columns!(),
            " FROM webhook_subscriptions WHERE api_key_id = $1 AND org_id = $2 AND kind = 'webhook' \
               AND ($3 IS NULL OR id > $3) ORDER BY id LIMIT $4"
        );
        let rows = with_pool!(self, pool => sqlx::query_as::<_, Subscription>(SQL)
            .bind(api_key_id)
            .bind(org_id)
            .bind(after)
            .bind(limit)
            .fetch_all(pool)
            .await)?;
        Ok(rows)
    }

    /// Disables a subscription for `reason` (the receiver answered `410`: `gone`). `false`
    /// when it is gone or already disabled.
    pub async fn disable_webhook_subscription(
        &self,
        id: Uuid,
        reason: DisabledReason,
        now: i64,
    ) -> Result<bool> {
        const SQL: &str = concat!(
            "UPDATE webhook_subscriptions SET enabled = FALSE, disabled_reason = $2, updated_at = ",
            bump_updated_at!("webhook_subscriptions", "$3"),
            " WHERE id = $1 AND enabled"
        );
        let n = with_pool!(self, pool => sqlx::query(SQL)
            .bind(id)
            .bind(reason.as_str())
            .bind(now)
            .execute(pool)
            .await
            .map(|r| r.rows_affected()))?;
        Ok(n == 1)
    }

    /// How many subscriptions the organisation has (all keys; plan limits; streams are not
    /// subscriptions to the customer and do not count).
    pub async fn count_webhook_subscriptions(&self, org_id: Uuid) -> Result<i64> {
        let n = with_pool!(self, pool => sqlx::query_scalar::<_, i64>(
                "SELECT COUNT(*) FROM webhook_subscriptions WHERE org_id = $1 AND kind = 'webhook'")
            .bind(org_id)
            .fetch_one(pool)
            .await)?;
        Ok(n)
    }

    /// [`Tx::emit_event`] in a transaction of its own.
    pub async fn emit_event(&self, event: &NewEvent) -> Result<usize> {
        let mut tx = self.begin().await?;
        let n = tx.emit_event(event).await?;
        tx.commit().await?;
        Ok(n)
    }
}
