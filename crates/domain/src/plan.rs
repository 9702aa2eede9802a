//! Plans and per-organisation billing settings.
//!
//! An organisation has a plan name plus overrides set by an operator. The effective
//! settings are the plan's defaults with the overrides laid on top, so changing the plan
//! keeps deliberate per-organisation exceptions.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

use crate::names::name_enum;

name_enum!(
    /// Features a plan may include.
    Feature { PublicApi = "public_api", Media = "media", Campaigns = "campaigns" }
);
name_enum!(
    /// Count limits of a plan.
    Entitlement {
        ApiKeys = "api_keys",
        PhoneNumbers = "phone_numbers",
        Contacts = "contacts",
        Templates = "templates",
        WebhookSubscriptions = "webhook_subscriptions",
        Campaigns = "campaigns",
    }
);
name_enum!(
    /// Per-billing-period allowances.
    Meter { ApiRequests = "api_requests", MessagesSent = "messages_sent" }
);
name_enum!(
    /// Fixed request-quota windows.
    RateWindow {
        KeyMinute = "key-minute",
        KeyDay = "key-day",
        TenantMinute = "tenant-minute",
        TenantDay = "tenant-day",
    }
);
name_enum!(
    /// Template categories, each with a price.
    Category { Marketing = "marketing", Utility = "utility", Authentication = "authentication" }
);
name_enum!(
    SubscriptionStatus {
        Active = "active",
        PastDue = "past_due",
        Restricted = "restricted",
        Cancelled = "cancelled",
    }
);

impl RateWindow {
    pub fn seconds(self) -> u64 {
        match self {
            RateWindow::KeyMinute | RateWindow::TenantMinute => 60,
            RateWindow::KeyDay | RateWindow::TenantDay => 86_400,
        }
    }
}

/// A plan's defaults. `None` as a limit means unlimited.
#[derive(Debug, Clone)]
pub struct PlanDefaults {
    pub name: &'static str,
    pub features: &'static [Feature],
    pub limits: &'static [(Entitlement, Option<u64>)],
    pub allowances: &'static [(Meter, Option<u64>)],
    pub rate_limits: &'static [(RateWindow, u64)],
    pub prices_minor: &'static [(Category, i64)],
}

use Category::*;
use Entitlement as E;
use Feature::*;
use Meter::*;
use RateWindow::*;

/// Billing is opt-in for self-hosters: every category costs 0 (no wallet check) until the
/// operator sets a price (`tern admin org update --price marketing=80`).
const PRICES: &[(Category, i64)] = &[(Marketing, 0), (Utility, 0), (Authentication, 0)];

/// The key of the burst limiter in the `rate_limits` overrides (`--rate-limit burst=N`).
pub const BURST: &str = "burst";

/// Plans in upgrade order: the first plan after the current one that has a feature is the
/// one suggested in `upgrade_plan`.
pub static PLANS: &[PlanDefaults] = &[
    PlanDefaults {
        name: "free",
        features: &[Media],
        limits: &[
            (E::ApiKeys, Some(2)),
            (E::PhoneNumbers, Some(1)),
            (E::Contacts, Some(500)),
            (E::Templates, Some(5)),
            (E::WebhookSubscriptions, Some(1)),
            (E::Campaigns, Some(0)),
        ],
        allowances: &[(ApiRequests, Some(10_000)), (MessagesSent, Some(1_000))],
        rate_limits: &[
            (KeyMinute, 60),
            (KeyDay, 10_000),
            (TenantMinute, 120),
            (TenantDay, 20_000),
        ],
        prices_minor: PRICES,
    },
    PlanDefaults {
        name: "starter",
        features: &[PublicApi, Media],
        limits: &[
            (E::ApiKeys, Some(10)),
            (E::PhoneNumbers, Some(2)),
            (E::Contacts, Some(10_000)),
            (E::Templates, Some(50)),
            (E::WebhookSubscriptions, Some(5)),
            (E::Campaigns, Some(0)),
        ],
        allowances: &[
            (ApiRequests, Some(1_000_000)),
            (MessagesSent, Some(100_000)),
        ],
        rate_limits: &[
            (KeyMinute, 600),
            (KeyDay, 200_000),
            (TenantMinute, 1_200),
            (TenantDay, 400_000),
        ],
        prices_minor: PRICES,
    },
    PlanDefaults {
        name: "growth",
        features: &[PublicApi, Media, Campaigns],
        limits: &[
            (E::ApiKeys, Some(50)),
            (E::PhoneNumbers, Some(10)),
            (E::Contacts, Some(250_000)),
            (E::Templates, Some(500)),
            (E::WebhookSubscriptions, Some(25)),
            (E::Campaigns, Some(1_000)),
        ],
        allowances: &[
            (ApiRequests, Some(20_000_000)),
            (MessagesSent, Some(2_000_000)),
        ],
        rate_limits: &[
            (KeyMinute, 6_000),
            (KeyDay, 2_000_000),
            (TenantMinute, 12_000),
            (TenantDay, 4_000_000),
        ],
        prices_minor: PRICES,
    },
    PlanDefaults {
        name: "enterprise",
        features: &[PublicApi, Media, Campaigns],
        limits: &[
            (E::ApiKeys, None),
            (E::PhoneNumbers, None),
            (E::Contacts, None),
            (E::Templates, None),
            (E::WebhookSubscriptions, None),
            (E::Campaigns, None),
        ],
        allowances: &[(ApiRequests, None), (MessagesSent, None)],
        rate_limits: &[
            (KeyMinute, 60_000),
            (KeyDay, 50_000_000),
            (TenantMinute, 120_000),
            (TenantDay, 100_000_000),
        ],
        prices_minor: PRICES,
    },
];

/// The plan given to an organisation created without `--plan`.
pub const DEFAULT_PLAN: &str = "growth";

pub fn plan(name: &str) -> Option<&'static PlanDefaults> {
    PLANS.iter().find(|p| p.name == name)
}

pub fn plan_names() -> String {
    PLANS.iter().map(|p| p.name).collect::<Vec<_>>().join(", ")
}

/// The cheapest plan after `current` that includes `feature`.
pub fn upgrade_plan_for(current: &str, feature: Feature) -> Option<&'static str> {
    let start = PLANS
        .iter()
        .position(|p| p.name == current)
        .map_or(0, |i| i + 1);
    PLANS[start..]
        .iter()
        .find(|p| p.features.contains(&feature))
        .map(|p| p.name)
}

/// Operator overrides, stored as JSON on the organisation. Absent keys fall back to the
/// plan. A limit or allowance of `null` in JSON cannot be expressed here on purpose: to make
/// something unlimited an operator moves the organisation to a plan without the limit.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct Overrides {
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub features: BTreeMap<String, bool>,
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub limits: BTreeMap<String, u64>,
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub allowances: BTreeMap<String, u64>,
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub rate_limits: BTreeMap<String, u64>,
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub prices_minor: BTreeMap<String, i64>,
}

impl Overrides {
    /// Tolerant read: a stored value that no longer parses counts as "no overrides" rather
    /// than locking the organisation out.
    pub fn from_json(v: &serde_json::Value) -> Overrides {
        serde_json::from_value(v.clone()).unwrap_or_default()
    }

    pub fn to_json(&self) -> serde_json::Value {
        serde_json::to_value(self).unwrap_or(serde_json::Value::Null)
    }
}

/// Plan defaults with overrides applied.
#[derive(Debug, Clone)]
pub struct Effective<'a> {
    pub plan: &'static PlanDefaults,
    pub overrides: &'a Overrides,
}

impl<'a> Effective<'a> {
    /// Unknown plan names (a plan retired from the code) fall back to the free plan, the
    /// safe choice.
    pub fn new(plan_name: &str, overrides: &'a Overrides) -> Self {
        Effective {
            plan: plan(plan_name).unwrap_or(&PLANS[0]),
            overrides,
        }
    }

    pub fn has_feature(&self, f: Feature) -> bool {
        self.overrides
            .features
            .get(f.as_str())
            .copied()
            .unwrap_or_else(|| self.plan.features.contains(&f))
    }

    pub fn limit(&self, e: Entitlement) -> Option<u64> {
        if let Some(v) = self.overrides.limits.get(e.as_str()) {
            return Some(*v);
        }
        self.plan
            .limits
            .iter()
            .find(|(k, _)| *k == e)
            .and_then(|(_, v)| *v)
    }

    /// Refuses one more item when `used` already reaches the plan's count limit.
    pub fn check_count(&self, e: Entitlement, used: i64) -> Result<(), crate::Problem> {
        match self.limit(e) {
            Some(limit) if used >= limit as i64 => {
                Err(crate::Problem::new(crate::ErrorCode::PlanLimitReached)
                    .with_message(format!(
                        "The plan allows {limit} {} and {used} are in use.",
                        e.as_str()
                    ))
                    .with_detail("entitlement", e.as_str())
                    .with_detail("limit", limit)
                    .with_detail("used", used))
            }
            _ => Ok(()),
        }
    }

    pub fn allowance(&self, m: Meter) -> Option<u64> {
        if let Some(v) = self.overrides.allowances.get(m.as_str()) {
            return Some(*v);
        }
        self.plan
            .allowances
            .iter()
            .find(|(k, _)| *k == m)
            .and_then(|(_, v)| *v)
    }

    pub fn rate_limit(&self, w: RateWindow) -> u64 {
        if let Some(v) = self.overrides.rate_limits.get(w.as_str()) {
            return *v;
        }
        self.plan
            .rate_limits
            .iter()
            .find(|(k, _)| *k == w)
            .map_or(0, |(_, v)| *v)
    }

    /// Requests per second per key with a burst of that many (GCRA), when the operator set
    /// one; no plan sets it, so there is no burst limiter by default.
    pub fn burst(&self) -> Option<u64> {
        self.overrides
            .rate_limits
            .get(BURST)
            .copied()
            .filter(|n| *n > 0)
    }

    pub fn price_minor(&self, c: Category) -> i64 {
        if let Some(v) = self.overrides.prices_minor.get(c.as_str()) {
            return *v;
        }
        self.plan
            .prices_minor
            .iter()
            .find(|(k, _)| *k == c)
            .map_or(0, |(_, v)| *v)
    }
}

/// `402 usage_limit_reached`: the meter's allowance for the billing period ending at
/// `period_end` (ms) is used up.
pub fn usage_limit_reached(m: Meter, used: i64, allowance: i64, period_end: i64) -> crate::Problem {
    crate::Problem::new(crate::ErrorCode::UsageLimitReached)
        .with_message(format!(
            "The plan's {} allowance of {allowance} for this billing period is used up.",
            m.as_str()
        ))
        .with_detail("meter", m.as_str())
        .with_detail("used", used)
        .with_detail("allowance", allowance)
        .with_detail("period_end", crate::time::format_ms(period_end))
}

/// Parses `NAME=VALUE` as given on the operator command line.
pub fn parse_assignment(s: &str) -> Option<(&str, &str)> {
    let (k, v) = s.split_once('=')?;
    let (k, v) = (k.trim(), v.trim());
    (!k.is_empty() && !v.is_empty()).then_some((k, v))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_plan_defines_every_setting() {
        for p in PLANS {
            for e in Entitlement::ALL {
                assert!(
                    p.limits.iter().any(|(k, _)| k == e),
                    "{} lacks {:?}",
                    p.name,
                    e
                );
            }
            for m in Meter::ALL {
                assert!(p.allowances.iter().any(|(k, _)| k == m));
            }
            for w in RateWindow::ALL {
                assert!(p.rate_limits.iter().any(|(k, _)| k == w));
            }
            for c in Category::ALL {
                assert!(p.prices_minor.iter().any(|(k, _)| k == c));
            }
        }
        assert!(plan(DEFAULT_PLAN).is_some());
    }

    #[test]
    fn overrides_win_over_plan() {
        let mut o = Overrides::default();
        let eff = Effective::new("free", &o);
        assert!(!eff.has_feature(Feature::PublicApi));
        assert_eq!(eff.limit(Entitlement::ApiKeys), Some(2));
        o.features.insert("public_api".into(), true);
        o.limits.insert("api_keys".into(), 7);
        o.rate_limits.insert("key-minute".into(), 5);
        o.prices_minor.insert("marketing".into(), 1);
        let eff = Effective::new("free", &o);
        assert!(eff.has_feature(Feature::PublicApi));
        assert_eq!(eff.limit(Entitlement::ApiKeys), Some(7));
        assert_eq!(eff.rate_limit(RateWindow::KeyMinute), 5);
        assert_eq!(eff.price_minor(Category::Marketing), 1);
        // Billing is opt-in: a price not set is 0.
        assert_eq!(eff.price_minor(Category::Utility), 0);
        assert_eq!(eff.burst(), None);
        o.rate_limits.insert(BURST.into(), 3);
        assert_eq!(Effective::new("free", &o).burst(), Some(3));
    }

    #[test]
    fn count_limits() {
        let mut o = Overrides::default();
        o.limits.insert("contacts".into(), 2);
        let eff = Effective::new("growth", &o);
        assert!(eff.check_count(Entitlement::Contacts, 1).is_ok());
        let p = eff.check_count(Entitlement::Contacts, 2).unwrap_err();
        assert_eq!(p.code, crate::ErrorCode::PlanLimitReached);
        assert_eq!(p.details["entitlement"], "contacts");
        assert_eq!(p.details["limit"], 2);
        assert_eq!(p.details["used"], 2);
        assert!(
            Effective::new("enterprise", &o)
                .check_count(Entitlement::Templates, 1_000_000)
                .is_ok()
        );
    }

    #[test]
    fn enterprise_is_unlimited() {
        let o = Overrides::default();
        let eff = Effective::new("enterprise", &o);
        assert_eq!(eff.limit(Entitlement::Contacts), None);
        assert_eq!(eff.allowance(Meter::MessagesSent), None);
    }

    #[test]
    fn upgrade_suggestion() {
        assert_eq!(
            upgrade_plan_for("free", Feature::PublicApi),
            Some("starter")
        );
        assert_eq!(
            upgrade_plan_for("starter", Feature::Campaigns),
            Some("growth")
        );
        assert_eq!(upgrade_plan_for("enterprise", Feature::Campaigns), None);
    }

    #[test]
    fn overrides_json_round_trip_and_tolerance() {
        let mut o = Overrides::default();
        o.allowances.insert("messages_sent".into(), 10);
        assert_eq!(Overrides::from_json(&o.to_json()), o);
        assert_eq!(
            Overrides::from_json(&serde_json::json!("garbage")),
            Overrides::default()
        );
        assert_eq!(
            Overrides::from_json(&serde_json::json!({})),
            Overrides::default()
        );
    }

    #[test]
    fn assignments() {
        assert_eq!(
            parse_assignment("key-minute=10"),
            Some(("key-minute", "10"))
        );
        assert_eq!(parse_assignment("x="), None);
        assert_eq!(parse_assignment("novalue"), None);
    }
}

/// The billing period containing `now`: whole calendar months counted from `anchor` (the
/// organisation's billing period start), the day clamped to short months (a period anchored
/// on the 31st runs to the 30th in April). Returns `(start, end)` in epoch ms, end exclusive.
pub fn billing_period(anchor: i64, now: i64) -> (i64, i64) {
    use time::OffsetDateTime;
    let Ok(a) = OffsetDateTime::from_unix_timestamp_nanos(i128::from(anchor) * 1_000_000) else {
        return (anchor, anchor);
    };
    let nth = |k: i64| -> i64 {
        let months = i64::from(a.year()) * 12 + i64::from(u8::from(a.month())) - 1 + k;
        let (year, month0) = (months.div_euclid(12), months.rem_euclid(12));
        let Ok(month) = time::Month::try_from(month0 as u8 + 1) else {
            return anchor;
        };
        let year = year as i32;
        let day = a.day().min(month.length(year));
        time::Date::from_calendar_date(year, month, day)
            .map(|d| {
                let t = d.with_time(a.time()).assume_utc();
                (t.unix_timestamp_nanos() / 1_000_000) as i64
            })
            .unwrap_or(anchor)
    };
    if now < anchor {
        return (anchor, nth(1));
    }
    // Months elapsed, then correct by one either way for day/time-of-month effects.
    let approx = (now - anchor) / (31 * 24 * 3_600_000);
    let mut k = approx.max(0);
    while nth(k + 1) <= now {
        k += 1;
    }
    while k > 0 && nth(k) > now {
        k -= 1;
    }
    (nth(k), nth(k + 1))
}

#[cfg(test)]
mod period_tests {
    use super::billing_period;
    use crate::time::parse_rfc3339_ms;

    fn t(s: &str) -> i64 {
        parse_rfc3339_ms(s).unwrap_or_default()
    }

    #[test]
    fn months_from_the_anchor() {
        let anchor = t("2026-01-31T10:00:00Z");
        assert_eq!(
            billing_period(anchor, anchor),
            (anchor, t("2026-02-28T10:00:00Z"))
        );
        assert_eq!(
            billing_period(anchor, t("2026-03-01T00:00:00Z")),
            (t("2026-02-28T10:00:00Z"), t("2026-03-31T10:00:00Z"))
        );
        assert_eq!(
            billing_period(anchor, t("2026-12-31T09:59:59Z")),
            (t("2026-11-30T10:00:00Z"), t("2026-12-31T10:00:00Z"))
        );
        assert_eq!(
            billing_period(anchor, t("2027-01-31T10:00:00Z")),
            (t("2027-01-31T10:00:00Z"), t("2027-02-28T10:00:00Z"))
        );
        // Before the anchor: the first period.
        assert_eq!(billing_period(anchor, anchor - 1).0, anchor);
    }
}
