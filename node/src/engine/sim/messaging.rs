//! Messaging on the sim network: sends (routed to the recipient's linked sessions, fanned out to group
//! members and channel subscribers), acks back to the sender, and the message actions (react, edit, revoke,
//! forward, pin, poll vote, read receipts, star). Input: `SimEngine`. Persisting sent messages is the
//! supervisor's job, not the network's.

use super::control::{find_message, resolve_quote};
use super::network::{NetState, OutboxEntry, SimNetwork, StoredMessage, now};
use crate::engine::{
    AckStatus, EngineError, EngineEvent, EngineResult, MessageContent, OutgoingMessage,
    ReceivedMedia, SentMessage,
};
use wagate_proto::Jid;
use wagate_proto::jid::ChatKind;

impl SimNetwork {
    /// Sends `msg` from `session`; acks (server, delivered, read) follow on the sender's channel.
    pub(crate) async fn send(
        &self,
        session: &str,
        msg: OutgoingMessage,
    ) -> EngineResult<SentMessage> {
        let media = match &msg.content {
            MessageContent::Media(media) => Some(ReceivedMedia {
                mimetype: media.mimetype.clone(),
                filename: media.filename.clone(),
                data: media
                    .source
                    .load()
                    .await
                    .map_err(|e| EngineError::BadInput(e.to_string()))?,
            }),
            _ => None,
        };
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
        let stored = StoredMessage {
            id: self.next_id(&mut state),
            from: me.clone(),
            to: msg.to.clone(),
            kind: msg.content.message_type(),
            body: msg.content.body_text(),
            timestamp: now(),
            media,
            quoted: resolve_quote(&state, msg.quoted_id.as_deref())?,
            mentions: msg.mentions.clone(),
            location: match &msg.content {
                MessageContent::Location(loc) => Some(loc.clone()),
                _ => None,
            },
            poll: match &msg.content {
                MessageContent::Poll(poll) => Some(poll.clone()),
                _ => None,
            },
            ack: AckStatus::Pending,
            revoked: false,
            pinned: false,
        };
        let reached = self.publish(&mut state, session, &me, &recipients, stored.clone());
        drop(state);
        self.schedule_acks(session, &stored, reached);
        Ok(SentMessage {
            id: stored.id,
            timestamp: stored.timestamp,
        })
    }

    /// Stores a message, records it in the sender's outbox and chats, and delivers it to every recipient
    /// phone's sessions. Answers whether any recipient device exists (delivered/read acks follow then).
    fn publish(
        &self,
        state: &mut NetState,
        session: &str,
        me: &Jid,
        recipients: &[Jid],
        msg: StoredMessage,
    ) -> bool {
        if let Some(device) = state.devices.get_mut(session) {
            device.outbox.push(OutboxEntry {
                message_id: msg.id.clone(),
                to: msg.to.clone(),
                kind: msg.kind,
                body: msg.body.clone(),
                timestamp: msg.timestamp,
            });
        }
        state.touch_chat(me, &msg.to, &msg, false);
        let mut reached = false;
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
            state.touch_chat(phone, &msg.chat_for(phone), &msg, true);
            let event = EngineEvent::Message(Box::new(msg.to_inbound(phone)));
            state.deliver_to_phone(phone, &event);
        }
        state.messages.insert(msg.id.clone(), msg);
        reached
    }

    /// Server ack after one delay; delivered and read after one more each, when a recipient device exists.
    /// Acks come from a task so the caller has stored the message before its first ack arrives.
    fn schedule_acks(&self, session: &str, msg: &StoredMessage, reached: bool) {
        let (net, session) = (self.clone(), session.to_string());
        let (id, chat_id) = (msg.id.clone(), msg.chat_for(&msg.from));
        let steps: &[AckStatus] = if reached {
            &[AckStatus::Sent, AckStatus::Delivered, AckStatus::Read]
        } else {
            &[AckStatus::Sent]
        };
        tokio::spawn(async move {
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

    pub(crate) fn react_own(
        &self,
        session: &str,
        chat: &Jid,
        message_id: &str,
        emoji: &str,
    ) -> EngineResult<()> {
        let mut state = self.lock();
        let me = state.online_phone(session)?;
        find_message(&mut state, message_id)?;
        let recipients = recipients_of(&state, &me, chat)?;
        for phone in recipients {
            let event = EngineEvent::Reaction {
                message_id: message_id.to_string(),
                chat_id: if chat.is_group() {
                    chat.clone()
                } else {
                    me.clone()
                },
                reaction: emoji.to_string(),
                sender_id: me.clone(),
            };
            state.deliver_to_phone(&phone, &event);
        }
        Ok(())
    }

    pub(crate) fn edit_own(
        &self,
        session: &str,
        chat: &Jid,
        message_id: &str,
        body: &str,
    ) -> EngineResult<SentMessage> {
        let mut state = self.lock();
        let me = state.online_phone(session)?;
        let msg = own_message(&mut state, &me, message_id)?;
        msg.body = body.to_string();
        let timestamp = now();
        let recipients = recipients_of(&state, &me, chat)?;
        for phone in recipients {
            let event = EngineEvent::Edited {
                message_id: message_id.to_string(),
                chat_id: if chat.is_group() {
                    chat.clone()
                } else {
                    me.clone()
                },
                body: body.to_string(),
                from: me.clone(),
                from_me: false,
                timestamp,
            };
            state.deliver_to_phone(&phone, &event);
        }
        Ok(SentMessage {
            id: message_id.to_string(),
            timestamp,
        })
    }

    /// Deletes for everyone (own messages only) or just for this account.
    pub(crate) fn revoke_own(
        &self,
        session: &str,
        chat: &Jid,
        message_id: &str,
        for_everyone: bool,
    ) -> EngineResult<()> {
        let mut state = self.lock();
        let me = state.online_phone(session)?;
        if !for_everyone {
            find_message(&mut state, message_id)?;
            return Ok(());
        }
        own_message(&mut state, &me, message_id)?.revoked = true;
        let recipients = recipients_of(&state, &me, chat)?;
        for phone in recipients {
            let event = EngineEvent::Revoked {
                id: self.next_id(&mut state),
                revoked_id: message_id.to_string(),
                chat_id: if chat.is_group() {
                    chat.clone()
                } else {
                    me.clone()
                },
                from: me.clone(),
                to: chat.clone(),
                timestamp: now(),
            };
            state.deliver_to_phone(&phone, &event);
        }
        Ok(())
    }

    pub(crate) async fn forward(
        &self,
        session: &str,
        to: &Jid,
        message_id: &str,
    ) -> EngineResult<SentMessage> {
        let original = {
            let mut state = self.lock();
            state.online_phone(session)?;
            find_message(&mut state, message_id)?.clone()
        };
        let mut state = self.lock();
        let me = state.online_phone(session)?;
        let recipients = recipients_of(&state, &me, to)?;
        let copy = StoredMessage {
            id: self.next_id(&mut state),
            from: me.clone(),
            to: to.clone(),
            timestamp: now(),
            quoted: None,
            ack: AckStatus::Pending,
            pinned: false,
            ..original
        };
        let reached = self.publish(&mut state, session, &me, &recipients, copy.clone());
        drop(state);
        self.schedule_acks(session, &copy, reached);
        Ok(SentMessage {
            id: copy.id,
            timestamp: copy.timestamp,
        })
    }

    pub(crate) fn set_pinned(
        &self,
        session: &str,
        message_id: &str,
        pinned: bool,
    ) -> EngineResult<()> {
        let mut state = self.lock();
        state.online_phone(session)?;
        find_message(&mut state, message_id)?.pinned = pinned;
        Ok(())
    }

    pub(crate) fn vote_poll(
        &self,
        session: &str,
        poll_id: &str,
        options: &[String],
    ) -> EngineResult<()> {
        let mut state = self.lock();
        state.online_phone(session)?;
        let msg = find_message(&mut state, poll_id)?;
        let poll = msg
            .poll
            .as_ref()
            .ok_or_else(|| EngineError::BadInput(format!("Message {poll_id} is not a poll")))?;
        if let Some(bad) = options.iter().find(|o| !poll.options.contains(o)) {
            return Err(EngineError::BadInput(format!(
                "'{bad}' is not an option of this poll"
            )));
        }
        if !poll.allow_multiple && options.len() > 1 {
            return Err(EngineError::BadInput(
                "this poll allows one answer only".into(),
            ));
        }
        Ok(())
    }

    /// Read receipts: the senders of the read messages get a `read` ack.
    pub(crate) fn mark_read(
        &self,
        session: &str,
        chat: &Jid,
        message_ids: &[String],
    ) -> EngineResult<()> {
        let mut state = self.lock();
        let me = state.online_phone(session)?;
        let ids: Vec<String> = state
            .messages
            .values()
            .filter(|m| m.from != me && m.chat_for(&me) == *chat)
            .filter(|m| message_ids.is_empty() || message_ids.contains(&m.id))
            .filter(|m| m.ack < AckStatus::Read)
            .map(|m| m.id.clone())
            .collect();
        for id in ids {
            let Some(msg) = state.messages.get_mut(&id) else {
                continue;
            };
            msg.ack = AckStatus::Read;
            let (sender, chat_id) = (msg.from.clone(), msg.chat_for(&msg.from));
            let event = EngineEvent::Ack {
                message_id: id,
                chat_id,
                status: AckStatus::Read,
            };
            state.deliver_to_phone(&sender, &event);
        }
        state
            .account(&me)
            .chats
            .entry(chat.clone())
            .or_default()
            .unread = 0;
        Ok(())
    }

    pub(crate) fn mark_unread(&self, session: &str, chat: &Jid) -> EngineResult<()> {
        let mut state = self.lock();
        let me = state.online_phone(session)?;
        let rec = state.account(&me).chats.entry(chat.clone()).or_default();
        rec.unread = rec.unread.max(1);
        Ok(())
    }

    pub(crate) fn star(&self, session: &str, message_id: &str, star: bool) -> EngineResult<()> {
        let mut state = self.lock();
        let me = state.online_phone(session)?;
        find_message(&mut state, message_id)?;
        let starred = &mut state.account(&me).starred;
        if star {
            starred.insert(message_id.to_string());
        } else {
            starred.remove(message_id);
        }
        Ok(())
    }
}

/// The phones a message to `to` reaches, after checking `me` may write there.
fn recipients_of(state: &NetState, me: &Jid, to: &Jid) -> EngineResult<Vec<Jid>> {
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

fn own_message<'a>(
    state: &'a mut NetState,
    me: &Jid,
    id: &str,
) -> EngineResult<&'a mut StoredMessage> {
    let msg = find_message(state, id)?;
    if msg.from != *me {
        return Err(EngineError::Rejected(
            "only the sender can change this message".into(),
        ));
    }
    Ok(msg)
}
