//! Channel (newsletter) routes: the channel record, channel messages and the write bodies.

use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Channel {
    pub id: String,
    pub name: String,
    pub description: String,
    pub invite_code: String,
    pub subscriber_count: usize,
    pub picture: Option<String>,
    pub verified: bool,
    /// Unix seconds.
    pub created_at: i64,
}

/// A message read live from a channel (not a stored message record).
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ChannelMessage {
    pub id: String,
    pub body: String,
    /// Unix seconds.
    pub timestamp: i64,
    pub has_media: bool,
}

/// `limit`: 1-100, default 50.
#[derive(Debug, Clone, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct ChannelMessagesQuery {
    /// Messages to read: 1-100, default 50.
    #[param(minimum = 1, maximum = 100)]
    pub limit: Option<u32>,
}

#[derive(Debug, Clone, Deserialize, ToSchema)]
pub struct CreateChannelRequest {
    pub name: String,
    pub description: Option<String>,
}

#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct SubscribeChannelRequest {
    pub invite_code: String,
}

#[derive(Debug, Clone, Deserialize, ToSchema)]
pub struct MuteChannelRequest {
    pub mute: bool,
}

#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct DemoteChannelAdminRequest {
    pub user_id: String,
}

/// Irreversible.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct TransferChannelOwnerRequest {
    pub new_owner_id: String,
}
