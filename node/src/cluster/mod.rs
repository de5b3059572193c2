//! Cluster duties: who owns a session and what happens when an owner goes away. `lease` is the trait (and
//! the embedded mode's `LocalLeases`); with `REDIS_ENABLED=true`, `Cluster` bundles the Redis lease
//! (`lease_redis`), the live-node registry (`registry`), the renewal loop (`heartbeat`), the takeover sweep
//! (`takeover`) and its placement rule (`placement`). The sessions themselves are reached only through
//! `SessionHost`, which `SessionService` implements; HTTP forwarding lives in `http/forward.rs`.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::config::Config;
use crate::store::{DataPool, now_ms};

pub(crate) mod heartbeat;
pub(crate) mod lease;
pub(crate) mod lease_redis;
pub(crate) mod placement;
pub(crate) mod registry;
pub(crate) mod takeover;

use lease_redis::{RedisError, RedisLeases};
use registry::{NodeInfo, Registry};

/// What the cluster needs from the sessions loaded on this node.
#[async_trait]
pub(crate) trait SessionHost: Send + Sync {
    /// Sessions loaded on this node now.
    fn loaded_count(&self) -> usize;
    /// The lease of a loaded session was lost: unload it at once, with no further writes.
    async fn lease_lost(&self, session_id: &str, generation: i64);
    /// Claims an orphaned session, applies the takeover status rules, and starts it when it should run.
    async fn take_over(&self, session_id: &str);
    /// Stops every loaded engine and releases its lease (desired state kept); returns how many.
    async fn release_all(&self) -> usize;
}

/// Where a session-scoped request should be served.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Route {
    Local,
    /// Another live node holds the lease.
    Remote {
        node_id: String,
        url: String,
    },
}

#[derive(Debug, Clone, Copy)]
pub(crate) struct Timing {
    pub heartbeat: Duration,
    pub sweep: Duration,
    /// Sessions taken over at once (`SESSION_RESTORE_CONCURRENCY`).
    pub max_takeovers: usize,
}

/// This node's membership of the cluster. Built at boot when Redis is enabled.
pub(crate) struct Cluster {
    pub node_id: String,
    pub node_url: String,
    pub leases: Arc<RedisLeases>,
    pub registry: Registry,
    /// The Redis pool and `REDIS_KEY_PREFIX`, for the other cluster-wide parts (sim network, event fan-out).
    pub pool: deadpool_redis::Pool,
    pub prefix: String,
    pub db: DataPool,
    pub timing: Timing,
    /// Set by a drain: the node takes no more sessions and says so in the registry.
    is_draining: AtomicBool,
}

impl Cluster {
    /// Opens the Redis pool and checks that Redis answers.
    pub(crate) async fn connect(config: &Config, db: DataPool) -> Result<Cluster, RedisError> {
        let pool = deadpool_redis::Config::from_url(config.redis_url.as_str())
            .create_pool(Some(deadpool_redis::Runtime::Tokio1))
            .map_err(|err| RedisError::Setup(err.to_string()))?;
        let mut conn = pool.get().await?;
        let _: String = deadpool_redis::redis::cmd("PING")
            .query_async(&mut *conn)
            .await?;
        let ttl = Duration::from_millis(config.session_lease_ttl_ms);
        let prefix = config.redis_key_prefix.clone();
        let leases = RedisLeases::new(
            pool.clone(),
            db.clone(),
            config.node_id.clone(),
            prefix.clone(),
            ttl,
        );
        Ok(Cluster {
            node_id: config.node_id.clone(),
            node_url: config.node_url.trim_end_matches('/').to_string(),
            leases: Arc::new(leases),
            registry: Registry::new(pool.clone(), prefix.clone(), ttl),
            pool,
            prefix,
            db,
            timing: Timing {
                heartbeat: Duration::from_millis(config.session_lease_heartbeat_ms),
                sweep: Duration::from_millis(config.session_takeover_sweep_ms),
                max_takeovers: usize::try_from(config.session_restore_concurrency).unwrap_or(1),
            },
            is_draining: AtomicBool::new(false),
        })
    }

    /// Whether Redis answers a PING within a second (readiness).
    pub(crate) async fn ping(&self) -> bool {
        let probe = async {
            let mut conn = self.pool.get().await.ok()?;
            deadpool_redis::redis::cmd("PING")
                .query_async::<String>(&mut *conn)
                .await
                .ok()
        };
        matches!(
            tokio::time::timeout(Duration::from_secs(1), probe).await,
            Ok(Some(_))
        )
    }

    pub(crate) fn is_draining(&self) -> bool {
        self.is_draining.load(Ordering::SeqCst)
    }

    /// Where a request for `session_id` is served: here unless another live node holds its lease.
    pub(crate) async fn route(&self, session_id: &str) -> Result<Route, RedisError> {
        // A lease held here within its deadline is ours in Redis too (renewals are compare-and-set).
        if self.leases.holds(session_id) {
            return Ok(Route::Local);
        }
        let prefix = self.registry.node_key_prefix();
        let Some((owner, announcement)) = self.leases.owner_with(session_id, &prefix).await? else {
            return Ok(Route::Local);
        };
        if owner.node_id == self.node_id {
            return Ok(Route::Local);
        }
        Ok(match announcement.as_deref().and_then(Registry::parse) {
            Some(node) => Route::Remote {
                node_id: node.node_id,
                url: node.url,
            },
            None => Route::Local,
        })
    }

    /// Publishes this node in the registry for one TTL.
    pub(crate) async fn announce(&self, sessions: usize) -> Result<(), RedisError> {
        let info = NodeInfo {
            node_id: self.node_id.clone(),
            url: self.node_url.clone(),
            sessions,
            is_draining: self.is_draining(),
            heartbeat_at: now_ms(),
        };
        self.registry.announce(&info).await
    }

    /// Stops taking sessions and hands this node's sessions to its peers.
    pub(crate) async fn drain(&self, host: &dyn SessionHost) -> usize {
        self.is_draining.store(true, Ordering::SeqCst);
        self.leases.close();
        if let Err(err) = self.announce(host.loaded_count()).await {
            tracing::warn!(error = %err, "drain not announced; peers see it at the next heartbeat");
        }
        host.release_all().await
    }

    /// Graceful shutdown: engines stopped, leases released, registry entry withdrawn, so peers take over
    /// at their next sweep instead of after a TTL.
    pub(crate) async fn leave(&self, host: &dyn SessionHost) {
        self.is_draining.store(true, Ordering::SeqCst);
        self.leases.close();
        if let Err(err) = self.registry.withdraw(&self.node_id).await {
            tracing::warn!(error = %err, "node not withdrawn from the registry; it will expire");
        }
        let released = host.release_all().await;
        tracing::info!(sessions = released, "left the cluster");
    }
}

/// Starts this node's cluster duties: the heartbeat, the takeover sweep, and leaving the cluster at the
/// shutdown signal (not after in-flight requests drained: leases that stop being renewed while engines
/// still run would let a peer start a second engine).
pub(crate) fn spawn_duties(
    cluster: &Arc<Cluster>,
    host: Arc<dyn SessionHost>,
    tasks: &TaskTracker,
    shutdown: &CancellationToken,
) {
    tasks.spawn(heartbeat::run(
        cluster.clone(),
        host.clone(),
        shutdown.clone(),
    ));
    tasks.spawn(takeover::run(
        cluster.clone(),
        host.clone(),
        shutdown.clone(),
    ));
    let (cluster, stop) = (cluster.clone(), shutdown.clone());
    tasks.spawn(async move {
        stop.cancelled().await;
        cluster.leave(host.as_ref()).await;
    });
}
