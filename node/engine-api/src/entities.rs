//! Domain records engines answer queries with: chats, contacts, groups, channels, labels, status posts,
//! calls, catalog and presence. Engines build them; the HTTP layer maps them to `proto` DTOs. They carry no
//! wire naming and no storage types.

use super::types::{MediaSource, MessageType, StoredFile};
use serde::{Deserialize, Serialize};
use wagate_proto::Jid;

/// One chat as the account's chat list shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChatSummary {
    pub id: Jid,
    pub name: String,
    pub archived: bool,
    pub pinned: bool,
    pub muted: bool,
    /// Epoch milliseconds; 0 = muted indefinitely (meaningless when `muted` is false).
    pub mute_expiration: i64,
    pub unread_count: u32,
    /// Unix seconds of the last message, 0 when none.
    pub timestamp: i64,
    pub last_message: Option<String>,
}

/// Typing indicator state for `chats/typing`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChatState {
    Typing,
    Recording,
    Paused,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Contact {
    pub id: Jid,
    pub name: Option<String>,
    pub push_name: Option<String>,
    pub is_blocked: bool,
    pub is_my_contact: bool,
    pub profile_pic_url: Option<String>,
}

/// Answer of a number check; `exists: false` is only given when the network answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContactCheck {
    pub number: String,
    pub exists: bool,
    pub whatsapp_id: Jid,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupSummary {
    pub id: Jid,
    pub name: String,
    pub participants_count: usize,
    pub is_admin: bool,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupParticipant {
    pub id: Jid,
    pub is_admin: bool,
    pub is_super_admin: bool,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupInfo {
    pub id: Jid,
    pub subject: String,
    pub description: String,
    pub owner: Jid,
    /// Unix seconds.
    pub created_at: i64,
    pub participants: Vec<GroupParticipant>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewGroup {
    pub subject: String,
    pub participants: Vec<Jid>,
}

/// A roster change requested by an admin.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ParticipantAction {
    Add,
    Remove,
    Promote,
    Demote,
}

/// The outcome for one participant of a batch; a partly refused batch is still a success overall.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParticipantResult {
    pub id: Jid,
    pub success: bool,
    /// Network status code for this participant (200, 403, 404, 409, ...).
    pub status: u16,
    pub message: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MembershipRequest {
    pub participant_id: Jid,
    /// Unix seconds.
    pub requested_at: i64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct GroupSettings {
    /// Only admins may send.
    pub announce: bool,
    /// Only admins may edit group info.
    pub locked: bool,
    pub ephemeral_seconds: u32,
    /// Only admins may add members.
    pub admin_add_only: bool,
}

/// A partial settings update: `None` leaves a field unchanged.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct GroupSettingsUpdate {
    pub announce: Option<bool>,
    pub locked: Option<bool>,
    pub ephemeral_seconds: Option<u32>,
    pub admin_add_only: Option<bool>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Channel {
    pub id: Jid,
    pub name: String,
    pub description: String,
    pub invite_code: String,
    pub subscriber_count: usize,
    pub picture: Option<String>,
    pub verified: bool,
    /// Unix seconds.
    pub created_at: i64,
    pub is_owner: bool,
    pub is_muted: bool,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Label {
    pub id: String,
    pub name: String,
    /// Palette index 0-19.
    pub color: u8,
}

/// A label create (id `None`) or edit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LabelUpsert {
    pub id: Option<String>,
    pub name: Option<String>,
    pub color: Option<u8>,
}

/// Content of a status post.
#[derive(Debug, Clone, PartialEq)]
pub enum StatusContent {
    Text {
        text: String,
        background_color: Option<String>,
        font: Option<u8>,
    },
    Media {
        kind: MessageType,
        source: MediaSource,
        mimetype: String,
        caption: Option<String>,
    },
}

#[derive(Debug, Clone, PartialEq)]
pub struct StatusPost {
    pub content: StatusContent,
    /// Who may see it; required non-empty on the socket engine.
    pub recipients: Vec<Jid>,
}

/// A status post, own or a contact's.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StatusUpdate {
    pub status_id: String,
    pub contact: Jid,
    pub kind: MessageType,
    pub caption: Option<String>,
    pub has_media: bool,
    /// Unix seconds.
    pub posted_at: i64,
    /// Unix seconds.
    pub expires_at: i64,
    /// The posted media, when the engine delivered its bytes with the post (the sim does); kept so
    /// `GET .../status/{id}/media` can serve a received status too.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub media: Option<StatusMedia>,
}

/// A status post's media: its type and bytes, or the stored object holding them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StatusMedia {
    pub mimetype: String,
    /// The content; empty when `stored` names it (as `ReceivedMedia::data`).
    pub data: Vec<u8>,
    /// The object in the media store holding the content (another session's for the sim network, which
    /// passes media on by key); the recorder keeps the session's own copy of it instead of storing `data`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stored: Option<Box<StoredFile>>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CallKind {
    Audio,
    Video,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Product {
    pub id: String,
    pub name: String,
    pub description: String,
    /// Minor units (cents).
    pub price: i64,
    pub currency: String,
    pub image_url: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Catalog {
    pub owner: Jid,
    pub products: Vec<Product>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProductPage {
    pub products: Vec<Product>,
    pub page: u32,
    pub limit: u32,
    pub total: usize,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum PresenceState {
    Available,
    Unavailable,
    Composing,
    Recording,
    Paused,
}

impl PresenceState {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Available => "available",
            Self::Unavailable => "unavailable",
            Self::Composing => "composing",
            Self::Recording => "recording",
            Self::Paused => "paused",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PresenceEntry {
    pub id: Jid,
    pub state: PresenceState,
    /// Unix seconds.
    pub last_seen: Option<i64>,
}
