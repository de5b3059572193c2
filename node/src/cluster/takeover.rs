//! The takeover sweep: every `SESSION_TAKEOVER_SWEEP_MS`, on every node (whatever `AUTO_START_SESSIONS`
//! says), find sessions that should run (desired running, or left in an active status) but whose lease
//! nobody holds, and take over the slice of them placement deals to this node (least-loaded first). The status
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
    let mut orphans = cluster.leases.unheld(&candidates).await?;
    if orphans.is_empty() {
        return Ok(0);
    }
    // Every node deals the same id-sorted list (placement.rs), so their slices do not overlap.
    orphans.sort();
    let mut nodes = cluster.registry.live_nodes().await?;
    // A node that missed two beats is dead or stalled even if its registry key has not expired yet (it
    // expires with the TTL, like the leases whose lapse made these orphans): deal it nothing.
    let beat_ms = i64::try_from(cluster.timing.heartbeat.as_millis()).unwrap_or(i64::MAX);
    let now = crate::store::now_ms();
    nodes.retain(|n| n.node_id == cluster.node_id || now - n.heartbeat_at <= 2 * beat_ms);
    // The whole slice is taken in this sweep (a crashed node's sessions are back within TTL + sweep),
    // `SESSION_RESTORE_CONCURRENCY` at a time.
    let max = cluster.timing.max_takeovers.max(1);
    let slice = placement::share(
        &cluster.node_id,
        host.loaded_count(),
        &nodes,
        orphans.len(),
        usize::MAX,
    );
    let chosen: Vec<String> = orphans
        .get(slice)
        .map(<[String]>::to_vec)
        .unwrap_or_default();
    let taken = chosen.len();
    if taken > 0 {
        tracing::info!(sessions = taken, "taking over orphaned sessions");
    }
    futures::stream::iter(chosen)
        .for_each_concurrent(max, |id| async move { host.take_over(&id).await })
        .await;
    if taken > 0 {
        // Peers deal the next sweep from fresh loads rather than those of the last heartbeat.
        if let Err(err) = cluster.announce(host.loaded_count()).await {
            tracing::warn!(error = %err, "node registry not refreshed after a takeover");
        }
    }
    Ok(taken)
}
