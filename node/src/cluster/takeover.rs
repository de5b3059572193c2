//! The takeover sweep: every `SESSION_TAKEOVER_SWEEP_MS`, on every node (whatever `AUTO_START_SESSIONS`
//! says), find sessions that should run (desired running, or left in an active status) but whose lease
//! nobody holds, and, if placement says this node is the least loaded, take a few of them over. The status
//! rules and the start itself are the session host's (`SessionHost::take_over`).

use std::sync::Arc;

use futures::StreamExt;
use tokio::time::MissedTickBehavior;
use tokio_util::sync::CancellationToken;

use super::lease_redis::RedisError;
use super::{Cluster, SessionHost, placement};
use crate::store::{StoreError, sessions};

#[derive(Debug, thiserror::Error)]
enum SweepError {
    #[error(transparent)]
    Redis(#[from] RedisError),
    #[error(transparent)]
    Store(#[from] StoreError),
}

pub(crate) async fn run(
    cluster: Arc<Cluster>,
    host: Arc<dyn SessionHost>,
    shutdown: CancellationToken,
) {
    let mut tick = tokio::time::interval(cluster.timing.sweep);
    tick.set_missed_tick_behavior(MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => break,
            _ = tick.tick() => {
                if let Err(err) = sweep(&cluster, host.as_ref()).await {
                    tracing::warn!(error = %err, "takeover sweep failed");
                }
            }
        }
    }
}

/// One sweep; returns how many sessions this node tried to take over.
async fn sweep(cluster: &Cluster, host: &dyn SessionHost) -> Result<usize, SweepError> {
    if cluster.is_draining() {
        return Ok(0);
    }
    let candidates = sessions::list_takeover_candidates(&cluster.db).await?;
    let orphans = cluster.leases.unheld(&candidates).await?;
    if orphans.is_empty() {
        return Ok(0);
    }
    let nodes = cluster.registry.live_nodes().await?;
    let max = cluster.timing.max_takeovers.max(1);
    let budget = placement::budget(&cluster.node_id, host.loaded_count(), &nodes, max);
    let chosen: Vec<String> = orphans.into_iter().take(budget).collect();
    let taken = chosen.len();
    if taken > 0 {
        tracing::info!(sessions = taken, "taking over orphaned sessions");
    }
    futures::stream::iter(chosen)
        .for_each_concurrent(max, |id| async move { host.take_over(&id).await })
        .await;
    Ok(taken)
}
