//! Liveness, readiness and Prometheus metrics, outside the public API.

use crate::error::ApiError;
use crate::state::AppState;
use axum::Router;
use axum::extract::State;
use axum::http::header;
use axum::response::IntoResponse;
use axum::routing::get;
use tern_domain::Problem;

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .route("/metrics", get(metrics))
}

/// The process is up.
async fn healthz() -> impl IntoResponse {
    axum::Json(serde_json::json!({"status": "ok"}))
}

/// The instance can serve: the database answers and it is not shutting down.
async fn readyz(State(state): State<AppState>) -> Result<impl IntoResponse, ApiError> {
    if state.is_draining() {
        return Err(ApiError(
            Problem::unavailable().with_message("Shutting down."),
        ));
    }
    state.db.ping().await.map_err(|e| {
        tracing::warn!(error = %e, "readiness check failed");
        ApiError(Problem::unavailable().with_message("The database does not answer."))
    })?;
    Ok(axum::Json(
        serde_json::json!({"status": "ready", "database": "ok"}),
    ))
}

async fn metrics(State(state): State<AppState>) -> impl IntoResponse {
    let body = state
        .metrics
        .as_ref()
        .map(|h| h.render())
        .unwrap_or_default();
    ([(header::CONTENT_TYPE, "text/plain; version=0.0.4")], body)
}
