//! HTTP client for the Graph API (reqwest + rustls).
//!
//! # Error mapping ([`SendError`])
//! The question that matters for a send is "may the network have acted on it?":
//!
//! | what happened | reqwest signal | variant |
//! |---|---|---|
//! | invalid id / header / MIME, request could not be built | `is_builder()`, own checks | `NotSent` |
//! | DNS failure, connection refused, TLS handshake failure, connect timeout | `is_connect()` (also set on connect timeouts) | `NotSent` — nothing left the machine, safe to retry |
//! | timeout after connecting (request written, no answer) | `is_timeout()` without `is_connect()` | `OutcomeUnknown` |
//! | connection reset / closed before or during the response | `is_request()` / `is_body()` / `is_decode()` | `OutcomeUnknown` |
//! | 2xx whose body cannot be read or lacks the wamid | — | `OutcomeUnknown` (send) / `UnexpectedResponse` (other calls) |
//! | non-2xx | — | `Graph(GraphError)`, parsed leniently (HTML 502 → `code: None`, `RetryLater`) |
//!
//! `OutcomeUnknown` sends must not be repeated blindly: Tern waits for a status webhook,
//! matched by `biz_opaque_callback_data`, before deciding. For read-only calls
//! (`list_templates`, `get_phone_number`, …) the same variants are used but retrying is harmless.

use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use futures::stream::{BoxStream, Stream, StreamExt, TryStreamExt};
use reqwest::{StatusCode, Url};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::agents::{MarkReadPayload, UserOutcome, block_users_body, parse_block_answer};
use crate::error::{FailureInfo, GraphError, RetryClass, outcome_unknown_failure};
use crate::send::SendPayload;

/// Where and how to reach the network.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientConfig {
    /// Default `https://graph.facebook.com`; tests point it at the simulator.
    pub base_url: String,
    /// Graph API version path segment, default `v25.0`.
    pub version: String,
    pub connect_timeout: Duration,
    /// Total time for one call, including reading the answer.
    pub request_timeout: Duration,
}

impl Default for ClientConfig {
    fn default() -> Self {
        Self {
            base_url: "https://graph.facebook.com".to_owned(),
            version: "v25.0".to_owned(),
            connect_timeout: Duration::from_secs(5),
            request_timeout: Duration::from_secs(30),
        }
    }
}

/// Failure of a Graph API call.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SendError {
    /// The request never left this machine; retrying cannot cause a duplicate.
    #[error("request not sent: {reason}")]
    NotSent { reason: String },
    /// The request may have reached the network, but no answer was read.
    #[error("outcome unknown: {reason}")]
    OutcomeUnknown { reason: String },
    /// The network answered with an error.
    /// Boxed to keep `Result<_, SendError>` small.
    #[error("{0}")]
    Graph(Box<GraphError>),
    /// A 2xx answer that could not be understood (non-send calls only).
    #[error("unexpected response (HTTP {http_status}): {reason}")]
    UnexpectedResponse { http_status: u16, reason: String },
}

impl SendError {
    pub fn retry_class(&self) -> RetryClass {
        match self {
            // Nothing reached the network; it is down or unreachable from here.
            Self::NotSent { .. } => RetryClass::RetryLater,
            Self::OutcomeUnknown { .. } => RetryClass::OutcomeUnknown,
            Self::Graph(g) => g.retry_class(),
            Self::UnexpectedResponse { .. } => RetryClass::RetryLater,
        }
    }

    /// Failure description for the Message `failure` object.
    pub fn failure(&self) -> FailureInfo {
        match self {
            Self::Graph(g) => g.failure(),
            Self::OutcomeUnknown { .. } => outcome_unknown_failure(),
            Self::NotSent { reason } | Self::UnexpectedResponse { reason, .. } => FailureInfo {
                code: crate::error::FAILURE_NETWORK_ERROR,
                explanation: format!("The network could not be reached ({reason})."),
                retry: self.retry_class(),
            },
        }
    }

    pub fn graph(&self) -> Option<&GraphError> {
        match self {
            Self::Graph(g) => Some(g),
            _ => None,
        }
    }

    /// The HTTP status the network answered with, when it answered (`Graph` and
    /// `UnexpectedResponse`). A media download answered 404 means "URL expired, fetch a new
    /// one with `get_media`".
    pub fn http_status(&self) -> Option<u16> {
        match self {
            Self::Graph(g) => Some(g.http_status),
            Self::UnexpectedResponse { http_status, .. } => Some(*http_status),
            Self::NotSent { .. } | Self::OutcomeUnknown { .. } => None,
        }
    }

    /// True when the network said the media id is unknown or expired (see
    /// [`GraphError::is_unknown_media`]): upload the file again and use the new id.
    pub fn is_unknown_media(&self) -> bool {
        self.graph().is_some_and(GraphError::is_unknown_media)
    }
}

/// The network accepted a message (HTTP 200). Not "delivered": statuses follow by webhook.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SendAccepted {
    pub wamid: String,
    /// `contacts[0].wa_id`: the recipient's WhatsApp id (may differ from the input); absent
    /// for a send to a business-scoped user id.
    pub wa_id: Option<String>,
    /// `contacts[0].user_id`: the recipient's business-scoped user id (2026+; sends to a
    /// BSUID answer with it instead of `wa_id`).
    #[serde(default)]
    pub user_id: Option<String>,
    /// `contacts[0].input`, the `to` (or `recipient`) echoed.
    pub input: Option<String>,
    /// Only for paced templates: `accepted` / `held_for_quality_assessment` / `paused`.
    pub message_status: Option<String>,
}

/// Answer of `POST /{waba}/message_templates`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CreatedTemplate {
    pub id: String,
    #[serde(default)]
    pub status: Option<String>,
    #[serde(default)]
    pub category: Option<String>,
}

/// One template as listed by the network.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(default)]
pub struct TemplateInfo {
    pub id: String,
    pub name: String,
    pub language: String,
    pub status: String,
    pub category: String,
    pub components: Vec<Value>,
    pub rejected_reason: Option<String>,
    pub parameter_format: Option<String>,
}

/// One page of templates.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TemplatePage {
    pub templates: Vec<TemplateInfo>,
    /// Pass to the next `list_templates` call; `None` on the last page.
    pub next_cursor: Option<String>,
}

/// Business phone number details (`GET /{phone-number-id}`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PhoneNumberInfo {
    pub id: String,
    pub display_phone_number: Option<String>,
    pub verified_name: Option<String>,
    /// GREEN / YELLOW / RED / UNKNOWN.
    pub quality_rating: Option<String>,
    /// `throughput.level`: STANDARD / HIGH.
    pub throughput_level: Option<String>,
    /// CONNECTED, FLAGGED, RESTRICTED, …
    pub status: Option<String>,
    pub code_verification_status: Option<String>,
    pub name_status: Option<String>,
    pub platform_type: Option<String>,
    pub messaging_limit_tier: Option<String>,
    pub raw: Value,
}

/// Media metadata (`GET /{media-id}`); `url` needs the bearer token and expires quickly.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MediaInfo {
    pub id: String,
    pub url: String,
    #[serde(default)]
    pub mime_type: Option<String>,
    #[serde(default)]
    pub sha256: Option<String>,
    #[serde(default)]
    pub file_size: Option<u64>,
}

/// A media download in progress ([`CloudApiClient::download_media_stream`]).
pub struct MediaDownload {
    /// The answer's `Content-Type` (the media's MIME type).
    pub content_type: Option<String>,
    /// The answer's `Content-Length`, when the network sent one.
    pub content_length: Option<u64>,
    /// The file's bytes, chunk by chunk; a transport failure ends it with an error.
    pub body: BoxStream<'static, Result<Bytes, SendError>>,
}

impl std::fmt::Debug for MediaDownload {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MediaDownload")
            .field("content_type", &self.content_type)
            .field("content_length", &self.content_length)
            .finish_non_exhaustive()
    }
}

/// Typed Cloud API client. Cheap to clone (shares the connection pool).
#[derive(Debug, Clone)]
pub struct CloudApiClient {
    http: reqwest::Client,
    config: ClientConfig,
}

impl CloudApiClient {
    pub fn new(config: ClientConfig) -> Result<Self, reqwest::Error> {
        let http = reqwest::Client::builder()
            .connect_timeout(config.connect_timeout)
            .timeout(config.request_timeout)
            // Never follow redirects: the Graph API does not use them for these calls.
            .redirect(reqwest::redirect::Policy::none())
            .build()?;
        Ok(Self { http, config })
    }

    pub fn config(&self) -> &ClientConfig {
        &self.config
    }

    /// `POST /{pnid}/messages`.
    pub async fn send_message(
        &self,
        phone_number_id: &str,
        access_token: &str,
        payload: &SendPayload,
    ) -> Result<SendAccepted, SendError> {
        let url = self.url(&[phone_number_id, "messages"])?;
        let req = self.http.post(url).bearer_auth(access_token).json(payload);
        let (status, body) = self.execute(req).await?;
        parse_send_accepted(&body).ok_or_else(|| SendError::OutcomeUnknown {
            reason: format!("HTTP {status} answer without a message id"),
        })
    }

    /// Mark an inbound message (and the customer's earlier ones) as read (blue ticks), with
    /// a typing indicator when `typing`. The answer is `{"success": true}`; an unknown or
    /// too old message id is a `Graph` error (131009).
    pub async fn mark_read(
        &self,
        phone_number_id: &str,
        access_token: &str,
        wamid: &str,
        typing: bool,
    ) -> Result<(), SendError> {
        let url = self.url(&[phone_number_id, "messages"])?;
        let req = self
            .http
            .post(url)
            .bearer_auth(access_token)
            .json(&MarkReadPayload::new(wamid, typing));
        self.execute(req).await.map(|_| ())
    }

    /// `POST /{pnid}/block_users`: blocks `users` (wa_ids or BSUIDs, at most 1,000) at the
    /// number; each user's outcome, as the network answered (see [`crate::agents`]).
    pub async fn block_users(
        &self,
        phone_number_id: &str,
        access_token: &str,
        users: &[&str],
    ) -> Result<Vec<UserOutcome>, SendError> {
        self.block_list(reqwest::Method::POST, phone_number_id, access_token, users)
            .await
    }

    /// `DELETE /{pnid}/block_users`: unblocks `users`; each user's outcome.
    pub async fn unblock_users(
        &self,
        phone_number_id: &str,
        access_token: &str,
        users: &[&str],
    ) -> Result<Vec<UserOutcome>, SendError> {
        self.block_list(
            reqwest::Method::DELETE,
            phone_number_id,
            access_token,
            users,
        )
        .await
    }

    async fn block_list(
        &self,
        method: reqwest::Method,
        phone_number_id: &str,
        access_token: &str,
        users: &[&str],
    ) -> Result<Vec<UserOutcome>, SendError> {
        let url = self.url(&[phone_number_id, "block_users"])?;
        let req = self
            .http
            .request(method, url)
            .bearer_auth(access_token)
            .json(&block_users_body(users));
        let (status, body) = self.execute(req).await?;
        parse_block_answer(&body).ok_or_else(|| unexpected(status, "answer without block_users"))
    }

    /// `POST /{pnid}/media` (multipart) with the whole file in memory; returns the media id.
    /// A thin wrapper over [`Self::upload_media_stream`].
    pub async fn upload_media(
        &self,
        phone_number_id: &str,
        access_token: &str,
        bytes: Bytes,
        mime: &str,
        filename: &str,
    ) -> Result<String, SendError> {
        let len = bytes.len() as u64;
        let body = futures::stream::once(async move { Ok::<_, std::convert::Infallible>(bytes) });
        self.upload_media_stream(phone_number_id, access_token, body, len, mime, filename)
            .await
    }

    /// `POST /{pnid}/media` (multipart) streaming the file from `body`; returns the media id.
    ///
    /// The file is never held whole in memory: chunks are sent as `body` yields them. `len`
    /// is the exact file size (the multipart part is sent with a known length, so the request
    /// has a `Content-Length`). Errors:
    /// * `body` yields an error, or more or fewer than `len` bytes → [`SendError::NotSent`]
    ///   (the network never received a complete file, so nothing was stored);
    /// * the network rejects the file (MIME not allowed, too large, content does not match
    ///   the MIME type) → [`SendError::Graph`] with code 131053.
    ///
    /// The client's `request_timeout` covers the whole upload.
    pub async fn upload_media_stream<S, E>(
        &self,
        phone_number_id: &str,
        access_token: &str,
        body: S,
        len: u64,
        mime: &str,
        filename: &str,
    ) -> Result<String, SendError>
    where
        S: Stream<Item = Result<Bytes, E>> + Send + 'static,
        E: Into<Box<dyn std::error::Error + Send + Sync>>,
    {
        let url = self.url(&[phone_number_id, "media"])?;
        let source_error = Arc::new(Mutex::new(None::<String>));
        let checked = LengthChecked::new(body, len, Arc::clone(&source_error));
        let part =
            reqwest::multipart::Part::stream_with_length(reqwest::Body::wrap_stream(checked), len)
                .file_name(filename.to_owned())
                .mime_str(mime)
                .map_err(|e| SendError::NotSent {
                    reason: format!("invalid MIME type: {e}"),
                })?;
        let form = reqwest::multipart::Form::new()
            .text("messaging_product", "whatsapp")
            .text("type", mime.to_owned())
            .part("file", part);
        let req = self
            .http
            .post(url)
            .bearer_auth(access_token)
            .multipart(form);
        let result = self.execute(req).await;
        // A failing source wins over whatever the transport made of the aborted request.
        if let Some(reason) = lock_ignoring_poison(&source_error).take() {
            return Err(SendError::NotSent {
                reason: format!("reading the file to upload failed: {reason}"),
            });
        }
        let (status, body) = result?;
        serde_json::from_slice::<Value>(&body)
            .ok()
            .and_then(|v| v.get("id").and_then(crate::error::value_as_string))
            .ok_or_else(|| unexpected(status, "upload answer without an id"))
    }

    /// `GET /{media-id}`: metadata and a short-lived download URL (5 minutes on the network).
    /// Same as [`Self::get_media_for`] without `phone_number_id`.
    pub async fn get_media(
        &self,
        media_id: &str,
        access_token: &str,
    ) -> Result<MediaInfo, SendError> {
        self.get_media_for(media_id, access_token, None).await
    }

    /// `GET /{media-id}[?phone_number_id=…]`: metadata and a short-lived download URL
    /// (5 minutes on the network).
    ///
    /// With `phone_number_id`, the network checks that the media belongs to that number
    /// (reference §4). An unknown or expired id answers Graph error 100 / subcode 33
    /// ([`SendError::is_unknown_media`]).
    pub async fn get_media_for(
        &self,
        media_id: &str,
        access_token: &str,
        phone_number_id: Option<&str>,
    ) -> Result<MediaInfo, SendError> {
        let mut url = self.url(&[media_id])?;
        if let Some(p) = phone_number_id {
            url.query_pairs_mut().append_pair("phone_number_id", p);
        }
        let (status, body) = self
            .execute(self.http.get(url).bearer_auth(access_token))
            .await?;
        serde_json::from_slice(&body).map_err(|e| unexpected(status, &e.to_string()))
    }

    /// Download media from a URL returned by [`Self::get_media`] (bearer-protected) into
    /// memory. Prefer [`Self::download_media_stream`] for large files.
    pub async fn download_media(&self, url: &str, access_token: &str) -> Result<Bytes, SendError> {
        let url = media_url(url)?;
        let (_, body) = self
            .execute(self.http.get(url).bearer_auth(access_token))
            .await?;
        Ok(body)
    }

    /// Download media from a URL returned by [`Self::get_media`] as a stream of chunks.
    ///
    /// The answer's status is checked before this returns: a non-2xx answer is
    /// [`SendError::Graph`] carrying the HTTP status — **404** means the URL expired (URLs
    /// live 5 minutes): call [`Self::get_media_for`] again for a fresh one
    /// ([`SendError::http_status`] `== Some(404)`). A failure while reading the body is yielded
    /// by the stream as [`SendError::UnexpectedResponse`] (retrying is harmless).
    ///
    /// Note: the client's `request_timeout` (default 30 s) covers the whole download,
    /// body included; a file that takes longer ends with a timeout error from the stream.
    pub async fn download_media_stream(
        &self,
        url: &str,
        access_token: &str,
    ) -> Result<MediaDownload, SendError> {
        let url = media_url(url)?;
        let resp = self
            .http
            .get(url)
            .bearer_auth(access_token)
            .send()
            .await
            .map_err(transport_error)?;
        let status = resp.status();
        if !status.is_success() {
            let body = resp.bytes().await.unwrap_or_default();
            return Err(SendError::Graph(Box::new(GraphError::from_response(
                status.as_u16(),
                &body,
            ))));
        }
        let content_type = resp
            .headers()
            .get(reqwest::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        let content_length = resp.content_length();
        let http_status = status.as_u16();
        let body = resp
            .bytes_stream()
            .map_err(move |e| SendError::UnexpectedResponse {
                http_status,
                reason: format!("media download interrupted: {}", error_chain(&e)),
            })
            .boxed();
        Ok(MediaDownload {
            content_type,
            content_length,
            body,
        })
    }

    /// `POST /{waba}/message_templates` with the network's template body
    /// (`name`, `language`, `category`, `components`, optional `parameter_format`).
    pub async fn create_template(
        &self,
        waba_id: &str,
        access_token: &str,
        body: &Value,
    ) -> Result<CreatedTemplate, SendError> {
        let url = self.url(&[waba_id, "message_templates"])?;
        let req = self.http.post(url).bearer_auth(access_token).json(body);
        let (status, body) = self.execute(req).await?;
        let v: Value =
            serde_json::from_slice(&body).map_err(|e| unexpected(status, &e.to_string()))?;
        let id = v
            .get("id")
            .and_then(crate::error::value_as_string)
            .ok_or_else(|| unexpected(status, "template answer without an id"))?;
        Ok(CreatedTemplate {
            id,
            status: v.get("status").and_then(crate::error::value_as_string),
            category: v.get("category").and_then(crate::error::value_as_string),
        })
    }

    /// `GET /{waba}/message_templates`, one page. `after` is the previous page's cursor.
    pub async fn list_templates(
        &self,
        waba_id: &str,
        access_token: &str,
        after: Option<&str>,
    ) -> Result<TemplatePage, SendError> {
        let mut url = self.url(&[waba_id, "message_templates"])?;
        {
            let mut q = url.query_pairs_mut();
            q.append_pair(
                "fields",
                "id,name,language,status,category,components,rejected_reason,parameter_format",
            );
            q.append_pair("limit", "100");
            if let Some(a) = after {
                q.append_pair("after", a);
            }
        }
        let (status, body) = self
            .execute(self.http.get(url).bearer_auth(access_token))
            .await?;
        let v: Value =
            serde_json::from_slice(&body).map_err(|e| unexpected(status, &e.to_string()))?;
        let templates = v
            .get("data")
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(|t| serde_json::from_value::<TemplateInfo>(t.clone()).ok())
                    .collect()
            })
            .unwrap_or_default();
        let paging = v.get("paging");
        // Graph gives a cursor on every page; only a `next` link means there is more.
        let has_next = paging
            .and_then(|p| p.get("next"))
            .is_some_and(Value::is_string);
        let next_cursor = if has_next {
            paging
                .and_then(|p| p.get("cursors"))
                .and_then(|c| c.get("after"))
                .and_then(crate::error::value_as_string)
        } else {
            None
        };
        Ok(TemplatePage {
            templates,
            next_cursor,
        })
    }

    /// `GET /{pnid}`.
    pub async fn get_phone_number(
        &self,
        phone_number_id: &str,
        access_token: &str,
    ) -> Result<PhoneNumberInfo, SendError> {
        let mut url = self.url(&[phone_number_id])?;
        url.query_pairs_mut().append_pair(
            "fields",
            "id,display_phone_number,verified_name,quality_rating,throughput,status,\
             code_verification_status,name_status,platform_type,messaging_limit_tier",
        );
        let (status, body) = self
            .execute(self.http.get(url).bearer_auth(access_token))
            .await?;
        let v: Value =
            serde_json::from_slice(&body).map_err(|e| unexpected(status, &e.to_string()))?;
        let s = |k: &str| v.get(k).and_then(crate::error::value_as_string);
        Ok(PhoneNumberInfo {
            id: s("id").unwrap_or_else(|| phone_number_id.to_owned()),
            display_phone_number: s("display_phone_number"),
            verified_name: s("verified_name"),
            quality_rating: s("quality_rating"),
            throughput_level: v
                .get("throughput")
                .and_then(|t| t.get("level"))
                .and_then(crate::error::value_as_string),
            status: s("status"),
            code_verification_status: s("code_verification_status"),
            name_status: s("name_status"),
            platform_type: s("platform_type"),
            messaging_limit_tier: s("messaging_limit_tier"),
            raw: v,
        })
    }

    /// `{base}/{version}/{segments…}`, refusing ids that would change the path.
    fn url(&self, segments: &[&str]) -> Result<Url, SendError> {
        for s in segments {
            let ok = !s.is_empty()
                && s.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.'))
                && *s != "."
                && *s != "..";
            if !ok {
                return Err(SendError::NotSent {
                    reason: format!("invalid path segment {s:?}"),
                });
            }
        }
        let raw = format!(
            "{}/{}/{}",
            self.config.base_url.trim_end_matches('/'),
            self.config.version.trim_matches('/'),
            segments.join("/")
        );
        Url::parse(&raw).map_err(|e| SendError::NotSent {
            reason: format!("invalid base URL: {e}"),
        })
    }

    /// Send and read the whole answer; non-2xx becomes `Graph`.
    async fn execute(
        &self,
        req: reqwest::RequestBuilder,
    ) -> Result<(StatusCode, Bytes), SendError> {
        let resp = req.send().await.map_err(transport_error)?;
        let status = resp.status();
        match resp.bytes().await {
            Ok(body) if status.is_success() => Ok((status, body)),
            Ok(body) => Err(SendError::Graph(Box::new(GraphError::from_response(
                status.as_u16(),
                &body,
            )))),
            Err(e) if status.is_success() => {
                tracing::warn!(error = %e, "answer body lost after 2xx");
                Err(SendError::OutcomeUnknown {
                    reason: format!("HTTP {status} but the answer could not be read: {e}"),
                })
            }
            // The network did answer with an error status; the body is just incomplete.
            Err(_) => Err(SendError::Graph(Box::new(GraphError::from_response(
                status.as_u16(),
                b"",
            )))),
        }
    }
}

/// Map a reqwest error raised before a response status was received.
fn transport_error(e: reqwest::Error) -> SendError {
    let reason = error_chain(&e);
    if e.is_builder() || e.is_connect() {
        SendError::NotSent { reason }
    } else {
        // is_timeout / is_request / is_body / anything else: the bytes may have left.
        SendError::OutcomeUnknown { reason }
    }
}

fn error_chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut src = e.source();
    while let Some(inner) = src {
        s.push_str(": ");
        s.push_str(&inner.to_string());
        src = inner.source();
    }
    s
}

fn unexpected(status: StatusCode, reason: &str) -> SendError {
    SendError::UnexpectedResponse {
        http_status: status.as_u16(),
        reason: reason.to_owned(),
    }
}

fn media_url(url: &str) -> Result<Url, SendError> {
    Url::parse(url).map_err(|e| SendError::NotSent {
        reason: format!("invalid media URL: {e}"),
    })
}

fn lock_ignoring_poison<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// The upload source, checked against its announced length. A source error or a length
/// mismatch is recorded in `failed` (so the upload reports `NotSent`) and ends the request
/// body with an error, which aborts the request before the multipart body is complete.
struct LengthChecked<S> {
    inner: Pin<Box<S>>,
    expected: u64,
    seen: u64,
    done: bool,
    failed: Arc<Mutex<Option<String>>>,
}

impl<S> LengthChecked<S> {
    fn new(inner: S, expected: u64, failed: Arc<Mutex<Option<String>>>) -> Self {
        Self {
            inner: Box::pin(inner),
            expected,
            seen: 0,
            done: false,
            failed,
        }
    }

    fn fail(&mut self, reason: String) -> Poll<Option<Result<Bytes, UploadSourceError>>> {
        self.done = true;
        *lock_ignoring_poison(&self.failed) = Some(reason.clone());
        Poll::Ready(Some(Err(UploadSourceError(reason))))
    }
}

/// Why the upload body stream stopped early.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
struct UploadSourceError(String);

impl<S, E> Stream for LengthChecked<S>
where
    S: Stream<Item = Result<Bytes, E>>,
    E: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    type Item = Result<Bytes, UploadSourceError>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        if self.done {
            return Poll::Ready(None);
        }
        match self.inner.as_mut().poll_next(cx) {
            Poll::Pending => Poll::Pending,
            Poll::Ready(Some(Ok(chunk))) => {
                self.seen = self.seen.saturating_add(chunk.len() as u64);
                if self.seen > self.expected {
                    let (seen, expected) = (self.seen, self.expected);
                    return self.fail(format!(
                        "the file has more bytes than announced ({seen} > {expected})"
                    ));
                }
                Poll::Ready(Some(Ok(chunk)))
            }
            Poll::Ready(Some(Err(e))) => {
                let e: Box<dyn std::error::Error + Send + Sync> = e.into();
                self.fail(error_chain(e.as_ref()))
            }
            Poll::Ready(None) if self.seen != self.expected => {
                let (seen, expected) = (self.seen, self.expected);
                self.fail(format!(
                    "the file has fewer bytes than announced ({seen} < {expected})"
                ))
            }
            Poll::Ready(None) => {
                self.done = true;
                Poll::Ready(None)
            }
        }
    }
}

/// Parse the §1.5 success body. Only the wamid is required; `contacts[0]` may carry
/// `wa_id` (phone sends), `user_id` (BSUID sends), both or neither.
pub fn parse_send_accepted(body: &[u8]) -> Option<SendAccepted> {
    let v: Value = serde_json::from_slice(body).ok()?;
    let msg = v.get("messages")?.as_array()?.first()?;
    let wamid = msg.get("id")?.as_str()?.to_owned();
    let contact = v
        .get("contacts")
        .and_then(Value::as_array)
        .and_then(|a| a.first());
    let cs = |k: &str| {
        contact
            .and_then(|c| c.get(k))
            .and_then(crate::error::value_as_string)
            .filter(|s| !s.is_empty())
    };
    Some(SendAccepted {
        wamid,
        wa_id: cs("wa_id"),
        user_id: cs("user_id"),
        input: cs("input"),
        message_status: msg
            .get("message_status")
            .and_then(crate::error::value_as_string),
    })
}
