//! Cluster duties: who owns a session and what happens when an owner goes away. `lease` is the trait (and
//! the embedded mode's `LocalLeases`); with `REDIS_ENABLED=true`, `Cluster` bundles the Redis lease
//! (`lease_redis`), the live-node registry (`registry`), the renewal loop (`heartbeat`), the takeover sweep
//! (`takeover`) and its placement rule (`placement`), and the planned handover of a leaving node's sessions
//! (`handover`). The sessions themselves are reached only through
//! `SessionHost`, which `SessionService` implements; HTTP forwarding lives in `http/forward.rs`.
//! A `ROLE=worker` node (`hosts_sessions` false) is a queue worker: it announces itself as no session host,
//! takes no lease, and runs neither the takeover sweep nor the handover inbox.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use deadpool_redis::redis;
use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::config::{Config, NodeRole};
use crate::store::{DataPool, now_ms};

pub(crate) mod handover;
pub(crate) mod heartbeat;
pub(crate) mod lease;
pub(crate) mod lease_redis;
pub(crate) mod placement;
pub(crate) mod registry;
pub(crate) mod takeover;

use handover::{Serving, Transit};
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
    /// Ids of the sessions loaded on this node.
    fn loaded_ids(&self) -> Vec<String>;
    /// Lets a session go for a handover: its engine stops with no further write and its lease is released.
    async fn hand_out(&self, session_id: &str);
    /// Claims a session a peer handed over and brings it up from the stored credentials (until `budget`
    /// for it to be ready); true when it runs here.
    async fn take_handover(&self, session_id: &str, budget: tokio::time::Instant) -> bool;
}

/// Whether a node with this configuration hosts sessions: every role but the queue worker (`ROLE=worker`
/// runs the webhook and ingress workers only; users deploy it outside the API Service).
pub(crate) fn hosts_sessions(config: &Config) -> bool {
    config.role != NodeRole::Worker
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
    /// Sessions taken over (or handed over) at once (`SESSION_RESTORE_CONCURRENCY`).
    pub max_takeovers: usize,
    /// `SESSION_HANDOVER_WAIT_MS`.
    pub handover_wait: Duration,
}

/// This node's membership of the cluster. Built at boot when Redis is enabled.
pub(crate) struct Cluster {
    pub node_id: String,
    pub node_url: String,
    pub leases: Arc<RedisLeases>,
    pub registry: Registry,
    /// One multiplexed connection for what every request asks Redis (the lease owner of a session routed
    /// elsewhere, the session-record tokens); see [`lookup_link`].
    pub lookups: ConnectionManager,
    /// The Redis pool and `REDIS_KEY_PREFIX`, for the other cluster-wide parts (sim network, event fan-out).
    pub pool: deadpool_redis::Pool,
    pub prefix: String,
    pub db: DataPool,
    pub timing: Timing,
    /// False on a `ROLE=worker` node: announced so in the registry, and no lease is ever taken here.
    pub hosts_sessions: bool,
    /// Set by a drain: the node takes no more sessions and says so in the registry.
    is_draining: AtomicBool,
    has_left: AtomicBool,
    /// Sessions in a planned handover from or to this node, and the requests served here on each.
    pub transit: Arc<Transit>,
}

/// How long a per-request lookup may wait for Redis before the request goes on without it.
const LOOKUP_TIMEOUT: Duration = Duration::from_secs(1);

/// The connection for per-request lookups. Concurrent requests share its socket, their commands pipelined;
/// a pool checkout cost each request a recycle round trip (deadpool-redis PINGs a connection before handing it
/// out) and, under load, a wait for one of the pool's few connections. It connects on first use and again
/// after a failure. Only commands that do not depend on the connection's state (no WATCH, no MULTI) go on it.
pub(crate) fn lookup_link(url: &str) -> Result<ConnectionManager, RedisError> {
    let client = redis::Client::open(url).map_err(|err| RedisError::Setup(err.to_string()))?;
    let config = ConnectionManagerConfig::new()
        .set_number_of_retries(1)
        .set_connection_timeout(Some(LOOKUP_TIMEOUT))
        .set_response_timeout(Some(LOOKUP_TIMEOUT));
    ConnectionManager::new_lazy_with_config(client, config)
        .map_err(|err| RedisError::Setup(err.to_string()))
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
        let lookups = lookup_link(config.redis_url.as_str())?;
        let leases = RedisLeases::new(
            pool.clone(),
            lookups.clone(),
            db.clone(),
            config.node_id.clone(),
            prefix.clone(),
            ttl,
        );
        let hosts_sessions = hosts_sessions(config);
        if !hosts_sessions {
            // Whatever path might reach a session here, it cannot take the lease, so never runs one.
            leases.close();
        }
        Ok(Cluster {
            node_id: config.node_id.clone(),
            node_url: config.node_url.trim_end_matches('/').to_string(),
            leases: Arc::new(leases),
            registry: Registry::new(pool.clone(), prefix.clone(), ttl),
            lookups,
            pool,
            prefix,
            db,
            timing: Timing {
                heartbeat: Duration::from_millis(config.session_lease_heartbeat_ms),
                sweep: Duration::from_millis(config.session_takeover_sweep_ms),
                max_takeovers: usize::try_from(config.session_restore_concurrency).unwrap_or(1),
                handover_wait: Duration::from_millis(config.session_handover_wait_ms),
            },
            hosts_sessions,
            is_draining: AtomicBool::new(false),
            has_left: AtomicBool::new(false),
            transit: Arc::default(),
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

    /// Where a request for `session_id` is served: here unless another live node holds its lease; and
    /// whether the session is marked in a planned handover.
    async fn locate(&self, session_id: &str) -> Result<(Route, bool), RedisError> {
        // A lease held here within its deadline is ours in Redis too (renewals are compare-and-set).
        if self.leases.holds(session_id) {
            return Ok((Route::Local, false));
        }
        let prefix = self.registry.node_key_prefix();
        let mark = handover::mark_key(&self.prefix, session_id);
        let (owner, is_marked) = self.leases.owner_with(session_id, &prefix, &mark).await?;
        let Some((owner, announcement)) = owner else {
            return Ok((Route::Local, is_marked));
        };
        if owner.node_id == self.node_id {
            return Ok((Route::Local, is_marked));
        }
        let route = match announcement.as_deref().and_then(Registry::parse) {
            Some(node) => Route::Remote {
                node_id: node.node_id,
                url: node.url,
            },
            None => Route::Local,
        };
        Ok((route, is_marked))
    }

    /// Where a request for `session_id` is served, once any planned handover of the session is over (waited
    /// for at most `SESSION_HANDOVER_WAIT_MS`). A request served here holds the `Serving` it gets until it
    /// is answered, so a handover starting meanwhile lets it finish first.
    pub(crate) async fn route(
        &self,
        session_id: &str,
    ) -> Result<(Route, Option<Serving>), RedisError> {
        let deadline = tokio::time::Instant::now() + self.timing.handover_wait;
        loop {
            let is_waiting = tokio::time::Instant::now() < deadline;
            if is_waiting && self.transit.is_moving(session_id) {
                self.transit.settled(session_id, deadline).await;
                continue;
            }
            let (route, is_marked) = self.locate(session_id).await?;
            if is_waiting && is_marked {
                tokio::time::sleep(Duration::from_millis(20)).await;
                continue;
            }
            if route != Route::Local {
                return Ok((route, None));
            }
            match self.transit.serve(session_id) {
                Some(serving) => return Ok((Route::Local, Some(serving))),
                None if !is_waiting => return Ok((Route::Local, None)),
                None => {}
            }
        }
    }

    /// Whether `session_id` is marked in a planned handover.
    pub(crate) async fn is_marked(&self, session_id: &str) -> Result<bool, RedisError> {
        let mut conn = self.pool.get().await?;
        let found: i64 = deadpool_redis::redis::cmd("EXISTS")
            .arg(handover::mark_key(&self.prefix, session_id))
            .query_async(&mut *conn)
            .await?;
        Ok(found > 0)
    }

    /// Publishes this node in the registry for one TTL.
    pub(crate) async fn announce(&self, sessions: usize) -> Result<(), RedisError> {
        let info = NodeInfo {
            node_id: self.node_id.clone(),
            url: self.node_url.clone(),
            sessions,
            is_draining: self.is_draining(),
            hosts_sessions: self.hosts_sessions,
            heartbeat_at: now_ms(),
        };
        self.registry.announce(&info).await
    }

    /// Stops taking sessions and hands this node's sessions to its peers (planned handover; what no peer
    /// took is released for the takeover sweep). Answers how many sessions left this node.
    pub(crate) async fn drain(&self, host: &dyn SessionHost) -> usize {
        self.is_draining.store(true, Ordering::SeqCst);
        self.leases.close();
        if let Err(err) = self.announce(host.loaded_count()).await {
            tracing::warn!(error = %err, "drain not announced; peers see it at the next heartbeat");
        }
        let handed = handover::hand_over_all(self, host).await;
        handed + host.release_all().await
    }

    /// Graceful shutdown, while the node still serves HTTP: the sessions are handed to peers (requests for
    /// one in transit wait for its new owner), what is left is released, and the registry entry withdrawn.
    /// Runs once; a second call does nothing.
    pub(crate) async fn leave(&self, host: &dyn SessionHost) {
        if self.has_left.swap(true, Ordering::SeqCst) {
            return;
        }
        let moved = self.drain(host).await;
        if let Err(err) = self.registry.withdraw(&self.node_id).await {
            tracing::warn!(error = %err, "node not withdrawn from the registry; it will expire");
        }
        tracing::info!(sessions = moved, "left the cluster");
    }
}

/// Starts this node's cluster duties: the heartbeat, the takeover sweep, the handover inbox, and leaving the
/// cluster at shutdown if the signal handler has not (`boot.rs` leaves before the listener closes; leaving
/// only after in-flight requests drained would let leases lapse while engines still run). A node that hosts
/// no sessions only beats: its registry entry keeps it a raft learner and a listed peer.
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
    if cluster.hosts_sessions {
        tasks.spawn(takeover::run(
            cluster.clone(),
            host.clone(),
            shutdown.clone(),
        ));
        tasks.spawn(handover::receive(
            cluster.clone(),
            host.clone(),
            shutdown.clone(),
        ));
    }
    let (cluster, stop) = (cluster.clone(), shutdown.clone());
    tasks.spawn(async move {
        stop.cancelled().await;
        cluster.leave(host.as_ref()).await;
    });
}
