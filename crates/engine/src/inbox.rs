//! The loop over the network's webhook batches stored in `network_inbox`: claims them with
//! a lease, applies each with [`tern_core::inbox::apply`] (idempotent, so a batch applied
//! twice changes nothing the second time), and backs off a batch that fails.
//!
//! One item never holds back the rest of its batch: `apply` applies every item it can and
//! lists those the database refused; the batch is then retried with backoff (its applied
//! items change nothing again), and after [`Retry::item_attempts`] attempts the items that
//! still fail are set aside (kept in `network_inbox_set_aside`, logged, counted in
//! `tern_network_items_set_aside_total`) and the batch is done. A database that cannot be
//! reached fails the whole batch, which is retried until it can.

use futures::StreamExt as _;
use std::time::Duration;
use tern_core::Core;
use tern_core::inbox::{Received, apply_messages_together, apply_statuses_together};
use tern_domain::backoff::{Backoff, Jitter};
use tern_domain::time::now_ms;
use tern_store::{Db, InboxItem, SetAside, StoreError};
use tokio_util::sync::CancellationToken;

/// How long a claimed batch is reserved for one worker.
const LEASE_MS: i64 = 60_000;
/// Batches claimed at once: those of statuses alone are applied in one transaction. A
/// claim takes what is due up to this, so it only grows with a backlog, and each pass's
/// fixed cost (three write turns on SQLite, behind the intake and the dispatcher) is then
/// shared by more statuses. At the top tier, one status per webhook (about 3,000 a second,
/// SQLite), 100 a claim applied about 2,700 a second and the backlog grew through the run
/// (received → applied p99 up to 10.9 s); 400 applied about 3,800 a second and kept it
/// under a second after the launch (docs/performance.md, fifth session). At a campaign's
/// launch the network's statuses arrive at 4,000–6,000 a second for two seconds, and
/// SQLite's one writer fell behind them in passes of 400 (status lag p99 1.05–1.17 s over
/// three runs) but not in passes of 1,000 (0.53–0.82 s); PostgreSQL, two passes at once,
/// kept 400 (0.49–0.78 s; with 1,000: 0.80 and 1.03 s) (ninth session).
fn batch(db: &Db) -> i64 {
    match db.backend() {
        tern_store::Backend::Sqlite => 1_000,
        tern_store::Backend::Postgres => 400,
    }
}

/// Batches applied at once. Applying one is a chain of short statements (a customer's
/// identity, conversation, message), so one at a time leaves PostgreSQL waiting on round
/// trips; every effect is idempotent and tolerates any order (statuses are monotonic, edits
/// and deletions may precede their original, contacts are locked while matched), so
/// batches need not wait for each other. Two on PostgreSQL leave four of the pool's six
/// connections to the API and the dispatcher; SQLite has one writer, and more tasks would
/// only hold its four connections while waiting for it (the API then timed out: 503).
fn concurrency(db: &Db) -> usize {
    match db.backend() {
        tern_store::Backend::Sqlite => 1,
        tern_store::Backend::Postgres => 2,
    }
}

pub use tern_core::inbox::Report;

/// How a failing batch is retried.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Retry {
    /// Delay before the second attempt, doubled for each further one…
    pub first_delay_ms: i64,
    /// …up to this.
    pub max_delay_ms: i64,
    /// Attempts of a batch after which its items that still cannot be applied are set
    /// aside.
    pub item_attempts: i64,
}

impl Default for Retry {
    /// 2 s, 4 s, … 5 min; items are set aside after 8 attempts (about 8 minutes).
    fn default() -> Self {
        Self {
            first_delay_ms: 2_000,
            max_delay_ms: 300_000,
            item_attempts: 8,
        }
    }
}

impl Retry {
    /// The delay after attempt `attempts` failed.
    fn delay_ms(&self, attempts: i64) -> i64 {
        let ms = |v: i64| Duration::from_millis(u64::try_from(v).unwrap_or(0));
        let delay = Backoff {
            base: ms(self.first_delay_ms),
            cap: ms(self.max_delay_ms),
            jitter: Jitter::None,
        }
        .delay(attempts, 0.0);
        i64::try_from(delay.as_millis()).unwrap_or(i64::MAX)
    }
}

/// Settings of the inbox worker.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InboxConfig {
    /// How a failing batch is retried.
    pub retry: Retry,
    /// Connections of the pool of its own that writes the batches' effects, with commits
    /// that do not wait for the disk (`Db::with_own_pool_deferred_commits`); `None`: through
    /// `core.db`. Default 2 (two batches at once, see `concurrency`).
    pub apply_connections: Option<u32>,
    /// Look for batches at least this often without a wake-up (stored by another instance,
    /// or a lease that expired). Default 1 s.
    pub poll_interval: Duration,
}

impl Default for InboxConfig {
    fn default() -> Self {
        Self {
            retry: Retry::default(),
            apply_connections: Some(2),
            poll_interval: Duration::from_secs(1),
        }
    }
}

/// Runs until cancelled, woken when this process stores a batch (the store's
/// `Wakeups::inbox`) and every `poll_interval` regardless. Batches are claimed and marked
/// processed through `core.db` (the server gives the worker a pool of its own:
/// `Core::with_db`); their effects are written through the apply pool, which defers its
/// commits' flush to disk: the synchronous commit marking the batch processed comes after
/// them and flushes them too, and a batch whose effects a crash lost is still unprocessed,
/// so it is applied again.
pub async fn run(core: Core, config: InboxConfig, cancel: CancellationToken) {
    let db = core.db.clone();
    let apply_db = match config.apply_connections {
        Some(n) => db.with_own_pool_deferred_commits(n),
        None => db.clone(),
    };
    let wakeups = db.wakeups();
    loop {
        match drain_with_retry(&db, &apply_db, config.retry).await {
            Ok(_) => {}
            Err(e) => tracing::warn!(error = %e, "inbox processing failed; will retry"),
        }
        tokio::select! {
            _ = cancel.cancelled() => break,
            _ = wakeups.inbox.notified() => {}
            _ = tokio::time::sleep(config.poll_interval) => {}
        }
    }
}

/// The worker's one pass (also callable while no loop runs: tests, `tern::app::settle`):
/// processes every claimable batch; returns the combined report.
pub async fn drain(db: &Db) -> Result<Report, StoreError> {
    drain_with(db, db).await
}

/// [`drain`], writing the batches' effects through `apply_db` (see [`run`]).
pub async fn drain_with(db: &Db, apply_db: &Db) -> Result<Report, StoreError> {
    drain_with_retry(db, apply_db, Retry::default()).await
}

/// [`drain_with`] with another retry schedule (tests use a short one).
pub async fn drain_with_retry(db: &Db, apply_db: &Db, retry: Retry) -> Result<Report, StoreError> {
    let mut total = Report::default();
    loop {
        let items = db.claim_inbox(batch(db), LEASE_MS, now_ms()).await?;
        if items.is_empty() {
            return Ok(total);
        }
        // Batches of statuses alone (most of them: the network sends statuses one per
        // webhook) are applied together and marked processed in one statement.
        let received: Vec<Received<'_>> = items
            .iter()
            .map(|item| Received {
                body: &item.body,
                received_at: item.received_at,
            })
            .collect();
        let together = match apply_statuses_together(apply_db, &received).await {
            Ok(together) => together,
            // The database could not be reached: each batch alone records its failure.
            Err(_) => vec![None; items.len()],
        };
        // Those with customers' messages: their plain messages together, in the order
        // they arrived (`tern_core::inbox::apply_messages_together`).
        let mut reports = together;
        let left: Vec<usize> = (0..items.len()).filter(|i| reports[*i].is_none()).collect();
        if !left.is_empty() {
            let received: Vec<Received<'_>> = left.iter().map(|i| received[*i]).collect();
            // The database could not be reached: each batch alone records its failure.
            if let Ok(applied) = apply_messages_together(apply_db, &received).await {
                for (i, report) in left.into_iter().zip(applied) {
                    reports[i] = report;
                }
            }
        }
        let mut processed = Vec::new();
        let mut rest = Vec::new();
        for (item, report) in items.into_iter().zip(reports) {
            match report {
                Some(report) if report.failed.is_empty() => {
                    processed.push(item.id);
                    total.add(&report);
                }
                report => rest.push((item, report)),
            }
        }
        if !processed.is_empty() {
            db.mark_inbox_processed_many(&processed, now_ms()).await?;
        }
        // The others each in their own future: the loop below awaits nothing, so no
        // batch's open transaction (holding row locks others wait for) is left unpolled
        // while the loop waits for a connection.
        let mut done = futures::stream::iter(rest)
            .map(|(item, report)| async move {
                let report = match report {
                    Some(report) => Ok(report),
                    None => {
                        tern_core::inbox::apply_received(apply_db, &item.body, item.received_at)
                            .await
                    }
                };
                settle(db, &item, report, retry).await
            })
            .buffer_unordered(concurrency(db));
        while let Some(outcome) = done.next().await {
            if let Some(report) = outcome? {
                total.add(&report);
            }
        }
    }
}

/// Records what applying one batch did: processed, failed items retried later (or set aside
/// after their retries), or the whole batch retried when the database could not be reached.
async fn settle(
    db: &Db,
    item: &InboxItem,
    applied: Result<Report, StoreError>,
    retry: Retry,
) -> Result<Option<Report>, StoreError> {
    let retry_at = now_ms() + retry.delay_ms(item.attempts);
    match applied {
        Ok(report) if report.failed.is_empty() => db
            .mark_inbox_processed(item.id, now_ms())
            .await
            .map(|()| Some(report)),
        Ok(report) if item.attempts < retry.item_attempts => {
            let first = report.failed.first().map(|f| f.error.as_str());
            tracing::warn!(inbox_id = %item.id, failed = report.failed.len(),
                attempts = item.attempts, "inbox batch items failed; will retry");
            db.mark_inbox_failed(item.id, first.unwrap_or_default(), retry_at)
                .await
                .map(|()| Some(report))
        }
        Ok(report) => set_aside(db, item.id, item.attempts, &report)
            .await
            .map(|()| Some(report)),
        Err(e) => {
            // The database could not be reached: the batch stays until it works.
            tracing::warn!(inbox_id = %item.id, error = %e, "inbox batch failed");
            db.mark_inbox_failed(item.id, &e.to_string(), retry_at)
                .await
                .map(|()| None)
        }
    }
}

/// Keeps the items of a batch that still fail after its retries apart, and the batch done.
async fn set_aside(
    db: &Db,
    inbox_id: uuid::Uuid,
    attempts: i64,
    report: &Report,
) -> Result<(), StoreError> {
    let now = now_ms();
    let items: Vec<SetAside> = report
        .failed
        .iter()
        .map(|f| {
            tracing::error!(inbox_id = %inbox_id, kind = f.kind, key = %f.key, error = %f.error,
                attempts, "network item set aside: it could not be applied");
            metrics::counter!("tern_network_items_set_aside_total", "kind" => f.kind).increment(1);
            SetAside {
                inbox_id,
                kind: f.kind.to_string(),
                item_key: f.key.clone(),
                item: f.item.clone().into_bytes(),
                error: f.error.clone(),
                attempts,
                created_at: now,
            }
        })
        .collect();
    db.set_aside_inbox(inbox_id, &items, now).await
}

/// Applies one stored batch (see [`tern_core::inbox::apply`]).
pub async fn process_body(db: &Db, body: &[u8]) -> Result<Report, StoreError> {
    tern_core::inbox::apply(db, body).await
}
