//! Shapes shared by many routes: SuccessResult, MessageResponse, health.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct SuccessResult {
    pub success: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

impl SuccessResult {
    pub fn ok() -> Self {
        Self {
            success: true,
            message: None,
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct MessageResponse {
    pub message_id: String,
    /// Unix seconds.
    pub timestamp: i64,
}

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct Health {
    pub status: String,
    pub timestamp: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
}

/// `GET /api/health/ready`: each database's state.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Readiness {
    pub status: String,
    pub details: ReadinessDetails,
}

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ReadinessDetails {
    pub main_database: ComponentState,
    pub data_database: ComponentState,
}

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct ComponentState {
    /// `up` or `down`.
    pub status: String,
}

/// Epoch milliseconds as the ISO 8601 string the API shows.
pub fn iso_ms(ms: i64) -> String {
    chrono::DateTime::from_timestamp_millis(ms)
        .unwrap_or_default()
        .to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}
