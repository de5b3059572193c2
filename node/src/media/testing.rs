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
