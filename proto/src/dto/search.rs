//! `GET /api/search`: the query parameters and the result page.

use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

/// `q` is required; `limit` 1-100 (default 20) and `offset` are integers (fractions are refused);
/// `dateFrom`/`dateTo` are ISO 8601 or Unix seconds.
#[derive(Debug, Clone, Deserialize, IntoParams)]
#[serde(rename_all = "camelCase")]
#[into_params(rename_all = "camelCase", parameter_in = Query)]
pub struct SearchQuery {
    /// The words to find (required, not blank).
    #[param(min_length = 1)]
    pub q: String,
    /// Only this session's messages.
    pub session_id: Option<String>,
    /// Only this chat (JID).
    pub chat_id: Option<String>,
    /// `incoming` or `outgoing`.
    pub direction: Option<String>,
    /// Message type, e.g. `text`, `image`.
    #[serde(rename = "type")]
    #[param(rename = "type")]
    pub kind: Option<String>,
    /// Only messages from this JID.
    pub from: Option<String>,
    /// Earliest timestamp: ISO 8601 or Unix seconds.
    pub date_from: Option<String>,
    /// Latest timestamp: ISO 8601 or Unix seconds.
    pub date_to: Option<String>,
    /// Page size: 1-100, default 20.
    #[param(minimum = 1, maximum = 100)]
    pub limit: Option<u32>,
    /// Hits to skip: 0-1000000, default 0.
    #[param(minimum = 0, maximum = 1000000)]
    pub offset: Option<u32>,
}

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct SearchHit {
    pub message_id: String,
    pub wa_message_id: String,
    pub session_id: String,
    pub chat_id: String,
    pub body: String,
    pub snippet: String,
    /// Unix seconds.
    pub timestamp: i64,
    #[serde(rename = "type")]
    pub kind: String,
    pub direction: String,
    pub from: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub score: Option<f64>,
}

/// A chat whose id or name contains `q`: the chat summary's `id, name, isGroup, timestamp`, with its session.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct SearchChatHit {
    pub session_id: String,
    /// The chat's JID.
    pub id: String,
    /// The name the gateway knows for the chat, else the number (the chat list's rule).
    pub name: String,
    pub is_group: bool,
    /// Unix seconds of the chat's newest known activity (0: none).
    pub timestamp: i64,
}

/// `hits`/`total`: messages whose body matches `q`. `chats`/`chatTotal`: chats whose id or name contains
/// `q` (paged by the same `limit` and `offset`; none when `direction`, `type`, `from`, `dateFrom` or
/// `dateTo` narrows the search to messages).
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct SearchResults {
    pub hits: Vec<SearchHit>,
    pub total: i64,
    pub chats: Vec<SearchChatHit>,
    pub chat_total: i64,
    pub took_ms: u64,
    pub provider: String,
}
