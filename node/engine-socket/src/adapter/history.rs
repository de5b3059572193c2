//! History sync: a decoded `HistorySync` chunk (conversations with their messages, push names) mapped
//! to a `HistoryBatch` for the message store. Messages go through the same classification as live ones
//! (`events::classify_payload`), so a history message is stored with the record shape a live one gets;
//! revokes, edits, reactions and votes found in history are not replayed (they are already applied in
//! what the phone sends). Pure: the worker (`receive.rs`) decodes the chunk and calls this.

use crate::whatsapp_rust::Jid as LibJid;
use crate::whatsapp_rust::waproto::whatsapp as wa;

use super::events::{Envelope, Work, classify_payload, jid};
use wagate_engine_api::{AckStatus, EngineEvent, HistoryBatch, HistoryChat, InboundMessage};

/// The batch a chunk stands for. `own` is the account's JID, the sender of its own messages in
/// one-to-one chats (the key only says `fromMe`).
pub(super) fn batch(sync: &wa::HistorySync, own: Option<&LibJid>) -> HistoryBatch {
    let mut out = HistoryBatch::default();
    for conversation in &sync.conversations {
        let Some(chat) = conversation_jid(conversation) else {
            continue;
        };
        let Some(chat_id) = jid(&chat) else {
            continue;
        };
        let mut messages: Vec<InboundMessage> = conversation
            .messages
            .iter()
            .filter_map(|m| m.message.as_option())
            .filter_map(|info| message(&chat, info, own))
            .collect();
        // The phone's unread count names the newest incoming messages; the rest were read.
        messages.sort_by_key(|m| std::cmp::Reverse(m.timestamp));
        let mut unread = conversation.unread_count.unwrap_or(0);
        for msg in messages {
            let status = if msg.from_me {
                AckStatus::Sent
            } else if unread > 0 {
                unread -= 1;
                AckStatus::Delivered
            } else {
                AckStatus::Read
            };
            out.messages.push((msg, status));
        }
        let last = conversation
            .last_msg_timestamp
            .or(conversation.conversation_timestamp)
            .and_then(|t| i64::try_from(t).ok());
        out.chats.push(HistoryChat {
            id: chat_id,
            name: conversation
                .name
                .clone()
                .or_else(|| conversation.display_name.clone())
                .filter(|n| !n.is_empty()),
            unread_count: conversation.unread_count,
            last_message_at: last.filter(|t| *t > 0),
            archived: conversation.archived,
            pinned: conversation.pinned.map(|at| at > 0),
            muted: conversation.mute_end_time.map(|end| end > 0),
            mute_expiration: conversation
                .mute_end_time
                .filter(|end| *end > 0)
                .map(mute_expiration_ms),
        });
    }
    for entry in &sync.pushnames {
        let (Some(id), Some(name)) = (entry.id.as_deref(), entry.pushname.as_deref()) else {
            continue;
        };
        let Some(contact) = id.parse::<LibJid>().ok().as_ref().and_then(jid) else {
            continue;
        };
        if !name.is_empty() {
            out.push_names.push((contact, name.to_string()));
        }
    }
    out
}

/// The chat a conversation is about; phone-number JIDs are preferred over LIDs so history and live
/// traffic (which the library reports by phone number where it knows it) land in one chat.
fn conversation_jid(conversation: &wa::Conversation) -> Option<LibJid> {
    let raw = conversation
        .pn_jid
        .as_deref()
        .filter(|_| conversation.id.ends_with("@lid"))
        .unwrap_or(&conversation.id);
    raw.parse().ok()
}

/// `muteEndTime` is epoch milliseconds; "always" is written as -1, which arrives as a value beyond
/// `i64`, and the API says 0 for it.
fn mute_expiration_ms(end: u64) -> i64 {
    i64::try_from(end).unwrap_or(0)
}

fn message(
    chat: &LibJid,
    info: &wa::WebMessageInfo,
    own: Option<&LibJid>,
) -> Option<InboundMessage> {
    let key = info.key.as_option()?;
    let payload = info.message.as_option()?;
    let from_me = key.from_me.unwrap_or(false);
    let sender: LibJid = match (
        from_me,
        key.participant.as_deref().or(info.participant.as_deref()),
    ) {
        (_, Some(participant)) => participant.parse().ok()?,
        (true, None) => own.cloned()?,
        (false, None) => chat.clone(),
    };
    let envelope = Envelope {
        id: key.id.clone()?,
        chat: chat.clone(),
        sender,
        recipient: None,
        from_me,
        timestamp: info
            .message_timestamp
            .and_then(|t| i64::try_from(t).ok())
            .unwrap_or(0),
    };
    match classify_payload(&envelope, payload, None)? {
        Work::Emit(EngineEvent::Message(msg)) | Work::Download { message: msg, .. } => Some(*msg),
        _ => None,
    }
}
