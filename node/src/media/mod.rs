//! The media store: the only code that reads or writes media files. Files live under `DATA_DIR/media`,
//! named by the SHA-256 of their content, and are written as they stream in (base64 decoded in chunks,
//! URL bodies chunk by chunk), so no blob is held whole twice. Input: send bodies, engine downloads.
//! It does not decide which messages have media (that is `messaging`) and serves no HTTP.
//!
//! # Layout
//! - `fetch`: URL download through the outbound-address guard and the session proxy (into a file, or a
//!   small capped read into memory for link previews).
//! - `sink`: a size-capped, hashing writer that lands a file under its content address.
//! - `incoming`: a size-capped blocking temp file for engines that download synchronously.
//! - `objects`: `MediaObjects`, the narrow list/open/put interface administrative code uses.
//! - `convert`: server-side conversion with the system `ffmpeg` (voice notes, phone-playable video).

pub(crate) mod convert;
mod fetch;
mod incoming;
mod objects;
mod sink;

use std::path::PathBuf;

use base64::Engine as _;

pub(crate) use fetch::{FetchOptions, Fetched};
pub(crate) use incoming::IncomingFile;
pub(crate) use objects::{MediaObject, MediaObjects, ObjectReader};
use sink::Sink;

/// Why media could not be taken in.
#[derive(Debug, thiserror::Error)]
pub(crate) enum MediaError {
    /// Over `MEDIA_DOWNLOAD_MAX_BYTES` (413 without a code).
    #[error("Media exceeds MEDIA_DOWNLOAD_MAX_BYTES ({0} bytes)")]
    TooLarge(u64),
    #[error("{0}")]
    BadInput(String),
    /// Refused by the outbound-address guard (bulk code SEND_BLOCKED).
    #[error("Media URL refused by the outbound-address guard: {0}")]
    Blocked(String),
    #[error("Media URL could not be fetched: {0}")]
    Unreachable(String),
    #[error("media storage failed: {0}")]
    Io(#[from] std::io::Error),
}

/// A stored media file: its content address and size.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct StoredMedia {
    pub key: String,
    pub size: u64,
    /// The `Content-Type` a URL answered with, when fetched.
    pub content_type: Option<String>,
}

/// Handle to the media directory; cheap to clone.
#[derive(Debug, Clone)]
pub(crate) struct MediaStore {
    dir: PathBuf,
    max_bytes: u64,
    fetch: FetchOptions,
}

/// Base64 characters decoded per chunk (a multiple of 4).
const B64_CHUNK: usize = 64 * 1024;

impl MediaStore {
    pub(crate) fn new(dir: PathBuf, max_bytes: u64, fetch: FetchOptions) -> MediaStore {
        MediaStore {
            dir,
            max_bytes,
            fetch,
        }
    }

    /// Where the file of `key` lives (keys are hex digests, so they cannot escape the directory).
    pub(crate) fn path(&self, key: &str) -> Option<PathBuf> {
        let valid = key.len() == 64 && key.bytes().all(|b| b.is_ascii_hexdigit());
        valid.then(|| self.dir.join(key))
    }

    pub(crate) async fn read(&self, key: &str) -> Result<Option<Vec<u8>>, MediaError> {
        let Some(path) = self.path(key) else {
            return Ok(None);
        };
        match tokio::fs::read(path).await {
            Ok(bytes) => Ok(Some(bytes)),
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(err) => Err(err.into()),
        }
    }

    /// Stores bytes an engine already downloaded (inbound media); no cap, the engine bounded them.
    pub(crate) async fn put_bytes(&self, bytes: &[u8]) -> Result<StoredMedia, MediaError> {
        let mut sink = Sink::create(&self.dir, u64::MAX).await?;
        sink.write(bytes).await?;
        sink.finish(None).await
    }

    /// The cap on any one media file (`MEDIA_DOWNLOAD_MAX_BYTES`).
    pub(crate) fn max_bytes(&self) -> u64 {
        self.max_bytes
    }

    /// A temporary file an engine downloads into (capped at `MEDIA_DOWNLOAD_MAX_BYTES`); blocking I/O.
    pub(crate) fn incoming(&self) -> Result<IncomingFile, MediaError> {
        Ok(IncomingFile::create(&self.dir, self.max_bytes)?)
    }

    /// Lands a finished download under its content address (hashing it off the async threads).
    pub(crate) async fn adopt(&self, file: IncomingFile) -> Result<StoredMedia, MediaError> {
        let dir = self.dir.clone();
        tokio::task::spawn_blocking(move || file.finish(&dir))
            .await
            .map_err(|e| MediaError::Io(std::io::Error::other(e)))?
    }

    /// Decodes raw base64 (no data-URL prefix) straight into a file, chunk by chunk.
    pub(crate) async fn put_base64(&self, text: &str) -> Result<StoredMedia, MediaError> {
        let text = text.trim();
        if text.starts_with("data:") {
            return Err(MediaError::BadInput(
                "base64 must be raw base64 without a data: URL prefix".into(),
            ));
        }
        if (text.len() as u64 / 4).saturating_mul(3) > self.max_bytes.saturating_add(3) {
            return Err(MediaError::TooLarge(self.max_bytes));
        }
        let mut sink = Sink::create(&self.dir, self.max_bytes).await?;
        let mut chunk = Vec::with_capacity(B64_CHUNK);
        for byte in text.bytes().filter(|b| !b.is_ascii_whitespace()) {
            chunk.push(byte);
            if chunk.len() == B64_CHUNK {
                sink.write(&decode(&chunk)?).await?;
                chunk.clear();
            }
        }
        sink.write(&decode(&chunk)?).await?;
        if sink.size() == 0 {
            return Err(MediaError::BadInput("base64 must not be empty".into()));
        }
        sink.finish(None).await
    }

    /// Downloads a URL through the guard (and the session's proxy) into a file.
    pub(crate) async fn put_url(
        &self,
        url: &str,
        proxy_url: Option<&str>,
    ) -> Result<StoredMedia, MediaError> {
        let sink = Sink::create(&self.dir, self.max_bytes).await?;
        fetch::download(&self.fetch, url, proxy_url, sink).await
    }
}

impl MediaStore {
    /// A small resource read into memory through the same guard and proxy as `put_url`, cut at
    /// `max_bytes` and abandoned after `budget` (link-preview pages and their images; nothing is stored).
    pub(crate) async fn fetch_small(
        &self,
        url: &str,
        proxy_url: Option<&str>,
        max_bytes: usize,
        budget: std::time::Duration,
    ) -> Result<Fetched, MediaError> {
        fetch::fetch_small(&self.fetch, url, proxy_url, max_bytes, budget).await
    }
}

fn decode(chunk: &[u8]) -> Result<Vec<u8>, MediaError> {
    base64::engine::general_purpose::STANDARD
        .decode(chunk)
        .map_err(|e| MediaError::BadInput(format!("base64 is not valid base64: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn store(dir: &std::path::Path, max: u64) -> MediaStore {
        MediaStore::new(dir.to_path_buf(), max, FetchOptions::default())
    }

    #[tokio::test]
    async fn base64_lands_under_its_content_address() {
        let dir = tempfile::tempdir().unwrap();
        let media = store(dir.path(), 1024);
        let stored = media.put_base64("aGVsbG8=").await.unwrap();
        assert_eq!(stored.size, 5);
        assert_eq!(media.read(&stored.key).await.unwrap().unwrap(), b"hello");
        let again = media.put_bytes(b"hello").await.unwrap();
        assert_eq!(again.key, stored.key);
    }

    #[tokio::test]
    async fn oversized_and_prefixed_base64_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let media = store(dir.path(), 4);
        assert!(matches!(
            media.put_base64("aGVsbG8gd29ybGQ=").await,
            Err(MediaError::TooLarge(4))
        ));
        assert!(matches!(
            media.put_base64("data:image/png;base64,AAAA").await,
            Err(MediaError::BadInput(_))
        ));
        assert!(media.path("../etc/passwd").is_none());
    }
}
