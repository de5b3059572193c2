//! Status (story) routes: the four post bodies, the post acknowledgement and status records.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// Media given inline (`base64`) or by address (`url`).
#[derive(Debug, Clone, Default, Serialize, Deserialize, ToSchema)]
pub struct MediaInput {
    pub url: Option<String>,
    pub base64: Option<String>,
    pub mimetype: Option<String>,
}

#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct SendTextStatusRequest {
    pub text: String,
    /// Up to 256 JIDs (`@c.us` or `@lid`); required non-empty on the socket and sim engines.
    pub recipients: Option<Vec<String>>,
    pub background_color: Option<String>,
    /// 0, 1, 2, 6, 7, 8, 9 or 10.
    pub font: Option<u8>,
}

/// Media nested under `image`, `video` or `audio` (by route), or flat (`url|base64`, `mimetype`).
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct SendMediaStatusRequest {
    pub image: Option<MediaInput>,
    pub video: Option<MediaInput>,
    pub audio: Option<MediaInput>,
    pub url: Option<String>,
    pub base64: Option<String>,
    pub mimetype: Option<String>,
    pub caption: Option<String>,
    pub recipients: Option<Vec<String>>,
    pub background_color: Option<String>,
}

/// A status post's acknowledgement (times are ISO 8601).
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct StatusResult {
    pub status_id: String,
    pub timestamp: String,
    pub expires_at: String,
}

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct StatusContact {
    pub id: String,
}

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct StatusRecord {
    pub id: String,
    pub contact: StatusContact,
    #[serde(rename = "type")]
    pub kind: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub caption: Option<String>,
    pub has_media: bool,
    pub timestamp: String,
    pub expires_at: String,
    /// A text status's background colour, when it was posted with one (own posts only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub background_color: Option<String>,
    /// A text status's font, when it was posted with one (own posts only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub font: Option<u8>,
}

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct StatusList {
    pub statuses: Vec<StatusRecord>,
}
