//! The engine entities the HTTP layer answers as they are on the wire (`wagate-proto` DTOs). The
//! conversions live here because Rust lets a `From` between two foreign types be written only in the
//! crate of one of them; the wire shapes themselves stay `wagate-proto`'s.

use wagate_proto::dto::channels::Channel as WireChannel;
use wagate_proto::dto::chats::ChatSummary as WireChatSummary;
use wagate_proto::dto::contacts::ContactRecord;

use crate::entities::{Channel, ChatSummary, Contact};

impl From<Channel> for WireChannel {
    fn from(c: Channel) -> WireChannel {
        WireChannel {
            id: c.id.to_string(),
            name: c.name,
            description: c.description,
            invite_code: c.invite_code,
            subscriber_count: c.subscriber_count,
            picture: c.picture,
            verified: c.verified,
            created_at: c.created_at,
        }
    }
}

impl From<ChatSummary> for WireChatSummary {
    fn from(c: ChatSummary) -> WireChatSummary {
        WireChatSummary {
            is_group: c.id.is_group(),
            kind: c.id.kind().as_str().to_string(),
            id: c.id.to_string(),
            name: c.name,
            unread_count: c.unread_count,
            timestamp: c.timestamp,
            last_message: c.last_message,
            archived: c.archived,
            pinned: c.pinned,
            muted: c.muted,
            mute_expiration: if c.muted { c.mute_expiration } else { 0 },
        }
    }
}

impl From<Contact> for ContactRecord {
    fn from(c: Contact) -> ContactRecord {
        ContactRecord {
            number: (c.id.server() == "c.us").then(|| c.id.user().to_string()),
            id: c.id.to_string(),
            name: c.name,
            push_name: c.push_name,
            is_my_contact: c.is_my_contact,
            is_blocked: c.is_blocked,
            profile_pic_url: c.profile_pic_url,
        }
    }
}
