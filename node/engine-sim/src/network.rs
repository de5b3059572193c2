//! The simulated WhatsApp network's shared state: accounts by phone, linked devices by session id,
//! stored messages, groups, channels, statuses, calls and the catalog, behind one lock. Engines and the
//! control API (`control.rs`) mutate it through the feature files; this file owns only the core
//! records, event delivery and id generation. It performs no network I/O.

use parking_lot::{Mutex, MutexGuard};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::path::PathBuf;
use std::sync::{Arc, OnceLock, Weak};
use std::time::Duration;
use wagate_engine_api::{
    AckStatus, EngineError, EngineEvent, EngineResult, InboundMessage, Label, Location,
    MessageType, Poll, PresenceState, Product, QuotedRef, ReceivedMedia,
};
use wagate_proto::Jid;

use super::held::{Held, Journal};
use wagate_engine_api::EventSender;

use super::peers::{ConnectedDevice, Op, OpSender, PeerResult, Peers, Traffic};

use super::channels::ChannelRec;
use super::extras::{CallRec, StatusRec};
use super::groups::Group;

/// Timings and id format of one sim network. Tests shrink or pin these.
#[derive(Debug, Clone)]
pub struct SimConfig {
    /// How often an unscanned QR rotates: each one stays valid about a minute, as the spec's qr_ready says.
    pub qr_interval: Duration,
    /// How long `authenticating` lasts after a scan.
    pub link_delay: Duration,
    /// Gap between a send and each of its acks (server, delivered, read).
    pub ack_delay: Duration,
    /// Prefix of every id the network hands out; ids are this prefix plus a counter.
    pub id_prefix: String,
    /// Where an embedded network keeps the traffic its devices have not acknowledged yet (`held.rs`), so a
    /// restarted node gets it again; `None` keeps it in memory only (tests, and a cluster, which uses Redis).
    pub journal_dir: Option<PathBuf>,
}

impl Default for SimConfig {
    fn default() -> Self {
        Self {
            qr_interval: Duration::from_secs(60),
            link_delay: Duration::from_millis(100),
            ack_delay: Duration::from_millis(100),
            id_prefix: "3EB0SIM".to_string(),
            journal_dir: None,
        }
    }
}

/// One simulated network, shared by every sim engine of the process. Created at boot (or per test) and
/// handed to the factory and to the control routes; cloning shares the same network.
#[derive(Clone)]
pub struct SimNetwork {
    inner: Arc<Inner>,
}

pub(super) struct Inner {
    config: SimConfig,
    /// A plain (non-async) mutex: no `.await` ever happens while it is held, and every critical section
    /// is a few map operations, so contention stays short even with many sessions.
    state: Mutex<NetState>,
    /// The rest of a cluster-wide network (`peers.rs`); unset in embedded mode.
    peers: OnceLock<Arc<dyn Peers>>,
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
    pub events: Option<EventSender>,
    /// Traffic for the device not handed to it yet (it was offline, or refused it); handed over when it
    /// connects, or again shortly after a refusal (`held.rs`).
    pub pending: Vec<Held>,
    /// Traffic handed to the device and not acknowledged yet, by held id.
    pub in_flight: HashMap<String, Held>,
    /// A redelivery of refused traffic is scheduled.
    pub redelivery_due: bool,
    pub outbox: Vec<OutboxEntry>,
    pub failing_starts: u32,
    /// Bumped on every start so a stale QR rotation task stops.
    pub qr_generation: u64,
    pub pairing_phone: Option<Jid>,
    /// Epoch ms of the last time the device came online.
    pub connected_at: i64,
    /// Phones whose presence this device follows; the subscriptions end with its connection.
    pub subscribed: BTreeSet<Jid>,
}

/// What a session put on the network (the control API's `outbox`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OutboxEntry {
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
    /// It wrote through the control API (`/inbound`, `/call`): it exists for good (wire-notes §10).
    pub wrote: bool,
    /// No device of it is linked any more and it never wrote: it is off the network (`exists` is false)
    /// while its state stays, for when it links again.
    pub unlisted: bool,
}

/// How many received-but-unread message ids a chat remembers for read receipts (older ones get none).
const UNREAD_IDS_MAX: usize = 256;

/// Per-account chat state (in a cluster also its shared form, `accounts.rs`).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct ChatRec {
    pub archived: bool,
    pub pinned: bool,
    /// Epoch ms; `Some(0)` = muted indefinitely.
    pub muted_until: Option<i64>,
    pub unread: u32,
    pub last_timestamp: i64,
    pub last_body: Option<String>,
    /// The message `last_body` is from: the chat list reads the last message through it (so it shows an
    /// edit, and leaves a message deleted for everyone out), `last_body` being the copy for when the message
    /// is not held here.
    #[serde(default)]
    pub last_id: Option<String>,
    /// Messages received in this chat and not read yet, oldest first: the account's own read state, which a
    /// node that takes the session over answers `mark-read` from.
    #[serde(default)]
    pub unread_ids: Vec<String>,
}

/// A message as the network remembers it (and as it crosses to peers).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct StoredMessage {
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
    /// Writes towards the peers (cluster mode), applied in order by `peers::run`.
    ops: Option<OpSender>,
    /// The peers (cluster mode), for the lease check of local deliveries.
    fence: Option<Arc<dyn Peers>>,
    /// Cluster mode: digits unique to this process in group/channel ids and invite codes (`shared.rs`).
    pub(super) salt: Option<String>,
    /// The network itself, for the acknowledgements of held traffic (`held.rs`).
    pub(super) me: Weak<Inner>,
    /// Embedded mode: held traffic on disk (`held.rs`).
    pub(super) journal: Option<Journal>,
}

impl std::fmt::Debug for Journal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Journal")
    }
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

    /// Wire-notes §10: a phone linked on the network, or an account that wrote through the control API.
    pub(super) fn exists(&self, phone: &Jid) -> bool {
        self.accounts.get(phone).is_some_and(|a| !a.unlisted)
    }

    /// What this process alone can vouch for: `phone` wrote through the control API (for good), or a
    /// device of it is online here.
    pub(super) fn surely_exists(&self, phone: &Jid) -> bool {
        self.accounts.get(phone).is_some_and(|a| a.wrote)
            || self
                .devices
                .values()
                .any(|d| d.link == Link::Online && d.phone.as_ref() == Some(phone))
    }

    /// `phone` is known to exist (a peer says so, or a message from it just arrived).
    pub(super) fn listed(&mut self, phone: &Jid) -> &mut Account {
        let account = self.account(phone);
        account.unlisted = false;
        account
    }

    /// A device of `phone` was unlinked here: with no other device of it and nothing written through the
    /// control API, the account is off the network (a contact check answers `exists: false`).
    pub(super) fn unlist_if_unlinked(&mut self, phone: &Jid) {
        let is_linked = self.has_device(phone);
        if let Some(account) = self.accounts.get_mut(phone)
            && !account.wrote
            && !is_linked
        {
            account.unlisted = true;
        }
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

    /// Delivers network traffic: now when online, later when linked but offline, never when unlinked; the
    /// network holds it until the device acknowledges it (`held.rs`). In a cluster, traffic for a device
    /// this process does not serve (offline here, or its lease lapsed) goes to the session's shared inbox
    /// instead, for whichever node holds its lease.
    pub(super) fn deliver(&mut self, session: &str, event: EngineEvent) {
        let is_linked = self.devices.get(session).is_some_and(|d| d.phone.is_some());
        if !is_linked || self.rerouted(session, &event) {
            return;
        }
        let id = self.held_id();
        self.store_held(session, &id, &event);
        self.hand_over(session, Held { id, event });
    }

    /// Sends `event` to `session`'s shared inbox when this process does not serve the session (cluster
    /// mode); answers whether it did.
    fn rerouted(&self, session: &str, event: &EngineEvent) -> bool {
        if !self.is_clustered() || self.serves(session) {
            return false;
        }
        let Some(traffic) = Traffic::held_form(event) else {
            return false;
        };
        self.emit(Op::ToSession {
            session: session.to_string(),
            traffic: Box::new(traffic),
        });
        true
    }

    pub(super) fn deliver_to_phone(&mut self, phone: &Jid, event: &EngineEvent) {
        let served = self.deliver_here(phone, |_| event.clone());
        if let Some(traffic) = Traffic::from_event(event) {
            self.to_peers(phone, traffic, served);
        }
    }

    /// A message for `phone`'s sessions: each sees it from its own side; peers get the stored record.
    /// Answers whether a session of `phone` was served here.
    pub(super) fn deliver_message_to_phone(&mut self, phone: &Jid, msg: &StoredMessage) -> bool {
        let served = self.deliver_here(phone, |viewer| {
            EngineEvent::Message(Box::new(msg.to_inbound(viewer)))
        });
        let is_served = !served.is_empty();
        let traffic = Traffic::Message {
            msg: Box::new(msg.clone()),
        };
        self.to_peers(phone, traffic, served);
        is_served
    }

    /// Delivers to `phone`'s sessions in this process; returns those served. In a cluster only devices
    /// served here (`serves`) are: a session linked but offline here may be online on another node, and
    /// one whose lease lapsed here has a successor, so its traffic waits in its shared inbox instead.
    fn deliver_here(&mut self, phone: &Jid, event: impl Fn(&Jid) -> EngineEvent) -> Vec<String> {
        let is_clustered = self.ops.is_some();
        let mut served = Vec::new();
        for session in self.sessions_of(phone) {
            if is_clustered && !self.serves(&session) {
                continue;
            }
            self.deliver(&session, event(phone));
            served.push(session);
        }
        served
    }

    fn to_peers(&self, phone: &Jid, traffic: Traffic, skip: Vec<String>) {
        self.emit(Op::ToPhone {
            phone: phone.clone(),
            traffic: Box::new(traffic),
            skip,
        });
    }

    /// Queues a write towards the peers (no-op in embedded mode).
    pub(super) fn emit(&self, op: Op) {
        if let Some(ops) = &self.ops {
            // The runner lives as long as the process; a send can only fail during shutdown.
            let _ = ops.send(op);
        }
    }

    pub(super) fn is_clustered(&self) -> bool {
        self.ops.is_some()
    }

    pub(super) fn is_online(&self, session: &str) -> bool {
        self.devices
            .get(session)
            .is_some_and(|d| d.link == Link::Online)
    }

    /// Whether this process hands `session`'s traffic to its device itself: online here and, in a cluster,
    /// still the holder of its lease (the same deadline its fenced writes check; no round trip).
    pub(super) fn serves(&self, session: &str) -> bool {
        self.is_online(session)
            && self
                .fence
                .as_ref()
                .is_none_or(|peers| peers.holds_lease(session))
    }

    /// `phone` exists on the network: it linked a device (for as long as one stays linked).
    pub(super) fn register(&mut self, phone: &Jid) -> &mut Account {
        self.emit(Op::Account(phone.clone()));
        self.listed(phone)
    }

    /// `phone` wrote through the control API (`/inbound`, `/call`): it exists for good.
    pub(super) fn register_sender(&mut self, phone: &Jid) -> &mut Account {
        self.emit(Op::Sender(phone.clone()));
        let account = self.listed(phone);
        account.wrote = true;
        account
    }

    /// The device of `session` left this process (stopped, dropped, killed or logged out).
    pub(super) fn went_offline(&mut self, session: &str, phone: Option<Jid>, unlinked: bool) {
        self.end_subscriptions(session);
        if let Some(phone) = phone {
            self.emit(Op::Offline {
                session: session.to_string(),
                phone,
                unlinked,
            });
        }
    }

    /// Marks the device online and hands it what queued up while it was away. In a cluster what waited
    /// here is in Redis too (held or in the inbox), and the drain that follows `Online` hands it over, with
    /// whatever another node held for the session before it died.
    pub(super) fn go_online(&mut self, session: &str) {
        let is_clustered = self.is_clustered();
        let Some(device) = self.devices.get_mut(session) else {
            return;
        };
        device.link = Link::Online;
        device.connected_at = chrono::Utc::now().timestamp_millis();
        let mut pending = std::mem::take(&mut device.pending);
        if is_clustered {
            pending.clear();
        }
        pending.sort_by(|a, b| a.id.cmp(&b.id));
        let phone = device.phone.clone();
        // A new connection follows nobody yet (a crashed node never ended the last one's subscriptions).
        self.end_subscriptions(session);
        if let Some(phone) = phone {
            // Connected here: the shared view says so, and the session's shared inbox is drained.
            self.emit(Op::Online {
                session: session.to_string(),
                phone,
            });
        }
        for held in pending {
            self.hand_over(session, held);
        }
    }

    /// Applies one item of a peer's traffic to `session` (online here, linked to `phone`), held under `id`
    /// (moved to the session's held traffic in Redis as the inbox was taken).
    fn apply_remote(&mut self, session: &str, phone: &Jid, id: String, item: Traffic) {
        let deliver = |state: &mut NetState, event: EngineEvent| {
            state.hand_over(
                session,
                Held {
                    id: id.clone(),
                    event,
                },
            );
        };
        match item {
            Traffic::Message { msg } => {
                let msg = *msg;
                // The sender exists; the copy lets quotes, receipts and reactions find the message here.
                self.listed(&msg.from);
                self.account(phone).contacts.insert(msg.from.clone());
                self.account(&msg.from).contacts.insert(phone.clone());
                self.touch_chat(phone, &msg.chat_for(phone), &msg, true);
                let event = EngineEvent::Message(Box::new(msg.to_inbound(phone)));
                self.messages.entry(msg.id.clone()).or_insert(msg);
                deliver(self, event);
            }
            other => {
                match &other {
                    Traffic::Ack {
                        message_id, status, ..
                    } => {
                        if let Some(msg) = self.messages.get_mut(message_id)
                            && msg.ack < *status
                        {
                            msg.ack = *status;
                        }
                    }
                    Traffic::Edited {
                        message_id, body, ..
                    } => {
                        if let Some(msg) = self.messages.get_mut(message_id) {
                            msg.body.clone_from(body);
                        }
                    }
                    Traffic::Revoked { revoked_id, .. } => {
                        if let Some(msg) = self.messages.get_mut(revoked_id) {
                            msg.revoked = true;
                        }
                    }
                    _ => {}
                }
                if let Some(event) = other.into_event() {
                    deliver(self, event);
                }
            }
        }
    }

    /// Records that `a` and `b` exchanged a message: each becomes the other's contact (if it exists).
    /// Neither account is created here: a number not on the network (a send to it) must stay off it.
    pub(super) fn note_exchange(&mut self, a: &Jid, b: &Jid) {
        self.emit(Op::Exchange(a.clone(), b.clone()));
        let (has_a, has_b) = (self.exists(a), self.exists(b));
        if has_b && let Some(account) = self.accounts.get_mut(a) {
            account.contacts.insert(b.clone());
        }
        if has_a && let Some(account) = self.accounts.get_mut(b) {
            account.contacts.insert(a.clone());
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
        rec.last_id = Some(msg.id.clone());
        if unread {
            rec.unread += 1;
            rec.unread_ids.push(msg.id.clone());
            if rec.unread_ids.len() > UNREAD_IDS_MAX {
                rec.unread_ids.remove(0);
            }
        }
        self.chat_changed(owner, chat);
    }

    pub(super) fn presence_state(&self, phone: &Jid) -> PresenceState {
        match self.accounts.get(phone) {
            Some(acc) if acc.available => PresenceState::Available,
            _ => PresenceState::Unavailable,
        }
    }
}

impl SimNetwork {
    /// A network; with `config.journal_dir`, the traffic held there by an earlier process is held again.
    pub fn new(config: SimConfig) -> Self {
        let journal = config.journal_dir.as_deref().and_then(|dir| match Journal::open(dir) {
            Ok(opened) => Some(opened),
            Err(error) => {
                tracing::error!(%error, dir = %dir.display(), "sim journal unavailable; held traffic kept in memory only");
                None
            }
        });
        let inner = Arc::new_cyclic(|me| {
            let mut state = NetState {
                catalog: super::extras::default_catalog(),
                me: me.clone(),
                ..NetState::default()
            };
            if let Some((journal, replayed)) = journal {
                state.journal = Some(journal);
                state.restore_held(replayed);
            }
            Inner {
                config,
                state: Mutex::new(state),
                peers: OnceLock::new(),
            }
        });
        Self { inner }
    }

    pub(super) fn upgrade(me: &Weak<Inner>) -> Option<SimNetwork> {
        me.upgrade().map(|inner| SimNetwork { inner })
    }

    /// Makes this network part of a cluster-wide one (`peers::attach` calls it once).
    pub(super) fn set_peers(&self, ops: OpSender, peers: Arc<dyn Peers>) {
        if self.inner.peers.set(peers).is_ok() {
            let mut state = self.lock();
            state.ops = Some(ops);
            state.fence = self.inner.peers.get().cloned();
            state.salt = Some(format!("{:06}", rand::random::<u32>() % 1_000_000));
        }
    }

    pub(super) fn peers(&self) -> Option<&Arc<dyn Peers>> {
        self.inner.peers.get()
    }

    /// Waits until every write queued so far reached the peers (a stopped engine is off the shared view
    /// before the caller goes on). Immediate in embedded mode.
    pub async fn flush_peers(&self) {
        let (tx, rx) = tokio::sync::oneshot::channel();
        let queued = {
            let state = self.lock();
            state
                .ops
                .as_ref()
                .is_some_and(|ops| ops.send(Op::Flush(tx)).is_ok())
        };
        if queued {
            let _ = rx.await;
        }
    }

    /// Sessions whose device is online in this process.
    pub(super) fn online_sessions(&self) -> Vec<String> {
        let state = self.lock();
        state
            .devices
            .iter()
            .filter(|(_, d)| d.link == Link::Online)
            .map(|(id, _)| id.clone())
            .collect()
    }

    pub(super) fn is_online(&self, session: &str) -> bool {
        self.lock().is_online(session)
    }

    /// Hands `session`'s device what was taken from its inbox (`taken.fresh`, applied in order) after what
    /// was held for it and not acknowledged (`taken.held`: at a connection; what is already in flight or
    /// waiting here is left to this process's own acknowledgements). If the device is no longer served here
    /// (a lease that lapsed since the take), the rest stays held in Redis for the successor's connection.
    pub(super) fn accept_remote(&self, session: &str, taken: super::peers::Taken) {
        let mut state = self.lock();
        let mut held = taken.held;
        held.sort_by(|a, b| a.0.cmp(&b.0));
        for (id, item) in held {
            let known = state.devices.get(session).is_some_and(|d| {
                d.in_flight.contains_key(&id) || d.pending.iter().any(|h| h.id == id)
            });
            let phone = match state.devices.get(session) {
                Some(Device {
                    phone: Some(phone), ..
                }) if state.serves(session) => phone.clone(),
                _ => return,
            };
            if known {
                continue;
            }
            if let Some(event) = item.into_redelivered(&phone) {
                state.hand_over(session, Held { id, event });
            }
        }
        for (id, item) in taken.fresh {
            let phone = match state.devices.get(session) {
                Some(Device {
                    phone: Some(phone), ..
                }) if state.serves(session) => phone.clone(),
                _ => return,
            };
            state.apply_remote(session, &phone, id, item);
        }
    }

    /// Whether `phone` exists here or anywhere on a cluster-wide network. In a cluster the shared directory
    /// decides unless this process knows for sure: what it remembers of a phone linked elsewhere can be
    /// stale (the session may have been deleted or logged out through another node).
    pub(super) async fn exists_anywhere(&self, phone: &Jid) -> bool {
        let (here, for_sure) = {
            let state = self.lock();
            (state.exists(phone), state.surely_exists(phone))
        };
        let Some(peers) = self.peers() else {
            return here;
        };
        if for_sure {
            return true;
        }
        peers.exists(phone).await.unwrap_or_else(|error| {
            tracing::warn!(%error, "sim directory not read");
            here
        })
    }

    /// `phone`'s contacts known to the peers (empty in embedded mode).
    pub(super) async fn remote_contacts(&self, phone: &Jid) -> Vec<Jid> {
        match self.peers() {
            Some(peers) => peers.contacts(phone).await.unwrap_or_else(|error| {
                tracing::warn!(%error, "sim contacts not read");
                Vec::new()
            }),
            None => Vec::new(),
        }
    }

    /// Whether a session linked to one of `phones` runs elsewhere (delivered/read acks follow then).
    pub(super) async fn linked_elsewhere(&self, phones: &[Jid]) -> bool {
        let Some(peers) = self.peers() else {
            return false;
        };
        for phone in phones {
            if peers.is_linked(phone).await.unwrap_or(false) {
                return true;
            }
        }
        false
    }

    /// The devices connected on the network (of `phone`, or all): the shared view in a cluster, this
    /// process's devices otherwise.
    pub async fn connected_devices(
        &self,
        phone: Option<&Jid>,
        node_id: &str,
    ) -> PeerResult<Vec<ConnectedDevice>> {
        if let Some(peers) = self.peers() {
            return peers.connected(phone).await;
        }
        let state = self.lock();
        let mut devices: Vec<ConnectedDevice> = state
            .devices
            .iter()
            .filter(|(_, d)| d.link == Link::Online)
            .filter_map(|(id, d)| {
                let own = d.phone.clone()?;
                phone.is_none_or(|p| *p == own).then(|| ConnectedDevice {
                    phone: own,
                    session_id: id.clone(),
                    node_id: node_id.to_string(),
                    connected_at: d.connected_at,
                    is_node_live: true,
                })
            })
            .collect();
        devices.sort_by(|a, b| a.session_id.cmp(&b.session_id));
        Ok(devices)
    }

    pub fn config(&self) -> &SimConfig {
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
