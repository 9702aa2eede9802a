//! Events without a public URL (`developer.webhooks.manage`): `GET /events/stream`, a
//! Server-Sent Events stream of the organisation's events, and `POST /events/trigger`, a
//! sample event for every subscription and stream. Adapters over
//! `tern_core::webhooks::{stream, trigger}`.

use crate::auth::{Authed, perm};
use crate::error::ApiError;
use crate::extract::{QueryParams, parse_json};
use crate::state::AppState;
use axum::Json;
use axum::extract::{RawQuery, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::sse::{Event, Sse};
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::convert::Infallible;
use tern_core::webhooks::stream::{self, Frame};
use tern_core::webhooks::trigger;
use utoipa::ToSchema;

use super::webhooks::EventTypeName;

/// Frames waiting to be written to one connection.
const BUFFER: usize = 256;

/// The organisation's events as they happen, as Server-Sent Events: each message has
/// `event:` the event type, `id:` the event id and `data:` the event body exactly as a
/// subscription receives it (one line of JSON). A first connection starts from now. One
/// stream exists per key and `types`: reconnecting with `Last-Event-ID` (within 24 hours of
/// the last connection) acknowledges the events up to that one and sends everything after
/// it (also what was sent but not received), with no gap and no repeat; an unknown or
/// expired id starts from now, said in a first comment line. A new connection of the same
/// key and `types` takes the stream over (the older one ends with a comment). A comment
/// every 15 s keeps idle connections open. The whole stream counts as one request.
#[utoipa::path(
    get,
    path = "/events/stream",
    tag = "Webhooks",
    operation_id = "streamEvents",
    params(
        ("types" = Option<String>, Query,
            description = "Comma-separated event types (e.g. `message.status,message.received`); all types when absent.",
            example = "message.status,message.received"),
        ("Last-Event-ID" = Option<String>, Header,
            description = "The id of the last event received: the stream resumes after it."),
    ),
    responses((status = 200,
        description = "An endless `text/event-stream` (`Cache-Control: no-cache`).",
        content_type = "text/event-stream", body = String,
        example = "event: message.status\nid: 01936f4e-0000-7000-8000-000000000000\ndata: {\"id\":\"01936f4e-0000-7000-8000-000000000000\",\"type\":\"message.status\",\"version\":1,\"created_at\":\"2026-01-31T12:00:00.000Z\",\"data\":{}}\n\n")),
    security(("bearer" = []))
)]
pub async fn stream_events(
    auth: Authed<perm::DeveloperWebhooksManage>,
    State(state): State<AppState>,
    headers: HeaderMap,
    RawQuery(query): RawQuery,
) -> Result<Response, ApiError> {
    let params = QueryParams::parse(query.as_deref(), &["types"])?;
    let types = tern_domain::events::stream::parse_types(params.get("types"))?;
    let last = headers
        .get("last-event-id")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let opened = stream::open(&state.core, &auth, &types, last.as_deref()).await?;
    let (tx, rx) = tokio::sync::mpsc::channel::<Frame>(BUFFER);
    let closing = state.closing();
    tokio::spawn(async move {
        let ended = opened.run(tx, closing).await;
        tracing::debug!(?ended, "event stream ended");
    });
    let frames = futures::stream::unfold(rx, |mut rx| async move {
        let frame = rx.recv().await?;
        Some((Ok::<Event, Infallible>(sse_event(frame)), rx))
    });
    let mut res = Sse::new(frames).into_response();
    let h = res.headers_mut();
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    // Proxies (nginx) must pass each message on as it comes.
    h.insert("x-accel-buffering", HeaderValue::from_static("no"));
    Ok(res)
}

fn sse_event(frame: Frame) -> Event {
    match frame {
        // Comments are Tern's own words (a client's text is stripped of control characters).
        Frame::Comment(c) => Event::default().comment(c),
        Frame::Event {
            id,
            event_type,
            data,
        } => Event::default().event(event_type).id(id).data(data),
    }
}

/// `POST /events/trigger`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)]
pub struct TriggerRequest {
    /// The type of the sample event.
    pub r#type: EventTypeName,
}

/// What a trigger stored.
#[derive(Debug, Serialize, ToSchema)]
pub struct Triggered {
    /// The sample event's id (`webhook-id`, SSE `id`).
    #[schema(format = Uuid)]
    pub event_id: String,
    /// The subscriptions and streams it goes to; 0 when none wants the type (then nothing
    /// is stored).
    pub recipients: u64,
}

/// Sends one sample event of `type` (the data a subscription's test send of that type
/// carries) to every enabled subscription of the organisation that lists the type and to
/// every event stream that wants it, through the normal delivery (retries included).
#[utoipa::path(
    post,
    path = "/events/trigger",
    tag = "Webhooks",
    operation_id = "triggerEvent",
    request_body(content = TriggerRequest, content_type = "application/json"),
    responses((status = 202, description = "The event is stored for delivery.", body = Triggered)),
    security(("bearer" = []))
)]
pub async fn trigger_event(
    auth: Authed<perm::DeveloperWebhooksManage>,
    State(state): State<AppState>,
    body: axum::body::Bytes,
) -> Result<(StatusCode, Json<Triggered>), ApiError> {
    let body: Value = parse_json(&body)?;
    let kind = tern_domain::events::stream::parse_trigger(&body)?;
    let t = trigger::trigger(&state.core, &auth, kind).await?;
    Ok((
        StatusCode::ACCEPTED,
        Json(Triggered {
            event_id: t.event_id.to_string(),
            recipients: t.recipients as u64,
        }),
    ))
}
