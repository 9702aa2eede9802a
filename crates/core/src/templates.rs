//! Templates: creating a draft (within the plan's limit), submitting it for review,
//! applying the network's status updates, and syncing templates that exist on the network
//! but were not created through Tern (the network's own tools, another integration) or
//! whose status webhook was missed.

use std::collections::BTreeMap;

use tern_cloudapi::template_words;
use tern_cloudapi::{
    CloudApiClient, RetryClass, SendError, TemplateCategoryUpdate, TemplateInfo,
    TemplateStatusUpdate,
};
use tern_domain::Problem;
use tern_domain::crypto::MasterKey;
use tern_domain::error::ConflictReason;
use tern_domain::plan::Entitlement;
use tern_domain::template::{Category, TemplateStatus};
use tern_domain::{new_id, time::now_ms};
use tern_store::{Db, PhoneNumber, StoreError, Template};
use uuid::Uuid;

use crate::{Core, Principal, Result, limits, numbers};

/// At most this many pages per WABA and sync run (100 templates a page), a guard against a
/// network that keeps returning a next cursor.
const MAX_PAGES: usize = 100;

/// A validated draft for a WABA of the organisation.
pub struct NewTemplate {
    pub waba_id: String,
    pub name: String,
    pub language: String,
    pub category: Category,
    pub components: serde_json::Value,
}

/// Creates a draft, refused at the plan's template limit (checked atomically) or when the
/// WABA already has a template of this name and language.
pub async fn create(core: &Core, principal: &Principal, t: NewTemplate) -> Result<Template> {
    let now = now_ms();
    let template = Template {
        id: new_id(),
        org_id: principal.org_id,
        waba_id: t.waba_id,
        name: t.name,
        language: t.language,
        category: t.category,
        status: TemplateStatus::Draft,
        components: t.components,
        rejection_reason: None,
        network_id: None,
        created_at: now,
        updated_at: now,
    };
    let mut tx = core.db.begin().await?;
    limits::check_one_more(
        &mut tx,
        principal.org_id,
        &principal.effective(),
        Entitlement::Templates,
    )
    .await?;
    match tx.insert_template(&template).await {
        Ok(()) => {}
        Err(StoreError::Conflict { constraint }) if constraint != "templates_pkey" => {
            return Err(Problem::conflict(ConflictReason::TemplateExists)
                .with_message(format!(
                    "A template named {} in {} already exists for this WABA.",
                    template.name, template.language
                ))
                .with_detail("name", template.name)
                .with_detail("language", template.language)
                .with_detail("waba_id", template.waba_id));
        }
        Err(e) => return Err(e.into()),
    }
    tx.commit().await?;
    Ok(template)
}

/// Every number of the organisation, all pages.
pub async fn all_numbers(
    db: &Db,
    org_id: Uuid,
) -> std::result::Result<Vec<PhoneNumber>, StoreError> {
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

/// Submits a draft (or a rejected template) to the network for review; the template then
/// has the status the network gave (normally `pending`).
pub async fn submit(core: &Core, principal: &Principal, id: Uuid) -> Result<Template> {
    let t = core
        .db
        .get_template(principal.org_id, id)
        .await?
        .ok_or_else(Problem::not_found)?;
    if !t.status.can_submit() {
        return Err(Problem::conflict(ConflictReason::TemplateNotDraft)
            .with_message(format!(
                "Only draft or rejected templates can be submitted; this one is {}.",
                t.status
            ))
            .with_detail("status", t.status.as_str()));
    }
    let numbers = all_numbers(&core.db, principal.org_id).await?;
    let (number, token) =
        numbers::usable(&core.key, numbers.iter().filter(|n| n.waba_id == t.waba_id)).ok_or_else(
            || {
                Problem::conflict(ConflictReason::NoConnectedPhoneNumber)
                    .with_message("No connected number of the template's WABA can submit it.")
                    .with_detail("waba_id", t.waba_id.clone())
            },
        )?;
    let body = serde_json::json!({
        "name": t.name,
        "language": t.language,
        "category": template_words::category_word(t.category),
        "components": t.components,
    });
    let cloud = core.network_for(number).ok_or_else(|| {
        Problem::unavailable().with_message("The test network is not running in this process.")
    })?;
    let created = cloud
        .create_template(&t.waba_id, &token, &body)
        .await
        .map_err(|e| network_problem(&e))?;
    let status = created
        .status
        .as_deref()
        .and_then(template_words::template_status)
        .unwrap_or(TemplateStatus::Pending);
    let mut tx = core.db.begin().await?;
    let updated = tx
        .set_template_submitted(principal.org_id, id, &created.id, status, now_ms())
        .await?;
    if updated.status != t.status {
        crate::events::template_status(&mut tx, &updated).await?;
    }
    tx.commit().await?;
    tracing::info!(template_id = %id, network_id = %created.id, status = status.as_str(), "template submitted");
    Ok(updated)
}

/// The network refused or could not take a submission.
fn network_problem(e: &SendError) -> Problem {
    match e {
        SendError::Graph(g) if g.is_graph_body() && g.retry_class() == RetryClass::Never => {
            let mut p = Problem::conflict(ConflictReason::NetworkRejected)
                .with_message(format!(
                    "The network refused the template: {}",
                    g.details.as_deref().unwrap_or(&g.message)
                ))
                .with_detail("network_code", g.code)
                .with_detail("network_message", g.message.clone());
            if let Some(s) = g.subcode {
                p = p.with_detail("network_subcode", s);
            }
            if let Some(d) = &g.details {
                p = p.with_detail("network_details", d.clone());
            }
            if let Some(t) = &g.fbtrace_id {
                p = p.with_detail("network_trace_id", t.clone());
            }
            p
        }
        other => {
            tracing::warn!(error = %other, "template submission: network unavailable");
            let mut p = Problem::unavailable()
                .with_message("The messaging network could not be reached; retry later.")
                .with_detail("reason", "network_unavailable");
            if let SendError::Graph(g) = other {
                if let Some(c) = g.code {
                    p = p.with_detail("network_code", c);
                }
                p = p.with_detail("network_status", g.http_status);
            }
            if other.retry_class() == RetryClass::OutcomeUnknown {
                p = p.with_message(
                    "The network's answer was lost; the template may have been submitted. \
                     Its status will be updated by the network, or retry later.",
                );
            }
            p
        }
    }
}

/// Applies a template status webhook; returns how many templates changed.
pub async fn apply_network_update(
    db: &Db,
    waba: &str,
    u: &TemplateStatusUpdate,
) -> std::result::Result<usize, StoreError> {
    let (Some(status), Some(name)) = (u.event.status(), u.name.as_deref()) else {
        tracing::info!(
            event = u.event.as_str(),
            "template event without a status change"
        );
        return Ok(0);
    };
    let reason = template_words::rejection_reason(u.reason.as_deref());
    let mut tx = db.begin().await?;
    let changed = tx
        .apply_template_status(
            waba,
            u.message_template_id.as_deref(),
            name,
            u.language.as_deref(),
            status,
            reason.as_deref(),
            now_ms(),
        )
        .await?;
    for t in &changed {
        crate::events::template_status(&mut tx, t).await?;
    }
    tx.commit().await?;
    Ok(changed.len())
}

/// Applies the network's `template_category_update`: the template takes the category now
/// in force (billing prices a send by it). Returns how many templates changed.
pub async fn apply_category_update(
    db: &Db,
    waba: &str,
    u: &TemplateCategoryUpdate,
) -> std::result::Result<usize, StoreError> {
    let Some(category) = u.category() else {
        tracing::info!(
            category = ?u.new_category,
            "template category update without a category Tern knows"
        );
        return Ok(0);
    };
    if u.message_template_id.is_none() && u.name.is_none() {
        return Ok(0);
    }
    let changed = db
        .apply_template_category(
            waba,
            u.message_template_id.as_deref(),
            u.name.as_deref(),
            u.language.as_deref(),
            category,
            now_ms(),
        )
        .await?;
    Ok(changed.len())
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

/// The access token to use for each WABA of the organisation: a connected number's if
/// there is one, else any number's.
pub async fn waba_tokens(
    db: &Db,
    key: &MasterKey,
    org_id: Uuid,
) -> std::result::Result<BTreeMap<String, Option<String>>, StoreError> {
    let mut tokens: BTreeMap<String, Option<String>> = BTreeMap::new();
    // Test numbers' templates are decided by the test network's webhooks: never listed
    // from the configured network.
    for n in all_numbers(db, org_id)
        .await?
        .into_iter()
        .filter(|n| n.mode == tern_domain::auth::Mode::Live)
    {
        let token = numbers::access_token(key, &n);
        let entry = tokens.entry(n.waba_id.clone()).or_insert(None);
        if (numbers::can_send(&n) && token.is_some()) || entry.is_none() {
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
) -> std::result::Result<SyncReport, StoreError> {
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
            Err(WabaError::Store(e)) => return Err(e),
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
) -> std::result::Result<(), WabaError> {
    let mut after: Option<String> = None;
    for _ in 0..MAX_PAGES {
        let page = cloud
            .list_templates(waba, token, after.as_deref())
            .await
            .map_err(WabaError::Network)?;
        for t in &page.templates {
            upsert_synced(db, org_id, waba, t, report)
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

async fn upsert_synced(
    db: &Db,
    org_id: Uuid,
    waba: &str,
    t: &TemplateInfo,
    report: &mut SyncReport,
) -> std::result::Result<(), StoreError> {
    let (Some(status), Some(category)) = (
        template_words::template_status(&t.status),
        template_words::template_category(&t.category),
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
    let reason = if status == TemplateStatus::Rejected {
        template_words::rejection_reason(t.rejected_reason.as_deref())
    } else {
        None
    };
    let mut tx = db.begin().await?;
    let before = tx
        .template_status_of(org_id, waba, &t.name, &t.language)
        .await?;
    let (row, created) = tx
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
    // A status learned by the sync (its webhook was missed) is reported like the webhook's.
    if before.is_some_and(|b| b != row.status) {
        crate::events::template_status(&mut tx, &row).await?;
    }
    tx.commit().await?;
    report.synced += 1;
    if created {
        report.created += 1;
    } else if row.updated_at == at {
        report.updated += 1;
    }
    Ok(())
}
