//! Campaigns: one approved template sent to an audience of contacts, resolved into
//! recipients, scheduled or launched, paused and resumed, each recipient messaged once.

use crate::auth::{Authed, perm};
use crate::error::ApiError;
use crate::extract::{ApiJson, path_id};
use crate::pagination::{ListQuery, Page};
use crate::state::AppState;
use axum::Json;
use axum::extract::{Path, RawQuery, State};
use axum::http::StatusCode;
use serde::Deserialize;
use serde_json::{Value, json};
use tern_core::campaigns::{self as uc, view};
use tern_domain::campaign::{Action, Bucket, Status};
use tern_domain::plan::Feature;
use tern_domain::time::now_ms;
use utoipa::ToSchema;

pub use tern_core::campaigns::view::{
    Campaign, CampaignStatus, Progress, Recipient, RecipientStatus,
};

/// A new campaign (`draft`).
// The body's schema (OpenAPI); the body is read with `validate::Fields`
// (`tern_domain::campaign::parse_create`).
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)]
#[schema(example = json!({
    "name": "Spring sale",
    "template": {"name": "spring_sale", "language": "en_US",
                 "variables": [{"field": "name", "fallback": "there"}, "20%"]},
    "audience": {"tags": ["vip"], "tag_match": "any", "exclude_tags": ["unsubscribed"]}
}))]
pub struct CreateCampaignRequest {
    #[schema(min_length = 1, max_length = 200)]
    pub name: String,
    /// The sending number; required when the organisation has several.
    pub phone_number_id: Option<String>,
    /// The sending number by its phone number (E.164), instead of `phone_number_id`.
    pub from: Option<String>,
    /// `name`, `language`, and `variables` (one per numbered variable: a string, or
    /// `{"field": "name"|"phone"|"wa_id"|"custom_fields.<key>", "fallback": "…"}` filled per
    /// recipient) or `components` (the network's, the same for everyone).
    #[schema(value_type = Object)]
    pub template: Value,
    /// Exactly one of `{"contact_ids": [...]}` (at most 10,000), `{"tags": [...],
    /// "tag_match": "any"|"all"}`, `{"all_contacts": true}`; optionally `exclude_tags`.
    #[schema(value_type = Object)]
    pub audience: Value,
    /// After this time recipients not yet messaged end `expired`.
    #[schema(format = DateTime)]
    pub expires_at: Option<String>,
}

/// The schemas of a campaign's `audience` and `template` (in the request and in the
/// Campaign), installed by the document's finishing step: Tern's own shapes, typed, so a
/// generated client cannot misspell `tags`.
pub fn campaign_schemas() -> Vec<(String, Value)> {
    use tern_domain::campaign::{MAX_CONTACT_IDS, MAX_TAGS};
    let exclude = json!({"type": "array", "items": {"$ref": "#/components/schemas/TagName"},
                         "maxItems": MAX_TAGS, "description": "Contacts with any of these tags are left out."});
    vec![
        (
            "AudienceByContactIds".into(),
            json!({"type": "object", "required": ["contact_ids"],
            "properties": {"contact_ids": {"type": "array", "minItems": 1, "maxItems": MAX_CONTACT_IDS, "items": {"type": "string", "format": "uuid"}},
                           "exclude_tags": exclude}}),
        ),
        (
            "AudienceByTags".into(),
            json!({"type": "object", "required": ["tags"],
            "properties": {"tags": {"type": "array", "minItems": 1, "maxItems": MAX_TAGS, "items": {"$ref": "#/components/schemas/TagName"}},
                           "tag_match": {"type": "string", "enum": ["any", "all"], "description": "`any` (the default): contacts with at least one of the tags; `all`: with every one."},
                           "exclude_tags": exclude}}),
        ),
        (
            "AudienceAllContacts".into(),
            json!({"type": "object", "required": ["all_contacts"],
            "properties": {"all_contacts": {"type": "boolean", "const": true}, "exclude_tags": exclude}}),
        ),
        (
            "CampaignAudience".into(),
            json!({"description": "Who the campaign goes to: exactly one of `contact_ids`, `tags`, `all_contacts`.",
            "oneOf": [{"$ref": "#/components/schemas/AudienceByContactIds"}, {"$ref": "#/components/schemas/AudienceByTags"}, {"$ref": "#/components/schemas/AudienceAllContacts"}]}),
        ),
        (
            "ContactValue".into(),
            json!({"type": "object", "required": ["field"], "additionalProperties": false,
            "description": "A variable filled per recipient from the contact.",
            "properties": {"field": {"type": "string", "pattern": "^(name|phone|wa_id|custom_fields\\..+)$", "example": "name",
                                     "description": "`name`, `phone`, `wa_id` or `custom_fields.<key>`."},
                           "fallback": {"type": "string", "description": "Used when the contact has no value; without it such a recipient is skipped (`variable_invalid`)."}}}),
        ),
        (
            "CampaignTemplate".into(),
            json!({"type": "object", "required": ["name", "language"], "additionalProperties": false,
            "description": "The approved template, with `variables` (one per numbered variable) or `components` (the network's, the same for everyone), never both.",
            "properties": {"name": {"type": "string", "minLength": 1}, "language": {"type": "string", "minLength": 2},
                           "variables": {"type": "array", "items": {"oneOf": [{"type": "string", "minLength": 1}, {"$ref": "#/components/schemas/ContactValue"}]}},
                           "components": {"type": "array", "items": {"type": "object", "additionalProperties": true}}}}),
        ),
    ]
}

/// `POST /campaigns/{id}/schedule`.
// The body's schema (OpenAPI); the body is read with `validate::Fields`
// (`tern_domain::campaign::parse_schedule`).
#[derive(Debug, Deserialize, ToSchema)]
#[allow(dead_code)]
pub struct ScheduleRequest {
    /// When it launches (in the future); null unschedules.
    // Required, though it may be null: leaving it out is refused.
    #[schema(format = DateTime, required = true)]
    pub scheduled_at: Option<String>,
    /// After this time recipients not yet messaged end `expired`; null clears it.
    #[schema(format = DateTime)]
    pub expires_at: Option<String>,
}

async fn shown(state: &AppState, c: &tern_store::Campaign) -> Result<Campaign, ApiError> {
    Ok(uc::show(&state.core, c).await?)
}

/// List the organisation's campaigns, newest first.
#[utoipa::path(
    get,
    path = "/campaigns",
    tag = "Campaigns",
    operation_id = "listCampaigns",
    params(
        ("status" = Option<CampaignStatus>, Query, description = "Only campaigns in this status."),
        ("limit" = Option<i64>, Query, minimum = 1, maximum = 100, description = "Page size, 1 to 100 (default 25)."),
        ("cursor" = Option<String>, Query, min_length = 1, description = "The `next_cursor` of the previous page."),
    ),
    responses((status = 200, description = "A page of campaigns.", body = Page<Campaign>)),
    security(("bearer" = []))
)]
pub async fn list_campaigns(
    auth: Authed<perm::CampaignsRead>,
    State(state): State<AppState>,
    RawQuery(query): RawQuery,
) -> Result<Json<Page<Campaign>>, ApiError> {
    auth.require_feature(Feature::Campaigns)?;
    let mut q = ListQuery::parse(query.as_deref(), &["status"])?;
    let status = q.filter("status", |s| {
        Status::parse(s).ok_or_else(|| format!("must be one of {}", Status::names()))
    });
    let list = q.finish(&state, &auth, "campaigns", &[])?;
    let rows = state
        .db
        .list_campaigns(auth.org_id, status, list.after_ts_id()?, list.fetch_limit())
        .await?;
    let mut with_counts = Vec::with_capacity(rows.len());
    for c in rows {
        let counts = state.db.campaign_counts(c.id).await?;
        with_counts.push((c, counts));
    }
    Ok(Json(list.page(
        &state,
        &auth,
        with_counts,
        |(c, _)| vec![c.created_at.to_string(), c.id.to_string()],
        |(c, counts)| Campaign::new(&c, counts),
    )))
}

/// Create a campaign (`draft`). Resolve, schedule or launch it next.
#[utoipa::path(
    post,
    path = "/campaigns",
    tag = "Campaigns",
    operation_id = "createCampaign",
    request_body = CreateCampaignRequest,
    responses((status = 201, description = "The campaign was created.", body = Campaign)),
    security(("bearer" = []))
)]
pub async fn create_campaign(
    auth: Authed<perm::CampaignsCreate>,
    State(state): State<AppState>,
    ApiJson(body): ApiJson<Value>,
) -> Result<(StatusCode, Json<Campaign>), ApiError> {
    let c = uc::create(&state.core, &auth, &body, now_ms()).await?;
    Ok((StatusCode::CREATED, Json(shown(&state, &c).await?)))
}

/// One campaign, with its counts.
#[utoipa::path(
    get,
    path = "/campaigns/{campaign_id}",
    tag = "Campaigns",
    operation_id = "getCampaign",
    params(("campaign_id" = String, Path, format = Uuid)),
    responses((status = 200, description = "The campaign.", body = Campaign)),
    security(("bearer" = []))
)]
pub async fn get_campaign(
    auth: Authed<perm::CampaignsRead>,
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> Result<Json<Campaign>, ApiError> {
    auth.require_feature(Feature::Campaigns)?;
    let c = uc::get(&state.core, auth.org_id, path_id(&id)?).await?;
    Ok(Json(shown(&state, &c).await?))
}

/// The campaign's progress: recipients per status (summing to `total`), skip reasons and
/// failure codes. Read from counters, cheap to poll.
#[utoipa::path(
    get,
    path = "/campaigns/{campaign_id}/progress",
    tag = "Campaigns",
    operation_id = "getCampaignProgress",
    params(("campaign_id" = String, Path, format = Uuid)),
    responses((status = 200, description = "The progress.", body = Progress)),
    security(("bearer" = []))
)]
pub async fn get_progress(
    auth: Authed<perm::CampaignsRead>,
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> Result<Json<Progress>, ApiError> {
    auth.require_feature(Feature::Campaigns)?;
    Ok(Json(
        uc::progress(&state.core, auth.org_id, path_id(&id)?).await?,
    ))
}

/// The campaign's recipients in contact order, each with its status, message and reason.
#[utoipa::path(
    get,
    path = "/campaigns/{campaign_id}/recipients",
    tag = "Campaigns",
    operation_id = "listCampaignRecipients",
    params(
        ("campaign_id" = String, Path, format = Uuid),
        ("status" = Option<RecipientStatus>, Query, description = "Only recipients in this status."),
        ("limit" = Option<i64>, Query, minimum = 1, maximum = 100, description = "Page size, 1 to 100 (default 25)."),
        ("cursor" = Option<String>, Query, min_length = 1, description = "The `next_cursor` of the previous page."),
    ),
    responses((status = 200, description = "A page of recipients.", body = Page<Recipient>)),
    security(("bearer" = []))
)]
pub async fn list_recipients(
    auth: Authed<perm::CampaignsRead>,
    State(state): State<AppState>,
    Path(id): Path<String>,
    RawQuery(query): RawQuery,
) -> Result<Json<Page<Recipient>>, ApiError> {
    auth.require_feature(Feature::Campaigns)?;
    let id = path_id(&id)?;
    let mut q = ListQuery::parse(query.as_deref(), &["status"])?;
    let bucket = q.filter("status", |s| {
        Bucket::parse(s).ok_or_else(|| format!("must be one of {}", Bucket::names()))
    });
    let campaign = id.to_string();
    let list = q.finish(
        &state,
        &auth,
        "campaign_recipients",
        &[("campaign", Some(&campaign))],
    )?;
    uc::get(&state.core, auth.org_id, id).await?;
    let after = list.after_id()?;
    let rows = state
        .db
        .list_campaign_recipients(id, bucket, after, list.fetch_limit())
        .await?;
    Ok(Json(list.page(
        &state,
        &auth,
        rows,
        |r| vec![r.contact_id.to_string()],
        view::Recipient::from,
    )))
}

async fn action(
    state: &AppState,
    auth: &tern_core::Principal,
    id: &str,
    action: Action,
    body: &Value,
) -> Result<Json<Campaign>, ApiError> {
    let c = uc::act(&state.core, auth, path_id(id)?, action, body, now_ms()).await?;
    Ok(Json(shown(state, &c).await?))
}

/// Set when the campaign launches by itself (`scheduled_at`; null unschedules) and when it
/// expires. From `draft`, `ready` or `scheduled`.
#[utoipa::path(
    post,
    path = "/campaigns/{campaign_id}/schedule",
    tag = "Campaigns",
    operation_id = "scheduleCampaign",
    params(("campaign_id" = String, Path, format = Uuid)),
    request_body = ScheduleRequest,
    responses((status = 200, description = "The campaign, `scheduled` (or back to `ready`/`draft`).", body = Campaign)),
    security(("bearer" = []))
)]
pub async fn schedule_campaign(
    auth: Authed<perm::CampaignsUpdate>,
    State(state): State<AppState>,
    Path(id): Path<String>,
    ApiJson(body): ApiJson<Value>,
) -> Result<Json<Campaign>, ApiError> {
    action(&state, &auth, &id, Action::Schedule, &body).await
}

/// Snapshot the audience into recipients (`draft` or `ready` → `ready`): deduplicated,
/// variables filled, opted-out contacts and invalid values skipped with a reason. Sets
/// `estimated_cost_minor` (the recipients not skipped at the template category's price).
#[utoipa::path(
    post,
    path = "/campaigns/{campaign_id}/resolve",
    tag = "Campaigns",
    operation_id = "resolveCampaign",
    params(("campaign_id" = String, Path, format = Uuid)),
    responses((status = 200, description = "The campaign, `ready`, with `recipient_count`.", body = Campaign)),
    security(("bearer" = []))
)]
pub async fn resolve_campaign(
    auth: Authed<perm::CampaignsSend>,
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> Result<Json<Campaign>, ApiError> {
    action(&state, &auth, &id, Action::Resolve, &Value::Null).await
}

/// Start sending now (`draft`, `ready` or `scheduled` → `running`; resolved first if it was
/// not). Checks what a template send checks, and that the wallet covers the estimate
/// (`402 wallet_balance_low` with `required_minor` and `wallet_category`; the campaign then
/// stays `ready`).
#[utoipa::path(
    post,
    path = "/campaigns/{campaign_id}/launch",
    tag = "Campaigns",
    operation_id = "launchCampaign",
    params(("campaign_id" = String, Path, format = Uuid)),
    responses((status = 200, description = "The campaign, `running`.", body = Campaign)),
    security(("bearer" = []))
)]
pub async fn launch_campaign(
    auth: Authed<perm::CampaignsSend>,
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> Result<Json<Campaign>, ApiError> {
    action(&state, &auth, &id, Action::Launch, &Value::Null).await
}

/// Stop handing recipients to the network (`running` → `paused`, `pause_reason` `manual`).
#[utoipa::path(
    post,
    path = "/campaigns/{campaign_id}/pause",
    tag = "Campaigns",
    operation_id = "pauseCampaign",
    params(("campaign_id" = String, Path, format = Uuid)),
    responses((status = 200, description = "The campaign, `paused`.", body = Campaign)),
    security(("bearer" = []))
)]
pub async fn pause_campaign(
    auth: Authed<perm::CampaignsSend>,
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> Result<Json<Campaign>, ApiError> {
    action(&state, &auth, &id, Action::Pause, &Value::Null).await
}

/// Continue a paused campaign with the recipients not yet messaged (`paused` → `running`).
/// The wallet must cover those recipients (`402 wallet_balance_low`).
#[utoipa::path(
    post,
    path = "/campaigns/{campaign_id}/resume",
    tag = "Campaigns",
    operation_id = "resumeCampaign",
    params(("campaign_id" = String, Path, format = Uuid)),
    responses((status = 200, description = "The campaign, `running`.", body = Campaign)),
    security(("bearer" = []))
)]
pub async fn resume_campaign(
    auth: Authed<perm::CampaignsSend>,
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> Result<Json<Campaign>, ApiError> {
    action(&state, &auth, &id, Action::Resume, &Value::Null).await
}
