//! The messaging network's webhook: `GET/POST /webhooks/whatsapp` (no API key).
//!
//! A POST is checked against `X-Hub-Signature-256` over the exact bytes received, stored
//! durably as it came, and only then answered 200; processing happens afterwards in the
//! inbox worker. So a crash after the answer loses nothing, and the network's retry of a
//! batch we already stored is harmless (events are de-duplicated when processed).

use crate::error::ApiError;
use crate::state::AppState;
use axum::Router;
use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, RawQuery, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use tern_domain::{ErrorCode, Problem};

/// Batches of hundreds of entries stay far below this.
pub const NETWORK_BODY_LIMIT: usize = 8 * 1024 * 1024;

pub fn router() -> Router<AppState> {
    Router::new()
        .route(
            "/webhooks/whatsapp",
            get(verify)
                .post(receive)
                .layer(DefaultBodyLimit::max(NETWORK_BODY_LIMIT)),
        )
        .route(
            "/webhooks/whatsapp/test",
            post(receive_test).layer(DefaultBodyLimit::max(NETWORK_BODY_LIMIT)),
        )
}

/// The built-in test network's webhooks (APP.md §5): signed with a secret derived from the
/// master key that never leaves the processes, stored in the same inbox as the network's.
/// Only test numbers' notifications are taken: the secret cannot speak for a live number.
async fn receive_test(
    State(state): State<AppState>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Response, ApiError> {
    let signature = headers
        .get(tern_cloudapi::SIGNATURE_HEADER)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default();
    let verified = state
        .network
        .test_secret
        .as_deref()
        .is_some_and(|secret| tern_cloudapi::verify_signature(secret, &body, signature));
    if !verified {
        return Err(ApiError(
            Problem::unauthenticated()
                .with_message("The test network's signature is missing or wrong.")
                .with_detail("reason", "bad_signature"),
        ));
    }
    if !tern_core::test_space::only_test_numbers(&state.db, &body).await? {
        return Err(ApiError(
            Problem::new(ErrorCode::PermissionDenied)
                .with_message("The test network speaks only for test numbers.")
                .with_detail("reason", "not_a_test_number"),
        ));
    }
    // Nothing of the request is held while the store commits (see `own_copy`).
    let signature = signature.to_owned();
    drop(headers);
    tern_core::inbox::receive(&state.core.intake, own_copy(body), signature).await?;
    Ok((
        StatusCode::OK,
        axum::Json(serde_json::json!({"received": true})),
    )
        .into_response())
}

/// The subscription handshake (`tern_cloudapi::subscription_challenge` decides).
async fn verify(State(state): State<AppState>, RawQuery(query): RawQuery) -> Response {
    let params: Vec<(String, String)> =
        serde_urlencoded::from_str(query.as_deref().unwrap_or_default()).unwrap_or_default();
    match tern_cloudapi::subscription_challenge(&params, state.network.verify_token.as_deref()) {
        Some(challenge) => (
            [(header::CONTENT_TYPE, "text/plain")],
            challenge.to_string(),
        )
            .into_response(),
        None => ApiError(
            Problem::new(ErrorCode::PermissionDenied)
                .with_message("The verification token does not match.")
                .with_detail("reason", "verify_token_mismatch")
                .with_fix("Set the webhook's verify token in the network's app settings to Tern's TERN_VERIFY_TOKEN."),
        )
        .into_response(),
    }
}

async fn receive(
    State(state): State<AppState>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Response, ApiError> {
    let Some(secret) = &state.network.app_secret else {
        // Without the secret nothing can be verified; 503 makes the network retry later.
        tracing::error!("network webhook received but TERN_APP_SECRET is not set");
        return Err(ApiError(
            Problem::unavailable()
                .with_message("Webhook receiving is not configured.")
                .with_fix("The operator sets TERN_APP_SECRET (the network app's secret) and restarts Tern."),
        ));
    };
    let signature = headers
        .get(tern_cloudapi::SIGNATURE_HEADER)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default();
    if !tern_cloudapi::verify_signature(secret, &body, signature) {
        metrics::counter!("tern_network_webhooks_total", "result" => "bad_signature").increment(1);
        return Err(ApiError(
            Problem::unauthenticated()
                .with_message("The X-Hub-Signature-256 signature is missing or wrong.")
                .with_detail("reason", "bad_signature")
                .with_fix("Sign the body with the app secret that Tern has as TERN_APP_SECRET (HMAC-SHA256, sent as X-Hub-Signature-256: sha256=<hex>)."),
        ));
    }
    // Stored: the store wakes this process's inbox worker.
    // Nothing of the request is held while the store commits (see `own_copy`).
    let signature = signature.to_owned();
    drop(headers);
    tern_core::inbox::receive(&state.core.intake, own_copy(body), signature).await?;
    metrics::counter!("tern_network_webhooks_total", "result" => "stored").increment(1);
    Ok((
        StatusCode::OK,
        axum::Json(serde_json::json!({"received": true})),
    )
        .into_response())
}

/// The body in an allocation of its own, the request's given up: a request's body and
/// header values are slices of the connection's read buffer, and while the store's commit
/// is awaited hyper reads ahead on the connection; a buffer still shared then is not
/// reused but replaced, about 8 KB more for every webhook in flight (the network sends
/// hundreds at once). The handlers drop the headers before that wait too.
fn own_copy(body: Bytes) -> Vec<u8> {
    body.to_vec()
}
