//! What the adapter's tests stand in for the node with, built on the engine API's standalone pieces: a
//! media store in memory that fetches URLs for real (the loopback sites the tests serve; the node's
//! outbound-address guard is the node's to test), a migrated SQLite data DB for the engine's own tables,
//! and the context that ties them to a session.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use futures::StreamExt;
use wagate_db::{DataPool, DatabaseKind};
use wagate_engine_api::StoredFile;
use wagate_engine_api::media::{
    EngineMedia, FetchedBytes, MediaFailure, MediaReader, MediaUpload, MemoryMedia,
};

/// `MemoryMedia` (blobs by key, capped at `max`) whose `fetch_small` goes to the network unguarded.
pub(super) struct LoopbackMedia {
    blobs: MemoryMedia,
    max: u64,
}

impl LoopbackMedia {
    pub(super) fn new(max: u64) -> LoopbackMedia {
        LoopbackMedia {
            blobs: MemoryMedia::default(),
            max,
        }
    }
}

/// An upload that refuses to grow past the store's cap, as the node's capped scratch file does.
struct Capped {
    inner: Box<dyn MediaUpload>,
    written: u64,
    max: u64,
}

impl std::io::Write for Capped {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        if self.written + buf.len() as u64 > self.max {
            return Err(std::io::Error::other("over the media cap"));
        }
        let n = self.inner.write(buf)?;
        self.written += n as u64;
        Ok(n)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}

impl std::io::Seek for Capped {
    fn seek(&mut self, pos: std::io::SeekFrom) -> std::io::Result<u64> {
        let at = self.inner.seek(pos)?;
        self.written = self.written.max(at);
        Ok(at)
    }
}

impl MediaUpload for Capped {
    fn truncate(&mut self, len: u64) -> std::io::Result<()> {
        self.written = len;
        self.inner.truncate(len)
    }
    fn into_any(self: Box<Self>) -> Box<dyn std::any::Any + Send> {
        self
    }
}

#[async_trait]
impl EngineMedia for LoopbackMedia {
    fn max_bytes(&self) -> u64 {
        self.max
    }
    fn begin(&self) -> Result<Box<dyn MediaUpload>, MediaFailure> {
        Ok(Box::new(Capped {
            inner: self.blobs.begin()?,
            written: 0,
            max: self.max,
        }))
    }
    async fn finish(&self, upload: Box<dyn MediaUpload>) -> Result<StoredFile, MediaFailure> {
        let capped = upload
            .into_any()
            .downcast::<Capped>()
            .map_err(|_| MediaFailure::BadInput("an upload this store did not begin".into()))?;
        self.blobs.finish(capped.inner).await
    }
    async fn put(&self, bytes: &[u8]) -> Result<StoredFile, MediaFailure> {
        if bytes.len() as u64 > self.max {
            return Err(MediaFailure::TooLarge(self.max));
        }
        self.blobs.put(bytes).await
    }
    async fn get(&self, key: &str) -> Result<Option<Vec<u8>>, MediaFailure> {
        self.blobs.get(key).await
    }
    async fn head(&self, key: &str) -> Result<Option<u64>, MediaFailure> {
        self.blobs.head(key).await
    }
    async fn open(&self, key: &str) -> Result<Option<MediaReader>, MediaFailure> {
        self.blobs.open(key).await
    }
    async fn fetch_small(
        &self,
        url: &str,
        _proxy_url: Option<&str>,
        max_bytes: usize,
        budget: Duration,
    ) -> Result<FetchedBytes, MediaFailure> {
        let unreachable = |e: reqwest::Error| MediaFailure::Unreachable(e.to_string());
        let client = reqwest::Client::builder()
            .timeout(budget)
            .build()
            .map_err(unreachable)?;
        let response = client
            .get(url)
            .send()
            .await
            .and_then(|r| r.error_for_status())
            .map_err(unreachable)?;
        let content_type = response
            .headers()
            .get(reqwest::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string);
        let mut body = response.bytes_stream();
        let mut fetched = FetchedBytes {
            content_type,
            ..FetchedBytes::default()
        };
        while let Some(chunk) = body.next().await {
            fetched
                .bytes
                .extend_from_slice(&chunk.map_err(unreachable)?);
            if fetched.bytes.len() > max_bytes {
                fetched.bytes.truncate(max_bytes);
                fetched.truncated = true;
                break;
            }
        }
        Ok(fetched)
    }
}

/// A migrated SQLite data DB under `dir` (the engine's `socket_*` tables) holding the session row
/// `session_id` its rows hang off.
pub(super) async fn data_db(dir: &std::path::Path, session_id: &str) -> DataPool {
    // reqwest is built without a default crypto provider (the node's boot installs ring the same way).
    let _ = rustls::crypto::ring::default_provider().install_default();
    let path = dir.join("data.sqlite");
    let pool = DataPool::connect(DatabaseKind::Sqlite, &path.display().to_string())
        .await
        .expect("sqlite");
    pool.migrate().await.expect("migrate");
    let now = wagate_db::now_ms();
    let sql = "INSERT INTO sessions (id, name, created_at, updated_at) VALUES ($1, $2, $3, $3)";
    wagate_db::on_pool!(&pool, |p| sqlx::query(sql)
        .bind(session_id)
        .bind(format!("name-{session_id}"))
        .bind(now)
        .execute(p)
        .await
        .map(|_| ()))
    .expect("insert session");
    pool
}

/// A shared handle on a test media store, as the engine's context holds it.
pub(super) fn media(max: u64) -> Arc<LoopbackMedia> {
    Arc::new(LoopbackMedia::new(max))
}
