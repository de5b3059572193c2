//! `MediaObjects`: the narrow interface administrative code (storage archives, data export/import) uses to
//! enumerate, read and add media objects without knowing where they live. The local directory store
//! implements it here; another backend (S3) only has to implement these four calls.

use std::pin::Pin;

use tokio::io::{AsyncRead, AsyncReadExt};

use super::sink::Sink;
use super::{MediaError, MediaStore, StoredMedia};

/// One stored object: its content address and size.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct MediaObject {
    pub key: String,
    pub size: u64,
}

pub(crate) type ObjectReader = Pin<Box<dyn AsyncRead + Send>>;

#[async_trait::async_trait]
pub(crate) trait MediaObjects: Send + Sync {
    /// How the spec's `storageType` names this backend.
    fn storage_type(&self) -> &'static str;
    /// Every stored object (temporary files of unfinished writes are not objects).
    async fn list(&self) -> Result<Vec<MediaObject>, MediaError>;
    /// A reader over one object; `None` when it does not exist.
    async fn open(&self, key: &str) -> Result<Option<ObjectReader>, MediaError>;
    /// Stores what `reader` yields under its content address (no size cap: the caller bounds it).
    async fn put_reader(&self, reader: ObjectReader) -> Result<StoredMedia, MediaError>;
}

const COPY_CHUNK: usize = 64 * 1024;

#[async_trait::async_trait]
impl MediaObjects for MediaStore {
    fn storage_type(&self) -> &'static str {
        "local"
    }

    async fn list(&self) -> Result<Vec<MediaObject>, MediaError> {
        let mut out = Vec::new();
        let mut dir = match tokio::fs::read_dir(&self.dir).await {
            Ok(dir) => dir,
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => return Ok(out),
            Err(err) => return Err(err.into()),
        };
        while let Some(entry) = dir.next_entry().await? {
            let name = entry.file_name().to_string_lossy().into_owned();
            if self.path(&name).is_none() {
                continue;
            }
            let meta = entry.metadata().await?;
            if meta.is_file() {
                out.push(MediaObject {
                    key: name,
                    size: meta.len(),
                });
            }
        }
        out.sort_by(|a, b| a.key.cmp(&b.key));
        Ok(out)
    }

    async fn open(&self, key: &str) -> Result<Option<ObjectReader>, MediaError> {
        let Some(path) = self.path(key) else {
            return Ok(None);
        };
        match tokio::fs::File::open(path).await {
            Ok(file) => Ok(Some(Box::pin(file))),
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(err) => Err(err.into()),
        }
    }

    async fn put_reader(&self, mut reader: ObjectReader) -> Result<StoredMedia, MediaError> {
        let mut sink = Sink::create(&self.dir, u64::MAX).await?;
        let mut buf = vec![0u8; COPY_CHUNK];
        loop {
            let n = reader.read(&mut buf).await?;
            if n == 0 {
                break;
            }
            sink.write(&buf[..n]).await?;
        }
        sink.finish(None).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::media::FetchOptions;

    #[tokio::test]
    async fn lists_only_finished_objects_and_round_trips_a_reader() {
        let dir = tempfile::tempdir().unwrap();
        let store = MediaStore::new(dir.path().to_path_buf(), 1024, FetchOptions::default());
        let stored = store.put_bytes(b"voice").await.unwrap();
        std::fs::write(dir.path().join(".tmp-unfinished"), b"x").unwrap();
        let listed = store.list().await.unwrap();
        assert_eq!(
            listed,
            vec![MediaObject {
                key: stored.key.clone(),
                size: 5
            }]
        );
        let reader = store.open(&stored.key).await.unwrap().unwrap();
        let again = store.put_reader(reader).await.unwrap();
        assert_eq!(again.key, stored.key);
        assert!(store.open(&"0".repeat(64)).await.unwrap().is_none());
    }
}
