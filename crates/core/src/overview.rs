//! The organisation at a glance (the app's overview page): its numbers, its messages of the
//! last 24 hours by status and by failure, webhook endpoints that are failing, and the
//! campaigns running now. Read-only; every read is bounded by an index (the messages by
//! the window's start, see [`tern_store::Db::message_counts_since`]).

use std::collections::BTreeMap;

use tern_domain::campaign::Status as CampaignStatus;
use tern_domain::message::Status;
use tern_store::{Campaign, CampaignCounts, PhoneNumber, SubscriptionHealth};
use uuid::Uuid;

use crate::{Core, Result};

/// The window the overview counts: the last 24 hours.
pub const WINDOW_MS: i64 = 24 * 60 * 60 * 1000;
/// Failure codes shown, most frequent first.
pub const TOP_FAILURES: usize = 5;
/// Running campaigns shown.
pub const RUNNING_CAMPAIGNS: i64 = 10;
/// Numbers shown (an organisation has a handful; a plan allows at most tens).
const NUMBERS: i64 = 100;

/// One of the organisation's numbers with its traffic of the window.
#[derive(Debug, Clone)]
pub struct NumberLine {
    pub number: PhoneNumber,
    /// Messages sent through Tern (any status).
    pub outbound: i64,
    /// Of those, failed.
    pub failed: i64,
    /// Messages from customers.
    pub inbound: i64,
}

/// A campaign running now with its recipients' progress.
#[derive(Debug, Clone)]
pub struct RunningCampaign {
    pub campaign: Campaign,
    pub counts: CampaignCounts,
}

/// What the overview shows.
#[derive(Debug, Clone)]
pub struct Overview {
    /// The window's start (epoch ms).
    pub since: i64,
    pub numbers: Vec<NumberLine>,
    /// Messages of the window per status, every status listed (zeros included), in the
    /// statuses' order.
    pub by_status: Vec<(Status, i64)>,
    /// The most frequent failure codes of the window: (code, messages).
    pub top_failures: Vec<(String, i64)>,
    /// Endpoints disabled, or with failed attempts in the window.
    pub failing_subscriptions: Vec<SubscriptionHealth>,
    pub running_campaigns: Vec<RunningCampaign>,
}

impl Overview {
    /// Messages of the window in either direction.
    pub fn total(&self) -> i64 {
        self.by_status.iter().map(|(_, n)| n).sum()
    }
}

/// The overview of `org_id` at `now`.
pub async fn overview(core: &Core, org_id: Uuid, now: i64) -> Result<Overview> {
    let since = now - WINDOW_MS;
    let db = &core.db;
    let (numbers, counts, health, campaigns) = tokio::try_join!(
        db.list_phone_numbers(org_id, None, NUMBERS),
        db.message_counts_since(org_id, since),
        db.webhook_health_since(org_id, since),
        db.list_campaigns(
            org_id,
            Some(CampaignStatus::Running),
            None,
            RUNNING_CAMPAIGNS
        ),
    )?;
    let mut by_status: BTreeMap<&str, i64> = BTreeMap::new();
    let mut failures: BTreeMap<String, i64> = BTreeMap::new();
    let mut per_number: BTreeMap<&str, (i64, i64, i64)> = BTreeMap::new();
    for c in &counts {
        *by_status.entry(c.status.as_str()).or_default() += c.count;
        let n = per_number.entry(c.phone_number_id.as_str()).or_default();
        match c.status {
            Status::Received => n.2 += c.count,
            Status::Failed => {
                n.0 += c.count;
                n.1 += c.count;
            }
            _ => n.0 += c.count,
        }
        if c.status == Status::Failed {
            let code = c.failure_code.clone().unwrap_or_else(|| "unknown".into());
            *failures.entry(code).or_default() += c.count;
        }
    }
    let mut top_failures: Vec<(String, i64)> = failures.into_iter().collect();
    // Most frequent first; equal counts by code, so the order is stable.
    top_failures.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    top_failures.truncate(TOP_FAILURES);
    let numbers = numbers
        .into_iter()
        .map(|number| {
            let (outbound, failed, inbound) = per_number
                .get(number.id.as_str())
                .copied()
                .unwrap_or_default();
            NumberLine {
                number,
                outbound,
                failed,
                inbound,
            }
        })
        .collect();
    let mut running_campaigns = Vec::with_capacity(campaigns.len());
    for campaign in campaigns {
        let counts = db.campaign_counts(campaign.id).await?;
        running_campaigns.push(RunningCampaign { campaign, counts });
    }
    Ok(Overview {
        since,
        numbers,
        by_status: Status::ALL
            .iter()
            .map(|s| (*s, by_status.get(s.as_str()).copied().unwrap_or(0)))
            .collect(),
        top_failures,
        failing_subscriptions: health
            .into_iter()
            .filter(|h| !h.enabled || h.failed_attempts > 0)
            .collect(),
        running_campaigns,
    })
}
