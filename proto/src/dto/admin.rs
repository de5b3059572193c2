//! Bodies of the administrative data routes (export/import, storage archives) and of media conversion.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// The answer to `POST /api/infra/import-data`. `counts` are the rows attempted per table (all of them
/// when `imported` is true; on a rollback, the rows the payload carried).
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ImportResult {
    pub imported: bool,
    pub counts: BTreeMap<String, u64>,
    pub warnings: Vec<String>,
    pub notices: Vec<String>,
    pub restart_required: bool,
    pub orphaned_engines: Vec<String>,
    pub stopped_orphan_engines: Vec<String>,
    pub failed_orphan_engines: Vec<String>,
}

/// `GET /api/infra/storage/files/count`.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct StorageFileCount {
    pub storage_type: String,
    pub count: u64,
    pub size_bytes: u64,
    #[serde(rename = "sizeMB")]
    pub size_mb: f64,
}

/// `GET /api/infra/storage/export`: where the archive was written, relative to the working directory.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct StorageExportResult {
    pub message: String,
    pub download: String,
}

/// `POST /api/infra/storage/import`.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct StorageImportRequest {
    pub file_path: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct StorageImportResult {
    pub imported: bool,
    pub count: u64,
    pub storage_type: String,
}

/// `GET /api/sessions/{sessionId}/media/convert`.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct ConversionAvailability {
    pub available: bool,
}

/// `POST .../media/convert/voice|video`: exactly one of `url` or `base64` (raw, no data-URL prefix).
#[derive(Debug, Clone, Default, Serialize, Deserialize, ToSchema)]
pub struct ConvertRequest {
    pub url: Option<String>,
    pub base64: Option<String>,
    pub mimetype: Option<String>,
    pub filename: Option<String>,
}

/// The converted media.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct ConvertedMedia {
    pub base64: String,
    pub mimetype: String,
    pub bytes: u64,
}
