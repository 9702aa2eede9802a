//! The network's copy of a file: uploaded once per (media, sending number) and its id
//! reused while the network keeps it. Called by the dispatcher just before a media message
//! goes out.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use tern_cloudapi::{CloudApiClient, SendError};
use tern_domain::time::now_ms;
use tern_domain::timeline::{Detail, UploadOutcome};
use tern_store::{Db, StoreError};
use uuid::Uuid;

use super::MediaService;

/// How long Tern reuses a network media id: the network keeps uploaded media 30 days; a
/// day less, so an id never expires between this check and the send.
pub const NETWORK_ID_TTL_MS: i64 = 29 * 24 * 60 * 60 * 1000;

/// Why there is no network media id to send with.
#[derive(Debug)]
pub enum NetworkMediaError {
    /// The media expired or were deleted after the message was accepted.
    Gone,
    Store(StoreError),
    /// The media store could not be read.
    Blob(String),
    /// The network refused or did not answer the upload.
    Network(SendError),
}

impl From<StoreError> for NetworkMediaError {
    fn from(e: StoreError) -> Self {
        NetworkMediaError::Store(e)
    }
}

/// One upload at a time per (media, number) in this process, so a campaign's thousand
/// messages with one image upload it once.
#[derive(Debug, Default)]
pub(crate) struct UploadLocks(Mutex<HashMap<(Uuid, String), UploadLock>>);

type UploadLock = Arc<tokio::sync::Mutex<()>>;

impl UploadLocks {
    fn lock_for(&self, media_id: Uuid, pnid: &str) -> UploadLock {
        let mut map = self.0.lock().unwrap_or_else(|p| p.into_inner());
        // Entries nobody holds are dropped as new ones come, so the map stays small.
        map.retain(|_, l| Arc::strong_count(l) > 1);
        Arc::clone(map.entry((media_id, pnid.to_string())).or_default())
    }
}

/// The network's media id for `media_id` on number `pnid`: the one uploaded before while
/// still valid, else a fresh upload (streamed from the media store) that is remembered,
/// with a `media_upload` entry in the timeline of `message_id` (the message being sent),
/// uploaded or failed.
#[allow(clippy::too_many_arguments)]
pub async fn network_media_id(
    db: &Db,
    cloud: &CloudApiClient,
    media: &MediaService,
    media_id: Uuid,
    pnid: &str,
    token: &str,
    now: i64,
    message_id: Uuid,
) -> Result<String, NetworkMediaError> {
    if let Some(id) = db.network_media_id(media_id, pnid, now).await? {
        return Ok(id);
    }
    let lock = media.uploads.lock_for(media_id, pnid);
    let _held = lock.lock().await;
    // Uploaded by a concurrent send while this one waited.
    if let Some(id) = db.network_media_id(media_id, pnid, now).await? {
        return Ok(id);
    }
    let m = match db.get_media_by_id(media_id).await? {
        Some(m) if m.expires_at > now => m,
        _ => return Err(NetworkMediaError::Gone),
    };
    let body = media
        .blobs
        .read(&m.object_key, None)
        .await
        .map_err(|e| match e {
            object_store::Error::NotFound { .. } => NetworkMediaError::Gone,
            e => NetworkMediaError::Blob(e.to_string()),
        })?;
    // The network checks a file name's extension against the type: the name it gets is
    // made from the type, never the customer's (a document message carries its own
    // `filename` for the recipient).
    let filename = network_file_name(&m.mime_type);
    let uploaded = cloud
        .upload_media_stream(
            pnid,
            token,
            body,
            u64::try_from(m.size_bytes).unwrap_or(0),
            &m.mime_type,
            &filename,
        )
        .await;
    let entry = |outcome, network_media_id| Detail::MediaUpload {
        media_id,
        outcome,
        network_media_id,
    };
    let id = match uploaded {
        Ok(id) => id,
        Err(e) => {
            let failed = entry(UploadOutcome::Failed, None);
            db.add_timeline(message_id, now_ms(), &failed).await?;
            return Err(NetworkMediaError::Network(e));
        }
    };
    let mut tx = db.begin().await?;
    tx.save_network_media_id(media_id, pnid, &id, now + NETWORK_ID_TTL_MS)
        .await?;
    tx.add_timeline(
        message_id,
        now_ms(),
        &entry(UploadOutcome::Uploaded, Some(id.clone())),
    );
    tx.commit().await?;
    metrics::counter!("tern_media_network_uploads_total").increment(1);
    Ok(id)
}

/// Forgets a network id the network no longer knows, so the next send uploads again.
pub async fn forget_network_media_id(
    db: &Db,
    media_id: Uuid,
    pnid: &str,
) -> Result<(), StoreError> {
    db.forget_network_media_id(media_id, pnid).await
}

fn network_file_name(mime: &str) -> String {
    let ext = match mime {
        "image/jpeg" => "jpg",
        "image/png" => "png",
        "image/webp" => "webp",
        "video/mp4" => "mp4",
        "video/3gpp" => "3gp",
        "audio/aac" => "aac",
        "audio/amr" => "amr",
        "audio/mpeg" => "mp3",
        "audio/mp4" => "m4a",
        "audio/ogg" => "ogg",
        "text/plain" => "txt",
        "application/pdf" => "pdf",
        "application/msword" => "doc",
        "application/vnd.ms-excel" => "xls",
        "application/vnd.ms-powerpoint" => "ppt",
        "application/vnd.openxmlformats-officedocument.wordprocessingml.document" => "docx",
        "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet" => "xlsx",
        "application/vnd.openxmlformats-officedocument.presentationml.presentation" => "pptx",
        _ => "bin",
    };
    format!("file.{ext}")
}
