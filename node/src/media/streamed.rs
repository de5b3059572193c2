//! S3 uploads of a finished scratch file, streamed from disk: one presigned `PUT` whose body is read from
//! the file as the request goes out (S3 takes up to 5 GiB in one PUT), and past that a multipart upload
//! whose parts go out the same way. `object_store` takes a body only whole in memory (`PutPayload`), so
//! a multipart upload through it holds every 5 MiB part in flight, and twenty concurrent sends held
//! tens of MiB of parts plus what the allocator kept of them afterwards. Here an upload holds one read
//! chunk at a time whatever its size. `object_store` still signs every request (credentials, their
//! refresh and the endpoint style stay its business) and starts, completes and aborts multipart
//! uploads; only the bodies bypass it.
//!
//! One PUT also costs the server the least: a multipart upload is written twice by S3-compatible servers
//! that assemble parts on completion (moto among them), and the content address is known before the
//! upload starts (the scratch file was hashed as it filled), so no upload to a temporary key and
//! server-side rename is needed either.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use object_store::aws::AmazonS3;
use object_store::multipart::{MultipartStore, PartId};
use object_store::path::Path as ObjectPath;
use object_store::signer::{Method, SignedUrlOptions, Signer};
use tokio::io::{AsyncReadExt, AsyncSeekExt};

use super::MediaError;
use super::backend::classify;

/// The largest object S3 takes in one PUT.
const SINGLE_PUT_MAX: u64 = 5 * 1024 * 1024 * 1024;
/// Part size of a multipart upload past `SINGLE_PUT_MAX` (S3 allows 10,000 parts: 640 GiB).
const PART_SIZE: u64 = 64 * 1024 * 1024;
/// Parts uploading at once per object (each holds one read chunk).
const PARTS_IN_FLIGHT: usize = 2;
/// Bytes read from the scratch file per body chunk.
const READ_CHUNK: usize = 64 * 1024;
/// How long a presigned URL stays valid: it is used at once, retries sign a new one.
const URL_VALIDITY: Duration = Duration::from_secs(15 * 60);
/// Retries of a failed request (connection lost, 5xx), with `backend`'s backoff.
const MAX_RETRIES: u32 = 2;
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// A body must go out at this rate at least (on top of `BASE_TIMEOUT`) before the request gives up.
const MIN_RATE: u64 = 1024 * 1024;
const BASE_TIMEOUT: Duration = Duration::from_secs(120);

/// Streams scratch files into the bucket; cheap to clone.
#[derive(Debug, Clone)]
pub(super) struct Streamer {
    s3: Arc<AmazonS3>,
    http: reqwest::Client,
    single_put_max: u64,
    part_size: u64,
}

impl Streamer {
    pub(super) fn new(s3: Arc<AmazonS3>) -> Result<Streamer, MediaError> {
        let http = reqwest::Client::builder()
            .connect_timeout(CONNECT_TIMEOUT)
            .build()
            .map_err(|e| MediaError::Unavailable(format!("S3 upload client: {e}")))?;
        Ok(Streamer {
            s3,
            http,
            single_put_max: SINGLE_PUT_MAX,
            part_size: PART_SIZE,
        })
    }

    /// The same streamer switching to a multipart upload past `single_put_max` bytes, with parts of
    /// `part_size` (tests: the multipart path without gigabytes).
    #[cfg(test)]
    pub(super) fn with_limits(mut self, single_put_max: u64, part_size: u64) -> Streamer {
        self.single_put_max = single_put_max;
        self.part_size = part_size;
        self
    }

    /// Uploads the `size` bytes of `file` to `target`.
    pub(super) async fn upload(
        &self,
        file: &Path,
        size: u64,
        target: &ObjectPath,
    ) -> Result<(), MediaError> {
        if size <= self.single_put_max {
            self.put(file, 0, size, target, &SignedUrlOptions::default())
                .await?;
            return Ok(());
        }
        let id = self.s3.create_multipart(target).await.map_err(classify)?;
        match self.put_parts(file, size, target, &id).await {
            Ok(parts) => self
                .s3
                .complete_multipart(target, &id, parts)
                .await
                .map(|_| ())
                .map_err(classify),
            Err(err) => {
                if let Err(abort) = self.s3.abort_multipart(target, &id).await {
                    tracing::debug!(error = %abort, "failed upload not aborted");
                }
                Err(err)
            }
        }
    }

    /// Every part of the file, `PARTS_IN_FLIGHT` at once, in part order.
    async fn put_parts(
        &self,
        file: &Path,
        size: u64,
        target: &ObjectPath,
        id: &str,
    ) -> Result<Vec<PartId>, MediaError> {
        use futures::{StreamExt, TryStreamExt};
        let count = size.div_ceil(self.part_size);
        futures::stream::iter(0..count)
            .map(|index| async move {
                let offset = index * self.part_size;
                let len = self.part_size.min(size - offset);
                let options = SignedUrlOptions::default().with_query([
                    ("partNumber", (index + 1).to_string()),
                    ("uploadId", id.into()),
                ]);
                let etag = self.put(file, offset, len, target, &options).await?;
                let content_id = etag.ok_or_else(|| {
                    MediaError::Unavailable("the storage backend gave a part no ETag".into())
                })?;
                Ok::<_, MediaError>(PartId { content_id })
            })
            .buffered(PARTS_IN_FLIGHT)
            .try_collect()
            .await
    }

    /// One presigned PUT of `len` bytes of `file` from `offset`, retried on a lost connection or a
    /// server error; answers the ETag.
    async fn put(
        &self,
        file: &Path,
        offset: u64,
        len: u64,
        target: &ObjectPath,
        options: &SignedUrlOptions,
    ) -> Result<Option<String>, MediaError> {
        let mut attempt = 0;
        loop {
            let url = self
                .s3
                .signed_url_opts(Method::PUT, target, URL_VALIDITY, options)
                .await
                .map_err(classify)?;
            let sent = self
                .http
                .put(url)
                .header(reqwest::header::CONTENT_LENGTH, len)
                .timeout(BASE_TIMEOUT + Duration::from_secs(len / MIN_RATE))
                .body(body(file, offset, len).await?)
                .send()
                .await;
            let retry = match sent {
                Ok(resp) if resp.status().is_success() => {
                    let etag = resp.headers().get(reqwest::header::ETAG);
                    return Ok(etag.and_then(|v| v.to_str().ok()).map(str::to_string));
                }
                Ok(resp) => {
                    let status = resp.status();
                    if !status.is_server_error() || attempt == MAX_RETRIES {
                        return Err(refused(status));
                    }
                    status.to_string()
                }
                Err(err) => {
                    if attempt == MAX_RETRIES || !(err.is_connect() || err.is_request()) {
                        return Err(transport_failed(err));
                    }
                    err.without_url().to_string()
                }
            };
            attempt += 1;
            tracing::debug!(attempt, cause = %retry, "S3 upload retried");
            tokio::time::sleep(Duration::from_millis(100 << attempt)).await;
        }
    }
}

/// `len` bytes of `file` from `offset`, read a chunk at a time as the request body goes out.
async fn body(file: &Path, offset: u64, len: u64) -> Result<reqwest::Body, MediaError> {
    let mut file = tokio::fs::File::open(file).await?;
    file.seek(std::io::SeekFrom::Start(offset)).await?;
    let chunks = futures::stream::try_unfold((file, len), |(mut file, left)| async move {
        if left == 0 {
            return Ok::<_, std::io::Error>(None);
        }
        let n = usize::try_from(left).map_or(READ_CHUNK, |left| left.min(READ_CHUNK));
        let mut chunk = vec![0u8; n];
        file.read_exact(&mut chunk).await?;
        Ok(Some((Bytes::from(chunk), (file, left - n as u64))))
    });
    Ok(reqwest::Body::wrap_stream(chunks))
}

/// An upload the server answered with an error status.
fn refused(status: reqwest::StatusCode) -> MediaError {
    tracing::warn!(%status, "media storage upload refused");
    if status == reqwest::StatusCode::FORBIDDEN || status == reqwest::StatusCode::UNAUTHORIZED {
        return MediaError::Unavailable("the storage backend refused the credentials".into());
    }
    MediaError::Unavailable(format!("the storage backend answered {status}"))
}

/// A request that got no answer. The URL is dropped first: it carries a signature valid for minutes,
/// which belongs neither in the log nor in an error message a client reads.
fn transport_failed(err: reqwest::Error) -> MediaError {
    let err = err.without_url();
    tracing::warn!(error = %err, "media storage upload failed");
    let mut cause = err.to_string();
    let mut source = std::error::Error::source(&err);
    while let Some(inner) = source {
        cause = format!("{cause}: {inner}");
        source = inner.source();
    }
    MediaError::Unavailable(cause.chars().take(400).collect())
}
