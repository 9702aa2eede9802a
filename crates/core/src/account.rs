//! The organisation's plan and what it has used of it (the app's usage page): plan and
//! features, count limits (used of limit, counted as [`crate::limits`] counts them),
//! this billing period's allowances, the wallet and its latest ledger entries, and each
//! request-quota window with what remains (from [`crate::rate::Limiter::peek`]). Read-only.

use tern_domain::plan::{
    self, Category, Effective, Entitlement, Feature, Meter, Overrides, RateWindow,
    SubscriptionStatus,
};
use tern_domain::quota::{self, WindowState};
use tern_store::{Counted, KeyRow, LedgerEntry, Org};

use crate::{Core, Result};

/// Ledger entries shown.
pub const LEDGER_ENTRIES: i64 = 20;

/// A count limit: rows the organisation has, and the plan's limit (`None`: unlimited).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CountLimit {
    pub entitlement: Entitlement,
    pub used: i64,
    pub limit: Option<u64>,
}

/// A period allowance: units used this billing period, and the allowance (`None`: none).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Allowance {
    pub meter: Meter,
    pub used: i64,
    pub allowance: Option<u64>,
}

/// The quota windows of one active key (the key's own windows).
#[derive(Debug, Clone)]
pub struct KeyWindows {
    pub key: KeyRow,
    pub windows: Vec<WindowState>,
}

/// The request quotas as they stand.
#[derive(Debug, Clone)]
pub struct Quotas {
    /// The organisation's windows (shared by every key).
    pub tenant: Vec<WindowState>,
    /// Each active key's windows.
    pub keys: Vec<KeyWindows>,
    /// Requests per second per key of the burst limiter, when set.
    pub burst: Option<u64>,
}

/// What the usage page shows.
#[derive(Debug, Clone)]
pub struct Usage {
    /// The plan in effect (an unknown stored name falls back to the free plan).
    pub plan: &'static str,
    pub subscription_status: SubscriptionStatus,
    pub features: Vec<(Feature, bool)>,
    pub limits: Vec<CountLimit>,
    /// The billing period: [start, end) epoch ms.
    pub period: (i64, i64),
    pub allowances: Vec<Allowance>,
    pub wallet_balance_minor: i64,
    pub wallet_currency: String,
    /// The price of a template message per category (0: billing off).
    pub prices_minor: Vec<(Category, i64)>,
    /// Newest first, at most [`LEDGER_ENTRIES`].
    pub ledger: Vec<LedgerEntry>,
    /// `None` when the server runs without quotas (`TERN_RATE_LIMITS=off`).
    pub quotas: Option<Quotas>,
}

fn counted(e: Entitlement) -> Counted {
    match e {
        Entitlement::Contacts => Counted::Contacts,
        Entitlement::Templates => Counted::Templates,
        Entitlement::PhoneNumbers => Counted::PhoneNumbers,
        Entitlement::ApiKeys => Counted::ActiveApiKeys,
        Entitlement::WebhookSubscriptions => Counted::WebhookSubscriptions,
        Entitlement::Campaigns => Counted::Campaigns,
    }
}

/// The usage of `org` at `now`.
pub async fn usage(core: &Core, org: &Org, now: i64) -> Result<Usage> {
    let overrides = Overrides::from_json(&org.overrides);
    let eff = Effective::new(&org.plan, &overrides);
    let db = &core.db;
    let mut limits = Vec::with_capacity(Entitlement::ALL.len());
    for e in Entitlement::ALL {
        limits.push(CountLimit {
            entitlement: *e,
            used: db.count_rows(org.id, counted(*e)).await?,
            limit: eff.limit(*e),
        });
    }
    let period = plan::billing_period(org.billing_period_start, now);
    let mut allowances = Vec::with_capacity(Meter::ALL.len());
    for m in Meter::ALL {
        allowances.push(Allowance {
            meter: *m,
            used: db.usage_in_period(org.id, m.as_str(), period.0).await?,
            allowance: eff.allowance(*m),
        });
    }
    let ledger = db.list_wallet_ledger(org.id, LEDGER_ENTRIES).await?;
    let quotas = quotas(core, org, &eff).await?;
    Ok(Usage {
        plan: eff.plan.name,
        subscription_status: org.subscription_status,
        features: Feature::ALL
            .iter()
            .map(|f| (*f, eff.has_feature(*f)))
            .collect(),
        limits,
        period,
        allowances,
        wallet_balance_minor: org.wallet_balance_minor,
        wallet_currency: org.wallet_currency.clone(),
        prices_minor: Category::ALL
            .iter()
            .map(|c| (*c, eff.price_minor(*c)))
            .collect(),
        ledger,
        quotas,
    })
}

/// The windows of the organisation and of each of its active keys.
async fn quotas(core: &Core, org: &Org, eff: &Effective<'_>) -> Result<Option<Quotas>> {
    let windows = quota::windows(eff);
    let (tenant_w, key_w): (Vec<_>, Vec<_>) = windows
        .into_iter()
        .partition(|(w, _)| quota::scope(*w) == "tenant");
    // The tenant windows do not depend on the key: any id reads them.
    let Some(tenant) = core.limiter.peek(org.id, org.id, &tenant_w).await else {
        return Ok(None);
    };
    let mut keys = Vec::new();
    for key in crate::keys::list(&core.db, org.id).await? {
        if key.key.revoked_at.is_some() {
            continue;
        }
        let windows = core
            .limiter
            .peek(org.id, key.key.id, &key_w)
            .await
            .unwrap_or_default();
        keys.push(KeyWindows { key, windows });
    }
    Ok(Some(Quotas {
        tenant,
        keys,
        burst: eff.burst(),
    }))
}

/// Whether `w` is counted per key (else per organisation).
pub fn per_key(w: RateWindow) -> bool {
    quota::scope(w) == "key"
}
