//! The campaign worker's steps: launch a due scheduled campaign, and for a running one end
//! the rest at `expires_at`, pause on the error threshold, complete it when every recipient
//! has an outcome, and fan out the next batch of pending recipients into messages.
//!
//! Exactly once: a recipient's message is accepted with the idempotency key
//! `campaign/<campaign>/<contact>` (a `/` no API key can hold) through the store's acceptance
//! (`Db::accept_messages`, the path of POST /messages: key, charges, message and dispatch
//! queue in one transaction). A second attempt for the same recipient (a crash between the
//! acceptance and marking the recipient, a second process) finds the key bound and only
//! marks the recipient with the message that exists. The key outlives any campaign.
//!
//! Pacing: the batch tops the campaign's queued messages up to about two seconds of the
//! number's throughput, so the dispatcher always has the next ones; the dispatcher paces
//! them, claims API sends first (the priority lane) and leaves a paused campaign's queued
//! messages where they are.
//!
//! Queued is not sent: the send checks run while any message is queued, so a template
//! paused, a number disconnected, a subscription restricted or the feature switched off
//! pauses the campaign (and so holds its queue) even when every recipient was messaged; at
//! `expires_at` the messages still in the queue end (`campaign_expired`, recipient
//! `expired`) through the status writer.

use tern_domain::campaign::{self, Params, PauseReason, SkipReason, Status};
use tern_domain::error::ConflictReason;
use tern_domain::plan::Overrides;
use tern_domain::send::{self, Addressee, Kind};
use tern_domain::{new_id, template};
use tern_store::{Accept, Acceptance, Campaign, Org};
use uuid::Uuid;

use super::{Refusal, change, launchable, pause, resolve, rest_covered, sendable};
use crate::messages::send::{Outbound, outbound_message, template_content};
use crate::messages::status;
use crate::{Core, Principal, Result};

/// How long a recipient's idempotency key is kept: longer than any campaign runs.
const KEY_TTL_MS: i64 = 400 * 24 * 60 * 60 * 1000;
/// The most messages one step accepts.
pub const MAX_BATCH: i64 = 1_000;
/// Seconds of the number's pace kept queued ahead of the dispatcher: enough that a slow step
/// (a busy database) does not leave it idle. A paused campaign's queued messages wait in the
/// queue and API sends are claimed first, so a deeper queue delays neither.
const LOOKAHEAD_SECS: i64 = 2;
/// Outcomes looked at by the error threshold.
const THRESHOLD_WINDOW: i64 = 100;

/// What one step did.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Step {
    /// Messages accepted.
    pub accepted: usize,
    /// Recipients skipped at fan-out.
    pub skipped: usize,
    /// The campaign's status after the step.
    pub status: Option<Status>,
}

/// The organisation acting as the caller of its own campaign's sends.
fn principal(org: Org) -> Principal {
    Principal::system(org)
}

/// Works one scheduled or running campaign once.
pub async fn step(core: &Core, org_id: Uuid, id: Uuid, now: i64) -> Result<Step> {
    let Some(org) = core.db.get_org(org_id).await? else {
        return Ok(Step::default());
    };
    let p = principal(org);
    let mut c = super::get(core, org_id, id).await?;
    if c.status == Status::Scheduled && c.scheduled_at.is_some_and(|t| t <= now) {
        c = launch_due(core, &p, c, now).await?;
    }
    if c.expires_at.is_some_and(|t| t <= now)
        && matches!(c.status, Status::Running | Status::Paused)
    {
        return expire(core, &c, now).await;
    }
    if c.status != Status::Running {
        return Ok(Step {
            status: Some(c.status),
            ..Default::default()
        });
    }
    let counts = core.db.campaign_counts(id).await?;
    if counts.open() <= 0 {
        return complete(core, org_id, id, now).await;
    }
    if counts.failed >= 20 {
        let last = core.db.campaign_last_outcomes(id, THRESHOLD_WINDOW).await?;
        if campaign::error_threshold_reached(&last) {
            return paused(core, org_id, id, PauseReason::ErrorThreshold, now).await;
        }
    }
    // Checked while anything is still queued too, not only while recipients wait: a pause
    // holds the queued messages in the dispatch queue (the claim takes a campaign's messages
    // only while it runs).
    let (number, tpl, charges) = match sendable(core, &p, &c, now).await {
        Ok(s) => s,
        Err(refusal) => {
            return match refusal.pause {
                // The queued messages were paid for at acceptance: with nobody left to
                // message, a wallet or allowance that cannot pay for more stops nothing.
                Some(r) if counts.pending <= 0 && r.only_stops_new_messages() => Ok(running()),
                Some(r) => paused(core, org_id, id, r, now).await,
                None => Err(refusal.problem),
            };
        }
    };
    if counts.pending <= 0 {
        return Ok(running());
    }
    // A couple of seconds of the number's pace queued ahead of the dispatcher.
    let target = (number.throughput_mps * LOOKAHEAD_SECS).max(50);
    let room = (target - counts.queued).min(MAX_BATCH);
    if room <= 0 {
        return Ok(running());
    }
    let rows = core.db.pending_recipients(id, &number.id, room).await?;
    let params = Params::from_json(&c.params.0);
    let needs_phone = template::needs_phone_number(tpl.category, &tpl.components);
    let mut skips: Vec<(Uuid, SkipReason)> = Vec::new();
    let mut items: Vec<Accept> = Vec::with_capacity(rows.len());
    for r in rows {
        // The send's addressing rule (a contact who opted out after resolve is skipped here).
        let addressee = Addressee {
            wa_id: r.wa_id.as_deref(),
            user_id: r.user_id.as_deref(),
            consent: r.consent_status,
            blocked: r.blocked_at.is_some(),
        };
        let to = match send::address_template(&addressee, &c.template_name, needs_phone) {
            Ok(to) => to,
            Err(refusal) => {
                skips.push((r.contact_id, refusal.skip_reason()));
                continue;
            }
        };
        let (components, variables) = match &params {
            Params::Components(c) => (Some(c), None),
            Params::Variables(_) => (None, r.variables.as_ref().map(|v| v.0.as_slice())),
            Params::None => (None, None),
        };
        let content = template_content(
            (&c.template_name, &c.template_language),
            &tpl,
            components,
            variables.unwrap_or_default(),
            None,
        );
        let message = outbound_message(Outbound {
            org_id,
            number_id: &number.id,
            contact_id: r.contact_id,
            conversation_id: r.conversation_id.unwrap_or_else(new_id),
            to,
            kind: Kind::Template,
            content,
            template: Some((&c.template_name, &c.template_language)),
            text: None,
            media_id: None,
            context: None,
            reply_to: None,
            campaign_id: Some(id),
            now,
        });
        items.push(Accept {
            message,
            key: recipient_key(id, r.contact_id),
            fingerprint: id.as_bytes().to_vec(),
            key_expires_at: now + KEY_TTL_MS,
            charges: charges.clone(),
            new_contact: None,
            contact_limit: None,
            new_conversation: r.conversation_id.is_none(),
            api_key_id: None,
            request_id: None,
        });
    }
    let results = core.db.accept_messages(&mut items).await;
    let mut messaged: Vec<(Uuid, Uuid)> = Vec::with_capacity(items.len());
    let mut stop: Option<PauseReason> = None;
    let mut accepted = 0;
    for (item, result) in items.iter().zip(results) {
        match result {
            Ok(Acceptance::Accepted) => {
                accepted += 1;
                messaged.push((item.message.contact_id, item.message.id));
            }
            // Accepted before (a crash before the recipient was marked, or another
            // process): that message is the recipient's one.
            Ok(Acceptance::KeyTaken(rec)) => {
                if let Some(m) = rec.message_id {
                    messaged.push((item.message.contact_id, m));
                }
            }
            Ok(Acceptance::WalletLow { .. }) => {
                stop.get_or_insert(PauseReason::WalletBalanceLow);
            }
            Ok(Acceptance::AllowanceUsed { .. }) => {
                stop.get_or_insert(PauseReason::UsageLimitReached);
            }
            Ok(Acceptance::ContactLimit { .. }) => {}
            Err(e) => {
                tracing::warn!(campaign = %id, error = %e, "campaign message not accepted; retried")
            }
        }
    }
    let mut tx = core.db.begin().await?;
    tx.mark_recipients_messaged(id, &messaged, now).await?;
    skips.sort_by_key(|s| s.1);
    for group in skips.chunk_by(|a, b| a.1 == b.1) {
        let ids: Vec<Uuid> = group.iter().map(|s| s.0).collect();
        tx.skip_recipients(id, &ids, group[0].1, now).await?;
    }
    tx.commit().await?;
    // The store woke the dispatcher when the acceptances committed.
    if accepted > 0 {
        metrics::counter!("tern_campaign_messages_total").increment(accepted as u64);
    }
    let mut step = Step {
        accepted,
        skipped: skips.len(),
        status: Some(Status::Running),
    };
    if let Some(r) = stop {
        step.status = paused(core, org_id, id, r, now).await?.status;
    }
    Ok(step)
}

/// A running or paused campaign past its `expires_at`: recipients not yet messaged end
/// `expired`, and so do those whose message still waits in the dispatch queue (the status
/// writer fails it as `campaign_expired`); the campaign completes once the sends already
/// claimed have their outcome.
async fn expire(core: &Core, c: &Campaign, now: i64) -> Result<Step> {
    let counts = core.db.campaign_counts(c.id).await?;
    let mut ended = 0;
    if counts.pending > 0 {
        let mut tx = core.db.begin().await?;
        ended += tx.expire_recipients(c.id, now).await?;
        tx.commit().await?;
    }
    if counts.queued > 0 {
        let failure = crate::messages::failure::campaign_expired();
        loop {
            let n = status::expire_campaign_queue(
                &core.db,
                c.org_id,
                c.id,
                &c.phone_number_id,
                &failure,
                now,
                MAX_BATCH,
            )
            .await?;
            ended += n as i64;
            if (n as i64) < MAX_BATCH {
                break;
            }
        }
    }
    if ended > 0 {
        tracing::info!(campaign = %c.id, expired = ended, "campaign expired");
    }
    if core.db.campaign_counts(c.id).await?.open() > 0 {
        return Ok(Step {
            status: Some(c.status),
            ..Default::default()
        });
    }
    complete(core, c.org_id, c.id, now).await
}

/// Every recipient has an outcome: the running (or expired paused) campaign completes.
async fn complete(core: &Core, org_id: Uuid, id: Uuid, now: i64) -> Result<Step> {
    let c = change(core, org_id, id, None, now, |c| {
        if matches!(c.status, Status::Running | Status::Paused) {
            c.status = Status::Completed;
            c.pause_reason = None;
            c.completed_at = Some(now);
        }
        Ok(())
    })
    .await?;
    Ok(Step {
        status: Some(c.status),
        ..Default::default()
    })
}

/// The idempotency key of a recipient's message.
pub fn recipient_key(campaign_id: Uuid, contact_id: Uuid) -> String {
    format!("campaign/{campaign_id}/{contact_id}")
}

fn running() -> Step {
    Step {
        status: Some(Status::Running),
        ..Default::default()
    }
}

async fn paused(core: &Core, org_id: Uuid, id: Uuid, r: PauseReason, now: i64) -> Result<Step> {
    tracing::warn!(campaign = %id, reason = r.as_str(), "campaign paused");
    let c = pause(core, org_id, id, r, now).await?;
    Ok(Step {
        status: Some(c.status),
        ..Default::default()
    })
}

/// A scheduled campaign whose time came: launched as `POST …/launch` would (resolved first
/// if it was not, then the wallet checked against the estimate); when a check refuses,
/// paused with the matching reason.
async fn launch_due(core: &Core, p: &Principal, c: Campaign, now: i64) -> Result<Campaign> {
    let (org_id, id) = (c.org_id, c.id);
    let category = match launchable(core, p, &c, now).await {
        Ok(category) => category,
        Err(refusal) => return not_launched(core, &c, refusal, now).await,
    };
    if c.resolved_at.is_none() {
        match resolve(core, p, id, true, now).await {
            Ok(_) => {}
            Err(p) if p.is_conflict(ConflictReason::AudienceEmpty) => {
                // Nothing to send: the campaign is done.
                return change(core, org_id, id, None, now, |c| {
                    c.status = Status::Completed;
                    c.launched_at = Some(now);
                    c.completed_at = Some(now);
                    c.recipient_count = Some(0);
                    Ok(())
                })
                .await;
            }
            Err(p) => return Err(p),
        }
    }
    let estimate = match rest_covered(core, p, id, category).await {
        Ok(e) => e,
        Err(refusal) => return not_launched(core, &c, refusal, now).await,
    };
    change(core, org_id, id, None, now, |c| {
        if c.status == Status::Scheduled {
            c.status = Status::Running;
            c.launched_at = Some(now);
            c.estimated_cost_minor = Some(estimate);
        }
        Ok(())
    })
    .await
}

/// A scheduled campaign a launch check refused: paused with the check's reason (nobody is
/// there to read the answer).
async fn not_launched(core: &Core, c: &Campaign, refusal: Refusal, now: i64) -> Result<Campaign> {
    let reason = refusal.pause.unwrap_or(PauseReason::TemplateNotApproved);
    tracing::warn!(campaign = %c.id, reason = reason.as_str(), "scheduled campaign could not launch");
    change(core, c.org_id, c.id, None, now, |c| {
        if c.status == Status::Scheduled {
            c.status = Status::Paused;
            c.pause_reason = Some(reason);
            c.paused_at = Some(now);
            c.launched_at = Some(now);
        }
        Ok(())
    })
    .await
}

impl Principal {
    /// The organisation itself, for work it asked for earlier (a campaign's sends): its plan
    /// and billing state, every permission.
    pub fn system(org: Org) -> Principal {
        Principal {
            org_id: org.id,
            mode: if org.is_test_space() {
                tern_domain::auth::Mode::Test
            } else {
                tern_domain::auth::Mode::Live
            },
            key_id: Uuid::nil(),
            role: tern_domain::auth::Role::Owner,
            permissions: tern_domain::auth::Permission::ALL.to_vec(),
            overrides: Overrides::from_json(&org.overrides),
            org,
            // Work the organisation asked for is audited when it is asked for, not here.
            actor: crate::audit::Actor::Operator,
            address: None,
        }
    }
}
