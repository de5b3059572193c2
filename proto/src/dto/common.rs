//! Shapes shared by many routes: SuccessResult, MessageResponse, health, settings, stats overview.

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

/// A button click: the reply it sent, plus `success` as the other message operations answer it.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClickButtonResponse {
    pub success: bool,
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
    /// Every entry is a component's `{status}` (wire-notes), so clients can walk them alike.
    pub details: ReadinessDetails,
    /// Present (`true`) only while the node drains: it takes no new sessions and is leaving.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub draining: bool,
}

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ReadinessDetails {
    pub main_database: ComponentState,
    pub data_database: ComponentState,
    /// In a cluster only: Redis holds the leases, the registry and the queues.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub redis: Option<ComponentState>,
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

/// `GET /api/settings`: the effective, environment-derived settings (read-only; no secrets).
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Settings {
    pub version: String,
    pub engine_type: String,
    pub node_id: String,
    pub database_type: String,
    pub redis_enabled: bool,
    pub auto_start_sessions: bool,
    pub body_size_limit: u64,
    pub media_download_max_bytes: u64,
    pub webhook_timeout_ms: u64,
    pub webhook_retry_delay_ms: u64,
    pub webhook_max_payload_bytes: u64,
    pub send_pacing_enabled: bool,
    pub metrics_enabled: bool,
}

/// `GET /api/stats/overview`: cross-session aggregates.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct StatsOverview {
    pub sessions: SessionCounts,
    pub messages: MessageCounts,
    pub webhooks: WebhookCounts,
    pub timestamp: String,
}

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct SessionCounts {
    pub total: i64,
    pub ready: i64,
    pub by_status: std::collections::BTreeMap<String, i64>,
}

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct MessageCounts {
    pub total: i64,
    pub incoming: i64,
    pub outgoing: i64,
}

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct WebhookCounts {
    pub total: i64,
    pub active: i64,
}
