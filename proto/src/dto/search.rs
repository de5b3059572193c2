//! `GET /api/search`: the query parameters and the result page.

use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

/// `q` is required; `limit` 1-100 (default 20) and `offset` are integers (fractions are refused);
/// `dateFrom`/`dateTo` are ISO 8601 or Unix seconds.
#[derive(Debug, Clone, Deserialize, IntoParams)]
#[serde(rename_all = "camelCase")]
#[into_params(rename_all = "camelCase")]
pub struct SearchQuery {
    pub q: String,
    pub session_id: Option<String>,
    pub chat_id: Option<String>,
    pub direction: Option<String>,
    #[serde(rename = "type")]
    #[param(rename = "type")]
    pub kind: Option<String>,
    pub from: Option<String>,
    pub date_from: Option<String>,
    pub date_to: Option<String>,
    pub limit: Option<u32>,
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

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct SearchResults {
    pub hits: Vec<SearchHit>,
    pub total: i64,
    pub took_ms: u64,
    pub provider: String,
}
