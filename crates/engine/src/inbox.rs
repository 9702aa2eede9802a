//! The loop over the network's webhook batches stored in `network_inbox`: claims them with
//! a lease, applies each with [`tern_core::inbox::apply`] (idempotent, so a batch applied
//! twice changes nothing the second time), and backs off a batch that fails.

use futures::StreamExt as _;
use std::sync::Arc;
use std::time::Duration;
use tern_domain::time::now_ms;
use tern_store::{Db, StoreError};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

/// How long a claimed batch is reserved for one worker.
const LEASE_MS: i64 = 60_000;
const BATCH: i64 = 20;
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

/// Runs until cancelled, woken when a batch is stored and every second regardless (so a
/// batch stored by another instance, or one whose lease expired, is picked up). Batches are
/// claimed and marked processed through `db`; their effects are written through `apply_db`,
/// which may defer its commits' flush to disk (`Db::with_own_pool_deferred_commits`): the
/// synchronous commit marking the batch processed comes after them and flushes them too, and
/// a batch whose effects a crash lost is still unprocessed, so it is applied again.
pub async fn run(db: Db, apply_db: Db, wakeup: Arc<Notify>, cancel: CancellationToken) {
    loop {
        match drain_with(&db, &apply_db).await {
            Ok(_) => {}
            Err(e) => tracing::warn!(error = %e, "inbox processing failed; will retry"),
        }
        tokio::select! {
            _ = cancel.cancelled() => break,
            _ = wakeup.notified() => {}
            _ = tokio::time::sleep(Duration::from_secs(1)) => {}
        }
    }
}

/// Processes every claimable batch; returns the combined report.
pub async fn drain(db: &Db) -> Result<Report, StoreError> {
    drain_with(db, db).await
}

/// [`drain`], writing the batches' effects through `apply_db` (see [`run`]).
pub async fn drain_with(db: &Db, apply_db: &Db) -> Result<Report, StoreError> {
    let mut total = Report::default();
    loop {
        let items = db.claim_inbox(BATCH, LEASE_MS, now_ms()).await?;
        if items.is_empty() {
            return Ok(total);
        }
        // Each batch is applied and marked in its own future: the loop below awaits nothing,
        // so no batch's open transaction (holding row locks others wait for) is left unpolled
        // while the loop waits for a connection.
        let mut done = futures::stream::iter(items)
            .map(|item| async move {
                match process_body(apply_db, &item.body).await {
                    Ok(report) => db
                        .mark_inbox_processed(item.id, now_ms())
                        .await
                        .map(|()| Some(report)),
                    Err(e) => {
                        // Back off: 2 s, 4 s, … capped at 5 min; the batch stays until it works.
                        let delay = (2_000i64 << item.attempts.clamp(0, 8)).min(300_000);
                        tracing::warn!(inbox_id = %item.id, error = %e, "inbox batch failed");
                        db.mark_inbox_failed(item.id, &e.to_string(), now_ms() + delay)
                            .await
                            .map(|()| None)
                    }
                }
            })
            .buffer_unordered(concurrency(db));
        while let Some(outcome) = done.next().await {
            if let Some(report) = outcome? {
                total.add(&report);
            }
        }
    }
}

/// Applies one stored batch (see [`tern_core::inbox::apply`]).
pub async fn process_body(db: &Db, body: &[u8]) -> Result<Report, StoreError> {
    tern_core::inbox::apply(db, body).await
}
