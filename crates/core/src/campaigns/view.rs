//! How a campaign, its progress and its recipients show in API answers and in the
//! `campaign.status` event body (one shape for both).

use std::collections::BTreeMap;

use serde::Serialize;
use serde_json::Value;
use tern_domain::time::format_ms;
use tern_store::{CampaignCounts, RecipientRow};
use utoipa::ToSchema;

/// `draft` → `ready` (resolved) → `scheduled` → `running` ⇄ `paused` → `completed`.
#[derive(Debug, ToSchema)]
#[schema(rename_all = "lowercase")]
#[allow(dead_code)]
pub enum CampaignStatus {
    Draft,
    Ready,
    Scheduled,
    Running,
    Paused,
    Completed,
}

/// A recipient's status: no message yet (`pending`, `skipped`, `expired`) or its message's.
#[derive(Debug, ToSchema)]
#[schema(rename_all = "lowercase")]
#[allow(dead_code)]
pub enum RecipientStatus {
    Pending,
    Queued,
    Sent,
    Delivered,
    Read,
    Failed,
    Skipped,
    Expired,
}

/// Recipients per status; the counts sum to `total`.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct Counts {
    pub total: i64,
    /// Not yet handed to the dispatcher.
    pub pending: i64,
    /// A message exists and waits to be sent.
    pub queued: i64,
    pub sent: i64,
    pub delivered: i64,
    pub read: i64,
    pub failed: i64,
    /// Left out at resolve or fan-out (see `skipped_reasons`).
    pub skipped: i64,
    /// Not sent before `expires_at`.
    pub expired: i64,
}

impl From<CampaignCounts> for Counts {
    fn from(c: CampaignCounts) -> Self {
        Counts {
            total: c.total(),
            pending: c.pending,
            queued: c.queued,
            sent: c.sent,
            delivered: c.delivered,
            read: c.read,
            failed: c.failed,
            skipped: c.skipped,
            expired: c.expired,
        }
    }
}

/// A campaign: one approved template sent to an audience of contacts.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct Campaign {
    #[schema(format = Uuid)]
    pub id: String,
    pub name: String,
    #[schema(value_type = CampaignStatus)]
    pub status: String,
    pub phone_number_id: String,
    /// `name`, `language`, and `variables` (strings, or `{"field", "fallback"}` filled per
    /// recipient) or `components`.
    #[schema(value_type = Object)]
    pub template: Value,
    /// `{"contact_ids": […]}`, `{"tags": […], "tag_match": "any"|"all"}` or
    /// `{"all_contacts": true}`, optionally with `exclude_tags`.
    #[schema(value_type = Object)]
    pub audience: Value,
    #[schema(format = DateTime)]
    pub scheduled_at: Option<String>,
    #[schema(format = DateTime)]
    pub expires_at: Option<String>,
    /// Recipients after resolve (null until resolved).
    pub recipient_count: Option<i64>,
    /// What the recipients not skipped cost at the organisation's price for the template's
    /// category, in minor units of the wallet's currency: reckoned at resolve and again at
    /// launch (0 when billing is off; null until resolved with the template approved).
    /// Launch and resume refuse with `402 wallet_balance_low` when the wallet cannot cover
    /// the recipients left.
    pub estimated_cost_minor: Option<i64>,
    /// Why it is paused: `manual`, `wallet_balance_low`, `usage_limit_reached`,
    /// `subscription_restricted`, `error_threshold`, `template_not_approved`,
    /// `phone_number_not_connected`, `plan_feature_unavailable`.
    pub pause_reason: Option<String>,
    #[schema(format = DateTime)]
    pub resolved_at: Option<String>,
    #[schema(format = DateTime)]
    pub launched_at: Option<String>,
    #[schema(format = DateTime)]
    pub paused_at: Option<String>,
    #[schema(format = DateTime)]
    pub completed_at: Option<String>,
    /// Recipients per status (see `GET /campaigns/{id}/progress` for reasons).
    pub progress: Counts,
    #[schema(format = DateTime)]
    pub created_at: String,
    #[schema(format = DateTime)]
    pub updated_at: String,
}

impl Campaign {
    pub fn new(c: &tern_store::Campaign, counts: CampaignCounts) -> Campaign {
        let mut template =
            serde_json::json!({"name": c.template_name, "language": c.template_language});
        if let Some(o) = c.params.0.as_object() {
            for (k, v) in o {
                template[k] = v.clone();
            }
        }
        Campaign {
            id: c.id.to_string(),
            name: c.name.clone(),
            status: c.status.as_str().to_string(),
            phone_number_id: c.phone_number_id.clone(),
            template,
            audience: c.audience.0.clone(),
            scheduled_at: c.scheduled_at.map(format_ms),
            expires_at: c.expires_at.map(format_ms),
            recipient_count: c.recipient_count,
            estimated_cost_minor: c.estimated_cost_minor,
            pause_reason: c.pause_reason.map(|r| r.as_str().to_string()),
            resolved_at: c.resolved_at.map(format_ms),
            launched_at: c.launched_at.map(format_ms),
            paused_at: c.paused_at.map(format_ms),
            completed_at: c.completed_at.map(format_ms),
            progress: counts.into(),
            created_at: format_ms(c.created_at),
            updated_at: format_ms(c.updated_at),
        }
    }
}

/// A campaign's progress.
#[derive(Debug, Serialize, ToSchema)]
pub struct Progress {
    #[schema(format = Uuid)]
    pub campaign_id: String,
    #[schema(value_type = CampaignStatus)]
    pub status: String,
    #[serde(flatten)]
    pub counts: Counts,
    /// Skipped recipients per reason (`opted_out`, `variable_invalid`,
    /// `phone_number_required`, `no_address`, `blocked`).
    pub skipped_reasons: BTreeMap<String, i64>,
    /// Failed messages per failure code.
    pub failure_codes: BTreeMap<String, i64>,
    #[schema(format = DateTime)]
    pub updated_at: String,
}

/// One recipient of a campaign.
#[derive(Debug, Serialize, ToSchema)]
pub struct Recipient {
    #[schema(format = Uuid)]
    pub contact_id: String,
    #[schema(value_type = RecipientStatus)]
    pub status: String,
    /// Its message, once one exists.
    #[schema(format = Uuid)]
    pub message_id: Option<String>,
    /// The skip reason, or the message's failure code.
    pub reason: Option<String>,
    #[schema(format = DateTime)]
    pub updated_at: String,
}

impl From<RecipientRow> for Recipient {
    fn from(r: RecipientRow) -> Self {
        Recipient {
            contact_id: r.contact_id.to_string(),
            status: r.status.as_str().to_string(),
            message_id: r.message_id.map(|m| m.to_string()),
            reason: r.reason,
            updated_at: format_ms(r.updated_at),
        }
    }
}
