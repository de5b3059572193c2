//! Bulk batches: the send-bulk body, its 202 answer, and the batch status and cancel answers.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::ToSchema;

/// `POST /messages/send-bulk`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct SendBulkRequest {
    /// 1-100 items.
    pub messages: Option<Vec<BulkItem>>,
    pub options: Option<BulkOptions>,
    pub batch_id: Option<String>,
}

/// `{chatId, type: text|image|video|audio|document, content}`; `content` is keyed by type: `{text}` or
/// `{image|video|audio|document: {url|base64, mimetype?, filename?, ptt?}, caption?}`, either with
/// `mentions?` (WIDs tagged in the text or caption).
#[derive(Debug, Clone, Default, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct BulkItem {
    pub chat_id: Option<String>,
    #[serde(rename = "type")]
    pub kind: Option<String>,
    #[schema(value_type = Option<Object>)]
    pub content: Option<Value>,
    /// `{{name}}` placeholders of the text or caption filled from these, as send-template's `vars`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Object>)]
    pub variables: Option<Value>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct BulkOptions {
    /// Milliseconds, 1000-3600000 (at most one hour); default 3000.
    pub delay_between_messages: Option<u64>,
    pub randomize_delay: Option<bool>,
    /// The first failed item ends the batch: the rest are cancelled and the batch reads `failed`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stop_on_error: Option<bool>,
}

/// The 202 answer to send-bulk.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct BulkAccepted {
    pub batch_id: String,
    pub status: String,
    pub total_messages: usize,
    pub estimated_completion_time: String,
    pub status_url: String,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct BatchProgress {
    pub total: usize,
    pub sent: usize,
    pub failed: usize,
    pub pending: usize,
    pub cancelled: usize,
}

/// One item's outcome: `pending`, `sent`, `failed` or `cancelled`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct BatchItemResult {
    pub chat_id: String,
    pub status: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sent_at: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<BatchItemError>,
}

/// `code` is SEND_BLOCKED, SEND_FAILED or SEND_PACING_LIMITED.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct BatchItemError {
    pub code: String,
    pub message: String,
}

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct BatchStatus {
    pub batch_id: String,
    /// `processing`, `completed` or `cancelled`.
    pub status: String,
    pub progress: BatchProgress,
    pub results: Vec<BatchItemResult>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub started_at: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub completed_at: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct BatchCancelled {
    pub batch_id: String,
    pub status: String,
    pub progress: BatchProgress,
}
