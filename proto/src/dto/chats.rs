//! Chat routes: the chat summary and the bodies of the chat write actions.

use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use super::keys::present;

/// One chat of the account's chat list.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ChatSummary {
    pub id: String,
    pub name: String,
    pub is_group: bool,
    pub unread_count: u32,
    /// Unix seconds of the last message (0 when none).
    pub timestamp: i64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_message: Option<String>,
    pub archived: bool,
    pub pinned: bool,
    pub muted: bool,
    /// Epoch milliseconds; 0 = muted indefinitely. Absent when the chat is not muted, so an unmuted chat
    /// never reads as muted indefinitely.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mute_expiration: Option<i64>,
    /// individual, group, channel, status, broadcast.
    pub kind: String,
}

/// `limit` 1-1000 (default 1000) and `offset` of the chat and group lists.
#[derive(Debug, Clone, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct PageQuery {
    /// Page size: 1-1000, default 1000.
    #[param(minimum = 1, maximum = 1000)]
    pub limit: Option<u32>,
    /// Items to skip, default 0.
    #[param(minimum = 0)]
    pub offset: Option<u32>,
}

#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ChatIdRequest {
    pub chat_id: String,
}

#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ArchiveChatRequest {
    pub chat_id: String,
    pub archive: bool,
}

#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct PinChatRequest {
    pub chat_id: String,
    pub pin: bool,
}

/// `muteUntil` is required: epoch milliseconds (0 = indefinitely), or `null` to unmute.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct MuteChatRequest {
    pub chat_id: String,
    #[serde(default, deserialize_with = "present")]
    #[schema(value_type = Option<i64>)]
    pub mute_until: Option<Option<i64>>,
}

/// `state`: typing, recording or paused.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ChatTypingRequest {
    pub chat_id: String,
    pub state: String,
}
