//! Draining this node (`POST /api/infra/drain`): its engines stop and their leases are released, so peers
//! take the sessions over at their next sweep, and the node takes no new ones. Only in a cluster.

use std::sync::Arc;

use super::error::{SessionError, SessionResult};
use super::service::SessionService;
use crate::cluster::Cluster;

/// What a drain did.
pub(crate) struct Drained {
    pub node_id: String,
    pub released: usize,
}

impl SessionService {
    /// Called once at boot in a cluster.
    pub(crate) fn join_cluster(&self, cluster: Arc<Cluster>) {
        let _ = self.cluster.set(cluster);
    }

    pub(crate) async fn drain(&self) -> SessionResult<Drained> {
        let cluster = self.cluster.get().ok_or(SessionError::NotClustered)?;
        let released = cluster.drain(self).await;
        Ok(Drained {
            node_id: cluster.node_id.clone(),
            released,
        })
    }
}
