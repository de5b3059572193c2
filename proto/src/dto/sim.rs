//! Bodies of the sim engine's control API (wire-notes §10, §11): the phone and the rest of the network.

use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

#[derive(Debug, Clone, Default, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct SimScanRequest {
    pub phone: Option<String>,
    pub push_name: Option<String>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct SimMedia {
    pub mimetype: Option<String>,
    pub filename: Option<String>,
    /// Raw base64 (also read as `base64`, the field name of the API's media inputs).
    #[serde(alias = "base64")]
    pub data: Option<String>,
    /// Or a URL the node downloads, as it does a send's media URL.
    pub url: Option<String>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct SimInboundRequest {
    pub from: Option<String>,
    pub chat_id: Option<String>,
    #[serde(rename = "type")]
    pub kind: Option<String>,
    pub body: Option<String>,
    pub media: Option<SimMedia>,
    pub quoted_message_id: Option<String>,
    #[serde(default)]
    pub mentioned_ids: Vec<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct SimMessageId {
    pub message_id: String,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct SimAckRequest {
    pub message_id: Option<String>,
    pub status: Option<String>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct SimReactRequest {
    pub message_id: Option<String>,
    pub emoji: Option<String>,
    pub from: Option<String>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct SimMessageRequest {
    pub message_id: Option<String>,
    pub body: Option<String>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct SimRestrictRequest {
    pub kind: Option<String>,
    pub active: Option<bool>,
    pub expires_at: Option<SimInstant>,
}

/// An instant in a sim body: epoch seconds or milliseconds, or an ISO 8601 string.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(untagged)]
pub enum SimInstant {
    Epoch(i64),
    Iso(String),
}

/// Epoch numbers from this size up are milliseconds (from March 1973 on); below it, seconds (up to the
/// year 5138), so a body may give either unit, as the search dates may.
const EPOCH_MILLIS_FROM: i64 = 100_000_000_000;

impl SimInstant {
    /// Epoch milliseconds, or `None` for a string that is not RFC 3339.
    pub fn to_millis(&self) -> Option<i64> {
        match self {
            SimInstant::Epoch(n) if n.abs() < EPOCH_MILLIS_FROM => n.checked_mul(1000),
            SimInstant::Epoch(ms) => Some(*ms),
            SimInstant::Iso(text) => chrono::DateTime::parse_from_rfc3339(text)
                .ok()
                .map(|t| t.timestamp_millis()),
        }
    }
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct SimCallRequest {
    pub from: Option<String>,
    /// Required (wire-notes §10); optional here only so that its absence is a 400 with a clear message.
    pub is_video: Option<bool>,
    /// missed | accepted | rejected
    pub outcome: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct SimCallResponse {
    pub call_id: String,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct SimGroupEventRequest {
    pub group_id: Option<String>,
    /// join | leave | update | join_request
    pub action: Option<String>,
    #[serde(default)]
    pub participant_ids: Vec<String>,
    pub changes: Option<serde_json::Value>,
}

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct SimOutboxEntry {
    pub message_id: String,
    pub to: String,
    #[serde(rename = "type")]
    pub kind: String,
    pub body: String,
    pub timestamp: i64,
}

/// Test knobs: fail the next N engine starts of a session; delay engine query answers.
#[derive(Debug, Clone, Default, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct SimFaultsRequest {
    pub fail_next_starts: Option<u32>,
    /// Milliseconds; 0 clears.
    pub query_delay_ms: Option<u64>,
}

/// `GET /api/sim/devices`: which devices are connected (optionally of one phone).
#[derive(Debug, Clone, Default, Serialize, Deserialize, IntoParams)]
#[serde(rename_all = "camelCase")]
#[into_params(parameter_in = Query)]
pub struct SimDevicesQuery {
    /// A phone number or JID; all phones when absent.
    pub phone: Option<String>,
}

/// A device connected on the sim network. In a cluster the view is shared: two entries for one session
/// (on two live nodes) would mean two owners.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct SimConnectedDevice {
    pub phone: String,
    pub session_id: String,
    pub node_id: String,
    /// Epoch milliseconds.
    pub connected_at: i64,
    /// Whether that node announced itself within the lease TTL (always true outside a cluster).
    pub is_node_live: bool,
}

#[cfg(test)]
mod tests {
    use super::SimInstant;

    #[test]
    fn an_epoch_number_is_read_as_seconds_or_milliseconds_by_its_size() {
        let seconds = SimInstant::Epoch(1_893_456_000);
        let millis = SimInstant::Epoch(1_893_456_000_000);
        let iso = SimInstant::Iso("2030-01-01T00:00:00Z".into());
        for instant in [seconds, millis, iso] {
            assert_eq!(instant.to_millis(), Some(1_893_456_000_000), "{instant:?}");
        }
        assert_eq!(SimInstant::Iso("tomorrow".into()).to_millis(), None);
    }
}
