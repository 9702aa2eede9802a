//! Usage and plan (APP.md §4 "Other pages"): the plan and its features, each count limit
//! (used of limit), this billing period's allowances, the wallet with its latest ledger
//! entries, and every request-quota window with what remains now. Read-only; every role
//! sees it (changing the plan is the operator's: `tern admin org update`).

use crate::AppState;
use crate::errors::AppError;
use crate::frame::{Frame, Nav};
use crate::pages::form::Stamp;
use crate::pages::listing::{money, thousands};
use crate::session::OrgMember;
use askama::Template;
use axum::Router;
use axum::extract::State;
use axum::response::Html;
use axum::routing::get;
use tern_core::account::{self, Usage};
use tern_domain::plan::{Entitlement, Feature, Meter, RateWindow, SubscriptionStatus};
use tern_domain::quota::{WindowState, ceil_secs};
use tern_domain::time::now_ms;

pub fn routes() -> Router<AppState> {
    Router::new().route("/app/usage", get(show))
}

fn entitlement_words(e: Entitlement) -> &'static str {
    match e {
        Entitlement::ApiKeys => "Active API keys",
        Entitlement::PhoneNumbers => "Phone numbers",
        Entitlement::Contacts => "Contacts",
        Entitlement::Templates => "Templates",
        Entitlement::WebhookSubscriptions => "Webhook endpoints",
        Entitlement::Campaigns => "Campaigns",
    }
}

fn meter_words(m: Meter) -> &'static str {
    match m {
        Meter::ApiRequests => "API requests",
        Meter::MessagesSent => "Messages sent",
    }
}

fn feature_words(f: Feature) -> &'static str {
    match f {
        Feature::PublicApi => "Public API",
        Feature::Media => "Media messages",
        Feature::Campaigns => "Campaigns",
    }
}

fn window_words(w: RateWindow) -> &'static str {
    match w {
        RateWindow::KeyMinute => "Per key, per minute",
        RateWindow::KeyDay => "Per key, per day (UTC)",
        RateWindow::TenantMinute => "Organisation, per minute",
        RateWindow::TenantDay => "Organisation, per day (UTC)",
    }
}

fn status_words(s: SubscriptionStatus) -> (&'static str, &'static str) {
    match s {
        SubscriptionStatus::Active => ("on", "Active"),
        SubscriptionStatus::PastDue => ("warn", "Past due"),
        SubscriptionStatus::Restricted => ("off", "Restricted"),
        SubscriptionStatus::Cancelled => ("off", "Cancelled"),
    }
}

fn ledger_words(reason: &str) -> &'static str {
    match reason {
        "top_up" => "Top-up",
        "message_debit" => "Message charged",
        "message_refund" => "Message refunded",
        "adjustment" => "Adjustment by the operator",
        _ => "Other",
    }
}

/// "in 42 s", "in 3 h 5 min": how long until a window resets.
fn resets_in(ms: i64) -> String {
    let s = ceil_secs(ms);
    match s {
        0..=119 => format!("in {s} s"),
        120..=3599 => format!("in {} min", s.div_ceil(60)),
        _ => format!("in {} h {} min", s / 3600, (s % 3600) / 60),
    }
}

/// One row of a used/limit table.
pub struct Metered {
    pub what: &'static str,
    pub used: String,
    /// "Unlimited" or the number.
    pub limit: String,
    pub remaining: String,
    /// 0–100 when limited.
    pub percent: Option<i64>,
    pub reached: bool,
}

fn metered(what: &'static str, used: i64, limit: Option<u64>) -> Metered {
    match limit {
        None => Metered {
            what,
            used: thousands(used),
            limit: "Unlimited".into(),
            remaining: "—".into(),
            percent: None,
            reached: false,
        },
        Some(l) => {
            let l = i64::try_from(l).unwrap_or(i64::MAX);
            Metered {
                what,
                used: thousands(used),
                limit: thousands(l),
                remaining: thousands((l - used).max(0)),
                percent: Some(if l > 0 {
                    (used.saturating_mul(100) / l).min(100)
                } else {
                    100
                }),
                reached: used >= l,
            }
        }
    }
}

/// A quota window as shown.
pub struct WindowRow {
    pub what: &'static str,
    pub quota: String,
    pub used: String,
    pub remaining: String,
    pub resets: String,
}

fn window_row(s: &WindowState) -> WindowRow {
    WindowRow {
        what: window_words(s.window),
        quota: thousands(i64::try_from(s.quota).unwrap_or(i64::MAX)),
        used: thousands(i64::try_from(s.used).unwrap_or(i64::MAX)),
        remaining: thousands(i64::try_from(s.remaining()).unwrap_or(i64::MAX)),
        resets: resets_in(s.reset_ms),
    }
}

/// A key's own windows.
pub struct KeyRows {
    pub name: String,
    pub prefix: String,
    pub windows: Vec<WindowRow>,
}

/// A ledger entry as shown.
pub struct LedgerRow {
    pub at: Stamp,
    pub what: &'static str,
    pub amount: String,
    pub credit: bool,
    pub message_id: Option<String>,
}

#[derive(Template)]
#[template(path = "usage/show.html")]
pub struct UsagePage<'a> {
    pub frame: &'a Frame,
    pub org_name: &'a str,
    pub plan: &'static str,
    pub status_class: &'static str,
    pub status: &'static str,
    pub features: Vec<(&'static str, bool)>,
    pub limits: Vec<Metered>,
    pub period_start: Stamp,
    pub period_end: Stamp,
    pub allowances: Vec<Metered>,
    pub balance: String,
    pub billing_on: bool,
    pub prices: Vec<(&'static str, String)>,
    pub ledger: Vec<LedgerRow>,
    /// `None`: quotas are off on this server.
    pub tenant: Option<Vec<WindowRow>>,
    pub keys: Vec<KeyRows>,
    pub burst: Option<String>,
}

impl<'a> UsagePage<'a> {
    pub fn new(frame: &'a Frame, org_name: &'a str, u: &Usage) -> UsagePage<'a> {
        let (status_class, status) = status_words(u.subscription_status);
        let currency = u.wallet_currency.as_str();
        UsagePage {
            frame,
            org_name,
            plan: u.plan,
            status_class,
            status,
            features: u
                .features
                .iter()
                .map(|(f, on)| (feature_words(*f), *on))
                .collect(),
            limits: u
                .limits
                .iter()
                .map(|l| metered(entitlement_words(l.entitlement), l.used, l.limit))
                .collect(),
            period_start: Stamp::at(u.period.0),
            period_end: Stamp::at(u.period.1),
            allowances: u
                .allowances
                .iter()
                .map(|a| metered(meter_words(a.meter), a.used, a.allowance))
                .collect(),
            balance: money(u.wallet_balance_minor, currency),
            billing_on: u.prices_minor.iter().any(|(_, p)| *p > 0),
            prices: u
                .prices_minor
                .iter()
                .map(|(c, p)| (c.as_str(), money(*p, currency)))
                .collect(),
            ledger: u
                .ledger
                .iter()
                .map(|e| LedgerRow {
                    at: Stamp::at(e.created_at),
                    what: ledger_words(&e.reason),
                    amount: money(e.amount_minor, currency),
                    credit: e.amount_minor >= 0,
                    message_id: e.message_id.map(|id| id.to_string()),
                })
                .collect(),
            tenant: u
                .quotas
                .as_ref()
                .map(|q| q.tenant.iter().map(window_row).collect()),
            keys: u
                .quotas
                .as_ref()
                .map(|q| {
                    q.keys
                        .iter()
                        .map(|k| KeyRows {
                            name: k.key.key.name.clone(),
                            prefix: k.key.key.prefix.clone(),
                            windows: k.windows.iter().map(window_row).collect(),
                        })
                        .collect()
                })
                .unwrap_or_default(),
            burst: u
                .quotas
                .as_ref()
                .and_then(|q| q.burst)
                .map(|b| thousands(i64::try_from(b).unwrap_or(i64::MAX))),
        }
    }
}

/// `GET /app/usage`: every role.
pub async fn show(State(state): State<AppState>, me: OrgMember) -> Result<Html<String>, AppError> {
    let u = account::usage(&state.core, &me.org, now_ms()).await?;
    let frame = me.frame(Nav::Usage);
    Ok(Html(UsagePage::new(&frame, &me.org.name, &u).render()?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits_and_resets_read_plainly() {
        let m = metered("Contacts", 12, Some(10));
        assert_eq!(
            (m.remaining.as_str(), m.percent, m.reached),
            ("0", Some(100), true)
        );
        let m = metered("Contacts", 1, None);
        assert_eq!((m.limit.as_str(), m.percent), ("Unlimited", None));
        assert_eq!(resets_in(41_001), "in 42 s");
        assert_eq!(resets_in(600_000), "in 10 min");
        assert_eq!(resets_in(3_900_000), "in 1 h 5 min");
    }
}
