//! The campaign worker: launches scheduled campaigns when due (also after a restart: the
//! schedule is in the database), works running ones (expiry, the error threshold, the send
//! checks, completion and fan-out) and ends paused ones past their expiry
//! ([`tern_core::campaigns::fanout::step`]). Each campaign is worked by one process at a time (a lease on its row); a second process skips it until the lease
//! lapses, and even two working one campaign cannot message a recipient twice (the
//! recipient's idempotency key).

use std::time::Duration;

use tern_core::Core;
use tern_core::campaigns::fanout;
use tern_domain::new_id;
use tern_domain::time::now_ms;
use tokio_util::sync::CancellationToken;

/// How often active campaigns are looked at (fan-out tops the queue up each time).
pub const TICK: Duration = Duration::from_millis(100);
/// How long a process keeps a campaign after its last step.
const LEASE_MS: i64 = 5_000;
/// Active campaigns looked at per tick.
const PER_TICK: i64 = 100;

/// One pass over the active campaigns at `now`; returns the steps' accepted messages.
pub async fn once(core: &Core, owner: &str, now: i64) -> usize {
    let active = match core.db.active_campaigns(now, PER_TICK).await {
        Ok(a) => a,
        Err(e) => {
            tracing::warn!(error = %e, "cannot list active campaigns; will retry");
            return 0;
        }
    };
    let mut accepted = 0;
    for (org_id, id) in active {
        match core.db.lease_campaign(id, owner, now, now + LEASE_MS).await {
            Ok(true) => {}
            Ok(false) => continue,
            Err(e) => {
                tracing::warn!(error = %e, campaign = %id, "cannot lease campaign");
                continue;
            }
        }
        match fanout::step(core, org_id, id, now).await {
            Ok(s) => accepted += s.accepted,
            Err(p) => {
                tracing::warn!(campaign = %id, problem = %p, "campaign step failed; will retry")
            }
        }
    }
    accepted
}

/// Settings of the campaign worker.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CampaignWorkerConfig {
    /// How often active campaigns are looked at. Default [`TICK`].
    pub tick: Duration,
}

impl Default for CampaignWorkerConfig {
    fn default() -> Self {
        Self { tick: TICK }
    }
}

/// Runs until cancelled.
pub async fn run(core: Core, config: CampaignWorkerConfig, cancel: CancellationToken) {
    let owner = format!("campaigns-{}", new_id());
    while !cancel.is_cancelled() {
        // A full batch means more is due at once: no pause before the next pass.
        if once(&core, &owner, now_ms()).await >= fanout::MAX_BATCH as usize {
            continue;
        }
        tokio::select! {
            _ = cancel.cancelled() => break,
            _ = tokio::time::sleep(config.tick) => {}
        }
    }
}
