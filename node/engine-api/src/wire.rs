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
        // A mute whose end has passed has ended, whatever the engine still remembers.
        let muted = c.muted && (c.mute_expiration == 0 || c.mute_expiration > now_ms());
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
            muted,
            // Only a muted chat carries it: 0 means muted indefinitely.
            mute_expiration: muted.then_some(c.mute_expiration),
        }
    }
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Jid;

    fn chat(muted: bool, mute_expiration: i64) -> WireChatSummary {
        let id = Jid::parse("4915100000001@c.us").unwrap();
        ChatSummary {
            name: "a".into(),
            id,
            archived: false,
            pinned: false,
            muted,
            mute_expiration,
            unread_count: 0,
            timestamp: 0,
            last_message: None,
        }
        .into()
    }

    #[test]
    fn a_mute_that_has_ended_reads_as_unmuted() {
        let past = chat(true, 1000);
        assert!(!past.muted);
        assert_eq!(past.mute_expiration, None);
        let until = now_ms() + 3_600_000;
        let future = chat(true, until);
        assert!(future.muted);
        assert_eq!(future.mute_expiration, Some(until));
        let forever = chat(true, 0);
        assert!(forever.muted);
        assert_eq!(forever.mute_expiration, Some(0), "0 = muted indefinitely");
        let unmuted = chat(false, 0);
        assert!(!unmuted.muted);
        assert_eq!(
            unmuted.mute_expiration, None,
            "an unmuted chat has no expiry"
        );
    }
}
