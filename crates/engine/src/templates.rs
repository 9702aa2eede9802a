//! Sync of templates that exist on the network but were not created through Tern (the
//! network's own tools, another integration), and of statuses whose webhook was missed.
//!
//! For every distinct WABA of an organisation's numbers, pages through the network's
//! template list with a number's access token and upserts each template by (WABA, name,
//! language). Upserts are idempotent, so any number of instances may run the worker.

use std::collections::BTreeMap;
use std::time::Duration;
use tern_cloudapi::{CloudApiClient, SendError, TemplateInfo};
use tern_domain::crypto::{MasterKey, Purpose};
use tern_domain::template::{
    category_from_network, rejection_reason_from_network, status_from_network,
};
use tern_domain::{new_id, time::now_ms};
use tern_store::{Db, PhoneNumber, StoreError};
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

/// Default period of the sync worker.
pub const SYNC_INTERVAL: Duration = Duration::from_secs(15 * 60);

/// At most this many pages per WABA and run (100 templates a page), a guard against a
/// network that keeps returning a next cursor.
const MAX_PAGES: usize = 100;

#[derive(Debug, thiserror::Error)]
pub enum SyncError {
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// What one organisation's sync did.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct SyncReport {
    pub org_id: Uuid,
    /// WABAs listed successfully.
    pub wabas: usize,
    /// Templates seen on the network and stored (created, updated or already current).
    pub synced: usize,
    pub created: usize,
    pub updated: usize,
    /// Templates with a status or category Tern does not map (left alone).
    pub skipped: usize,
    /// `(waba_id, reason)` of WABAs that could not be listed.
    pub failures: Vec<(String, String)>,
}

/// Every number of the organisation, all pages.
async fn all_numbers(db: &Db, org_id: Uuid) -> Result<Vec<PhoneNumber>, StoreError> {
    let mut out: Vec<PhoneNumber> = Vec::new();
    loop {
        let after = out.last().map(|n| n.id.clone());
        let page = db.list_phone_numbers(org_id, after.as_deref(), 100).await?;
        let done = page.len() < 100;
        out.extend(page);
        if done {
            return Ok(out);
        }
    }
}

/// The access token to use for each WABA of the organisation: a connected number's if
/// there is one, else any number's.
pub async fn waba_tokens(
    db: &Db,
    key: &MasterKey,
    org_id: Uuid,
) -> Result<BTreeMap<String, Option<String>>, StoreError> {
    let mut tokens: BTreeMap<String, Option<String>> = BTreeMap::new();
    for n in all_numbers(db, org_id).await? {
        let token = key
            .open(Purpose::TokenEncryption, &n.access_token_enc)
            .and_then(|b| String::from_utf8(b).ok());
        let entry = tokens.entry(n.waba_id.clone()).or_insert(None);
        if (n.status == "connected" && token.is_some()) || entry.is_none() {
            *entry = token;
        }
    }
    Ok(tokens)
}

/// Syncs one organisation. Network failures of one WABA are reported in `failures` and do
/// not stop the others; database failures end the run.
pub async fn sync_org(
    db: &Db,
    cloud: &CloudApiClient,
    key: &MasterKey,
    org_id: Uuid,
) -> Result<SyncReport, SyncError> {
    let mut report = SyncReport {
        org_id,
        ..Default::default()
    };
    for (waba, token) in waba_tokens(db, key, org_id).await? {
        let Some(token) = token else {
            report
                .failures
                .push((waba, "no readable access token for this WABA".into()));
            continue;
        };
        match sync_waba(db, cloud, org_id, &waba, &token, &mut report).await {
            Ok(()) => report.wabas += 1,
            Err(WabaError::Store(e)) => return Err(e.into()),
            Err(WabaError::Network(e)) => {
                tracing::warn!(%org_id, waba_id = %waba, error = %e, "template sync: listing failed");
                report.failures.push((waba, e.to_string()));
            }
        }
    }
    metrics::counter!("tern_templates_synced_total").increment(report.synced as u64);
    Ok(report)
}

enum WabaError {
    Store(StoreError),
    Network(SendError),
}

async fn sync_waba(
    db: &Db,
    cloud: &CloudApiClient,
    org_id: Uuid,
    waba: &str,
    token: &str,
    report: &mut SyncReport,
) -> Result<(), WabaError> {
    let mut after: Option<String> = None;
    for _ in 0..MAX_PAGES {
        let page = cloud
            .list_templates(waba, token, after.as_deref())
            .await
            .map_err(WabaError::Network)?;
        for t in &page.templates {
            upsert(db, org_id, waba, t, report)
                .await
                .map_err(WabaError::Store)?;
        }
        match page.next_cursor {
            Some(c) if after.as_deref() != Some(c.as_str()) => after = Some(c),
            _ => return Ok(()),
        }
    }
    tracing::warn!(%org_id, waba_id = %waba, "template sync: page limit reached");
    Ok(())
}

async fn upsert(
    db: &Db,
    org_id: Uuid,
    waba: &str,
    t: &TemplateInfo,
    report: &mut SyncReport,
) -> Result<(), StoreError> {
    let (Some(status), Some(category)) = (
        status_from_network(&t.status),
        category_from_network(&t.category),
    ) else {
        tracing::info!(name = %t.name, status = %t.status, category = %t.category,
            "template sync: unmapped status or category, skipped");
        report.skipped += 1;
        return Ok(());
    };
    if t.name.is_empty() || t.language.is_empty() {
        report.skipped += 1;
        return Ok(());
    }
    let at = now_ms();
    let network_id = (!t.id.is_empty()).then_some(t.id.as_str());
    let reason = if status == "rejected" {
        rejection_reason_from_network(t.rejected_reason.as_deref())
    } else {
        None
    };
    let (row, created) = db
        .upsert_synced_template(
            org_id,
            waba,
            &t.name,
            &t.language,
            category,
            status,
            &serde_json::Value::Array(t.components.clone()),
            network_id,
            reason.as_deref(),
            new_id(),
            at,
        )
        .await?;
    report.synced += 1;
    if created {
        report.created += 1;
    } else if row.updated_at == at {
        report.updated += 1;
    }
    Ok(())
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

/// Runs the sync on start and then every `interval`, until cancelled.
pub async fn run(
    db: Db,
    cloud: CloudApiClient,
    key: MasterKey,
    interval: Duration,
    cancel: CancellationToken,
) {
    loop {
        tokio::select! {
            _ = cancel.cancelled() => break,
            r = sync_all(&db, &cloud, &key, &cancel) => match r {
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
            _ = tokio::time::sleep(interval) => {}
        }
    }
}
