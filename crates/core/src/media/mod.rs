//! Media: what an organisation's files go through.
//!
//! | step | where | what |
//! |---|---|---|
//! | upload | [`upload`] (POST /media multipart) | streamed to a temporary object, hashed and sniffed on the way ([`ingest`]), then kept under its content key |
//! | import | [`import`] (POST /media `{url}`, a message's `link`) | the same, fetched by the guarded importer; at most 2 at once per organisation across processes |
//! | read | [`get`], [`download_link`], [`open_link`] | a signed link, valid 5 minutes, served by Tern with `Range` |
//! | send | [`for_message`] at acceptance; [`network_media_id`] at dispatch | per-type checks, then one network upload per (media, number) |
//! | receive | [`download_inbound`] (background job) | a customer's file fetched from the network and kept as Tern media |
//! | expire | [`cleanup`] (background job) | rows 30 days old deleted, then the objects no row names |
//!
//! The same bytes uploaded twice by one organisation are stored once (`media/<org>/<sha256>`);
//! each upload still gets its own media id.

pub mod blob;
mod import;
mod inbound;
mod ingest;
mod network;

use std::ops::Range;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use futures::stream::BoxStream;
use futures::{Stream, StreamExt};
use ipnet::IpNet;
use tern_domain::crypto::{MasterKey, Purpose};
use tern_domain::media::{self as rules, LINK_TTL_MS, MAX_UPLOAD_BYTES, MEDIA_TTL_MS};
use tern_domain::net_guard::Guard;
use tern_domain::send::{Kind, MediaRef};
use tern_domain::{ErrorCode, FieldError, Problem, new_id};
use tern_store::{Db, Media, MediaSource};
use uuid::Uuid;

pub use blob::{Blobs, Location};
pub use import::MAX_REDIRECTS;
pub use inbound::{InboundOutcome, download_inbound};
pub use network::{
    NETWORK_ID_TTL_MS, NetworkMediaError, forget_network_media_id, network_media_id,
};

use crate::{Core, Result};
pub use ingest::BodyError;
use ingest::{IngestError, Ingested, Typing, ingest};

/// URL imports one organisation may run at once, across all processes.
pub const IMPORT_SLOTS: i64 = 2;

/// How media are stored and fetched.
#[derive(Debug, Clone)]
pub struct MediaConfig {
    pub location: Location,
    /// `TERN_ALLOW_NETWORKS`: networks the importer may reach despite the guard.
    pub allow_networks: Vec<IpNet>,
    /// `TERN_EXTRA_CA_CERTS`: more trusted CAs for imports (a PEM bundle).
    pub extra_roots_pem: Option<Vec<u8>>,
    /// Deadline of one URL import, body included (30 s).
    pub import_timeout: Duration,
    /// Base of download links (`TERN_PUBLIC_URL`), without trailing slash.
    pub public_url: String,
}

impl MediaConfig {
    /// In memory, nothing allowed: for tools and tests that never serve media.
    pub fn in_memory() -> Self {
        MediaConfig {
            location: Location::Memory,
            allow_networks: Vec::new(),
            extra_roots_pem: None,
            import_timeout: Duration::from_secs(30),
            public_url: "http://127.0.0.1:8080".into(),
        }
    }
}

/// The media store, the guard and the importer. Shared by the API and the workers.
#[derive(Debug)]
pub struct MediaService {
    pub blobs: Blobs,
    guard: Arc<Guard>,
    /// `TERN_EXTRA_CA_FILE`, also trusted by event-webhook deliveries.
    extra_roots_pem: Option<Vec<u8>>,
    importer: reqwest::Client,
    import_timeout: Duration,
    /// This process, as holder of import slots.
    holder: String,
    public_url: String,
    pub(crate) uploads: network::UploadLocks,
}

impl MediaService {
    /// The private-address guard (with the operator's allowed networks), shared with the
    /// event-webhook targets.
    pub fn guard(&self) -> &Guard {
        &self.guard
    }

    /// The guard, shared (event-webhook deliveries).
    pub fn shared_guard(&self) -> Arc<Guard> {
        Arc::clone(&self.guard)
    }

    /// The operator's extra trusted CAs (PEM), if any.
    pub fn extra_roots_pem(&self) -> Option<&[u8]> {
        self.extra_roots_pem.as_deref()
    }

    pub fn new(config: MediaConfig) -> std::result::Result<MediaService, String> {
        let guard = Arc::new(Guard::new(config.allow_networks));
        Ok(MediaService {
            blobs: Blobs::open(&config.location)?,
            importer: import::client(Arc::clone(&guard), config.extra_roots_pem.as_deref())?,
            guard,
            extra_roots_pem: config.extra_roots_pem,
            import_timeout: config.import_timeout,
            holder: format!("import-{}", Uuid::new_v4()),
            public_url: config.public_url.trim_end_matches('/').to_string(),
            uploads: network::UploadLocks::default(),
        })
    }
}

/// A file as the caller sends it: its declared type and name, and its bytes as a stream.
pub struct Upload<S> {
    pub declared: Option<String>,
    pub filename: Option<String>,
    pub body: S,
}

/// Stores an uploaded file (POST /media, multipart part `file`).
pub async fn upload<S>(core: &Core, org_id: Uuid, up: Upload<S>, now: i64) -> Result<Media>
where
    S: Stream<Item = std::result::Result<Bytes, BodyError>> + Unpin,
{
    let got = ingest(
        &core.media.blobs,
        up.body,
        Typing::Decide(up.declared.as_deref()),
        MAX_UPLOAD_BYTES,
    )
    .await
    .map_err(|e| ingest_problem(e, "file"))?;
    let filename = up.filename.as_deref().and_then(rules::clean_filename);
    keep(core, org_id, got, filename, MediaSource::Upload, now).await
}

/// Imports a file from a customer-given URL (POST /media `{url}`; a message's `link`,
/// where `field` is `<type>.link`).
pub async fn import(core: &Core, org_id: Uuid, url: &str, field: &str, now: i64) -> Result<Media> {
    let svc = &core.media;
    let url = svc
        .guard
        .check_url(url)
        .map_err(|why| Problem::field(field, why.to_string()))?;
    let lease_until =
        now + i64::try_from(svc.import_timeout.as_millis()).unwrap_or(i64::MAX / 2) + 30_000;
    let Some(slot) = core
        .db
        .claim_import_slot(org_id, IMPORT_SLOTS, &svc.holder, now, lease_until)
        .await?
    else {
        return Err(Problem::new(ErrorCode::RateLimited)
            .with_message(format!(
                "{IMPORT_SLOTS} URL imports of this organisation are running; try again in a second."
            ))
            .with_detail("reason", "media_import_capacity")
            .with_retry_after(1));
    };
    let result = tokio::time::timeout(svc.import_timeout, fetch_and_ingest(svc, url, field)).await;
    // A release that fails leaves the slot to its lease's end.
    if let Err(e) = core.db.release_import_slot(org_id, slot, &svc.holder).await {
        tracing::warn!(error = %e, "cannot release an import slot");
    }
    let (got, filename) = match result {
        Err(_) => return Err(unavailable("timeout", "The URL did not answer in time.")),
        Ok(r) => r?,
    };
    keep(core, org_id, got, filename, MediaSource::Import, now).await
}

async fn fetch_and_ingest(
    svc: &MediaService,
    url: reqwest::Url,
    field: &str,
) -> Result<(Ingested, Option<String>)> {
    let resp = import::fetch(&svc.importer, &svc.guard, url)
        .await
        .map_err(|e| match e {
            import::FetchError::Refused { url, why } => {
                Problem::field(field, format!("{why} (at {url})"))
            }
            import::FetchError::Failed(why) => unavailable(
                "fetch_failed",
                &format!("The URL could not be fetched: {why}."),
            ),
            import::FetchError::Status(s) => {
                unavailable("http_status", &format!("The URL answered HTTP {s}."))
                    .with_detail("status", s)
            }
            import::FetchError::TooManyRedirects => unavailable(
                "too_many_redirects",
                &format!("The URL redirected more than {MAX_REDIRECTS} times."),
            ),
        })?;
    let declared = resp
        .headers()
        .get(reqwest::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let filename = filename_of(&resp);
    let body = resp.bytes_stream().map(|r| r.map_err(BodyError::broken));
    let got = ingest(
        &svc.blobs,
        body,
        Typing::Decide(declared.as_deref()),
        MAX_UPLOAD_BYTES,
    )
    .await
    .map_err(|e| ingest_problem(e, field))?;
    Ok((got, filename))
}

/// `Content-Disposition: …; filename="x.pdf"`, else the URL's last path segment.
fn filename_of(resp: &reqwest::Response) -> Option<String> {
    let from_header = resp
        .headers()
        .get(reqwest::header::CONTENT_DISPOSITION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| {
            v.split(';')
                .filter_map(|p| p.trim().strip_prefix("filename="))
                .next()
                .map(|f| f.trim_matches('"').to_string())
        });
    from_header
        .or_else(|| {
            resp.url()
                .path_segments()
                .and_then(|mut s| s.next_back().map(str::to_owned))
        })
        .and_then(|f| rules::clean_filename(&f))
}

/// Records the media row and moves the bytes to their content key (once per content).
pub(crate) async fn keep(
    core: &Core,
    org_id: Uuid,
    got: Ingested,
    filename: Option<String>,
    source: MediaSource,
    now: i64,
) -> Result<Media> {
    let key = Blobs::content_key(org_id, &got.sha256);
    let stored_before = core
        .db
        // A copy about to expire is not relied on: the cleanup may be deleting it.
        .live_media_by_sha256(org_id, &got.sha256, now + 60 * 60 * 1000)
        .await?
        .is_some();
    let media = Media {
        id: new_id(),
        org_id,
        sha256: got.sha256,
        mime_type: got.mime,
        size_bytes: i64::try_from(got.size).unwrap_or(i64::MAX),
        filename,
        object_key: key.clone(),
        animated: got.animated,
        source,
        created_at: now,
        expires_at: now + MEDIA_TTL_MS,
    };
    // The row first: the cleanup deletes an object only when no row names it, so from here
    // on the object is safe (a cleanup that looked before is undone by the move below).
    core.db.insert_media(&media).await?;
    let blobs = &core.media.blobs;
    let moved = if stored_before {
        blobs.delete(&got.tmp).await
    } else {
        blobs.promote(&got.tmp, &key).await
    };
    moved.map_err(|e| {
        tracing::error!(error = %e, "media store write failed");
        Problem::unavailable()
    })?;
    metrics::counter!("tern_media_stored_total", "source" => source.as_str()).increment(1);
    Ok(media)
}

/// The organisation's live media `id` (404 for unknown, expired or another organisation's).
pub async fn get(core: &Core, org_id: Uuid, id: &str, now: i64) -> Result<Media> {
    let Ok(id) = Uuid::parse_str(id) else {
        return Err(Problem::not_found());
    };
    match core.db.get_media(org_id, id).await? {
        Some(m) if m.expires_at > now => Ok(m),
        _ => Err(Problem::not_found()),
    }
}

/// A signed download link for `media`, valid [`LINK_TTL_MS`] (and never past the media's
/// own expiry); with its expiry.
pub fn download_link(core: &Core, media: &Media, now: i64) -> (String, i64) {
    let expires = (now + LINK_TTL_MS).min(media.expires_at);
    let sig = link_signature(&core.key, media.id, expires);
    (
        format!(
            "{}/api/public/v1/media/{}/download?expires={expires}&signature={sig}",
            core.media.public_url, media.id
        ),
        expires,
    )
}

fn link_signature(key: &MasterKey, id: Uuid, expires: i64) -> String {
    use base64::Engine as _;
    let tag = key.tag(
        Purpose::SignedLinks,
        &rules::link_payload(&id.to_string(), expires),
    );
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(tag)
}

/// What a valid download link serves.
pub struct Download {
    pub media: Media,
    /// The bytes asked for (all, or the range).
    pub body: BoxStream<'static, std::io::Result<Bytes>>,
    /// The byte range served, when a range was asked for.
    pub range: Option<Range<u64>>,
}

/// Opens a signed link. Any flaw (unknown id, bad or expired signature, media gone) is
/// `404 not_found`, so a link reveals nothing. `range` is resolved against the file's size
/// here: `Ok(Err(size))` means it cannot be satisfied (the caller answers 416).
pub async fn open_link(
    core: &Core,
    id: &str,
    expires: i64,
    signature: &str,
    range: Option<rules_range::Requested>,
    now: i64,
) -> Result<std::result::Result<Download, u64>> {
    use base64::Engine as _;
    let Ok(id) = Uuid::parse_str(id) else {
        return Err(Problem::not_found());
    };
    let tag = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(signature)
        .map_err(|_| Problem::not_found())?;
    let valid = core.key.verify_tag(
        Purpose::SignedLinks,
        &rules::link_payload(&id.to_string(), expires),
        &tag,
    );
    if !valid || expires <= now {
        return Err(Problem::not_found());
    }
    let media = match core.db.get_media_by_id(id).await? {
        Some(m) if m.expires_at > now => m,
        _ => return Err(Problem::not_found()),
    };
    let size = u64::try_from(media.size_bytes).unwrap_or(0);
    let range = match range.map(|r| r.resolve(size)) {
        None => None,
        Some(Some(r)) => Some(r),
        // Not satisfiable: the caller answers 416 with the size.
        Some(None) => return Ok(Err(size)),
    };
    let body = core
        .media
        .blobs
        .read(&media.object_key, range.clone())
        .await
        .map_err(|e| match e {
            object_store::Error::NotFound { .. } => Problem::not_found(),
            e => {
                tracing::error!(error = %e, "media store read failed");
                Problem::unavailable()
            }
        })?
        .map(|r| r.map_err(std::io::Error::other))
        .boxed();
    Ok(Ok(Download { media, body, range }))
}

/// A single `Range: bytes=…` request.
pub mod rules_range {
    use std::ops::Range;

    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub enum Requested {
        /// `bytes=a-b` or `bytes=a-` (`end` inclusive).
        From { start: u64, end: Option<u64> },
        /// `bytes=-n`: the last n bytes.
        Suffix(u64),
    }

    impl Requested {
        /// `None` for anything but one well-formed range (the whole file is served then,
        /// as RFC 9110 lets a server ignore a `Range` it does not take).
        pub fn parse(header: &str) -> Option<Requested> {
            let (unit, spec) = header.trim().split_once('=')?;
            if !unit.trim().eq_ignore_ascii_case("bytes") || spec.contains(',') {
                return None;
            }
            let (a, b) = spec.split_once('-')?;
            let (a, b) = (a.trim(), b.trim());
            if a.is_empty() {
                return position(b).map(Requested::Suffix);
            }
            let start = position(a)?;
            let end = if b.is_empty() {
                None
            } else {
                Some(position(b)?)
            };
            if end.is_some_and(|e| e < start) {
                return None;
            }
            Some(Requested::From { start, end })
        }

        /// The half-open byte range within a file of `size` bytes; `None` when it cannot be
        /// satisfied (416). An end past the file, up to the largest number, means "to the
        /// end" (RFC 9110 §14.1.2).
        pub fn resolve(self, size: u64) -> Option<Range<u64>> {
            match self {
                Requested::From { start, end } if start < size => {
                    let end = end.map_or(size, |e| e.saturating_add(1).min(size));
                    Some(start..end)
                }
                Requested::Suffix(n) if n > 0 && size > 0 => Some(size - n.min(size)..size),
                _ => None,
            }
        }
    }

    /// A byte position: one or more ASCII digits (no sign, unlike `u64::from_str`). A number
    /// past 64 bits counts as the largest one: as an end or a suffix it still means "to
    /// the end", as a start it lies past any file.
    fn position(s: &str) -> Option<u64> {
        if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        Some(s.parse().unwrap_or(u64::MAX))
    }
}

/// The media of a media message, at acceptance: a `media_id` must name live media of the
/// organisation (else `409 media_unavailable`); a `link` is imported now. Then the network's
/// per-type rules: the file type fits the message type (`400 validation_failed` naming the
/// field) and the size is within the type's limit (`400 media_too_large`).
pub async fn for_message(
    core: &Core,
    org_id: Uuid,
    kind: Kind,
    media: &MediaRef,
    now: i64,
) -> Result<Media> {
    let k = kind.as_str();
    let (found, field) = match media {
        MediaRef::Id(id) => {
            let field = format!("{k}.media_id");
            let m = match Uuid::parse_str(id) {
                Ok(id) => core.db.get_media(org_id, id).await?,
                Err(_) => None,
            };
            match m {
                Some(m) if m.expires_at > now => (m, field),
                Some(_) => {
                    return Err(unavailable(
                        "expired",
                        "This media has expired (media are kept 30 days); upload it again.",
                    )
                    .with_detail("field", field));
                }
                None => {
                    return Err(unavailable(
                        "unknown_media",
                        "No uploaded file of this organisation has this media_id.",
                    )
                    .with_detail("field", field));
                }
            }
        }
        MediaRef::Link(url) => {
            let field = format!("{k}.link");
            (import(core, org_id, url, &field, now).await?, field)
        }
    };
    let size = u64::try_from(found.size_bytes).unwrap_or(u64::MAX);
    match rules::check_for_message(kind, &found.mime_type, size, found.animated) {
        Ok(()) => Ok(found),
        Err(r @ rules::MessageRefusal::WrongType { .. }) => {
            Err(Problem::validation(vec![FieldError::new(
                field,
                r.to_string(),
            )]))
        }
        Err(rules::MessageRefusal::TooLarge { size, limit }) => {
            Err(Problem::new(ErrorCode::MediaTooLarge)
                .with_message(format!(
                    "The file is {size} bytes; a {k} message takes at most {limit} bytes of {}.",
                    found.mime_type
                ))
                .with_detail("field", field)
                .with_detail("size_bytes", size)
                .with_detail("limit_bytes", limit))
        }
    }
}

/// Deletes media past their expiry, then the objects no media row names any more.
/// Returns how many objects were deleted.
pub async fn cleanup(db: &Db, media: &MediaService, now: i64) -> Result<usize> {
    let mut deleted = 0;
    loop {
        let keys = db.delete_expired_media(now, 500).await?;
        let batch_was_full = keys.len() == 500;
        for key in &keys {
            match media
                .blobs
                .delete(&object_store::path::Path::from(key.as_str()))
                .await
            {
                Ok(()) => deleted += 1,
                Err(e) => tracing::warn!(error = %e, key, "cannot delete expired media object"),
            }
        }
        if !batch_was_full {
            return Ok(deleted);
        }
    }
}

fn unavailable(reason: &str, message: &str) -> Problem {
    Problem::new(ErrorCode::MediaUnavailable)
        .with_message(message)
        .with_detail("reason", reason)
}

fn ingest_problem(e: IngestError, field: &str) -> Problem {
    match e {
        IngestError::Type(r) => Problem::validation(vec![FieldError::new(field, r.to_string())]),
        IngestError::Empty => Problem::validation(vec![FieldError::new(field, "is empty")]),
        IngestError::TooLarge => Problem::new(ErrorCode::MediaTooLarge)
            .with_message(format!(
                "The file is larger than {MAX_UPLOAD_BYTES} bytes (16 MiB)."
            ))
            .with_detail("field", field)
            .with_detail("limit_bytes", MAX_UPLOAD_BYTES),
        IngestError::Source(why) if field == "file" => Problem::validation(vec![FieldError::new(
            field,
            format!("could not be read: {why}"),
        )]),
        IngestError::Source(why) => unavailable(
            "fetch_failed",
            &format!("The URL's answer broke off: {why}."),
        ),
        IngestError::Storage(why) => {
            tracing::error!(error = %why, "media store write failed");
            Problem::unavailable()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::rules_range::Requested;

    #[test]
    fn ranges() {
        let r = |h: &str| Requested::parse(h);
        assert_eq!(r("bytes=0-9").unwrap().resolve(100), Some(0..10));
        assert_eq!(r("bytes=90-").unwrap().resolve(100), Some(90..100));
        assert_eq!(r("bytes=90-200").unwrap().resolve(100), Some(90..100));
        assert_eq!(r("bytes=-10").unwrap().resolve(100), Some(90..100));
        assert_eq!(r("bytes=-200").unwrap().resolve(100), Some(0..100));
        assert_eq!(r("bytes=100-").unwrap().resolve(100), None);
        assert_eq!(r("bytes=-0").unwrap().resolve(100), None);
        assert_eq!(r("bytes=5-1"), None);
        assert_eq!(r("bytes=0-1,3-4"), None);
        assert_eq!(r("items=0-1"), None);
    }

    #[test]
    fn range_edges_never_overflow() {
        let r = |h: &str| Requested::parse(h);
        // An end up to (and past) the largest 64-bit number means "to the end".
        assert_eq!(
            r("bytes=0-18446744073709551615").unwrap().resolve(100),
            Some(0..100)
        );
        assert_eq!(
            r("bytes=5-99999999999999999999999").unwrap().resolve(100),
            Some(5..100)
        );
        assert_eq!(
            r("bytes=-18446744073709551615").unwrap().resolve(100),
            Some(0..100)
        );
        assert_eq!(r("bytes=99-99").unwrap().resolve(100), Some(99..100));
        // A start past the file, however large, is unsatisfiable (416).
        assert_eq!(r("bytes=18446744073709551615-").unwrap().resolve(100), None);
        assert_eq!(
            r("bytes=99999999999999999999999-").unwrap().resolve(100),
            None
        );
        assert_eq!(r("bytes=0-").unwrap().resolve(0), None);
        assert_eq!(r("bytes=-5").unwrap().resolve(0), None);
        // The unit is case-insensitive; anything malformed is ignored (whole file).
        assert_eq!(r("Bytes=0-0").unwrap().resolve(100), Some(0..1));
        for bad in [
            "bytes=",
            "bytes=-",
            "bytes=+1-2",
            "bytes=1-+2",
            "bytes=-+3",
            "bytes=a-b",
            "bytes=0x1-2",
            "bytes 0-1",
            "bytes=1--2",
            "=0-1",
        ] {
            assert_eq!(r(bad), None, "{bad}");
        }
    }
}
