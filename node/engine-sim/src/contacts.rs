//! Chats, contacts, presence and the own profile on the sim network. A session's contacts are the
//! accounts it exchanged messages with (plus saved ones); a number "exists" when some session linked it or
//! it sent through the control API's `inbound`. Input: `SimEngine`.

use super::network::{NetState, SimNetwork, now};
use super::peers::{Op, Traffic};
use wagate_engine_api::{
    ChatState, ChatSummary, Contact, ContactCheck, EngineError, EngineEvent, EngineResult,
    PresenceEntry, PresenceState,
};
use wagate_proto::Jid;

impl NetState {
    fn chat_name(&self, me: &Jid, chat: &Jid) -> String {
        if let Some(group) = self.groups.get(chat) {
            return group.subject.clone();
        }
        if let Some(channel) = self.channels.get(chat) {
            return channel.name.clone();
        }
        let saved = self
            .accounts
            .get(me)
            .and_then(|a| a.saved_names.get(chat).cloned());
        saved
            .or_else(|| self.accounts.get(chat).and_then(|a| a.push_name.clone()))
            .unwrap_or_else(|| chat.user().to_string())
    }

    /// The chat's last message as the chat list shows it: read through the message itself, so an edit
    /// (by either side) shows, and one deleted for everyone shows nothing (its text is gone from the chat
    /// list as from the stored history). The copy the chat took is the fallback when this process does not
    /// hold the message (a cluster's other node sent it); a cleared chat has none.
    fn last_message(&self, rec: &super::network::ChatRec) -> Option<String> {
        let copy = rec.last_body.as_ref()?;
        match rec.last_id.as_ref().and_then(|id| self.messages.get(id)) {
            Some(msg) if msg.revoked => None,
            Some(msg) => Some(msg.body.clone()),
            None => Some(copy.clone()),
        }
    }

    fn contact(&self, me: &Jid, id: &Jid) -> Contact {
        let mine = self.accounts.get(me);
        let theirs = self.accounts.get(id);
        Contact {
            id: id.clone(),
            name: mine.and_then(|a| a.saved_names.get(id).cloned()),
            push_name: theirs.and_then(|a| a.push_name.clone()),
            is_blocked: mine.is_some_and(|a| a.blocked.contains(id)),
            is_my_contact: mine.is_some_and(|a| a.saved_names.contains_key(id)),
            profile_pic_url: theirs.and_then(|a| a.picture.clone()),
        }
    }

    fn presence_entry(&self, id: &Jid) -> PresenceEntry {
        let last_seen = self.accounts.get(id).and_then(|a| a.last_seen);
        PresenceEntry {
            id: id.clone(),
            state: self.presence_state(id),
            last_seen,
        }
    }

    /// Tells every session subscribed to `me`'s presence about `state`. In a cluster only subscribers
    /// served here (`serves`) are told here; the others, wherever they run, through their inboxes.
    fn broadcast_presence(&mut self, me: &Jid, state: PresenceState) {
        let Some(account) = self.accounts.get(me) else {
            return;
        };
        let subscribers: Vec<String> = account.presence_subscribers.iter().cloned().collect();
        let entry = PresenceEntry {
            id: me.clone(),
            state,
            last_seen: account.last_seen,
        };
        let event = EngineEvent::Presence {
            chat_id: me.clone(),
            participants: vec![entry.clone()],
        };
        let is_clustered = self.is_clustered();
        let mut served = Vec::new();
        for session in subscribers {
            if is_clustered && !self.serves(&session) {
                continue;
            }
            self.deliver(&session, event.clone());
            served.push(session);
        }
        if is_clustered {
            self.emit(Op::ToSubscribers {
                phone: me.clone(),
                traffic: Box::new(Traffic::Presence {
                    chat_id: me.clone(),
                    participants: vec![entry],
                }),
                skip: served,
            });
        }
    }
}

impl SimNetwork {
    /// The phone of a session connected here, or `NotReady`.
    pub fn online_phone(&self, session: &str) -> EngineResult<Jid> {
        self.lock().online_phone(session)
    }

    pub fn list_chats(&self, session: &str) -> EngineResult<Vec<ChatSummary>> {
        let state = self.lock();
        let me = state.online_phone(session)?;
        let Some(account) = state.accounts.get(&me) else {
            return Ok(Vec::new());
        };
        let mut chats: Vec<ChatSummary> = account
            .chats
            .iter()
            .map(|(id, rec)| ChatSummary {
                id: id.clone(),
                name: state.chat_name(&me, id),
                archived: rec.archived,
                pinned: rec.pinned,
                muted: rec.muted_until.is_some(),
                mute_expiration: rec.muted_until.unwrap_or(0),
                unread_count: rec.unread,
                timestamp: rec.last_timestamp,
                last_message: state.last_message(rec),
            })
            .collect();
        chats.sort_by(|a, b| b.pinned.cmp(&a.pinned).then(b.timestamp.cmp(&a.timestamp)));
        Ok(chats)
    }

    /// Applies `change` to the session's record of `chat`; a chat the account never had (and no group it
    /// belongs to) is 404 (as read and clear), not created as an empty chat in the list.
    pub(super) fn update_chat(
        &self,
        session: &str,
        chat: &Jid,
        change: impl FnOnce(&mut super::network::ChatRec),
    ) -> EngineResult<()> {
        let mut state = self.lock();
        let me = state.online_phone(session)?;
        // A group the account belongs to is a chat from its creation, before any message arrives.
        let member = state
            .groups
            .get(chat)
            .is_some_and(|g| g.members.contains_key(&me));
        if !member {
            super::actions::known_chat(&state, &me, chat)?;
        }
        change(state.account(&me).chats.entry(chat.clone()).or_default());
        state.chat_changed(&me, chat);
        Ok(())
    }

    /// Empties the chat, keeping it in the list; a chat the account never had is 404 (as delete), not
    /// created.
    pub fn clear_chat(&self, session: &str, chat: &Jid) -> EngineResult<()> {
        let mut state = self.lock();
        let me = state.online_phone(session)?;
        super::actions::known_chat(&state, &me, chat)?;
        if let Some(rec) = state.account(&me).chats.get_mut(chat) {
            rec.last_body = None;
            rec.unread = 0;
            rec.unread_ids.clear();
        }
        state.chat_changed(&me, chat);
        Ok(())
    }

    pub fn delete_chat(&self, session: &str, chat: &Jid) -> EngineResult<()> {
        let mut state = self.lock();
        let me = state.online_phone(session)?;
        state
            .account(&me)
            .chats
            .remove(chat)
            .ok_or_else(|| EngineError::NotFound(format!("Chat {chat} not found")))?;
        state.chat_changed(&me, chat);
        Ok(())
    }

    /// Typing indicators reach the other side's presence subscribers.
    pub fn set_chat_state(
        &self,
        session: &str,
        _chat: &Jid,
        chat_state: ChatState,
    ) -> EngineResult<()> {
        let mut state = self.lock();
        let me = state.online_phone(session)?;
        let presence = match chat_state {
            ChatState::Typing => PresenceState::Composing,
            ChatState::Recording => PresenceState::Recording,
            ChatState::Paused => PresenceState::Paused,
        };
        state.broadcast_presence(&me, presence);
        Ok(())
    }

    /// The session's contacts: those known here plus `elsewhere` (exchanges recorded by peers).
    pub fn list_contacts(&self, session: &str, elsewhere: &[Jid]) -> EngineResult<Vec<Contact>> {
        let state = self.lock();
        let me = state.online_phone(session)?;
        let mut ids: Vec<&Jid> = elsewhere.iter().collect();
        if let Some(account) = state.accounts.get(&me) {
            ids.extend(account.contacts.iter());
            ids.extend(account.saved_names.keys());
        }
        ids.sort();
        ids.dedup();
        Ok(ids.into_iter().map(|id| state.contact(&me, id)).collect())
    }

    /// A contact of the session; `exists_elsewhere` says a peer knows the account.
    pub fn get_contact(
        &self,
        session: &str,
        id: &Jid,
        exists_elsewhere: bool,
    ) -> EngineResult<Contact> {
        let state = self.lock();
        let me = state.online_phone(session)?;
        let known = state
            .accounts
            .get(&me)
            .is_some_and(|a| a.contacts.contains(id) || a.saved_names.contains_key(id));
        if !known && !exists_elsewhere && !state.exists(id) {
            return Err(EngineError::NotFound(format!("Contact {id} not found")));
        }
        Ok(state.contact(&me, id))
    }

    pub fn check_number(&self, session: &str, number: &str) -> EngineResult<ContactCheck> {
        let whatsapp_id =
            Jid::from_phone(number).map_err(|e| EngineError::BadInput(e.to_string()))?;
        let state = self.lock();
        state.online_phone(session)?;
        Ok(ContactCheck {
            number: number.to_string(),
            exists: state.exists(&whatsapp_id),
            whatsapp_id,
        })
    }

    pub fn profile_picture(&self, session: &str, id: &Jid) -> EngineResult<Option<String>> {
        let state = self.lock();
        state.online_phone(session)?;
        if let Some(group) = state.groups.get(id) {
            return Ok(group.picture.clone());
        }
        Ok(state.accounts.get(id).and_then(|a| a.picture.clone()))
    }

    pub fn set_blocked(&self, session: &str, id: &Jid, blocked: bool) -> EngineResult<()> {
        let mut state = self.lock();
        let me = state.online_phone(session)?;
        let list = &mut state.account(&me).blocked;
        if blocked {
            list.insert(id.clone());
        } else {
            list.remove(id);
        }
        state.emit(Op::Block {
            phone: me,
            target: id.clone(),
            blocked,
        });
        Ok(())
    }

    pub fn blocked(&self, session: &str) -> EngineResult<Vec<Jid>> {
        let state = self.lock();
        let me = state.online_phone(session)?;
        Ok(state
            .accounts
            .get(&me)
            .map(|a| a.blocked.iter().cloned().collect())
            .unwrap_or_default())
    }

    /// Saves (`Some(name)`) or deletes (`None`) an address-book entry.
    pub fn save_contact(&self, session: &str, id: &Jid, name: Option<String>) -> EngineResult<()> {
        let mut state = self.lock();
        let me = state.online_phone(session)?;
        let account = state.account(&me);
        match name {
            Some(name) => {
                account.saved_names.insert(id.clone(), name);
            }
            None => {
                account.saved_names.remove(id);
                account.contacts.remove(id);
            }
        }
        state.name_changed(&me, id);
        Ok(())
    }

    pub fn set_presence(&self, session: &str, available: bool) -> EngineResult<()> {
        let mut state = self.lock();
        let me = state.online_phone(session)?;
        let account = state.account(&me);
        account.available = available;
        if !available {
            account.last_seen = Some(now());
        }
        let last_seen = account.last_seen;
        state.emit(Op::Presence {
            phone: me.clone(),
            available,
            last_seen,
        });
        let presence = if available {
            PresenceState::Available
        } else {
            PresenceState::Unavailable
        };
        state.broadcast_presence(&me, presence);
        Ok(())
    }

    /// Subscribes and answers with the current presence right away, as the network does. A number not on
    /// the network is accepted and never reports (the network does not refuse the subscription either).
    pub fn subscribe_presence(&self, session: &str, chat: &Jid) -> EngineResult<()> {
        let mut state = self.lock();
        state.online_phone(session)?;
        if !state.exists(chat) {
            return Ok(());
        }
        state.follow(session, chat);
        state.emit(Op::Subscribe {
            phone: chat.clone(),
            session: session.to_string(),
        });
        let entry = state.presence_entry(chat);
        state.deliver(
            session,
            EngineEvent::Presence {
                chat_id: chat.clone(),
                participants: vec![entry],
            },
        );
        Ok(())
    }

    pub fn presence(&self, session: &str, chat: &Jid) -> EngineResult<Option<Vec<PresenceEntry>>> {
        let state = self.lock();
        let me = state.online_phone(session)?;
        if let Some(group) = state.groups.get(chat) {
            // The other members: the account's own presence is its own to set, not to observe.
            return Ok(Some(
                group
                    .members
                    .keys()
                    .filter(|m| **m != me)
                    .map(|m| state.presence_entry(m))
                    .collect(),
            ));
        }
        Ok(state.exists(chat).then(|| vec![state.presence_entry(chat)]))
    }

    /// Applies `change` to the session's own account (name, status text, picture).
    pub(super) fn update_profile(
        &self,
        session: &str,
        change: impl FnOnce(&mut super::network::Account, u64),
    ) -> EngineResult<()> {
        let mut state = self.lock();
        let me = state.online_phone(session)?;
        let seq = state.next_seq();
        change(state.account(&me), seq);
        state.profile_changed(&me);
        Ok(())
    }
}
