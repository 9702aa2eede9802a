//! The campaigns pages (APP.md §4 "Other pages"): the organisation's campaigns with their
//! progress, and one campaign's page with its counts refreshing themselves while it runs (or
//! waits for its time), a link to its messages in the explorer, and Pause / Resume for people
//! whose role holds `campaigns.send` — through the same core use case as the API's
//! `POST /campaigns/{id}/pause|resume` (which records no audit entry, so neither does this).

use crate::AppState;
use crate::errors::AppError;
use crate::frame::{FlashKind, Frame, Nav};
use crate::pages::form::Stamp;
use crate::pages::respond;
use crate::session::{OrgMember, redirect_with_flash};
use askama::Template;
use axum::Router;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::Response;
use axum::routing::{get, post};
use serde::Deserialize;
use tern_core::Principal;
use tern_core::campaigns::{self, view::Progress};
use tern_domain::auth::Permission;
use tern_domain::campaign::{Action, PauseReason, Status};
use tern_domain::time::now_ms;
use tern_store::{Campaign, CampaignCounts};
use uuid::Uuid;

/// Campaigns a page of the list.
pub const PAGE_SIZE: i64 = 25;

pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/app/campaigns", get(list))
        .route("/app/campaigns/{id}", get(show))
        .route("/app/campaigns/{id}/live", get(live))
        .route("/app/campaigns/{id}/pause", post(pause))
        .route("/app/campaigns/{id}/resume", post(resume))
}

pub fn status_words(s: Status) -> &'static str {
    match s {
        Status::Draft => "Draft",
        Status::Ready => "Ready (audience resolved)",
        Status::Scheduled => "Scheduled",
        Status::Running => "Running",
        Status::Paused => "Paused",
        Status::Completed => "Completed",
    }
}

pub fn pause_words(r: PauseReason) -> &'static str {
    match r {
        PauseReason::Manual => "paused by a person",
        PauseReason::WalletBalanceLow => "the wallet's balance is too low: top it up, then resume",
        PauseReason::UsageLimitReached => {
            "the plan's message allowance is used up: wait for the next period or move to a larger plan"
        }
        PauseReason::SubscriptionRestricted => "the subscription is restricted: settle the bill",
        PauseReason::ErrorThreshold => {
            "too many of its messages failed: look at their failures in the explorer before resuming"
        }
        PauseReason::TemplateNotApproved => "its template is no longer approved",
        PauseReason::PhoneNumberNotConnected => "its number is not connected",
        PauseReason::PlanFeatureUnavailable => "the plan no longer includes campaigns",
    }
}

/// A campaign's counts as the pages show them.
#[derive(Debug, Clone)]
pub struct CountsView {
    pub total: i64,
    /// Handled one way or another (not pending or queued).
    pub done: i64,
    pub percent: i64,
    /// (label, count, bucket) in the order a recipient moves.
    pub buckets: Vec<(&'static str, i64, &'static str)>,
}

impl CountsView {
    pub fn of(c: &CampaignCounts) -> CountsView {
        let total = c.total();
        let done = total - c.pending - c.queued;
        CountsView {
            total,
            done,
            percent: if total > 0 { done * 100 / total } else { 0 },
            buckets: vec![
                ("Pending", c.pending, "pending"),
                ("Queued", c.queued, "queued"),
                ("Sent", c.sent, "sent"),
                ("Delivered", c.delivered, "delivered"),
                ("Read", c.read, "read"),
                ("Failed", c.failed, "failed"),
                ("Skipped", c.skipped, "skipped"),
                ("Expired", c.expired, "expired"),
            ],
        }
    }
}

/// One campaign of the list.
#[derive(Debug, Clone)]
pub struct ListRow {
    pub id: String,
    pub name: String,
    pub status: String,
    pub status_words: &'static str,
    pub counts: CountsView,
    pub created: Stamp,
}

#[derive(Template)]
#[template(path = "campaigns/list.html")]
pub struct ListPage {
    pub frame: Frame,
    pub rows: Vec<ListRow>,
    pub paged: bool,
    pub older: Option<String>,
}

#[derive(Debug, Deserialize, Default)]
pub struct ListQuery {
    /// `{created_at}.{id}` of the previous page's last campaign.
    pub after: Option<String>,
}

fn parse_after(raw: &str) -> Option<(i64, Uuid)> {
    let (at, id) = raw.split_once('.')?;
    Some((at.parse().ok()?, Uuid::parse_str(id).ok()?))
}

/// `GET /app/campaigns`.
pub async fn list(
    State(state): State<AppState>,
    me: OrgMember,
    Query(q): Query<ListQuery>,
) -> Result<Response, AppError> {
    let after = q.after.as_deref().and_then(parse_after);
    let mut rows = campaigns::list(&state.core, me.org.id, after, PAGE_SIZE + 1).await?;
    let older = (rows.len() as i64 > PAGE_SIZE).then(|| {
        rows.truncate(PAGE_SIZE as usize);
        rows.last()
            .map(|(c, _)| format!("/app/campaigns?after={}.{}", c.created_at, c.id))
            .unwrap_or_default()
    });
    let page = ListPage {
        frame: me.frame(Nav::Campaigns),
        rows: rows
            .iter()
            .map(|(c, counts)| ListRow {
                id: c.id.to_string(),
                name: c.name.clone(),
                status: c.status.as_str().to_string(),
                status_words: status_words(c.status),
                counts: CountsView::of(counts),
                created: Stamp::at(c.created_at),
            })
            .collect(),
        paged: after.is_some(),
        older,
    };
    respond(StatusCode::OK, &page)
}

/// What changes while the campaign's page is open.
#[derive(Debug, Clone)]
pub struct LiveView {
    pub id: String,
    /// Neither running nor scheduled: the page stops refreshing.
    pub is_final: bool,
    pub status: String,
    pub status_words: &'static str,
    pub pause_reason: Option<&'static str>,
    pub counts: CountsView,
    pub skipped_reasons: Vec<(String, i64)>,
    pub failure_codes: Vec<(String, i64)>,
    /// Pause / Resume offered (the person's role holds `campaigns.send` and the status
    /// allows it).
    pub can_pause: bool,
    pub can_resume: bool,
    /// Whether the person's role may pause and resume at all (else the page says who can).
    pub may_send: bool,
    pub csrf_token: String,
}

/// What does not change.
#[derive(Debug, Clone)]
pub struct CampaignView {
    pub id: String,
    pub name: String,
    pub template: String,
    pub number: String,
    pub times: Vec<(&'static str, Stamp)>,
}

#[derive(Template)]
#[template(path = "campaigns/show.html")]
pub struct ShowPage {
    pub frame: Frame,
    pub campaign: CampaignView,
    pub live: LiveView,
}

#[derive(Template)]
#[template(path = "campaigns/live.html")]
pub struct LiveFragment {
    pub live: LiveView,
}

/// How long a completed campaign's page still refreshes itself (its last messages are
/// delivered and read after it completes).
const STILL_MOVING_MS: i64 = 5 * 60_000;

fn may_send(me: &OrgMember) -> bool {
    me.role().allows(Permission::CampaignsSend)
}

async fn load(
    state: &AppState,
    me: &OrgMember,
    id: &str,
) -> Result<(Campaign, LiveView), AppError> {
    let id = Uuid::parse_str(id).map_err(|_| AppError::NotFound)?;
    let c = campaigns::get(&state.core, me.org.id, id).await?;
    let p: Progress = campaigns::progress(&state.core, me.org.id, id).await?;
    let counts = CampaignCounts {
        pending: p.counts.pending,
        queued: p.counts.queued,
        sent: p.counts.sent,
        delivered: p.counts.delivered,
        read: p.counts.read,
        failed: p.counts.failed,
        skipped: p.counts.skipped,
        expired: p.counts.expired,
    };
    let send = may_send(me);
    let live = LiveView {
        id: c.id.to_string(),
        // A completed campaign's messages still move (delivered → read) for a while.
        is_final: !matches!(c.status, Status::Running | Status::Scheduled)
            && c.completed_at
                .is_none_or(|t| tern_domain::time::now_ms() - t > STILL_MOVING_MS),
        status: c.status.as_str().to_string(),
        status_words: status_words(c.status),
        pause_reason: c
            .pause_reason
            .filter(|_| c.status == Status::Paused)
            .map(pause_words),
        counts: CountsView::of(&counts),
        skipped_reasons: p.skipped_reasons.into_iter().collect(),
        failure_codes: p.failure_codes.into_iter().collect(),
        can_pause: send && c.status.allows(Action::Pause),
        can_resume: send && c.status.allows(Action::Resume),
        may_send: send,
        csrf_token: me.frame(Nav::Campaigns).csrf_token,
    };
    Ok((c, live))
}

fn campaign_view(c: &Campaign, number: String) -> CampaignView {
    CampaignView {
        id: c.id.to_string(),
        name: c.name.clone(),
        template: format!("{} ({})", c.template_name, c.template_language),
        number,
        times: [
            ("Created", Some(c.created_at)),
            ("Resolved", c.resolved_at),
            ("Scheduled for", c.scheduled_at),
            ("Launched", c.launched_at),
            ("Paused", c.paused_at),
            ("Completed", c.completed_at),
            ("Expires", c.expires_at),
        ]
        .into_iter()
        .filter_map(|(label, at)| at.map(|ms| (label, Stamp::at(ms))))
        .collect(),
    }
}

/// `GET /app/campaigns/{id}`.
pub async fn show(
    State(state): State<AppState>,
    me: OrgMember,
    Path(id): Path<String>,
) -> Result<Response, AppError> {
    let (c, live) = load(&state, &me, &id).await?;
    let number = state
        .core
        .db
        .get_phone_number(&c.phone_number_id)
        .await
        .ok()
        .flatten()
        .filter(|n| n.org_id == me.org.id)
        .map(|n| n.display_phone_number)
        .unwrap_or_else(|| c.phone_number_id.clone());
    let page = ShowPage {
        frame: me.frame(Nav::Campaigns),
        campaign: campaign_view(&c, number),
        live,
    };
    respond(StatusCode::OK, &page)
}

/// `GET /app/campaigns/{id}/live`: the counts and status (an HTML fragment).
pub async fn live(
    State(state): State<AppState>,
    me: OrgMember,
    Path(id): Path<String>,
) -> Result<Response, AppError> {
    let (_, live) = load(&state, &me, &id).await?;
    respond(StatusCode::OK, &LiveFragment { live })
}

/// Pause or resume through the API's use case; the outcome in words on the campaign's page.
async fn act(
    state: &AppState,
    me: &OrgMember,
    id: &str,
    action: Action,
) -> Result<Response, AppError> {
    let id = Uuid::parse_str(id).map_err(|_| AppError::NotFound)?;
    // Another organisation's campaign is a 404 whatever the role.
    campaigns::get(&state.core, me.org.id, id).await?;
    let here = format!("/app/campaigns/{id}");
    if !may_send(me) {
        return Err(AppError::Refused(format!(
            "Your role ({}) cannot pause or resume campaigns: that needs the campaigns.send permission, which owners and admins hold. Ask one of them.",
            me.role().as_str()
        )));
    }
    let p = Principal::for_member(me.org.clone(), me.role(), me.ctx());
    let body = serde_json::Value::Null;
    match campaigns::act(&state.core, &p, id, action, &body, now_ms()).await {
        Ok(_) => {
            let words = match action {
                Action::Pause => {
                    "The campaign is paused: no more recipients are handed to the network until it is resumed."
                }
                _ => "The campaign is running again with the recipients not yet messaged.",
            };
            Ok(redirect_with_flash(state, &here, FlashKind::Success, words))
        }
        Err(e) if e.status() < 500 && e.code != tern_domain::ErrorCode::NotFound => {
            let words = format!("Nothing changed: {}", e.message);
            Ok(redirect_with_flash(state, &here, FlashKind::Error, &words))
        }
        Err(e) => Err(e.into()),
    }
}

/// `POST /app/campaigns/{id}/pause`.
pub async fn pause(
    State(state): State<AppState>,
    me: OrgMember,
    Path(id): Path<String>,
) -> Result<Response, AppError> {
    act(&state, &me, &id, Action::Pause).await
}

/// `POST /app/campaigns/{id}/resume`.
pub async fn resume(
    State(state): State<AppState>,
    me: OrgMember,
    Path(id): Path<String>,
) -> Result<Response, AppError> {
    act(&state, &me, &id, Action::Resume).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn progress_counts_what_is_handled() {
        let v = CountsView::of(&CampaignCounts {
            pending: 2,
            queued: 1,
            sent: 3,
            delivered: 1,
            read: 1,
            failed: 1,
            skipped: 1,
            expired: 0,
        });
        assert_eq!((v.total, v.done, v.percent), (10, 7, 70));
        assert_eq!(parse_after("5.x"), None);
    }
}
