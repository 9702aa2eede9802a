//! The event-webhook delivery workers: claim due deliveries (leased, so any number of
//! processes can run them), attempt each in its own task, record what happened in batches.
//!
//! ```text
//!  wake: a commit stored events (this process) · a task finished · the next due time
//!        · the poll interval (events stored by other processes)
//!    └─► claim ≤ free slots, ≤ per_subscription in flight per subscription (leases count)
//!          └─► slots left: fan out the next `fanout_batch` events into deliveries, claim again
//!          └─► one task per delivery: core::webhooks::deliver::attempt
//!                └─► finished attempts recorded together, in one transaction, by a
//!                    recorder task (claiming and recording overlap)
//! ```
//!
//! One subscription never holds more than `per_subscription` of the `max_in_flight` slots,
//! so a receiver that hangs for its whole 15 s timeout delays only its own deliveries.
//! A worker that dies leaves its deliveries leased; they are due again when the lease ends
//! (attempted again under the same `webhook-id`).

use std::time::Duration;

use tern_core::Core;
use tern_core::webhooks::deliver::{self, Made};
use tern_domain::events::RetrySchedule;
use tern_domain::time::now_ms;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

/// Settings of the delivery workers.
#[derive(Debug, Clone)]
pub struct WebhookWorkerConfig {
    /// When failed deliveries are tried again (`TERN_WEBHOOK_RETRY_SCHEDULE`).
    pub schedule: RetrySchedule,
    /// Attempts in flight per process.
    pub max_in_flight: usize,
    /// Attempts in flight per subscription (across processes, about).
    pub per_subscription: usize,
    /// How long a claimed delivery is this worker's: longer than an attempt can take.
    pub lease: Duration,
    /// How often to look for deliveries other processes queued.
    pub poll_interval: Duration,
    /// Events fanned out into deliveries per transaction when slots are free.
    pub fanout_batch: i64,
}

impl Default for WebhookWorkerConfig {
    fn default() -> Self {
        Self {
            schedule: RetrySchedule::default(),
            max_in_flight: 256,
            per_subscription: 16,
            lease: Duration::from_secs(60),
            poll_interval: Duration::from_millis(250),
            fanout_batch: 32,
        }
    }
}

/// Runs until `cancel`; attempts in flight are finished and recorded first.
pub async fn run(core: Core, config: WebhookWorkerConfig, cancel: CancellationToken) {
    let owner = format!("webhooks-{}", Uuid::new_v4());
    let wakeup = core.db.deliveries_queued();
    let mut tasks: JoinSet<Made> = JoinSet::new();
    let lease_ms = i64::try_from(config.lease.as_millis()).unwrap_or(60_000);
    let per_subscription = i64::try_from(config.per_subscription).unwrap_or(1);
    let mut backoff = Duration::ZERO;
    // Finished attempts go to the recorder; a full channel holds the claimer back.
    let (done_tx, done_rx) = tokio::sync::mpsc::channel::<Made>(4 * config.max_in_flight.max(1));
    let recorder = tokio::spawn(recorder(core.clone(), owner.clone(), done_rx));
    loop {
        // Claim what is due, as far as slots allow.
        let mut idle_for = config.poll_interval;
        let free = config.max_in_flight.saturating_sub(tasks.len());
        if free > 0 && !cancel.is_cancelled() {
            let now = now_ms();
            let limit = i64::try_from(free).unwrap_or(0);
            match core
                .db
                .claim_webhook_deliveries(&owner, now, lease_ms, limit, per_subscription)
                .await
            {
                Ok(jobs) => {
                    backoff = Duration::ZERO;
                    // Slots left: fan out the next events; if any, claim again at once.
                    let fanned = if (jobs.len() as i64) < limit {
                        match core.db.fan_out_events(config.fanout_batch).await {
                            Ok((events, _)) => events > 0,
                            Err(e) => {
                                tracing::warn!(error = %e, "webhook event fan-out failed");
                                false
                            }
                        }
                    } else {
                        false
                    };
                    if fanned {
                        idle_for = Duration::ZERO;
                    } else if jobs.is_empty() {
                        // Due but not claimed means held back by a per-subscription cap
                        // (freed when an attempt here finishes, or at the poll for others').
                        if let Ok(Some(due)) = core.db.next_webhook_delivery_due().await {
                            let wait = u64::try_from(due.saturating_sub(now_ms())).unwrap_or(0);
                            if wait > 0 {
                                idle_for = idle_for.min(Duration::from_millis(wait));
                            }
                        }
                    } else {
                        // More may be due right away: come back without waiting.
                        idle_for = if jobs.len() as i64 == limit {
                            Duration::ZERO
                        } else {
                            idle_for
                        };
                    }
                    for job in jobs {
                        let core = core.clone();
                        let schedule = config.schedule.clone();
                        tasks.spawn(async move { deliver::attempt(&core, &job, &schedule).await });
                    }
                }
                Err(e) => {
                    backoff =
                        (backoff * 2).clamp(Duration::from_millis(100), Duration::from_secs(5));
                    tracing::warn!(error = %e, "webhook delivery claim failed");
                    idle_for = backoff;
                }
            }
        }
        if cancel.is_cancelled() && tasks.is_empty() {
            break;
        }
        // Wait for a finished attempt, a wake-up or the next due time.
        let first = tokio::select! {
            biased;
            done = tasks.join_next(), if !tasks.is_empty() => done,
            () = wakeup.notified(), if !cancel.is_cancelled() => None,
            () = tokio::time::sleep(idle_for), if !cancel.is_cancelled() => None,
            () = cancel.cancelled(), if tasks.is_empty() => break,
        };
        // A task that panicked made no attempt worth recording: its lease brings it back.
        for made in first
            .into_iter()
            .chain(std::iter::from_fn(|| tasks.try_join_next()))
            .flatten()
        {
            // The recorder ends only when this sender is dropped.
            let _ = done_tx.send(made).await;
        }
    }
    // Everything finished is recorded before the worker ends.
    drop(done_tx);
    let _ = recorder.await;
}

/// Records finished attempts as they come, all that are waiting in one transaction.
async fn recorder(core: Core, owner: String, mut done: tokio::sync::mpsc::Receiver<Made>) {
    let mut batch = Vec::new();
    while done.recv_many(&mut batch, 512).await > 0 {
        record(&core, &owner, &batch).await;
        batch.clear();
    }
}

/// Records finished attempts in one transaction (retried a few times: an attempt left
/// unrecorded is made again when its lease ends, under the same `webhook-id`).
async fn record(core: &Core, owner: &str, made: &[Made]) {
    if made.is_empty() {
        return;
    }
    let recordings: Vec<_> = made.iter().map(|m| m.recording(owner)).collect();
    let mut delay = Duration::from_millis(50);
    for _ in 0..5 {
        match core.db.record_webhook_attempts(&recordings).await {
            Ok(_) => return,
            Err(e) => {
                tracing::warn!(error = %e, n = made.len(), "recording webhook attempts failed");
                tokio::time::sleep(delay).await;
                delay *= 2;
            }
        }
    }
}
