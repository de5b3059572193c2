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
