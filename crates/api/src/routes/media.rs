//! Media: `POST /media` (a multipart upload, part `file`, or a JSON `{"url"}` import),
//! `GET /media/{id}` (with a signed download link) and the link itself, served without an
//! API key. Adapters over `tern_core::media`.

use crate::auth::{Authed, perm};
use crate::error::ApiError;
use crate::extract::{ApiJson, path_id};
use crate::state::AppState;
use axum::Json;
use axum::body::Body;
use axum::extract::{FromRequest, Multipart, Path, Query, Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use futures::StreamExt;
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use tern_core::media::{self, BodyError, Upload, rules_range::Requested};
use tern_domain::plan::Feature;
use tern_domain::time::{format_ms, now_ms};
use tern_domain::validate::Fields;
use tern_domain::{FieldError, Problem};
use utoipa::ToSchema;

/// Largest request `POST /media` reads: the 16 MiB file plus room for the multipart
/// framing; a file over 16 MiB is refused as `media_too_large` when its byte 16 MiB + 1
/// arrives, before this limit is reached.
pub const UPLOAD_BODY_LIMIT: usize = 17 * 1024 * 1024;

/// A stored file.
#[derive(Debug, Serialize, ToSchema)]
pub struct MediaObject {
    #[schema(format = Uuid)]
    pub media_id: String,
    /// The file's type, as declared and confirmed by its bytes.
    #[schema(example = "image/jpeg")]
    pub mime_type: String,
    pub size_bytes: i64,
    /// Hex SHA-256 of the bytes.
    pub sha256: String,
    /// The upload's file name (or the import URL's), if any.
    pub filename: Option<String>,
    #[schema(format = DateTime)]
    pub created_at: String,
    /// Media are kept 30 days; after that they cannot be sent or downloaded.
    #[schema(format = DateTime)]
    pub expires_at: String,
    /// `GET /media/{id}` only: a link to the bytes that needs no API key, valid 5 minutes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub download_url: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(format = DateTime)]
    pub download_url_expires_at: Option<String>,
}

impl From<tern_store::Media> for MediaObject {
    fn from(m: tern_store::Media) -> Self {
        MediaObject {
            media_id: m.id.to_string(),
            mime_type: m.mime_type,
            size_bytes: m.size_bytes,
            sha256: m.sha256,
            filename: m.filename,
            created_at: format_ms(m.created_at),
            expires_at: format_ms(m.expires_at),
            download_url: None,
            download_url_expires_at: None,
        }
    }
}

/// `POST /media` as JSON: import a file from a URL.
// The body's schema (OpenAPI); the handler reads the body with `validate::Fields`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ImportRequest {
    /// A public https URL. Redirects are followed (at most 3); the fetch gives up after 30 s.
    #[schema(example = "https://example.com/catalogue.pdf")]
    pub url: String,
}

/// `POST /media` as multipart: the file in a part named `file`, with its own Content-Type.
#[derive(Debug, ToSchema)]
#[allow(dead_code)]
pub struct UploadForm {
    /// The file (at most 16 MiB). The part's Content-Type is the declared type; it must
    /// match the bytes and be a type the network carries.
    #[schema(value_type = String, format = Binary)]
    pub file: Vec<u8>,
}

/// Upload a file, or import one from a URL.
#[utoipa::path(
    post,
    path = "/media",
    tag = "Media",
    operation_id = "createMedia",
    request_body(content(
        (UploadForm = "multipart/form-data"),
        (ImportRequest = "application/json"),
    )),
    responses(
        (status = 201, description = "Stored; send it with `media_id` within 30 days.", body = MediaObject),
    ),
    security(("bearer" = []))
)]
pub async fn create_media(
    auth: Authed<perm::MessagesSend>,
    State(state): State<AppState>,
    req: Request,
) -> Result<Response, ApiError> {
    auth.require_feature(Feature::Media)?;
    let ctype = req
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase();
    let now = now_ms();
    let stored = if ctype == "multipart/form-data" {
        let mp = Multipart::from_request(req, &state).await.map_err(|e| {
            ApiError(Problem::field(
                "body",
                format!("is not valid multipart: {e}"),
            ))
        })?;
        upload(&state, auth.org_id, mp, now).await?
    } else {
        let ApiJson(body) = ApiJson::<serde_json::Value>::from_request(req, &state)
            .await
            .map_err(|e| match ctype.as_str() {
                "application/json" => e,
                _ => ApiError(Problem::field(
                    "Content-Type",
                    "must be multipart/form-data (an upload) or application/json (an import)",
                )),
            })?;
        // Read as every body is (`Fields`): a missing `url` is named `url`, not `body`.
        let mut f = Fields::new(&body)?;
        let url: Option<String> = f.required("url");
        f.finish()?;
        let url = url.ok_or_else(|| ApiError(Problem::field("url", "is required")))?;
        media::import(&state.core, auth.org_id, &url, "url", now).await?
    };
    Ok((StatusCode::CREATED, Json(MediaObject::from(stored))).into_response())
}

async fn upload(
    state: &AppState,
    org_id: uuid::Uuid,
    mut mp: Multipart,
    now: i64,
) -> Result<tern_store::Media, ApiError> {
    loop {
        let field = match mp.next_field().await {
            Ok(Some(f)) => f,
            Ok(None) => {
                return Err(ApiError::fields(vec![FieldError::new(
                    "file",
                    "is required: send the file in a multipart part named file",
                )]));
            }
            Err(e) if e.status() == StatusCode::PAYLOAD_TOO_LARGE => {
                return Err(too_large());
            }
            Err(e) => return Err(ApiError(Problem::field("body", e.body_text()))),
        };
        if field.name() != Some("file") {
            continue;
        }
        let declared = field.content_type().map(str::to_owned);
        let filename = field.file_name().map(str::to_owned);
        let body = field.map(|r| {
            r.map_err(|e| {
                if e.status() == StatusCode::PAYLOAD_TOO_LARGE {
                    BodyError::TooLarge
                } else {
                    BodyError::Broken(e.body_text())
                }
            })
        });
        let up = Upload {
            declared,
            filename,
            body,
        };
        return Ok(media::upload(&state.core, org_id, up, now).await?);
    }
}

fn too_large() -> ApiError {
    ApiError(
        Problem::new(tern_domain::ErrorCode::MediaTooLarge)
            .with_detail("field", "file")
            .with_detail("limit_bytes", tern_domain::media::MAX_UPLOAD_BYTES),
    )
}

/// One stored file, with a download link valid 5 minutes.
#[utoipa::path(
    get,
    path = "/media/{media_id}",
    tag = "Media",
    operation_id = "getMedia",
    params(("media_id" = String, Path, format = Uuid)),
    responses((status = 200, description = "The media object with `download_url`.", body = MediaObject)),
    security(("bearer" = []))
)]
pub async fn get_media(
    auth: Authed<perm::MessagesRead>,
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> Result<Json<MediaObject>, ApiError> {
    path_id(&id)?;
    let now = now_ms();
    let m = media::get(&state.core, auth.org_id, &id, now).await?;
    let (url, expires) = media::download_link(&state.core, &m, now);
    let mut obj = MediaObject::from(m);
    obj.download_url = Some(url);
    obj.download_url_expires_at = Some(format_ms(expires));
    Ok(Json(obj))
}

/// The bytes of a file, through a signed link from `GET /media/{id}` (no API key).
#[utoipa::path(
    get,
    path = "/media/{media_id}/download",
    tag = "Media",
    operation_id = "downloadMedia",
    params(
        ("media_id" = String, Path, format = Uuid),
        ("expires" = i64, Query, description = "From the signed link."),
        ("signature" = String, Query, description = "From the signed link."),
        ("Range" = Option<String>, Header, description = "One byte range, e.g. `bytes=0-1023`."),
    ),
    responses(
        (status = 200, description = "The whole file.", content_type = "application/octet-stream", body = Vec<u8>),
        (status = 206, description = "The requested range.", content_type = "application/octet-stream", body = Vec<u8>),
        (status = 416, description = "The range starts past the end of the file."),
    ),
    security(())
)]
pub async fn download_media(
    State(state): State<AppState>,
    Path(id): Path<String>,
    Query(q): Query<HashMap<String, String>>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let expires = q
        .get("expires")
        .and_then(|e| e.parse::<i64>().ok())
        .ok_or_else(|| ApiError(Problem::not_found()))?;
    let signature = q
        .get("signature")
        .ok_or_else(|| ApiError(Problem::not_found()))?;
    let range = headers
        .get(header::RANGE)
        .and_then(|v| v.to_str().ok())
        .and_then(Requested::parse);
    let opened = media::open_link(&state.core, &id, expires, signature, range, now_ms()).await?;
    let d = match opened {
        Ok(d) => d,
        Err(size) => {
            let mut resp = StatusCode::RANGE_NOT_SATISFIABLE.into_response();
            resp.extensions_mut().insert(crate::frame::Complete);
            insert(&mut resp, header::CONTENT_RANGE, &format!("bytes */{size}"));
            harden(&mut resp);
            return Ok(resp);
        }
    };
    let size = u64::try_from(d.media.size_bytes).unwrap_or(0);
    let (status, length) = match &d.range {
        Some(r) => (StatusCode::PARTIAL_CONTENT, r.end - r.start),
        None => (StatusCode::OK, size),
    };
    let mut resp = Response::new(Body::from_stream(d.body));
    *resp.status_mut() = status;
    insert(&mut resp, header::CONTENT_TYPE, &d.media.mime_type);
    insert(&mut resp, header::CONTENT_LENGTH, &length.to_string());
    insert(&mut resp, header::ACCEPT_RANGES, "bytes");
    insert(&mut resp, header::CACHE_CONTROL, "private, max-age=300");
    if let Some(r) = &d.range {
        let value = format!("bytes {}-{}/{size}", r.start, r.end - 1);
        insert(&mut resp, header::CONTENT_RANGE, &value);
    }
    harden(&mut resp);
    let disposition = if shown_inline(&d.media.mime_type) {
        "inline"
    } else {
        "attachment"
    };
    let value = match &d.media.filename {
        Some(name) => format!("{disposition}; filename=\"{name}\""),
        None => disposition.to_string(),
    };
    if HeaderValue::from_str(&value).is_ok() {
        insert(&mut resp, header::CONTENT_DISPOSITION, &value);
    } else {
        insert(&mut resp, header::CONTENT_DISPOSITION, disposition);
    }
    Ok(resp)
}

/// The link serves customers' bytes from the API's own origin: a browser must neither guess
/// another type from them (`nosniff`) nor run them as a page of this origin (`sandbox`).
fn harden(resp: &mut Response) {
    let h = resp.headers_mut();
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    h.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static("sandbox"),
    );
}

/// Images, audio and video are shown in the browser; everything else is a download. A
/// markup type that calls itself an image (SVG, any `+xml`) is markup: a download too.
fn shown_inline(mime: &str) -> bool {
    let mime = mime.trim().to_ascii_lowercase();
    let media = ["image/", "audio/", "video/"]
        .iter()
        .any(|p| mime.starts_with(p));
    media && !mime.contains("xml") && !mime.contains("svg")
}

fn insert(resp: &mut Response, name: header::HeaderName, value: &str) {
    // Every value here is ASCII built by Tern or cleaned at upload; a filename that still
    // cannot be a header value is left out.
    if let Ok(v) = HeaderValue::from_str(value) {
        resp.headers_mut().insert(name, v);
    }
}

#[cfg(test)]
mod tests {
    use super::shown_inline;

    #[test]
    fn only_images_audio_and_video_are_shown_inline() {
        for inline in [
            "image/jpeg",
            "image/webp",
            "audio/ogg",
            "video/mp4",
            "Image/PNG",
        ] {
            assert!(shown_inline(inline), "{inline}");
        }
        for download in [
            "text/plain",
            "text/html",
            "application/pdf",
            "image/svg+xml",
            "application/xhtml+xml",
            "",
        ] {
            assert!(!shown_inline(download), "{download}");
        }
    }
}
