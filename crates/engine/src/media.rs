//! Media in the background: customers' files fetched from the network (each download a
//! leased job, retried with backoff, a few at once, never in the way of the webhook batch
//! that announced it), and the 30-day expiry of stored media.
//!
//! | job state | next |
//! |---|---|
//! | due | claimed (lease) → stored: `done`, the message's `media_id` set |
//! | claimed | retry: due again after backoff · failed (permanent, or attempts used up) |
//! | claimed, process died | due again when the lease ends |

use std::time::Duration;

use futures::StreamExt;
use tern_core::Core;
use tern_core::media::{self, InboundOutcome};
use tern_domain::backoff::{Backoff, Jitter};
use tern_domain::time::now_ms;
use tern_store::StoreError;
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

/// Settings of the media worker.
#[derive(Debug, Clone)]
pub struct MediaWorkerConfig {
    /// How often due downloads are looked for.
    pub poll_interval: Duration,
    /// Downloads run at once per process.
    pub concurrency: usize,
    /// How long a claimed download is this worker's (a 100 MB file on a slow link).
    pub lease: Duration,
    /// Attempts before a download is given up.
    pub max_attempts: i64,
    /// Delay after the first failure; doubled after each, up to `max_backoff`.
    pub base_backoff: Duration,
    pub max_backoff: Duration,
    /// How often expired media are deleted.
    pub cleanup_interval: Duration,
}

impl Default for MediaWorkerConfig {
    fn default() -> Self {
        Self {
            poll_interval: Duration::from_secs(1),
            concurrency: 4,
            lease: Duration::from_secs(10 * 60),
            // 10 s, 20 s, … capped at 1 h: about 7 hours in all, well inside the 7 days
            // the network keeps a customer's media id.
            max_attempts: 14,
            base_backoff: Duration::from_secs(10),
            max_backoff: Duration::from_secs(60 * 60),
            cleanup_interval: Duration::from_secs(10 * 60),
        }
    }
}

impl MediaWorkerConfig {
    /// Full-jitter exponential backoff after `attempts` attempts.
    pub fn backoff(&self, attempts: i64) -> Duration {
        // At least half the ceiling, so retries of a down network spread but do not bunch.
        Backoff {
            base: self.base_backoff,
            cap: self.max_backoff,
            jitter: Jitter::Half,
        }
        .delay(attempts, rand::random())
    }
}

/// What one drain did.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct MediaReport {
    pub stored: usize,
    pub retried: usize,
    pub failed: usize,
}

/// Runs every due download once (in batches of `concurrency`).
pub async fn drain_inbound(
    core: &Core,
    config: &MediaWorkerConfig,
    owner: &str,
) -> Result<MediaReport, StoreError> {
    let mut report = MediaReport::default();
    let lease_ms = i64::try_from(config.lease.as_millis()).unwrap_or(i64::MAX / 4);
    loop {
        let limit = i64::try_from(config.concurrency).unwrap_or(4);
        let jobs = core
            .db
            .claim_inbound_media(owner, now_ms(), lease_ms, limit)
            .await?;
        if jobs.is_empty() {
            return Ok(report);
        }
        let results: Vec<_> = futures::stream::iter(jobs)
            .map(|job| async move {
                let outcome = media::download_inbound(core, &job, now_ms()).await;
                (job, outcome)
            })
            .buffer_unordered(config.concurrency.max(1))
            .collect()
            .await;
        for (job, outcome) in results {
            match outcome {
                InboundOutcome::Stored => report.stored += 1,
                InboundOutcome::Retry(error) if job.attempts < config.max_attempts => {
                    let delay = config.backoff(job.attempts);
                    let at = now_ms() + i64::try_from(delay.as_millis()).unwrap_or(0);
                    core.db
                        .retry_inbound_media(job.org_id, &job.wamid, owner, at, &error)
                        .await?;
                    report.retried += 1;
                }
                InboundOutcome::Retry(error) | InboundOutcome::Failed(error) => {
                    tracing::warn!(wamid = %job.wamid, attempts = job.attempts, %error,
                        "inbound media given up");
                    core.db
                        .fail_inbound_media(job.org_id, &job.wamid, owner, &error, now_ms())
                        .await?;
                    report.failed += 1;
                }
            }
        }
        metrics::counter!("tern_inbound_media_total", "outcome" => "stored")
            .increment(report.stored as u64);
    }
}

/// Runs until cancelled: inbound downloads every `poll_interval`, the expiry every
/// `cleanup_interval` (and at start).
pub async fn run(core: Core, config: MediaWorkerConfig, cancel: CancellationToken) {
    let owner = format!("media-{}", Uuid::new_v4());
    let mut last_cleanup: Option<tokio::time::Instant> = None;
    loop {
        if last_cleanup.is_none_or(|t| t.elapsed() >= config.cleanup_interval) {
            match media::cleanup(&core.db, &core.media, now_ms()).await {
                Ok(n) => tracing::debug!(objects = n, "expired media deleted"),
                Err(e) => tracing::warn!(error = %e.message, "media cleanup failed; will retry"),
            }
            last_cleanup = Some(tokio::time::Instant::now());
        }
        if let Err(e) = drain_inbound(&core, &config, &owner).await {
            tracing::warn!(error = %e, "inbound media downloads failed; will retry");
        }
        tokio::select! {
            _ = cancel.cancelled() => break,
            _ = tokio::time::sleep(config.poll_interval) => {}
        }
    }
}
