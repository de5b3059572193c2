//! Builds the `object_store` client `STORAGE_TYPE` selects and turns its errors into `MediaError`s. The
//! S3 client fails fast (short connect timeout, two retries) so that an unreachable endpoint or refused
//! credentials reach the caller as a clear 503 within seconds rather than after minutes of retries.

use std::sync::Arc;
use std::time::Duration;

use object_store::aws::{AmazonS3, AmazonS3Builder};
use object_store::local::LocalFileSystem;
use object_store::{BackoffConfig, ClientOptions, ObjectStore, RetryConfig};

use super::MediaError;
use crate::config::S3Config;

const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// Per request: one part of a multipart upload or one streamed read must finish within this.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(120);
const MAX_RETRIES: usize = 2;
const RETRY_BUDGET: Duration = Duration::from_secs(15);

/// `DATA_DIR/media` (created when missing).
pub(super) fn local(dir: &std::path::Path) -> Result<Arc<dyn ObjectStore>, MediaError> {
    std::fs::create_dir_all(dir)?;
    let store = LocalFileSystem::new_with_prefix(dir)
        .map_err(|e| MediaError::Unavailable(format!("media directory {}: {e}", dir.display())))?
        .with_automatic_cleanup(true);
    Ok(Arc::new(store))
}

/// The bucket, with credentials from the config (the `AWS_*` variables) or else the AWS default chain.
pub(super) fn s3(config: &S3Config) -> Result<Arc<AmazonS3>, MediaError> {
    // reqwest is built without a bundled TLS provider and panics when none is installed; boot installs
    // ring already, this makes the store safe to build anywhere (a second install is a no-op error).
    let _ = rustls::crypto::ring::default_provider().install_default();
    let mut builder = AmazonS3Builder::from_env()
        .with_bucket_name(&config.bucket)
        .with_region(&config.region)
        .with_retry(RetryConfig {
            backoff: BackoffConfig {
                init_backoff: Duration::from_millis(100),
                max_backoff: Duration::from_secs(2),
                base: 2.0,
            },
            max_retries: MAX_RETRIES,
            retry_timeout: RETRY_BUDGET,
        })
        .with_client_options(
            ClientOptions::new()
                .with_allow_http(true)
                .with_connect_timeout(CONNECT_TIMEOUT)
                .with_timeout(REQUEST_TIMEOUT),
        );
    if let Some(endpoint) = &config.endpoint {
        builder = if config.force_path_style {
            builder
                .with_endpoint(endpoint.as_str().trim_end_matches('/'))
                .with_virtual_hosted_style_request(false)
        } else {
            // Virtual-hosted style on a custom server: the bucket becomes the first label of the host.
            let mut hosted = endpoint.clone();
            let host = format!(
                "{}.{}",
                config.bucket,
                endpoint.host_str().unwrap_or_default()
            );
            hosted.set_host(Some(&host)).map_err(|e| {
                MediaError::Unavailable(format!("S3_ENDPOINT with bucket host: {e}"))
            })?;
            builder
                .with_endpoint(hosted.as_str().trim_end_matches('/'))
                .with_virtual_hosted_style_request(true)
        };
    } else {
        builder = builder.with_virtual_hosted_style_request(!config.force_path_style);
    }
    if let Some(id) = &config.access_key_id {
        builder = builder.with_access_key_id(id);
    }
    if let Some(secret) = &config.secret_access_key {
        builder = builder.with_secret_access_key(secret);
    }
    if let Some(token) = &config.session_token {
        builder = builder.with_token(token);
    }
    let store = builder
        .build()
        .map_err(|e| MediaError::Unavailable(format!("S3 bucket '{}': {e}", config.bucket)))?;
    Ok(Arc::new(store))
}

/// A backend failure other than "not found": credentials refused, endpoint down, disk error. The
/// message names the cause once, without the request dump `object_store` appends.
pub(super) fn classify(err: object_store::Error) -> MediaError {
    let cause = match &err {
        object_store::Error::PermissionDenied { .. }
        | object_store::Error::Unauthenticated { .. } => {
            "the storage backend refused the credentials".to_string()
        }
        _ => first_line(&err.to_string()),
    };
    tracing::warn!(error = %err, "media storage request failed");
    MediaError::Unavailable(cause)
}

fn first_line(text: &str) -> String {
    text.lines()
        .next()
        .unwrap_or(text)
        .chars()
        .take(400)
        .collect()
}
