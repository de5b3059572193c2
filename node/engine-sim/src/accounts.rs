//! Per-account state of a cluster-wide sim network: chats (with the account's unread messages), labels and
//! the chats they tag, starred messages, saved contact names and the profile. Only the node serving an
//! account changes it (engine calls run on the session's lease owner, and received traffic is applied where
//! the recipient is online), so each change is written through as one field of the account's record
//! (`Op::AccountField`, batched with the node's other writes, no extra round trip), and a node about to
//! start a session reads its account's record back first (`pull_account`): a session taken over finds what
//! it had. Also here: presence subscriptions, which end with the subscribing device's connection.

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};
use wagate_proto::Jid;

use super::network::{Account, ChatRec, NetState, SimNetwork};
use super::peers::Op;
use wagate_engine_api::{Label, LinkedAccount};

/// The own profile, as one field (`profile`).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Profile {
    push_name: Option<String>,
    status_text: String,
    picture: Option<String>,
}

/// Labels as stored (the engine's `Label` carries no serde form of its own).
#[derive(Debug, Clone, Serialize, Deserialize)]
struct LabelRec {
    id: String,
    name: String,
    color: u8,
}

impl NetState {
    /// Writes (`Some`) or removes one field of `phone`'s record; nothing in embedded mode.
    fn share_field<T: Serialize>(&self, phone: &Jid, field: String, value: Option<&T>) {
        if !self.is_clustered() {
            return;
        }
        let json = match value.map(serde_json::to_string).transpose() {
            Ok(json) => json,
            Err(error) => {
                tracing::warn!(%error, field, "sim account field not shared");
                return;
            }
        };
        self.emit(Op::AccountField {
            phone: phone.clone(),
            field,
            json,
        });
    }

    /// `owner`'s record of `chat` changed (or went).
    pub(super) fn chat_changed(&self, owner: &Jid, chat: &Jid) {
        let rec = self.accounts.get(owner).and_then(|a| a.chats.get(chat));
        self.share_field(owner, format!("chat:{chat}"), rec);
    }

    /// `owner`'s label `id` changed (or went).
    pub(super) fn label_changed(&self, owner: &Jid, id: &str) {
        let rec = self.accounts.get(owner).and_then(|a| a.labels.get(id));
        let rec = rec.map(|l| LabelRec {
            id: l.id.clone(),
            name: l.name.clone(),
            color: l.color,
        });
        self.share_field(owner, format!("label:{id}"), rec.as_ref());
    }

    /// The labels on `owner`'s chat `chat` changed.
    pub(super) fn tags_changed(&self, owner: &Jid, chat: &Jid) {
        let tags = self
            .accounts
            .get(owner)
            .and_then(|a| a.chat_labels.get(chat))
            .filter(|set| !set.is_empty());
        self.share_field(owner, format!("tags:{chat}"), tags);
    }

    /// `owner` starred or unstarred message `id`.
    pub(super) fn star_changed(&self, owner: &Jid, id: &str) {
        let starred = self
            .accounts
            .get(owner)
            .is_some_and(|a| a.starred.contains(id));
        self.share_field(owner, format!("star:{id}"), starred.then_some(&true));
    }

    /// `owner`'s saved name for `contact` changed (or went).
    pub(super) fn name_changed(&self, owner: &Jid, contact: &Jid) {
        let name = self
            .accounts
            .get(owner)
            .and_then(|a| a.saved_names.get(contact));
        self.share_field(owner, format!("name:{contact}"), name);
    }

    /// `owner`'s profile (name, status text, picture) changed.
    pub(super) fn profile_changed(&self, owner: &Jid) {
        let profile = self.accounts.get(owner).map(|a| Profile {
            push_name: a.push_name.clone(),
            status_text: a.status_text.clone(),
            picture: a.picture.clone(),
        });
        self.share_field(owner, "profile".to_string(), profile.as_ref());
    }

    /// `session` follows `phone`'s presence until its device's connection ends.
    pub(super) fn follow(&mut self, session: &str, phone: &Jid) {
        if let Some(device) = self.devices.get_mut(session) {
            device.subscribed.insert(phone.clone());
        }
        self.account(phone)
            .presence_subscribers
            .insert(session.to_string());
    }

    /// Ends every presence subscription of `session` (its connection ended or started afresh), so
    /// subscriber lists only hold connected devices.
    pub(super) fn end_subscriptions(&mut self, session: &str) {
        let Some(device) = self.devices.get_mut(session) else {
            return;
        };
        for phone in std::mem::take(&mut device.subscribed) {
            if let Some(account) = self.accounts.get_mut(&phone) {
                account.presence_subscribers.remove(session);
            }
        }
    }
}

/// An account's record as read back: replaces what this node had of it.
#[derive(Default)]
struct Snapshot {
    chats: BTreeMap<Jid, ChatRec>,
    labels: BTreeMap<String, Label>,
    chat_labels: BTreeMap<Jid, BTreeSet<String>>,
    starred: BTreeSet<String>,
    saved_names: BTreeMap<Jid, String>,
    profile: Option<Profile>,
}

fn parse<T: DeserializeOwned>(field: &str, raw: &str) -> Option<T> {
    serde_json::from_str(raw)
        .inspect_err(|error| tracing::warn!(%error, field, "unreadable sim account field skipped"))
        .ok()
}

impl Snapshot {
    fn read(fields: Vec<(String, String)>) -> Snapshot {
        let mut snap = Snapshot::default();
        for (field, raw) in fields {
            snap.add(&field, &raw);
        }
        snap
    }

    fn add(&mut self, field: &str, raw: &str) {
        if field == "profile" {
            self.profile = parse(field, raw);
            return;
        }
        let Some((kind, key)) = field.split_once(':') else {
            return;
        };
        let jid = || Jid::parse(key).ok();
        match kind {
            "chat" => {
                if let (Some(chat), Some(rec)) = (jid(), parse(field, raw)) {
                    self.chats.insert(chat, rec);
                }
            }
            "label" => {
                if let Some(rec) = parse::<LabelRec>(field, raw) {
                    let label = Label {
                        id: rec.id,
                        name: rec.name,
                        color: rec.color,
                    };
                    self.labels.insert(key.to_string(), label);
                }
            }
            "tags" => {
                if let (Some(chat), Some(tags)) = (jid(), parse(field, raw)) {
                    self.chat_labels.insert(chat, tags);
                }
            }
            "star" => {
                self.starred.insert(key.to_string());
            }
            "name" => {
                if let (Some(contact), Some(name)) = (jid(), parse(field, raw)) {
                    self.saved_names.insert(contact, name);
                }
            }
            _ => {}
        }
    }

    fn apply(self, account: &mut Account) {
        account.chats = self.chats;
        account.labels = self.labels;
        account.chat_labels = self.chat_labels;
        account.starred = self.starred;
        account.saved_names = self.saved_names;
        if let Some(profile) = self.profile {
            account.push_name = profile.push_name;
            account.status_text = profile.status_text;
            account.picture = profile.picture;
        }
    }
}

impl SimNetwork {
    fn serves_phone(&self, phone: &Jid) -> bool {
        let state = self.lock();
        state.sessions_of(phone).iter().any(|s| state.serves(s))
    }

    /// Before `session` starts here (cluster mode): its account's state as the node that served it last
    /// wrote it. Read before the device goes online, so nothing applied here since can be overwritten.
    pub(super) async fn pull_account_of(&self, session: &str, linked: Option<&LinkedAccount>) {
        let Some(peers) = self.peers() else {
            return;
        };
        let phone = match linked {
            Some(account) => Some(account.phone.clone()),
            None => self
                .lock()
                .devices
                .get(session)
                .and_then(|d| d.phone.clone()),
        };
        let Some(phone) = phone else {
            return;
        };
        if self.serves_phone(&phone) {
            // Another device of the account runs here: the local state is the account's newest, and a
            // read could race writes still queued.
            return;
        }
        let fields = match peers.account(&phone).await {
            Ok(fields) => fields,
            Err(error) => {
                tracing::warn!(%error, session_id = session, "sim account state not read");
                return;
            }
        };
        if fields.is_empty() {
            return;
        }
        let snapshot = Snapshot::read(fields);
        snapshot.apply(self.lock().account(&phone));
    }
}
