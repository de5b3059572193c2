//! Media on the sim network: a send passes the sender's stored object on by key (never its bytes), with
//! the content inline only when it is small enough for events; a large object is never read whole.

use super::tests::{A, B, Handset, jid, linked};
use super::*;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;
use wagate_engine_api::media::{
    EngineMedia, FetchedBytes, MediaFailure, MediaReader, MediaUpload, MemoryMedia,
};

/// The engine API's memory store, counting whole reads (`get`, `open`).
#[derive(Default)]
struct CountedMedia {
    inner: MemoryMedia,
    whole_reads: AtomicUsize,
}

#[async_trait]
impl EngineMedia for CountedMedia {
    fn max_bytes(&self) -> u64 {
        self.inner.max_bytes()
    }
    fn begin(&self) -> Result<Box<dyn MediaUpload>, MediaFailure> {
        self.inner.begin()
    }
    async fn finish(&self, upload: Box<dyn MediaUpload>) -> Result<StoredFile, MediaFailure> {
        self.inner.finish(upload).await
    }
    async fn put(&self, bytes: &[u8]) -> Result<StoredFile, MediaFailure> {
        self.inner.put(bytes).await
    }
    async fn get(&self, key: &str) -> Result<Option<Vec<u8>>, MediaFailure> {
        self.whole_reads.fetch_add(1, Ordering::SeqCst);
        self.inner.get(key).await
    }
    async fn head(&self, key: &str) -> Result<Option<u64>, MediaFailure> {
        self.inner.head(key).await
    }
    async fn open(&self, key: &str) -> Result<Option<MediaReader>, MediaFailure> {
        self.whole_reads.fetch_add(1, Ordering::SeqCst);
        self.inner.open(key).await
    }
    async fn fetch_small(
        &self,
        url: &str,
        proxy_url: Option<&str>,
        max_bytes: usize,
        budget: Duration,
    ) -> Result<FetchedBytes, MediaFailure> {
        self.inner
            .fetch_small(url, proxy_url, max_bytes, budget)
            .await
    }
}

/// A session linked to `phone` whose engine uses `media`.
async fn linked_with(
    net: &SimNetwork,
    session: &str,
    phone: &str,
    media: Arc<dyn EngineMedia>,
) -> Handset {
    let (events, rx) = event_channel();
    let mut ctx = EngineContext::standalone(session, events, None);
    ctx.media = media;
    let mut h = Handset {
        engine: SimFactory::new(net.clone()).create(ctx),
        rx,
        account: None,
    };
    h.engine.start().await.expect("start");
    assert!(matches!(h.next().await, EngineEvent::Qr { .. }));
    net.scan(session, &jid(phone), Some(session)).expect("scan");
    assert_eq!(h.next().await, EngineEvent::Authenticating);
    h.expect_linked().await;
    h
}

fn document(to: &str, key: &str) -> OutgoingMessage {
    OutgoingMessage {
        to: jid(to),
        content: MessageContent::Media(MediaMessage {
            kind: MediaKind::Document,
            source: MediaSource::Stored {
                key: key.to_string(),
            },
            mimetype: "application/pdf".into(),
            filename: Some("f.pdf".into()),
            caption: None,
        }),
        quoted_id: None,
        mentions: Vec::new(),
    }
}

#[tokio::test(start_paused = true)]
async fn media_travels_by_key_with_the_bytes_inline_only_when_small() {
    let net = SimNetwork::new(network::SimConfig::default());
    let media = Arc::new(CountedMedia::default());
    let a = linked_with(&net, "a", A, media.clone()).await;
    let mut b = linked(&net, "b", B).await;
    let large = media
        .put(&vec![7u8; INLINE_MEDIA_MAX_BYTES + 1])
        .await
        .expect("put");
    let small = media.put(b"tiny").await.expect("put");
    for (file, inline) in [(&large, None), (&small, Some(b"tiny".to_vec()))] {
        a.engine.send(document(B, &file.key)).await.expect("send");
        let got = b.message().await.media.expect("media");
        assert_eq!(got.stored.as_deref(), Some(file), "passed on by key");
        assert_eq!(got.data, inline.unwrap_or_default());
        assert_eq!(
            (got.mimetype.as_str(), got.filename.as_deref()),
            ("application/pdf", Some("f.pdf"))
        );
    }
    assert_eq!(
        media.whole_reads.load(Ordering::SeqCst),
        1,
        "only the small object is read, to go inline"
    );
    let missing = a.engine.send(document(B, "mem-99")).await;
    assert!(
        matches!(missing, Err(EngineError::BadInput(_))),
        "{missing:?}"
    );
}
