//! WebSocket frames (wire-notes §6). Client frames are read loosely (a missing field is a typed error frame,
//! not a parse failure); server frames serialise with `type` first.

use serde::{Deserialize, Serialize};

/// Any client frame: `auth`, `subscribe`, `unsubscribe` or `ping`.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ClientFrame {
    #[serde(rename = "type")]
    pub kind: String,
    pub api_key: Option<String>,
    pub session_id: Option<String>,
    pub events: Option<Vec<String>>,
    pub request_id: Option<serde_json::Value>,
}

/// Error codes of `{type: "error"}` frames.
pub mod codes {
    pub const UNAUTHORIZED: &str = "UNAUTHORIZED";
    pub const INVALID_MESSAGE: &str = "INVALID_MESSAGE";
    pub const INVALID_SESSION: &str = "INVALID_SESSION";
    pub const INVALID_EVENTS: &str = "INVALID_EVENTS";
    pub const FORBIDDEN_SESSION: &str = "FORBIDDEN_SESSION";
    pub const RATE_LIMITED: &str = "RATE_LIMITED";
}
