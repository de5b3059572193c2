//! The error body: `{statusCode, message, error}` plus `code` and `retryAfterSeconds` where the spec names
//! them. Built only by the node's `ApiError`; clients and tests parse it.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ErrorBody {
    pub status_code: u16,
    pub message: String,
    /// The HTTP reason phrase, e.g. `Bad Request`.
    pub error: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub code: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub retry_after_seconds: Option<u64>,
}
