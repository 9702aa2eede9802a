//! Deletes what has outlived its purpose: expired idempotency keys (remembered 24 h),
//! processed network webhook batches, the dedupe keys of network events and finished
//! inbound-media download jobs, and event-webhook events (with their deliveries and
//! attempts) older than 30 days that nothing waits for, and request log entries older than
//! `TERN_REQUEST_LOG_DAYS` (in bounded statements: [`tern_core::request_log::prune`]), and
//! event streams no connection held for 24 hours, with their undelivered rows. Every
//! step is a plain conditional `DELETE`, so running it in several processes at once is
//! harmless.

use std::time::Duration;
use tern_core::Core;
use tern_domain::time::now_ms;
use tern_store::{Db, StoreError};
use tokio_util::sync::CancellationToken;

/// How often the clean-up runs.
pub const INTERVAL: Duration = Duration::from_secs(10 * 60);
/// Processed batches and event keys are kept as long as the network may still retry a
/// webhook (7 days), so a late retry is recognised as a duplicate.
pub const NETWORK_RETENTION_MS: i64 = 7 * 24 * 60 * 60 * 1000;

/// Events, their deliveries and the attempt log are kept 30 days (the retry schedule spans
/// about 27 hours; a replay can reach back that far).
pub const EVENT_RETENTION_MS: i64 = 30 * 24 * 60 * 60 * 1000;

/// An event stream (`GET /events/stream`) and its rows are kept this long after its last
/// connection: a reconnect within it resumes without a gap.
pub const STREAM_RETENTION_MS: i64 = 24 * 60 * 60 * 1000;

/// What one pass deleted.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Pruned {
    pub idempotency_keys: u64,
    pub inbox_batches: u64,
    pub network_event_keys: u64,
    pub inbound_media_jobs: u64,
    pub events: u64,
    pub event_streams: u64,
}

/// One pass at `now`.
pub async fn once(db: &Db, now: i64) -> Result<Pruned, StoreError> {
    let cutoff = now - NETWORK_RETENTION_MS;
    Ok(Pruned {
        idempotency_keys: db.prune_idempotency_keys(now).await?,
        inbox_batches: db.prune_processed_inbox(cutoff).await?,
        network_event_keys: db.prune_network_event_keys(cutoff).await?,
        // Kept as long as the batches: a webhook retried late finds its job and adds none.
        inbound_media_jobs: db.prune_inbound_media(cutoff).await?,
        // Streams first: their rows no longer hold their events back.
        event_streams: db.prune_event_streams(now - STREAM_RETENTION_MS).await?,
        events: db.prune_events(now - EVENT_RETENTION_MS).await?,
    })
}

/// Settings of the clean-up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HousekeepingConfig {
    /// How often it runs. Default [`INTERVAL`].
    pub interval: Duration,
}

impl Default for HousekeepingConfig {
    fn default() -> Self {
        Self { interval: INTERVAL }
    }
}

/// Runs a pass at start and every `config.interval` until cancelled.
pub async fn run(core: Core, config: HousekeepingConfig, cancel: CancellationToken) {
    loop {
        let now = now_ms();
        match once(&core.db, now).await {
            Ok(p) => tracing::debug!(?p, "housekeeping done"),
            Err(e) => tracing::warn!(error = %e, "housekeeping failed; will retry"),
        }
        let days = core.request_log.days();
        match tern_core::request_log::prune(&core.db, days, now).await {
            Ok(n) => tracing::debug!(deleted = n, "request log pruned"),
            Err(e) => tracing::warn!(error = %e, "request log pruning failed; will retry"),
        }
        tokio::select! {
            _ = cancel.cancelled() => break,
            _ = tokio::time::sleep(config.interval) => {}
        }
    }
}
