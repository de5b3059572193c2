//! Audit log listing (wire-notes §2).

use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct AuditEntry {
    pub id: String,
    pub action: String,
    pub severity: String,
    pub api_key_id: Option<String>,
    pub api_key_name: Option<String>,
    pub session_id: Option<String>,
    pub ip_address: Option<String>,
    pub method: Option<String>,
    pub path: Option<String>,
    pub status_code: Option<i64>,
    pub metadata: Option<serde_json::Value>,
    pub created_at: String,
}

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct AuditPage {
    pub data: Vec<AuditEntry>,
    pub total: i64,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, IntoParams)]
#[serde(rename_all = "camelCase")]
#[into_params(parameter_in = Query)]
pub struct AuditQuery {
    /// Only rows of this action, e.g. `session_created`.
    pub action: Option<String>,
    /// Only rows about this session id.
    pub session_id: Option<String>,
    /// Only rows made with this API key id.
    pub api_key_id: Option<String>,
    /// Page size: 1-200, default 50.
    #[param(minimum = 1, maximum = 200)]
    pub limit: Option<i64>,
    /// Rows to skip, default 0.
    #[param(minimum = 0)]
    pub offset: Option<i64>,
}
