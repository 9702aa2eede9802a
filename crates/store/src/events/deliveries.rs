//! The deliveries queue of the event webhooks (see the parent module): deliveries inserted
//! for one subscription (test sends, replays), claimed with leases and a per-subscription
//! in-flight cap, attempts recorded in batches, the attempt log, replays.

use uuid::Uuid;

use super::{
    AttemptRecord, AttemptStatus, Delivery, DeliveryJob, DeliveryOutcome, DeliveryStatus,
    INSERT_EVENT, NewEvent, Recording, WebhookAttempt,
};
use crate::db::{BeginWrite as _, Db, Pool, with_pool};
use crate::error::{Result, StoreError};
use crate::sql::{ROWS_PER_STATEMENT as CHUNK, bump_updated_at, push_id_list, split_after};
use crate::timeline;
use tern_domain::timeline::{Detail, WebhookOutcome, time};

/// PostgreSQL's claim: for each subscription, its earliest due deliveries up to `$5` less
/// those it has in flight (leased by anyone), through the per-subscription index, so a claim
/// costs O(subscriptions × cap) however long the backlog; then the earliest `$1` of those,
/// locked (skipping rows another claimer holds) and leased: `$2` now, `$3` owner, `$4`
/// lease end.
macro_rules! claim_postgres {
    () => {
        "\
    WITH cand AS ( \
      SELECT d.id, d.next_attempt_at FROM webhook_subscriptions s \
      CROSS JOIN LATERAL ( \
        SELECT id, next_attempt_at FROM webhook_deliveries d \
        WHERE d.subscription_id = s.id AND d.status = 'pending' AND d.next_attempt_at <= $2 \
        ORDER BY d.next_attempt_at, d.id \
        LIMIT GREATEST(COALESCE((SELECT o.cap FROM unnest($6::uuid[], $7::int8[]) AS o(id, cap) \
            WHERE o.id = s.id), $5) - (SELECT COUNT(*) FROM webhook_deliveries b \
            WHERE b.subscription_id = s.id AND b.status = 'pending' AND b.locked_until > $2), 0) \
      ) d \
      ORDER BY d.next_attempt_at, d.id LIMIT $1 \
    ), locked AS ( \
      SELECT id FROM webhook_deliveries WHERE id = ANY(ARRAY(SELECT id FROM cand)) \
        AND status = 'pending' AND next_attempt_at <= $2 FOR UPDATE SKIP LOCKED \
    ), claimed AS ( \
      UPDATE webhook_deliveries SET lease_owner = $3, locked_until = $4, next_attempt_at = $4 \
      WHERE id = ANY(ARRAY(SELECT id FROM locked)) AND status = 'pending' \
        AND next_attempt_at <= $2 \
      RETURNING id, subscription_id, event_id, attempts, lease_owner, locked_until \
    ) "
    };
}

/// The job of each delivery of `$from` (aliased `d`).
macro_rules! job_sql {
    ($from:literal, $where:literal) => {
        concat!(
            "SELECT d.id AS delivery_id, d.subscription_id, s.org_id, d.event_id, \
             e.type AS event_type, e.payload, e.created_at AS event_created_at, \
             d.attempts + 1 AS attempt, d.lease_owner, d.locked_until, s.url, s.secret_enc, \
             s.previous_secret_enc, s.previous_secret_expires_at, s.enabled, e.message_id FROM ",
            $from,
            " d JOIN events e ON e.id = d.event_id \
             JOIN webhook_subscriptions s ON s.id = d.subscription_id",
            $where
        )
    };
}

impl Db {
    /// Stores `event` with one pending delivery (due at its `created_at`) to the
    /// organisation's subscription `subscription_id` only, whatever the types it lists or
    /// whether it is enabled (test sends, replays). Returns the delivery's id; `NotFound`
    /// (nothing stored) when the subscription is not the event's organisation's.
    pub async fn insert_event_for_subscription(
        &self,
        event: &NewEvent,
        subscription_id: Uuid,
    ) -> Result<Uuid> {
        self.insert_event_for_one(event, subscription_id, None)
            .await
    }

    /// [`Db::insert_event_for_subscription`], the delivery already leased to `owner` until
    /// `until` (a test send made at once by the caller, which records its attempt with
    /// [`Db::record_webhook_attempts`]; should the caller die, a worker takes it then).
    pub async fn insert_leased_event_for_subscription(
        &self,
        event: &NewEvent,
        subscription_id: Uuid,
        owner: &str,
        until: i64,
    ) -> Result<Uuid> {
        self.insert_event_for_one(event, subscription_id, Some((owner, until)))
            .await
    }

    async fn insert_event_for_one(
        &self,
        event: &NewEvent,
        subscription_id: Uuid,
        lease: Option<(&str, i64)>,
    ) -> Result<Uuid> {
        const DELIVERY: &str = "INSERT INTO webhook_deliveries (id, event_id, subscription_id, \
             status, attempts, next_attempt_at, lease_owner, locked_until, created_at, updated_at) \
             SELECT $1, $2, id, 'pending', 0, COALESCE($7, $4), $6, $7, $4, $4 \
             FROM webhook_subscriptions WHERE id = $3 AND org_id = $5 AND kind = 'webhook'";
        let delivery_id = Uuid::now_v7();
        let (owner, until) = lease.unzip();
        let n = with_pool!(self, pool => {
            let mut tx = pool.begin_write().await?;
            sqlx::query(INSERT_EVENT)
                .bind(event.id)
                .bind(event.org_id)
                .bind(&event.event_type)
                .bind(&event.payload)
                .bind(event.created_at)
                .execute(&mut *tx)
                .await?;
            let n = sqlx::query(DELIVERY)
                .bind(delivery_id)
                .bind(event.id)
                .bind(subscription_id)
                .bind(event.created_at)
                .bind(event.org_id)
                .bind(owner)
                .bind(until)
                .execute(&mut *tx)
                .await?
                .rows_affected();
            if n == 1 {
                tx.commit().await?;
            }
            n
        });
        if n == 1 {
            if lease.is_none() {
                self.wakeups.deliveries.notify_one();
            }
            Ok(delivery_id)
        } else {
            Err(StoreError::NotFound)
        }
    }

    /// Every delivery's event and status (operators, tests: is everything delivered?); an
    /// event not yet fanned out counts as one pending delivery.
    pub async fn webhook_delivery_states(&self) -> Result<Vec<(Uuid, DeliveryStatus)>> {
        #[derive(sqlx::FromRow)]
        struct Row {
            event_id: Uuid,
            #[sqlx(try_from = "String")]
            status: DeliveryStatus,
        }
        let rows = with_pool!(self, pool => sqlx::query_as::<_, Row>(
                "SELECT event_id, status FROM webhook_deliveries \
                 UNION ALL SELECT id, 'pending' FROM events WHERE fanout IS NOT NULL \
                 ORDER BY event_id")
            .fetch_all(pool)
            .await)?;
        Ok(rows.into_iter().map(|r| (r.event_id, r.status)).collect())
    }

    /// The deliveries of an event, by subscription id (operators, tests).
    pub async fn webhook_deliveries_of_event(&self, event_id: Uuid) -> Result<Vec<Delivery>> {
        let rows = with_pool!(self, pool => sqlx::query_as::<_, Delivery>(
                "SELECT id, event_id, subscription_id, status, attempts, next_attempt_at, \
                 locked_until, lease_owner, last_status_code, last_error, created_at, updated_at \
                 FROM webhook_deliveries WHERE event_id = $1 ORDER BY subscription_id")
            .bind(event_id)
            .fetch_all(pool)
            .await)?;
        Ok(rows)
    }

    /// Claims up to `limit` due deliveries for `owner`, earliest due first but at most
    /// `per_subscription_limit` of any one subscription (one busy or slow receiver cannot
    /// take every slot), leased until `now + lease_ms` (and due again then, should the
    /// worker die). Safe with any number of workers and processes: a delivery is never
    /// claimed by two at once (PostgreSQL: `FOR UPDATE SKIP LOCKED`; SQLite:
    /// `BEGIN IMMEDIATE`).
    pub async fn claim_webhook_deliveries(
        &self,
        owner: &str,
        now: i64,
        lease_ms: i64,
        limit: i64,
        per_subscription_limit: i64,
    ) -> Result<Vec<DeliveryJob>> {
        self.claim_webhook_deliveries_capped(
            owner,
            now,
            lease_ms,
            limit,
            per_subscription_limit,
            &[],
        )
        .await
    }

    /// [`Db::claim_webhook_deliveries`] where the subscriptions of `caps` have a limit of
    /// their own instead of `per_subscription_limit` (the delivery workers' per-endpoint
    /// concurrency, `tern_domain::events::concurrency`).
    pub async fn claim_webhook_deliveries_capped(
        &self,
        owner: &str,
        now: i64,
        lease_ms: i64,
        limit: i64,
        per_subscription_limit: i64,
        caps: &[(Uuid, i64)],
    ) -> Result<Vec<DeliveryJob>> {
        if limit <= 0 || (per_subscription_limit <= 0 && caps.iter().all(|(_, c)| *c <= 0)) {
            return Ok(Vec::new());
        }
        let lease_end = now.saturating_add(lease_ms.max(0));
        let mut jobs = match &self.pool {
            Pool::Sqlite(pool) => {
                let caps = (per_subscription_limit, caps);
                claim_sqlite(pool, owner, now, lease_end, limit, caps).await?
            }
            Pool::Postgres(pool) => {
                const SQL: &str = concat!(claim_postgres!(), job_sql!("claimed", ""));
                let mut tx = pool.begin_write().await?;
                let jobs = sqlx::query_as::<_, DeliveryJob>(SQL)
                    .bind(limit)
                    .bind(now)
                    .bind(owner)
                    .bind(lease_end)
                    .bind(per_subscription_limit)
                    .bind(caps.iter().map(|(s, _)| *s).collect::<Vec<Uuid>>())
                    .bind(caps.iter().map(|(_, c)| *c).collect::<Vec<i64>>())
                    .fetch_all(&mut *tx)
                    .await?;
                tx.commit().await?;
                jobs
            }
        };
        // RETURNING does not keep the sub-select's order.
        jobs.sort_by_key(|j| (j.event_created_at, j.delivery_id));
        Ok(jobs)
    }

    /// Records an attempt at a claimed delivery and its `outcome` (see
    /// [`Db::record_webhook_attempts`]).
    pub async fn record_webhook_attempt(
        &self,
        delivery_id: Uuid,
        owner: &str,
        attempt: &AttemptRecord,
        outcome: DeliveryOutcome,
    ) -> Result<bool> {
        let r = self
            .record_webhook_attempts(&[Recording {
                delivery_id,
                owner,
                attempt,
                outcome,
                message: None,
            }])
            .await?;
        Ok(r.first().copied().unwrap_or(false))
    }

    /// Records attempts at claimed deliveries, all in one transaction: for each, the attempt
    /// row (numbered `attempts + 1`) and the delivery (attempts + 1, status, due time, lease
    /// released). Per recording, `false` (nothing written for it) when its owner no longer
    /// holds the delivery (its lease ended and another worker claimed it) or the delivery is
    /// closed or gone (its subscription was deleted).
    pub async fn record_webhook_attempts(&self, recordings: &[Recording<'_>]) -> Result<Vec<bool>> {
        if recordings.is_empty() {
            return Ok(Vec::new());
        }
        match &self.pool {
            Pool::Postgres(pool) => record_postgres(pool, recordings).await,
            Pool::Sqlite(pool) => record_sqlite(pool, recordings).await,
        }
    }

    /// The attempt log of the key's subscription, newest first (`created_at`, then id),
    /// before the keyset position `before`, optionally only of one status. Empty when the
    /// subscription is not the key's.
    pub async fn list_webhook_attempts(
        &self,
        org_id: Uuid,
        api_key_id: Uuid,
        subscription_id: Uuid,
        status: Option<AttemptStatus>,
        before: Option<(i64, Uuid)>,
        limit: i64,
    ) -> Result<Vec<WebhookAttempt>> {
        const SQL: &str = "SELECT a.id, a.delivery_id, a.subscription_id, a.event_id, \
             a.event_type, a.attempt, a.status, a.response_status, a.latency_ms, a.error, \
             a.created_at, a.response_body FROM webhook_attempts a \
             JOIN webhook_subscriptions s ON s.id = a.subscription_id \
             WHERE a.subscription_id = $1 AND s.org_id = $2 AND s.api_key_id = $3 \
               AND ($4 IS NULL OR a.status = $4) \
               AND ($5 IS NULL OR a.created_at < $5 OR (a.created_at = $5 AND a.id < $6)) \
             ORDER BY a.created_at DESC, a.id DESC LIMIT $7";
        let (before_at, before_id) = split_after(before);
        let rows = with_pool!(self, pool => sqlx::query_as::<_, WebhookAttempt>(SQL)
            .bind(subscription_id)
            .bind(org_id)
            .bind(api_key_id)
            .bind(status.map(AttemptStatus::as_str))
            .bind(before_at)
            .bind(before_id)
            .bind(limit)
            .fetch_all(pool)
            .await)?;
        Ok(rows)
    }

    /// Re-queues the subscription's failed deliveries of events created at or after `since`:
    /// pending, due at `now`, with their attempt count reset so the replay gets the whole
    /// retry schedule (the attempt log keeps the earlier attempts). Returns how many.
    pub async fn replay_failed_deliveries(
        &self,
        subscription_id: Uuid,
        since: i64,
        now: i64,
    ) -> Result<u64> {
        const SQL: &str = concat!(
            "UPDATE webhook_deliveries SET status = 'pending', attempts = 0, \
             next_attempt_at = $3, locked_until = NULL, lease_owner = NULL, updated_at = ",
            bump_updated_at!("webhook_deliveries", "$3"),
            " WHERE subscription_id = $1 AND status = 'failed' \
               AND event_id IN (SELECT id FROM events WHERE created_at >= $2)"
        );
        let n = with_pool!(self, pool => sqlx::query(SQL)
            .bind(subscription_id)
            .bind(since)
            .bind(now)
            .execute(pool)
            .await
            .map(|r| r.rows_affected()))?;
        if n > 0 {
            self.wakeups.deliveries.notify_one();
        }
        Ok(n)
    }

    /// When the next delivery is due (possibly in the past), or `None` when none is pending:
    /// how long a worker may sleep. A leased delivery counts at the end of its lease, an
    /// event not yet fanned out at its `created_at`.
    pub async fn next_webhook_delivery_due(&self) -> Result<Option<i64>> {
        let due = with_pool!(self, pool => sqlx::query_scalar::<_, Option<i64>>(
                "SELECT MIN(t) FROM ( \
                   SELECT MIN(next_attempt_at) AS t FROM webhook_deliveries WHERE status = 'pending' \
                   UNION ALL SELECT MIN(created_at) FROM events WHERE fanout IS NOT NULL) due")
            .fetch_one(pool)
            .await)?;
        Ok(due)
    }

    /// Deletes events created before `cutoff` that no delivery (nor fan-out) waits for any more, with
    /// their deliveries and attempts (cascade). Returns how many events.
    pub async fn prune_events(&self, cutoff: i64) -> Result<u64> {
        // SQLite: in this process's write turn, not SQLite's busy handler.
        let _turn = self.write_turn().await?;
        let n = with_pool!(self, pool => sqlx::query(
                "DELETE FROM events WHERE created_at < $1 AND fanout IS NULL AND NOT EXISTS ( \
                   SELECT 1 FROM webhook_deliveries d \
                   WHERE d.event_id = events.id AND d.status = 'pending')")
            .bind(cutoff)
            .execute(pool)
            .await
            .map(|r| r.rows_affected()))?;
        Ok(n)
    }
}

/// [`Db::record_webhook_attempts`] on PostgreSQL: every recording in one statement (one
/// round trip, not two per attempt: the workers record what finished while they wait).
async fn record_postgres(pool: &sqlx::PgPool, recordings: &[Recording<'_>]) -> Result<Vec<bool>> {
    let mut q = sqlx::QueryBuilder::new(
        "WITH v (id, owner, status, next_at, code, err, at, attempt_id, attempt_status, latency, \
         body) AS (",
    );
    q.push_values(recordings, |mut row, r| {
        let (status, next, attempt_status) = outcome_columns(r.outcome);
        row.push_bind(r.delivery_id)
            .push_unseparated("::uuid")
            .push_bind(r.owner.to_string())
            .push_unseparated("::text")
            .push_bind(status.as_str())
            .push_unseparated("::text")
            .push_bind(next)
            .push_unseparated("::bigint")
            .push_bind(r.attempt.response_status)
            .push_unseparated("::bigint")
            .push_bind(r.attempt.error.clone())
            .push_unseparated("::text")
            .push_bind(r.attempt.created_at)
            .push_unseparated("::bigint")
            .push_bind(r.attempt.id)
            .push_unseparated("::uuid")
            .push_bind(attempt_status.as_str())
            .push_unseparated("::text")
            .push_bind(r.attempt.latency_ms)
            .push_unseparated("::bigint")
            .push_bind(r.attempt.response_body.clone())
            .push_unseparated("::text");
    });
    q.push(
        "), upd AS (UPDATE webhook_deliveries d SET attempts = d.attempts + 1, status = v.status, \
           next_attempt_at = v.next_at, locked_until = NULL, lease_owner = NULL, \
           last_status_code = v.code, last_error = v.err, \
           updated_at = CASE WHEN v.at > d.updated_at THEN v.at ELSE d.updated_at + 1 END \
         FROM v WHERE d.id = v.id AND d.lease_owner = v.owner AND d.status = 'pending' \
         RETURNING d.id, d.subscription_id, d.event_id, d.attempts) \
         INSERT INTO webhook_attempts (id, delivery_id, subscription_id, event_id, event_type, \
           attempt, status, response_status, latency_ms, error, created_at, response_body) \
         SELECT v.attempt_id, upd.id, upd.subscription_id, upd.event_id, e.type, upd.attempts, \
           v.attempt_status, v.code, v.latency, v.err, v.at, v.body \
         FROM upd JOIN v ON v.id = upd.id JOIN events e ON e.id = upd.event_id \
         RETURNING delivery_id, subscription_id, event_id, attempt",
    );
    let mut tx = pool.begin_write().await?;
    let recorded: std::collections::HashMap<Uuid, (Uuid, Uuid, i64)> = q
        .build_query_as::<(Uuid, Uuid, Uuid, i64)>()
        .persistent(crate::sql::recurs(recordings.len()))
        .fetch_all(&mut *tx)
        .await?
        .into_iter()
        .map(|(d, s, e, n)| (d, (s, e, n)))
        .collect();
    timeline::insert_pg(&mut tx, &attempt_entries(recordings, &recorded)).await?;
    tx.commit().await?;
    Ok(recordings
        .iter()
        .map(|r| recorded.contains_key(&r.delivery_id))
        .collect())
}

/// The timeline entries of the recorded attempts at deliveries of message events
/// (`recorded`: delivery id → subscription, event, attempt number).
fn attempt_entries(
    recordings: &[Recording<'_>],
    recorded: &std::collections::HashMap<Uuid, (Uuid, Uuid, i64)>,
) -> Vec<timeline::NewRow> {
    recordings
        .iter()
        .filter_map(|r| {
            let (message_id, host) = r.message?;
            let (subscription_id, event_id, attempt) = *recorded.get(&r.delivery_id)?;
            let (outcome, next) = match r.outcome {
                DeliveryOutcome::Succeeded => (WebhookOutcome::Succeeded, None),
                DeliveryOutcome::Retry { next_attempt_at } => {
                    (WebhookOutcome::Failed, Some(time(next_attempt_at)))
                }
                DeliveryOutcome::Failed => (WebhookOutcome::Failed, None),
            };
            let detail = Detail::WebhookAttempt {
                subscription_id,
                event_id,
                host: host.to_string(),
                attempt,
                response_status: r.attempt.response_status,
                // No answer, no latency to tell.
                latency_ms: r.attempt.response_status.map(|_| r.attempt.latency_ms),
                outcome,
                next_attempt_at: next,
            };
            Some(timeline::NewRow::new(
                message_id,
                r.attempt.created_at,
                &detail,
            ))
        })
        .collect()
}

/// The delivery's new status, due time and the attempt's status for an outcome.
fn outcome_columns(o: DeliveryOutcome) -> (DeliveryStatus, Option<i64>, AttemptStatus) {
    match o {
        DeliveryOutcome::Succeeded => (DeliveryStatus::Succeeded, None, AttemptStatus::Succeeded),
        DeliveryOutcome::Retry { next_attempt_at } => (
            DeliveryStatus::Pending,
            Some(next_attempt_at),
            AttemptStatus::Failed,
        ),
        DeliveryOutcome::Failed => (DeliveryStatus::Failed, None, AttemptStatus::Failed),
    }
}

/// [`Db::claim_webhook_deliveries`] on SQLite: the same choice as PostgreSQL's in four
/// statements inside `BEGIN IMMEDIATE` (the single writer is held for as few round trips as
/// possible, not two per delivery): each subscription's room, each one's first due
/// deliveries (one compound select; SQLite cannot limit a correlated subquery by an outer
/// column), the lease, the jobs.
async fn claim_sqlite(
    pool: &sqlx::SqlitePool,
    owner: &str,
    now: i64,
    lease_end: i64,
    limit: i64,
    (per_subscription_limit, caps): (i64, &[(Uuid, i64)]),
) -> Result<Vec<DeliveryJob>> {
    const SUBS: &str = "SELECT s.id, (SELECT COUNT(*) FROM webhook_deliveries b \
         WHERE b.subscription_id = s.id AND b.status = 'pending' AND b.locked_until > $1) \
         FROM webhook_subscriptions s WHERE EXISTS (SELECT 1 FROM webhook_deliveries d \
           WHERE d.subscription_id = s.id AND d.status = 'pending' AND d.next_attempt_at <= $1)";
    // SQLite allows 500 arms in a compound select.
    const ARMS: usize = 400;
    let caps: std::collections::HashMap<Uuid, i64> = caps.iter().copied().collect();
    let mut tx = pool.begin_write().await?;
    let rooms: Vec<(Uuid, i64)> = sqlx::query_as::<_, (Uuid, i64)>(SUBS)
        .bind(now)
        .fetch_all(&mut *tx)
        .await?
        .into_iter()
        .filter_map(|(sub, busy)| {
            let cap = caps.get(&sub).copied().unwrap_or(per_subscription_limit);
            let room = cap - busy;
            (room > 0).then_some((sub, room))
        })
        .collect();
    let mut due: Vec<(i64, Uuid)> = Vec::new();
    for arms in rooms.chunks(ARMS) {
        let mut q = sqlx::QueryBuilder::new("");
        for (i, (sub, room)) in arms.iter().enumerate() {
            if i > 0 {
                q.push(" UNION ALL ");
            }
            q.push(
                "SELECT * FROM (SELECT next_attempt_at, id FROM webhook_deliveries \
                 WHERE subscription_id = ",
            )
            .push_bind(*sub)
            .push(" AND status = 'pending' AND next_attempt_at <= ")
            .push_bind(now)
            .push(" ORDER BY next_attempt_at, id LIMIT ")
            .push_bind(*room)
            .push(")");
        }
        due.extend(
            q.build_query_as::<(i64, Uuid)>()
                .persistent(crate::sql::recurs(arms.len()))
                .fetch_all(&mut *tx)
                .await?,
        );
    }
    due.sort_unstable();
    due.truncate(usize::try_from(limit).unwrap_or(0));
    let mut jobs = Vec::with_capacity(due.len());
    for chunk in due.chunks(CHUNK) {
        let mut q = sqlx::QueryBuilder::new("UPDATE webhook_deliveries SET lease_owner = ");
        q.push_bind(owner)
            .push(", locked_until = ")
            .push_bind(lease_end)
            .push(", next_attempt_at = ")
            .push_bind(lease_end)
            .push(" WHERE id IN ");
        push_id_list(&mut q, chunk.iter().map(|(_, id)| *id));
        q.build()
            .persistent(crate::sql::recurs(chunk.len()))
            .execute(&mut *tx)
            .await?;
        let mut q = sqlx::QueryBuilder::new(job_sql!("webhook_deliveries", " WHERE d.id IN "));
        push_id_list(&mut q, chunk.iter().map(|(_, id)| *id));
        jobs.extend(
            q.build_query_as::<DeliveryJob>()
                .persistent(crate::sql::recurs(chunk.len()))
                .fetch_all(&mut *tx)
                .await?,
        );
    }
    tx.commit().await?;
    Ok(jobs)
}

/// [`Db::record_webhook_attempts`] on SQLite: two statements per batch inside
/// `BEGIN IMMEDIATE` (the deliveries, then their attempt rows), not two per attempt.
async fn record_sqlite(pool: &sqlx::SqlitePool, recordings: &[Recording<'_>]) -> Result<Vec<bool>> {
    let mut tx = pool.begin_write().await?;
    // (delivery id → subscription, event, attempt number) of the deliveries updated.
    let mut updated: std::collections::HashMap<Uuid, (Uuid, Uuid, i64)> =
        std::collections::HashMap::with_capacity(recordings.len());
    for chunk in recordings.chunks(CHUNK) {
        let mut q =
            sqlx::QueryBuilder::new("WITH v (id, owner, status, next_at, code, err, at) AS (");
        q.push_values(chunk, |mut row, r| {
            let (status, next, _) = outcome_columns(r.outcome);
            row.push_bind(r.delivery_id)
                .push_bind(r.owner.to_string())
                .push_bind(status.as_str())
                .push_bind(next)
                .push_bind(r.attempt.response_status)
                .push_bind(r.attempt.error.clone())
                .push_bind(r.attempt.created_at);
        });
        q.push(concat!(
            ") UPDATE webhook_deliveries SET attempts = attempts + 1, status = v.status, \
             next_attempt_at = v.next_at, locked_until = NULL, lease_owner = NULL, \
             last_status_code = v.code, last_error = v.err, updated_at = ",
            bump_updated_at!("webhook_deliveries", "v.at"),
            " FROM v WHERE webhook_deliveries.id = v.id AND webhook_deliveries.lease_owner = v.owner \
             AND webhook_deliveries.status = 'pending' \
             RETURNING webhook_deliveries.id, webhook_deliveries.subscription_id, \
               webhook_deliveries.event_id, webhook_deliveries.attempts"
        ));
        for (id, sub, event, number) in q
            .build_query_as::<(Uuid, Uuid, Uuid, i64)>()
            .persistent(crate::sql::recurs(chunk.len()))
            .fetch_all(&mut *tx)
            .await?
        {
            updated.insert(id, (sub, event, number));
        }
    }
    let attempts: Vec<(&Recording<'_>, (Uuid, Uuid, i64))> = recordings
        .iter()
        .filter_map(|r| updated.get(&r.delivery_id).map(|u| (r, *u)))
        .collect();
    for chunk in attempts.chunks(CHUNK) {
        let mut q = sqlx::QueryBuilder::new(
            "WITH v (id, delivery_id, subscription_id, event_id, attempt, status, \
             response_status, latency_ms, error, created_at, response_body) AS (",
        );
        q.push_values(chunk, |mut row, (r, (sub, event, number))| {
            let (_, _, attempt_status) = outcome_columns(r.outcome);
            row.push_bind(r.attempt.id)
                .push_bind(r.delivery_id)
                .push_bind(*sub)
                .push_bind(*event)
                .push_bind(*number)
                .push_bind(attempt_status.as_str())
                .push_bind(r.attempt.response_status)
                .push_bind(r.attempt.latency_ms)
                .push_bind(r.attempt.error.clone())
                .push_bind(r.attempt.created_at)
                .push_bind(r.attempt.response_body.clone());
        });
        q.push(
            ") INSERT INTO webhook_attempts (id, delivery_id, subscription_id, event_id, \
             event_type, attempt, status, response_status, latency_ms, error, created_at, \
             response_body) \
             SELECT v.id, v.delivery_id, v.subscription_id, v.event_id, e.type, v.attempt, \
               v.status, v.response_status, v.latency_ms, v.error, v.created_at, v.response_body \
             FROM v JOIN events e ON e.id = v.event_id",
        );
        q.build()
            .persistent(crate::sql::recurs(chunk.len()))
            .execute(&mut *tx)
            .await?;
    }
    timeline::insert_sqlite(&mut tx, &attempt_entries(recordings, &updated)).await?;
    tx.commit().await?;
    Ok(recordings
        .iter()
        .map(|r| updated.contains_key(&r.delivery_id))
        .collect())
}
