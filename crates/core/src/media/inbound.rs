//! A customer's file, fetched from the network and kept as Tern media: `GET /{media-id}`
//! (a short-lived URL), then the bearer-protected download, streamed to the media store.
//! The inbound Message's `media_id` names the result. Run by a background job, so a slow
//! or failing download never holds up the rest of a webhook batch.

use tern_cloudapi::SendError;
use tern_cloudapi::error::RetryClass;
use tern_store::{InboundMediaJob, MediaSource};

use super::ingest::{BodyError, IngestError, Typing, ingest};
use crate::{Core, numbers};

/// The most Tern keeps of a customer's file: the network refuses larger ones (131052).
pub const MAX_INBOUND_BYTES: u64 = 100 * 1024 * 1024;

/// What became of one attempt.
#[derive(Debug, PartialEq, Eq)]
pub enum InboundOutcome {
    /// Stored and linked to the message.
    Stored,
    /// Worth trying again later (network or store unavailable, URL expired).
    Retry(String),
    /// Never going to work (the network forgot the id, the number is gone, too large).
    Failed(String),
}

/// One attempt at a claimed job; records the outcome in the store.
pub async fn download_inbound(core: &Core, job: &InboundMediaJob, now: i64) -> InboundOutcome {
    let outcome = attempt(core, job, now).await;
    if let Err(e) = &outcome {
        tracing::info!(wamid = %job.wamid, error = %e.message(), "inbound media not stored");
    }
    match outcome {
        Ok(()) => InboundOutcome::Stored,
        Err(Attempt::Retry(m)) => InboundOutcome::Retry(m),
        Err(Attempt::Failed(m)) => InboundOutcome::Failed(m),
    }
}

enum Attempt {
    Retry(String),
    Failed(String),
}

impl Attempt {
    fn message(&self) -> &str {
        match self {
            Attempt::Retry(m) | Attempt::Failed(m) => m,
        }
    }
}

fn from_send(what: &str, e: &SendError) -> Attempt {
    let m = format!("{what}: {e}");
    if e.is_unknown_media() {
        return Attempt::Failed(m);
    }
    match e.retry_class() {
        RetryClass::Never => Attempt::Failed(m),
        _ => Attempt::Retry(m),
    }
}

async fn attempt(core: &Core, job: &InboundMediaJob, now: i64) -> Result<(), Attempt> {
    let store = |e: tern_store::StoreError| Attempt::Retry(format!("database: {e}"));
    let number = core
        .db
        .get_phone_number(&job.phone_number_id)
        .await
        .map_err(store)?
        .ok_or_else(|| Attempt::Failed("the receiving number was removed".into()))?;
    let token = numbers::access_token(&core.key, &number)
        .ok_or_else(|| Attempt::Failed("the number's access token cannot be read".into()))?;
    let cloud = core
        .network_for(&number)
        .ok_or_else(|| Attempt::Retry("this process runs no test network".into()))?;
    let info = cloud
        .get_media_for(&job.network_media_id, &token, Some(&job.phone_number_id))
        .await
        .map_err(|e| from_send("media lookup", &e))?;
    let download = cloud
        .download_media_stream(&info.url, &token)
        .await
        .map_err(|e| from_send("download", &e))?;
    let mime = job
        .mime_type
        .clone()
        .or(info.mime_type.clone())
        .or(download.content_type.clone())
        .unwrap_or_else(|| "application/octet-stream".into());
    let got = ingest(
        &core.media.blobs,
        futures::StreamExt::map(download.body, |r| r.map_err(BodyError::broken)),
        Typing::Trust(&mime),
        MAX_INBOUND_BYTES,
    )
    .await
    .map_err(|e| match e {
        IngestError::TooLarge => Attempt::Failed("larger than 100 MiB".into()),
        IngestError::Empty => Attempt::Retry("the network sent an empty file".into()),
        IngestError::Type(t) => Attempt::Failed(t.to_string()),
        IngestError::Source(m) => Attempt::Retry(format!("download broke off: {m}")),
        IngestError::Storage(m) => Attempt::Retry(format!("media store: {m}")),
    })?;
    let filename = job
        .filename
        .as_deref()
        .and_then(tern_domain::media::clean_filename);
    let media = super::keep(core, job.org_id, got, filename, MediaSource::Inbound, now)
        .await
        .map_err(|p| Attempt::Retry(format!("keeping the file: {}", p.message)))?;
    core.db
        .finish_inbound_media(job.org_id, &job.wamid, &job.lease_owner, media.id, now)
        .await
        .map_err(store)?;
    Ok(())
}
