//! Actions on existing messages from the session's side: react, edit, revoke, forward, pin, poll vote,
//! read receipts, unread marks and stars. Input: `SimEngine`; the other side's actions are in `control.rs`.
//! Only the sender may edit or revoke for everyone, and a message deleted for everyone is not edited (404).

use super::control::{find_message, live_message};
use super::messaging::recipients_of;
use super::network::{NetState, SimNetwork, StoredMessage, now};
use super::peers::Record;
use wagate_engine_api::{AckStatus, EngineError, EngineEvent, EngineResult, SentMessage};
use wagate_proto::Jid;

impl SimNetwork {
    pub fn react_own(
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

    pub fn edit_own(
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
        let copy = msg.clone();
        state.share(Record::Message, message_id, &copy);
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
    pub fn revoke_own(
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
        // Deleted for everyone already: nothing is left to delete or to announce again (as the node answers
        // a delete of a stored revoked row).
        if find_message(&mut state, message_id)?.revoked {
            return Ok(());
        }
        let msg = own_message(&mut state, &me, message_id)?;
        msg.revoked = true;
        let copy = msg.clone();
        state.share(Record::Message, message_id, &copy);
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

    pub async fn forward(
        &self,
        session: &str,
        to: &Jid,
        message_id: &str,
    ) -> EngineResult<SentMessage> {
        self.pull_message(message_id).await;
        self.pull_for_send(session, to, None).await;
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
        let (reached, open) = self.publish(&mut state, session, &me, &recipients, copy.clone());
        drop(state);
        self.schedule_acks(session, &copy, reached, open);
        Ok(SentMessage {
            id: copy.id,
            timestamp: copy.timestamp,
        })
    }

    pub fn set_pinned(&self, session: &str, message_id: &str, pinned: bool) -> EngineResult<()> {
        let mut state = self.lock();
        state.online_phone(session)?;
        find_message(&mut state, message_id)?.pinned = pinned;
        Ok(())
    }

    /// Checks the vote against the poll; an empty selection withdraws the vote and passes every check.
    /// The sim keeps no tally and delivers no vote to the poll's sender, so a withdrawal, like a vote,
    /// changes nothing further here.
    pub fn vote_poll(&self, session: &str, poll_id: &str, options: &[String]) -> EngineResult<()> {
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

    /// Read receipts: the senders of the read messages get a `read` ack. With `message_ids` (network ids),
    /// only those messages are read (the socket engine honours the list), so the unread count drops by the
    /// listed ones still unread for this account; without, the whole chat is read. What is unread is the
    /// account's own state (its chat record's unread ids), not the message's ack: a send from another
    /// linked session is acked `read` to its sender by the sim on its own, yet stays unread here until
    /// read. A chat the account never had is 404, not created.
    pub fn mark_read(&self, session: &str, chat: &Jid, message_ids: &[String]) -> EngineResult<()> {
        let mut state = self.lock();
        let me = state.online_phone(session)?;
        known_chat(&state, &me, chat)?;
        let ids = to_read(&state, &me, chat, message_ids);
        let unread = unread_in(&state, &me, chat, message_ids);
        for id in &ids {
            let Some(msg) = state.messages.get_mut(id) else {
                continue;
            };
            msg.ack = AckStatus::Read;
            let (sender, chat_id) = (msg.from.clone(), msg.chat_for(&msg.from));
            let copy = msg.clone();
            state.share(Record::Message, id, &copy);
            let event = EngineEvent::Ack {
                message_id: id.clone(),
                chat_id,
                status: AckStatus::Read,
            };
            state.deliver_to_phone(&sender, &event);
        }
        let rec = state.account(&me).chats.entry(chat.clone()).or_default();
        rec.unread = if message_ids.is_empty() {
            0
        } else {
            let read = u32::try_from(unread.len()).unwrap_or(u32::MAX);
            rec.unread.saturating_sub(read)
        };
        rec.unread_ids.retain(|id| !unread.contains(id));
        state.chat_changed(&me, chat);
        Ok(())
    }

    /// The messages of `chat` a `mark-read` would acknowledge that a cluster-wide network may not hold here
    /// yet (the session was taken over): read back before `mark_read`.
    pub async fn pull_unread(&self, session: &str, chat: &Jid, message_ids: &[String]) {
        if self.peers().is_none() {
            return;
        }
        let ids = {
            let state = self.lock();
            let Ok(me) = state.online_phone(session) else {
                return;
            };
            unread_in(&state, &me, chat, message_ids)
        };
        for id in ids {
            self.pull_message(&id).await;
        }
    }

    pub fn mark_unread(&self, session: &str, chat: &Jid) -> EngineResult<()> {
        let mut state = self.lock();
        let me = state.online_phone(session)?;
        known_chat(&state, &me, chat)?;
        let rec = state.account(&me).chats.entry(chat.clone()).or_default();
        rec.unread = rec.unread.max(1);
        state.chat_changed(&me, chat);
        Ok(())
    }

    pub fn star(&self, session: &str, message_id: &str, star: bool) -> EngineResult<()> {
        let mut state = self.lock();
        let me = state.online_phone(session)?;
        find_message(&mut state, message_id)?;
        let starred = &mut state.account(&me).starred;
        if star {
            starred.insert(message_id.to_string());
        } else {
            starred.remove(message_id);
        }
        state.star_changed(&me, message_id);
        Ok(())
    }

    /// A button reply needs the message it answers; the sim's messages carry no buttons to check.
    pub fn click_button(&self, session: &str, message_id: &str) -> EngineResult<()> {
        let mut state = self.lock();
        state.online_phone(session)?;
        find_message(&mut state, message_id)?;
        Ok(())
    }
}

/// The messages of `chat` (of `message_ids`, or all) whose senders get a read receipt. Embedded: messages
/// from others whose copy is not `read` yet. Cluster: the chat record's unread ids (the account's own read
/// state, which follows a session taken over), whose copies were read back first.
fn to_read(state: &NetState, me: &Jid, chat: &Jid, message_ids: &[String]) -> Vec<String> {
    if state.is_clustered() {
        return unread_in(state, me, chat, message_ids)
            .into_iter()
            .filter(|id| state.messages.get(id).is_some_and(|m| m.from != *me))
            .collect();
    }
    state
        .messages
        .values()
        .filter(|m| m.from != *me && m.chat_for(me) == *chat)
        .filter(|m| message_ids.is_empty() || message_ids.contains(&m.id))
        .filter(|m| m.ack < AckStatus::Read)
        .map(|m| m.id.clone())
        .collect()
}

/// The account's record of `chat` exists: reads and clears of a chat it never had are refused rather than
/// creating an empty chat.
pub(super) fn known_chat(state: &NetState, me: &Jid, chat: &Jid) -> EngineResult<()> {
    match state.accounts.get(me).and_then(|a| a.chats.get(chat)) {
        Some(_) => Ok(()),
        None => Err(EngineError::NotFound(format!("Chat {chat} not found"))),
    }
}

/// The chat record's unread ids (of `message_ids`, or all): what a read takes off the unread count. Only
/// the newest `UNREAD_IDS_MAX` are remembered, so naming an older unread message leaves the count as is.
fn unread_in(state: &NetState, me: &Jid, chat: &Jid, message_ids: &[String]) -> Vec<String> {
    state
        .accounts
        .get(me)
        .and_then(|a| a.chats.get(chat))
        .map(|rec| {
            rec.unread_ids
                .iter()
                .filter(|id| message_ids.is_empty() || message_ids.contains(id))
                .cloned()
                .collect()
        })
        .unwrap_or_default()
}

/// The account's own message, still in its chat (one deleted for everyone is 404).
fn own_message<'a>(
    state: &'a mut NetState,
    me: &Jid,
    id: &str,
) -> EngineResult<&'a mut StoredMessage> {
    let msg = live_message(state, id)?;
    if msg.from != *me {
        return Err(EngineError::Rejected(
            "only the sender can change this message".into(),
        ));
    }
    Ok(msg)
}
