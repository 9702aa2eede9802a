//! Test mode's own routes (APP.md §5): `POST /test/inbound`, a customer writing in to the
//! test space's number. Test keys only; a live key gets `404`.

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use serde::Serialize;
use serde_json::Value;
use utoipa::ToSchema;

use crate::auth::{Authed, perm};
use crate::error::ApiError;
use crate::extract::ApiJson;
use crate::state::AppState;

/// The network's id of the customer's message.
#[derive(Serialize, ToSchema)]
pub struct TestInbound {
    pub wamid: String,
}

/// A customer writes in (test keys only).
#[utoipa::path(
    post,
    path = "/test/inbound",
    tag = "Test mode",
    operation_id = "sendTestInbound",
    description = "A customer writes in to the test space's number: the built-in test network sends Tern its signed webhook, exactly as the real network does for a customer's message, so the conversation's 24-hour window opens and `message.received` fires. The body is `from` (digits, no `+`) or `user_id`, `type`, the type's object (e.g. `\"text\": {\"body\": \"Hi\"}`) and an optional `profile_name`. Test keys only: a live key gets `404`.",
    request_body(content = Object, description = "`from` or `user_id`, `type`, the type's object, optional `profile_name`."),
    responses((status = 202, description = "The network took the customer's message; its webhook follows.", body = TestInbound)),
    security(("bearer" = []))
)]
pub async fn send_test_inbound(
    auth: Authed<perm::MessagesSend>,
    State(state): State<AppState>,
    ApiJson(body): ApiJson<Value>,
) -> Result<(StatusCode, Json<TestInbound>), ApiError> {
    let wamid = tern_core::test_space::inbound(&state.core, &auth, &body).await?;
    Ok((StatusCode::ACCEPTED, Json(TestInbound { wamid })))
}
