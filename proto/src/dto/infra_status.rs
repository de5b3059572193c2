//! `GET /api/infra/status`: what one node says about itself, its queues and its live peers.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct InfraStatus {
    pub node_id: String,
    /// `all`, `api` or `worker`.
    pub role: String,
    /// `sim`, `socket` or `browser`.
    pub engine: String,
    pub version: String,
    /// Whether this node runs in a cluster (`REDIS_ENABLED=true`).
    pub cluster: bool,
    /// True after a drain: the node takes no new sessions.
    pub draining: bool,
    pub leases_held: usize,
    /// Sessions loaded (engine running or starting) on this node.
    pub sessions_loaded: usize,
    /// The other live nodes of the cluster as their last heartbeat announced them (empty when embedded).
    pub peers: Vec<PeerStatus>,
    pub queue: QueueStatus,
    /// This node's replica of the main DB with `MAIN_DB_REPLICATION=raft` (absent otherwise).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub raft: Option<RaftStatus>,
}

/// A node's raft replica of the main DB.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct RaftStatus {
    /// This node's `NODE_ID`.
    pub node_id: String,
    /// `leader`, `follower`, `candidate`, `learner` or `shutdown`.
    pub role: String,
    pub term: u64,
    /// The `NODE_ID` of the leader this node knows of.
    pub leader: Option<String>,
    pub last_log_index: u64,
    pub commit_index: u64,
    pub applied_index: u64,
    /// The last log index the newest snapshot covers.
    pub snapshot_index: Option<u64>,
    pub members: Vec<RaftMemberStatus>,
}

/// A member of the raft group as one node sees it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct RaftMemberStatus {
    pub node_id: String,
    /// `voter` or `learner`.
    pub role: String,
    /// Known on the leader only: the last index the member confirmed, and how far it is behind the log.
    pub matched_index: Option<u64>,
    pub lag: Option<u64>,
}

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct PeerStatus {
    pub node_id: String,
    pub url: String,
    pub sessions: usize,
    pub draining: bool,
    /// Epoch milliseconds of the peer's last heartbeat.
    pub heartbeat_at: i64,
}

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct QueueStatus {
    /// `sqlite` (embedded) or `redis`.
    pub backend: String,
    /// False when the delivery state could not be read (then every count is 0).
    pub reachable: bool,
    pub webhooks: QueueCounts,
    pub ingress: QueueCounts,
}

/// `pending` is waiting + active + delayed.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct QueueCounts {
    pub pending: u64,
    pub completed: u64,
    pub failed: u64,
}
