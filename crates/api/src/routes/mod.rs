//! The route table. Public API routes are declared once, with their OpenAPI annotations,
//! and the served document is produced from the same list.

pub mod agents;
pub mod campaigns;
pub mod contacts;
pub mod conversations;
pub mod docs;
pub mod events;
pub mod health;
pub mod media;
pub mod messages;
pub mod network_webhook;
pub mod phone_numbers;
pub mod templates;
pub mod test_mode;
pub mod timeline;
pub mod webhooks;

use crate::error::ApiError;
use crate::state::AppState;
use crate::{JSON_BODY_LIMIT, PUBLIC_PREFIX, frame, openapi};
use axum::Router;
use axum::extract::DefaultBodyLimit;
use axum::http::{HeaderMap, Uri, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{any, get};
use tern_domain::Problem;
use tower_http::catch_panic::CatchPanicLayer;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

/// The public API's routes with their OpenAPI operations.
pub fn public_api() -> OpenApiRouter<AppState> {
    OpenApiRouter::with_openapi(openapi::base())
        .routes(routes!(phone_numbers::list_phone_numbers))
        .routes(routes!(messages::send_message))
        .routes(routes!(messages::get_message))
        .routes(routes!(agents::mark_read))
        .routes(routes!(timeline::get_timeline))
        .routes(routes!(test_mode::send_test_inbound))
        .routes(routes!(conversations::list_conversations))
        .routes(routes!(conversations::list_conversation_messages))
        .routes(routes!(contacts::list_contacts, contacts::upsert_contact))
        .routes(routes!(contacts::get_contact, contacts::update_contact))
        .routes(routes!(contacts::record_consent))
        .routes(routes!(contacts::add_tags))
        .routes(routes!(contacts::remove_tag))
        .routes(routes!(agents::block_contact, agents::unblock_contact))
        .routes(routes!(contacts::list_contact_fields))
        .routes(routes!(contacts::list_tags))
        .routes(routes!(
            templates::list_templates,
            templates::create_template
        ))
        .routes(routes!(templates::get_template))
        .routes(routes!(templates::submit_template))
        .routes(routes!(
            webhooks::list_subscriptions,
            webhooks::create_subscription
        ))
        .routes(routes!(
            webhooks::update_subscription,
            webhooks::delete_subscription
        ))
        .routes(routes!(webhooks::rotate_secret))
        .routes(routes!(webhooks::test_subscription))
        .routes(routes!(webhooks::list_deliveries))
        .routes(routes!(webhooks::replay))
        .routes(routes!(events::stream_events))
        .routes(routes!(events::trigger_event))
        .routes(routes!(
            campaigns::list_campaigns,
            campaigns::create_campaign
        ))
        .routes(routes!(campaigns::get_campaign))
        .routes(routes!(campaigns::get_progress))
        .routes(routes!(campaigns::list_recipients))
        .routes(routes!(campaigns::schedule_campaign))
        .routes(routes!(campaigns::resolve_campaign))
        .routes(routes!(campaigns::launch_campaign))
        .routes(routes!(campaigns::pause_campaign))
        .routes(routes!(campaigns::resume_campaign))
        .routes(routes!(media::get_media))
        .routes(routes!(media::download_media))
        // Uploads read up to the file ceiling, not the JSON limit (this inner layer wins).
        .merge(
            OpenApiRouter::new()
                .routes(routes!(media::create_media))
                .layer(DefaultBodyLimit::max(media::UPLOAD_BODY_LIMIT)),
        )
}

/// The whole HTTP surface of `tern serve`.
pub fn router(state: AppState) -> Router {
    let (public, spec) = public_api().split_for_parts();
    state.core.request_log.set_routes(operations(&spec));
    // Serialised once and shared: a handler's captures are cloned with the router (per
    // connection), and a captured `Value` of the whole document cost ~1 MB per open connection.
    // The server variable defaults to this server's public URL, so "try it" and a client
    // generated from the served document reach this server.
    let spec_bytes = bytes::Bytes::from(
        serde_json::to_vec(&openapi::finish_at(spec, &state.public_url)).unwrap_or_default(),
    );
    let public = public
        .route(
            "/openapi.json",
            get(move || {
                let body = spec_bytes.clone();
                async move { ([(header::CONTENT_TYPE, "application/json")], body) }
            }),
        )
        .fallback(not_found)
        .layer(axum::middleware::from_fn(crate::auth::rate_headers));
    Router::new()
        .nest(PUBLIC_PREFIX, public)
        // Tern's own (app) API: sessions only. A public API key is refused here.
        .route("/api/{*rest}", any(app_api))
        .route("/api", any(app_api))
        .merge(health::router())
        .merge(network_webhook::router())
        .merge(docs::router())
        .fallback(not_found)
        .layer(DefaultBodyLimit::max(JSON_BODY_LIMIT))
        .layer(CatchPanicLayer::custom(frame::panic_response))
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            frame::frame,
        ))
        .with_state(state)
}

/// The API's operations as `METHOD /template` (`POST /messages`), by template then method:
/// the request log's route filter.
fn operations(spec: &utoipa::openapi::OpenApi) -> Vec<String> {
    let mut ops: Vec<(&str, &str)> = Vec::new();
    for (path, item) in &spec.paths.paths {
        for (method, op) in [
            ("GET", &item.get),
            ("POST", &item.post),
            ("PUT", &item.put),
            ("PATCH", &item.patch),
            ("DELETE", &item.delete),
        ] {
            if op.is_some() {
                ops.push((path.as_str(), method));
            }
        }
    }
    ops.sort_unstable();
    ops.into_iter().map(|(p, m)| format!("{m} {p}")).collect()
}

async fn not_found() -> ApiError {
    ApiError(crate::frame::unknown_endpoint())
}

async fn app_api(uri: Uri, headers: HeaderMap) -> Response {
    // axum's wildcard wins over the nested router's fallback for unknown public paths.
    if uri.path() == PUBLIC_PREFIX || uri.path().starts_with(&format!("{PUBLIC_PREFIX}/")) {
        let mut res = ApiError(crate::frame::unknown_endpoint()).into_response();
        res.extensions_mut().insert(crate::frame::Unmatched);
        return res;
    }
    let reason = if headers.contains_key(header::AUTHORIZATION) {
        "api_key_not_accepted"
    } else {
        "session_required"
    };
    ApiError(
        Problem::unauthenticated()
            .with_message("API keys work only under /api/public/v1.")
            .with_detail("reason", reason),
    )
    .into_response()
}
