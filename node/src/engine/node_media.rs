//! The node's implementation of the engine API's media interface (`EngineMedia`) over its media store
//! (local disk or an S3 bucket, `STORAGE_TYPE`): engines put, get and stream objects by key and fetch
//! URLs through the store's outbound-address guard, without seeing where objects live. Each engine
//! instance gets one bound to its session (`EngineContext::media`), so what it puts lands under that
//! session's keys.

use std::io::{Seek, SeekFrom, Write};
use std::time::Duration;

use async_trait::async_trait;
use futures::TryStreamExt;
use wagate_engine_api::StoredFile;
use wagate_engine_api::media::{EngineMedia, FetchedBytes, MediaFailure, MediaReader, MediaUpload};

use crate::media::{IncomingFile, MediaError, MediaStore, StoredMedia};

fn failed(err: MediaError) -> MediaFailure {
    match err {
        MediaError::TooLarge(max) => MediaFailure::TooLarge(max),
        MediaError::BadInput(why) => MediaFailure::BadInput(why),
        MediaError::Blocked(why) => MediaFailure::Blocked(why),
        MediaError::Unreachable(why) => MediaFailure::Unreachable(why),
        MediaError::Unavailable(why) => MediaFailure::Unavailable(why),
        MediaError::Io(err) => MediaFailure::Storage(err.to_string()),
    }
}

fn stored(media: StoredMedia) -> StoredFile {
    StoredFile {
        key: media.key,
        size: media.size,
    }
}

/// The media store as one session's engine sees it.
#[derive(Debug, Clone)]
pub(crate) struct SessionMedia {
    store: MediaStore,
    session_id: String,
}

impl SessionMedia {
    pub(crate) fn new(store: MediaStore, session_id: impl Into<String>) -> SessionMedia {
        SessionMedia {
            store,
            session_id: session_id.into(),
        }
    }
}

/// The store's capped scratch file as an engine's upload.
struct Upload(IncomingFile);

impl Write for Upload {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.write(buf)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        self.0.flush()
    }
}

impl Seek for Upload {
    fn seek(&mut self, pos: SeekFrom) -> std::io::Result<u64> {
        self.0.seek(pos)
    }
}

impl MediaUpload for Upload {
    fn truncate(&mut self, len: u64) -> std::io::Result<()> {
        self.0.truncate(len)
    }
    fn into_any(self: Box<Self>) -> Box<dyn std::any::Any + Send> {
        self
    }
}

#[async_trait]
impl EngineMedia for SessionMedia {
    fn max_bytes(&self) -> u64 {
        self.store.max_bytes()
    }

    fn begin(&self) -> Result<Box<dyn MediaUpload>, MediaFailure> {
        let file = self.store.incoming().map_err(failed)?;
        Ok(Box::new(Upload(file)))
    }

    async fn finish(&self, upload: Box<dyn MediaUpload>) -> Result<StoredFile, MediaFailure> {
        let Ok(upload) = upload.into_any().downcast::<Upload>() else {
            return Err(MediaFailure::BadInput(
                "an upload this media store did not begin".into(),
            ));
        };
        self.store
            .adopt(&self.session_id, upload.0)
            .await
            .map(stored)
            .map_err(failed)
    }

    async fn put(&self, bytes: &[u8]) -> Result<StoredFile, MediaFailure> {
        self.store
            .put_bytes(&self.session_id, bytes)
            .await
            .map(stored)
            .map_err(failed)
    }

    async fn get(&self, key: &str) -> Result<Option<Vec<u8>>, MediaFailure> {
        self.store.get(key).await.map_err(failed)
    }

    async fn head(&self, key: &str) -> Result<Option<u64>, MediaFailure> {
        self.store.head(key).await.map_err(failed)
    }

    async fn open(&self, key: &str) -> Result<Option<MediaReader>, MediaFailure> {
        let Some(object) = self.store.stream(key).await.map_err(failed)? else {
            return Ok(None);
        };
        let body = object.body.map_err(std::io::Error::other);
        Ok(Some(Box::pin(tokio_util::io::StreamReader::new(body))))
    }

    async fn fetch_small(
        &self,
        url: &str,
        proxy_url: Option<&str>,
        max_bytes: usize,
        budget: Duration,
    ) -> Result<FetchedBytes, MediaFailure> {
        let fetched = self
            .store
            .fetch_small(url, proxy_url, max_bytes, budget)
            .await
            .map_err(failed)?;
        Ok(FetchedBytes {
            bytes: fetched.bytes,
            content_type: fetched.content_type,
            truncated: fetched.truncated,
        })
    }
}

#[cfg(test)]
mod tests {
    use axum::Router;
    use axum::http::header::CONTENT_TYPE;
    use axum::routing::get;

    use super::*;
    use crate::media::FetchOptions;

    const JPEG: &[u8] = &[0xFF, 0xD8, 0xFF, 0xE0, 0, 16, b'J', b'F', b'I', b'F'];
    const BUDGET: Duration = Duration::from_secs(5);

    /// A loopback site: a page and a JPEG.
    async fn site() -> String {
        // What boot does once: reqwest is built without a default TLS provider.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let app = Router::new()
            .route(
                "/page",
                get(|| async { ([(CONTENT_TYPE, "text/html")], "<html><head></head></html>") }),
            )
            .route(
                "/thumb.jpg",
                get(|| async { ([(CONTENT_TYPE, "image/jpeg")], JPEG) }),
            );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, app).await });
        format!("http://{addr}")
    }

    fn media(dir: &std::path::Path, guarded: bool) -> SessionMedia {
        let store = MediaStore::new(
            dir.to_path_buf(),
            1024 * 1024,
            FetchOptions {
                is_guarded: guarded,
                use_session_proxy: true,
            },
        );
        SessionMedia::new(store, "s1")
    }

    /// What engines fetch for link previews: cut at the cap (and said so), with its content type.
    #[tokio::test]
    async fn a_fetch_keeps_at_most_its_cap_and_says_it_was_cut() {
        let base = site().await;
        let dir = tempfile::tempdir().unwrap();
        let media = media(dir.path(), false);
        let cut = media
            .fetch_small(&format!("{base}/page"), None, 16, BUDGET)
            .await
            .unwrap();
        assert_eq!((cut.bytes.len(), cut.truncated), (16, true));
        assert!(cut.bytes.starts_with(b"<html>"));
        let whole = media
            .fetch_small(&format!("{base}/thumb.jpg"), None, 1024, BUDGET)
            .await
            .unwrap();
        assert_eq!((whole.bytes.as_slice(), whole.truncated), (JPEG, false));
        assert_eq!(whole.content_type.as_deref(), Some("image/jpeg"));
    }

    /// The outbound-address guard stands between engines and the network: loopback is refused.
    #[tokio::test]
    async fn the_guard_refuses_loopback() {
        let base = site().await;
        let dir = tempfile::tempdir().unwrap();
        let media = media(dir.path(), true);
        let refused = media
            .fetch_small(&format!("{base}/page"), None, 1024, BUDGET)
            .await;
        assert!(
            matches!(refused, Err(MediaFailure::Blocked(_))),
            "{refused:?}"
        );
    }
}
