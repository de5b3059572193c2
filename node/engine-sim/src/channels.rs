//! Channels (newsletters) and labels on the sim network. Per the socket column, channel lists, channel
//! messages and label reads are not offered by the sim engine; only the writes and lookups live here.
//! Input: `SimEngine`.

use super::network::{NetState, SimNetwork, now};
use super::peers::Record;
use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;
use wagate_engine_api::{Channel, EngineError, EngineResult, Label, LabelUpsert};
use wagate_proto::Jid;

/// A channel as the network keeps it; in a cluster also its shared record (`shared.rs`).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(super) struct ChannelRec {
    pub id: Jid,
    pub name: String,
    pub description: String,
    pub invite_code: String,
    pub owner: Jid,
    pub admins: BTreeSet<Jid>,
    pub subscribers: BTreeSet<Jid>,
    pub muted: BTreeSet<Jid>,
    pub created_at: i64,
    /// Bumped on every change, so a node never replaces its copy with an older one.
    #[serde(default)]
    pub rev: u64,
}

impl ChannelRec {
    fn view(&self, me: &Jid) -> Channel {
        Channel {
            id: self.id.clone(),
            name: self.name.clone(),
            description: self.description.clone(),
            invite_code: self.invite_code.clone(),
            subscriber_count: self.subscribers.len(),
            picture: None,
            verified: false,
            created_at: self.created_at,
            is_owner: self.owner == *me,
            is_muted: self.muted.contains(me),
        }
    }
}

fn not_found(id: &Jid) -> EngineError {
    EngineError::NotFound(format!("Channel {id} not found"))
}

impl NetState {
    fn channel(&mut self, id: &Jid) -> EngineResult<&mut ChannelRec> {
        self.channels.get_mut(id).ok_or_else(|| not_found(id))
    }

    fn owned_channel(&mut self, me: &Jid, id: &Jid) -> EngineResult<&mut ChannelRec> {
        let channel = self.channel(id)?;
        if channel.owner != *me {
            return Err(EngineError::Rejected(
                "only the channel owner can do this".into(),
            ));
        }
        Ok(channel)
    }
}

impl SimNetwork {
    pub fn create_channel(
        &self,
        session: &str,
        name: &str,
        description: Option<&str>,
    ) -> EngineResult<Channel> {
        let mut state = self.lock();
        let me = state.online_phone(session)?;
        let seq = state.next_seq();
        let salt = state.id_salt().to_string();
        let id = Jid::parse(&format!("120363{salt}{seq:012}@newsletter"))
            .map_err(|e| EngineError::Network(e.to_string()))?;
        let channel = ChannelRec {
            id: id.clone(),
            name: name.to_string(),
            description: description.unwrap_or_default().to_string(),
            invite_code: format!("SIMCH{salt}{seq:010}"),
            owner: me.clone(),
            admins: BTreeSet::new(),
            subscribers: BTreeSet::new(),
            muted: BTreeSet::new(),
            created_at: now(),
            rev: 0,
        };
        let view = channel.view(&me);
        state.channels.insert(id.clone(), channel);
        state.channel_changed(&id);
        Ok(view)
    }

    pub fn channel_info(&self, session: &str, id: &Jid) -> EngineResult<Channel> {
        let mut state = self.lock();
        let me = state.online_phone(session)?;
        Ok(state.channel(id)?.view(&me))
    }

    pub fn subscribe_channel(&self, session: &str, code: &str) -> EngineResult<Channel> {
        let mut state = self.lock();
        let me = state.online_phone(session)?;
        let channel = state.channels.values_mut().find(|c| c.invite_code == code);
        let channel =
            channel.ok_or_else(|| EngineError::NotFound("Invite code not found".into()))?;
        channel.subscribers.insert(me.clone());
        let (id, view) = (channel.id.clone(), channel.view(&me));
        state.channel_changed(&id);
        Ok(view)
    }

    pub fn unsubscribe_channel(&self, session: &str, id: &Jid) -> EngineResult<()> {
        let mut state = self.lock();
        let me = state.online_phone(session)?;
        state.channel(id)?.subscribers.remove(&me);
        state.channel_changed(id);
        Ok(())
    }

    pub fn delete_channel(&self, session: &str, id: &Jid) -> EngineResult<()> {
        let mut state = self.lock();
        let me = state.online_phone(session)?;
        state.owned_channel(&me, id)?;
        state.channels.remove(id);
        state.unshare(Record::Channel, &id.to_string());
        Ok(())
    }

    pub fn mute_channel(&self, session: &str, id: &Jid, mute: bool) -> EngineResult<()> {
        let mut state = self.lock();
        let me = state.online_phone(session)?;
        let channel = state.channel(id)?;
        if mute {
            channel.muted.insert(me);
        } else {
            channel.muted.remove(&me);
        }
        state.channel_changed(id);
        Ok(())
    }

    pub fn demote_channel_admin(&self, session: &str, id: &Jid, user: &Jid) -> EngineResult<()> {
        let mut state = self.lock();
        let me = state.online_phone(session)?;
        let channel = state.owned_channel(&me, id)?;
        // Demoting a subscriber who holds no admin role leaves them as they are, as the network does.
        if !channel.admins.remove(user) && !channel.subscribers.contains(user) {
            return Err(EngineError::NotFound(format!(
                "{user} is not a member of this channel"
            )));
        }
        state.channel_changed(id);
        Ok(())
    }

    /// Irreversible: the new owner must exist; the old owner stays on as an admin.
    pub fn transfer_channel_owner(
        &self,
        session: &str,
        id: &Jid,
        new_owner: &Jid,
    ) -> EngineResult<()> {
        let mut state = self.lock();
        let me = state.online_phone(session)?;
        if !state.exists(new_owner) {
            return Err(EngineError::NotFound(format!(
                "Account {new_owner} not found"
            )));
        }
        let channel = state.owned_channel(&me, id)?;
        channel.admins.remove(new_owner);
        channel.admins.insert(me);
        channel.owner = new_owner.clone();
        channel.subscribers.insert(new_owner.clone());
        state.channel_changed(id);
        Ok(())
    }

    /// Creates (no id, or an unknown id) or edits a label of the session's account.
    pub fn upsert_label(&self, session: &str, upsert: LabelUpsert) -> EngineResult<Label> {
        let mut state = self.lock();
        let me = state.online_phone(session)?;
        if upsert.color.is_some_and(|c| c > 19) {
            return Err(EngineError::BadInput("label color must be 0-19".into()));
        }
        let seq = state.next_seq();
        // Per-process counters meet in a cluster: the salt keeps a new label from reusing another's id.
        let fresh = format!("{}{seq}", state.id_salt());
        let labels = &mut state.account(&me).labels;
        let id = upsert.id.unwrap_or(fresh);
        if upsert.name.is_none() && !labels.contains_key(&id) {
            return Err(EngineError::BadInput(
                "name is required to create a label".into(),
            ));
        }
        let label = labels.entry(id.clone()).or_insert_with(|| Label {
            id,
            name: String::new(),
            color: 0,
        });
        if let Some(name) = upsert.name {
            label.name = name;
        }
        if let Some(color) = upsert.color {
            label.color = color;
        }
        let label = label.clone();
        state.label_changed(&me, &label.id);
        Ok(label)
    }

    pub fn delete_label(&self, session: &str, id: &str) -> EngineResult<()> {
        let mut state = self.lock();
        let me = state.online_phone(session)?;
        let account = state.account(&me);
        account
            .labels
            .remove(id)
            .ok_or_else(|| EngineError::NotFound(format!("Label {id} not found")))?;
        let mut tagged = Vec::new();
        for (chat, set) in account.chat_labels.iter_mut() {
            if set.remove(id) {
                tagged.push(chat.clone());
            }
        }
        state.label_changed(&me, id);
        for chat in tagged {
            state.tags_changed(&me, &chat);
        }
        Ok(())
    }

    /// Adds (`add`) or removes a label on a chat.
    pub fn tag_chat(&self, session: &str, chat: &Jid, label: &str, add: bool) -> EngineResult<()> {
        let mut state = self.lock();
        let me = state.online_phone(session)?;
        let account = state.account(&me);
        if !account.labels.contains_key(label) {
            return Err(EngineError::NotFound(format!("Label {label} not found")));
        }
        let set = account.chat_labels.entry(chat.clone()).or_default();
        if add {
            set.insert(label.to_string());
        } else {
            set.remove(label);
        }
        state.tags_changed(&me, chat);
        Ok(())
    }
}
