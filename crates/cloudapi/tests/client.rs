#![allow(clippy::unwrap_used, clippy::expect_used)]
//! `CloudApiClient` against a small local axum server, one case per error class.

use std::time::Duration;

use axum::{
    Json, Router,
    body::Body,
    extract::{Multipart, Path, Query},
    http::{HeaderMap, StatusCode, header},
    response::{IntoResponse, Response},
    routing::{get, post},
};
use serde_json::{Value, json};
use tern_cloudapi::{
    Address, ClientConfig, CloudApiClient, MessageContent, RetryClass, SendError, SendPayload,
    parse_send_accepted,
};

async fn messages(
    Path(pnid): Path<String>,
    headers: HeaderMap,
    Json(body): Json<Value>,
) -> Response {
    match pnid.as_str() {
        "ok" => {
            assert_eq!(headers[header::AUTHORIZATION], "Bearer tok");
            assert_eq!(body["messaging_product"], "whatsapp");
            Json(json!({"messaging_product": "whatsapp",
                "contacts": [{"input": body["to"], "wa_id": "16505551234"}],
                "messages": [{"id": "wamid.OK", "message_status": "accepted"}]}))
            .into_response()
        }
        "bsuid" => {
            // A send to a business-scoped user id: `recipient` instead of `to`, and the
            // answer's contact carries `user_id` instead of `wa_id`.
            assert!(body.get("to").is_none(), "{body}");
            Json(json!({"messaging_product": "whatsapp",
                "contacts": [{"input": body["recipient"], "user_id": body["recipient"]}],
                "messages": [{"id": "wamid.U"}]}))
            .into_response()
        }
        "graph" => (
            StatusCode::BAD_REQUEST,
            Json(json!({"error": {"message": "(#131056) pair rate limit", "type": "OAuthException",
                "code": 131056, "error_data": {"messaging_product": "whatsapp", "details": "slow down"},
                "fbtrace_id": "T"}})),
        )
            .into_response(),
        "perm" => (
            StatusCode::UNAUTHORIZED,
            Json(json!({"error": {"message": "Invalid OAuth access token", "type": "OAuthException", "code": 190}})),
        )
            .into_response(),
        "html" => (
            StatusCode::BAD_GATEWAY,
            [(header::CONTENT_TYPE, "text/html")],
            "<html><h1>502 Bad Gateway</h1></html>",
        )
            .into_response(),
        "hang" => {
            tokio::time::sleep(Duration::from_secs(30)).await;
            StatusCode::OK.into_response()
        }
        "drop" => {
            // Headers promise 100 bytes, then the body stream fails: connection dropped mid-response.
            let stream = futures::stream::once(async {
                Err::<bytes::Bytes, _>(std::io::Error::other("dropped"))
            });
            Response::builder()
                .status(200)
                .header(header::CONTENT_LENGTH, "100")
                .body(Body::from_stream(stream))
                .unwrap()
        }
        "garbage200" => (StatusCode::OK, "not json").into_response(),
        _ => StatusCode::NOT_FOUND.into_response(),
    }
}

async fn upload(Path(pnid): Path<String>, mut mp: Multipart) -> Response {
    let mut fields = serde_json::Map::new();
    while let Ok(Some(f)) = mp.next_field().await {
        let name = f.name().unwrap_or("").to_owned();
        let ctype = f.content_type().map(str::to_owned);
        let fname = f.file_name().map(str::to_owned);
        let data = f.bytes().await.unwrap();
        fields.insert(
            name,
            json!({"len": data.len(), "ctype": ctype, "file_name": fname,
                   "text": String::from_utf8_lossy(&data)}),
        );
    }
    assert_eq!(pnid, "ok");
    assert_eq!(fields["messaging_product"]["text"], "whatsapp");
    assert_eq!(fields["type"]["text"], "image/png");
    assert_eq!(fields["file"]["len"], 4);
    assert_eq!(fields["file"]["ctype"], "image/png");
    assert_eq!(fields["file"]["file_name"], "a.png");
    Json(json!({"id": "media-1"})).into_response()
}

async fn templates(Path(waba): Path<String>, Query(q): Query<Vec<(String, String)>>) -> Response {
    assert_eq!(waba, "waba1");
    let after = q.iter().find(|(k, _)| k == "after").map(|(_, v)| v.clone());
    match after.as_deref() {
        None => Json(json!({
            "data": [{"id": "1", "name": "a", "language": "en_US", "status": "APPROVED",
                      "category": "UTILITY", "components": [{"type": "BODY", "text": "hi"}]}],
            "paging": {"cursors": {"before": "b0", "after": "c1"}, "next": "https://x/next"}
        }))
        .into_response(),
        Some("c1") => Json(json!({
            "data": [{"id": "2", "name": "b", "language": "de", "status": "REJECTED",
                      "category": "MARKETING", "components": [], "rejected_reason": "INVALID_FORMAT"},
                     "not-an-object"],
            "paging": {"cursors": {"before": "c1", "after": "c2"}}
        }))
        .into_response(),
        _ => StatusCode::BAD_REQUEST.into_response(),
    }
}

async fn create_template(Path(waba): Path<String>, Json(body): Json<Value>) -> Response {
    assert_eq!(waba, "waba1");
    assert_eq!(body["name"], "order_update");
    Json(json!({"id": "594425479261596", "status": "PENDING", "category": "UTILITY"}))
        .into_response()
}

async fn number(
    Path(pnid): Path<String>,
    Query(q): Query<Vec<(String, String)>>,
    headers: HeaderMap,
) -> Response {
    if pnid.starts_with("media") {
        // `GET /{media-id}[?phone_number_id=]`: only number "pn1" owns the media
        let owner = q.iter().find(|(k, _)| k == "phone_number_id");
        if owner.is_some_and(|(_, v)| v != "pn1") {
            return (
                StatusCode::BAD_REQUEST,
                Json(json!({"error": {"message": "(#100) Invalid parameter", "code": 100}})),
            )
                .into_response();
        }
        let host = headers[header::HOST].to_str().unwrap();
        return Json(json!({"messaging_product": "whatsapp", "id": pnid,
            "url": format!("http://{host}/dl/ok"), "mime_type": "image/png",
            "sha256": "ab", "file_size": 12}))
        .into_response();
    }
    Json(json!({"id": pnid, "display_phone_number": "+1 555-078-3881", "verified_name": "Tern",
                "quality_rating": "GREEN", "throughput": {"level": "STANDARD"}, "status": "CONNECTED"}))
    .into_response()
}

async fn download(Path(case): Path<String>, headers: HeaderMap) -> Response {
    if headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        != Some("Bearer tok")
    {
        return StatusCode::UNAUTHORIZED.into_response();
    }
    match case.as_str() {
        "ok" => {
            let chunks = [&b"\x89PNG"[..], b"-part-", b"2"]
                .map(|c| Ok::<_, std::io::Error>(bytes::Bytes::from_static(c)));
            Response::builder()
                .header(header::CONTENT_TYPE, "image/png")
                .body(Body::from_stream(futures::stream::iter(chunks)))
                .unwrap()
        }
        "gone" => StatusCode::NOT_FOUND.into_response(),
        "cut" => {
            // the first chunk (and the headers) go out, then the connection breaks
            let first = futures::stream::once(async { Ok(bytes::Bytes::from_static(b"first")) });
            let cut = futures::stream::once(async {
                tokio::time::sleep(Duration::from_millis(100)).await;
                Err(std::io::Error::other("cut"))
            });
            let stream = futures::StreamExt::chain(first, cut);
            Response::builder()
                .header(header::CONTENT_LENGTH, "100")
                .body(Body::from_stream(stream))
                .unwrap()
        }
        _ => StatusCode::BAD_REQUEST.into_response(),
    }
}

async fn serve() -> String {
    let app = Router::new()
        .route("/v25.0/{pnid}/messages", post(messages))
        .route("/v25.0/{pnid}/media", post(upload))
        .route(
            "/v25.0/{waba}/message_templates",
            get(templates).post(create_template),
        )
        .route("/v25.0/{pnid}", get(number))
        .route("/dl/{case}", get(download));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    format!("http://{addr}")
}

fn client(base: &str, timeout_ms: u64) -> CloudApiClient {
    CloudApiClient::new(ClientConfig {
        base_url: base.to_owned(),
        version: "v25.0".into(),
        connect_timeout: Duration::from_millis(500),
        request_timeout: Duration::from_millis(timeout_ms),
    })
    .unwrap()
}

fn payload() -> SendPayload {
    SendPayload::new("+1 (650) 555-1234", MessageContent::text("hi")).callback_data("msg_1")
}

#[tokio::test]
async fn send_ok() {
    let base = serve().await;
    let c = client(&base, 2000);
    let ok = c.send_message("ok", "tok", &payload()).await.unwrap();
    assert_eq!(ok.wamid, "wamid.OK");
    assert_eq!(ok.wa_id.as_deref(), Some("16505551234"));
    assert_eq!(ok.input.as_deref(), Some("+1 (650) 555-1234"));
    assert_eq!(ok.message_status.as_deref(), Some("accepted"));
}

#[tokio::test]
async fn send_to_a_bsuid() {
    let base = serve().await;
    let c = client(&base, 2000);
    let p = SendPayload::to_address(
        Address::UserId("US.13491208655302741918"),
        MessageContent::text("hi"),
    );
    let ok = c.send_message("bsuid", "tok", &p).await.unwrap();
    assert_eq!(ok.wamid, "wamid.U");
    assert_eq!(ok.wa_id, None);
    assert_eq!(ok.user_id.as_deref(), Some("US.13491208655302741918"));
    assert_eq!(ok.input.as_deref(), Some("US.13491208655302741918"));
}

#[test]
fn send_answers_with_user_id_or_wa_id() {
    let a = parse_send_accepted(
        br#"{"messaging_product":"whatsapp","contacts":[{"input":"US.1","user_id":"US.1","wa_id":""}],
            "messages":[{"id":"wamid.A"}]}"#,
    )
    .unwrap();
    assert_eq!(a.user_id.as_deref(), Some("US.1"));
    assert_eq!(a.wa_id, None, "an empty wa_id is absent");
    let a = parse_send_accepted(
        br#"{"contacts":[{"input":"+1555","wa_id":"1555"}],"messages":[{"id":"wamid.B"}]}"#,
    )
    .unwrap();
    assert_eq!(a.wa_id.as_deref(), Some("1555"));
    assert_eq!(a.user_id, None);
    let a = parse_send_accepted(br#"{"messages":[{"id":"wamid.C"}]}"#).unwrap();
    assert_eq!((a.wa_id, a.user_id, a.input), (None, None, None));
    assert!(parse_send_accepted(br#"{"contacts":[{"user_id":"US.1"}],"messages":[]}"#).is_none());
}

#[tokio::test]
async fn connect_refused_is_not_sent() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    drop(listener);
    let c = client(&format!("http://{addr}"), 2000);
    let err = c.send_message("ok", "tok", &payload()).await.unwrap_err();
    assert!(matches!(err, SendError::NotSent { .. }), "{err:?}");
    assert_eq!(err.retry_class(), RetryClass::RetryLater);
}

#[tokio::test]
async fn bad_id_is_not_sent() {
    let c = client("http://127.0.0.1:9", 2000);
    let err = c.send_message("../x", "tok", &payload()).await.unwrap_err();
    assert!(matches!(err, SendError::NotSent { .. }), "{err:?}");
}

#[tokio::test]
async fn hang_is_outcome_unknown() {
    let base = serve().await;
    let c = client(&base, 300);
    let err = c.send_message("hang", "tok", &payload()).await.unwrap_err();
    assert!(matches!(err, SendError::OutcomeUnknown { .. }), "{err:?}");
    assert_eq!(err.retry_class(), RetryClass::OutcomeUnknown);
    assert_eq!(err.failure().code, "network_outcome_unknown");
}

#[tokio::test]
async fn dropped_mid_response_is_outcome_unknown() {
    let base = serve().await;
    let c = client(&base, 2000);
    let err = c.send_message("drop", "tok", &payload()).await.unwrap_err();
    assert!(matches!(err, SendError::OutcomeUnknown { .. }), "{err:?}");
    let err = c
        .send_message("garbage200", "tok", &payload())
        .await
        .unwrap_err();
    assert!(matches!(err, SendError::OutcomeUnknown { .. }), "{err:?}");
}

#[tokio::test]
async fn graph_errors_are_classified() {
    let base = serve().await;
    let c = client(&base, 2000);
    let err = c
        .send_message("graph", "tok", &payload())
        .await
        .unwrap_err();
    let g = err.graph().unwrap();
    assert_eq!(g.http_status, 400);
    assert_eq!(g.code, Some(131056));
    assert_eq!(g.details.as_deref(), Some("slow down"));
    assert_eq!(err.retry_class(), RetryClass::RetrySoon);
    assert_eq!(err.failure().code, "pair_rate_limited");

    let err = c.send_message("perm", "tok", &payload()).await.unwrap_err();
    assert_eq!(err.retry_class(), RetryClass::Never);
    assert_eq!(err.failure().code, "network_auth_failed");

    let err = c.send_message("html", "tok", &payload()).await.unwrap_err();
    let g = err.graph().unwrap();
    assert_eq!(g.http_status, 502);
    assert_eq!(g.code, None);
    assert!(!g.is_graph_body());
    assert_eq!(err.retry_class(), RetryClass::RetryLater);
}

#[tokio::test]
async fn media_templates_and_number() {
    let base = serve().await;
    let c = client(&base, 2000);
    let id = c
        .upload_media(
            "ok",
            "tok",
            bytes::Bytes::from_static(b"\x89PNG"),
            "image/png",
            "a.png",
        )
        .await
        .unwrap();
    assert_eq!(id, "media-1");

    let created = c
        .create_template(
            "waba1",
            "tok",
            &json!({"name": "order_update", "language": "en_US",
            "category": "UTILITY", "components": [{"type": "BODY", "text": "Order {{1}}"}]}),
        )
        .await
        .unwrap();
    assert_eq!(created.id, "594425479261596");
    assert_eq!(created.status.as_deref(), Some("PENDING"));

    let p1 = c.list_templates("waba1", "tok", None).await.unwrap();
    assert_eq!(p1.templates.len(), 1);
    assert_eq!(p1.templates[0].status, "APPROVED");
    assert_eq!(p1.next_cursor.as_deref(), Some("c1"));
    let p2 = c
        .list_templates("waba1", "tok", p1.next_cursor.as_deref())
        .await
        .unwrap();
    assert_eq!(p2.templates.len(), 1, "non-object rows are skipped");
    assert_eq!(
        p2.templates[0].rejected_reason.as_deref(),
        Some("INVALID_FORMAT")
    );
    assert_eq!(p2.next_cursor, None);

    let n = c.get_phone_number("123", "tok").await.unwrap();
    assert_eq!(n.id, "123");
    assert_eq!(n.throughput_level.as_deref(), Some("STANDARD"));
    assert_eq!(n.quality_rating.as_deref(), Some("GREEN"));
    assert_eq!(n.status.as_deref(), Some("CONNECTED"));
}

#[tokio::test]
async fn streamed_upload_sends_every_chunk_with_the_length() {
    let base = serve().await;
    let c = client(&base, 2000);
    // the stub checks a 4-byte image/png file named a.png
    let chunks =
        [&b"\x89P"[..], b"N", b"G"].map(|c| Ok::<_, std::io::Error>(bytes::Bytes::from_static(c)));
    let body = futures::stream::iter(chunks);
    let id = c
        .upload_media_stream("ok", "tok", body, 4, "image/png", "a.png")
        .await
        .unwrap();
    assert_eq!(id, "media-1");
    // a bad MIME type is refused before anything is sent
    let body = futures::stream::empty::<Result<bytes::Bytes, std::io::Error>>();
    let err = c
        .upload_media_stream("ok", "tok", body, 0, "not a mime", "a.png")
        .await
        .unwrap_err();
    assert!(matches!(err, SendError::NotSent { .. }), "{err:?}");
}

#[tokio::test]
async fn get_media_passes_the_phone_number_id() {
    let base = serve().await;
    let c = client(&base, 2000);
    let info = c.get_media("media-1", "tok").await.unwrap();
    assert_eq!(info.file_size, Some(12));
    assert!(c.get_media_for("media-1", "tok", Some("pn1")).await.is_ok());
    let err = c
        .get_media_for("media-1", "tok", Some("pn2"))
        .await
        .unwrap_err();
    assert_eq!(err.graph().unwrap().code, Some(100));
    assert!(!err.is_unknown_media());
    assert!(matches!(
        c.get_media("../x", "tok").await,
        Err(SendError::NotSent { .. })
    ));
}

#[tokio::test]
async fn streamed_download_statuses_and_interruptions() {
    use futures::TryStreamExt;
    let base = serve().await;
    let c = client(&base, 2000);
    let info = c.get_media("media-1", "tok").await.unwrap();
    let dl = c.download_media_stream(&info.url, "tok").await.unwrap();
    assert_eq!(dl.content_type.as_deref(), Some("image/png"));
    assert_eq!(dl.content_length, None, "chunked answer");
    assert!(format!("{dl:?}").contains("image/png"));
    let parts: Vec<bytes::Bytes> = dl.body.try_collect().await.unwrap();
    assert_eq!(parts.concat(), b"\x89PNG-part-2");

    // 404: the URL expired; the caller can tell and fetch a new one
    let err = c
        .download_media_stream(&format!("{base}/dl/gone"), "tok")
        .await
        .unwrap_err();
    assert!(matches!(err, SendError::Graph(_)), "{err:?}");
    assert_eq!(err.http_status(), Some(404));
    assert_eq!(err.graph().unwrap().http_status, 404);
    assert!(!err.is_unknown_media());
    // 401 without the right token
    let err = c
        .download_media_stream(&info.url, "other")
        .await
        .unwrap_err();
    assert_eq!(err.http_status(), Some(401));
    // an answer cut mid-body ends the stream with an error
    let dl = c
        .download_media_stream(&format!("{base}/dl/cut"), "tok")
        .await
        .unwrap();
    assert_eq!(dl.content_length, Some(100));
    let err = dl.body.try_collect::<Vec<_>>().await.unwrap_err();
    assert!(
        matches!(
            err,
            SendError::UnexpectedResponse {
                http_status: 200,
                ..
            }
        ),
        "{err:?}"
    );
    assert_eq!(err.retry_class(), RetryClass::RetryLater);
    // not a URL at all
    assert!(matches!(
        c.download_media_stream("not a url", "tok").await,
        Err(SendError::NotSent { .. })
    ));
    // connection refused: nothing was sent
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    drop(listener);
    assert!(matches!(
        c.download_media_stream(&format!("http://{addr}/dl/ok"), "tok")
            .await,
        Err(SendError::NotSent { .. })
    ));
}
