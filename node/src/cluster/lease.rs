//! Session leases: a session runs on exactly one node, and every status write it makes carries the lease's
//! fencing generation. `LocalLeases` serves the embedded mode (one node, generations from the data DB);
//! `RedisLeases` (`lease_redis.rs`) takes over in a cluster.

use async_trait::async_trait;

use crate::sessions::cache::RecordCache;
use crate::store::{DataPool, StoreError, sessions};

/// A held lease on one session.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Lease {
    pub generation: i64,
}

#[derive(Debug, thiserror::Error)]
pub(crate) enum LeaseError {
    #[error("Session lease is held by another node")]
    HeldElsewhere,
    /// This node is draining or leaving the cluster and takes no session.
    #[error("This node is draining and takes no sessions")]
    Draining,
    /// The lease store (Redis) did not answer.
    #[error("Session lease store unavailable: {0}")]
    Unavailable(String),
    #[error(transparent)]
    Store(#[from] StoreError),
}

#[async_trait]
pub(crate) trait Leases: Send + Sync {
    /// Claims the session for this node with a generation newer than any before it. The claim writes the
    /// row's lease generation and owner, so it bumps the row's version in `records` before it returns
    /// (other nodes' cached records of it go stale with it).
    async fn acquire(&self, session_id: &str, records: &RecordCache) -> Result<Lease, LeaseError>;
    /// Gives the session up (stop, logout, shutdown) so another node may take it at once.
    async fn release(&self, session_id: &str, lease: Lease);
    /// Whether `lease` is still this node's to write with (false once its deadline passed or it was lost).
    fn is_current(&self, _session_id: &str, _lease: Lease) -> bool {
        true
    }
    /// Which of `ids` another node holds now (its engine runs there); none in the embedded mode.
    async fn held_elsewhere(&self, _ids: &[&str]) -> Vec<String> {
        Vec::new()
    }
    /// Forgets everything kept about a deleted session (the cluster's generation counter).
    async fn forget_session(&self, _session_id: &str) {}
}

/// The embedded mode's lease: this node owns every session; the generation still grows on every claim so
/// fenced writes behave exactly as in a cluster.
pub(crate) struct LocalLeases {
    db: DataPool,
    node_id: String,
}

impl LocalLeases {
    pub(crate) fn new(db: DataPool, node_id: String) -> LocalLeases {
        LocalLeases { db, node_id }
    }
}

#[async_trait]
impl Leases for LocalLeases {
    async fn acquire(&self, session_id: &str, records: &RecordCache) -> Result<Lease, LeaseError> {
        let current = sessions::get(&self.db, session_id).await?.lease_generation;
        let generation = current + 1;
        let claimed = claim(&self.db, records, session_id, generation, &self.node_id).await;
        match claimed {
            Ok(()) => Ok(Lease { generation }),
            Err(StoreError::StaleLease) => Err(LeaseError::HeldElsewhere),
            Err(other) => Err(other.into()),
        }
    }

    async fn release(&self, _session_id: &str, _lease: Lease) {}
}

/// Writes a claim to the session's row and bumps the row's version in `records` before answering, whatever
/// the claim's outcome but a fenced refusal (which wrote nothing): an error may come after a commit.
pub(crate) async fn claim(
    db: &DataPool,
    records: &RecordCache,
    session_id: &str,
    generation: i64,
    node_id: &str,
) -> Result<(), StoreError> {
    let claimed = sessions::claim(db, session_id, generation, node_id).await;
    if !matches!(claimed, Err(StoreError::StaleLease)) {
        records.invalidate(session_id).await;
    }
    claimed
}
