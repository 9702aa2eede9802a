//! Campaigns (DESIGN.md "Campaigns"): create, resolve the audience into recipients,
//! schedule, launch, pause, resume, and the worker's steps ([`fanout`]). Every status change
//! goes through [`change`] (one writer: the campaign row is locked, the domain's rule
//! decides, the `campaign.status` event joins the transaction).

pub mod fanout;
pub mod view;

use tern_domain::campaign::{
    self, Action, NewCampaign, Params, PauseReason, ReasonKind, SkipReason, Status,
};
use tern_domain::error::ConflictReason;
use tern_domain::events::EventType;
use tern_domain::plan::{Category, Entitlement, Feature};
use tern_domain::send::{self, Addressee, Kind};
use tern_domain::{Problem, new_id, template};
use tern_store::{Campaign, NewRecipient, PhoneNumber, Template};
use uuid::Uuid;

use crate::messages::send::{
    BillingRefusal, billing, choose_number, not_connected, price_minor, template_not_approved,
    wallet_covers,
};
use crate::{Core, Principal, Result, events, numbers};

/// Creates a `draft` campaign (`POST /campaigns`).
pub async fn create(
    core: &Core,
    p: &Principal,
    body: &serde_json::Value,
    now: i64,
) -> Result<Campaign> {
    p.require_feature(Feature::Campaigns)?;
    let new: NewCampaign = campaign::parse_create(body, now)?;
    let numbers = core.db.list_phone_numbers(p.org_id, None, 100).await?;
    let refs: Vec<&PhoneNumber> = numbers.iter().collect();
    let number = &numbers[choose_number(&refs, new.sender.as_ref())?];
    let c = Campaign {
        id: new_id(),
        org_id: p.org_id,
        name: new.name,
        status: Status::Draft,
        template_name: new.template_name,
        template_language: new.template_language,
        phone_number_id: number.id.clone(),
        audience: sqlx_json(new.audience.to_json()),
        params: sqlx_json(new.params.to_json()),
        scheduled_at: None,
        expires_at: new.expires_at,
        recipient_count: None,
        pause_reason: None,
        resolved_at: None,
        launched_at: None,
        paused_at: None,
        completed_at: None,
        created_at: now,
        updated_at: now,
        estimated_cost_minor: None,
    };
    let mut tx = core.db.begin().await?;
    crate::limits::check_one_more(&mut tx, p.org_id, &p.effective(), Entitlement::Campaigns)
        .await?;
    tx.insert_campaign(&c).await?;
    tx.commit().await?;
    Ok(c)
}

fn sqlx_json(v: serde_json::Value) -> tern_store::Json<serde_json::Value> {
    tern_store::Json(v)
}

/// The organisation's campaign, or 404.
pub async fn get(core: &Core, org_id: Uuid, id: Uuid) -> Result<Campaign> {
    core.db.get_campaign(org_id, id).await?.ok_or_else(|| {
        Problem::not_found().with_message("No campaign with this id in the organisation.")
    })
}

/// A page of the organisation's campaigns, newest first, each with its counts (the app's
/// list; the API's does the same).
pub async fn list(
    core: &Core,
    org_id: Uuid,
    after: Option<(i64, Uuid)>,
    limit: i64,
) -> Result<Vec<(Campaign, tern_store::CampaignCounts)>> {
    let rows = core.db.list_campaigns(org_id, None, after, limit).await?;
    let mut out = Vec::with_capacity(rows.len());
    for c in rows {
        let counts = core.db.campaign_counts(c.id).await?;
        out.push((c, counts));
    }
    Ok(out)
}

/// The campaign as the API shows it (with its counts).
pub async fn show(core: &Core, c: &Campaign) -> Result<view::Campaign> {
    let counts = core.db.campaign_counts(c.id).await?;
    Ok(view::Campaign::new(c, counts))
}

/// `GET /campaigns/{id}/progress`.
pub async fn progress(core: &Core, org_id: Uuid, id: Uuid) -> Result<view::Progress> {
    let c = get(core, org_id, id).await?;
    let counts = core.db.campaign_counts(id).await?;
    let mut skipped_reasons = std::collections::BTreeMap::new();
    let mut failure_codes = std::collections::BTreeMap::new();
    for (kind, reason, n) in core.db.campaign_reasons(id).await? {
        match kind {
            ReasonKind::Skipped => skipped_reasons.insert(reason, n),
            ReasonKind::Failed => failure_codes.insert(reason, n),
        };
    }
    Ok(view::Progress {
        campaign_id: id.to_string(),
        status: c.status.as_str().to_string(),
        counts: counts.into(),
        skipped_reasons,
        failure_codes,
        updated_at: tern_domain::time::format_ms(tern_domain::time::now_ms().max(c.updated_at)),
    })
}

/// Runs `f` on the locked campaign and writes what it left, with a `campaign.status` event
/// when the status changed. `action`: refuse with `invalid_campaign_state` unless the
/// campaign's status allows it. The one writer of a campaign's row.
pub(crate) async fn change(
    core: &Core,
    org_id: Uuid,
    id: Uuid,
    action: Option<Action>,
    now: i64,
    f: impl FnOnce(&mut Campaign) -> Result<()>,
) -> Result<Campaign> {
    let mut tx = core.db.begin().await?;
    let mut c = tx
        .lock_campaign(org_id, id)
        .await?
        .ok_or_else(Problem::not_found)?;
    if let Some(a) = action
        && !c.status.allows(a)
    {
        return Err(campaign::invalid_state(c.status, a));
    }
    let before = c.status;
    f(&mut c)?;
    c.updated_at = if now > c.updated_at {
        now
    } else {
        c.updated_at + 1
    };
    tx.save_campaign(&c).await?;
    if c.status != before {
        let counts = tx.campaign_counts(id).await?;
        events::emit(&mut tx, org_id, EventType::CampaignStatus, || {
            view::Campaign::new(&c, counts)
        })
        .await?;
        metrics::counter!("tern_campaign_status_total", "status" => c.status.as_str()).increment(1);
    }
    tx.commit().await?;
    Ok(c)
}

/// `POST /campaigns/{id}/<action>`.
pub async fn act(
    core: &Core,
    p: &Principal,
    id: Uuid,
    action: Action,
    body: &serde_json::Value,
    now: i64,
) -> Result<Campaign> {
    p.require_feature(Feature::Campaigns)?;
    let c = get(core, p.org_id, id).await?;
    if !c.status.allows(action) {
        return Err(campaign::invalid_state(c.status, action));
    }
    match action {
        Action::Resolve => resolve(core, p, id, false, now).await,
        Action::Schedule => {
            let s = campaign::parse_schedule(body, now)?;
            change(core, p.org_id, id, Some(action), now, |c| {
                c.scheduled_at = s.scheduled_at;
                if let Some(e) = s.expires_at {
                    c.expires_at = e;
                }
                c.status = match (s.scheduled_at, c.resolved_at) {
                    (Some(_), _) => Status::Scheduled,
                    (None, Some(_)) => Status::Ready,
                    (None, None) => Status::Draft,
                };
                Ok(())
            })
            .await
        }
        Action::Launch => {
            let category = launchable(core, p, &c, now).await?;
            if c.resolved_at.is_none() {
                resolve(core, p, id, true, now).await?;
            }
            // Refused for the wallet, the campaign stays as resolve left it (`ready`).
            let estimate = rest_covered(core, p, id, category).await?;
            change(core, p.org_id, id, Some(action), now, |c| {
                c.status = Status::Running;
                c.launched_at = Some(now);
                c.estimated_cost_minor = Some(estimate);
                Ok(())
            })
            .await
        }
        Action::Pause => pause(core, p.org_id, id, PauseReason::Manual, now).await,
        Action::Resume => {
            let category = launchable(core, p, &c, now).await?;
            rest_covered(core, p, id, category).await?;
            change(core, p.org_id, id, Some(action), now, |c| {
                c.status = Status::Running;
                c.pause_reason = None;
                c.paused_at = None;
                Ok(())
            })
            .await
        }
    }
}

/// Pauses a running campaign with `reason`.
pub async fn pause(
    core: &Core,
    org_id: Uuid,
    id: Uuid,
    reason: PauseReason,
    now: i64,
) -> Result<Campaign> {
    change(core, org_id, id, Some(Action::Pause), now, |c| {
        c.status = Status::Paused;
        c.pause_reason = Some(reason);
        c.paused_at = Some(now);
        Ok(())
    })
    .await
}

/// Why a campaign cannot send now: the answer for a person (launch, resume) and, for the
/// worker, the pause it calls for. Each check names its pause where it refuses, so nothing
/// reads a reason back out of the answer.
#[derive(Debug)]
pub(crate) struct Refusal {
    pub problem: Problem,
    /// `None`: not a state a pause waits out (the database failed).
    pub pause: Option<PauseReason>,
}

impl Refusal {
    fn new(pause: PauseReason) -> impl FnOnce(Problem) -> Refusal {
        move |problem| Refusal {
            problem,
            pause: Some(pause),
        }
    }
}

impl From<Problem> for Refusal {
    fn from(problem: Problem) -> Self {
        Refusal {
            problem,
            pause: None,
        }
    }
}

impl From<Refusal> for Problem {
    fn from(r: Refusal) -> Self {
        r.problem
    }
}

/// What a template send of this campaign checks (each fan-out batch): the plan's
/// `campaigns` feature, the number can send, the template is approved for the number's
/// WABA and takes these parameters, the subscription and the wallet allow a send. Returns
/// the number, the template and a message's charges.
pub(crate) async fn sendable(
    core: &Core,
    p: &Principal,
    c: &Campaign,
    now: i64,
) -> std::result::Result<(PhoneNumber, Template, tern_store::Charges), Refusal> {
    let (number, tpl) = can_send(core, p, c).await?;
    let charges = billing(p, Kind::Template, Some(tpl.category), now).map_err(billing_refusal)?;
    Ok((number, tpl, charges))
}

/// [`sendable`]'s checks for launch and resume, which check the wallet against the
/// recipients left instead of one message ([`rest_covered`], once the recipients are
/// known). Returns the template's category.
pub(crate) async fn launchable(
    core: &Core,
    p: &Principal,
    c: &Campaign,
    now: i64,
) -> std::result::Result<Category, Refusal> {
    let (_, tpl) = can_send(core, p, c).await?;
    match billing(p, Kind::Template, Some(tpl.category), now) {
        Ok(_) | Err(BillingRefusal::Wallet { .. }) => Ok(tpl.category),
        Err(r) => Err(billing_refusal(r)),
    }
}

fn billing_refusal(r: BillingRefusal) -> Refusal {
    let pause = match &r {
        BillingRefusal::Feature(_) => PauseReason::PlanFeatureUnavailable,
        BillingRefusal::Subscription(_) => PauseReason::SubscriptionRestricted,
        BillingRefusal::Wallet { .. } => PauseReason::WalletBalanceLow,
    };
    Refusal::new(pause)(r.into())
}

/// The checks of a send before billing: the plan's `campaigns` feature, the number, the
/// template and its parameters.
async fn can_send(
    core: &Core,
    p: &Principal,
    c: &Campaign,
) -> std::result::Result<(PhoneNumber, Template), Refusal> {
    p.require_feature(Feature::Campaigns)
        .map_err(Refusal::new(PauseReason::PlanFeatureUnavailable))?;
    let refuse_number =
        |id: &str| Refusal::new(PauseReason::PhoneNumberNotConnected)(not_connected(id));
    let number = core
        .db
        .get_phone_number(&c.phone_number_id)
        .await
        .map_err(Problem::from)?
        .filter(|n| n.org_id == c.org_id)
        .ok_or_else(|| refuse_number(&c.phone_number_id))?;
    if !numbers::can_send(&number) {
        return Err(refuse_number(&number.id));
    }
    let tpl = core
        .db
        .find_approved_template(
            c.org_id,
            &number.waba_id,
            &c.template_name,
            &c.template_language,
        )
        .await
        .map_err(Problem::from)?
        .ok_or_else(|| {
            Refusal::new(PauseReason::TemplateNotApproved)(template_not_approved(
                &c.template_name,
                &c.template_language,
            ))
        })?;
    let (vars, components) = match Params::from_json(&c.params.0) {
        Params::None => (None, None),
        // A contact's value stands in as a placeholder: the shape is what is checked here.
        Params::Variables(v) => (
            Some(
                v.iter()
                    .map(|v| match v {
                        campaign::Variable::Literal(s) => s.clone(),
                        campaign::Variable::Field { .. } => "x".to_string(),
                    })
                    .collect::<Vec<_>>(),
            ),
            None,
        ),
        Params::Components(c) => (None, Some(c)),
    };
    template::check_send(&tpl.components, vars.as_deref(), components.as_ref(), None)
        .map_err(|r| Refusal::new(PauseReason::TemplateNotApproved)(r.into_problem()))?;
    Ok((number, tpl))
}

/// What messaging `recipients` costs at the caller's price for `category` (minor units; 0
/// when billing is off for it or the campaign is the test space's).
pub(crate) fn estimate(p: &Principal, category: Category, recipients: i64) -> i64 {
    price_minor(p, category).saturating_mul(recipients.max(0))
}

/// Launch and resume: the wallet must cover the recipients left (not yet messaged; queued
/// messages were paid for at acceptance) at the template's price, else `402
/// wallet_balance_low` with that estimate as `required_minor` and the template's category
/// as `wallet_category`. Returns the estimate.
pub(crate) async fn rest_covered(
    core: &Core,
    p: &Principal,
    id: Uuid,
    category: Category,
) -> std::result::Result<i64, Refusal> {
    let pending = core
        .db
        .campaign_counts(id)
        .await
        .map_err(Problem::from)?
        .pending;
    let required = estimate(p, category, pending);
    wallet_covers(p, required, Some(category))
        .map_err(|r| Refusal::new(PauseReason::WalletBalanceLow)(r.into()))?;
    Ok(required)
}

/// Snapshots the audience into recipients (`draft` | `ready` → `ready`): one read of the
/// audience, variables filled per contact, opted-out contacts and those whose values break
/// the rules skipped with a reason, written with multi-row inserts in one transaction.
/// `for_launch`: also from `scheduled` (a launch resolves first when it was not). The
/// campaign's `estimated_cost_minor` is the recipients not skipped at `p`'s price for the
/// template's category (`None` while no template is approved: its category is not final).
pub async fn resolve(
    core: &Core,
    p: &Principal,
    id: Uuid,
    for_launch: bool,
    now: i64,
) -> Result<Campaign> {
    let org_id = p.org_id;
    let c = get(core, org_id, id).await?;
    let Some(spec) = campaign::AudienceSpec::from_json(&c.audience.0) else {
        return Err(Problem::unavailable());
    };
    let contacts = core.db.audience_contacts(org_id, &spec).await?;
    if contacts.is_empty() {
        return Err(Problem::conflict(ConflictReason::AudienceEmpty)
            .with_message("The audience matches no contact."));
    }
    let params = Params::from_json(&c.params.0);
    // The template, if approved already: whether it needs a phone number (BSUID-only
    // contacts are skipped then), and its category (the estimate's price).
    let number = core.db.get_phone_number(&c.phone_number_id).await?;
    let tpl = match &number {
        Some(n) => {
            core.db
                .find_approved_template(org_id, &n.waba_id, &c.template_name, &c.template_language)
                .await?
        }
        None => None,
    };
    let needs_phone = tpl
        .as_ref()
        .is_some_and(|t| template::needs_phone_number(t.category, &t.components));
    let recipients: Vec<NewRecipient> = contacts
        .iter()
        .map(|ct| {
            let mut r = NewRecipient {
                contact_id: ct.id,
                skipped: None,
                variables: None,
            };
            // The send's addressing rule: the first refusal is the skip reason.
            let addressee = Addressee {
                wa_id: ct.wa_id.as_deref(),
                user_id: ct.user_id.as_deref(),
                consent: ct.consent_status,
                blocked: ct.blocked_at.is_some(),
            };
            let skip = send::address_template(&addressee, &c.template_name, needs_phone)
                .err()
                .map(|r| r.skip_reason());
            if let Params::Variables(vars) = &params {
                let values = campaign::ContactValues {
                    name: ct.name.as_deref(),
                    wa_id: ct.wa_id.as_deref(),
                    custom_fields: &ct.custom_fields.0,
                };
                match campaign::fill(vars, values) {
                    Some(v) => r.variables = Some(v),
                    None if skip.is_none() => r.skipped = Some(SkipReason::VariableInvalid),
                    None => {}
                }
            }
            if let Some(s) = skip {
                r.skipped = Some(s);
            }
            r
        })
        .collect();
    let mut tx = core.db.begin().await?;
    let Some(mut locked) = tx.lock_campaign(org_id, id).await? else {
        return Err(Problem::not_found());
    };
    let allowed = locked.status.allows(Action::Resolve)
        || (for_launch && locked.status.allows(Action::Launch));
    if !allowed {
        return Err(campaign::invalid_state(locked.status, Action::Resolve));
    }
    tx.replace_recipients(id, &recipients, now).await?;
    let pending = recipients.iter().filter(|r| r.skipped.is_none()).count() as i64;
    locked.estimated_cost_minor = tpl.map(|t| estimate(p, t.category, pending));
    let before = locked.status;
    locked.status = if locked.status == Status::Draft {
        Status::Ready
    } else {
        locked.status
    };
    locked.recipient_count = Some(recipients.len() as i64);
    locked.resolved_at = Some(now);
    locked.updated_at = if now > locked.updated_at {
        now
    } else {
        locked.updated_at + 1
    };
    tx.save_campaign(&locked).await?;
    if locked.status != before {
        let counts = tern_store::CampaignCounts {
            pending,
            skipped: recipients.len() as i64 - pending,
            ..Default::default()
        };
        events::emit(&mut tx, org_id, EventType::CampaignStatus, || {
            view::Campaign::new(&locked, counts)
        })
        .await?;
    }
    tx.commit().await?;
    Ok(locked)
}
