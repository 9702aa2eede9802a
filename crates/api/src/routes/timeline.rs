//! `GET /messages/{message_id}/timeline`: a message's whole story (APP.md §4), an adapter
//! over `tern_core::timeline::page`.

use axum::Json;
use axum::extract::{Path, RawQuery, State};
use serde_json::{Value, json};
use tern_core::timeline;
use tern_domain::timeline::Entry;
use tern_domain::{FieldError, Problem, cursor};
use utoipa::ToSchema;

use crate::auth::{Authed, perm};
use crate::error::ApiError;
use crate::extract::path_id;
use crate::pagination::{ListQuery, Page};
use crate::state::AppState;

/// One entry of a message's timeline (the schema is `timeline_schemas`' `oneOf`).
#[derive(ToSchema)]
#[allow(dead_code)]
pub struct TimelineEntry {}

/// Everything that happened to a message, oldest first.
#[utoipa::path(
    get,
    path = "/messages/{message_id}/timeline",
    tag = "Messages",
    operation_id = "getMessageTimeline",
    description = "Everything that happened to the message, oldest first: its acceptance (key, request id, Idempotency-Key; the key's current name) and each replay, every dispatch attempt with the network's answer, media uploads, every status report (applied or not, and why), the failure with its fix, each event written about it and every delivery attempt of those events, and for a customer's message its receipt, edits and deletion. `at` is when Tern recorded the entry; the network's own time is `network_timestamp`.",
    params(
        ("message_id" = String, Path, format = Uuid),
        ("limit" = Option<i64>, Query, minimum = 1, maximum = 100),
        ("cursor" = Option<String>, Query),
    ),
    responses((status = 200, description = "A page of the message's timeline (oldest first).", body = Page<TimelineEntry>)),
    security(("bearer" = []))
)]
pub async fn get_timeline(
    auth: Authed<perm::MessagesRead>,
    State(state): State<AppState>,
    Path(id): Path<String>,
    RawQuery(query): RawQuery,
) -> Result<Json<Page<Entry>>, ApiError> {
    let id = path_id(&id)?;
    let q = ListQuery::parse(query.as_deref(), &[])?;
    let limit = cursor::parse_limit(q.raw("limit"))
        .map_err(|m| ApiError(Problem::validation(vec![FieldError::new("limit", m)])))?;
    let limit = u32::try_from(limit).unwrap_or(25);
    let page = timeline::page(&state.core, auth.org_id, id, q.raw("cursor"), limit).await?;
    Ok(Json(Page {
        data: page.entries,
        next_cursor: page.next_cursor,
    }))
}

fn time() -> Value {
    json!({"type": "string", "format": "date-time"})
}

fn nullable(mut v: Value) -> Value {
    let t = v["type"].clone();
    v["type"] = json!([t, "null"]);
    v
}

/// The entry kinds' schemas and their union `TimelineEntry` (discriminated by `kind`).
pub fn timeline_schemas() -> Vec<(String, Value)> {
    let s = |d: &str| json!({"type": "string", "description": d});
    let ns = |d: &str| nullable(s(d));
    let uuid = json!({"type": "string", "format": "uuid"});
    let nint = json!({"type": ["integer", "null"]});
    let status = json!({"type": "string", "enum": tern_domain::message::Status::ALL.iter().map(|s| s.as_str()).collect::<Vec<_>>()});
    let kinds: Vec<(&str, &str, &str, Value)> = vec![
        (
            "accepted",
            "TimelineAccepted",
            "The send was accepted.",
            json!({
            "request_id": ns("The request's X-Request-Id."), "key_id": nullable(uuid.clone()),
            "key_name": ns("The key's current name."), "idempotency_key": ns("The Idempotency-Key.")}),
        ),
        (
            "replayed",
            "TimelineReplayed",
            "The same Idempotency-Key and body came again: answered with this message, nothing sent again.",
            json!({"request_id": ns("The repeat's X-Request-Id.")}),
        ),
        (
            "dispatch_attempt",
            "TimelineDispatchAttempt",
            "One attempt to hand the message to the network.",
            json!({
            "attempt": {"type": "integer", "minimum": 1},
            "outcome": {"type": "string", "enum": ["sent", "retry", "failed", "unknown"]},
            "http_status": nint.clone(), "error_code": ns("The network's error code."),
            "error_message": ns("The network's words; when no answer came, what happened instead."),
            "latency_ms": nint.clone(), "next_attempt_at": nullable(time())}),
        ),
        (
            "media_upload",
            "TimelineMediaUpload",
            "The message's file was uploaded to the network.",
            json!({
            "media_id": uuid.clone(), "outcome": {"type": "string", "enum": ["uploaded", "failed"]},
            "network_media_id": ns("The network's id of the file.")}),
        ),
        (
            "status",
            "TimelineStatus",
            "A status report from the network, applied or not.",
            json!({
            "status": status, "network_timestamp": nullable(time()), "received_at": nullable(time()),
            "pricing": {"type": ["object", "null"], "description": "The network's pricing object."},
            "applied": {"type": "boolean", "description": "Whether it changed the message (its status or one of its times)."},
            "reason": {"type": ["string", "null"], "enum": ["duplicate", "out_of_order", "after_final", null]}}),
        ),
        (
            "failed",
            "TimelineFailed",
            "The message failed, and what to do.",
            json!({
            "failure_code": s("Tern's failure code."), "provider_code": ns("The network's code."),
            "provider_message": ns("The network's words."), "explanation": s("What happened, plainly."),
            "fix": ns("What to do about it.")}),
        ),
        (
            "event",
            "TimelineEvent",
            "An event about the message was written for subscriptions or streams.",
            json!({
            "event_id": uuid.clone(), "event_type": s("e.g. message.status")}),
        ),
        (
            "webhook_attempt",
            "TimelineWebhookAttempt",
            "One attempt to deliver such an event to a subscription.",
            json!({
            "subscription_id": uuid.clone(), "event_id": uuid.clone(), "host": s("The receiver's host name."),
            "attempt": {"type": "integer", "minimum": 1}, "response_status": nint.clone(), "latency_ms": nint,
            "outcome": {"type": "string", "enum": ["succeeded", "failed"]}, "next_attempt_at": nullable(time())}),
        ),
        (
            "received",
            "TimelineReceived",
            "A customer's message arrived.",
            json!({"wamid": ns("The network's id.")}),
        ),
        (
            "edited",
            "TimelineEdited",
            "The customer edited it.",
            json!({"wamid": s("The wamid of the customer's edit notice.")}),
        ),
        (
            "revoked",
            "TimelineRevoked",
            "The customer deleted it.",
            json!({"wamid": s("The wamid of the customer's deletion notice.")}),
        ),
        (
            "read_marked",
            "TimelineReadMarked",
            "The business marked it read (`POST /messages/{message_id}/read`), or a later message of the conversation, which reads the earlier ones too.",
            json!({"wamid": ns("The wamid of the message the read mark named.")}),
        ),
        (
            "campaign",
            "TimelineCampaign",
            "A campaign sent it.",
            json!({"campaign_id": uuid}),
        ),
    ];
    let mut out = Vec::new();
    let mut refs = Vec::new();
    let mut mapping = serde_json::Map::new();
    for (kind, name, description, fields) in kinds {
        let mut props = json!({
            "at": {"type": "string", "format": "date-time", "description": "When Tern recorded it."},
            "kind": {"type": "string", "const": kind}
        });
        let mut required = vec![json!("at"), json!("kind")];
        if let (Some(p), Some(f)) = (props.as_object_mut(), fields.as_object()) {
            for (k, v) in f {
                p.insert(k.clone(), v.clone());
                required.push(json!(k));
            }
        }
        let r = format!("#/components/schemas/{name}");
        refs.push(json!({"$ref": r}));
        mapping.insert(kind.into(), json!(r));
        out.push((
            name.to_string(),
            json!({"type": "object", "description": description, "required": required, "properties": props}),
        ));
    }
    out.push((
        "TimelineEntry".into(),
        json!({"description": "One entry of a message's timeline; `kind` names its fields.",
               "oneOf": refs, "discriminator": {"propertyName": "kind", "mapping": mapping}}),
    ));
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn every_kind_has_a_schema() {
        let schemas = super::timeline_schemas();
        let union = &schemas.last().unwrap().1;
        let mapping = union["discriminator"]["mapping"].as_object().unwrap();
        for k in tern_domain::timeline::KINDS {
            assert!(mapping.contains_key(*k), "{k}");
        }
        assert_eq!(mapping.len(), tern_domain::timeline::KINDS.len());
    }
}
