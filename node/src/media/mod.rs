//! The media store: the only code that reads or writes media. Objects live in one `object_store` backend
//! chosen by `STORAGE_TYPE`: `local` (files under `DATA_DIR/media`) or `s3` (a bucket every node of a
//! cluster shares). Keys are content-addressed per session, `{sessionId}/{sha256}`, so the same file
//! stored twice in a session is one object, and deleting a session deletes one prefix. Writes stream
//! (base64 decoded in chunks, URL bodies chunk by chunk, multipart upload past one part) and are capped
//! at `MEDIA_DOWNLOAD_MAX_BYTES` while streaming. It does not decide which messages have media (that is
//! `messaging`) and serves no HTTP.
//!
//! Keys written before per-session keys existed are a bare `{sha256}`; they still read (on the local
//! backend they are the old `DATA_DIR/media/{sha256}` files).
//!
//! # Layout
//! - `backend`: builds the `object_store` client from the config and classifies its errors.
//! - `fetch`: URL download through the outbound-address guard and the session proxy (into the store, or
//!   a small capped read into memory for link previews).
//! - `sink`: a size-capped, hashing writer that lands an object under its content address.
//! - `streamed`: S3 uploads of a finished scratch file with the body streamed from disk.
//! - `incoming`: a size-capped blocking scratch file for engines that download synchronously.
//! - `convert`: server-side conversion with the system `ffmpeg` (voice notes, phone-playable video).

mod backend;
pub(crate) mod convert;
mod fetch;
mod incoming;
mod sink;
mod streamed;

#[cfg(test)]
pub(crate) mod testing;
#[cfg(test)]
mod tests;

use std::path::PathBuf;
use std::sync::Arc;

use base64::Engine as _;
use bytes::Bytes;
use futures::stream::BoxStream;
use futures::{StreamExt, TryStreamExt};
use object_store::path::Path as ObjectPath;
use object_store::{ObjectStore, ObjectStoreExt};

use crate::config::StorageConfig;
pub(crate) use fetch::{FetchOptions, Fetched};
pub(crate) use incoming::IncomingFile;
use sink::Sink;

/// Why media could not be taken in or read.
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
    /// The storage backend refused or could not be reached (bad credentials, endpoint down): 503.
    #[error("Media storage is unavailable: {0}")]
    Unavailable(String),
    #[error("media storage failed: {0}")]
    Io(#[from] std::io::Error),
}

/// A stored media object: its key (`{sessionId}/{sha256}`) and size.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct StoredMedia {
    pub key: String,
    pub size: u64,
    /// The `Content-Type` a URL answered with, when fetched.
    pub content_type: Option<String>,
}

/// One object as `list` reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct MediaObject {
    pub key: String,
    pub size: u64,
}

/// An object being read: its size and its body in chunks.
pub(crate) struct MediaStream {
    pub size: u64,
    pub body: BoxStream<'static, Result<Bytes, MediaError>>,
}

impl MediaStream {
    /// Bytes already in memory (a status row written before its media moved to the store).
    pub(crate) fn from_bytes(bytes: Vec<u8>) -> MediaStream {
        MediaStream {
            size: bytes.len() as u64,
            body: futures::stream::once(async move { Ok(Bytes::from(bytes)) }).boxed(),
        }
    }
}

/// Which backend holds the media (`storageType` of the admin routes).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum StorageType {
    Local,
    S3,
}

impl StorageType {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            StorageType::Local => "local",
            StorageType::S3 => "s3",
        }
    }
}

/// Handle to the media backend; cheap to clone.
#[derive(Debug, Clone)]
pub(crate) struct MediaStore {
    objects: Arc<dyn ObjectStore>,
    storage_type: StorageType,
    /// Local scratch directory for `IncomingFile`s (never holds stored media).
    scratch: PathBuf,
    max_bytes: u64,
    fetch: FetchOptions,
    /// How writes reach the backend with bounded memory (`sink`).
    layout: sink::Layout,
}

/// Base64 characters decoded per chunk (a multiple of 4).
const B64_CHUNK: usize = 64 * 1024;
/// Bytes read from a scratch file per write into the sink.
const READ_CHUNK: usize = 64 * 1024;

impl MediaStore {
    /// A local store rooted at `dir` (unit tests; boot uses `from_config`).
    #[cfg(test)]
    pub(crate) fn new(dir: PathBuf, max_bytes: u64, fetch: FetchOptions) -> MediaStore {
        MediaStore {
            objects: backend::local(&dir).expect("test media directory"),
            storage_type: StorageType::Local,
            scratch: dir.join(".incoming"),
            max_bytes,
            fetch,
            layout: sink::Layout::Direct,
        }
    }

    /// The store `STORAGE_TYPE` selects: `DATA_DIR/media`, or the S3 bucket (scratch files for engine
    /// downloads stay under `DATA_DIR/media-incoming`).
    pub(crate) fn from_config(
        storage: &StorageConfig,
        data_dir: &std::path::Path,
        max_bytes: u64,
        fetch: FetchOptions,
    ) -> Result<MediaStore, MediaError> {
        let (objects, storage_type, scratch, layout) = match storage {
            StorageConfig::Local => {
                let dir = data_dir.join("media");
                (
                    backend::local(&dir)?,
                    StorageType::Local,
                    dir.join(".incoming"),
                    sink::Layout::Direct,
                )
            }
            StorageConfig::S3(s3) => {
                let bucket = backend::s3(s3)?;
                let scratch = data_dir.join("media-incoming");
                let layout = sink::Layout::Spooled {
                    scratch: scratch.clone(),
                    streamer: streamed::Streamer::new(bucket.clone())?,
                };
                let objects: Arc<dyn ObjectStore> = bucket;
                (objects, StorageType::S3, scratch, layout)
            }
        };
        Ok(MediaStore {
            objects,
            storage_type,
            scratch,
            max_bytes,
            fetch,
            layout,
        })
    }

    pub(crate) fn storage_type(&self) -> StorageType {
        self.storage_type
    }

    /// Local scratch space for work on media that needs files (engine downloads, ffmpeg); never holds
    /// stored media.
    pub(crate) fn scratch_dir(&self) -> &std::path::Path {
        &self.scratch
    }

    /// The cap on any one media object (`MEDIA_DOWNLOAD_MAX_BYTES`).
    pub(crate) fn max_bytes(&self) -> u64 {
        self.max_bytes
    }

    /// The whole object, or `None` when it does not exist (or the key is not a media key).
    pub(crate) async fn get(&self, key: &str) -> Result<Option<Vec<u8>>, MediaError> {
        let Some(path) = object_path(key) else {
            return Ok(None);
        };
        match self.objects.get(&path).await {
            Ok(result) => Ok(Some(
                result.bytes().await.map_err(backend::classify)?.to_vec(),
            )),
            Err(object_store::Error::NotFound { .. }) => Ok(None),
            Err(err) => Err(backend::classify(err)),
        }
    }

    /// The object as a stream of chunks (never held whole), or `None` when it does not exist.
    pub(crate) async fn stream(&self, key: &str) -> Result<Option<MediaStream>, MediaError> {
        let Some(path) = object_path(key) else {
            return Ok(None);
        };
        match self.objects.get(&path).await {
            Ok(result) => Ok(Some(MediaStream {
                size: result.meta.size,
                body: result.into_stream().map_err(backend::classify).boxed(),
            })),
            Err(object_store::Error::NotFound { .. }) => Ok(None),
            Err(err) => Err(backend::classify(err)),
        }
    }

    /// The size of the object, or `None` when it does not exist.
    pub(crate) async fn head(&self, key: &str) -> Result<Option<u64>, MediaError> {
        let Some(path) = object_path(key) else {
            return Ok(None);
        };
        match self.objects.head(&path).await {
            Ok(meta) => Ok(Some(meta.size)),
            Err(object_store::Error::NotFound { .. }) => Ok(None),
            Err(err) => Err(backend::classify(err)),
        }
    }

    /// Removes one object; a missing one is not an error.
    #[cfg_attr(not(test), allow(dead_code))] // part of the put/get/stream/delete API the engine seam uses
    pub(crate) async fn delete(&self, key: &str) -> Result<(), MediaError> {
        let Some(path) = object_path(key) else {
            return Ok(());
        };
        match self.objects.delete(&path).await {
            Ok(()) | Err(object_store::Error::NotFound { .. }) => Ok(()),
            Err(err) => Err(backend::classify(err)),
        }
    }

    /// Removes every object of a session; returns how many went.
    pub(crate) async fn delete_session(&self, session_id: &str) -> Result<u64, MediaError> {
        let prefix = ObjectPath::from_iter([session_id]);
        let mut listed = self.objects.list(Some(&prefix));
        let mut removed = 0u64;
        while let Some(meta) = listed.next().await {
            let meta = match meta {
                Ok(meta) => meta,
                Err(object_store::Error::NotFound { .. }) => continue,
                Err(err) => return Err(backend::classify(err)),
            };
            match self.objects.delete(&meta.location).await {
                Ok(()) | Err(object_store::Error::NotFound { .. }) => removed += 1,
                Err(err) => return Err(backend::classify(err)),
            }
        }
        Ok(removed)
    }

    /// Every stored object (optionally of one session), scratch and unfinished uploads left out.
    pub(crate) async fn list(
        &self,
        session_id: Option<&str>,
    ) -> Result<Vec<MediaObject>, MediaError> {
        let prefix = session_id.map(|s| ObjectPath::from_iter([s]));
        self.objects
            .list(prefix.as_ref())
            .map_err(backend::classify)
            .try_filter_map(|meta| async move {
                let key = meta.location.as_ref().to_string();
                Ok(object_path(&key).map(|_| MediaObject {
                    key,
                    size: meta.size,
                }))
            })
            .try_collect()
            .await
    }

    /// Stores bytes already in memory (inbound media an engine downloaded; status media). Uncapped: the
    /// producer bounded them.
    pub(crate) async fn put_bytes(
        &self,
        session_id: &str,
        bytes: &[u8],
    ) -> Result<StoredMedia, MediaError> {
        let mut sink = self.sink(session_id, u64::MAX)?;
        sink.write(bytes).await?;
        sink.finish(None).await
    }

    /// Keeps received media under `session_id`: `file` (key and size) when the engine stored it already,
    /// as it is when it is the session's own object, else as the session's copy of it
    /// (`copy_to_session`); otherwise `data`, and `data` too when that object is gone but `data` is
    /// the whole content. `None`: the object is gone and the bytes are not in hand.
    pub(crate) async fn keep_received(
        &self,
        session_id: &str,
        file: Option<(&str, u64)>,
        data: &[u8],
    ) -> Result<Option<StoredMedia>, MediaError> {
        let Some((key, size)) = file else {
            return self.put_bytes(session_id, data).await.map(Some);
        };
        if key
            .strip_prefix(session_id)
            .is_some_and(|rest| rest.starts_with('/'))
        {
            return Ok(Some(StoredMedia {
                key: key.to_string(),
                size,
                content_type: None,
            }));
        }
        match self.copy_to_session(session_id, key).await? {
            Some(stored) => Ok(Some(stored)),
            None if data.len() as u64 == size => self.put_bytes(session_id, data).await.map(Some),
            None => Ok(None),
        }
    }

    /// Stores the object `key` (another session's, or a bare legacy one) under `session_id` as well, at
    /// the same content address: a copy the backend makes itself (a hard link on the local disk, a
    /// server-side copy on S3), so no byte passes through the node. Kept once: an existing copy is
    /// reused. `None` when `key` names no object.
    pub(crate) async fn copy_to_session(
        &self,
        session_id: &str,
        key: &str,
    ) -> Result<Option<StoredMedia>, MediaError> {
        let (Some(from), Some(digest)) = (object_path(key), key.rsplit('/').next()) else {
            return Ok(None);
        };
        if !is_session_segment(session_id) {
            return Err(MediaError::BadInput(format!(
                "'{session_id}' cannot name a media folder"
            )));
        }
        let own = format!("{session_id}/{digest}");
        let stored = |size| StoredMedia {
            key: own.clone(),
            size,
            content_type: None,
        };
        if let Some(size) = self.head(&own).await? {
            return Ok(Some(stored(size)));
        }
        let Some(size) = self.head(key).await? else {
            return Ok(None);
        };
        let to = ObjectPath::from_iter([session_id, digest]);
        match self.objects.copy(&from, &to).await {
            Ok(()) => Ok(Some(stored(size))),
            Err(object_store::Error::NotFound { .. }) => Ok(None),
            Err(err) => Err(backend::classify(err)),
        }
    }

    /// Stores a stream of chunks under its content address, capped at `MEDIA_DOWNLOAD_MAX_BYTES`
    /// (conversion output, imports).
    #[cfg_attr(not(test), allow(dead_code))] // part of the put/get/stream/delete API the engine seam uses
    pub(crate) async fn put_stream<E: std::fmt::Display>(
        &self,
        session_id: &str,
        mut body: impl futures::Stream<Item = Result<Bytes, E>> + Unpin,
    ) -> Result<StoredMedia, MediaError> {
        let mut sink = self.sink(session_id, self.max_bytes)?;
        while let Some(chunk) = body.next().await {
            let chunk = chunk.map_err(|e| MediaError::BadInput(e.to_string()))?;
            sink.write(&chunk).await?;
        }
        sink.finish(None).await
    }

    /// Writes an object an archive names (storage import), streamed. A `{sessionId}/{sha256}` key is
    /// stored by its content under that session (an entry whose bytes do not match its name cannot take
    /// another object's key: the answer says where it went); a bare `{sha256}` written before per-session
    /// keys is stored as named. Uncapped: an archive holds what the store held.
    pub(crate) async fn import_object<E: std::fmt::Display>(
        &self,
        key: &str,
        mut body: impl futures::Stream<Item = Result<Bytes, E>> + Unpin,
    ) -> Result<StoredMedia, MediaError> {
        let path = object_path(key)
            .ok_or_else(|| MediaError::BadInput(format!("'{key}' is not a media key")))?;
        if let Some((session_id, _)) = key.rsplit_once('/') {
            let mut sink = self.sink(session_id, u64::MAX)?;
            while let Some(chunk) = body.next().await {
                let chunk = chunk.map_err(|e| MediaError::BadInput(e.to_string()))?;
                sink.write(&chunk).await?;
            }
            return sink.finish(None).await;
        }
        let mut upload = sink::Upload::new(self.objects.clone(), self.layout.clone(), path);
        while let Some(chunk) = body.next().await {
            let chunk = chunk.map_err(|e| MediaError::BadInput(e.to_string()))?;
            upload.write(&chunk).await?;
        }
        let size = upload.finish().await?;
        Ok(StoredMedia {
            key: key.to_string(),
            size,
            content_type: None,
        })
    }

    /// A scratch file an engine downloads into (capped at `MEDIA_DOWNLOAD_MAX_BYTES`); blocking I/O.
    pub(crate) fn incoming(&self) -> Result<IncomingFile, MediaError> {
        Ok(IncomingFile::create(&self.scratch, self.max_bytes)?)
    }

    /// Streams a finished download into the store under its content address; the scratch file goes.
    pub(crate) async fn adopt(
        &self,
        session_id: &str,
        file: IncomingFile,
    ) -> Result<StoredMedia, MediaError> {
        let reader = file.reader().await?;
        let stored = self.put_reader(session_id, reader, self.max_bytes).await;
        drop(file);
        stored
    }

    /// Streams what `reader` yields into the store under its content address, capped at `max`.
    async fn put_reader(
        &self,
        session_id: &str,
        mut reader: impl tokio::io::AsyncRead + Unpin,
        max: u64,
    ) -> Result<StoredMedia, MediaError> {
        use tokio::io::AsyncReadExt;
        let mut sink = self.sink(session_id, max)?;
        let mut buf = vec![0u8; READ_CHUNK];
        loop {
            let n = reader.read(&mut buf).await?;
            if n == 0 {
                break;
            }
            sink.write(&buf[..n]).await?;
        }
        sink.finish(None).await
    }

    /// Copies an object into a scratch file under `dir` (for a tool that needs a local, seekable file:
    /// ffmpeg); `None` when the object does not exist. The file is deleted when the path is dropped.
    async fn scratch_copy(
        &self,
        key: &str,
        dir: &std::path::Path,
    ) -> Result<Option<tempfile::TempPath>, MediaError> {
        use tokio::io::AsyncWriteExt;
        let Some(mut object) = self.stream(key).await? else {
            return Ok(None);
        };
        tokio::fs::create_dir_all(dir).await?;
        let path = tempfile::Builder::new()
            .prefix(".scratch-")
            .tempfile_in(dir)?
            .into_temp_path();
        let mut file = tokio::fs::File::create(&path).await?;
        while let Some(chunk) = object.body.next().await {
            file.write_all(&chunk?).await?;
        }
        file.flush().await?;
        Ok(Some(path))
    }

    /// Decodes raw base64 (no data-URL prefix) straight into the store, chunk by chunk.
    pub(crate) async fn put_base64(
        &self,
        session_id: &str,
        text: &str,
    ) -> Result<StoredMedia, MediaError> {
        let text = text.trim();
        if text.starts_with("data:") {
            return Err(MediaError::BadInput(
                "base64 must be raw base64 without a data: URL prefix".into(),
            ));
        }
        if (text.len() as u64 / 4).saturating_mul(3) > self.max_bytes.saturating_add(3) {
            return Err(MediaError::TooLarge(self.max_bytes));
        }
        let mut sink = self.sink(session_id, self.max_bytes)?;
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

    /// Downloads a URL through the guard (and the session's proxy) into the store.
    pub(crate) async fn put_url(
        &self,
        session_id: &str,
        url: &str,
        proxy_url: Option<&str>,
    ) -> Result<StoredMedia, MediaError> {
        let sink = self.sink(session_id, self.max_bytes)?;
        fetch::download(&self.fetch, url, proxy_url, sink).await
    }

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

    fn sink(&self, session_id: &str, max: u64) -> Result<Sink, MediaError> {
        if !is_session_segment(session_id) {
            return Err(MediaError::BadInput(format!(
                "'{session_id}' cannot name a media folder"
            )));
        }
        Ok(Sink::new(
            self.objects.clone(),
            self.layout.clone(),
            session_id,
            max,
        ))
    }
}

/// Whether `key` names a media object (`{sessionId}/{sha256}`, or a bare legacy `{sha256}`).
pub(crate) fn is_media_key(key: &str) -> bool {
    object_path(key).is_some()
}

/// The object path of a media key: `{sessionId}/{sha256}`, or a bare `{sha256}` written before
/// per-session keys. Anything else (temporary uploads, scratch, foreign files) is not media.
fn object_path(key: &str) -> Option<ObjectPath> {
    let (session, digest) = match key.rsplit_once('/') {
        Some((session, digest)) => (Some(session), digest),
        None => (None, key),
    };
    let is_digest = digest.len() == 64 && digest.bytes().all(|b| b.is_ascii_hexdigit());
    match session {
        _ if !is_digest => None,
        None => Some(ObjectPath::from_iter([digest])),
        Some(session) if is_session_segment(session) => {
            Some(ObjectPath::from_iter([session, digest]))
        }
        Some(_) => None,
    }
}

/// A session id usable as one path segment: no separators, nothing hidden or relative.
fn is_session_segment(session_id: &str) -> bool {
    !session_id.is_empty()
        && session_id.len() <= 256
        && !session_id.starts_with('.')
        && session_id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_.@+=".contains(&b))
}

/// Checks a media URL's form as `MediaStore::put_url` does (same refusal), fetching nothing: a bulk batch
/// refuses a malformed URL when it is submitted. The outbound-address guard still judges the address when
/// the URL is fetched (a bulk item then fails with `SEND_BLOCKED`).
pub(crate) fn check_url(url: &str) -> Result<(), MediaError> {
    fetch::check_url(url)
}

/// Checks base64 as `MediaStore::put_base64` reads it (same refusals), storing nothing: a bulk batch
/// refuses a bad item when it is submitted, not when the item's turn comes.
pub(crate) fn check_base64(text: &str) -> Result<(), MediaError> {
    let text = text.trim();
    if text.starts_with("data:") {
        return Err(MediaError::BadInput(
            "base64 must be raw base64 without a data: URL prefix".into(),
        ));
    }
    let mut chunk = Vec::with_capacity(B64_CHUNK.min(text.len()));
    let mut size = 0;
    for byte in text.bytes().filter(|b| !b.is_ascii_whitespace()) {
        chunk.push(byte);
        if chunk.len() == B64_CHUNK {
            size += decode(&chunk)?.len();
            chunk.clear();
        }
    }
    size += decode(&chunk)?.len();
    if size == 0 {
        return Err(MediaError::BadInput("base64 must not be empty".into()));
    }
    Ok(())
}

fn decode(chunk: &[u8]) -> Result<Vec<u8>, MediaError> {
    base64::engine::general_purpose::STANDARD
        .decode(chunk)
        .map_err(|e| MediaError::BadInput(format!("base64 is not valid base64: {e}")))
}
