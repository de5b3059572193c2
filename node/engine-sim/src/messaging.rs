//! Messaging on the sim network: sends (routed to the recipient's linked sessions, fanned out to group
//! members and channel subscribers) and the acks back to the sender. Input: `SimEngine`. The
//! actions on existing messages are in `actions.rs`; persisting sent messages is the supervisor's job.
//! Media crosses the network as the sender's stored object by key (`carried_media`), never as bytes.

use super::control::resolve_quote;
use super::network::{NetState, OutboxEntry, SimNetwork, StoredMessage, now};
use super::peers::{Op, Record};
use wagate_engine_api::media::EngineMedia;
use wagate_engine_api::{
    AckStatus, EngineError, EngineEvent, EngineResult, INLINE_MEDIA_MAX_BYTES, MediaSource,
    MessageContent, OutgoingMessage, QuotedRef, ReceivedMedia, SentMessage, StoredFile,
};
use wagate_proto::Jid;
use wagate_proto::jid::ChatKind;

impl SimNetwork {
    /// Sends `msg` from `session`; acks (server, delivered, read) follow on the sender's channel.
    pub async fn send(
        &self,
        session: &str,
        media_store: &dyn EngineMedia,
        msg: OutgoingMessage,
    ) -> EngineResult<SentMessage> {
        let media = match &msg.content {
            MessageContent::Media(media) => {
                let (data, file) = carried_media(media_store, &media.source).await?;
                Some(ReceivedMedia {
                    mimetype: media.mimetype.clone(),
                    filename: media.filename.clone(),
                    data,
                    stored: Some(Box::new(file)),
                })
            }
            _ => None,
        };
        self.pull_for_send(session, &msg.to, msg.quoted_id.as_deref())
            .await;
        let mut state = self.lock();
        let me = state.online_phone(session)?;
        if let MessageContent::Product { product_id, .. } = &msg.content
            && !state.catalog.iter().any(|p| &p.id == product_id)
        {
            return Err(EngineError::NotFound(format!(
                "Product {product_id} not found"
            )));
        }
        let recipients = recipients_of(&state, &me, &msg.to)?;
        let quoted = resolve_quote(&state, msg.quoted_id.as_deref())?;
        let id = self.next_id(&mut state);
        let stored = stored_message(id, me.clone(), msg, media, quoted);
        let (reached, open) = self.publish(&mut state, session, &me, &recipients, stored.clone());
        drop(state);
        self.schedule_acks(session, &stored, reached, open);
        Ok(SentMessage {
            id: stored.id,
            timestamp: stored.timestamp,
        })
    }

    /// Stores a message, records it in the sender's outbox and chats, and delivers it to every recipient
    /// phone's sessions. Answers whether any recipient device exists here (delivered/read acks follow then)
    /// and the recipients that did not block the sender (one may have a device on another node).
    pub(super) fn publish(
        &self,
        state: &mut NetState,
        session: &str,
        me: &Jid,
        recipients: &[Jid],
        msg: StoredMessage,
    ) -> (bool, Vec<Jid>) {
        let entry = OutboxEntry {
            message_id: msg.id.clone(),
            to: msg.to.clone(),
            kind: msg.kind,
            body: msg.body.clone(),
            timestamp: msg.timestamp,
        };
        if let Some(device) = state.devices.get_mut(session) {
            device.outbox.push(entry.clone());
        }
        state.emit(Op::Sent {
            session: session.to_string(),
            entry,
        });
        state.touch_chat(me, &msg.to, &msg, false);
        let mut reached = false;
        let mut open = Vec::with_capacity(recipients.len());
        for phone in recipients {
            if msg.to.kind() == ChatKind::Individual {
                state.note_exchange(me, phone);
            }
            if state
                .accounts
                .get(phone)
                .is_some_and(|acc| acc.blocked.contains(me))
            {
                continue;
            }
            reached |= state.has_device(phone);
            open.push(phone.clone());
            // In a cluster the recipient's chat is the business of the node serving it (it touches the
            // chat when it applies the message), so a copy here never double-counts or overwrites it.
            // A number not on the network has no chats: recording one would create its account, and
            // with it a number that exists (wire-notes §10: only linked phones and inbound senders do).
            if !state.is_clustered() && state.exists(phone) {
                state.touch_chat(phone, &msg.chat_for(phone), &msg, true);
            }
            if state.deliver_message_to_phone(phone, &msg) && state.is_clustered() {
                state.touch_chat(phone, &msg.chat_for(phone), &msg, true);
            }
        }
        state.share(Record::Message, &msg.id, &msg);
        state.messages.insert(msg.id.clone(), msg);
        (reached, open)
    }

    /// Server ack after one delay; delivered and read after one more each, when a recipient device exists.
    /// Acks come from a task so the caller has stored the message before its first ack arrives. A
    /// recipient device on another node (cluster-wide network) counts as reached too.
    pub(super) fn schedule_acks(
        &self,
        session: &str,
        msg: &StoredMessage,
        reached: bool,
        recipients: Vec<Jid>,
    ) {
        let (net, session) = (self.clone(), session.to_string());
        let (id, chat_id) = (msg.id.clone(), msg.chat_for(&msg.from));
        tokio::spawn(async move {
            let reached = reached || net.linked_elsewhere(&recipients).await;
            let steps: &[AckStatus] = if reached {
                &[AckStatus::Sent, AckStatus::Delivered, AckStatus::Read]
            } else {
                &[AckStatus::Sent]
            };
            for status in steps {
                tokio::time::sleep(net.config().ack_delay).await;
                let mut state = net.lock();
                match state.messages.get_mut(&id) {
                    Some(stored) if stored.ack < *status => stored.ack = *status,
                    _ => continue,
                }
                let event = EngineEvent::Ack {
                    message_id: id.clone(),
                    chat_id: chat_id.clone(),
                    status: *status,
                };
                state.deliver(&session, event);
            }
        });
    }
}

/// What the network carries of a media send: the sender's stored object by key, never its bytes (each
/// recipient's node keeps its session's own copy of that object, made by the store), and the content
/// itself only when it is small enough to travel inline in events, as a downloaded one would. A large
/// object is thus never read into memory to be sent, held by the network, or journalled.
pub(super) async fn carried_media(
    store: &dyn EngineMedia,
    source: &MediaSource,
) -> EngineResult<(Vec<u8>, StoredFile)> {
    let file = source.stored(store).await?;
    let data = if file.size <= INLINE_MEDIA_MAX_BYTES as u64 {
        source.load(store).await?
    } else {
        Vec::new()
    };
    Ok((data, file))
}

/// The phones a message to `to` reaches, after checking `me` may write there.
pub(super) fn recipients_of(state: &NetState, me: &Jid, to: &Jid) -> EngineResult<Vec<Jid>> {
    match to.kind() {
        ChatKind::Individual => Ok(vec![to.clone()]),
        ChatKind::Group => {
            let group = state
                .groups
                .get(to)
                .ok_or_else(|| EngineError::NotFound(format!("Group {to} not found")))?;
            if !group.members.contains_key(me) {
                return Err(EngineError::Rejected(
                    "not a participant of this group".into(),
                ));
            }
            if group.settings.announce && !group.is_admin(me) {
                return Err(EngineError::Rejected(
                    "only admins can send to this group".into(),
                ));
            }
            Ok(group.members.keys().filter(|p| *p != me).cloned().collect())
        }
        ChatKind::Channel => {
            let channel = state
                .channels
                .get(to)
                .ok_or_else(|| EngineError::NotFound(format!("Channel {to} not found")))?;
            if channel.owner != *me && !channel.admins.contains(me) {
                return Err(EngineError::Rejected("only channel admins can post".into()));
            }
            Ok(channel.subscribers.iter().cloned().collect())
        }
        _ => Err(EngineError::BadInput(format!(
            "cannot send a message to {to}"
        ))),
    }
}

/// The network's record of a fresh outgoing message.
fn stored_message(
    id: String,
    from: Jid,
    msg: OutgoingMessage,
    media: Option<ReceivedMedia>,
    quoted: Option<QuotedRef>,
) -> StoredMessage {
    let (location, poll) = match &msg.content {
        MessageContent::Location(loc) => (Some(loc.clone()), None),
        MessageContent::Poll(poll) => (None, Some(poll.clone())),
        _ => (None, None),
    };
    StoredMessage {
        id,
        from,
        to: msg.to,
        kind: msg.content.message_type(),
        body: msg.content.body_text(),
        timestamp: now(),
        media,
        quoted,
        mentions: msg.mentions,
        location,
        poll,
        ack: AckStatus::Pending,
        revoked: false,
        pinned: false,
    }
}
