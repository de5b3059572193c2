//! `EngineMedia`: the node's media store as an engine sees it. Blobs are named by key (the store picks
//! it: today `{sessionId}/{sha256}` of the content), never by a local path, so the node may keep them on
//! disk or in an S3 bucket. An engine puts what it downloads (`begin` + `finish` for libraries that write
//! synchronously into a `Write + Seek` sink, `put` for bytes in hand), reads stored blobs back by key
//! (`get`, `head`, `open` to stream), and fetches URLs through the node's outbound-address guard
//! (`fetch_small`).

use std::io::{Seek, Write};
use std::pin::Pin;
use std::time::Duration;

use async_trait::async_trait;
use tokio::io::AsyncRead;

use crate::error::EngineError;
use crate::types::{INLINE_MEDIA_MAX_BYTES, StoredFile};

/// Why the media store refused or failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MediaFailure {
    /// Over the node's media size limit (`MEDIA_DOWNLOAD_MAX_BYTES`).
    #[error("Media exceeds MEDIA_DOWNLOAD_MAX_BYTES ({0} bytes)")]
    TooLarge(u64),
    /// A URL the outbound-address guard refuses.
    #[error("Media URL refused by the outbound-address guard: {0}")]
    Blocked(String),
    /// A URL that did not answer, or answered an error.
    #[error("Media URL could not be fetched: {0}")]
    Unreachable(String),
    #[error("{0}")]
    BadInput(String),
    /// The storage backend refused or could not be reached (bad credentials, endpoint down).
    #[error("Media storage is unavailable: {0}")]
    Unavailable(String),
    #[error("media storage failed: {0}")]
    Storage(String),
}

impl From<MediaFailure> for EngineError {
    /// A store that cannot be reached or written is an outage (503, retryable); the rest is about the
    /// caller's media (400).
    fn from(err: MediaFailure) -> EngineError {
        match err {
            MediaFailure::Unavailable(_) | MediaFailure::Storage(_) => {
                EngineError::Network(err.to_string())
            }
            MediaFailure::TooLarge(_)
            | MediaFailure::Blocked(_)
            | MediaFailure::Unreachable(_)
            | MediaFailure::BadInput(_) => EngineError::BadInput(err.to_string()),
        }
    }
}

/// A blob being written: the library writes (and may rewind and truncate) synchronously, then
/// `EngineMedia::finish` stores it under its key. Dropping it unfinished discards it.
pub trait MediaUpload: Write + Seek + Send + 'static {
    /// Shortens what was written (downloaders empty the sink before each attempt).
    fn truncate(&mut self, len: u64) -> std::io::Result<()>;
    /// Lets `finish` take the concrete upload back.
    fn into_any(self: Box<Self>) -> Box<dyn std::any::Any + Send>;
}

/// A stored blob, streamed.
pub type MediaReader = Pin<Box<dyn AsyncRead + Send>>;

/// A small resource fetched into memory (a link-preview page, a thumbnail).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct FetchedBytes {
    pub bytes: Vec<u8>,
    /// The `Content-Type` the server answered with.
    pub content_type: Option<String>,
    /// The body went on past the cap and was cut there.
    pub truncated: bool,
}

/// The node's media store, bound to one session: what an engine puts lands under that session's keys,
/// and it reads any key. Handed to each engine instance; cheap to share (`Arc<dyn EngineMedia>`).
#[async_trait]
pub trait EngineMedia: Send + Sync {
    /// The largest blob the store takes (`MEDIA_DOWNLOAD_MAX_BYTES`).
    fn max_bytes(&self) -> u64;
    /// A fresh upload capped at `max_bytes`.
    fn begin(&self) -> Result<Box<dyn MediaUpload>, MediaFailure>;
    /// Stores a finished upload; answers its key and size.
    async fn finish(&self, upload: Box<dyn MediaUpload>) -> Result<StoredFile, MediaFailure>;
    /// Stores bytes in hand.
    async fn put(&self, bytes: &[u8]) -> Result<StoredFile, MediaFailure>;
    /// A stored blob, whole; `None` when no blob has that key.
    async fn get(&self, key: &str) -> Result<Option<Vec<u8>>, MediaFailure>;
    /// A stored blob's size; `None` when no blob has that key.
    async fn head(&self, key: &str) -> Result<Option<u64>, MediaFailure>;
    /// A stored blob as a stream; `None` when no blob has that key.
    async fn open(&self, key: &str) -> Result<Option<MediaReader>, MediaFailure>;
    /// A small resource through the outbound-address guard and the session's proxy, cut at `max_bytes`
    /// and abandoned after `budget`. Nothing is stored.
    async fn fetch_small(
        &self,
        url: &str,
        proxy_url: Option<&str>,
        max_bytes: usize,
        budget: Duration,
    ) -> Result<FetchedBytes, MediaFailure>;

    /// What a received-media event carries inline: the stored blob when it is within the spec's inline
    /// limit (read back once, right after it was stored), else nothing: the node serves it by key.
    async fn inline_copy(&self, stored: &StoredFile) -> Result<Vec<u8>, MediaFailure> {
        if stored.size > INLINE_MEDIA_MAX_BYTES as u64 {
            return Ok(Vec::new());
        }
        Ok(self.get(&stored.key).await?.unwrap_or_default())
    }
}

/// A media store in memory, for engines under test: keys are handed out in order, URL fetches are
/// refused (there is no guard to go through).
#[derive(Debug, Default)]
pub struct MemoryMedia {
    blobs: std::sync::Mutex<Vec<Vec<u8>>>,
}

/// An upload into memory.
struct MemoryUpload(std::io::Cursor<Vec<u8>>);

impl Write for MemoryUpload {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.write(buf)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Seek for MemoryUpload {
    fn seek(&mut self, pos: std::io::SeekFrom) -> std::io::Result<u64> {
        self.0.seek(pos)
    }
}

impl MediaUpload for MemoryUpload {
    fn truncate(&mut self, len: u64) -> std::io::Result<()> {
        let len = usize::try_from(len).map_err(std::io::Error::other)?;
        self.0.get_mut().truncate(len);
        Ok(())
    }
    fn into_any(self: Box<Self>) -> Box<dyn std::any::Any + Send> {
        self
    }
}

impl MemoryMedia {
    fn keep(&self, bytes: Vec<u8>) -> Result<StoredFile, MediaFailure> {
        let mut blobs = self
            .blobs
            .lock()
            .map_err(|_| MediaFailure::Storage("memory media poisoned".into()))?;
        let size = bytes.len() as u64;
        blobs.push(bytes);
        Ok(StoredFile {
            key: format!("mem-{}", blobs.len() - 1),
            size,
        })
    }
}

#[async_trait]
impl EngineMedia for MemoryMedia {
    fn max_bytes(&self) -> u64 {
        u64::MAX
    }
    fn begin(&self) -> Result<Box<dyn MediaUpload>, MediaFailure> {
        Ok(Box::new(MemoryUpload(std::io::Cursor::new(Vec::new()))))
    }
    async fn finish(&self, upload: Box<dyn MediaUpload>) -> Result<StoredFile, MediaFailure> {
        let upload = upload
            .into_any()
            .downcast::<MemoryUpload>()
            .map_err(|_| MediaFailure::BadInput("an upload this store did not begin".into()))?;
        self.keep(upload.0.into_inner())
    }
    async fn put(&self, bytes: &[u8]) -> Result<StoredFile, MediaFailure> {
        self.keep(bytes.to_vec())
    }
    async fn get(&self, key: &str) -> Result<Option<Vec<u8>>, MediaFailure> {
        let index = key
            .strip_prefix("mem-")
            .and_then(|n| n.parse::<usize>().ok());
        let blobs = self
            .blobs
            .lock()
            .map_err(|_| MediaFailure::Storage("memory media poisoned".into()))?;
        Ok(index.and_then(|i| blobs.get(i).cloned()))
    }
    async fn head(&self, key: &str) -> Result<Option<u64>, MediaFailure> {
        Ok(self.get(key).await?.map(|bytes| bytes.len() as u64))
    }
    async fn open(&self, key: &str) -> Result<Option<MediaReader>, MediaFailure> {
        Ok(self
            .get(key)
            .await?
            .map(|bytes| Box::pin(std::io::Cursor::new(bytes)) as MediaReader))
    }
    async fn fetch_small(
        &self,
        url: &str,
        _proxy_url: Option<&str>,
        _max_bytes: usize,
        _budget: Duration,
    ) -> Result<FetchedBytes, MediaFailure> {
        Err(MediaFailure::Unreachable(format!(
            "{url}: the memory media store fetches nothing"
        )))
    }
}
