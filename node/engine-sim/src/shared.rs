//! The sim's records that every node of a cluster acts on: groups, channels, statuses, messages, ringing
//! calls, blocks, presence and who exists (per-account state is in `accounts.rs`). A change is written through to the peers (`share`, an `Op` queued under the
//! lock) and the engine waits for it to land (`flush_peers`) before answering; a node reads the records
//! back into its local state (`pull_*`, before taking the lock) before it uses them. In embedded mode every
//! call here is a no-op: the local state is the whole network. Concurrent changes to one group or channel
//! from two nodes are last-writer-wins (each record carries a revision; an older copy never replaces a
//! newer one).

use serde::Serialize;
use serde::de::DeserializeOwned;
use wagate_proto::Jid;
use wagate_proto::jid::ChatKind;

use super::channels::ChannelRec;
use super::extras::{CallRec, StatusRec};
use super::groups::Group;
use super::messaging::recipients_of;
use super::network::{NetState, SimNetwork, StoredMessage};
use super::peers::{Op, Peers, Record};

impl NetState {
    /// Writes `value` through to the peers as the record `id` of kind `record`.
    pub(super) fn share(&self, record: Record, id: &str, value: &impl Serialize) {
        if !self.is_clustered() {
            return;
        }
        match serde_json::to_string(value) {
            Ok(json) => self.emit(Op::Put {
                record,
                id: id.to_string(),
                json,
            }),
            Err(error) => tracing::warn!(%error, id, "sim record not shared"),
        }
    }

    pub(super) fn unshare(&self, record: Record, id: &str) {
        self.emit(Op::Delete {
            record,
            id: id.to_string(),
        });
    }

    /// A changed group: a new revision, written through.
    pub(super) fn group_changed(&mut self, id: &Jid) {
        if let Some(group) = self.groups.get_mut(id) {
            group.rev += 1;
        }
        if let Some(group) = self.groups.get(id) {
            self.share(Record::Group, &id.to_string(), group);
        }
    }

    /// A changed channel: a new revision, written through.
    pub(super) fn channel_changed(&mut self, id: &Jid) {
        if let Some(channel) = self.channels.get_mut(id) {
            channel.rev += 1;
        }
        if let Some(channel) = self.channels.get(id) {
            self.share(Record::Channel, &id.to_string(), channel);
        }
    }

    /// Digits that make this process's group and channel ids and invite codes unique in a cluster (every
    /// process counts from zero); empty in embedded mode, so ids stay as they always were there.
    pub(super) fn id_salt(&self) -> &str {
        self.salt.as_deref().unwrap_or("")
    }
}

fn parse<T: DeserializeOwned>(raw: &str) -> Option<T> {
    serde_json::from_str(raw)
        .inspect_err(|error| tracing::warn!(%error, "unreadable sim record skipped"))
        .ok()
}

impl SimNetwork {
    pub(super) fn shared_peers(&self) -> Option<&std::sync::Arc<dyn Peers>> {
        self.peers()
    }

    async fn all<T: DeserializeOwned>(&self, record: Record) -> Option<Vec<T>> {
        let peers = self.shared_peers()?;
        match peers.records(record).await {
            Ok(raw) => Some(raw.iter().filter_map(|r| parse(r)).collect()),
            Err(error) => {
                tracing::warn!(%error, ?record, "sim records not read");
                None
            }
        }
    }

    /// Every group as the peers last wrote it; a local copy is replaced only by a newer revision.
    pub async fn pull_groups(&self) {
        let Some(groups) = self.all::<Group>(Record::Group).await else {
            return;
        };
        let mut state = self.lock();
        for group in groups {
            match state.groups.get(&group.id) {
                Some(local) if local.rev >= group.rev => {}
                _ => {
                    state.groups.insert(group.id.clone(), group);
                }
            }
        }
    }

    /// Every channel as the peers last wrote it (deleted ones go).
    pub(super) async fn pull_channels(&self) {
        let Some(channels) = self.all::<ChannelRec>(Record::Channel).await else {
            return;
        };
        let mut state = self.lock();
        let ids: std::collections::BTreeSet<Jid> = channels.iter().map(|c| c.id.clone()).collect();
        state.channels.retain(|id, _| ids.contains(id));
        for channel in channels {
            match state.channels.get(&channel.id) {
                Some(local) if local.rev >= channel.rev => {}
                _ => {
                    state.channels.insert(channel.id.clone(), channel);
                }
            }
        }
    }

    /// The live status posts of the whole network (each is written through when posted or deleted).
    pub(super) async fn pull_statuses(&self) {
        let Some(mut statuses) = self.all::<StatusRec>(Record::Status).await else {
            return;
        };
        statuses.sort_by(|a, b| {
            (a.update.posted_at, &a.update.status_id)
                .cmp(&(b.update.posted_at, &b.update.status_id))
        });
        self.lock().statuses = statuses;
    }

    /// A message first seen on another node (sent there, or received by a session since taken over).
    pub async fn pull_message(&self, id: &str) {
        if self.lock().messages.contains_key(id) {
            return;
        }
        if let Some(msg) = self.keyed::<StoredMessage>(Record::Message, id).await {
            self.lock().messages.entry(msg.id.clone()).or_insert(msg);
        }
    }

    /// A call ringing for a session when it ran on another node.
    pub(super) async fn pull_call(&self, id: &str) {
        if self.lock().calls.contains_key(id) {
            return;
        }
        if let Some(call) = self.keyed::<CallRec>(Record::Call, id).await {
            self.lock().calls.entry(id.to_string()).or_insert(call);
        }
    }

    /// One record of a kind kept under its own key (`Record::is_keyed`), if the peers have it.
    async fn keyed<T: DeserializeOwned>(&self, record: Record, id: &str) -> Option<T> {
        let peers = self.shared_peers()?;
        match peers.record(record, id).await {
            Ok(raw) => parse(&raw?),
            Err(error) => {
                tracing::warn!(%error, ?record, id, "sim record not read");
                None
            }
        }
    }

    /// Makes the phones that exist anywhere exist here too (group rosters, channel owners).
    pub(super) async fn pull_accounts(&self, phones: &[Jid]) {
        let Some(peers) = self.shared_peers() else {
            return;
        };
        for phone in phones {
            if self.lock().exists(phone) {
                continue;
            }
            match peers.exists(phone).await {
                Ok(true) => {
                    self.lock().listed(phone);
                }
                Ok(false) => {}
                Err(error) => tracing::warn!(%error, "sim directory not read"),
            }
        }
    }

    /// Whom each of `phones` blocked, as set on whichever node serves it.
    pub(super) async fn pull_blocks(&self, phones: &[Jid]) {
        let Some(peers) = self.shared_peers() else {
            return;
        };
        let lists = match peers.blocked(phones).await {
            Ok(lists) => lists,
            Err(error) => {
                tracing::warn!(%error, "sim block lists not read");
                return;
            }
        };
        let mut state = self.lock();
        for (phone, list) in phones.iter().zip(lists) {
            if list.is_empty() && !state.exists(phone) {
                continue;
            }
            state.account(phone).blocked = list.into_iter().collect();
        }
    }

    /// The presence of `phones` as their own nodes last wrote it.
    pub(super) async fn pull_presence(&self, phones: &[Jid]) {
        let Some(peers) = self.shared_peers() else {
            return;
        };
        for phone in phones {
            match peers.presence(phone).await {
                Ok(Some((available, last_seen))) => {
                    let mut state = self.lock();
                    let account = state.account(phone);
                    account.available = available;
                    account.last_seen = last_seen;
                }
                Ok(None) => {}
                Err(error) => tracing::warn!(%error, "sim presence not read"),
            }
        }
    }

    /// What a send (or forward) from `session` to `to` reads first: the quoted message, the group or
    /// channel, and the recipients' block lists.
    pub(super) async fn pull_for_send(&self, session: &str, to: &Jid, quoted: Option<&str>) {
        if self.shared_peers().is_none() {
            return;
        }
        if let Some(id) = quoted {
            self.pull_message(id).await;
        }
        match to.kind() {
            ChatKind::Group => self.pull_groups().await,
            ChatKind::Channel => self.pull_channels().await,
            _ => {}
        }
        let phones = {
            let state = self.lock();
            state
                .online_phone(session)
                .and_then(|me| recipients_of(&state, &me, to))
                .unwrap_or_default()
        };
        self.pull_blocks(&phones).await;
    }

    /// What a group or channel operation reads first (`chat` of any kind).
    pub(super) async fn pull_chat(&self, chat: &Jid) {
        match chat.kind() {
            ChatKind::Group => self.pull_groups().await,
            ChatKind::Channel => self.pull_channels().await,
            _ => {}
        }
    }
}

impl SimNetwork {
    /// The members of group `chat` as known here (empty for any other chat).
    pub(super) fn group_members(&self, chat: &Jid) -> Vec<Jid> {
        self.lock()
            .groups
            .get(chat)
            .map(|g| g.members.keys().cloned().collect())
            .unwrap_or_default()
    }
}
