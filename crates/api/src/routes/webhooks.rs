//! Webhook subscriptions (`developer.webhooks.manage`): a key sees and changes only the
//! subscriptions it created. Adapters over `tern_core::webhooks::subscriptions`.

use crate::auth::{Authed, perm};
use crate::error::ApiError;
use crate::extract::{ApiJson, QueryParams, path_id};
use crate::pagination::{ListRequest, Page};
use crate::state::AppState;
use axum::Json;
use axum::extract::{Path, RawQuery, State};
use axum::http::StatusCode;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use tern_core::webhooks::subscriptions::{self, WithSecret};
use tern_domain::Problem;
use tern_domain::events::subscription::{MAX_DESCRIPTION_CHARS, MAX_URL_LEN};
use tern_domain::time::{format_ms, now_ms};
use utoipa::ToSchema;

/// Where Tern pushes events, and which.
#[derive(Debug, Serialize, ToSchema)]
pub struct WebhookSubscription {
    #[schema(format = Uuid)]
    pub id: String,
    /// The receiver (https).
    pub url: String,
    /// Event types delivered to it.
    #[schema(example = json!(["message.status", "message.received"]))]
    pub events: Vec<String>,
    pub description: Option<String>,
    pub enabled: bool,
    /// Why Tern disabled it (`gone`: the receiver answered 410), else null.
    pub disabled_reason: Option<String>,
    #[schema(format = DateTime)]
    pub created_at: String,
    #[schema(format = DateTime)]
    pub updated_at: String,
    /// The signing secret (`whsec_…`): only in the answer of the create and of a rotation.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub secret: Option<String>,
}

impl From<tern_store::Subscription> for WebhookSubscription {
    fn from(s: tern_store::Subscription) -> Self {
        WebhookSubscription {
            id: s.id.to_string(),
            url: s.url,
            events: s.event_types,
            description: s.description,
            enabled: s.enabled,
            disabled_reason: s.disabled_reason,
            created_at: format_ms(s.created_at),
            updated_at: format_ms(s.updated_at),
            secret: None,
        }
    }
}

impl From<WithSecret> for WebhookSubscription {
    fn from(w: WithSecret) -> Self {
        let mut s = WebhookSubscription::from(w.subscription);
        s.secret = Some(w.secret);
        s
    }
}

/// The event types (DESIGN.md "Events").
#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
#[allow(dead_code)]
pub enum EventTypeName {
    #[serde(rename = "message.status")]
    #[schema(rename = "message.status")]
    MessageStatus,
    #[serde(rename = "message.received")]
    #[schema(rename = "message.received")]
    MessageReceived,
    #[serde(rename = "message.updated")]
    #[schema(rename = "message.updated")]
    MessageUpdated,
    #[serde(rename = "template.status")]
    #[schema(rename = "template.status")]
    TemplateStatus,
    #[serde(rename = "contact.consent")]
    #[schema(rename = "contact.consent")]
    ContactConsent,
    #[serde(rename = "campaign.status")]
    #[schema(rename = "campaign.status")]
    CampaignStatus,
    #[serde(rename = "webhook.test")]
    #[schema(rename = "webhook.test")]
    WebhookTest,
}

/// `POST /webhook-subscriptions`.
#[derive(Debug, Deserialize, ToSchema)]
#[allow(dead_code)]
pub struct CreateSubscriptionRequest {
    /// https only; private, loopback and link-local addresses are refused.
    #[schema(max_length = 2048, example = "https://hooks.example.com/tern")]
    pub url: String,
    #[schema(min_items = 1)]
    pub events: Vec<EventTypeName>,
    #[schema(max_length = 500)]
    pub description: Option<String>,
    /// Default true.
    pub enabled: Option<bool>,
}

/// `PATCH /webhook-subscriptions/{id}`: the fields to change.
#[derive(Debug, Deserialize, ToSchema)]
#[allow(dead_code)]
pub struct UpdateSubscriptionRequest {
    #[schema(max_length = 2048)]
    pub url: Option<String>,
    #[schema(min_items = 1)]
    pub events: Option<Vec<EventTypeName>>,
    /// null clears it.
    #[schema(max_length = 500)]
    pub description: Option<String>,
    /// true re-enables a subscription Tern disabled (and clears `disabled_reason`).
    pub enabled: Option<bool>,
}

const _: () = assert!(MAX_URL_LEN == 2048 && MAX_DESCRIPTION_CHARS == 500);

/// This key's subscriptions.
#[utoipa::path(
    get,
    path = "/webhook-subscriptions",
    tag = "Webhooks",
    operation_id = "listWebhookSubscriptions",
    params(
        ("limit" = Option<i64>, Query, minimum = 1, maximum = 100),
        ("cursor" = Option<String>, Query),
    ),
    responses((status = 200, description = "A page of subscriptions (oldest first).", body = Page<WebhookSubscription>)),
    security(("bearer" = []))
)]
pub async fn list_subscriptions(
    auth: Authed<perm::DeveloperWebhooksManage>,
    State(state): State<AppState>,
    RawQuery(query): RawQuery,
) -> Result<Json<Page<WebhookSubscription>>, ApiError> {
    let params = QueryParams::parse(query.as_deref(), &["limit", "cursor"])?;
    let list = ListRequest::parse(&state, &auth, &params, "webhook-subscriptions", &[])?;
    let after = match list.after.as_deref() {
        None => None,
        Some([id]) => Some(
            uuid::Uuid::parse_str(id)
                .map_err(|_| ApiError(Problem::field("cursor", "is not valid for this list")))?,
        ),
        Some(_) => {
            return Err(ApiError(Problem::field(
                "cursor",
                "is not valid for this list",
            )));
        }
    };
    let rows = state
        .db
        .list_webhook_subscriptions(auth.org_id, auth.key_id, after, list.fetch_limit())
        .await?;
    Ok(Json(list.page(
        &state,
        &auth,
        rows,
        |s| vec![s.id.to_string()],
        WebhookSubscription::from,
    )))
}

/// Subscribe this key to events. The answer holds the signing secret, once.
#[utoipa::path(
    post,
    path = "/webhook-subscriptions",
    tag = "Webhooks",
    operation_id = "createWebhookSubscription",
    request_body = CreateSubscriptionRequest,
    responses((status = 201, description = "Created; `secret` is shown this once.", body = WebhookSubscription)),
    security(("bearer" = []))
)]
pub async fn create_subscription(
    auth: Authed<perm::DeveloperWebhooksManage>,
    State(state): State<AppState>,
    ApiJson(body): ApiJson<Value>,
) -> Result<(StatusCode, Json<WebhookSubscription>), ApiError> {
    let created = subscriptions::create(&state.core, &auth, &body, now_ms()).await?;
    Ok((StatusCode::CREATED, Json(created.into())))
}

/// Change a subscription.
#[utoipa::path(
    patch,
    path = "/webhook-subscriptions/{webhook_id}",
    tag = "Webhooks",
    operation_id = "updateWebhookSubscription",
    params(("webhook_id" = String, Path, format = Uuid)),
    request_body = UpdateSubscriptionRequest,
    responses((status = 200, description = "The subscription as changed.", body = WebhookSubscription)),
    security(("bearer" = []))
)]
pub async fn update_subscription(
    auth: Authed<perm::DeveloperWebhooksManage>,
    State(state): State<AppState>,
    Path(id): Path<String>,
    ApiJson(body): ApiJson<Value>,
) -> Result<Json<WebhookSubscription>, ApiError> {
    let id = path_id(&id)?;
    let s = subscriptions::update(&state.core, &auth, id, &body, now_ms()).await?;
    Ok(Json(s.into()))
}

/// Delete a subscription; its pending deliveries stop.
#[utoipa::path(
    delete,
    path = "/webhook-subscriptions/{webhook_id}",
    tag = "Webhooks",
    operation_id = "deleteWebhookSubscription",
    params(("webhook_id" = String, Path, format = Uuid)),
    responses((status = 204, description = "Deleted.")),
    security(("bearer" = []))
)]
pub async fn delete_subscription(
    auth: Authed<perm::DeveloperWebhooksManage>,
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> Result<StatusCode, ApiError> {
    let id = path_id(&id)?;
    subscriptions::delete(&state.core, &auth, id).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// A new signing secret, shown once; the previous one also signs for 24 hours.
#[utoipa::path(
    post,
    path = "/webhook-subscriptions/{webhook_id}/rotate-secret",
    tag = "Webhooks",
    operation_id = "rotateWebhookSecret",
    params(("webhook_id" = String, Path, format = Uuid)),
    responses((status = 201, description = "Rotated; `secret` is shown this once.", body = WebhookSubscription)),
    security(("bearer" = []))
)]
pub async fn rotate_secret(
    auth: Authed<perm::DeveloperWebhooksManage>,
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> Result<(StatusCode, Json<WebhookSubscription>), ApiError> {
    let id = path_id(&id)?;
    let rotated = subscriptions::rotate(&state.core, &auth, id, now_ms()).await?;
    Ok((StatusCode::CREATED, Json(rotated.into())))
}
