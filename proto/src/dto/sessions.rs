//! Session resource bodies: the Session record, its config (three-state update), proxy view, QR and pairing.

use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use super::keys::present;
use crate::SessionStatus;

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Session {
    pub id: String,
    pub name: String,
    pub status: SessionStatus,
    pub phone: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub push_name: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_error: Option<String>,
    pub engine_loaded: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub connected_at: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_active: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub restriction: Option<Restriction>,
    pub created_at: String,
    pub updated_at: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Restriction {
    pub kind: String,
    pub code: Option<String>,
    pub expires_at: Option<String>,
}

/// Effective session configuration; `null` means unlimited or default. A stored config lacking a field
/// (an imported row, one written before the field existed) reads it as its default.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", default)]
pub struct SessionConfig {
    pub auto_reject_calls: bool,
    pub max_reconnect_attempts: Option<u32>,
    pub reconnect_base_delay: u64,
}

impl Default for SessionConfig {
    fn default() -> Self {
        SessionConfig {
            auto_reject_calls: false,
            max_reconnect_attempts: None,
            reconnect_base_delay: 5000,
        }
    }
}

/// Three states per field: omitted = unchanged, value = set, `null` = back to the default.
#[derive(Debug, Clone, Default, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct UpdateSessionConfigRequest {
    #[serde(default, deserialize_with = "present")]
    #[schema(value_type = Option<bool>)]
    pub auto_reject_calls: Option<Option<serde_json::Value>>,
    #[serde(default, deserialize_with = "present")]
    #[schema(value_type = Option<u32>)]
    pub max_reconnect_attempts: Option<Option<serde_json::Value>>,
    #[serde(default, deserialize_with = "present")]
    #[schema(value_type = Option<u64>)]
    pub reconnect_base_delay: Option<Option<serde_json::Value>>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct CreateSessionRequest {
    #[schema(value_type = String)]
    pub name: Option<serde_json::Value>,
    pub config: Option<UpdateSessionConfigRequest>,
    pub proxy_url: Option<String>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct ListSessionsQuery {
    /// Page size: 1-1000, default 1000.
    #[param(value_type = Option<u32>, minimum = 1, maximum = 1000)]
    pub limit: Option<String>,
    /// Sessions to skip, default 0.
    #[param(value_type = Option<u32>, minimum = 0)]
    pub offset: Option<String>,
    /// Only the session of this name (exact, case-sensitive).
    pub name: Option<String>,
}

/// The proxy as reads show it: never the URL or the credentials.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct SessionProxy {
    pub enabled: bool,
    pub proxy_type: Option<String>,
    pub proxy_host: Option<String>,
    pub has_credentials: bool,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct UpdateProxyRequest {
    #[serde(default, deserialize_with = "present")]
    #[schema(value_type = Option<String>)]
    pub proxy_url: Option<Option<String>>,
}

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct QrResponse {
    /// PNG data URL; rotates.
    pub qr_code: String,
    pub status: SessionStatus,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct PairingCodeRequest {
    pub phone_number: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct PairingCodeResponse {
    pub pairing_code: String,
    pub status: SessionStatus,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, ToSchema)]
pub struct SetPresenceRequest {
    pub available: Option<bool>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct PresenceSubscribeRequest {
    pub chat_id: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct PresenceParticipant {
    pub id: String,
    pub state: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_seen: Option<i64>,
}

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Presence {
    pub chat_id: String,
    pub participants: Vec<PresenceParticipant>,
    pub observed_at: String,
}

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct SessionStats {
    pub total: i64,
    pub active: i64,
    pub ready: i64,
    pub disconnected: i64,
    pub by_status: std::collections::BTreeMap<String, i64>,
    pub memory_usage: MemoryUsage,
}

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct MemoryUsage {
    /// Whole megabytes, as OpenWA's clients type them.
    pub heap_used: u64,
    pub heap_total: u64,
    pub rss: u64,
}

#[cfg(test)]
mod tests {
    use super::SessionConfig;

    #[test]
    fn a_stored_config_lacking_fields_reads_them_as_defaults() {
        let partial: SessionConfig =
            serde_json::from_str(r#"{"autoRejectCalls":true}"#).expect("partial config");
        assert_eq!(
            partial,
            SessionConfig {
                auto_reject_calls: true,
                ..SessionConfig::default()
            }
        );
        let empty: SessionConfig = serde_json::from_str("{}").expect("empty config");
        assert_eq!(empty, SessionConfig::default());
    }
}
