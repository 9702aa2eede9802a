//! The Cloud API surface: `/{version}/…` endpoints, plus the media download URL.
//!
//! Every request to these routes is recorded (see [`log_requests`]) before any validation,
//! so tests can prove what reached the "network" and how often.

use std::sync::Arc;
use std::time::Duration;

use axum::{
    Json, Router,
    body::Body,
    extract::{Multipart, Path, Query, Request, State},
    http::{HeaderMap, StatusCode, header},
    middleware::{self, Next},
    response::{IntoResponse, Response},
    routing::{get, post},
};
use bytes::Bytes;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use crate::agents;
use crate::customers::Target;
use crate::graph::GraphErr;
use crate::magic;
use crate::media;
use crate::model::{Behaviour, ForcedAction, MediaOrigin, Number, RequestRecord};
use crate::state::{Sim, unix_now_ms};
use crate::templates;
use crate::validate::{ValidSend, validate_send};

/// Largest accepted request body (documents may be 100 MB).
const BODY_LIMIT: usize = 110 * 1024 * 1024;
const DEFAULT_HANG_MS: u64 = 30_000;

/// Sequence number of the request-log record of the current request.
#[derive(Clone, Copy, Debug)]
struct ReqSeq(u64);

/// What a handler tells the request log about the request it served.
#[derive(Clone, Debug, Default)]
struct Note {
    phone_number_id: Option<String>,
    wamid: Option<String>,
    biz_opaque_callback_data: Option<String>,
    forced: Option<String>,
    media_id: Option<String>,
}

pub fn router(sim: Arc<Sim>) -> Router {
    Router::new()
        .route("/{version}/{id}/messages", post(send_message))
        .route("/{version}/{id}/media", post(upload_media))
        .route(
            "/{version}/{id}/block_users",
            get(agents::list_blocked)
                .post(agents::block_users)
                .delete(agents::unblock_users),
        )
        .route(
            "/{version}/{id}/message_templates",
            get(templates::list_templates)
                .post(templates::create_template)
                .delete(templates::delete_template),
        )
        .route("/{version}/{id}", get(get_object).delete(delete_object))
        .route("/_media/{id}", get(download_media))
        .route_layer(middleware::from_fn_with_state(
            Arc::clone(&sim),
            log_requests,
        ))
        .layer(axum::extract::DefaultBodyLimit::max(BODY_LIMIT))
        .with_state(sim)
}

async fn log_requests(State(sim): State<Arc<Sim>>, req: Request, next: Next) -> Response {
    let (parts, body) = req.into_parts();
    let bytes = match axum::body::to_bytes(body, BODY_LIMIT).await {
        Ok(b) => b,
        Err(_) => {
            return graph(
                &sim,
                GraphErr::invalid_param("Request body too large or unreadable"),
            );
        }
    };
    let is_multipart = parts
        .headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|c| c.starts_with("multipart/"));
    let body_value = if bytes.is_empty() {
        Value::Null
    } else if is_multipart {
        json!({"_multipart_bytes": bytes.len()})
    } else {
        serde_json::from_slice(&bytes).unwrap_or_else(|_| {
            let cut = &bytes[..bytes.len().min(4096)];
            json!({"_raw": String::from_utf8_lossy(cut)})
        })
    };
    let seq = {
        let mut st = sim.lock();
        let seq = st.next_seq();
        st.requests.push(RequestRecord {
            seq,
            method: parts.method.to_string(),
            path: parts.uri.path().to_owned(),
            query: parts.uri.query().map(str::to_owned),
            received_at_ms: unix_now_ms(),
            body: body_value,
            response_status: None,
            phone_number_id: None,
            wamid: None,
            biz_opaque_callback_data: None,
            forced: None,
            media_id: None,
        });
        seq
    };
    let mut req = Request::from_parts(parts, Body::from(bytes));
    req.extensions_mut().insert(ReqSeq(seq));
    let resp = next.run(req).await;
    let note = resp.extensions().get::<Note>().cloned();
    let mut st = sim.lock();
    if let Some(r) = st.requests.iter_mut().rev().find(|r| r.seq == seq) {
        r.response_status = Some(resp.status().as_u16());
    }
    drop(st);
    if let Some(note) = note {
        annotate(&sim, seq, &note);
    }
    resp
}

/// Attach what a handler learned to its request-log record. Handlers that may never finish
/// (a forced hang whose client gave up) call this before waiting.
fn annotate(sim: &Sim, seq: u64, note: &Note) {
    let mut st = sim.lock();
    if let Some(r) = st.requests.iter_mut().rev().find(|r| r.seq == seq) {
        r.phone_number_id.clone_from(&note.phone_number_id);
        r.wamid.clone_from(&note.wamid);
        r.biz_opaque_callback_data
            .clone_from(&note.biz_opaque_callback_data);
        r.forced.clone_from(&note.forced);
        r.media_id.clone_from(&note.media_id);
    }
}

pub(crate) fn graph(sim: &Sim, e: GraphErr) -> Response {
    let trace = sim.lock().fbtrace_id();
    e.into_response_with(&trace)
}

fn with_note(mut resp: Response, note: Note) -> Response {
    resp.extensions_mut().insert(note);
    resp
}

/// Any `vNN.N` (or `vNN`).
pub(crate) fn check_version(v: &str) -> Result<(), GraphErr> {
    let ok = v.strip_prefix('v').is_some_and(|rest| {
        let mut parts = rest.split('.');
        let major = parts.next().unwrap_or("");
        let minor = parts.next();
        !major.is_empty()
            && major.bytes().all(|b| b.is_ascii_digit())
            && minor.is_none_or(|m| !m.is_empty() && m.bytes().all(|b| b.is_ascii_digit()))
            && parts.next().is_none()
    });
    if ok {
        Ok(())
    } else {
        Err(GraphErr::invalid_param(format!("Unknown path components: /{v}")).status(400))
    }
}

fn bearer(headers: &HeaderMap) -> Option<&str> {
    let v = headers.get(header::AUTHORIZATION)?.to_str().ok()?;
    let (scheme, token) = v.split_once(' ')?;
    let token = token.trim();
    (scheme.eq_ignore_ascii_case("bearer") && !token.is_empty()).then_some(token)
}

/// Token → 104/190; object must be this token's number → else 100/33.
pub(crate) fn authorize_number(
    sim: &Sim,
    headers: &HeaderMap,
    id: &str,
    method: &str,
) -> Result<Number, GraphErr> {
    let token = bearer(headers).ok_or_else(GraphErr::missing_token)?;
    let st = sim.lock();
    if st.number_by_token(token).is_none() {
        return Err(GraphErr::bad_token());
    }
    match st.numbers.get(id) {
        Some(n) if n.access_token == token => Ok(n.clone()),
        _ => Err(GraphErr::unknown_object(id, method)),
    }
}

/// Token must belong to a number of this WABA.
pub(crate) fn authorize_waba(
    sim: &Sim,
    headers: &HeaderMap,
    waba: &str,
    method: &str,
) -> Result<Number, GraphErr> {
    let token = bearer(headers).ok_or_else(GraphErr::missing_token)?;
    let st = sim.lock();
    if st.number_by_token(token).is_none() {
        return Err(GraphErr::bad_token());
    }
    st.numbers
        .values()
        .find(|n| n.waba_id == waba && n.access_token == token)
        .cloned()
        .ok_or_else(|| GraphErr::unknown_object(waba, method))
}

// ---- POST /{version}/{pnid}/messages -------------------------------------------------------

async fn send_message(
    State(sim): State<Arc<Sim>>,
    Path((version, pnid)): Path<(String, String)>,
    seq: Option<axum::Extension<ReqSeq>>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let mut note = Note {
        phone_number_id: Some(pnid.clone()),
        ..Note::default()
    };
    let seq = seq.map(|axum::Extension(s)| s.0);
    let resp = send_inner(&sim, &version, &pnid, &headers, &body, &mut note, seq).await;
    with_note(resp, note)
}

async fn send_inner(
    sim: &Arc<Sim>,
    version: &str,
    pnid: &str,
    headers: &HeaderMap,
    body: &[u8],
    note: &mut Note,
    seq: Option<u64>,
) -> Response {
    if let Err(e) = check_version(version) {
        return graph(sim, e);
    }
    let number = match authorize_number(sim, headers, pnid, "post") {
        Ok(n) => n,
        Err(e) => return graph(sim, e),
    };
    let forced = sim.lock().pop_forced(pnid);
    note.forced = forced.as_ref().map(|f| f.label().to_owned());
    let (accept, fail_async) = match &forced {
        Some(ForcedAction::Error {
            code,
            subcode,
            http_status,
            title,
            details,
        }) => {
            let mut e = GraphErr::new(*code);
            e.subcode = *subcode;
            if let Some(s) = http_status {
                e.http_status = *s;
            }
            if let Some(t) = title {
                e.message = format!("(#{code}) {t}");
            }
            e.details = details.clone();
            return graph(sim, e);
        }
        Some(ForcedAction::Html { http_status }) => {
            let status = StatusCode::from_u16(*http_status).unwrap_or(StatusCode::BAD_GATEWAY);
            return (
                status,
                [(header::CONTENT_TYPE, "text/html")],
                format!("<html><body><h1>{status}</h1>Simulated proxy error</body></html>"),
            )
                .into_response();
        }
        Some(ForcedAction::Hang { accept, .. } | ForcedAction::Drop { accept }) => (*accept, None),
        Some(ForcedAction::FailAsync { code, details }) => (true, Some((*code, details.clone()))),
        None => (true, None),
    };

    let result = if accept {
        process_send(sim, &number, body, fail_async)
    } else {
        Err(GraphErr::new(131000))
    };
    let resp = match result {
        Ok((wamid, biz, answer)) => {
            note.wamid = (!wamid.is_empty()).then_some(wamid);
            note.biz_opaque_callback_data = biz;
            Json(answer).into_response()
        }
        Err(e) => graph(sim, e),
    };
    if let Some(seq) = seq {
        annotate(sim, seq, note);
    }
    match forced {
        Some(ForcedAction::Hang { ms, .. }) => {
            let mut stop = sim.shutdown.clone();
            tokio::select! {
                () = tokio::time::sleep(Duration::from_millis(ms.unwrap_or(DEFAULT_HANG_MS))) => {}
                _ = stop.wait_for(|s| *s) => {}
            }
            resp
        }
        Some(ForcedAction::Drop { .. }) => {
            // Headers promise a body, then the stream fails: the connection is cut mid-answer.
            let stream = futures::stream::once(async {
                Err::<Bytes, std::io::Error>(std::io::Error::other("simulated connection drop"))
            });
            Response::builder()
                .status(StatusCode::OK)
                .header(header::CONTENT_TYPE, "application/json")
                .header(header::CONTENT_LENGTH, "256")
                .body(Body::from_stream(stream))
                .unwrap_or(resp)
        }
        _ => resp,
    }
}

/// Rate limits, validation, acceptance. Returns (wamid, biz data, answer body).
fn process_send(
    sim: &Arc<Sim>,
    number: &Number,
    body: &[u8],
    fail_async: Option<(i64, Option<String>)>,
) -> Result<(String, Option<String>, Value), GraphErr> {
    let payload: Value = serde_json::from_slice(body).map_err(|_| {
        GraphErr::invalid_param("Invalid parameter").details("The request body is not valid JSON.")
    })?;
    let (valid, target) = {
        let mut st = sim.lock();
        if !st.take_throughput(number) {
            return Err(refusal(130429, number));
        }
        // mark-as-read (and typing) uses the same endpoint
        if payload.get("status").and_then(Value::as_str) == Some("read") {
            return st
                .mark_read(number, &payload)
                .map(|a| (String::new(), None, a));
        }
        let valid = validate_send(&payload, number, &st.templates)?;
        let mut target = st.resolve_target(sim.args.seed, &valid);
        if sim.args.magic_recipients {
            magic::apply(&mut target);
        }
        // A blocked customer receives nothing.
        if st.is_blocked(&number.id, &target.key) {
            return Err(GraphErr::new(130403)
                .details("The business blocked this user; unblock them to message them."));
        }
        if target.behaviour == Behaviour::RefusesTwice
            && st.refuse_attempt(&number.id, message_key(&valid, &target, &payload))
        {
            return Err(refusal(target.fail_code.unwrap_or(131056), number));
        }
        if !st.take_pair(number, &target.key) {
            return Err(refusal(131056, number));
        }
        (valid, target)
    };
    let wamid = sim.accept_message(number, &valid, &target, payload, fail_async);
    let mut msg = json!({"id": wamid});
    if valid.is_template() {
        msg["message_status"] = json!("accepted");
    }
    // `wa_id` for phone sends, `user_id` for BSUID sends (never both).
    let contact = if valid.recipient.is_some() {
        json!({"input": valid.to, "user_id": target.user_id})
    } else {
        json!({"input": valid.to, "wa_id": valid.wa_id})
    };
    let answer = json!({
        "messaging_product": "whatsapp",
        "contacts": [contact],
        "messages": [msg],
    });
    Ok((wamid, valid.biz_opaque_callback_data, answer))
}

/// The network's refusal of a send for a rate limit (130429, 131056) or another code.
fn refusal(code: i64, number: &Number) -> GraphErr {
    match code {
        130429 => GraphErr::new(code).details(format!(
            "Message failed to send because there were too many messages sent from this phone number \
             in a short period of time ({} messages per second).",
            number.throughput_mps
        )),
        131056 => GraphErr::new(code).details(
            "Message failed to send because there were too many messages sent from this phone \
             number to the same phone number in a short period of time.",
        ),
        _ => GraphErr::new(code),
    }
}

/// What makes attempts "the same message": its `biz_opaque_callback_data` (a client's retry
/// carries the same), else the recipient and a hash of the body.
fn message_key(send: &ValidSend, target: &Target, payload: &Value) -> String {
    match &send.biz_opaque_callback_data {
        Some(b) => format!("biz:{}:{b}", target.key),
        None => {
            let bytes = serde_json::to_vec(payload).unwrap_or_default();
            format!("body:{}:{}", target.key, hex::encode(Sha256::digest(bytes)))
        }
    }
}

// ---- media ---------------------------------------------------------------------------------

async fn upload_media(
    State(sim): State<Arc<Sim>>,
    Path((version, pnid)): Path<(String, String)>,
    headers: HeaderMap,
    multipart: Result<Multipart, axum::extract::multipart::MultipartRejection>,
) -> Response {
    let mut note = Note {
        phone_number_id: Some(pnid.clone()),
        ..Note::default()
    };
    let resp = match upload_inner(&sim, &version, &pnid, &headers, multipart).await {
        Ok(id) => {
            let resp = Json(json!({"id": id})).into_response();
            note.media_id = Some(id);
            resp
        }
        Err(e) => graph(&sim, e),
    };
    with_note(resp, note)
}

async fn upload_inner(
    sim: &Sim,
    version: &str,
    pnid: &str,
    headers: &HeaderMap,
    multipart: Result<Multipart, axum::extract::multipart::MultipartRejection>,
) -> Result<String, GraphErr> {
    check_version(version)?;
    let number = authorize_number(sim, headers, pnid, "post")?;
    let mut mp =
        multipart.map_err(|_| GraphErr::invalid_param("Expected a multipart/form-data body"))?;
    let (mut product, mut type_field, mut file) = (None, None, None);
    loop {
        let field = match mp.next_field().await {
            Ok(Some(f)) => f,
            Ok(None) => break,
            Err(_) => return Err(GraphErr::invalid_param("Malformed multipart body")),
        };
        let name = field.name().unwrap_or("").to_owned();
        let ctype = field.content_type().map(str::to_owned);
        let file_name = field.file_name().map(str::to_owned);
        let data = field
            .bytes()
            .await
            .map_err(|_| GraphErr::invalid_param("Malformed multipart body"))?;
        match name.as_str() {
            "messaging_product" => product = Some(String::from_utf8_lossy(&data).into_owned()),
            "type" => type_field = Some(String::from_utf8_lossy(&data).into_owned()),
            "file" => file = Some((ctype, file_name, data)),
            _ => {}
        }
    }
    if product.as_deref() != Some("whatsapp") {
        return Err(GraphErr::invalid_param(
            "The parameter messaging_product is required.",
        ));
    }
    let (ctype, file_name, data) = file.ok_or_else(|| GraphErr::missing("file"))?;
    let mime_full = type_field
        .or(ctype)
        .ok_or_else(|| GraphErr::missing("type"))?;
    let mime = mime_full
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_lowercase();
    let limit = media::size_limit(&mime)
        .ok_or_else(|| GraphErr::new(131053).details(format!("Unsupported MIME type {mime}.")))?;
    if data.is_empty() || data.len() > limit {
        return Err(GraphErr::new(131053).details(format!(
            "File size {} is not within the allowed range for {mime} (max {limit} bytes).",
            data.len()
        )));
    }
    if let Some(name) = file_name.as_deref()
        && media::extension_mimes(name).is_some_and(|m| !m.contains(&mime.as_str()))
    {
        return Err(GraphErr::new(131053).details(format!(
            "MIME type mismatch: the file name {name:?} does not fit the type {mime}."
        )));
    }
    if !media::content_matches(&mime, &data) {
        return Err(GraphErr::new(131053).details(format!(
            "MIME type mismatch: the file was declared as {mime} but its content is {}.",
            media::detected(&data)
        )));
    }
    Ok(sim.store_media(Some(&number.id), &mime, data, MediaOrigin::Upload))
}

async fn get_object(
    State(sim): State<Arc<Sim>>,
    Path((version, id)): Path<(String, String)>,
    Query(q): Query<Vec<(String, String)>>,
    headers: HeaderMap,
) -> Response {
    let owner = q
        .iter()
        .find(|(k, _)| k == "phone_number_id")
        .map(|(_, v)| v.as_str());
    get_object_inner(&sim, &version, &id, owner, &headers).unwrap_or_else(|e| graph(&sim, e))
}

fn get_object_inner(
    sim: &Sim,
    version: &str,
    id: &str,
    owner: Option<&str>,
    headers: &HeaderMap,
) -> Result<Response, GraphErr> {
    check_version(version)?;
    let token = bearer(headers).ok_or_else(GraphErr::missing_token)?;
    let (number, media_live) = {
        let st = sim.lock();
        if st.number_by_token(token).is_none() {
            return Err(GraphErr::bad_token());
        }
        (st.numbers.get(id).cloned(), st.live_media(id).is_some())
    };
    if let Some(n) = number {
        if n.access_token != token {
            return Err(GraphErr::unknown_object(id, "get"));
        }
        return Ok(Json(json!({
            "id": n.id,
            "display_phone_number": n.display_phone_number,
            "verified_name": n.verified_name,
            "quality_rating": n.quality_rating,
            "platform_type": "CLOUD_API",
            "throughput": {"level": if n.throughput_mps > 80 { "HIGH" } else { "STANDARD" }},
            "status": n.status,
            "code_verification_status": "VERIFIED",
            "name_status": "APPROVED",
            "messaging_limit_tier": "TIER_2K",
            "account_mode": "LIVE",
        }))
        .into_response());
    }
    // an expired media id is as unknown as one that never existed
    if media_live && let Some((url, m)) = sim.media_url(id) {
        // `?phone_number_id=` must match the uploader when given (reference §4)
        if let (Some(o), Some(up)) = (owner, m.phone_number_id.as_deref())
            && o != up
        {
            return Err(GraphErr::invalid_param("Invalid parameter")
                .details(format!("Media {id} does not belong to phone number {o}.")));
        }
        return Ok(Json(json!({
            "messaging_product": "whatsapp",
            "url": url,
            "mime_type": m.mime_type,
            "sha256": m.sha256_hex,
            "file_size": m.bytes.len(),
            "id": m.id,
        }))
        .into_response());
    }
    Err(GraphErr::unknown_object(id, "get"))
}

async fn delete_object(
    State(sim): State<Arc<Sim>>,
    Path((version, id)): Path<(String, String)>,
    headers: HeaderMap,
) -> Response {
    let r = (|| {
        check_version(&version)?;
        let token = bearer(&headers).ok_or_else(GraphErr::missing_token)?;
        let mut st = sim.lock();
        if st.number_by_token(token).is_none() {
            return Err(GraphErr::bad_token());
        }
        if st.live_media(&id).is_none() {
            return Err(GraphErr::unknown_object(&id, "delete"));
        }
        st.media.remove(&id);
        Ok(Json(json!({"success": true})).into_response())
    })();
    r.unwrap_or_else(|e| graph(&sim, e))
}

async fn download_media(
    State(sim): State<Arc<Sim>>,
    Path(id): Path<String>,
    Query(q): Query<Vec<(String, String)>>,
    headers: HeaderMap,
) -> Response {
    let Some(token) = bearer(&headers) else {
        return graph(&sim, GraphErr::missing_token().status(401));
    };
    let st = sim.lock();
    if st.number_by_token(token).is_none() {
        return graph_locked(st, GraphErr::bad_token());
    }
    let now = st.now_secs();
    let Some(m) = st.live_media(&id) else {
        return StatusCode::NOT_FOUND.into_response();
    };
    // URLs from GET /{media-id} carry a token valid 5 minutes (simulator clock); webhook
    // URLs carry none and work as long as the media id does.
    if let Some((_, given)) = q.iter().find(|(k, _)| k == "token") {
        let valid = m
            .url_token
            .as_ref()
            .is_some_and(|(t, at)| t == given && now < at.saturating_add(media::URL_TTL_SECS));
        if !valid {
            return StatusCode::NOT_FOUND.into_response();
        }
    }
    (
        [(header::CONTENT_TYPE, m.mime_type.clone())],
        m.bytes.clone(),
    )
        .into_response()
}

fn graph_locked(mut st: std::sync::MutexGuard<'_, crate::state::Inner>, e: GraphErr) -> Response {
    let trace = st.fbtrace_id();
    e.into_response_with(&trace)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions() {
        for ok in ["v25.0", "v19.0", "v3", "v100.12"] {
            assert!(check_version(ok).is_ok(), "{ok}");
        }
        for bad in ["25.0", "v", "v25.", "vx.0", "_sim", "v1.2.3"] {
            assert!(check_version(bad).is_err(), "{bad}");
        }
    }
}
