//! Recording send outcomes: through the single status writer, in batches (group commit).

use super::*;
use crate::retry::store_write;
use tern_domain::timeline::Detail;

/// A send outcome waiting for the next batch.
pub(super) struct Waiting {
    item: DispatchItem,
    fin: Final,
    /// The attempt's timeline entry, written with the outcome.
    entry: Detail,
    at: i64,
    done: tokio::sync::oneshot::Sender<Result<Recorded, StoreError>>,
}

impl Shared {
    /// Records what was decided for a claimed message: a final status through the status
    /// writer (in batches), a retry or an unknown outcome as a queue write.
    /// The attempt's timeline `entry` is written with it.
    pub(super) async fn record(
        &self,
        item: &DispatchItem,
        decision: Decision,
        entry: Detail,
    ) -> Outcome {
        let lease = item.lease();
        let db = &self.core.db;
        match decision {
            Decision::Final(fin) => self.record_final(item, fin, entry).await,
            Decision::Unknown { deadline, error } => {
                let r = store_write(|| {
                    db.mark_dispatch_unknown(item.id, &lease, deadline, &error, &entry)
                })
                .await;
                finish_queue_write(item, r, Outcome::Unknown)
            }
            Decision::Retry { at, error } => {
                let r =
                    store_write(|| db.retry_dispatch(item.id, &lease, at, &error, &entry)).await;
                finish_queue_write(item, r, Outcome::Retried)
            }
        }
    }

    /// Writes the final status through the status writer (the domain's monotonic rule
    /// under compare-and-set: a status webhook may have moved the message already, even to
    /// `delivered` or `read`); a failure refunds a template's wallet debit with it.
    ///
    /// Outcomes are recorded in batches (group commit): each joins the waiting list, then
    /// waits for the turn to record; whoever gets the turn records everything waiting, so
    /// while one batch commits the next gathers, and an outcome is never later than the
    /// batch after its arrival.
    pub(super) async fn record_final(
        &self,
        item: &DispatchItem,
        fin: Final,
        entry: Detail,
    ) -> Outcome {
        let outcome = match &fin {
            Final::Sent { .. } => Outcome::Sent,
            Final::Failed(_) => Outcome::Failed,
        };
        let (done, mut recorded) = tokio::sync::oneshot::channel();
        let waiting = Waiting {
            item: item.clone(),
            fin,
            entry,
            at: now_ms(),
            done,
        };
        lock(&self.outcomes).push(waiting);
        let waited = Instant::now();
        let r = {
            let _turn = self.recording.lock().await;
            match recorded.try_recv() {
                Ok(r) => r,
                Err(_) => {
                    let batch = std::mem::take(&mut *lock(&self.outcomes));
                    self.record_batch(batch).await;
                    recorded.try_recv().unwrap_or(Err(StoreError::NotFound))
                }
            }
        };
        // How long an outcome waits for its batch to commit (the send slot is held meanwhile).
        metrics::histogram!("tern_dispatch_record_seconds").record(waited.elapsed().as_secs_f64());
        let written = r.map(|rec| match rec {
            Recorded::Written { refunded_minor } => {
                if refunded_minor > 0 {
                    tracing::info!(message_id = %item.id, amount_minor = refunded_minor, "wallet debit refunded");
                    metrics::counter!("tern_wallet_refunds_total").increment(1);
                }
                true
            }
            Recorded::Stale => false,
        });
        let o = finish_queue_write(item, written, outcome);
        if o == Outcome::Sent {
            let latency_ms = (now_ms() - item.created_at).max(0);
            metrics::histogram!("tern_dispatch_accepted_to_sent_seconds")
                .record(latency_ms as f64 / 1000.0);
        }
        o
    }

    /// Records `batch` in one transaction; if that fails, each outcome on its own (so one
    /// bad row or a lost race costs only itself), and answers every waiter.
    async fn record_batch(&self, batch: Vec<Waiting>) {
        if batch.is_empty() {
            return;
        }
        let reports: Vec<Report<'_>> = batch
            .iter()
            .map(|w| Report {
                attempt: Some(&w.entry),
                ..w.fin.report(w.at)
            })
            .collect();
        let pairs: Vec<(&DispatchItem, Report<'_>)> = batch
            .iter()
            .zip(reports)
            .map(|(w, r)| (&w.item, r))
            .collect();
        let db = &self.core.db;
        let together = store_write(|| status::record_sends(db, &pairs)).await;
        let results = match together {
            Ok(results) => results.into_iter().map(Ok).collect(),
            Err(e) => {
                tracing::warn!(error = %e, n = pairs.len(), "send outcomes recorded one by one");
                let mut results = Vec::with_capacity(pairs.len());
                for (item, report) in &pairs {
                    results.push(store_write(|| status::record_send(db, item, report)).await);
                }
                results
            }
        };
        drop(pairs);
        for (w, r) in batch.into_iter().zip(results) {
            // The waiter is gone only if its task was cancelled: nothing to answer.
            let _ = w.done.send(r);
        }
    }
}

/// The waiting list's lock (a panic elsewhere cannot leave it inconsistent: it is a list).
fn lock<T>(m: &std::sync::Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// The outcome of a claim's final write (`Ok(false)`: the claim was no longer this worker's),
/// logged and counted.
fn finish_queue_write(item: &DispatchItem, r: Result<bool, StoreError>, ok: Outcome) -> Outcome {
    let o = match r {
        Ok(true) => ok,
        Ok(false) => {
            tracing::warn!(message_id = %item.id, "outcome of a stale claim dropped");
            Outcome::Stale
        }
        Err(e) => {
            tracing::error!(message_id = %item.id, error = %e,
                "could not record the send outcome; a status webhook or the grace deadline will settle it");
            Outcome::Error
        }
    };
    metrics::counter!("tern_dispatch_outcomes_total", "outcome" => o.label()).increment(1);
    o
}
