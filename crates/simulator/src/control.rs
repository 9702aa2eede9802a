//! The `/_sim/…` control API (JSON). Documented in `docs/simulator.md`.

use std::sync::Arc;

use axum::{
    Json, Router,
    extract::{Path, Query, State, rejection::JsonRejection},
    http::StatusCode,
    response::{IntoResponse, Response},
    routing::{get, post, put},
};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::config::NumberSpec;
use crate::customers::{CustomerSpec, IdentityChangeRequest};
use crate::model::{
    ForceRequest, NumberPatch, RecipientSpec, TemplateCategoryChange, TemplateSeed,
    TemplateStatusChange, digits,
};
use crate::state::{CtlError, Sim};
use crate::webhooks::verify_callback;

impl IntoResponse for CtlError {
    fn into_response(self) -> Response {
        let status = StatusCode::from_u16(self.status).unwrap_or(StatusCode::BAD_REQUEST);
        (status, Json(json!({"error": self.message}))).into_response()
    }
}

type CtlResult = Result<Response, CtlError>;

fn body<T>(b: Result<Json<T>, JsonRejection>) -> Result<T, CtlError> {
    b.map(|Json(v)| v)
        .map_err(|e| CtlError::bad_request(e.body_text()))
}

fn ok(v: Value) -> CtlResult {
    Ok(Json(v).into_response())
}

fn created(v: Value) -> CtlResult {
    Ok((StatusCode::CREATED, Json(v)).into_response())
}

fn to_value<T: serde::Serialize>(v: &T) -> Value {
    serde_json::to_value(v).unwrap_or(Value::Null)
}

pub fn router(sim: Arc<Sim>) -> Router {
    Router::new()
        .route("/_sim/health", get(|| async { Json(json!({"ok": true})) }))
        .route("/_sim/numbers", get(list_numbers).post(add_number))
        .route("/_sim/numbers/{id}", axum::routing::patch(patch_number))
        .route("/_sim/numbers/{id}/force", post(force).delete(clear_force))
        .route("/_sim/recipients", get(list_customers).post(add_recipient))
        .route("/_sim/customers", get(list_customers).post(add_customer))
        .route("/_sim/identity_change", post(identity_change))
        .route("/_sim/inbound", post(inbound))
        .route("/_sim/windows", post(set_window))
        .route("/_sim/clock", get(clock))
        .route("/_sim/clock/advance", post(advance_clock))
        .route("/_sim/templates", get(list_templates).post(seed_template))
        .route("/_sim/templates/{id}/status", post(template_status))
        .route("/_sim/templates/{id}/category", post(template_category))
        .route("/_sim/requests", get(requests).delete(clear_requests))
        .route("/_sim/messages", get(messages))
        .route("/_sim/media", get(list_media))
        .route("/_sim/media/{id}/expire", post(expire_media))
        .route("/_sim/webhooks", get(deliveries).delete(clear_deliveries))
        .route("/_sim/callback", put(set_callback).get(get_callback))
        .route("/_sim/callback/verify", post(verify))
        .route("/_sim/reset", post(reset))
        .with_state(sim)
}

async fn list_numbers(State(sim): State<Arc<Sim>>) -> CtlResult {
    let st = sim.lock();
    let mut v: Vec<_> = st.numbers.values().cloned().collect();
    v.sort_by(|a, b| a.id.cmp(&b.id));
    ok(json!({"data": to_value(&v)}))
}

async fn add_number(
    State(sim): State<Arc<Sim>>,
    b: Result<Json<NumberSpec>, JsonRejection>,
) -> CtlResult {
    let n = sim.register_number(body(b)?)?;
    created(to_value(&n))
}

async fn patch_number(
    State(sim): State<Arc<Sim>>,
    Path(id): Path<String>,
    b: Result<Json<NumberPatch>, JsonRejection>,
) -> CtlResult {
    let n = sim.patch_number(&id, body(b)?)?;
    ok(to_value(&n))
}

async fn force(
    State(sim): State<Arc<Sim>>,
    Path(id): Path<String>,
    b: Result<Json<ForceRequest>, JsonRejection>,
) -> CtlResult {
    let req = body(b)?;
    let queued = sim.force(&id, req.action, req.times.unwrap_or(1))?;
    ok(json!({"queued": queued}))
}

async fn clear_force(State(sim): State<Arc<Sim>>, Path(id): Path<String>) -> CtlResult {
    sim.clear_forced(&id);
    ok(json!({"queued": 0}))
}

async fn list_customers(State(sim): State<Arc<Sim>>) -> CtlResult {
    ok(json!({"data": to_value(&sim.customers())}))
}

async fn add_customer(
    State(sim): State<Arc<Sim>>,
    b: Result<Json<CustomerSpec>, JsonRejection>,
) -> CtlResult {
    let c = sim.register_customer(body(b)?)?;
    created(to_value(&c))
}

async fn identity_change(
    State(sim): State<Arc<Sim>>,
    b: Result<Json<IdentityChangeRequest>, JsonRejection>,
) -> CtlResult {
    ok(sim.change_identity(body(b)?)?)
}

async fn add_recipient(
    State(sim): State<Arc<Sim>>,
    b: Result<Json<RecipientSpec>, JsonRejection>,
) -> CtlResult {
    let r = sim.register_recipient(body(b)?)?;
    created(to_value(&r))
}

async fn inbound(State(sim): State<Arc<Sim>>, b: Result<Json<Value>, JsonRejection>) -> CtlResult {
    let r = sim.inject_inbound(body(b)?)?;
    created(r)
}

#[derive(Deserialize)]
struct WindowReq {
    phone_number_id: String,
    /// The customer: `wa_id` (phone), or `user_id` (BSUID) for customers without one.
    wa_id: Option<String>,
    user_id: Option<String>,
    /// Unix seconds in simulator time; `null` closes the window.
    last_inbound_at: Option<i64>,
}

async fn set_window(
    State(sim): State<Arc<Sim>>,
    b: Result<Json<WindowReq>, JsonRejection>,
) -> CtlResult {
    let w = body(b)?;
    let pnid = &w.phone_number_id;
    match (&w.wa_id, &w.user_id) {
        (Some(wa), _) => sim.set_window(pnid, wa, w.last_inbound_at),
        (None, Some(id)) => sim.set_window_for_user_id(pnid, id, w.last_inbound_at),
        (None, None) => return Err(CtlError::bad_request("wa_id or user_id is required")),
    }
    ok(json!({
        "phone_number_id": w.phone_number_id,
        "wa_id": w.wa_id.as_deref().map(digits),
        "user_id": w.user_id,
        "last_inbound_at": w.last_inbound_at,
    }))
}

async fn clock(State(sim): State<Arc<Sim>>) -> CtlResult {
    ok(json!({"now": sim.now_secs()}))
}

#[derive(Deserialize)]
struct AdvanceReq {
    seconds: i64,
}

async fn advance_clock(
    State(sim): State<Arc<Sim>>,
    b: Result<Json<AdvanceReq>, JsonRejection>,
) -> CtlResult {
    let now = sim.advance_clock(body(b)?.seconds);
    ok(json!({"now": now}))
}

async fn list_templates(State(sim): State<Arc<Sim>>) -> CtlResult {
    let st = sim.lock();
    ok(json!({"data": to_value(&st.templates)}))
}

async fn seed_template(
    State(sim): State<Arc<Sim>>,
    b: Result<Json<TemplateSeed>, JsonRejection>,
) -> CtlResult {
    let t = sim.insert_template(body(b)?);
    created(to_value(&t))
}

async fn template_status(
    State(sim): State<Arc<Sim>>,
    Path(id): Path<String>,
    b: Result<Json<TemplateStatusChange>, JsonRejection>,
) -> CtlResult {
    let c = body(b)?;
    let t = sim.set_template_status(&id, &c.event, c.reason)?;
    ok(to_value(&t))
}

async fn template_category(
    State(sim): State<Arc<Sim>>,
    Path(id): Path<String>,
    b: Result<Json<TemplateCategoryChange>, JsonRejection>,
) -> CtlResult {
    let c = body(b)?;
    let t = sim.set_template_category(&id, &c.new_category)?;
    ok(to_value(&t))
}

#[derive(Deserialize)]
struct RequestFilter {
    method: Option<String>,
    path_contains: Option<String>,
    phone_number_id: Option<String>,
    biz_opaque_callback_data: Option<String>,
}

async fn requests(State(sim): State<Arc<Sim>>, Query(f): Query<RequestFilter>) -> CtlResult {
    let st = sim.lock();
    let data: Vec<_> = st
        .requests
        .iter()
        .filter(|r| {
            f.method
                .as_deref()
                .is_none_or(|m| r.method.eq_ignore_ascii_case(m))
        })
        .filter(|r| {
            f.path_contains
                .as_deref()
                .is_none_or(|p| r.path.contains(p))
        })
        .filter(|r| {
            f.phone_number_id
                .as_deref()
                .is_none_or(|p| r.phone_number_id.as_deref() == Some(p))
        })
        .filter(|r| {
            f.biz_opaque_callback_data
                .as_deref()
                .is_none_or(|b| r.biz_opaque_callback_data.as_deref() == Some(b))
        })
        .collect();
    ok(json!({"data": to_value(&data)}))
}

async fn clear_requests(State(sim): State<Arc<Sim>>) -> CtlResult {
    sim.lock().requests.clear();
    ok(json!({"cleared": true}))
}

async fn messages(State(sim): State<Arc<Sim>>) -> CtlResult {
    let st = sim.lock();
    ok(json!({"data": to_value(&st.messages)}))
}

async fn list_media(State(sim): State<Arc<Sim>>) -> CtlResult {
    ok(json!({"data": to_value(&sim.media_summaries())}))
}

async fn expire_media(State(sim): State<Arc<Sim>>, Path(id): Path<String>) -> CtlResult {
    ok(to_value(&sim.expire_media(&id)?))
}

async fn deliveries(State(sim): State<Arc<Sim>>) -> CtlResult {
    let st = sim.lock();
    ok(json!({"data": to_value(&st.deliveries)}))
}

async fn clear_deliveries(State(sim): State<Arc<Sim>>) -> CtlResult {
    sim.lock().deliveries.clear();
    ok(json!({"cleared": true}))
}

#[derive(Deserialize)]
struct CallbackReq {
    url: Option<String>,
    #[serde(default)]
    verify: bool,
    verify_token: Option<String>,
}

async fn set_callback(
    State(sim): State<Arc<Sim>>,
    b: Result<Json<CallbackReq>, JsonRejection>,
) -> CtlResult {
    let req = body(b)?;
    if let Some(u) = &req.url
        && reqwest::Url::parse(u).is_err()
    {
        return Err(CtlError::bad_request(format!("invalid URL {u:?}")));
    }
    sim.set_callback(req.url.clone());
    let verification = if req.verify {
        verify_callback(&sim, req.verify_token.as_deref()).await?
    } else {
        Value::Null
    };
    ok(json!({"url": req.url, "verification": verification}))
}

async fn get_callback(State(sim): State<Arc<Sim>>) -> CtlResult {
    ok(json!({"url": sim.callback()}))
}

#[derive(Deserialize, Default)]
struct VerifyReq {
    verify_token: Option<String>,
}

async fn verify(State(sim): State<Arc<Sim>>, b: Option<Json<VerifyReq>>) -> CtlResult {
    let req = b.map(|Json(v)| v).unwrap_or_default();
    ok(verify_callback(&sim, req.verify_token.as_deref()).await?)
}

#[derive(Deserialize, Default)]
struct ResetReq {
    #[serde(default)]
    keep_numbers: bool,
}

async fn reset(State(sim): State<Arc<Sim>>, b: Option<Json<ResetReq>>) -> CtlResult {
    let req = b.map(|Json(v)| v).unwrap_or_default();
    sim.reset(req.keep_numbers);
    ok(json!({"reset": true, "kept_numbers": req.keep_numbers}))
}
