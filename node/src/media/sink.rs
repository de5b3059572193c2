//! `Sink`: streams a media object into the backend while hashing and counting it, refuses to grow past
//! the cap, and lands it under its content address `{sessionId}/{sha256}`. When the key already exists
//! the new copy is dropped: stored once. `Upload`: the same streaming write to a key the caller names
//! (archive import).
//!
//! Memory per write is bounded whatever the object's size, by backend (`Layout`):
//! - local disk: parts of `LOCAL_PART_SIZE` written at their offsets as they fill (at most
//!   `PARTS_IN_FLIGHT + 1` in memory), into a staging file renamed to the key once the hash is known;
//!   an object under one part is one write.
//! - S3: parts must be 5 MiB (`PART_SIZE`), so twenty concurrent sends buffering their parts would hold
//!   hundreds of MiB. An object past `SPILL_AFTER` bytes is written to a local scratch file as it arrives
//!   and uploaded from it once complete, straight to its content address (no rename: the hash is known
//!   by then, and an object already stored is not uploaded at all). The parts read back from scratch
//!   share one node-wide budget (`S3_PARTS_BUDGET` parts in memory); the scratch file goes when done.

use std::path::PathBuf;
use std::sync::Arc;

use object_store::path::Path as ObjectPath;
use object_store::{ObjectStore, ObjectStoreExt, PutPayload, WriteMultipart};
use sha2::{Digest, Sha256};
use tokio::io::{AsyncReadExt, AsyncSeekExt, AsyncWriteExt};
use tokio::sync::Semaphore;

use super::backend::classify;
use super::{MediaError, StoredMedia};

/// Part size of a multipart upload to S3 (its minimum part is 5 MiB).
pub(super) const PART_SIZE: usize = 5 * 1024 * 1024;
/// Part size on the local disk, which takes parts of any size.
pub(super) const LOCAL_PART_SIZE: usize = 256 * 1024;
/// Parts uploading at once per object.
pub(super) const PARTS_IN_FLIGHT: usize = 2;
/// S3: bytes kept in memory before a write spills to a scratch file.
const SPILL_AFTER: usize = 256 * 1024;
/// S3: parts read back from scratch files and in memory at once, node-wide (15 MiB).
pub(super) const S3_PARTS_BUDGET: usize = 3;

/// How a backend takes a streamed write (see the module comment).
#[derive(Debug, Clone)]
pub(super) enum Layout {
    /// The local disk: parts written as they fill.
    Direct,
    /// S3: spilled to a scratch file under `scratch`, uploaded from it under `budget`.
    Spooled {
        scratch: PathBuf,
        budget: Arc<Semaphore>,
    },
}

impl Layout {
    pub(super) fn spooled(scratch: PathBuf) -> Layout {
        Layout::Spooled {
            scratch,
            budget: Arc::new(Semaphore::new(S3_PARTS_BUDGET)),
        }
    }
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
    _path: tempfile::TempPath,
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
            let Layout::Spooled { budget, .. } = &self.layout else {
                return Err(MediaError::BadInput(
                    "a spilled write without a budget".into(),
                ));
            };
            spool.upload(&self.objects, target, budget).await?;
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
            _path: path,
            size: 0,
        })
    }

    /// Uploads the scratch file to `target`: one PUT up to one part, else a multipart upload, each part
    /// read back only once the node-wide budget has room for it.
    async fn upload(
        &mut self,
        objects: &Arc<dyn ObjectStore>,
        target: &ObjectPath,
        budget: &Arc<Semaphore>,
    ) -> Result<(), MediaError> {
        self.file.flush().await?;
        self.file.seek(std::io::SeekFrom::Start(0)).await?;
        if self.size <= PART_SIZE as u64 {
            let _permit = budget.acquire().await.map_err(closed)?;
            let part = self.read_part().await?;
            objects.put(target, part).await.map_err(classify)?;
            return Ok(());
        }
        let mut upload = objects.put_multipart(target).await.map_err(classify)?;
        match self.put_parts(upload.as_mut(), budget).await {
            Ok(()) => upload.complete().await.map(|_| ()).map_err(classify),
            Err(err) => {
                if let Err(abort) = upload.abort().await {
                    tracing::debug!(error = %abort, "failed upload not aborted");
                }
                Err(err)
            }
        }
    }

    /// Sends every part, `PARTS_IN_FLIGHT` at once; each holds a budget permit until it is sent (the
    /// parts run as tasks, so a write waiting for room never holds up the parts that would make it).
    async fn put_parts(
        &mut self,
        upload: &mut dyn object_store::MultipartUpload,
        budget: &Arc<Semaphore>,
    ) -> Result<(), MediaError> {
        let mut parts = tokio::task::JoinSet::new();
        let mut left = self.size;
        while left > 0 {
            if parts.len() >= PARTS_IN_FLIGHT {
                joined(parts.join_next().await)?;
            }
            let permit = budget.clone().acquire_owned().await.map_err(closed)?;
            let part = self.read_part().await?;
            left -= part.content_length() as u64;
            let sent = upload.put_part(part);
            parts.spawn(async move {
                let result = sent.await;
                drop(permit);
                result
            });
        }
        while let Some(done) = parts.join_next().await {
            joined(Some(done))?;
        }
        Ok(())
    }

    /// The next part (at most `PART_SIZE` bytes) from the scratch file, read into a buffer of exactly
    /// its size (a growing read would double it past the budget).
    async fn read_part(&mut self) -> Result<PutPayload, MediaError> {
        let at = self.file.stream_position().await?;
        let len = self.size.saturating_sub(at).min(PART_SIZE as u64);
        let mut part = vec![0u8; usize::try_from(len).unwrap_or(PART_SIZE)];
        self.file.read_exact(&mut part).await?;
        Ok(PutPayload::from(part))
    }
}

fn joined(
    done: Option<Result<object_store::Result<()>, tokio::task::JoinError>>,
) -> Result<(), MediaError> {
    match done {
        None | Some(Ok(Ok(()))) => Ok(()),
        Some(Ok(Err(err))) => Err(classify(err)),
        Some(Err(err)) => Err(MediaError::Io(std::io::Error::other(err))),
    }
}

fn closed(err: tokio::sync::AcquireError) -> MediaError {
    MediaError::Io(std::io::Error::other(err))
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
