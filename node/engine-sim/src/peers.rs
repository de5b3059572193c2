//! The seam between one process's sim network and the rest of a cluster-wide one (wire-notes §10: "in a
//! cluster the sim network is shared through Redis"). A `SimNetwork` without peers is the whole network
//! (embedded mode: every device is in this process). With peers (`peers_redis.rs`), the local state keeps
//! serving the devices connected here, and what concerns devices elsewhere crosses the seam:
//! - traffic (messages, acks, reactions, edits, revokes, group notifications, statuses, calls, presence) for a
//!   phone's sessions (or a presence subscriber) not online here goes to each session's inbox; the node where
//!   that session is online drains it in order, and only while it holds the session's lease;
//! - the directory: which phones exist, which sessions are linked to a phone, who exchanged messages with
//!   whom (contact lists), who blocked whom, presence and its subscribers, and which devices are connected
//!   where (the "no two owners" view);
//! - shared records (`Record`: groups, channels, statuses, messages, ringing calls): written through after
//!   every change and read back before use (`shared.rs`), so any node can act on a group another node created;
//! - per-account state (chats, labels, stars, saved names, profile; `accounts.rs`): written through field by
//!   field by the node serving the account, read back when a session of the account starts on a node.
//!
//! - held traffic: what a device was handed and has not acknowledged (`held.rs`) is kept per session until
//!   it is, and handed over again when the device connects, on whichever node.
//!
//! Writes are queued from inside the network's (synchronous) lock as `Op`s and applied in order by one
//! task per process (`run`), so a message always reaches the other side before its acks.

use std::sync::Arc;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use tokio::sync::{mpsc, oneshot};
use wagate_proto::Jid;

use super::network::{OutboxEntry, SimNetwork, StoredMessage};
use wagate_engine_api::{
    AckStatus, CallEvent, EngineEvent, GroupEvent, InboundMessage, PresenceEntry, StatusUpdate,
};

/// What crosses between processes for one recipient session.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "t", rename_all = "camelCase")]
pub enum Traffic {
    /// A message for the recipient; the receiving network keeps a copy (quotes, receipts, reactions).
    /// Boxed: a message with its media reference is much larger than the other kinds of traffic.
    Message {
        msg: Box<StoredMessage>,
    },
    /// A message as one recipient session sees it: the held form of a message handed to a device
    /// (`held.rs`), redelivered as it was.
    Inbound {
        msg: Box<InboundMessage>,
    },
    Ack {
        message_id: String,
        chat_id: Jid,
        status: AckStatus,
    },
    Reaction {
        message_id: String,
        chat_id: Jid,
        reaction: String,
        sender_id: Jid,
    },
    Edited {
        message_id: String,
        chat_id: Jid,
        body: String,
        from: Jid,
        from_me: bool,
        timestamp: i64,
    },
    Revoked {
        id: String,
        revoked_id: String,
        chat_id: Jid,
        from: Jid,
        to: Jid,
        timestamp: i64,
    },
    Group {
        event: GroupEvent,
    },
    Status {
        update: StatusUpdate,
    },
    Call {
        event: CallEvent,
    },
    Presence {
        chat_id: Jid,
        participants: Vec<PresenceEntry>,
    },
}

impl Traffic {
    /// The crossing form of a network event; lifecycle events (QR, ready, logged out, ...) stay within
    /// their process (`None`).
    pub fn from_event(event: &EngineEvent) -> Option<Traffic> {
        Some(match event.clone() {
            EngineEvent::Ack {
                message_id,
                chat_id,
                status,
            } => Traffic::Ack {
                message_id,
                chat_id,
                status,
            },
            EngineEvent::Reaction {
                message_id,
                chat_id,
                reaction,
                sender_id,
            } => Traffic::Reaction {
                message_id,
                chat_id,
                reaction,
                sender_id,
            },
            EngineEvent::Edited {
                message_id,
                chat_id,
                body,
                from,
                from_me,
                timestamp,
            } => Traffic::Edited {
                message_id,
                chat_id,
                body,
                from,
                from_me,
                timestamp,
            },
            EngineEvent::Revoked {
                id,
                revoked_id,
                chat_id,
                from,
                to,
                timestamp,
            } => Traffic::Revoked {
                id,
                revoked_id,
                chat_id,
                from,
                to,
                timestamp,
            },
            EngineEvent::Group(event) => Traffic::Group { event },
            EngineEvent::Status(update) => Traffic::Status { update },
            EngineEvent::Call(event) => Traffic::Call { event },
            EngineEvent::Presence {
                chat_id,
                participants,
            } => Traffic::Presence {
                chat_id,
                participants,
            },
            _ => return None,
        })
    }

    /// The form in which the network holds `event` for a device until it is acknowledged: every piece of
    /// traffic, messages included (as the recipient sees them); `None` for lifecycle events.
    pub fn held_form(event: &EngineEvent) -> Option<Traffic> {
        match event {
            EngineEvent::Message(msg) => Some(Traffic::Inbound { msg: msg.clone() }),
            other => Traffic::from_event(other),
        }
    }

    /// The event held traffic is handed over as again (`viewer`: the recipient session's phone).
    pub fn into_redelivered(self, viewer: &Jid) -> Option<EngineEvent> {
        match self {
            Traffic::Message { msg } => {
                Some(EngineEvent::Message(Box::new(msg.to_inbound(viewer))))
            }
            other => other.into_event(),
        }
    }

    /// The engine event of held traffic (`held.rs` replay).
    pub fn into_held_event(self) -> Option<EngineEvent> {
        self.into_event()
    }

    /// The engine event of anything but a stored message record (those are viewed per recipient by the
    /// network).
    pub fn into_event(self) -> Option<EngineEvent> {
        Some(match self {
            Traffic::Message { .. } => return None,
            Traffic::Inbound { msg } => EngineEvent::Message(msg),
            Traffic::Ack {
                message_id,
                chat_id,
                status,
            } => EngineEvent::Ack {
                message_id,
                chat_id,
                status,
            },
            Traffic::Reaction {
                message_id,
                chat_id,
                reaction,
                sender_id,
            } => EngineEvent::Reaction {
                message_id,
                chat_id,
                reaction,
                sender_id,
            },
            Traffic::Edited {
                message_id,
                chat_id,
                body,
                from,
                from_me,
                timestamp,
            } => EngineEvent::Edited {
                message_id,
                chat_id,
                body,
                from,
                from_me,
                timestamp,
            },
            Traffic::Revoked {
                id,
                revoked_id,
                chat_id,
                from,
                to,
                timestamp,
            } => EngineEvent::Revoked {
                id,
                revoked_id,
                chat_id,
                from,
                to,
                timestamp,
            },
            Traffic::Group { event } => EngineEvent::Group(event),
            Traffic::Status { update } => EngineEvent::Status(update),
            Traffic::Call { event } => EngineEvent::Call(event),
            Traffic::Presence {
                chat_id,
                participants,
            } => EngineEvent::Presence {
                chat_id,
                participants,
            },
        })
    }
}

/// A kind of record every node reads and writes (JSON under its id).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Record {
    Group,
    Channel,
    Status,
    /// Messages: so a session taken over, or a peer quoting, finds a message first seen on another node.
    Message,
    /// Ringing calls: so the callee's session, wherever it runs next, can reject one.
    Call,
}

impl Record {
    /// Kept one key per record with an expiry (read one by one), rather than in one hash of the kind.
    pub fn is_keyed(self) -> bool {
        matches!(self, Record::Message | Record::Call)
    }
}

/// One write towards the peers, queued under the network's lock and applied in order.
#[derive(Debug)]
pub enum Op {
    /// `traffic` for one session (generated here for a session this node does not serve, or no longer
    /// holds the lease of), to be drained wherever it runs.
    ToSession {
        session: String,
        traffic: Box<Traffic>,
    },
    /// Writes (`Some`) or removes one field of `phone`'s per-account state (`accounts.rs`).
    AccountField {
        phone: Jid,
        field: String,
        json: Option<String>,
    },
    /// `traffic` for every session linked to `phone`, except those served here already (`skip`).
    ToPhone {
        phone: Jid,
        /// Boxed: a message record is large, the other ops are small.
        traffic: Box<Traffic>,
        skip: Vec<String>,
    },
    /// `phone` is on the network (linked now; the directory counts it while a session stays linked to it).
    Account(Jid),
    /// `phone` wrote through the control API (`/inbound`, `/call`): it exists for good.
    Sender(Jid),
    /// `a` and `b` exchanged a message: each becomes the other's contact when it exists.
    Exchange(Jid, Jid),
    /// Writes a shared record (its JSON form).
    Put {
        record: Record,
        id: String,
        json: String,
    },
    Delete {
        record: Record,
        id: String,
    },
    /// `session` put `entry` on the network (its outbox, wherever the session runs next).
    Sent {
        session: String,
        entry: OutboxEntry,
    },
    /// `phone` blocked (or unblocked) `target`.
    Block {
        phone: Jid,
        target: Jid,
        blocked: bool,
    },
    /// `phone`'s presence as others read it.
    Presence {
        phone: Jid,
        available: bool,
        last_seen: Option<i64>,
    },
    /// `session` follows `phone`'s presence (until its device next goes offline or comes online).
    Subscribe {
        phone: Jid,
        session: String,
    },
    /// `traffic` for every session that follows `phone`'s presence, except those served here (`skip`).
    ToSubscribers {
        phone: Jid,
        traffic: Box<Traffic>,
        skip: Vec<String>,
    },
    /// `session` was just linked to `phone` (scanned, not connected yet): traffic for the phone waits in the
    /// session's inbox from now on, so nothing sent before its `Online` is lost.
    Linked {
        session: String,
        phone: Jid,
    },
    /// `session` is linked to `phone` and connected here (with no presence subscription yet); its inbox is
    /// drained next.
    Online {
        session: String,
        phone: Jid,
    },
    /// `session`'s device disconnected here (`unlinked`: and is no longer linked to `phone`); its presence
    /// subscriptions end with the connection.
    Offline {
        session: String,
        phone: Jid,
        unlinked: bool,
    },
    /// `session`'s device holds `credentials` now (linked or reconnected): a phone unlink made through any
    /// node revokes them (`Peers::unlink`).
    Credentials {
        session: String,
        credentials: String,
    },
    /// `credentials` (of `session`) were revoked: every node's reconnect with them is logged out.
    Revoke {
        session: String,
        credentials: String,
    },
    /// `traffic` handed to `session`'s device here under held id `id`, kept until acknowledged.
    Hold {
        session: String,
        id: String,
        traffic: Box<Traffic>,
    },
    /// The device acknowledged held traffic `id`.
    Release {
        session: String,
        id: String,
    },
    /// `session` was unlinked: nothing is held for it any more.
    ForgetHeld(String),
    /// `session`'s link was forgotten (deleted, or its credentials wiped): it is linked to no phone, on any
    /// node, so the phone may no longer exist.
    Forget(String),
    /// Traffic may wait in `session`'s inbox (a peer's wake, or the device just came online).
    Drain(String),
    /// Answers once every earlier op is applied (a stop waits for its `Offline`).
    Flush(oneshot::Sender<()>),
}

/// A device connected somewhere on the network, as the shared view reports it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ConnectedDevice {
    pub phone: Jid,
    pub session_id: String,
    pub node_id: String,
    /// Epoch ms of the connection.
    pub connected_at: i64,
    /// Whether the node announced itself lately (a stalled or dead node's entries linger until it
    /// returns and tears its engines down, or forever after a crash).
    pub is_node_live: bool,
}

#[derive(Debug, thiserror::Error)]
#[error("sim peers: {0}")]
pub struct PeerError(pub String);

pub type PeerResult<T> = Result<T, PeerError>;

/// What a session's node takes from Redis: `fresh` traffic from its inbox (now held under the ids given) and,
/// when its device just connected, everything `held` for it and not acknowledged, by held id.
#[derive(Debug, Default)]
pub struct Taken {
    pub held: Vec<(String, Traffic)>,
    pub fresh: Vec<(String, Traffic)>,
}

/// The rest of the network outside this process.
#[async_trait]
pub trait Peers: Send + Sync + 'static {
    /// Applies `ops` (no `Drain`/`Flush`: the runner handles those) in order.
    async fn apply(&self, ops: &[Op]) -> PeerResult<()>;
    /// Atomically takes everything waiting in `session`'s inbox, oldest first, moving it to the session's
    /// held traffic (kept until the device acknowledges it), plus, with `redeliver` (the device just
    /// connected), what was held already. `None` (nothing taken) unless this process holds the session's
    /// lease, so a stalled node that resumed cannot consume what its successor is owed in the moment before
    /// its heartbeat unloads the session.
    async fn take_inbox(&self, session: &str, redeliver: bool) -> PeerResult<Option<Taken>>;
    /// The phone `session` is linked to, wherever it ran last (`None`: never linked, or unlinked).
    async fn phone_of(&self, session: &str) -> PeerResult<Option<Jid>>;
    /// Whether this process may still hand traffic to `session`'s device itself: it holds the session's
    /// lease and the lease's deadline has not passed. Answered locally (no round trip); a network whose
    /// peers know nothing of leases (tests) always may.
    fn holds_lease(&self, _session: &str) -> bool {
        true
    }
    /// The phone unlinks `session`, wherever it ran last: its shared credentials are revoked and it is no
    /// longer linked to its phone. `None` when no session is linked under that id.
    async fn unlink(&self, session: &str) -> PeerResult<Option<Jid>>;
    /// Whether `credentials` were revoked on any node.
    async fn is_revoked(&self, credentials: &str) -> PeerResult<bool>;
    /// Whether `phone` exists: a session is linked to it, or it wrote through the control API.
    async fn exists(&self, phone: &Jid) -> PeerResult<bool>;
    /// Every field of `phone`'s per-account state (empty if it never was written).
    async fn account(&self, phone: &Jid) -> PeerResult<Vec<(String, String)>>;
    /// Accounts `phone` exchanged a message with.
    async fn contacts(&self, phone: &Jid) -> PeerResult<Vec<Jid>>;
    /// Whether any session is linked to `phone`, wherever it runs.
    async fn is_linked(&self, phone: &Jid) -> PeerResult<bool>;
    /// Every stored record of a kind (JSON), except messages (read them one by one).
    async fn records(&self, record: Record) -> PeerResult<Vec<String>>;
    /// One stored record (JSON).
    async fn record(&self, record: Record, id: &str) -> PeerResult<Option<String>>;
    /// What `session` put on the network, oldest first, from whichever node ran it (JSON entries).
    async fn outbox(&self, session: &str) -> PeerResult<Vec<String>>;
    /// Whom each of `phones` blocked, in the same order.
    async fn blocked(&self, phones: &[Jid]) -> PeerResult<Vec<Vec<Jid>>>;
    /// `phone`'s presence (`available`, last seen) as last written, if ever.
    async fn presence(&self, phone: &Jid) -> PeerResult<Option<(bool, Option<i64>)>>;
    /// Connected devices (of `phone`, or all).
    async fn connected(&self, phone: Option<&Jid>) -> PeerResult<Vec<ConnectedDevice>>;
    /// Runs until the process ends: sends `Drain(session)` on `wake` for every inbox a peer filled, and a
    /// `Drain` for `resync()`'s sessions each time the listener (re)connects (wakes may have been missed).
    async fn listen(
        &self,
        wake: mpsc::UnboundedSender<Op>,
        resync: Box<dyn Fn() -> Vec<String> + Send + Sync>,
    );
}

impl std::fmt::Debug for dyn Peers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Peers")
    }
}

/// The sender half held inside the network's state.
pub type OpSender = mpsc::UnboundedSender<Op>;

/// Connects `net` to `peers`: starts the op runner and the wake listener.
pub fn attach(net: &SimNetwork, peers: Arc<dyn Peers>) {
    let (tx, rx) = mpsc::unbounded_channel();
    net.set_peers(tx.clone(), peers.clone());
    tokio::spawn(run(net.clone(), peers.clone(), rx));
    let resync_net = net.clone();
    let resync = Box::new(move || resync_net.online_sessions());
    tokio::spawn(async move { peers.listen(tx, resync).await });
}

/// How many queued ops are applied in one round trip.
const BATCH: usize = 256;

/// Applies queued ops in order; drains inboxes of sessions online here.
async fn run(net: SimNetwork, peers: Arc<dyn Peers>, mut rx: mpsc::UnboundedReceiver<Op>) {
    let mut batch = Vec::with_capacity(BATCH);
    while rx.recv_many(&mut batch, BATCH).await > 0 {
        let mut writes = Vec::new();
        for op in batch.drain(..) {
            match op {
                Op::Drain(session) => {
                    flush_writes(peers.as_ref(), &mut writes).await;
                    drain(&net, peers.as_ref(), &session, false).await;
                }
                Op::Flush(done) => {
                    flush_writes(peers.as_ref(), &mut writes).await;
                    let _ = done.send(());
                }
                Op::Online { session, phone } => {
                    writes.push(Op::Online {
                        session: session.clone(),
                        phone,
                    });
                    flush_writes(peers.as_ref(), &mut writes).await;
                    drain(&net, peers.as_ref(), &session, true).await;
                }
                other => writes.push(other),
            }
        }
        flush_writes(peers.as_ref(), &mut writes).await;
    }
}

async fn flush_writes(peers: &dyn Peers, writes: &mut Vec<Op>) {
    if writes.is_empty() {
        return;
    }
    if let Err(error) = peers.apply(writes).await {
        // The sim is a test network: a lost write shows up as a missing message in the test that needed it.
        tracing::warn!(%error, ops = writes.len(), "sim network writes to peers lost");
    }
    writes.clear();
}

async fn drain(net: &SimNetwork, peers: &dyn Peers, session: &str, redeliver: bool) {
    if !net.is_online(session) {
        return;
    }
    let taken = match peers.take_inbox(session, redeliver).await {
        Ok(Some(traffic)) => traffic,
        Ok(None) => {
            tracing::info!(
                session_id = session,
                "sim inbox left alone: this node no longer holds the session's lease"
            );
            return;
        }
        Err(error) => {
            tracing::warn!(%error, session_id = session, "sim inbox not read");
            return;
        }
    };
    if taken.held.is_empty() && taken.fresh.is_empty() {
        return;
    }
    net.accept_remote(session, taken);
}
