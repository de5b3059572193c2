//! `Sink`: streams a media object into the backend while hashing and counting it, refuses to grow past
//! the cap, and lands it under its content address `{sessionId}/{sha256}`. When the key already exists
//! the new copy is dropped: stored once. `Upload`: the same streaming write to a key the caller names
//! (archive import).
//!
//! Memory per write is bounded whatever the object's size, by backend (`Layout`):
//! - local disk: parts of `LOCAL_PART_SIZE` written at their offsets as they fill (at most
//!   `PARTS_IN_FLIGHT + 1` in memory), into a staging file renamed to the key once the hash is known;
//!   an object under one part is one write.
//! - S3: an object past `SPILL_AFTER` bytes is written to a local scratch file as it arrives and, once
//!   complete, streamed from it straight to its content address (`streamed`: one PUT whose body is
//!   read from the file as it goes out, no part buffers; no rename: the hash is known by then, and an
//!   object already stored is not uploaded at all). The scratch file goes when done.

use std::path::PathBuf;
use std::sync::Arc;

use object_store::path::Path as ObjectPath;
use object_store::{ObjectStore, ObjectStoreExt, PutPayload, WriteMultipart};
use sha2::{Digest, Sha256};
use tokio::io::AsyncWriteExt;

use super::backend::classify;
use super::streamed::Streamer;
use super::{MediaError, StoredMedia};

/// Part size on the local disk, which takes parts of any size.
pub(super) const LOCAL_PART_SIZE: usize = 256 * 1024;
/// Parts uploading at once per object.
pub(super) const PARTS_IN_FLIGHT: usize = 2;
/// S3: bytes kept in memory before a write spills to a scratch file.
pub(super) const SPILL_AFTER: usize = 256 * 1024;

/// How a backend takes a streamed write (see the module comment).
#[derive(Debug, Clone)]
pub(super) enum Layout {
    /// The local disk: parts written as they fill.
    Direct,
    /// S3: spilled to a scratch file under `scratch`, streamed from it by `streamer`.
    Spooled {
        scratch: PathBuf,
        streamer: Streamer,
    },
}

pub(super) struct Sink {
    session_id: String,
    hasher: Sha256,
    size: u64,
    max: u64,
    upload: Upload,
}

impl Sink {
    pub(super) fn new(
        objects: Arc<dyn ObjectStore>,
        layout: Layout,
        session_id: &str,
        max: u64,
    ) -> Sink {
        let tmp = ObjectPath::from_iter([
            session_id.to_string(),
            format!(".upload-{}", uuid::Uuid::new_v4()),
        ]);
        Sink {
            session_id: session_id.to_string(),
            hasher: Sha256::new(),
            size: 0,
            max,
            upload: Upload::new(objects, layout, tmp),
        }
    }

    pub(super) fn max(&self) -> u64 {
        self.max
    }

    pub(super) fn size(&self) -> u64 {
        self.size
    }

    pub(super) async fn write(&mut self, bytes: &[u8]) -> Result<(), MediaError> {
        self.size += bytes.len() as u64;
        if self.size > self.max {
            return Err(MediaError::TooLarge(self.max));
        }
        self.hasher.update(bytes);
        self.upload.write(bytes).await
    }

    pub(super) async fn finish(
        mut self,
        content_type: Option<String>,
    ) -> Result<StoredMedia, MediaError> {
        let digest = hex::encode(std::mem::take(&mut self.hasher).finalize());
        let key = format!("{}/{digest}", self.session_id);
        let target = ObjectPath::from_iter([self.session_id.as_str(), digest.as_str()]);
        let objects = self.upload.objects.clone();
        let exists = match objects.head(&target).await {
            Ok(_) => true,
            Err(object_store::Error::NotFound { .. }) => false,
            Err(err) => return Err(classify(err)),
        };
        if exists {
            self.upload.discard().await;
        } else {
            self.upload.finish_at(&target).await?;
        }
        Ok(StoredMedia {
            key,
            size: self.size,
            content_type,
        })
    }
}

/// A streaming write to one key: buffered below one part, then parts (local disk) or a scratch file
/// (S3).
pub(super) struct Upload {
    objects: Arc<dyn ObjectStore>,
    layout: Layout,
    path: ObjectPath,
    buffer: Vec<u8>,
    multipart: Option<WriteMultipart>,
    spool: Option<Spool>,
}

/// A write spilled to a scratch file (removed when this drops).
struct Spool {
    file: tokio::fs::File,
    path: tempfile::TempPath,
    size: u64,
}

impl Upload {
    pub(super) fn new(objects: Arc<dyn ObjectStore>, layout: Layout, path: ObjectPath) -> Upload {
        Upload {
            objects,
            layout,
            path,
            buffer: Vec::new(),
            multipart: None,
            spool: None,
        }
    }

    pub(super) async fn write(&mut self, bytes: &[u8]) -> Result<(), MediaError> {
        if let Some(multipart) = self.multipart.as_mut() {
            multipart
                .wait_for_capacity(PARTS_IN_FLIGHT)
                .await
                .map_err(classify)?;
            multipart.write(bytes);
            return Ok(());
        }
        if let Some(spool) = self.spool.as_mut() {
            spool.file.write_all(bytes).await?;
            spool.size += bytes.len() as u64;
            return Ok(());
        }
        self.buffer.extend_from_slice(bytes);
        match &self.layout {
            Layout::Direct if self.buffer.len() >= LOCAL_PART_SIZE => {
                let upload = self
                    .objects
                    .put_multipart(&self.path)
                    .await
                    .map_err(classify)?;
                let mut multipart = WriteMultipart::new_with_chunk_size(upload, LOCAL_PART_SIZE);
                multipart.write(&std::mem::take(&mut self.buffer));
                self.multipart = Some(multipart);
            }
            Layout::Spooled { scratch, .. } if self.buffer.len() >= SPILL_AFTER => {
                let mut spool = Spool::create(scratch).await?;
                spool.file.write_all(&self.buffer).await?;
                spool.size = self.buffer.len() as u64;
                self.buffer = Vec::new();
                self.spool = Some(spool);
            }
            _ => {}
        }
        Ok(())
    }

    /// Completes the write at its own key; returns the bytes written.
    pub(super) async fn finish(mut self) -> Result<u64, MediaError> {
        let path = self.path.clone();
        self.complete(&path).await
    }

    /// Completes the write so that the object ends up at `target`.
    async fn finish_at(mut self, target: &ObjectPath) -> Result<u64, MediaError> {
        self.complete(target).await
    }

    async fn complete(&mut self, target: &ObjectPath) -> Result<u64, MediaError> {
        if let Some(mut spool) = self.spool.take() {
            let Layout::Spooled { streamer, .. } = &self.layout else {
                return Err(MediaError::BadInput(
                    "a spilled write without an S3 streamer".into(),
                ));
            };
            // Everything written reaches the file before it is read back by path.
            spool.file.flush().await?;
            streamer.upload(&spool.path, spool.size, target).await?;
            return Ok(spool.size);
        }
        match self.multipart.take() {
            None => {
                let size = self.buffer.len() as u64;
                let payload = PutPayload::from(std::mem::take(&mut self.buffer));
                self.objects.put(target, payload).await.map_err(classify)?;
                Ok(size)
            }
            Some(multipart) => {
                multipart.finish().await.map_err(classify)?;
                if *target != self.path {
                    self.objects
                        .rename(&self.path, target)
                        .await
                        .map_err(classify)?;
                }
                let meta = self.objects.head(target).await.map_err(classify)?;
                Ok(meta.size)
            }
        }
    }

    /// Drops what was written (the content is already stored under its address).
    async fn discard(&mut self) {
        if let Some(multipart) = self.multipart.take()
            && let Err(err) = multipart.abort().await
        {
            tracing::debug!(error = %err, "abandoned upload not aborted");
        }
    }
}

impl Spool {
    async fn create(dir: &std::path::Path) -> Result<Spool, MediaError> {
        tokio::fs::create_dir_all(dir).await?;
        let (file, path) = tempfile::Builder::new()
            .prefix(".spool-")
            .tempfile_in(dir)?
            .into_parts();
        Ok(Spool {
            file: tokio::fs::File::from_std(file),
            path,
            size: 0,
        })
    }
}

impl Drop for Upload {
    fn drop(&mut self) {
        // A write abandoned half-way (over the cap, client gone): abort the multipart upload so the
        // backend frees its parts.
        if let Some(multipart) = self.multipart.take()
            && let Ok(runtime) = tokio::runtime::Handle::try_current()
        {
            runtime.spawn(async move {
                let _ = multipart.abort().await;
            });
        }
    }
}
