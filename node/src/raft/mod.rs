//! The replicated main DB (`MAIN_DB_REPLICATION=raft`): openraft over the API nodes of a cluster. Each node
//! keeps its own main SQLite file as the state machine (`state_machine.rs`), its log and vote in
//! `DATA_DIR/raft.sqlite` (`log_store.rs`), and talks to its peers over internal HTTP routes that require the
//! cluster secret (`network.rs`, `routes.rs`). The voters are fixed by `RAFT_VOTERS`; every other live node
//! joins as a learner through the node registry (`membership.rs`). Writes from any node go to the leader and
//! return after commit ([`MainRaft::write`]); audit rows wait in a durable local spool until a quorum takes
//! them (`spool.rs`). Reads never leave the node, but a (re)started replica first catches up with what the
//! leader committed ([`MainRaft::wait_caught_up`]): until then its files may predate a revocation.

use std::collections::BTreeMap;
use std::io::Cursor;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use openraft::error::{ClientWriteError, InitializeError, RaftError};
use openraft::{ServerState, SnapshotPolicy};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use sqlx::SqlitePool;
use tokio::sync::watch;

use crate::maindb::{MainCommand, MainOutcome, WriteError};
pub use wagate_proto::dto::infra_status::{RaftMemberStatus, RaftStatus};

mod election;
pub(crate) mod log_store;
pub(crate) mod membership;
pub mod network;
pub(crate) mod routes;
pub(crate) mod spool;
mod state_machine;

use log_store::LogStore;
use network::{NetworkFactory, Rpc, Transport};
use state_machine::StateMachine;

pub type NodeId = u64;

openraft::declare_raft_types!(
    /// The openraft types of the main DB.
    pub TypeConfig:
        D = MainCommand,
        R = MainOutcome,
        NodeId = NodeId,
        Node = Member,
        Entry = openraft::Entry<TypeConfig>,
        SnapshotData = Cursor<Vec<u8>>,
        AsyncRuntime = openraft::TokioRuntime,
);

pub type Entry = openraft::Entry<TypeConfig>;

/// A member as the membership records it: the node's `NODE_ID` and the URL it announced (the registry's
/// current URL wins when the transport resolves it).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Member {
    pub name: String,
    #[serde(default)]
    pub url: String,
}

impl std::fmt::Display for Member {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.name)
    }
}

/// The raft id of a node: the first 8 bytes of SHA-256 of its `NODE_ID` (stable across restarts, equal on
/// every node without coordination).
pub fn node_id_of(name: &str) -> NodeId {
    let digest = Sha256::digest(name.as_bytes());
    let mut bytes = [0u8; 8];
    bytes.copy_from_slice(&digest[..8]);
    u64::from_be_bytes(bytes)
}

/// How to run this node's replica.
#[derive(Debug, Clone)]
pub struct RaftOptions {
    pub name: String,
    pub url: String,
    pub voters: Vec<String>,
    pub heartbeat_ms: u64,
    pub election_timeout_min_ms: u64,
    pub election_timeout_max_ms: u64,
    pub snapshot_logs: u64,
    pub write_timeout: Duration,
    pub data_dir: PathBuf,
}

impl RaftOptions {
    pub fn from_config(config: &crate::config::Config) -> RaftOptions {
        RaftOptions {
            name: config.node_id.clone(),
            url: config.node_url.trim_end_matches('/').to_string(),
            voters: config.raft.voters.clone(),
            heartbeat_ms: config.raft.heartbeat_ms,
            election_timeout_min_ms: config.raft.election_timeout_min_ms,
            election_timeout_max_ms: config.raft.election_timeout_max_ms,
            snapshot_logs: config.raft.snapshot_logs,
            write_timeout: Duration::from_millis(config.raft.write_timeout_ms),
            data_dir: config.data_dir.clone(),
        }
    }
}

/// What a leader answers to a forwarded write or read-index request.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "error", rename_all = "camelCase")]
pub enum LeaderError {
    /// This node is not the leader (any more); the caller asks again.
    NotLeader,
    /// The leader could not reach a quorum in time.
    Unavailable { message: String },
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct WriteReply {
    pub index: u64,
    pub outcome: MainOutcome,
}

pub const NO_QUORUM: &str = "The cluster has no raft quorum: key management is unavailable until a majority of voters is back";

/// This node's replica and its handle for writes, reads that must catch up, and status.
pub struct MainRaft {
    pub(crate) raft: openraft::Raft<TypeConfig>,
    pub id: NodeId,
    pub name: String,
    pub(crate) transport: Arc<dyn Transport>,
    pub(crate) voters: BTreeMap<NodeId, Member>,
    write_timeout: Duration,
    committed: Arc<AtomicU64>,
    keys_changed: watch::Receiver<u64>,
    /// When the last catch-up with the leader started and whether it succeeded: requests that arrived
    /// before it share its outcome.
    last_sync: tokio::sync::Mutex<Option<(Instant, bool)>>,
    /// Set once, by the first catch-up that succeeds after start: from then on this replica has applied
    /// everything the cluster had committed before it (re)started.
    caught_up: watch::Sender<bool>,
    started: Instant,
    /// Longer than the worst-case election: a replica that knows no leader after this long since it
    /// started finds none to catch up from (see [`is_leaderless`](Self::is_leaderless)).
    leader_grace: Duration,
    pub(crate) spool: spool::Spool,
}

impl MainRaft {
    /// Opens the log and state machine, starts the replica, and (on a voter whose log is empty) proposes the
    /// initial membership of all voters: every voter proposes the same one, so which one wins does not
    /// matter.
    pub async fn start(
        options: RaftOptions,
        main_db: SqlitePool,
        transport: Arc<dyn Transport>,
    ) -> anyhow::Result<Arc<MainRaft>> {
        let raft_db = log_store::open(&options.data_dir.join("raft.sqlite")).await?;
        let config = openraft::Config {
            cluster_name: "wagate-main-db".to_string(),
            heartbeat_interval: options.heartbeat_ms,
            election_timeout_min: options.election_timeout_min_ms,
            election_timeout_max: options.election_timeout_max_ms,
            install_snapshot_timeout: options.election_timeout_max_ms.max(5_000),
            snapshot_policy: SnapshotPolicy::LogsSinceLast(options.snapshot_logs),
            max_in_snapshot_log_to_keep: (options.snapshot_logs / 5).max(10),
            ..openraft::Config::default()
        }
        .validate()?;
        let id = node_id_of(&options.name);
        let committed = Arc::new(AtomicU64::new(0));
        let log = LogStore::new(raft_db.clone(), committed.clone());
        let sm = StateMachine::new(main_db, options.data_dir.clone());
        let keys_changed = sm.keys_changed();
        let network = NetworkFactory {
            transport: transport.clone(),
        };
        let raft = openraft::Raft::new(id, Arc::new(config), network, log, sm).await?;
        election::spawn_split_vote_breaker(
            raft.clone(),
            options.election_timeout_min_ms,
            options.election_timeout_max_ms,
        );
        let voters: BTreeMap<NodeId, Member> = options
            .voters
            .iter()
            .map(|name| {
                let member = Member {
                    name: name.clone(),
                    url: String::new(),
                };
                (node_id_of(name), member)
            })
            .collect();
        if voters.contains_key(&id) && !raft.is_initialized().await? {
            match raft.initialize(voters.clone()).await {
                Ok(()) => tracing::info!(voters = ?options.voters, "raft membership proposed"),
                Err(RaftError::APIError(InitializeError::NotAllowed(_))) => {}
                Err(err) => return Err(err.into()),
            }
        }
        let main_raft = Arc::new(MainRaft {
            raft,
            id,
            name: options.name,
            transport,
            voters,
            write_timeout: options.write_timeout,
            committed,
            keys_changed,
            last_sync: tokio::sync::Mutex::new(None),
            caught_up: watch::channel(false).0,
            started: Instant::now(),
            leader_grace: Duration::from_millis(
                3 * options.election_timeout_max_ms + 2 * options.heartbeat_ms,
            ),
            spool: spool::Spool::new(raft_db),
        });
        tokio::spawn(catch_up_at_start(Arc::downgrade(&main_raft)));
        Ok(main_raft)
    }

    /// Whether this replica has caught up with what the cluster committed before it (re)started.
    pub fn is_caught_up(&self) -> bool {
        *self.caught_up.borrow()
    }

    /// Whether this replica, not yet caught up, has known no leader for longer than an election takes since
    /// it started: the voters' first start (one at a time, as an ordered StatefulSet brings them up) or a
    /// cluster without quorum. It cannot catch up then; readiness lets it say ready (so the other voters get
    /// started) while key checks still answer 503.
    pub fn is_leaderless(&self) -> bool {
        !self.is_caught_up()
            && self.started.elapsed() > self.leader_grace
            && self.raft.metrics().borrow().current_leader.is_none()
    }

    /// Waits up to `budget` for [`is_caught_up`](Self::is_caught_up) (the start task or any successful
    /// [`catch_up`](Self::catch_up) sets it); false on time-out.
    pub async fn wait_caught_up(&self, budget: Duration) -> bool {
        if self.is_caught_up() {
            return true;
        }
        let mut caught_up = self.caught_up.subscribe();
        matches!(
            tokio::time::timeout(budget, caught_up.wait_for(|done| *done)).await,
            Ok(Ok(_))
        )
    }

    /// Changes to the keys as the state machine applies them (the key cache reloads on each).
    pub fn keys_changed(&self) -> watch::Receiver<u64> {
        self.keys_changed.clone()
    }

    pub fn is_leader(&self) -> bool {
        let m = self.raft.metrics();
        let m = m.borrow();
        m.state == ServerState::Leader && m.current_leader == Some(self.id)
    }

    fn leader(&self) -> Option<(NodeId, Member)> {
        let m = self.raft.metrics();
        let m = m.borrow();
        let leader = m.current_leader?;
        let member = m
            .membership_config
            .nodes()
            .find(|(id, _)| **id == leader)
            .map(|(_, n)| n.clone())?;
        Some((leader, member))
    }

    pub fn applied_index(&self) -> u64 {
        self.raft
            .metrics()
            .borrow()
            .last_applied
            .map(|l| l.index)
            .unwrap_or(0)
    }

    /// Waits (bounded) until this replica applied `index`; false on time-out.
    pub async fn wait_applied(&self, index: u64, budget: Duration) -> bool {
        self.applied_index() >= index
            || self
                .raft
                .wait(Some(budget))
                .applied_index_at_least(Some(index), "caught up")
                .await
                .is_ok()
    }

    /// Commits `command` through the leader, from any node, and returns its outcome once this replica has
    /// applied it too (so the caller reads its own write here). 503-worthy when no quorum commits it within
    /// `RAFT_WRITE_TIMEOUT_MS`.
    pub async fn write(&self, command: MainCommand) -> Result<MainOutcome, WriteError> {
        let deadline = Instant::now() + self.write_timeout;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(WriteError::Unavailable(NO_QUORUM.to_string()));
            }
            let attempt = match self.leader() {
                Some((leader, _)) if leader == self.id => self.write_here(&command, left).await,
                Some((leader, member)) => self.forward_write(leader, &member, &command, left).await,
                None => Err(LeaderError::NotLeader),
            };
            match attempt {
                Ok(reply) => {
                    let left = deadline.saturating_duration_since(Instant::now());
                    if !self
                        .wait_applied(reply.index, left.max(Duration::from_millis(500)))
                        .await
                    {
                        tracing::debug!(
                            index = reply.index,
                            "write committed, not yet applied here"
                        );
                    }
                    return Ok(reply.outcome);
                }
                Err(LeaderError::Unavailable { message }) => {
                    return Err(WriteError::Unavailable(message));
                }
                Err(LeaderError::NotLeader) => {
                    tokio::time::sleep(Duration::from_millis(50).min(left)).await;
                }
            }
        }
    }

    async fn write_here(
        &self,
        command: &MainCommand,
        budget: Duration,
    ) -> Result<WriteReply, LeaderError> {
        match tokio::time::timeout(budget, self.raft.client_write(command.clone())).await {
            Ok(Ok(done)) => Ok(WriteReply {
                index: done.log_id.index,
                outcome: done.data,
            }),
            Ok(Err(RaftError::APIError(ClientWriteError::ForwardToLeader(_)))) => {
                Err(LeaderError::NotLeader)
            }
            Ok(Err(err)) => Err(LeaderError::Unavailable {
                message: format!("{NO_QUORUM} ({err})"),
            }),
            Err(_) => Err(LeaderError::Unavailable {
                message: NO_QUORUM.to_string(),
            }),
        }
    }

    async fn forward_write(
        &self,
        leader: NodeId,
        member: &Member,
        command: &MainCommand,
        budget: Duration,
    ) -> Result<WriteReply, LeaderError> {
        let body = serde_json::to_vec(command).map_err(|e| LeaderError::Unavailable {
            message: e.to_string(),
        })?;
        let bytes = match self
            .transport
            .call(leader, member, Rpc::Write, body, budget)
            .await
        {
            Ok(bytes) => bytes,
            Err(err) => {
                tracing::debug!(leader = %member.name, error = %err, "leader unreachable for a write");
                return Err(LeaderError::NotLeader);
            }
        };
        serde_json::from_slice::<Result<WriteReply, LeaderError>>(&bytes).unwrap_or(Err(
            LeaderError::Unavailable {
                message: "the leader's reply was unreadable".to_string(),
            },
        ))
    }

    /// A write forwarded by a peer: committed here if this node leads.
    pub(crate) async fn write_as_leader(
        &self,
        command: MainCommand,
    ) -> Result<WriteReply, LeaderError> {
        if !self.is_leader() {
            return Err(LeaderError::NotLeader);
        }
        self.write_here(&command, self.write_timeout).await
    }

    /// The index a read must have applied to see every write committed before now (leader only).
    pub(crate) async fn read_index_as_leader(&self) -> Result<u64, LeaderError> {
        match tokio::time::timeout(self.write_timeout, self.raft.ensure_linearizable()).await {
            Ok(Ok(read)) => Ok(read.map(|l| l.index).unwrap_or(0)),
            Ok(Err(RaftError::APIError(_))) => Err(LeaderError::NotLeader),
            Ok(Err(err)) => Err(LeaderError::Unavailable {
                message: err.to_string(),
            }),
            Err(_) => Err(LeaderError::Unavailable {
                message: NO_QUORUM.to_string(),
            }),
        }
    }

    /// Catches this replica up with everything the leader committed before `arrived` (a key unknown here
    /// may have been created a moment ago through another node). Concurrent callers share one round trip
    /// and its outcome. False when the leader could not be asked, or its index applied, within `budget`;
    /// the caller then answers from what it has.
    pub async fn catch_up(&self, arrived: Instant, budget: Duration) -> bool {
        let mut last = self.last_sync.lock().await;
        if let Some((started, ok)) = *last
            && started > arrived
        {
            return ok;
        }
        let started = Instant::now();
        let ok = tokio::time::timeout(budget, self.sync_with_leader(budget))
            .await
            .unwrap_or(false);
        *last = Some((started, ok));
        if ok {
            self.caught_up.send_replace(true);
        }
        ok
    }

    /// Asks the leader for its read index and waits until this replica applied it.
    async fn sync_with_leader(&self, budget: Duration) -> bool {
        let index = match self.leader() {
            Some((leader, _)) if leader == self.id => self.read_index_as_leader().await.ok(),
            Some((leader, member)) => {
                match self
                    .transport
                    .call(leader, &member, Rpc::ReadIndex, Vec::new(), budget)
                    .await
                {
                    Ok(bytes) => serde_json::from_slice::<Result<u64, LeaderError>>(&bytes)
                        .ok()
                        .and_then(Result::ok),
                    Err(_) => None,
                }
            }
            None => None,
        };
        match index {
            Some(index) => self.wait_applied(index, budget).await,
            None => false,
        }
    }

    /// The raft part of `GET /api/infra/status`.
    pub fn status(&self) -> RaftStatus {
        let m = self.raft.metrics().borrow().clone();
        let name_of = |id: NodeId| {
            m.membership_config
                .nodes()
                .find(|(nid, _)| **nid == id)
                .map(|(_, n)| n.name.clone())
                .unwrap_or_else(|| id.to_string())
        };
        let last_log = m.last_log_index.unwrap_or(0);
        let voter_ids: Vec<NodeId> = m.membership_config.voter_ids().collect();
        let members = m
            .membership_config
            .nodes()
            .map(|(id, node)| {
                let matched = m
                    .replication
                    .as_ref()
                    .and_then(|r| r.get(id).cloned())
                    .map(|l| l.map(|l| l.index).unwrap_or(0));
                RaftMemberStatus {
                    node_id: node.name.clone(),
                    role: if voter_ids.contains(id) {
                        "voter"
                    } else {
                        "learner"
                    }
                    .to_string(),
                    matched_index: matched,
                    lag: matched.map(|i| last_log.saturating_sub(i)),
                }
            })
            .collect();
        RaftStatus {
            node_id: self.name.clone(),
            role: match m.state {
                ServerState::Leader => "leader",
                ServerState::Follower => "follower",
                ServerState::Candidate => "candidate",
                ServerState::Learner => "learner",
                ServerState::Shutdown => "shutdown",
            }
            .to_string(),
            term: m.current_term,
            leader: m.current_leader.map(name_of),
            last_log_index: last_log,
            commit_index: self.committed.load(Ordering::Relaxed),
            applied_index: m.last_applied.map(|l| l.index).unwrap_or(0),
            snapshot_index: m.snapshot.map(|l| l.index),
            members,
        }
    }

    pub async fn shutdown(&self) {
        if let Err(err) = self.raft.shutdown().await {
            tracing::warn!(error = %err, "raft did not shut down cleanly");
        }
    }
}

/// How long one attempt of the start catch-up may take, and the pause before the next.
const START_CATCH_UP_ROUND: Duration = Duration::from_secs(1);
const START_CATCH_UP_RETRY: Duration = Duration::from_millis(100);

/// A (re)started replica's files may predate writes the cluster committed while it was away (a key revoked
/// meanwhile): until it has applied the leader's read index, key checks wait or answer 503 and readiness
/// says not ready. Retries until it succeeds or the replica stops; without a reachable leader backed by a
/// quorum it never succeeds, and key checks keep answering 503 (readiness: [`MainRaft::is_leaderless`]).
async fn catch_up_at_start(raft: Weak<MainRaft>) {
    loop {
        let Some(node) = raft.upgrade() else { return };
        if node.raft.metrics().borrow().state == ServerState::Shutdown {
            return;
        }
        if node.catch_up(Instant::now(), START_CATCH_UP_ROUND).await {
            tracing::info!(
                applied = node.applied_index(),
                "raft replica caught up with the cluster's commits"
            );
            return;
        }
        drop(node);
        tokio::time::sleep(START_CATCH_UP_RETRY).await;
    }
}

/// A node's replica with the HTTP transport it talks through (whose URL book the membership task keeps).
pub struct RaftNode {
    pub raft: Arc<MainRaft>,
    pub(crate) http: Arc<network::HttpTransport>,
}

impl RaftNode {
    /// Starts the replica of a node with `MAIN_DB_REPLICATION=raft`.
    pub async fn start(
        config: &crate::config::Config,
        main_db: SqlitePool,
    ) -> anyhow::Result<RaftNode> {
        let secret = config.cluster_secret.clone().unwrap_or_default();
        let http = Arc::new(network::HttpTransport::new(secret));
        let raft = MainRaft::start(RaftOptions::from_config(config), main_db, http.clone()).await?;
        Ok(RaftNode { raft, http })
    }

    /// The raft part of `GET /api/infra/status`.
    pub fn status(&self) -> RaftStatus {
        self.raft.status()
    }
}

/// Publishes the replica's state as `wagate_raft_*` gauges once a second: the same figures as the status
/// (role, term, leader, last log, commit, applied and snapshot indexes, each member's lag).
pub(crate) async fn publish_metrics(
    raft: Arc<MainRaft>,
    shutdown: tokio_util::sync::CancellationToken,
) {
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    // Lag is only known on the leader; a node that stops leading blanks the series it published.
    let mut lag_published: std::collections::BTreeSet<String> = Default::default();
    let mut leader_published: Option<String> = None;
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = tick.tick() => {}
        }
        let status = raft.status();
        metrics::gauge!("wagate_raft_term").set(status.term as f64);
        metrics::gauge!("wagate_raft_is_leader").set(if status.role == "leader" {
            1.0
        } else {
            0.0
        });
        for role in ["leader", "follower", "candidate", "learner", "shutdown"] {
            metrics::gauge!("wagate_raft_role", "role" => role).set(if status.role == role {
                1.0
            } else {
                0.0
            });
        }
        if leader_published != status.leader {
            if let Some(old) = leader_published.take() {
                metrics::gauge!("wagate_raft_leader", "leader" => old).set(0.0);
            }
            if let Some(new) = &status.leader {
                metrics::gauge!("wagate_raft_leader", "leader" => new.clone()).set(1.0);
            }
            leader_published = status.leader.clone();
        }
        metrics::gauge!("wagate_raft_last_log_index").set(status.last_log_index as f64);
        metrics::gauge!("wagate_raft_commit_index").set(status.commit_index as f64);
        metrics::gauge!("wagate_raft_applied_index").set(status.applied_index as f64);
        metrics::gauge!("wagate_raft_snapshot_index")
            .set(status.snapshot_index.unwrap_or(0) as f64);
        metrics::gauge!("wagate_raft_members").set(status.members.len() as f64);
        let mut lagging = std::collections::BTreeSet::new();
        for member in &status.members {
            if let Some(lag) = member.lag {
                metrics::gauge!("wagate_raft_member_lag", "member" => member.node_id.clone())
                    .set(lag as f64);
                lagging.insert(member.node_id.clone());
            }
        }
        for gone in lag_published.difference(&lagging) {
            metrics::gauge!("wagate_raft_member_lag", "member" => gone.clone()).set(f64::NAN);
        }
        lag_published = lagging;
        if let Ok(pending) = raft.spool.pending().await {
            metrics::gauge!("wagate_raft_audit_spooled_rows").set(pending as f64);
        }
    }
}

#[cfg(test)]
mod tests;
