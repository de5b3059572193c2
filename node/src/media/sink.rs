//! `Sink`: streams a media object into the backend while hashing and counting it, refuses to grow past
//! the cap, and lands it under its content address `{sessionId}/{sha256}`. An object smaller than one
//! part is kept in memory and written with one PUT straight to its key; a larger one goes out as a
//! multipart upload to a temporary key (at most `PARTS_IN_FLIGHT` parts in memory) and is renamed once
//! its hash is known. When the key already exists the new copy is dropped: stored once.
//! `Upload`: the same streaming write to a key the caller names (archive import).

use std::sync::Arc;

use object_store::path::Path as ObjectPath;
use object_store::{ObjectStore, ObjectStoreExt, PutPayload, WriteMultipart};
use sha2::{Digest, Sha256};

use super::backend::classify;
use super::{MediaError, StoredMedia};

/// Part size of a multipart upload (S3's minimum part is 5 MiB).
const PART_SIZE: usize = 5 * 1024 * 1024;
/// Parts uploading at once per object: bounds memory to about `(PARTS_IN_FLIGHT + 1) * PART_SIZE`.
const PARTS_IN_FLIGHT: usize = 2;

pub(super) struct Sink {
    session_id: String,
    hasher: Sha256,
    size: u64,
    max: u64,
    upload: Upload,
}

impl Sink {
    pub(super) fn new(objects: Arc<dyn ObjectStore>, session_id: &str, max: u64) -> Sink {
        let tmp = ObjectPath::from_iter([
            session_id.to_string(),
            format!(".upload-{}", uuid::Uuid::new_v4()),
        ]);
        Sink {
            session_id: session_id.to_string(),
            hasher: Sha256::new(),
            size: 0,
            max,
            upload: Upload::new(objects, tmp),
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

/// A streaming write to one key: buffered below one part, multipart above.
pub(super) struct Upload {
    objects: Arc<dyn ObjectStore>,
    path: ObjectPath,
    buffer: Vec<u8>,
    multipart: Option<WriteMultipart>,
}

impl Upload {
    pub(super) fn new(objects: Arc<dyn ObjectStore>, path: ObjectPath) -> Upload {
        Upload {
            objects,
            path,
            buffer: Vec::new(),
            multipart: None,
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
        self.buffer.extend_from_slice(bytes);
        if self.buffer.len() >= PART_SIZE {
            let upload = self
                .objects
                .put_multipart(&self.path)
                .await
                .map_err(classify)?;
            let mut multipart = WriteMultipart::new_with_chunk_size(upload, PART_SIZE);
            multipart.write(&std::mem::take(&mut self.buffer));
            self.multipart = Some(multipart);
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
