//! `EngineEvent` -> `Event`: the event name and the wire-notes §5 `data` for everything an engine reports
//! besides its lifecycle (the supervisor builds the `session.*` events itself). Pure; no I/O.

use base64::Engine as _;
use serde_json::{Value, json};
use wagate_proto::EventName;

use super::Event;
use crate::engine::{
    CallEvent, CallPhase, EngineEvent, GroupAction, GroupEvent, InboundMessage, ReceivedMedia,
};

/// Inline media above this reaches consumers as the omitted marker (one limit with the engines').
pub(crate) use crate::engine::INLINE_MEDIA_MAX_BYTES;

/// The event an engine event becomes; `None` for lifecycle events, which the supervisor handles.
pub(crate) fn normalise(session_id: &str, event: &EngineEvent) -> Option<Event> {
    let (name, data) = match event {
        EngineEvent::Message(msg) => {
            let name = if msg.from_me {
                EventName::MessageSent
            } else {
                EventName::MessageReceived
            };
            (name, message_data(msg))
        }
        EngineEvent::Ack {
            message_id,
            chat_id,
            status,
        } => {
            let name = if status.as_str() == "failed" {
                EventName::MessageFailed
            } else {
                EventName::MessageAck
            };
            let data = json!({ "id": message_id, "messageId": message_id, "status": status.as_str(), "chatId": chat_id });
            (name, data)
        }
        EngineEvent::Revoked {
            id,
            revoked_id,
            chat_id,
            from,
            to,
            timestamp,
        } => (
            EventName::MessageRevoked,
            json!({ "id": id, "revokedId": revoked_id, "chatId": chat_id, "from": from, "to": to, "timestamp": timestamp }),
        ),
        EngineEvent::Edited {
            message_id,
            chat_id,
            body,
            from,
            from_me,
            timestamp,
        } => (
            EventName::MessageEdited,
            json!({ "messageId": message_id, "chatId": chat_id, "body": body, "from": from, "fromMe": from_me, "timestamp": timestamp }),
        ),
        EngineEvent::Reaction {
            message_id,
            chat_id,
            reaction,
            sender_id,
        } => (
            EventName::MessageReaction,
            json!({ "messageId": message_id, "chatId": chat_id, "reaction": reaction, "senderId": sender_id }),
        ),
        EngineEvent::Presence {
            chat_id,
            participants,
        } => {
            let participants: Vec<Value> = participants
                .iter()
                .map(|p| {
                    without_nulls(
                        json!({ "id": p.id, "state": p.state.as_str(), "lastSeen": p.last_seen }),
                        &["lastSeen"],
                    )
                })
                .collect();
            (
                EventName::PresenceUpdate,
                json!({ "chatId": chat_id, "participants": participants }),
            )
        }
        EngineEvent::Group(group) => group_event(group),
        EngineEvent::Call(call) => call_event(call),
        EngineEvent::Status(status) => (
            EventName::StatusReceived,
            without_nulls(
                json!({
                    "statusId": status.status_id, "contact": status.contact, "type": status.kind,
                    "caption": status.caption, "hasMedia": status.has_media,
                    "postedAt": status.posted_at, "expiresAt": status.expires_at,
                }),
                &["caption"],
            ),
        ),
        _ => return None,
    };
    Some(Event::new(name, session_id, data))
}

/// `message.received|sent` data.
pub(crate) fn message_data(msg: &InboundMessage) -> Value {
    let mut data = json!({
        "id": msg.id, "from": msg.from, "to": msg.to, "chatId": msg.chat_id, "body": msg.body,
        "type": msg.kind, "timestamp": msg.timestamp, "fromMe": msg.from_me,
        "isGroup": msg.chat_id.is_group(), "kind": msg.chat_id.kind().as_str(),
        "hasMedia": msg.media.is_some() || msg.kind.has_media(),
    });
    let fields = [
        ("author", msg.author.as_ref().map(|a| json!(a))),
        ("mentionedIds", (!msg.mentioned_ids.is_empty()).then(|| json!(msg.mentioned_ids))),
        ("media", msg.media.as_ref().map(media_data)),
        ("quotedMessage", msg.quoted.as_ref().map(|q| json!({ "id": q.id, "body": q.body }))),
        ("location", msg.location.as_ref().map(|l| json!({ "latitude": l.latitude, "longitude": l.longitude, "description": l.description }))),
        ("poll", msg.poll.as_ref().map(|p| json!({ "name": p.name, "options": p.options, "allowMultipleAnswers": p.allow_multiple }))),
    ];
    for (key, value) in fields {
        if let (Some(value), Some(obj)) = (value, data.as_object_mut()) {
            obj.insert(key.to_string(), value);
        }
    }
    data
}

/// Inline base64 up to the cap; above it the omitted marker with the size.
pub(crate) fn media_data(media: &ReceivedMedia) -> Value {
    let size = media.size();
    let is_held = media.stored.is_none() || media.data.len() as u64 == size;
    let data = if size > INLINE_MEDIA_MAX_BYTES as u64 || !is_held {
        json!({ "mimetype": media.mimetype, "filename": media.filename, "omitted": true, "sizeBytes": size })
    } else {
        let data = base64::engine::general_purpose::STANDARD.encode(&media.data);
        json!({ "mimetype": media.mimetype, "filename": media.filename, "data": data, "sizeBytes": size })
    };
    without_nulls(data, &["filename"])
}

/// The envelope's optional fields (wire-notes `name?`) are left out when absent, not sent as `null`.
fn without_nulls(mut data: Value, optional: &[&str]) -> Value {
    if let Some(obj) = data.as_object_mut() {
        for key in optional {
            if obj.get(*key).is_some_and(Value::is_null) {
                obj.remove(*key);
            }
        }
    }
    data
}

fn group_event(group: &GroupEvent) -> (EventName, Value) {
    let name = match group.action {
        GroupAction::Join => EventName::GroupJoin,
        GroupAction::Leave => EventName::GroupLeave,
        GroupAction::Update => EventName::GroupUpdate,
        GroupAction::JoinRequest => EventName::GroupJoinRequest,
    };
    let data = json!({
        "groupId": group.group_id, "actorId": group.actor_id, "participantIds": group.participant_ids,
        "changes": group.changes, "timestamp": group.timestamp,
    });
    (name, without_nulls(data, &["actorId", "changes"]))
}

fn call_event(call: &CallEvent) -> (EventName, Value) {
    let name = match call.phase {
        CallPhase::Received => EventName::CallReceived,
        CallPhase::Accepted => EventName::CallAccepted,
        CallPhase::Rejected => EventName::CallRejected,
        CallPhase::Missed => EventName::CallMissed,
    };
    let data = json!({
        "callId": call.call_id, "from": call.from, "isVideo": call.is_video, "isGroup": call.is_group,
        "timestamp": call.timestamp,
    });
    (name, data)
}
