//! The outbound dispatch queue: accepted messages waiting to be sent to the network.
//!
//! The queue lives in the `messages` table (migration `0003_dispatch`): `dispatch_state` is
//! `queued`, `in_flight`, `unknown`, or NULL once the queue is done with a message.
//!
//! ```text
//!            claim (attempts+1, status accepted → sending)
//!  queued ───────────────────────────────────────────────► in_flight
//!    ▲   retry: the network did not take it (retry_at)        │
//!    └─────────────────────────────────────────────────────── ┤
//!            sent / failed permanently (status written) ──────┤──► NULL
//!            the request left, no answer came ────────────────┴──► unknown
//!  in_flight past locked_until (the worker died) ─────────────────► unknown (by the sweep)
//!  in_flight / unknown past the deadline, still `sending` ────────► NULL, status failed
//!  in_flight / unknown whose status moved on (a status webhook) ───► NULL
//! ```
//!
//! Invariants:
//! * A message is claimed by one worker at a time (PostgreSQL: `FOR NO KEY UPDATE SKIP
//!   LOCKED`; SQLite: `BEGIN IMMEDIATE`), and only from `queued`.
//! * An `in_flight` claim is **never** claimed again, even after its lease ends: the worker
//!   may have sent the request before dying, so the message is treated as "outcome unknown".
//!   A claim stores its give-up deadline in `next_attempt_at` (`now + lease + grace`); a
//!   status webhook (matched by `biz_opaque_callback_data`) settles it before that, else the
//!   sweep fails it at the deadline. Hence a crash can fail a message, never send it twice.
//! * Writes of a claim's outcome carry a [`DispatchLease`] (worker id + attempt number) and
//!   are refused once the message was claimed again, so a stale worker cannot clobber a
//!   newer attempt. Queue writes never move a message whose status a webhook already moved
//!   on back into the queue.

use serde_json::Value;
use sqlx::types::Json;
use uuid::Uuid;

use crate::db::{Backend, BeginWrite as _, Db, Tx, with_pool, with_tx};
use crate::error::{Result, StoreError};
use crate::messages::StatusChange;
use crate::sql::bump_updated_at;
use tern_domain::failure::Failure;
use tern_domain::message::Status;
use tern_domain::timeline::{AttemptOutcome, Detail};

/// `dispatch_state` of a message waiting for an attempt at `next_attempt_at`. The API
/// inserts accepted outbound messages with this state and `next_attempt_at = now`.
pub const DISPATCH_QUEUED: &str = "queued";
/// `dispatch_state` of a claimed message (the send may be under way).
pub const DISPATCH_IN_FLIGHT: &str = "in_flight";
/// `dispatch_state` of a message whose send outcome is unknown.
pub const DISPATCH_UNKNOWN: &str = "unknown";

/// What to claim and on which terms.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DispatchClaim<'a> {
    /// Only this number's messages (`None`: any number).
    pub phone_number_id: Option<&'a str>,
    /// API sends only, no campaign message: the dispatcher failing an unusable number's
    /// messages leaves a campaign's in the queue, since the campaign pauses on that number
    /// and sends them after resume.
    pub api_only: bool,
    /// At most this many messages.
    pub limit: i64,
    /// The claiming worker (unique per worker instance).
    pub owner: &'a str,
    pub now: i64,
    /// How long the worker may take to record the outcome (`locked_until = now + lease_ms`).
    pub lease_ms: i64,
    /// Extra time, after the lease, for a status webhook to settle an abandoned claim:
    /// the message fails at `now + lease_ms + grace_ms` unless settled.
    pub grace_ms: i64,
}

/// A claimed message: what the worker needs to send it.
#[derive(Debug, Clone, PartialEq)]
pub struct DispatchItem {
    pub id: Uuid,
    pub org_id: Uuid,
    pub phone_number_id: String,
    /// The network payload fields except the envelope (`to`, `type`, `<type>`, `context`).
    pub request: Value,
    /// The Tern media the message sends (`messages.media_id`): the worker uploads it to the
    /// network for this number, or reuses the network's id, before the send call.
    pub media_id: Option<Uuid>,
    /// `sending` after the claim.
    pub status: Status,
    /// Claims so far, including this one.
    pub attempts: i64,
    pub created_at: i64,
    pub updated_at: i64,
    pub lease_owner: String,
    pub locked_until: i64,
    /// When the claim is given up if abandoned (`next_attempt_at`).
    pub deadline: i64,
}

impl DispatchItem {
    /// The proof of this claim, for the outcome writes.
    pub fn lease(&self) -> DispatchLease {
        DispatchLease {
            owner: self.lease_owner.clone(),
            attempt: self.attempts,
        }
    }
}

/// Identifies one claim: the worker and the attempt number it claimed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DispatchLease {
    pub owner: String,
    pub attempt: i64,
}

/// Result of `status_writes().complete_dispatch`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DispatchWrite {
    /// Written.
    Applied,
    /// The message's status or `updated_at` changed since it was read (a webhook): re-read,
    /// decide again with the domain rules, retry.
    Moved,
    /// The message was claimed again since (or does not exist): this worker's claim is
    /// stale and its outcome is dropped.
    LeaseLost,
}

/// A message the sweep failed because its send outcome stayed unknown past the deadline.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct ExpiredDispatch {
    pub id: Uuid,
    pub org_id: Uuid,
}

/// What one sweep of the queue did (`testkit::sweep_dispatch`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DispatchSweep {
    /// `in_flight` claims past their lease, now `unknown` (their worker died or hung).
    pub abandoned: u64,
    /// Messages taken out of the queue because their status had moved on (a webhook).
    pub released: u64,
    /// Messages failed with the given failure (still `sending` past the deadline).
    pub expired: Vec<ExpiredDispatch>,
}

/// Size of the queue by state.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DispatchCounts {
    pub queued: i64,
    pub in_flight: i64,
    pub unknown: i64,
}

/// The queue columns of one message (operators, tests).
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct DispatchInfo {
    #[sqlx(try_from = "String")]
    pub status: Status,
    pub dispatch_state: Option<String>,
    pub attempts: i64,
    pub next_attempt_at: Option<i64>,
    pub locked_until: Option<i64>,
    pub lease_owner: Option<String>,
    pub last_error: Option<String>,
}

#[derive(sqlx::FromRow)]
struct ItemRow {
    id: Uuid,
    org_id: Uuid,
    phone_number_id: String,
    request: Option<Json<Value>>,
    media_id: Option<Uuid>,
    #[sqlx(try_from = "String")]
    status: Status,
    attempts: i64,
    created_at: i64,
    updated_at: i64,
    lease_owner: Option<String>,
    locked_until: Option<i64>,
    next_attempt_at: Option<i64>,
}

impl From<ItemRow> for DispatchItem {
    fn from(r: ItemRow) -> Self {
        DispatchItem {
            id: r.id,
            org_id: r.org_id,
            phone_number_id: r.phone_number_id,
            request: r.request.map(|j| j.0).unwrap_or(Value::Null),
            media_id: r.media_id,
            status: r.status,
            attempts: r.attempts,
            created_at: r.created_at,
            updated_at: r.updated_at,
            lease_owner: r.lease_owner.unwrap_or_default(),
            locked_until: r.locked_until.unwrap_or_default(),
            deadline: r.next_attempt_at.unwrap_or_default(),
        }
    }
}

/// A queued message may go: an API send, or a running campaign's (a paused campaign's
/// messages wait in the queue until it resumes).
macro_rules! campaign_running {
    () => {
        "(campaign_id IS NULL OR campaign_id IN (SELECT c.id FROM campaigns c WHERE c.status = 'running'))"
    };
}

/// Claims due queued messages: `$1` limit, `$2` now, `$3` owner, `$4` lease end, `$5` give-up
/// deadline (and `$6` the phone number when `number` is given). Two texts rather than
/// `($6 IS NULL OR …)` so the planner can use the per-number index. `indexed $hint` names
/// SQLite's index for the sub-select: without statistics its planner took the index on
/// (dispatch_state, next_attempt_at) and sorted every due message of the queue for each
/// claim (20 ms at a backlog of 40,000, holding the write lock), where the per-number index
/// gives them in order.
macro_rules! claim_sql {
    (indexed $hint:literal, $filter:literal) => {
        claim_sql!(@ $hint, $filter)
    };
    ($filter:literal $(, $lock:literal)?) => {
        claim_sql!(@ "", $filter $(, $lock)?)
    };
    (@ $hint:literal, $filter:literal $(, $lock:literal)?) => {
        concat!(
            "UPDATE messages SET dispatch_state = 'in_flight', \
             status = CASE WHEN status = 'accepted' THEN 'sending' ELSE status END, \
             attempts = attempts + 1, lease_owner = $3, locked_until = $4, next_attempt_at = $5, \
             updated_at = ", bump_updated_at!("messages", "$2"), " \
             WHERE id IN (SELECT id FROM messages ", $hint, " \
                          WHERE dispatch_state = 'queued' ", $filter, " AND next_attempt_at <= $2 \
                            AND status IN ('accepted', 'sending') AND ", campaign_running!(), " \
                          ORDER BY (campaign_id IS NOT NULL), next_attempt_at, id LIMIT $1", $(" ", $lock,)? ") \
             RETURNING id, org_id, phone_number_id, request, media_id, status, attempts, \
             created_at, updated_at, lease_owner, locked_until, next_attempt_at"
        )
    };
}

/// Whether `$lease` is still the claim of message `$id` (on a `Tx`).
macro_rules! holds_lease {
    ($tx:expr, $id:expr, $lease:expr) => {{
        let (id, lease): (Uuid, &DispatchLease) = ($id, $lease);
        let row = $crate::db::with_tx!($tx, conn => sqlx::query_as::<_, (Option<String>, i64)>(
                "SELECT lease_owner, attempts FROM messages WHERE id = $1")
            .bind(id)
            .fetch_optional(&mut **conn)
            .await)?;
        row.is_some_and(|(owner, attempts)| {
            owner.as_deref() == Some(lease.owner.as_str()) && attempts == lease.attempt
        })
    }};
}
pub(crate) use holds_lease;

/// The claim statement for a backend, per number or not, API sends only or not.
fn claim_statement(backend: Backend, number: bool, api_only: bool) -> &'static str {
    match (backend, number, api_only) {
        (Backend::Sqlite, false, false) => claim_sql!(""),
        (Backend::Sqlite, false, true) => claim_sql!("AND campaign_id IS NULL"),
        (Backend::Sqlite, true, false) => claim_sql!(
            indexed "INDEXED BY messages_dispatch_number_idx",
            "AND phone_number_id = $6"
        ),
        (Backend::Sqlite, true, true) => claim_sql!(
            indexed "INDEXED BY messages_dispatch_number_idx",
            "AND phone_number_id = $6 AND campaign_id IS NULL"
        ),
        (Backend::Postgres, false, false) => claim_sql!("", "FOR NO KEY UPDATE SKIP LOCKED"),
        (Backend::Postgres, false, true) => {
            claim_sql!("AND campaign_id IS NULL", "FOR NO KEY UPDATE SKIP LOCKED")
        }
        (Backend::Postgres, true, false) => {
            claim_sql!("AND phone_number_id = $6", "FOR NO KEY UPDATE SKIP LOCKED")
        }
        (Backend::Postgres, true, true) => claim_sql!(
            "AND phone_number_id = $6 AND campaign_id IS NULL",
            "FOR NO KEY UPDATE SKIP LOCKED"
        ),
    }
}

impl Db {
    /// Puts an accepted outbound message (back) in the queue, due at `due_at`. `true` if it
    /// is queued now; `false` if it is not an outbound message still `accepted`, or is
    /// claimed / in doubt.
    ///
    /// The API should rather insert accepted messages with `dispatch_state = 'queued'` and
    /// `next_attempt_at` in the same statement, so no crash can leave one unqueued.
    pub async fn queue_message_dispatch(&self, id: Uuid, due_at: i64) -> Result<bool> {
        // SQLite: in this process's write turn, not SQLite's busy handler.
        let _turn = self.write_turn().await?;
        let n = with_pool!(self, pool => sqlx::query(
                "UPDATE messages SET dispatch_state = 'queued', next_attempt_at = $2, \
                 locked_until = NULL \
                 WHERE id = $1 AND direction = 'outbound' AND status = 'accepted' \
                   AND (dispatch_state IS NULL OR dispatch_state = 'queued')")
            .bind(id)
            .bind(due_at)
            .execute(pool)
            .await
            .map(|r| r.rows_affected()))?;
        self.wake_dispatch_if_due(n == 1, due_at);
        Ok(n == 1)
    }

    /// Wakes this process's dispatcher when a queue write left a message due now.
    fn wake_dispatch_if_due(&self, queued: bool, due_at: i64) {
        if queued && due_at <= tern_domain::time::now_ms() {
            self.wakeups.dispatch.notify_one();
        }
    }

    /// The numbers that have queued messages due at `now`, by id, after `after` (a cursor:
    /// the last id of the previous page), at most `limit`. The dispatcher asks this first so
    /// it can claim per number only what the number's pacing lets it send now. One index
    /// probe per number, whatever the backlog: a scalar subquery with `LIMIT 1` (an `EXISTS`
    /// became a semi-join over the whole queue in PostgreSQL's generic plan).
    pub async fn due_dispatch_numbers(
        &self,
        now: i64,
        after: Option<&str>,
        limit: i64,
    ) -> Result<Vec<String>> {
        let ids = with_pool!(self, pool => sqlx::query_scalar::<_, String>(concat!(
                "SELECT p.id FROM phone_numbers p \
                 WHERE ($2 IS NULL OR p.id > $2) AND ( \
                   SELECT m.next_attempt_at FROM messages m \
                   WHERE m.phone_number_id = p.id AND m.dispatch_state = 'queued' \
                     AND m.next_attempt_at <= $1 AND m.status IN ('accepted', 'sending') \
                     AND ", campaign_running!(), " \
                   LIMIT 1) IS NOT NULL \
                 ORDER BY p.id LIMIT $3"))
            .bind(now)
            .bind(after)
            .bind(limit)
            .fetch_all(pool)
            .await)?;
        Ok(ids)
    }

    /// Claims up to `claim.limit` queued messages due at `claim.now` (of one number, or of
    /// any), API sends before campaign sends (the priority lane), then the earliest due;
    /// a paused campaign's messages wait: `dispatch_state = 'in_flight'`, `status = 'sending'`,
    /// `attempts + 1`, `lease_owner`, `locked_until = now + lease`, and `next_attempt_at =
    /// now + lease + grace`, the deadline after which an abandoned claim fails (see the
    /// module docs: an in-flight claim is never claimed again). Safe with any number of
    /// workers and processes: a message is never claimed by two at once.
    pub(crate) async fn claim_dispatch(
        &self,
        claim: &DispatchClaim<'_>,
    ) -> Result<Vec<DispatchItem>> {
        if claim.limit <= 0 {
            return Ok(Vec::new());
        }
        let sql = claim_statement(
            self.backend(),
            claim.phone_number_id.is_some(),
            claim.api_only,
        );
        let lease_end = claim.now.saturating_add(claim.lease_ms.max(0));
        let deadline = lease_end.saturating_add(claim.grace_ms.max(0));
        let rows = with_pool!(self, pool => {
            let mut tx = pool.begin_write().await?;
            let rows = sqlx::query_as::<_, ItemRow>(sql)
                .bind(claim.limit)
                .bind(claim.now)
                .bind(claim.owner)
                .bind(lease_end)
                .bind(deadline)
                .bind(claim.phone_number_id)
                .fetch_all(&mut *tx)
                .await?;
            tx.commit().await?;
            rows
        });
        let mut items: Vec<DispatchItem> = rows.into_iter().map(DispatchItem::from).collect();
        // RETURNING does not keep the sub-select's order; ids are UUID v7 (creation order).
        items.sort_by_key(|i| i.id);
        Ok(items)
    }

    /// [`Tx::complete_dispatch`] in a transaction of its own.
    pub(crate) async fn complete_dispatch(
        &self,
        id: Uuid,
        lease: &DispatchLease,
        expected_status: Status,
        expected_updated_at: i64,
        change: &StatusChange,
        at: i64,
    ) -> Result<DispatchWrite> {
        let mut tx = self.begin().await?;
        let r = tx
            .complete_dispatch(id, lease, expected_status, expected_updated_at, change, at)
            .await?;
        tx.commit().await?;
        Ok(r)
    }

    /// The network did not take the message (or the request never left): back to `queued`,
    /// due at `retry_at`, keeping `error` in `last_error`, with the attempt's timeline
    /// `entry` in the same transaction. A message whose status already moved on (a webhook)
    /// leaves the queue instead. `false` when `lease` is no longer the message's claim
    /// (nothing written).
    pub async fn retry_dispatch(
        &self,
        id: Uuid,
        lease: &DispatchLease,
        retry_at: i64,
        error: &str,
        entry: &Detail,
    ) -> Result<bool> {
        let queued = self
            .requeue(id, lease, DISPATCH_QUEUED, retry_at, error, entry)
            .await?;
        self.wake_dispatch_if_due(queued, retry_at);
        Ok(queued)
    }

    /// The request may have reached the network but no answer came: `unknown` until
    /// `deadline`, with the attempt's timeline `entry`. The message is not sent again; a
    /// status webhook settles it, or the expiry (`Tx::status_writes().expire_dispatch`)
    /// fails it at the deadline. A message whose status already moved on leaves the queue
    /// instead. `false` when `lease` is no longer the message's claim.
    pub async fn mark_dispatch_unknown(
        &self,
        id: Uuid,
        lease: &DispatchLease,
        deadline: i64,
        error: &str,
        entry: &Detail,
    ) -> Result<bool> {
        self.requeue(id, lease, DISPATCH_UNKNOWN, deadline, error, entry)
            .await
    }

    async fn requeue(
        &self,
        id: Uuid,
        lease: &DispatchLease,
        state: &str,
        at: i64,
        error: &str,
        entry: &Detail,
    ) -> Result<bool> {
        let mut tx = self.begin().await?;
        let n = with_tx!(tx, conn => sqlx::query(
                "UPDATE messages SET \
                 dispatch_state = CASE WHEN status IN ('accepted', 'sending') THEN $1 ELSE NULL END, \
                 next_attempt_at = CASE WHEN status IN ('accepted', 'sending') THEN $2 ELSE NULL END, \
                 locked_until = NULL, last_error = $3 \
                 WHERE id = $4 AND lease_owner = $5 AND attempts = $6")
            .bind(state)
            .bind(at)
            .bind(error)
            .bind(id)
            .bind(&lease.owner)
            .bind(lease.attempt)
            .execute(&mut **conn)
            .await
            .map(|r| r.rows_affected()))?;
        if n != 1 {
            return Ok(false);
        }
        tx.add_timeline(id, tern_domain::time::now_ms(), entry);
        tx.commit().await?;
        Ok(true)
    }

    /// The first two steps of the queue's housekeeping (`testkit::sweep_dispatch` shows all three): claims past their lease become
    /// `unknown`, and messages whose status moved on leave the queue. Returns how many of
    /// each.
    pub async fn release_dispatch(&self, now: i64) -> Result<(u64, u64)> {
        // The claim's attempt gets its `unknown` entry with the change, so the timeline of a
        // message whose worker died (kill -9) has no gap, however it ends.
        const ABANDON: &str = "UPDATE messages SET dispatch_state = 'unknown' \
             WHERE dispatch_state = 'in_flight' AND locked_until < $1 RETURNING id, attempts";
        const RELEASE: &str = "UPDATE messages SET dispatch_state = NULL, next_attempt_at = NULL, \
             locked_until = NULL \
             WHERE dispatch_state IN ('in_flight', 'unknown') \
               AND status NOT IN ('accepted', 'sending')";
        let mut tx = self.begin().await?;
        let abandoned = with_tx!(tx, conn => sqlx::query_as::<_, (Uuid, i64)>(ABANDON)
            .bind(now)
            .fetch_all(&mut **conn)
            .await)?;
        for (id, attempt) in &abandoned {
            tx.add_timeline(*id, now, &lost_attempt(*attempt));
        }
        let released = with_tx!(tx, conn => sqlx::query(RELEASE)
            .execute(&mut **conn)
            .await
            .map(|r| r.rows_affected()))?;
        tx.commit().await?;
        Ok((abandoned.len() as u64, released))
    }

    /// [`Tx::refund_message_debit`] in a transaction of its own.
    pub(crate) async fn refund_message_debit(&self, id: Uuid, at: i64) -> Result<i64> {
        let mut tx = self.begin().await?;
        let r = tx.refund_message_debit(id, at).await?;
        tx.commit().await?;
        Ok(r)
    }

    /// Messages in the queue by state (a backlog gauge).
    pub async fn count_dispatch_queue(&self) -> Result<DispatchCounts> {
        let rows = with_pool!(self, pool => sqlx::query_as::<_, (String, i64)>(
                "SELECT dispatch_state, COUNT(*) FROM messages \
                 WHERE dispatch_state IS NOT NULL GROUP BY dispatch_state")
            .fetch_all(pool)
            .await)?;
        let mut counts = DispatchCounts::default();
        for (state, n) in rows {
            match state.as_str() {
                DISPATCH_QUEUED => counts.queued += n,
                DISPATCH_IN_FLIGHT => counts.in_flight += n,
                DISPATCH_UNKNOWN => counts.unknown += n,
                _ => {}
            }
        }
        Ok(counts)
    }

    /// The queue columns of message `id` (any organisation). `NotFound` if missing.
    pub async fn dispatch_info(&self, id: Uuid) -> Result<DispatchInfo> {
        let info = with_pool!(self, pool => sqlx::query_as::<_, DispatchInfo>(
                "SELECT status, dispatch_state, attempts, next_attempt_at, locked_until, \
                 lease_owner, last_error FROM messages WHERE id = $1")
            .bind(id)
            .fetch_optional(pool)
            .await)?;
        info.ok_or(StoreError::NotFound)
    }
}

/// The entry of a claim whose worker stopped (died or hung) before recording its answer.
fn lost_attempt(attempt: i64) -> Detail {
    Detail::DispatchAttempt {
        attempt,
        outcome: AttemptOutcome::Unknown,
        http_status: None,
        error_code: None,
        error_message: Some(
            "The sending process stopped before it recorded the network's answer; the message \
             is not sent again and waits for the network's status."
                .into(),
        ),
        latency_ms: None,
        next_attempt_at: None,
    }
}

impl Tx {
    /// Records the final outcome of a claim (sent, or failed for good): writes `change` as
    /// [`Db::update_message_status`] does (compare-and-set on `expected_status` and
    /// `expected_updated_at`, wamid only if none is stored) and takes the message out of the
    /// queue. The caller decides `change` with the domain's status rules, since a webhook may
    /// have moved the message first ([`DispatchWrite::Moved`]: re-read and decide again).
    /// Refused ([`DispatchWrite::LeaseLost`]) when `lease` is no longer the message's claim.
    pub(crate) async fn complete_dispatch(
        &mut self,
        id: Uuid,
        lease: &DispatchLease,
        expected_status: Status,
        expected_updated_at: i64,
        change: &StatusChange,
        at: i64,
    ) -> Result<DispatchWrite> {
        const SQL: &str = concat!(
            "UPDATE messages SET status = $1, wamid = COALESCE(wamid, $2), sent_at = $3, \
             delivered_at = $4, read_at = $5, failed_at = $6, failure_code = $7, failure = $8, \
             dispatch_state = NULL, next_attempt_at = NULL, locked_until = NULL, \
             updated_at = ",
            bump_updated_at!("messages", "$9"),
            " WHERE id = $10 AND lease_owner = $11 AND attempts = $12 \
               AND status = $13 AND updated_at = $14"
        );
        let n = with_tx!(self, conn => sqlx::query(SQL)
            .bind(change.status.as_str())
            .bind(&change.wamid)
            .bind(change.sent_at)
            .bind(change.delivered_at)
            .bind(change.read_at)
            .bind(change.failed_at)
            .bind(&change.failure_code)
            .bind(change.failure.as_ref().map(Json))
            .bind(at)
            .bind(id)
            .bind(&lease.owner)
            .bind(lease.attempt)
            .bind(expected_status.as_str())
            .bind(expected_updated_at)
            .execute(&mut **conn)
            .await
            .map(|r| r.rows_affected()))?;
        if n == 1 {
            return Ok(DispatchWrite::Applied);
        }
        Ok(if holds_lease!(self, id, lease) {
            DispatchWrite::Moved
        } else {
            DispatchWrite::LeaseLost
        })
    }

    /// Gives back the wallet debit of message `id` (a template message that failed before
    /// reaching the network): a `message_refund` ledger entry of the debited amount and the
    /// balance moved back, in the caller's transaction, at most once per message. Returns the amount
    /// refunded (0 when the message was never debited or was refunded already).
    pub(crate) async fn refund_message_debit(&mut self, id: Uuid, at: i64) -> Result<i64> {
        with_tx!(self, tx => {
            let debit = sqlx::query_as::<_, (Uuid, i64)>(
                    "SELECT org_id, amount_minor FROM wallet_ledger \
                     WHERE message_id = $1 AND reason = 'message_debit'")
                .bind(id)
                .fetch_optional(&mut **tx)
                .await?;
            let Some((org_id, debited)) = debit.filter(|(_, amount)| *amount < 0) else {
                return Ok(0);
            };
            let refund = -debited;
            let inserted = sqlx::query(
                    "INSERT INTO wallet_ledger (id, org_id, amount_minor, reason, message_id, created_at) \
                     VALUES ($1, $2, $3, 'message_refund', $4, $5) \
                     ON CONFLICT (message_id, reason) WHERE message_id IS NOT NULL DO NOTHING")
                .bind(Uuid::now_v7())
                .bind(org_id)
                .bind(refund)
                .bind(id)
                .bind(at)
                .execute(&mut **tx)
                .await?
                .rows_affected();
            if inserted == 0 {
                return Ok(0);
            }
            sqlx::query(
                    "UPDATE organisations SET wallet_balance_minor = wallet_balance_minor + $2 \
                     WHERE id = $1")
                .bind(org_id)
                .bind(refund)
                .execute(&mut **tx)
                .await?;
            Ok(refund)
        })
    }
}

impl Tx {
    /// The last step of the queue's housekeeping, in this transaction (the events reporting
    /// the failures join it): messages still `sending` whose outcome stayed unknown past
    /// their deadline fail with `failure`, at most `limit`. Returns them, by id.
    pub(crate) async fn expire_dispatch(
        &mut self,
        now: i64,
        failure_code: &str,
        failure: &Failure,
        limit: i64,
    ) -> Result<Vec<ExpiredDispatch>> {
        const EXPIRE: &str = concat!(
            "UPDATE messages SET status = 'failed', failed_at = $2, failure_code = $3, \
             failure = $4, dispatch_state = NULL, next_attempt_at = NULL, locked_until = NULL, \
             updated_at = ",
            bump_updated_at!("messages", "$2"),
            " WHERE id IN (SELECT id FROM messages \
                          WHERE dispatch_state IN ('in_flight', 'unknown') \
                            AND next_attempt_at <= $2 AND status = 'sending' \
                          ORDER BY next_attempt_at, id LIMIT $1) \
               AND dispatch_state IN ('in_flight', 'unknown') AND next_attempt_at <= $2 \
               AND status = 'sending' \
             RETURNING id, org_id"
        );
        let expired = with_tx!(self, conn => sqlx::query_as::<_, (Uuid, Uuid)>(EXPIRE)
            .bind(limit)
            .bind(now)
            .bind(failure_code)
            .bind(Json(failure))
            .fetch_all(&mut **conn)
            .await)?;
        let mut expired: Vec<ExpiredDispatch> = expired
            .into_iter()
            .map(|(id, org_id)| ExpiredDispatch { id, org_id })
            .collect();
        expired.sort();
        Ok(expired)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::db::Pool;

    /// SQLite's plan of a per-number claim walks the per-number index in claim order: no
    /// sort of the queue (`USE TEMP B-TREE FOR ORDER BY`), whatever the backlog.
    #[tokio::test]
    async fn a_number_claim_on_sqlite_reads_the_queue_in_order_without_sorting_it() {
        let db = Db::connect("sqlite::memory:").await.unwrap();
        db.migrate().await.unwrap();
        let Pool::Sqlite(pool) = &db.pool else {
            unreachable!("an in-memory SQLite database");
        };
        for api_only in [false, true] {
            let sql = format!(
                "EXPLAIN QUERY PLAN {}",
                claim_statement(Backend::Sqlite, true, api_only)
            );
            let plan: Vec<String> =
                sqlx::query_as::<_, (i64, i64, i64, String)>(sqlx::AssertSqlSafe(sql))
                    .bind(10_i64)
                    .bind(0_i64)
                    .bind("w")
                    .bind(0_i64)
                    .bind(0_i64)
                    .bind("100")
                    .fetch_all(pool)
                    .await
                    .unwrap()
                    .into_iter()
                    .map(|(_, _, _, detail)| detail)
                    .collect();
            assert!(
                plan.iter()
                    .any(|d| d.contains("messages_dispatch_number_idx")),
                "api_only {api_only}: {plan:?}"
            );
            assert!(
                !plan.iter().any(|d| d.contains("TEMP B-TREE")),
                "api_only {api_only}: {plan:?}"
            );
        }
    }
}
