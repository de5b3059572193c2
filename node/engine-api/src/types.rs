//! Message domain types shared by every engine: what the service asks an engine to send, and what an
//! engine reports as received. Built by the HTTP/bulk layers and by engines; no axum or sqlx types here,
//! and no wire (JSON) naming: the event pipeline maps these to the webhook payloads.

use crate::error::EngineError;
use crate::media::EngineMedia;
use serde::{Deserialize, Serialize};
use wagate_proto::Jid;

/// A message the service asks an engine to send. Created by the send handlers and the bulk runner.
#[derive(Debug, Clone, PartialEq)]
pub struct OutgoingMessage {
    pub to: Jid,
    pub content: MessageContent,
    /// Id of the message this one replies to; the engine answers `NotFound` when it cannot resolve it.
    pub quoted_id: Option<String>,
    /// Mentioned accounts; the text must also carry the literal `@<number>` token (the spec's rule).
    pub mentions: Vec<Jid>,
}

/// A link preview card given by the caller (`customLinkPreview`); every part optional.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LinkPreview {
    pub url: Option<String>,
    pub title: Option<String>,
    pub description: Option<String>,
    /// Raw base64 of a small JPEG thumbnail.
    pub thumbnail: Option<String>,
}

/// The body of an outgoing message, one variant per send route family.
#[derive(Debug, Clone, PartialEq)]
pub enum MessageContent {
    Text {
        body: String,
        link_preview: bool,
        /// `customLinkPreview`: the caller's own preview card instead of one the engine fetches.
        custom_preview: Option<LinkPreview>,
    },
    Media(MediaMessage),
    Location(Location),
    Contact(ContactCard),
    Poll(Poll),
    Product {
        product_id: String,
        body: Option<String>,
    },
}

impl MessageContent {
    /// The message type this content is stored and announced as.
    pub fn message_type(&self) -> MessageType {
        match self {
            Self::Text { .. } => MessageType::Text,
            Self::Media(media) => media.kind.message_type(),
            Self::Location(_) => MessageType::Location,
            Self::Contact(_) => MessageType::Contact,
            Self::Poll(_) => MessageType::Poll,
            Self::Product { .. } => MessageType::Product,
        }
    }

    /// The text a receiver sees as `body` (caption, vCard, poll question, ...).
    pub fn body_text(&self) -> String {
        match self {
            Self::Text { body, .. } => body.clone(),
            Self::Media(media) => media.caption.clone().unwrap_or_default(),
            Self::Location(loc) => loc.description.clone().unwrap_or_default(),
            Self::Contact(card) => card.vcard(),
            Self::Poll(poll) => poll.name.clone(),
            Self::Product { body, .. } => body.clone().unwrap_or_default(),
        }
    }
}

/// A media send: the bytes (or where to read them) plus how to present them.
#[derive(Debug, Clone, PartialEq)]
pub struct MediaMessage {
    pub kind: MediaKind,
    pub source: MediaSource,
    pub mimetype: String,
    pub filename: Option<String>,
    pub caption: Option<String>,
}

/// Which media route the send came from; `Voice` is an audio send with `ptt: true`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MediaKind {
    Image,
    Video,
    Audio,
    Voice,
    Document,
    Sticker,
}

impl MediaKind {
    pub fn message_type(self) -> MessageType {
        match self {
            Self::Image => MessageType::Image,
            Self::Video => MessageType::Video,
            Self::Audio => MessageType::Audio,
            Self::Voice => MessageType::Voice,
            Self::Document => MessageType::Document,
            Self::Sticker => MessageType::Sticker,
        }
    }
}

/// Media content: already in memory (decoded base64, fetched URL), or an object the node's media store
/// holds under `key` (never a local path: the store may be a bucket).
#[derive(Debug, Clone, PartialEq)]
pub enum MediaSource {
    Bytes(Vec<u8>),
    Stored { key: String },
}

impl MediaSource {
    /// Reads the content through `media`, whole; an object that vanished is the caller's bad input (400),
    /// a storage backend that cannot be reached a network failure (503).
    pub async fn load(&self, media: &dyn EngineMedia) -> Result<Vec<u8>, EngineError> {
        match self {
            Self::Bytes(bytes) => Ok(bytes.clone()),
            Self::Stored { key } => media.get(key).await?.ok_or_else(|| not_stored(key)),
        }
    }

    /// The content's size, without reading it (errors as `load`).
    pub async fn size(&self, media: &dyn EngineMedia) -> Result<u64, EngineError> {
        match self {
            Self::Bytes(bytes) => Ok(bytes.len() as u64),
            Self::Stored { key } => media.head(key).await?.ok_or_else(|| not_stored(key)),
        }
    }

    /// The stored object holding the content, read by `head` only (bytes in hand are put first), so an
    /// engine can pass the content on by key (errors as `load`).
    pub async fn stored(&self, media: &dyn EngineMedia) -> Result<StoredFile, EngineError> {
        match self {
            Self::Bytes(bytes) => Ok(media.put(bytes).await?),
            Self::Stored { key } => Ok(StoredFile {
                key: key.clone(),
                size: self.size(media).await?,
            }),
        }
    }
}

fn not_stored(key: &str) -> EngineError {
    EngineError::BadInput(format!(
        "media could not be read: object {key} is not stored"
    ))
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Location {
    pub latitude: f64,
    pub longitude: f64,
    pub description: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContactCard {
    pub name: String,
    pub number: String,
}

impl ContactCard {
    /// The vCard text receivers get as the message body.
    pub fn vcard(&self) -> String {
        format!(
            "BEGIN:VCARD\nVERSION:3.0\nFN:{name}\nTEL;type=CELL;waid={num}:+{num}\nEND:VCARD",
            name = self.name,
            num = self.number.trim_start_matches('+'),
        )
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Poll {
    pub name: String,
    pub options: Vec<String>,
    pub allow_multiple: bool,
}

/// Message type values named in the contract (plus `contact` for vCards).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum MessageType {
    Text,
    Image,
    Video,
    Audio,
    Voice,
    Document,
    Sticker,
    Location,
    Contact,
    Poll,
    Order,
    Product,
    Unknown,
}

impl MessageType {
    pub const ALL: [MessageType; 13] = [
        Self::Text,
        Self::Image,
        Self::Video,
        Self::Audio,
        Self::Voice,
        Self::Document,
        Self::Sticker,
        Self::Location,
        Self::Contact,
        Self::Poll,
        Self::Order,
        Self::Product,
        Self::Unknown,
    ];

    /// The contract's spelling (a bounded metric label too).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Text => "text",
            Self::Image => "image",
            Self::Video => "video",
            Self::Audio => "audio",
            Self::Voice => "voice",
            Self::Document => "document",
            Self::Sticker => "sticker",
            Self::Location => "location",
            Self::Contact => "contact",
            Self::Poll => "poll",
            Self::Order => "order",
            Self::Product => "product",
            Self::Unknown => "unknown",
        }
    }

    pub fn has_media(self) -> bool {
        matches!(
            self,
            Self::Image | Self::Video | Self::Audio | Self::Voice | Self::Document | Self::Sticker
        )
    }
}

/// What a successful send (or edit/forward) answers: the network's message id and its time.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SentMessage {
    pub id: String,
    /// Unix seconds.
    pub timestamp: i64,
}

/// Received media up to this size travels inline in its event (`ReceivedMedia::data`); above it, events
/// carry the spec's omitted marker (the spec's "about 768 KiB"), so engines need not read it back.
pub const INLINE_MEDIA_MAX_BYTES: usize = 768 * 1024;

/// Media attached to a received message, already downloaded by the engine.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReceivedMedia {
    pub mimetype: String,
    pub filename: Option<String>,
    /// The content; with `stored` set, only kept when small enough to inline in events (else empty).
    pub data: Vec<u8>,
    /// Set when the content is in the media store already: streamed there by the session's own engine
    /// (large downloads are never held in memory), or another session's object passed on by key (the sim
    /// network carries a reference, never the bytes). The recorder then keeps this object instead of
    /// storing `data`: as it is when it is the session's own, else as the session's own copy, made by the
    /// store (server-side, no bytes through the node).
    /// Boxed: most media (every sim message) has none, and the message types embedding this stay small.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stored: Option<Box<StoredFile>>,
}

impl ReceivedMedia {
    /// The content's size, whether it is held here or already stored.
    pub fn size(&self) -> u64 {
        self.stored
            .as_ref()
            .map_or(self.data.len() as u64, |file| file.size)
    }
}

/// A media file already in the media store: its content address and size.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StoredFile {
    pub key: String,
    pub size: u64,
}

/// One chunk of the account's history, as the phone sends it after linking (and on demand). Its
/// messages are stored like live ones but raise no `message.*` event: they are not news.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct HistoryBatch {
    /// Each message with the delivery state the store should give it (history says which are unread).
    pub messages: Vec<(InboundMessage, AckStatus)>,
    pub chats: Vec<HistoryChat>,
    /// `(account, push name)` pairs.
    pub push_names: Vec<(Jid, String)>,
}

/// What history sync says about a chat; `None` = not said.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HistoryChat {
    pub id: Jid,
    pub name: Option<String>,
    pub unread_count: Option<u32>,
    /// Unix seconds of the newest message.
    pub last_message_at: Option<i64>,
    pub archived: Option<bool>,
    pub pinned: Option<bool>,
    pub muted: Option<bool>,
    /// Epoch milliseconds; 0 = indefinitely.
    pub mute_expiration: Option<i64>,
}

/// A decrypted poll vote: who voted on which poll, and the option names now selected (empty = the vote
/// was withdrawn).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PollVote {
    pub poll_id: String,
    pub chat_id: Jid,
    pub voter: Jid,
    pub options: Vec<String>,
    /// Unix seconds.
    pub timestamp: i64,
}

/// The message a received one quotes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct QuotedRef {
    pub id: String,
    pub body: String,
}

/// A message that reached the session from the network. Created by engines, consumed by the pipeline.
/// Serializable: the sim network holds it in this form until the session acknowledges it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct InboundMessage {
    pub id: String,
    pub chat_id: Jid,
    pub from: Jid,
    pub to: Jid,
    /// The member who wrote it, in groups.
    pub author: Option<Jid>,
    pub from_me: bool,
    pub kind: MessageType,
    pub body: String,
    /// Unix seconds.
    pub timestamp: i64,
    pub media: Option<ReceivedMedia>,
    pub quoted: Option<QuotedRef>,
    pub mentioned_ids: Vec<Jid>,
    pub location: Option<Location>,
    pub poll: Option<Poll>,
}

/// Delivery state of a sent message, in the order the network reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum AckStatus {
    Pending,
    Sent,
    Delivered,
    Read,
    Failed,
}

impl AckStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pending => "pending",
            Self::Sent => "sent",
            Self::Delivered => "delivered",
            Self::Read => "read",
            Self::Failed => "failed",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn contact_card_body_is_a_vcard_with_the_number() {
        let card = ContactCard {
            name: "Ann".into(),
            number: "+4915112345678".into(),
        };
        let body = MessageContent::Contact(card).body_text();
        assert!(body.starts_with("BEGIN:VCARD") && body.contains("waid=4915112345678"));
    }

    #[test]
    fn voice_is_its_own_message_type_with_media() {
        assert_eq!(MediaKind::Voice.message_type(), MessageType::Voice);
        assert!(MessageType::Voice.has_media() && !MessageType::Poll.has_media());
    }
}
