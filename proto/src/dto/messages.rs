//! Message routes: send bodies, message operations, the stored message row and its list query. Every
//! field a rule checks is optional here, so the service (not serde) names the missing field in its 400.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::{IntoParams, ToSchema};

/// `POST /messages/send-text`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct SendTextRequest {
    pub chat_id: Option<String>,
    pub text: Option<String>,
    #[serde(default)]
    pub mentions: Vec<String>,
    pub link_preview: Option<bool>,
    #[schema(value_type = Option<Object>)]
    pub custom_link_preview: Option<Value>,
    pub quoted_message_id: Option<String>,
}

/// The media body of `send-image|video|audio|document|sticker`: exactly one of `url` or `base64`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct SendMediaRequest {
    pub chat_id: Option<String>,
    pub url: Option<String>,
    /// Raw base64 (no data-URL prefix); `mimetype` is required with it.
    pub base64: Option<String>,
    pub mimetype: Option<String>,
    pub filename: Option<String>,
    pub caption: Option<String>,
    /// Audio only: a push-to-talk voice note (stored as type `voice`).
    pub ptt: Option<bool>,
    /// Audio and video: convert with the server's ffmpeg first (audio to an OGG/Opus voice note, video to
    /// a phone-playable MP4). A `ptt` audio that is not Opus is converted without asking.
    pub convert: Option<bool>,
    #[serde(default)]
    pub mentions: Vec<String>,
    pub quoted_message_id: Option<String>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct SendLocationRequest {
    pub chat_id: Option<String>,
    pub latitude: Option<f64>,
    pub longitude: Option<f64>,
    pub description: Option<String>,
    pub quoted_message_id: Option<String>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct SendContactRequest {
    pub chat_id: Option<String>,
    pub contact_name: Option<String>,
    pub contact_number: Option<String>,
    pub quoted_message_id: Option<String>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct SendPollRequest {
    pub chat_id: Option<String>,
    pub name: Option<String>,
    pub options: Option<Vec<String>>,
    pub allow_multiple_answers: Option<bool>,
    pub quoted_message_id: Option<String>,
}

/// `POST /messages/send-template`: `templateId` or `templateName`, `{{var}}` values from `vars`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct SendTemplateRequest {
    pub chat_id: Option<String>,
    pub template_id: Option<String>,
    pub template_name: Option<String>,
    #[serde(default)]
    #[schema(value_type = Object)]
    pub vars: serde_json::Map<String, Value>,
    pub link_preview: Option<bool>,
    #[serde(default)]
    pub mentions: Vec<String>,
    pub quoted_message_id: Option<String>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct SendProductRequest {
    pub chat_id: Option<String>,
    pub product_id: Option<String>,
    pub body: Option<String>,
    pub quoted_message_id: Option<String>,
}

/// The spec's product send response.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct ProductSendResponse {
    pub id: String,
    /// Unix seconds.
    pub timestamp: i64,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ReplyRequest {
    pub chat_id: Option<String>,
    pub quoted_message_id: Option<String>,
    pub text: Option<String>,
    #[serde(default)]
    pub mentions: Vec<String>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ForwardRequest {
    pub from_chat_id: Option<String>,
    pub to_chat_id: Option<String>,
    pub message_id: Option<String>,
}

/// A body naming one message in a chat (unpin), and the base of the other operations.
#[derive(Debug, Clone, Default, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct MessageRefRequest {
    pub chat_id: Option<String>,
    pub message_id: Option<String>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ReactRequest {
    pub chat_id: Option<String>,
    pub message_id: Option<String>,
    /// An empty string removes the reaction.
    pub emoji: Option<String>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct EditRequest {
    pub chat_id: Option<String>,
    pub message_id: Option<String>,
    pub body: Option<String>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct DeleteMessageRequest {
    pub chat_id: Option<String>,
    pub message_id: Option<String>,
    /// Default true.
    pub for_everyone: Option<bool>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct PinRequest {
    pub chat_id: Option<String>,
    pub message_id: Option<String>,
    /// 86400, 604800 or 2592000 (default 86400).
    pub duration_seconds: Option<u32>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct VotePollRequest {
    pub chat_id: Option<String>,
    pub poll_message_id: Option<String>,
    pub options: Option<Vec<String>>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct StarRequest {
    pub chat_id: Option<String>,
    pub message_id: Option<String>,
    pub star: Option<bool>,
}

/// `POST /messages/click-button` (wire-notes §12).
#[derive(Debug, Clone, Default, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClickButtonRequest {
    pub chat_id: Option<String>,
    pub message_id: Option<String>,
    pub button_id: Option<String>,
    pub text: Option<String>,
}

/// `POST /chats/read`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ReadChatRequest {
    pub chat_id: Option<String>,
    /// Up to 100.
    pub message_ids: Option<Vec<String>>,
}

/// A stored message (wire-notes §12).
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Message {
    pub id: String,
    pub session_id: String,
    pub wa_message_id: String,
    pub chat_id: String,
    pub from: String,
    pub to: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub chat_name: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub author: Option<String>,
    pub body: String,
    #[serde(rename = "type")]
    pub kind: String,
    /// `incoming` or `outgoing`.
    pub direction: String,
    /// `pending`, `sent`, `delivered`, `read` or `failed`.
    pub status: String,
    /// Unix seconds.
    pub timestamp: i64,
    pub has_media: bool,
    /// `{mimetype, filename?, sizeBytes, data?}` or the omitted marker `{omitted: true, sizeBytes}`.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Object>)]
    pub media: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mentioned_ids: Option<Vec<String>>,
    /// The message this one replies to; absent when it quotes none.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub quoted_message: Option<QuotedMessage>,
    pub is_group: bool,
    pub created_at: String,
}

/// The message a stored message quotes: the `quotedMessage {id, body}` of `message.received|sent`
/// (wire-notes §5), read from the store.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct QuotedMessage {
    /// The quoted message's network id (its `waMessageId`).
    pub id: String,
    /// The quoted message's current text. Absent when this session does not store it, and when it was
    /// deleted for everyone (its text is gone).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub body: Option<String>,
}

/// `GET /messages` query (parsed by hand: blank values read as absent).
#[derive(Debug, Clone, Default, Deserialize, IntoParams)]
#[serde(rename_all = "camelCase")]
#[into_params(parameter_in = Query)]
pub struct ListMessagesQuery {
    /// Page size: 1-1000, default 50.
    #[param(value_type = Option<u32>, minimum = 1, maximum = 1000)]
    pub limit: Option<String>,
    /// Messages to skip, default 0.
    #[param(value_type = Option<u32>, minimum = 0)]
    pub offset: Option<String>,
    /// Id (or waMessageId) of the previous page's last message; replaces offset.
    pub after: Option<String>,
    /// false drops inline base64 and keeps `{omitted: true, sizeBytes}`.
    #[param(value_type = Option<bool>)]
    pub inline_media: Option<String>,
    /// Only this chat (JID).
    pub chat_id: Option<String>,
    /// Only messages from this JID.
    pub from: Option<String>,
    /// `incoming` or `outgoing`.
    pub direction: Option<String>,
    /// Message type, e.g. `text`, `image`.
    #[serde(rename = "type")]
    #[param(rename = "type")]
    pub kind: Option<String>,
}

/// One emoji on a message and who reacted with it.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ReactionGroup {
    pub emoji: String,
    pub senders: Vec<ReactionSender>,
}

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ReactionSender {
    pub sender_id: String,
    pub emoji: String,
    /// Unix seconds.
    pub timestamp: i64,
}
