//! `NodeInfra`: this node's own infrastructure (both databases, the job queues, the cluster membership and
//! the raft replica of the main DB) and what the health, infra-status, metrics and queue-dashboard routes
//! read or do through it, and the forwarding layer's routing. Handlers and layers ask these methods; the
//! handles themselves go only to boot and the background duties, through the accessors at the end.

use std::sync::Arc;

use sqlx::SqlitePool;
use wagate_proto::dto::infra_status::PeerStatus;
use wagate_workers::queue_view::{self, Action, JobView, Listing, QueueName, ViewError};
use wagate_workers::{JobCounts, QueueBackend, QueueClient};

use crate::cluster::handover::Serving;
use crate::cluster::lease_redis::RedisError;
use crate::cluster::{Cluster, Route, SessionHost};
use crate::raft::RaftNode;
use crate::sessions::SessionService;
use crate::store::DataPool;
use crate::store::backends::{probe_data, probe_main};

pub(crate) struct NodeInfra {
    main_db: SqlitePool,
    data_db: DataPool,
    queue: QueueClient,
    sessions: Arc<SessionService>,
    cluster: Option<Arc<Cluster>>,
    raft: Option<Arc<RaftNode>>,
}

/// What the readiness probe found.
pub(crate) struct Probe {
    pub main_up: bool,
    pub data_up: bool,
    /// `None` outside a cluster (no Redis to ask).
    pub redis_up: Option<bool>,
    pub draining: bool,
}

impl Probe {
    pub(crate) fn ready(&self) -> bool {
        self.main_up && self.data_up && self.redis_up.unwrap_or(true) && !self.draining
    }
}

impl NodeInfra {
    pub(crate) fn new(
        main_db: SqlitePool,
        data_db: DataPool,
        queue: QueueClient,
        sessions: Arc<SessionService>,
        cluster: Option<Arc<Cluster>>,
        raft: Option<Arc<RaftNode>>,
    ) -> NodeInfra {
        NodeInfra {
            main_db,
            data_db,
            queue,
            sessions,
            cluster,
            raft,
        }
    }

    /// Both databases and, in a cluster, Redis answer a bounded probe; and whether the node drains.
    pub(crate) async fn probe(&self) -> Probe {
        let redis_probe = async {
            match &self.cluster {
                Some(cluster) => Some(cluster.ping().await),
                None => None,
            }
        };
        let (main_up, data_up, redis_up) = tokio::join!(
            probe_main(&self.main_db),
            probe_data(&self.data_db),
            redis_probe
        );
        Probe {
            main_up,
            data_up,
            redis_up,
            draining: self.is_draining(),
        }
    }

    pub(crate) fn is_clustered(&self) -> bool {
        self.cluster.is_some()
    }

    pub(crate) fn is_draining(&self) -> bool {
        self.cluster.as_ref().is_some_and(|c| c.is_draining())
    }

    /// Leases this node holds: the Redis leases in a cluster; embedded, every loaded session holds its own.
    pub(crate) fn leases_held(&self) -> usize {
        match &self.cluster {
            Some(cluster) => cluster.leases.held_count(),
            None => self.sessions.loaded_count(),
        }
    }

    /// How many of `loaded` (sessions loaded here) this node holds the lease of: the count a
    /// session-restricted admin sees.
    pub(crate) fn leases_held_among(&self, loaded: &[String]) -> usize {
        match &self.cluster {
            Some(cluster) => loaded.iter().filter(|id| cluster.leases.holds(id)).count(),
            None => loaded.len(),
        }
    }

    /// The other live nodes of the cluster (none embedded, and none when the registry cannot be read).
    pub(crate) async fn peers(&self) -> Vec<PeerStatus> {
        let Some(cluster) = &self.cluster else {
            return Vec::new();
        };
        match cluster.registry.live_nodes().await {
            Ok(nodes) => nodes
                .into_iter()
                .filter(|n| n.node_id != cluster.node_id)
                .map(|n| PeerStatus {
                    node_id: n.node_id,
                    url: n.url,
                    sessions: n.sessions,
                    draining: n.is_draining,
                    heartbeat_at: n.heartbeat_at,
                })
                .collect(),
            Err(err) => {
                tracing::warn!(error = %err, "live peers not read for the infra status");
                Vec::new()
            }
        }
    }

    /// The queue backend's name as the infra status shows it.
    pub(crate) fn queue_backend(&self) -> &'static str {
        match self.queue.config().backend {
            QueueBackend::Sqlite { .. } => "sqlite",
            QueueBackend::Redis { .. } => "redis",
        }
    }

    /// The replica's state, with `MAIN_DB_REPLICATION=raft`.
    pub(crate) fn raft_status(&self) -> Option<wagate_proto::dto::infra_status::RaftStatus> {
        self.raft.as_ref().map(|node| node.status())
    }

    pub(crate) async fn queue_counts(&self, queue: QueueName) -> Result<JobCounts, ViewError> {
        queue_view::counts(&self.data_db, queue).await
    }

    pub(crate) async fn queue_jobs(
        &self,
        queue: QueueName,
        listing: Listing,
        limit: i64,
    ) -> Result<Vec<JobView>, ViewError> {
        queue_view::jobs(&self.data_db, queue, listing, limit).await
    }

    pub(crate) async fn retry_job(&self, queue: QueueName, id: &str) -> Result<Action, ViewError> {
        queue_view::retry(&self.data_db, &self.queue, queue, id).await
    }

    pub(crate) async fn remove_job(&self, queue: QueueName, id: &str) -> Result<Action, ViewError> {
        queue_view::remove(&self.data_db, queue, id).await
    }

    /// The outbox and queue depth gauges, sampled at scrape time.
    pub(crate) async fn sample_depth_gauges(&self) {
        queue_view::sample_depth_gauges(&self.data_db).await;
    }

    /// Where a request about `session_id` is served (here, outside a cluster), and whether this node
    /// serves it through a planned handover: what the forwarding layer decides on.
    pub(crate) async fn route(
        &self,
        session_id: &str,
    ) -> Result<(Route, Option<Serving>), RedisError> {
        match &self.cluster {
            Some(cluster) => cluster.route(session_id).await,
            None => Ok((Route::Local, None)),
        }
    }

    /// The routes other nodes' raft replicas call (no API key, the cluster secret instead); `None`
    /// without a replicated main DB.
    pub(crate) fn raft_routes(&self, secret: String, body_limit: usize) -> Option<axum::Router> {
        let node = self.raft.as_ref()?;
        Some(crate::raft::routes::router(
            node.raft.clone(),
            secret,
            body_limit,
        ))
    }

    // The handles, for boot and the background duties (not for handlers or layers).

    pub(crate) fn cluster(&self) -> Option<&Arc<Cluster>> {
        self.cluster.as_ref()
    }

    pub(crate) fn raft(&self) -> Option<&Arc<RaftNode>> {
        self.raft.as_ref()
    }

    pub(crate) fn data_db(&self) -> &DataPool {
        &self.data_db
    }

    pub(crate) fn queue(&self) -> &QueueClient {
        &self.queue
    }

    /// Every SQLite pool this node opened: the main DB, the data DB and its read-only companion, the queues.
    pub(crate) fn sqlite_pools(&self) -> Vec<SqlitePool> {
        let mut pools = vec![self.main_db.clone()];
        if let DataPool::Sqlite(writers) = &self.data_db {
            pools.push(writers.clone());
            if let DataPool::Sqlite(readers) = crate::store::backends::read_pool(&self.data_db) {
                pools.push(readers);
            }
        }
        pools.extend(self.queue.sqlite_pool().cloned());
        pools
    }
}
