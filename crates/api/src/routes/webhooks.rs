//! Webhook subscriptions (`developer.webhooks.manage`): a key sees and changes only the
//! subscriptions it created. Adapters over `tern_core::webhooks::subscriptions`.

use crate::auth::{Authed, perm};
use crate::error::ApiError;
use crate::extract::{ApiJson, path_id};
use crate::pagination::{ListQuery, Page};
use crate::state::AppState;
use axum::Json;
use axum::extract::{Path, RawQuery, State};
use axum::http::StatusCode;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use tern_core::webhooks::deliver;
use tern_core::webhooks::subscriptions::{self, WithSecret};
use tern_domain::Problem;
use tern_domain::events::subscription::{MAX_DESCRIPTION_CHARS, MAX_URL_LEN};
use tern_domain::time::{format_ms, now_ms};
use tern_store::AttemptStatus;
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
    /// Why Tern disabled it, else null: `gone` (the receiver answered 410) or `key_revoked`
    /// (the key that created it was revoked).
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
    let list = ListQuery::parse(query.as_deref(), &[])?.finish(
        &state,
        &auth,
        "webhook-subscriptions",
        &[],
    )?;
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

/// One attempt to deliver an event to a subscription.
#[derive(Debug, Serialize, ToSchema)]
pub struct WebhookAttempt {
    #[schema(format = Uuid)]
    pub id: String,
    /// The event (`webhook-id`, the body's `id`), the same on every attempt.
    #[schema(format = Uuid)]
    pub event_id: String,
    #[schema(example = "message.status")]
    pub event_type: String,
    /// 1 for the first attempt of a delivery, then 2, 3, …
    pub attempt: i64,
    /// `succeeded` or `failed`.
    #[schema(example = "succeeded")]
    pub status: String,
    /// The receiver's HTTP status; null when it did not answer.
    pub response_status: Option<i64>,
    pub latency_ms: i64,
    /// Why it failed (e.g. `HTTP 500`, `no answer within 15 s`), else null.
    pub error: Option<String>,
    #[schema(format = DateTime)]
    pub created_at: String,
}

impl From<tern_store::WebhookAttempt> for WebhookAttempt {
    fn from(a: tern_store::WebhookAttempt) -> Self {
        WebhookAttempt {
            id: a.id.to_string(),
            event_id: a.event_id.to_string(),
            event_type: a.event_type,
            attempt: a.attempt,
            status: a.status.as_str().to_string(),
            response_status: a.response_status,
            latency_ms: a.latency_ms,
            error: a.error,
            created_at: format_ms(a.created_at),
        }
    }
}

/// `POST /webhook-subscriptions/{id}/test` (the body is optional).
#[derive(Debug, Deserialize, ToSchema)]
#[allow(dead_code)]
pub struct TestRequest {
    /// A sample event of this type instead of `webhook.test`.
    pub event_type: Option<EventTypeName>,
}

/// Send one test event to the subscription now (`webhook.test`, or a sample event of
/// `event_type`), even when it is disabled; the answer is the attempt. Not retried.
#[utoipa::path(
    post,
    path = "/webhook-subscriptions/{webhook_id}/test",
    tag = "Webhooks",
    operation_id = "testWebhookSubscription",
    params(("webhook_id" = String, Path, format = Uuid)),
    request_body(content = Option<TestRequest>, content_type = "application/json"),
    responses((status = 200, description = "The attempt (succeeded or failed).", body = WebhookAttempt)),
    security(("bearer" = []))
)]
pub async fn test_subscription(
    auth: Authed<perm::DeveloperWebhooksManage>,
    State(state): State<AppState>,
    Path(id): Path<String>,
    body: axum::body::Bytes,
) -> Result<Json<WebhookAttempt>, ApiError> {
    let id = path_id(&id)?;
    let body: Option<Value> = if body.iter().all(u8::is_ascii_whitespace) {
        None
    } else {
        Some(crate::extract::parse_json(&body)?)
    };
    let kind = tern_domain::events::subscription::parse_test(body.as_ref())?;
    let attempt = deliver::test(&state.core, &auth, id, kind).await?;
    Ok(Json(attempt.into()))
}

/// The subscription's delivery attempts, newest first.
#[utoipa::path(
    get,
    path = "/webhook-subscriptions/{webhook_id}/deliveries",
    tag = "Webhooks",
    operation_id = "listWebhookDeliveries",
    params(
        ("webhook_id" = String, Path, format = Uuid),
        ("status" = Option<String>, Query, description = "`succeeded` or `failed`"),
        ("limit" = Option<i64>, Query, minimum = 1, maximum = 100),
        ("cursor" = Option<String>, Query),
    ),
    responses((status = 200, description = "A page of attempts (newest first).", body = Page<WebhookAttempt>)),
    security(("bearer" = []))
)]
pub async fn list_deliveries(
    auth: Authed<perm::DeveloperWebhooksManage>,
    State(state): State<AppState>,
    Path(id): Path<String>,
    RawQuery(query): RawQuery,
) -> Result<Json<Page<WebhookAttempt>>, ApiError> {
    let id = path_id(&id)?;
    let mut q = ListQuery::parse(query.as_deref(), &["status"])?;
    let status = q.filter("status", |s| {
        AttemptStatus::parse(s).ok_or_else(|| "must be one of succeeded, failed".into())
    });
    let list = q.finish(
        &state,
        &auth,
        "webhook-deliveries",
        &[("webhook_id", Some(&id.to_string()))],
    )?;
    let before = list.after_ts_id()?;
    state
        .db
        .get_webhook_subscription(auth.org_id, auth.key_id, id)
        .await?
        .ok_or_else(Problem::not_found)?;
    let rows = state
        .db
        .list_webhook_attempts(
            auth.org_id,
            auth.key_id,
            id,
            status,
            before,
            list.fetch_limit(),
        )
        .await?;
    Ok(Json(list.page(
        &state,
        &auth,
        rows,
        |a| vec![a.created_at.to_string(), a.id.to_string()],
        WebhookAttempt::from,
    )))
}

/// `POST /webhook-subscriptions/{id}/replay`.
#[derive(Debug, Deserialize, ToSchema)]
#[allow(dead_code)]
pub struct ReplayRequest {
    /// Failed deliveries of events created at or after this time are sent again.
    #[schema(format = DateTime)]
    pub since: String,
}

/// How many deliveries a replay queued.
#[derive(Debug, Serialize, ToSchema)]
pub struct ReplayResult {
    pub count: u64,
}

/// Send the subscription's failed deliveries of events created since `since` again, with
/// the whole retry schedule.
#[utoipa::path(
    post,
    path = "/webhook-subscriptions/{webhook_id}/replay",
    tag = "Webhooks",
    operation_id = "replayWebhookDeliveries",
    params(("webhook_id" = String, Path, format = Uuid)),
    request_body = ReplayRequest,
    responses((status = 202, description = "Queued; `count` deliveries will be sent again.", body = ReplayResult)),
    security(("bearer" = []))
)]
pub async fn replay(
    auth: Authed<perm::DeveloperWebhooksManage>,
    State(state): State<AppState>,
    Path(id): Path<String>,
    ApiJson(body): ApiJson<Value>,
) -> Result<(StatusCode, Json<ReplayResult>), ApiError> {
    let id = path_id(&id)?;
    let now = now_ms();
    let since = tern_domain::events::subscription::parse_replay(&body, now)?;
    let count = deliver::replay(&state.core, &auth, id, since).await?;
    Ok((StatusCode::ACCEPTED, Json(ReplayResult { count })))
}
