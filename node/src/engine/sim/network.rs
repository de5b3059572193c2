//! The simulated WhatsApp network's shared state: accounts by phone, linked devices by session id,
//! stored messages, groups, channels, statuses, calls and the catalog, behind one lock. Engines and the
//! control API (`control.rs`) mutate it through the feature files; this file owns only the core
//! records, event delivery and id generation. It performs no network I/O.

use crate::engine::{
    AckStatus, EngineError, EngineEvent, EngineResult, InboundMessage, Label, Location,
    MessageType, Poll, PresenceState, Product, QuotedRef, ReceivedMedia,
};
use parking_lot::{Mutex, MutexGuard};
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::mpsc::UnboundedSender;
use wagate_proto::Jid;

use super::channels::ChannelRec;
use super::extras::{CallRec, StatusRec};
use super::groups::Group;

/// Timings and id format of one sim network. Tests shrink or pin these.
#[derive(Debug, Clone)]
pub(crate) struct SimConfig {
    /// How often an unscanned QR rotates.
    pub qr_interval: Duration,
    /// How long `authenticating` lasts after a scan.
    pub link_delay: Duration,
    /// Gap between a send and each of its acks (server, delivered, read).
    pub ack_delay: Duration,
    /// Prefix of every id the network hands out; ids are this prefix plus a counter.
    pub id_prefix: String,
}

impl Default for SimConfig {
    fn default() -> Self {
        Self {
            qr_interval: Duration::from_secs(20),
            link_delay: Duration::from_millis(100),
            ack_delay: Duration::from_millis(100),
            id_prefix: "3EB0SIM".to_string(),
        }
    }
}

/// One simulated network, shared by every sim engine of the process. Created at boot (or per test) and
/// handed to the factory and to the control routes; cloning shares the same network.
#[derive(Clone)]
pub(crate) struct SimNetwork {
    inner: Arc<Inner>,
}

struct Inner {
    config: SimConfig,
    /// A plain (non-async) mutex: no `.await` ever happens while it is held, and every critical section
    /// is a few map operations, so contention stays short even with many sessions.
    state: Mutex<NetState>,
}

/// Where a device's link stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(super) enum Link {
    #[default]
    Offline,
    AwaitingQr,
    Linking,
    Online,
}

/// A linked (or linking) device: one session's view of the network.
#[derive(Debug, Default)]
pub(super) struct Device {
    pub phone: Option<Jid>,
    pub credentials: Option<String>,
    pub link: Link,
    pub events: Option<UnboundedSender<EngineEvent>>,
    /// Network traffic that arrived while the device was linked but offline; flushed on reconnect.
    pub pending: Vec<EngineEvent>,
    pub outbox: Vec<OutboxEntry>,
    pub failing_starts: u32,
    /// Bumped on every start so a stale QR rotation task stops.
    pub qr_generation: u64,
    pub pairing_phone: Option<Jid>,
}

/// What a session put on the network (the control API's `outbox`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct OutboxEntry {
    pub message_id: String,
    pub to: Jid,
    pub kind: MessageType,
    pub body: String,
    pub timestamp: i64,
}

/// An account on the network, keyed by its phone JID.
#[derive(Debug, Default)]
pub(super) struct Account {
    pub push_name: Option<String>,
    pub status_text: String,
    pub picture: Option<String>,
    pub contacts: BTreeSet<Jid>,
    pub saved_names: BTreeMap<Jid, String>,
    pub blocked: BTreeSet<Jid>,
    pub chats: BTreeMap<Jid, ChatRec>,
    pub labels: BTreeMap<String, Label>,
    pub chat_labels: BTreeMap<Jid, BTreeSet<String>>,
    pub starred: BTreeSet<String>,
    pub available: bool,
    pub last_seen: Option<i64>,
    /// Sessions that subscribed to this account's presence.
    pub presence_subscribers: BTreeSet<String>,
}

/// Per-account chat state.
#[derive(Debug, Clone, Default)]
pub(super) struct ChatRec {
    pub archived: bool,
    pub pinned: bool,
    /// Epoch ms; `Some(0)` = muted indefinitely.
    pub muted_until: Option<i64>,
    pub unread: u32,
    pub last_timestamp: i64,
    pub last_body: Option<String>,
}

/// A message as the network remembers it.
#[derive(Debug, Clone)]
pub(super) struct StoredMessage {
    pub id: String,
    pub from: Jid,
    /// Recipient phone, group or channel.
    pub to: Jid,
    pub kind: MessageType,
    pub body: String,
    pub timestamp: i64,
    pub media: Option<ReceivedMedia>,
    pub quoted: Option<QuotedRef>,
    pub mentions: Vec<Jid>,
    pub location: Option<Location>,
    pub poll: Option<Poll>,
    pub ack: AckStatus,
    pub revoked: bool,
    pub pinned: bool,
}

impl StoredMessage {
    /// The chat this message lives in, as `viewer` sees it.
    pub(super) fn chat_for(&self, viewer: &Jid) -> Jid {
        if !matches!(self.to.kind(), wagate_proto::jid::ChatKind::Individual)
            || *viewer == self.from
        {
            self.to.clone()
        } else {
            self.from.clone()
        }
    }

    pub(super) fn to_inbound(&self, viewer: &Jid) -> InboundMessage {
        let in_group = self.to.is_group();
        InboundMessage {
            id: self.id.clone(),
            chat_id: self.chat_for(viewer),
            from: self.from.clone(),
            to: self.to.clone(),
            author: in_group.then(|| self.from.clone()),
            from_me: *viewer == self.from,
            kind: self.kind,
            body: self.body.clone(),
            timestamp: self.timestamp,
            media: self.media.clone(),
            quoted: self.quoted.clone(),
            mentioned_ids: self.mentions.clone(),
            location: self.location.clone(),
            poll: self.poll.clone(),
        }
    }
}

/// Everything behind the network's lock.
#[derive(Debug, Default)]
pub(super) struct NetState {
    next_id: u64,
    pub devices: HashMap<String, Device>,
    pub accounts: BTreeMap<Jid, Account>,
    /// Credentials the phone logged out; a start presenting one is an authentication failure.
    pub revoked: HashSet<String>,
    pub messages: HashMap<String, StoredMessage>,
    pub groups: BTreeMap<Jid, Group>,
    pub channels: BTreeMap<Jid, ChannelRec>,
    pub statuses: Vec<StatusRec>,
    pub calls: HashMap<String, CallRec>,
    pub catalog: Vec<Product>,
    pub query_delay: Option<Duration>,
}

impl NetState {
    /// The next value of the network-wide counter; every id derives from it, so runs are reproducible.
    pub(super) fn next_seq(&mut self) -> u64 {
        self.next_id += 1;
        self.next_id
    }

    pub(super) fn account(&mut self, phone: &Jid) -> &mut Account {
        self.accounts.entry(phone.clone()).or_default()
    }

    pub(super) fn exists(&self, phone: &Jid) -> bool {
        self.accounts.contains_key(phone)
    }

    /// The phone of a connected session, or `NotReady`.
    pub(super) fn online_phone(&self, session: &str) -> EngineResult<Jid> {
        match self.devices.get(session) {
            Some(Device {
                link: Link::Online,
                phone: Some(phone),
                ..
            }) => Ok(phone.clone()),
            _ => Err(EngineError::NotReady),
        }
    }

    /// Sessions linked to `phone`, online or not.
    pub(super) fn sessions_of(&self, phone: &Jid) -> Vec<String> {
        let mut ids: Vec<String> = self
            .devices
            .iter()
            .filter(|(_, d)| d.phone.as_ref() == Some(phone))
            .map(|(id, _)| id.clone())
            .collect();
        ids.sort();
        ids
    }

    pub(super) fn has_device(&self, phone: &Jid) -> bool {
        self.devices
            .values()
            .any(|d| d.phone.as_ref() == Some(phone))
    }

    /// Sends a lifecycle event to the session's engine whatever its link state.
    pub(super) fn signal(&mut self, session: &str, event: EngineEvent) {
        if let Some(tx) = self.devices.get(session).and_then(|d| d.events.as_ref()) {
            // A closed channel means the engine was dropped; nobody is left to tell.
            let _ = tx.send(event);
        }
    }

    /// Delivers network traffic: now when online, later when linked but offline, never when unlinked.
    pub(super) fn deliver(&mut self, session: &str, event: EngineEvent) {
        let Some(device) = self.devices.get_mut(session) else {
            return;
        };
        if device.phone.is_none() {
            return;
        }
        match (&device.link, &device.events) {
            (Link::Online, Some(tx)) => {
                if let Err(unsent) = tx.send(event) {
                    device.pending.push(unsent.0);
                }
            }
            _ => device.pending.push(event),
        }
    }

    pub(super) fn deliver_to_phone(&mut self, phone: &Jid, event: &EngineEvent) {
        for session in self.sessions_of(phone) {
            self.deliver(&session, event.clone());
        }
    }

    /// Marks the device online and hands it what queued up while it was away.
    pub(super) fn go_online(&mut self, session: &str) {
        let Some(device) = self.devices.get_mut(session) else {
            return;
        };
        device.link = Link::Online;
        let pending = std::mem::take(&mut device.pending);
        for event in pending {
            self.deliver(session, event);
        }
    }

    /// Records that `a` and `b` exchanged a message: each becomes the other's contact (if it exists).
    pub(super) fn note_exchange(&mut self, a: &Jid, b: &Jid) {
        if self.exists(b) {
            self.account(a).contacts.insert(b.clone());
        }
        if self.exists(a) {
            self.account(b).contacts.insert(a.clone());
        }
    }

    /// Updates `owner`'s chat `chat` with a new message.
    pub(super) fn touch_chat(
        &mut self,
        owner: &Jid,
        chat: &Jid,
        msg: &StoredMessage,
        unread: bool,
    ) {
        let rec = self.account(owner).chats.entry(chat.clone()).or_default();
        rec.last_timestamp = msg.timestamp;
        rec.last_body = Some(msg.body.clone());
        if unread {
            rec.unread += 1;
        }
    }

    pub(super) fn presence_state(&self, phone: &Jid) -> PresenceState {
        match self.accounts.get(phone) {
            Some(acc) if acc.available => PresenceState::Available,
            _ => PresenceState::Unavailable,
        }
    }
}

impl SimNetwork {
    pub(crate) fn new(config: SimConfig) -> Self {
        let state = NetState {
            catalog: super::extras::default_catalog(),
            ..NetState::default()
        };
        Self {
            inner: Arc::new(Inner {
                config,
                state: Mutex::new(state),
            }),
        }
    }

    pub(crate) fn config(&self) -> &SimConfig {
        &self.inner.config
    }

    pub(super) fn lock(&self) -> MutexGuard<'_, NetState> {
        self.inner.state.lock()
    }

    /// A fresh network-wide id with the configured prefix (message ids, status ids, call ids).
    pub(super) fn next_id(&self, state: &mut NetState) -> String {
        format!("{}{:012X}", self.inner.config.id_prefix, state.next_seq())
    }

    /// Waits out the injected query delay, so callers can exercise their 503 budget.
    pub(super) async fn query_gate(&self) {
        let delay = self.lock().query_delay;
        if let Some(delay) = delay {
            tokio::time::sleep(delay).await;
        }
    }
}

/// Current time in Unix seconds (wall clock; sim timing itself runs on tokio time).
pub(super) fn now() -> i64 {
    chrono::Utc::now().timestamp()
}
