//! The overview (APP.md §4 "Other pages"): the organisation's numbers with their status and
//! throughput, its messages of the last 24 hours by status, the top failure codes, webhook
//! endpoints that are failing and the campaigns running now. Every role sees it. It is also
//! the home page (`/app`) once the organisation has a number.

use crate::AppState;
use crate::errors::AppError;
use crate::frame::{Frame, Nav};
use crate::pages::form::Stamp;
use crate::pages::listing::{href, status_words, thousands};
use crate::session::OrgMember;
use askama::Template;
use axum::Router;
use axum::extract::State;
use axum::response::Html;
use axum::routing::get;
use tern_core::overview::{self, Overview};
use tern_domain::number::NumberStatus;
use tern_domain::time::now_ms;

pub fn routes() -> Router<AppState> {
    Router::new().route("/app/overview", get(show))
}

/// A number as the overview shows it.
pub struct NumberRow {
    pub display: String,
    pub id: String,
    pub status: &'static str,
    pub connected: bool,
    pub throughput_mps: i64,
    pub outbound: String,
    pub failed: String,
    pub inbound: String,
}

/// A status count, linked to the message explorer filtered by it.
pub struct StatusRow {
    pub status: &'static str,
    pub words: &'static str,
    pub count: String,
    pub href: String,
}

/// A failing webhook endpoint.
pub struct SubRow {
    pub id: String,
    pub url: String,
    /// Why it is disabled, when it is.
    pub disabled: Option<String>,
    pub failed_attempts: String,
    pub failed_deliveries: String,
    pub last_failure: Option<Stamp>,
}

/// A running campaign's progress.
pub struct CampaignRow {
    pub id: String,
    pub name: String,
    pub done: String,
    pub total: String,
    /// 0–100.
    pub percent: i64,
    pub failed: String,
}

#[derive(Template)]
#[template(path = "overview/show.html")]
pub struct OverviewPage<'a> {
    pub frame: &'a Frame,
    pub org_name: &'a str,
    /// Shown as the home page: a welcome line.
    pub home: bool,
    /// The organisation has no active key: the next step.
    pub first_key: bool,
    pub since: Stamp,
    pub total: String,
    pub numbers: Vec<NumberRow>,
    pub statuses: Vec<StatusRow>,
    /// (failure code, messages), most frequent first.
    pub failures: Vec<(String, String)>,
    pub subs: Vec<SubRow>,
    pub campaigns: Vec<CampaignRow>,
}

fn number_status(s: NumberStatus) -> &'static str {
    match s {
        NumberStatus::Connected => "Connected",
        NumberStatus::Disconnected => "Disconnected",
    }
}

fn subscription_words(reason: Option<&str>) -> String {
    match reason {
        Some("gone") => "Disabled: the receiver answered 410 Gone".to_string(),
        Some(other) => format!("Disabled ({other})"),
        None => "Disabled".to_string(),
    }
}

impl<'a> OverviewPage<'a> {
    pub fn new(frame: &'a Frame, org_name: &'a str, o: &Overview) -> OverviewPage<'a> {
        OverviewPage {
            frame,
            org_name,
            home: false,
            first_key: false,
            since: Stamp::at(o.since),
            total: thousands(o.total()),
            numbers: o
                .numbers
                .iter()
                .map(|n| NumberRow {
                    display: n.number.display_phone_number.clone(),
                    id: n.number.id.clone(),
                    status: number_status(n.number.status),
                    connected: n.number.status == NumberStatus::Connected,
                    throughput_mps: n.number.throughput_mps,
                    outbound: thousands(n.outbound),
                    failed: thousands(n.failed),
                    inbound: thousands(n.inbound),
                })
                .collect(),
            statuses: o
                .by_status
                .iter()
                .map(|(s, n)| StatusRow {
                    status: s.as_str(),
                    words: status_words(s.as_str()),
                    count: thousands(*n),
                    href: href("/app/messages", &[("status", s.as_str())]),
                })
                .collect(),
            failures: o
                .top_failures
                .iter()
                .map(|(code, n)| (code.clone(), thousands(*n)))
                .collect(),
            subs: o
                .failing_subscriptions
                .iter()
                .map(|h| SubRow {
                    id: h.id.to_string(),
                    url: h.url.clone(),
                    disabled: (!h.enabled)
                        .then(|| subscription_words(h.disabled_reason.as_deref())),
                    failed_attempts: thousands(h.failed_attempts),
                    failed_deliveries: thousands(h.failed_deliveries),
                    last_failure: Stamp::opt(h.last_failure_at),
                })
                .collect(),
            campaigns: o
                .running_campaigns
                .iter()
                .map(|r| {
                    let c = &r.counts;
                    let total = r
                        .campaign
                        .recipient_count
                        .unwrap_or(c.total())
                        .max(c.total());
                    let done = c.total() - c.open();
                    CampaignRow {
                        id: r.campaign.id.to_string(),
                        name: r.campaign.name.clone(),
                        done: thousands(done),
                        total: thousands(total),
                        percent: if total > 0 { done * 100 / total } else { 0 },
                        failed: thousands(c.failed),
                    }
                })
                .collect(),
        }
    }
}

/// The overview of `me`'s organisation, as a page (`home`: the home page's welcome and
/// first step too).
pub async fn page(state: &AppState, me: &OrgMember, home: bool) -> Result<Html<String>, AppError> {
    let o = overview::overview(&state.core, me.org.id, now_ms()).await?;
    let first_key = home
        && state
            .core
            .db
            .count_active_api_keys(me.org.id)
            .await
            .map_err(|e| AppError::Internal(format!("counting keys: {e}")))?
            == 0;
    let frame = me.frame(if home { Nav::None } else { Nav::Overview });
    let mut view = OverviewPage::new(&frame, &me.org.name, &o);
    view.home = home;
    view.first_key = first_key;
    Ok(Html(view.render()?))
}

/// `GET /app/overview`: every role.
pub async fn show(State(state): State<AppState>, me: OrgMember) -> Result<Html<String>, AppError> {
    page(&state, &me, false).await
}
