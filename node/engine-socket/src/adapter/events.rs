//! Library data events (messages, receipts, server acks, presence, groups, calls, statuses) mapped to
//! `EngineEvent`s. Pure functions of the library event, so tests feed synthetic library events through
//! them; anything unexpected (an unparseable JID, an unknown payload) is logged and skipped, never a panic.
//! Revokes, edits and reactions arrive as message payloads and are classified here.

use std::sync::Arc;

use crate::whatsapp_rust::Jid as LibJid;
use crate::whatsapp_rust::types::call::{CallAction, ElsewhereOutcome};
use crate::whatsapp_rust::types::events::{Event, InboundMessage as LibInbound};
use crate::whatsapp_rust::types::message::MessageInfo;
use crate::whatsapp_rust::types::presence::{ChatPresence, ChatPresenceMedia, ReceiptType};
use crate::whatsapp_rust::wacore::proto_helpers::MessageExt;
use crate::whatsapp_rust::wacore::stanza::groups::GroupNotificationAction;
use crate::whatsapp_rust::waproto::whatsapp as wa;
use tokio::sync::mpsc::UnboundedSender;
use wagate_proto::Jid;

use super::ops::calls::RecentCalls;
use super::ops::presence::PresenceBook;
use wagate_engine_api::{
    AckStatus, CallEvent, CallPhase, EngineEvent, GroupAction, GroupChanges, GroupEvent,
    InboundMessage, Location, MemberAddMode, MessageType, PictureChange, Poll, PresenceEntry,
    PresenceState, StatusUpdate,
};

/// Statuses live 24 hours.
const STATUS_TTL_SECS: i64 = 24 * 60 * 60;

/// Maps one session's library events and hands the results to its receive worker (`receive.rs`), which
/// finishes what needs I/O (media downloads, poll-vote decryption, history decoding) and sends them to
/// the supervisor in arrival order.
pub(super) struct Mapper {
    session_id: String,
    work: UnboundedSender<Work>,
    /// Call offers are remembered so that `reject_call` (and `autoRejectCalls`) can name caller and creator.
    calls: Arc<RecentCalls>,
    /// Presence reads are answered from what the session's presence events said.
    presence: Arc<PresenceBook>,
}

impl Mapper {
    pub(super) fn new(
        session_id: String,
        work: UnboundedSender<Work>,
        calls: Arc<RecentCalls>,
        presence: Arc<PresenceBook>,
    ) -> Self {
        Self {
            session_id,
            work,
            calls,
            presence,
        }
    }

    pub(super) fn map(&self, event: &Arc<Event>) {
        if let Event::IncomingCall(call) = event.as_ref()
            && matches!(
                call.action,
                CallAction::Offer { .. } | CallAction::OfferNotice { .. }
            )
        {
            self.calls.remember(
                call.action.call_id(),
                call.from.clone(),
                call.action.call_creator().clone(),
            );
        }
        let mut items = match event.as_ref() {
            Event::HistorySync(_) => vec![Work::History(event.clone())],
            // Committed through the durability hook (`gate.rs`) before the library acknowledged them.
            Event::Messages(batch) if batch.hook_committed => Vec::new(),
            other => map_work(other),
        };
        items.extend(push_names(event));
        for item in items {
            if let Work::Emit(mapped) = &item {
                self.presence.observe(mapped);
            }
            // A closed channel means the engine stopped; nothing is listening any more.
            let _ = self.work.send(item);
        }
        tracing::trace!(session_id = %self.session_id, kind = ?event.kind(), "library event");
    }
}

/// What one library event leaves to do: an event ready to go, or one that needs I/O first.
pub(super) enum Work {
    Emit(EngineEvent),
    /// A message whose media is still on the CDN: download it, then emit the message.
    Download {
        message: Box<InboundMessage>,
        payload: Arc<wa::Message>,
    },
    /// An encrypted poll vote: decrypt it with the poll's secret, then emit the vote.
    Vote(Box<EncryptedVote>),
    /// A history-sync chunk, decoded off the event thread.
    History(Arc<Event>),
    /// The push name an account showed on a live message or a name change, kept for the contact list.
    PushName {
        jid: Jid,
        name: String,
    },
    /// Messages the library holds unacknowledged until we committed them (`gate.rs`): `done` answers
    /// whether every event they became was committed.
    Gated {
        items: Vec<Work>,
        done: tokio::sync::oneshot::Sender<bool>,
    },
}

/// Push names seen live: on other accounts' messages and in push-name changes (history brings its own).
fn push_names(event: &Event) -> Vec<Work> {
    let named = |who: &LibJid, name: &str| {
        let jid = jid(who)?;
        (!name.is_empty() && matches!(jid.server(), "c.us" | "lid")).then(|| Work::PushName {
            jid,
            name: name.to_string(),
        })
    };
    match event {
        Event::Messages(batch) => batch
            .iter()
            .filter(|m| !m.info.source.is_from_me)
            .filter_map(|m| named(&m.info.source.sender, &m.info.push_name))
            .collect(),
        Event::PushNameUpdate(update) => named(&update.jid, &update.new_push_name)
            .into_iter()
            .collect(),
        _ => Vec::new(),
    }
}

/// A `pollUpdateMessage` as received: who voted where, on which poll, and the ciphertext.
#[derive(Debug, Clone)]
pub(super) struct EncryptedVote {
    pub chat: LibJid,
    pub voter: LibJid,
    /// Whose poll it is, per the vote's key (see `poll_creator`).
    pub creator: LibJid,
    pub poll_id: String,
    pub enc_payload: Vec<u8>,
    pub enc_iv: Vec<u8>,
    pub timestamp: i64,
}

/// The gateway's JID for a library JID (`s.whatsapp.net` becomes `c.us`; the device part is dropped).
pub(super) fn jid(lib: &LibJid) -> Option<Jid> {
    let raw = format!("{}@{}", lib.user, lib.server);
    match Jid::parse(&raw) {
        Ok(jid) => Some(jid),
        Err(error) => {
            tracing::debug!(jid = %raw, %error, "library JID not representable; event skipped");
            None
        }
    }
}

fn jid_str(raw: &str) -> Option<Jid> {
    let lib: LibJid = raw.parse().ok()?;
    jid(&lib)
}

#[cfg(test)]
/// The engine events one library event stands for without any I/O: media messages come without their
/// media, poll votes and history are left out (tests and callers that only need the mapping).
pub(super) fn map_event(event: &Event) -> Vec<EngineEvent> {
    map_work(event)
        .into_iter()
        .filter_map(|work| match work {
            Work::Emit(event) => Some(event),
            Work::Download { message, .. } => Some(EngineEvent::Message(message)),
            Work::Vote(_) | Work::History(_) | Work::PushName { .. } | Work::Gated { .. } => None,
        })
        .collect()
}

/// What one library event leaves to do (nothing for most kinds).
pub(super) fn map_work(event: &Event) -> Vec<Work> {
    let emit = |events: Vec<EngineEvent>| events.into_iter().map(Work::Emit).collect();
    emit(match event {
        Event::Messages(batch) => return batch.iter().filter_map(classify).collect(),
        Event::Receipt(receipt) => {
            let status = match receipt.r#type {
                ReceiptType::Delivered => AckStatus::Delivered,
                ReceiptType::Read
                | ReceiptType::ReadSelf
                | ReceiptType::Played
                | ReceiptType::PlayedSelf => AckStatus::Read,
                ReceiptType::ServerError => AckStatus::Failed,
                _ => return Vec::new(),
            };
            let Some(chat_id) = jid(&receipt.source.chat) else {
                return Vec::new();
            };
            receipt
                .message_ids
                .iter()
                .map(|id| EngineEvent::Ack {
                    message_id: id.to_string(),
                    chat_id: chat_id.clone(),
                    status,
                })
                .collect()
        }
        Event::ServerAck(ack) if ack.class.as_deref() == Some("message") => {
            let Some(chat_id) = ack.from.as_ref().and_then(jid) else {
                return Vec::new();
            };
            let status = if ack.error.is_some() {
                AckStatus::Failed
            } else {
                AckStatus::Sent
            };
            vec![EngineEvent::Ack {
                message_id: ack.id.clone(),
                chat_id,
                status,
            }]
        }
        Event::Presence(update) => {
            let Some(id) = jid(&update.from) else {
                return Vec::new();
            };
            let state = if update.unavailable {
                PresenceState::Unavailable
            } else {
                PresenceState::Available
            };
            vec![EngineEvent::Presence {
                chat_id: id.clone(),
                participants: vec![PresenceEntry {
                    id,
                    state,
                    last_seen: update.last_seen.map(|t| t.timestamp()),
                }],
            }]
        }
        Event::ChatPresence(update) => {
            let (Some(chat_id), Some(id)) = (jid(&update.source.chat), jid(&update.source.sender))
            else {
                return Vec::new();
            };
            let state = match (&update.state, &update.media) {
                (ChatPresence::Composing, ChatPresenceMedia::Audio) => PresenceState::Recording,
                (ChatPresence::Composing, _) => PresenceState::Composing,
                (ChatPresence::Paused, _) => PresenceState::Paused,
            };
            vec![EngineEvent::Presence {
                chat_id,
                participants: vec![PresenceEntry {
                    id,
                    state,
                    last_seen: None,
                }],
            }]
        }
        Event::GroupUpdate(update) => group(update).into_iter().collect(),
        Event::PictureUpdate(update) => group_picture(update).into_iter().collect(),
        Event::IncomingCall(call) => {
            let (phase, call_id, is_video, is_group) = match &call.action {
                CallAction::Offer {
                    call_id,
                    is_video,
                    group_jid,
                    ..
                } => (CallPhase::Received, call_id, *is_video, group_jid.is_some()),
                CallAction::OfferNotice {
                    call_id,
                    is_video,
                    is_group,
                    ..
                } => (CallPhase::Received, call_id, *is_video, *is_group),
                CallAction::Accept { call_id, .. } => (CallPhase::Accepted, call_id, false, false),
                CallAction::Reject { call_id, .. } => (CallPhase::Rejected, call_id, false, false),
                _ => return Vec::new(),
            };
            let Some(from) = jid(&call.from) else {
                return Vec::new();
            };
            vec![EngineEvent::Call(CallEvent {
                phase,
                call_id: call_id.clone(),
                from,
                is_video,
                is_group,
                timestamp: call.timestamp.timestamp(),
            })]
        }
        Event::MissedCall(call) => {
            call_event(CallPhase::Missed, &call.from, &call.call_id, call.timestamp)
        }
        Event::CallEndedElsewhere(call) => {
            let phase = match call.outcome {
                ElsewhereOutcome::Accepted => CallPhase::Accepted,
                _ => CallPhase::Rejected,
            };
            call_event(phase, &call.from, &call.call_id, call.timestamp)
        }
        _ => Vec::new(),
    })
}

fn call_event(
    phase: CallPhase,
    from: &LibJid,
    call_id: &str,
    at: chrono::DateTime<chrono::Utc>,
) -> Vec<EngineEvent> {
    let Some(from) = jid(from) else {
        return Vec::new();
    };
    vec![EngineEvent::Call(CallEvent {
        phase,
        call_id: call_id.to_string(),
        from,
        is_video: false,
        is_group: false,
        timestamp: at.timestamp(),
    })]
}

fn group(update: &crate::whatsapp_rust::types::events::GroupUpdate) -> Option<EngineEvent> {
    let group_id = jid(&update.group_jid)?;
    let who = |list: &[crate::whatsapp_rust::wacore::stanza::groups::GroupParticipantInfo]| {
        list.iter()
            .filter_map(|p| {
                p.phone_number
                    .as_ref()
                    .and_then(jid)
                    .or_else(|| jid(&p.jid))
            })
            .collect::<Vec<_>>()
    };
    let changes = |c: GroupChanges| Some(c);
    let (action, participant_ids, changes) = match &update.action {
        GroupNotificationAction::Add { participants, .. } => {
            (GroupAction::Join, who(participants), None)
        }
        GroupNotificationAction::Remove { participants, .. } => {
            (GroupAction::Leave, who(participants), None)
        }
        GroupNotificationAction::Promote { participants } => (
            GroupAction::Update,
            who(participants),
            changes(GroupChanges {
                admin: Some(true),
                ..GroupChanges::default()
            }),
        ),
        GroupNotificationAction::Demote { participants } => (
            GroupAction::Update,
            who(participants),
            changes(GroupChanges {
                admin: Some(false),
                ..GroupChanges::default()
            }),
        ),
        GroupNotificationAction::Subject { subject, .. } => (
            GroupAction::Update,
            vec![],
            changes(GroupChanges {
                subject: Some(subject.clone()),
                ..GroupChanges::default()
            }),
        ),
        GroupNotificationAction::Description { description, .. } => (
            GroupAction::Update,
            vec![],
            changes(GroupChanges {
                description: Some(description.clone().unwrap_or_default()),
                ..GroupChanges::default()
            }),
        ),
        GroupNotificationAction::Announce | GroupNotificationAction::NotAnnounce => (
            GroupAction::Update,
            vec![],
            changes(GroupChanges {
                announce: Some(matches!(update.action, GroupNotificationAction::Announce)),
                ..GroupChanges::default()
            }),
        ),
        GroupNotificationAction::Locked { .. } | GroupNotificationAction::Unlocked => (
            GroupAction::Update,
            vec![],
            changes(GroupChanges {
                locked: Some(matches!(
                    update.action,
                    GroupNotificationAction::Locked { .. }
                )),
                ..GroupChanges::default()
            }),
        ),
        GroupNotificationAction::Ephemeral { expiration, .. } => (
            GroupAction::Update,
            vec![],
            changes(GroupChanges {
                ephemeral_seconds: Some(*expiration),
                ..GroupChanges::default()
            }),
        ),
        GroupNotificationAction::MemberAddMode { mode } => (
            GroupAction::Update,
            vec![],
            changes(GroupChanges {
                // WhatsApp names the modes `admin_add` and `all_member_add`.
                member_add_mode: Some(MemberAddMode::admins_only(mode == "admin_add")),
                ..GroupChanges::default()
            }),
        ),
        GroupNotificationAction::CreatedMembershipRequests { requests, .. } => {
            (GroupAction::JoinRequest, who(requests), None)
        }
        _ => return None,
    };
    Some(EngineEvent::Group(GroupEvent {
        action,
        group_id,
        actor_id: update
            .participant_pn
            .as_ref()
            .or(update.participant.as_ref())
            .and_then(jid),
        participant_ids,
        changes,
        timestamp: update.timestamp.timestamp(),
    }))
}

/// A group's picture set or removed (a contact's own picture change is no event of ours).
fn group_picture(
    update: &crate::whatsapp_rust::types::events::PictureUpdate,
) -> Option<EngineEvent> {
    let group_id = jid(&update.jid).filter(Jid::is_group)?;
    let picture = if update.removed {
        PictureChange::Removed
    } else {
        PictureChange::Set
    };
    Some(EngineEvent::Group(GroupEvent {
        action: GroupAction::Update,
        group_id,
        actor_id: update.author.as_ref().and_then(jid),
        participant_ids: vec![],
        changes: Some(GroupChanges {
            picture: Some(picture),
            ..GroupChanges::default()
        }),
        timestamp: update.timestamp.timestamp(),
    }))
}

/// Who sent a message, where, when: what `classify` needs besides the payload. Live messages take it
/// from the library's `MessageInfo`, history messages from their `WebMessageInfo`.
pub(super) struct Envelope {
    pub id: String,
    pub chat: LibJid,
    pub sender: LibJid,
    pub recipient: Option<LibJid>,
    pub from_me: bool,
    /// Unix seconds.
    pub timestamp: i64,
}

/// What a received message payload is: a revoke, an edit, a reaction, a poll vote, a status post, or a
/// message (with media still to fetch, or ready).
/// The work of messages handed to the durability hook (`gate.rs`), as `map_work` makes it of a batch.
pub(super) fn classify_batch(batch: &[LibInbound]) -> Vec<Work> {
    batch.iter().filter_map(classify).collect()
}

fn classify(inbound: &LibInbound) -> Option<Work> {
    let info: &MessageInfo = &inbound.info;
    let envelope = Envelope {
        id: info.id.to_string(),
        chat: info.source.chat.clone(),
        sender: info.source.sender.clone(),
        recipient: info.source.recipient.clone(),
        from_me: info.source.is_from_me,
        timestamp: info.timestamp.timestamp(),
    };
    classify_payload(&envelope, &inbound.message, Some(&inbound.message))
}

/// Classifies `message`; `payload` is the shared message to download media from (none for history,
/// whose media is not fetched).
pub(super) fn classify_payload(
    env: &Envelope,
    message: &wa::Message,
    payload: Option<&Arc<wa::Message>>,
) -> Option<Work> {
    let message = message.get_base_message();
    let chat_id = jid(&env.chat)?;
    let from = jid(&env.sender)?;
    let timestamp = env.timestamp;
    if let Some(protocol) = message.protocol_message.as_option() {
        use wa::message::protocol_message::Type;
        let target = protocol.key.as_option().and_then(|k| k.id.clone())?;
        return match protocol.r#type {
            Some(Type::REVOKE) => Some(Work::Emit(EngineEvent::Revoked {
                id: env.id.clone(),
                revoked_id: target,
                to: chat_id.clone(),
                chat_id,
                from,
                timestamp,
            })),
            Some(Type::MESSAGE_EDIT) => {
                let body = protocol
                    .edited_message
                    .as_option()
                    .and_then(|m| m.text_content().or_else(|| m.get_caption()))
                    .unwrap_or_default()
                    .to_string();
                Some(Work::Emit(EngineEvent::Edited {
                    message_id: target,
                    chat_id,
                    body,
                    from,
                    from_me: env.from_me,
                    timestamp,
                }))
            }
            // Key shares, history-sync notices, ephemeral settings: the library's business.
            _ => None,
        };
    }
    if let Some(reaction) = message.reaction_message.as_option() {
        let target = reaction.key.as_option().and_then(|k| k.id.clone())?;
        return Some(Work::Emit(EngineEvent::Reaction {
            message_id: target,
            chat_id,
            reaction: reaction.text.clone().unwrap_or_default(),
            sender_id: from,
        }));
    }
    if let Some(update) = message.poll_update_message.as_option() {
        return encrypted_vote(env, update).map(|vote| Work::Vote(Box::new(vote)));
    }
    let (kind, body) = content(message);
    if env.chat.user == "status" && env.chat.server == "broadcast" {
        return Some(Work::Emit(EngineEvent::Status(StatusUpdate {
            status_id: env.id.clone(),
            contact: from,
            kind,
            caption: (!body.is_empty()).then_some(body),
            has_media: kind.has_media(),
            posted_at: timestamp,
            expires_at: timestamp.saturating_add(STATUS_TTL_SECS),
            media: None,
        })));
    }
    let to = if env.from_me {
        chat_id.clone()
    } else {
        env.recipient
            .as_ref()
            .and_then(jid)
            .unwrap_or_else(|| chat_id.clone())
    };
    let context = context_info(message);
    let inbound = Box::new(InboundMessage {
        id: env.id.clone(),
        author: chat_id.is_group().then(|| from.clone()),
        chat_id,
        from,
        to,
        from_me: env.from_me,
        kind,
        body,
        timestamp,
        media: None,
        quoted: None,
        mentioned_ids: context
            .map(|c| c.mentioned_jid.iter().filter_map(|j| jid_str(j)).collect())
            .unwrap_or_default(),
        location: message.location_message.as_option().map(|l| Location {
            latitude: l.degrees_latitude.unwrap_or_default(),
            longitude: l.degrees_longitude.unwrap_or_default(),
            description: l.name.clone().or_else(|| l.address.clone()),
        }),
        poll: poll(message),
    });
    Some(match payload {
        Some(payload) if kind.has_media() => Work::Download {
            message: inbound,
            payload: payload.clone(),
        },
        _ => Work::Emit(EngineEvent::Message(inbound)),
    })
}

/// The vote's ciphertext and addressing. The poll's creator follows from the vote's key the way the
/// phone writes it: `fromMe` means the voter voted on their own poll; in a one-to-one chat the key's
/// `remoteJid` is the creator (as the voter sees the chat); in a group its `participant` is.
fn encrypted_vote(
    env: &Envelope,
    update: &wa::message::PollUpdateMessage,
) -> Option<EncryptedVote> {
    let key = update.poll_creation_message_key.as_option()?;
    let vote = update.vote.as_option()?;
    let creator = if key.from_me.unwrap_or(false) {
        env.sender.clone()
    } else if env.chat.server == "g.us" {
        key.participant.as_deref()?.parse().ok()?
    } else {
        key.remote_jid.as_deref()?.parse().ok()?
    };
    Some(EncryptedVote {
        chat: env.chat.clone(),
        voter: env.sender.clone(),
        creator,
        poll_id: key.id.clone()?,
        enc_payload: vote.enc_payload.clone()?,
        enc_iv: vote.enc_iv.clone()?,
        timestamp: env.timestamp,
    })
}

fn context_info(message: &wa::Message) -> Option<&wa::ContextInfo> {
    message
        .extended_text_message
        .as_option()
        .and_then(|m| m.context_info.as_option())
        .or_else(|| {
            message
                .image_message
                .as_option()
                .and_then(|m| m.context_info.as_option())
        })
        .or_else(|| {
            message
                .video_message
                .as_option()
                .and_then(|m| m.context_info.as_option())
        })
        .or_else(|| {
            message
                .document_message
                .as_option()
                .and_then(|m| m.context_info.as_option())
        })
}

fn poll(message: &wa::Message) -> Option<Poll> {
    let creation = message
        .poll_creation_message
        .as_option()
        .or_else(|| message.poll_creation_message_v2.as_option())
        .or_else(|| message.poll_creation_message_v3.as_option())?;
    Some(Poll {
        name: creation.name.clone().unwrap_or_default(),
        options: creation
            .options
            .iter()
            .filter_map(|o| o.option_name.clone())
            .collect(),
        allow_multiple: creation.selectable_options_count.unwrap_or(0) != 1,
    })
}

/// The message type and the text the gateway shows as its body.
fn content(message: &wa::Message) -> (MessageType, String) {
    let text = message
        .text_content()
        .or_else(|| message.get_caption())
        .unwrap_or_default()
        .to_string();
    let kind = if message.image_message.is_set() {
        MessageType::Image
    } else if message.video_message.is_set() {
        MessageType::Video
    } else if let Some(audio) = message.audio_message.as_option() {
        if audio.ptt.unwrap_or(false) {
            MessageType::Voice
        } else {
            MessageType::Audio
        }
    } else if message.document_message.is_set() {
        MessageType::Document
    } else if message.sticker_message.is_set() {
        MessageType::Sticker
    } else if message.location_message.is_set() {
        MessageType::Location
    } else if let Some(contact) = message.contact_message.as_option() {
        return (
            MessageType::Contact,
            contact.vcard.clone().unwrap_or_default(),
        );
    } else if message.poll_creation_message.is_set()
        || message.poll_creation_message_v2.is_set()
        || message.poll_creation_message_v3.is_set()
    {
        let name = poll(message).map(|p| p.name).unwrap_or_default();
        return (MessageType::Poll, name);
    } else if message.order_message.is_set() {
        MessageType::Order
    } else if message.product_message.is_set() {
        MessageType::Product
    } else if message.conversation.is_some() || message.extended_text_message.is_set() {
        MessageType::Text
    } else {
        MessageType::Unknown
    };
    (kind, text)
}
