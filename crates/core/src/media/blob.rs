//! Where media bytes live: a directory (`file://DIR`, the default) or an S3-compatible
//! bucket (`s3://BUCKET?endpoint=URL&region=R`), both through the `object_store` crate.
//!
//! Keys: `tmp/<uuid>` while a file streams in (its type and hash are not known yet), then
//! `media/<org>/<sha256>`: the same bytes uploaded twice by one organisation are one object.

use std::ops::Range;
use std::path::PathBuf;
use std::sync::Arc;

use bytes::Bytes;
use futures::stream::BoxStream;
use futures::{StreamExt, TryStreamExt};
use object_store::path::Path;
use object_store::{GetOptions, GetRange, ObjectStore, ObjectStoreExt, WriteMultipart};
use uuid::Uuid;

/// A `TERN_MEDIA_STORE` value, parsed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Location {
    /// A directory on this machine (created when missing).
    File(PathBuf),
    /// A bucket; credentials from `AWS_ACCESS_KEY_ID` / `AWS_SECRET_ACCESS_KEY`. An
    /// `http://` endpoint is allowed because the operator wrote it explicitly.
    S3 {
        bucket: String,
        endpoint: Option<String>,
        region: Option<String>,
        /// Key id and secret given directly (tests); otherwise the standard variables.
        credentials: Option<(String, String)>,
    },
    /// In memory; for tests and tools that never serve media.
    Memory,
}

impl Location {
    /// `file://DIR`, a plain path, or `s3://BUCKET?endpoint=URL&region=R`.
    pub fn parse(raw: &str) -> Result<Location, String> {
        let raw = raw.trim();
        if let Some(rest) = raw.strip_prefix("s3://") {
            let (bucket, query) = rest.split_once('?').unwrap_or((rest, ""));
            let bucket = bucket.trim_end_matches('/');
            if bucket.is_empty() || bucket.contains('/') {
                return Err("s3:// needs a bucket name: s3://BUCKET?endpoint=URL&region=R".into());
            }
            let (mut endpoint, mut region) = (None, None);
            for (k, v) in url::form_urlencoded::parse(query.as_bytes()) {
                match k.as_ref() {
                    "endpoint" => endpoint = Some(v.into_owned()),
                    "region" => region = Some(v.into_owned()),
                    other => return Err(format!("unknown s3:// parameter {other:?}")),
                }
            }
            return Ok(Location::S3 {
                bucket: bucket.to_string(),
                endpoint,
                region,
                credentials: None,
            });
        }
        if raw == "memory:" {
            return Ok(Location::Memory);
        }
        let path = raw.strip_prefix("file://").unwrap_or(raw);
        if path.is_empty() || path.contains("://") {
            return Err(format!(
                "expected file://DIR or s3://BUCKET?endpoint=URL&region=R, got {raw:?}"
            ));
        }
        Ok(Location::File(PathBuf::from(path)))
    }
}

/// The media store. Cheap to clone.
#[derive(Clone, Debug)]
pub struct Blobs {
    store: Arc<dyn ObjectStore>,
    /// Bytes per part of a streamed write: S3 needs at least 5 MiB (but the last); a
    /// directory takes any size, and smaller parts keep memory low.
    part_size: usize,
}

impl Blobs {
    pub fn open(location: &Location) -> Result<Blobs, String> {
        Ok(match location {
            Location::File(dir) => {
                std::fs::create_dir_all(dir)
                    .map_err(|e| format!("cannot create media directory {}: {e}", dir.display()))?;
                let fs = object_store::local::LocalFileSystem::new_with_prefix(dir)
                    .map_err(|e| format!("cannot open media directory {}: {e}", dir.display()))?;
                Blobs {
                    store: Arc::new(fs),
                    part_size: 256 * 1024,
                }
            }
            Location::S3 {
                bucket,
                endpoint,
                region,
                credentials,
            } => {
                let mut b = object_store::aws::AmazonS3Builder::from_env()
                    .with_bucket_name(bucket)
                    .with_region(region.as_deref().unwrap_or("us-east-1"));
                if let Some(e) = endpoint {
                    b = b.with_endpoint(e).with_allow_http(e.starts_with("http://"));
                }
                if let Some((id, secret)) = credentials {
                    b = b.with_access_key_id(id).with_secret_access_key(secret);
                }
                Blobs {
                    store: Arc::new(
                        b.build()
                            .map_err(|e| format!("cannot open S3 store: {e}"))?,
                    ),
                    part_size: 5 * 1024 * 1024,
                }
            }
            Location::Memory => Blobs {
                store: Arc::new(object_store::memory::InMemory::new()),
                part_size: 256 * 1024,
            },
        })
    }

    /// A fresh temporary key for a file streaming in.
    pub(crate) fn temp_key() -> Path {
        Path::from(format!("tmp/{}", Uuid::new_v4()))
    }

    /// The key of an organisation's file with these bytes.
    pub(crate) fn content_key(org_id: Uuid, sha256: &str) -> String {
        format!("media/{org_id}/{sha256}")
    }

    pub(crate) async fn writer(&self, key: &Path) -> Result<Writer, object_store::Error> {
        let upload = self.store.put_multipart(key).await?;
        Ok(Writer {
            inner: WriteMultipart::new_with_chunk_size(upload, self.part_size),
        })
    }

    /// Moves a finished temporary object to its content key (replacing an object with the
    /// same bytes, if any).
    pub(crate) async fn promote(&self, tmp: &Path, key: &str) -> Result<(), object_store::Error> {
        self.store.rename(tmp, &Path::from(key)).await
    }

    /// Deletes an object; one already gone is not an error.
    pub(crate) async fn delete(&self, key: &Path) -> Result<(), object_store::Error> {
        match self.store.delete(key).await {
            Ok(()) | Err(object_store::Error::NotFound { .. }) => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// The bytes of `key`, all or a range, as a stream.
    pub(crate) async fn read(
        &self,
        key: &str,
        range: Option<Range<u64>>,
    ) -> Result<BoxStream<'static, Result<Bytes, object_store::Error>>, object_store::Error> {
        let opts = GetOptions {
            range: range.map(GetRange::Bounded),
            ..GetOptions::default()
        };
        let got = self.store.get_opts(&Path::from(key), opts).await?;
        Ok(got.into_stream().boxed())
    }

    /// How many objects are stored under `prefix` (tests and the benchmark count files).
    pub async fn count(&self, prefix: &str) -> Result<usize, object_store::Error> {
        let prefix = Path::from(prefix);
        let items: Vec<_> = self.store.list(Some(&prefix)).try_collect().await?;
        Ok(items.len())
    }
}

/// A streamed write: parts go out as they fill, at most two in flight.
pub(crate) struct Writer {
    inner: WriteMultipart,
}

impl Writer {
    pub(crate) async fn put(&mut self, bytes: Bytes) -> Result<(), object_store::Error> {
        self.inner.wait_for_capacity(2).await?;
        self.inner.put(bytes);
        Ok(())
    }

    pub(crate) async fn finish(self) -> Result<(), object_store::Error> {
        self.inner.finish().await.map(|_| ())
    }

    pub(crate) async fn abort(self) {
        // Nothing to keep: an abort that fails leaves a staging file the store cleans.
        let _ = self.inner.abort().await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn locations() {
        assert_eq!(
            Location::parse("file:///var/tern").unwrap(),
            Location::File("/var/tern".into())
        );
        assert_eq!(
            Location::parse("./tern-media").unwrap(),
            Location::File("./tern-media".into())
        );
        assert_eq!(
            Location::parse("s3://bucket?endpoint=http://127.0.0.1:9000&region=eu-west-1").unwrap(),
            Location::S3 {
                bucket: "bucket".into(),
                endpoint: Some("http://127.0.0.1:9000".into()),
                region: Some("eu-west-1".into()),
                credentials: None,
            }
        );
        assert!(Location::parse("s3://").is_err());
        assert!(Location::parse("s3://b?x=1").is_err());
        assert!(Location::parse("ftp://x").is_err());
    }
}
