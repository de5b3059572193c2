//! Test backends for the media store: a local directory, and a real S3-compatible server (the harness's
//! moto on loopback). Never a mock.

use super::{FetchOptions, MediaStore};
use crate::config::{S3Config, StorageConfig};
pub(crate) use wagate_loadtest::harness::S3Server;
use wagate_loadtest::harness::s3::{ACCESS_KEY_ID, BUCKET, SECRET_ACCESS_KEY};

/// The storage config of an S3 store at `endpoint` with the given credentials.
pub(crate) fn s3_config(endpoint: &str, key_id: &str, secret: &str) -> StorageConfig {
    StorageConfig::S3(Box::new(S3Config {
        bucket: BUCKET.into(),
        region: "us-east-1".into(),
        endpoint: Some(url::Url::parse(endpoint).expect("endpoint url")),
        force_path_style: true,
        access_key_id: Some(key_id.into()),
        secret_access_key: Some(secret.into()),
        session_token: None,
    }))
}

/// The storage config of the test server.
pub(crate) fn server_config(server: &S3Server) -> StorageConfig {
    s3_config(&server.endpoint(), ACCESS_KEY_ID, SECRET_ACCESS_KEY)
}

/// A store on `config` with scratch files under `dir`.
pub(crate) fn store_on(config: &StorageConfig, dir: &std::path::Path, max: u64) -> MediaStore {
    MediaStore::from_config(config, dir, max, FetchOptions::default()).expect("media store")
}

/// What passed through a `Counting` store: whole-object traffic, and the most part bytes in memory at
/// once.
#[derive(Debug, Default)]
pub(crate) struct Traffic {
    /// Object bodies read (`get`, not `head`).
    pub reads: std::sync::atomic::AtomicU64,
    /// Bytes written by single PUTs.
    pub put_bytes: std::sync::atomic::AtomicU64,
    /// Multipart uploads begun.
    pub multiparts: std::sync::atomic::AtomicU64,
    /// Backend-side copies.
    pub copies: std::sync::atomic::AtomicU64,
    /// Part bytes handed to the backend and not yet sent, now and at most.
    pub parts_in_flight: std::sync::atomic::AtomicU64,
    pub parts_in_flight_max: std::sync::atomic::AtomicU64,
}

/// A real backend (local directory or moto) behind a wrapper that counts what passes through it.
#[derive(Debug)]
pub(crate) struct Counting {
    pub inner: std::sync::Arc<dyn object_store::ObjectStore>,
    pub traffic: std::sync::Arc<Traffic>,
}

impl std::fmt::Display for Counting {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Counting({})", self.inner)
    }
}

/// A multipart upload whose parts are counted while they are in flight.
#[derive(Debug)]
struct CountingUpload {
    inner: Box<dyn object_store::MultipartUpload>,
    traffic: std::sync::Arc<Traffic>,
}

mod counting_impl {
    use std::sync::atomic::Ordering::SeqCst;

    use async_trait::async_trait;
    use futures::FutureExt;
    use futures::stream::BoxStream;
    use object_store::path::Path;
    use object_store::{
        CopyOptions, GetOptions, GetResult, ListResult, MultipartUpload, ObjectMeta, ObjectStore,
        PutMultipartOptions, PutOptions, PutPayload, PutResult, RenameOptions, Result, UploadPart,
    };

    use super::{Counting, CountingUpload};

    #[async_trait]
    impl ObjectStore for Counting {
        async fn put_opts(
            &self,
            location: &Path,
            payload: PutPayload,
            opts: PutOptions,
        ) -> Result<PutResult> {
            let len = payload.content_length() as u64;
            self.traffic.put_bytes.fetch_add(len, SeqCst);
            self.inner.put_opts(location, payload, opts).await
        }

        async fn put_multipart_opts(
            &self,
            location: &Path,
            opts: PutMultipartOptions,
        ) -> Result<Box<dyn MultipartUpload>> {
            self.traffic.multiparts.fetch_add(1, SeqCst);
            let inner = self.inner.put_multipart_opts(location, opts).await?;
            Ok(Box::new(CountingUpload {
                inner,
                traffic: self.traffic.clone(),
            }))
        }

        async fn get_opts(&self, location: &Path, options: GetOptions) -> Result<GetResult> {
            if !options.head {
                self.traffic.reads.fetch_add(1, SeqCst);
            }
            self.inner.get_opts(location, options).await
        }

        fn delete_stream(
            &self,
            locations: BoxStream<'static, Result<Path>>,
        ) -> BoxStream<'static, Result<Path>> {
            self.inner.delete_stream(locations)
        }

        fn list(&self, prefix: Option<&Path>) -> BoxStream<'static, Result<ObjectMeta>> {
            self.inner.list(prefix)
        }

        async fn list_with_delimiter(&self, prefix: Option<&Path>) -> Result<ListResult> {
            self.inner.list_with_delimiter(prefix).await
        }

        async fn copy_opts(&self, from: &Path, to: &Path, options: CopyOptions) -> Result<()> {
            self.traffic.copies.fetch_add(1, SeqCst);
            self.inner.copy_opts(from, to, options).await
        }

        async fn rename_opts(&self, from: &Path, to: &Path, options: RenameOptions) -> Result<()> {
            self.inner.rename_opts(from, to, options).await
        }
    }

    #[async_trait]
    impl MultipartUpload for CountingUpload {
        fn put_part(&mut self, data: PutPayload) -> UploadPart {
            let len = data.content_length() as u64;
            let now = self.traffic.parts_in_flight.fetch_add(len, SeqCst) + len;
            self.traffic.parts_in_flight_max.fetch_max(now, SeqCst);
            let traffic = self.traffic.clone();
            self.inner
                .put_part(data)
                .map(move |result| {
                    traffic.parts_in_flight.fetch_sub(len, SeqCst);
                    result
                })
                .boxed()
        }

        async fn complete(&mut self) -> Result<PutResult> {
            self.inner.complete().await
        }

        async fn abort(&mut self) -> Result<()> {
            self.inner.abort().await
        }
    }
}

impl MediaStore {
    /// The same store with S3 uploads switching to streamed parts past `single_put_max` bytes.
    pub(crate) fn with_streamer_limits(
        mut self,
        single_put_max: u64,
        part_size: u64,
    ) -> MediaStore {
        if let super::sink::Layout::Spooled { streamer, .. } = &mut self.layout {
            *streamer = streamer.clone().with_limits(single_put_max, part_size);
        }
        self
    }

    /// The same store with its backend behind a `Counting` wrapper.
    pub(crate) fn counted(&self) -> (MediaStore, std::sync::Arc<Traffic>) {
        let traffic = std::sync::Arc::new(Traffic::default());
        let objects = Counting {
            inner: self.objects.clone(),
            traffic: traffic.clone(),
        };
        let store = MediaStore {
            objects: std::sync::Arc::new(objects),
            ..self.clone()
        };
        (store, traffic)
    }
}
