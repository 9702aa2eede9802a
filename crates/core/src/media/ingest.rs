//! One file streaming in (an upload's part, an import's answer, a customer's media from the
//! network): counted, hashed and sniffed as it passes, written to a temporary object once
//! its type is decided, never held whole in memory. Stops at the first byte over the
//! ceiling.

use std::fmt::Display;

use bytes::Bytes;
use futures::{Stream, StreamExt};
use object_store::path::Path;
use sha2::{Digest, Sha256};
use tern_domain::media::{self, SNIFF_BYTES, TypeRefusal};

use super::blob::{Blobs, Writer};

/// A file stored under a temporary key, with what was learnt on the way.
#[derive(Debug)]
pub(crate) struct Ingested {
    pub tmp: Path,
    /// The decided type (normalised MIME).
    pub mime: String,
    pub sha256: String,
    pub size: u64,
    pub animated: bool,
}

#[derive(Debug)]
pub(crate) enum IngestError {
    Type(TypeRefusal),
    Empty,
    /// More than `limit` bytes.
    TooLarge,
    /// The source failed while sending (connection reset, malformed multipart).
    Source(String),
    /// The media store failed.
    Storage(String),
}

/// How a file's type is decided.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Typing<'a> {
    /// From the type the sender named (if any) and the bytes; only types the network
    /// carries (a customer's upload or import).
    Decide(Option<&'a str>),
    /// As the network said (a customer's file received from the network: any document
    /// type a phone can send).
    Trust(&'a str),
}

/// A failure of the stream a file arrives on.
#[derive(Debug)]
pub enum BodyError {
    /// The transport's own size limit was hit (the file is too large).
    TooLarge,
    /// Connection reset, malformed multipart, …
    Broken(String),
}

impl BodyError {
    pub fn broken(e: impl Display) -> Self {
        BodyError::Broken(e.to_string())
    }
}

/// Streams `body` to a temporary object; `limit` is the most bytes accepted.
pub(crate) async fn ingest<S>(
    blobs: &Blobs,
    mut body: S,
    typing: Typing<'_>,
    limit: u64,
) -> Result<Ingested, IngestError>
where
    S: Stream<Item = Result<Bytes, BodyError>> + Unpin,
{
    let mut hasher = Sha256::new();
    let mut size: u64 = 0;
    // The first bytes, kept until the type is decided (then the writer opens).
    let mut head: Vec<u8> = Vec::new();
    let mut held: Vec<Bytes> = Vec::new();
    let mut open: Option<(Writer, String)> = None;
    let tmp = Blobs::temp_key();
    loop {
        let chunk = match body.next().await {
            None => break,
            Some(Ok(c)) => c,
            Some(Err(e)) => {
                discard(open).await;
                return Err(match e {
                    BodyError::TooLarge => IngestError::TooLarge,
                    BodyError::Broken(m) => IngestError::Source(m),
                });
            }
        };
        size += chunk.len() as u64;
        if size > limit {
            discard(open).await;
            return Err(IngestError::TooLarge);
        }
        hasher.update(&chunk);
        match &mut open {
            Some((w, _)) => w.put(chunk).await.map_err(storage)?,
            None => {
                let take = (SNIFF_BYTES - head.len()).min(chunk.len());
                head.extend_from_slice(&chunk[..take]);
                held.push(chunk);
                if head.len() >= SNIFF_BYTES {
                    open = Some(start(blobs, &tmp, typing, &head, &mut held).await?);
                }
            }
        }
    }
    if size == 0 {
        return Err(IngestError::Empty);
    }
    let (writer, mime) = match open {
        Some(o) => o,
        None => start(blobs, &tmp, typing, &head, &mut held).await?,
    };
    writer.finish().await.map_err(storage)?;
    Ok(Ingested {
        tmp,
        mime,
        sha256: hex::encode(hasher.finalize()),
        size,
        animated: media::is_animated_webp(&head),
    })
}

/// Decides the type from the first bytes and opens the writer with what was held.
async fn start(
    blobs: &Blobs,
    tmp: &Path,
    typing: Typing<'_>,
    head: &[u8],
    held: &mut Vec<Bytes>,
) -> Result<(Writer, String), IngestError> {
    let mime = match typing {
        Typing::Decide(declared) => media::decide_type(declared, head)
            .map_err(IngestError::Type)?
            .mime
            .to_string(),
        Typing::Trust(mime) => media::normalize_mime(mime),
    };
    let mut w = blobs.writer(tmp).await.map_err(storage)?;
    for c in held.drain(..) {
        if let Err(e) = w.put(c).await {
            w.abort().await;
            return Err(storage(e));
        }
    }
    Ok((w, mime))
}

async fn discard(open: Option<(Writer, String)>) {
    if let Some((w, _)) = open {
        w.abort().await;
    }
}

fn storage(e: object_store::Error) -> IngestError {
    IngestError::Storage(e.to_string())
}
