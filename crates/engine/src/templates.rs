//! The periodic sync of templates that exist on the network but were not created through
//! Tern, and of statuses whose webhook was missed ([`tern_core::templates::sync_org`] per
//! organisation). Upserts are idempotent, so any number of instances may run the worker.

use std::time::Duration;
use tern_cloudapi::CloudApiClient;
use tern_core::Core;
use tern_domain::crypto::MasterKey;
use tern_store::{Db, StoreError};
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

/// Default period of the sync worker.
pub const SYNC_INTERVAL: Duration = Duration::from_secs(15 * 60);

#[derive(Debug, thiserror::Error)]
pub enum SyncError {
    #[error(transparent)]
    Store(#[from] StoreError),
}

pub use tern_core::templates::{SyncReport, waba_tokens};

/// Syncs one organisation (see [`tern_core::templates::sync_org`]).
pub async fn sync_org(
    db: &Db,
    cloud: &CloudApiClient,
    key: &MasterKey,
    org_id: Uuid,
) -> Result<SyncReport, SyncError> {
    Ok(tern_core::templates::sync_org(db, cloud, key, org_id).await?)
}

/// Syncs every organisation that has numbers; returns the reports.
pub async fn sync_all(
    db: &Db,
    cloud: &CloudApiClient,
    key: &MasterKey,
    cancel: &CancellationToken,
) -> Result<Vec<SyncReport>, SyncError> {
    let mut reports = Vec::new();
    let mut after = None;
    loop {
        let orgs = db.template_sync_org_ids(after, 100).await?;
        let Some(last) = orgs.last().copied() else {
            return Ok(reports);
        };
        for org in orgs {
            if cancel.is_cancelled() {
                return Ok(reports);
            }
            reports.push(sync_org(db, cloud, key, org).await?);
        }
        after = Some(last);
    }
}

/// Settings of the sync worker.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TemplateSyncConfig {
    /// How often every organisation is synced. Default [`SYNC_INTERVAL`].
    pub interval: Duration,
}

impl Default for TemplateSyncConfig {
    fn default() -> Self {
        Self {
            interval: SYNC_INTERVAL,
        }
    }
}

/// Runs the sync on start and then every `config.interval`, until cancelled.
pub async fn run(core: Core, config: TemplateSyncConfig, cancel: CancellationToken) {
    loop {
        tokio::select! {
            _ = cancel.cancelled() => break,
            r = sync_all(&core.db, &core.cloud, &core.key, &cancel) => match r {
                Ok(reports) => {
                    let created: usize = reports.iter().map(|r| r.created).sum();
                    let updated: usize = reports.iter().map(|r| r.updated).sum();
                    tracing::info!(orgs = reports.len(), created, updated, "template sync done");
                }
                Err(e) => tracing::warn!(error = %e, "template sync failed; will retry"),
            },
        }
        tokio::select! {
            _ = cancel.cancelled() => break,
            _ = tokio::time::sleep(config.interval) => {}
        }
    }
}
