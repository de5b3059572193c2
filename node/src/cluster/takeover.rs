//! The takeover sweep: every `SESSION_TAKEOVER_SWEEP_MS`, on every node (whatever `AUTO_START_SESSIONS`
//! says), find sessions that should run (desired running, or left in an active status) but whose lease
//! nobody holds, and take over the slice of them placement deals to this node (least-loaded first). The status
//! rules and the start itself are the session host's (`SessionHost::take_over`). A peer that missed a
//! heartbeat also gets a sweep at the moment its announcement (and with it its leases) runs out. A
//! `ROLE=worker` node runs no sweep (`cluster::spawn_duties`) and is dealt nothing (`placement`).

use std::sync::Arc;

use std::time::Duration;

use futures::StreamExt;
use tokio::time::Instant;
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

/// A sweep aimed at a peer's lapse runs this long after its announcement expires, so the leases it renewed
/// just before announcing have lapsed too.
const LAPSE_MARGIN: Duration = Duration::from_millis(50);

/// The first look again after a sweep that found orphans.
const FIRST_FOLLOW_UP: Duration = Duration::from_millis(250);

pub(crate) async fn run(
    cluster: Arc<Cluster>,
    host: Arc<dyn SessionHost>,
    shutdown: CancellationToken,
) {
    if let Err(err) = reclaim_past_life(&cluster, host.as_ref()).await {
        tracing::warn!(error = %err, "sessions of this node's past life not taken back at boot");
    }
    let mut follow_up = FIRST_FOLLOW_UP;
    loop {
        let regular = Instant::now() + cluster.timing.sweep;
        let orphans = sweep(&cluster, host.as_ref()).await.unwrap_or_else(|err| {
            tracing::warn!(error = %err, "takeover sweep failed");
            0
        });
        // A crashed peer's leases lapse over a few hundred milliseconds and each node sweeps at its own
        // instant, so a sweep can deal from a list that changed under it and leave orphans for the next one:
        // look again soon (backing off to the interval) rather than a whole interval later.
        let regular = if orphans > 0 {
            let soon = Instant::now() + follow_up;
            follow_up = (follow_up * 2).min(cluster.timing.sweep);
            regular.min(soon)
        } else {
            follow_up = FIRST_FOLLOW_UP;
            regular
        };
        let wake = match next_lapse(&cluster).await {
            Ok(Some(lapse)) => regular.min(Instant::now() + lapse),
            Ok(None) => regular,
            Err(err) => {
                tracing::debug!(error = %err, "peers' lapse not read; sweeping on the interval");
                regular
            }
        };
        tokio::select! {
            _ = shutdown.cancelled() => break,
            _ = tokio::time::sleep_until(wake) => {}
        }
    }
}

/// When the announcement of a peer that missed a heartbeat runs out. Its leases lapse no later (a beat renews
/// them before announcing), so a sweep then takes its sessions over without waiting for the next interval:
/// the lapse is 10-15 s after a crash with the default timings, and the interval could add 5 s more.
async fn next_lapse(cluster: &Cluster) -> Result<Option<Duration>, RedisError> {
    let beat_ms = i64::try_from(cluster.timing.heartbeat.as_millis()).unwrap_or(i64::MAX);
    let now = crate::store::now_ms();
    let mut soonest: Option<Duration> = None;
    for node in cluster.registry.live_nodes().await? {
        let missed_a_beat = now - node.heartbeat_at > beat_ms + beat_ms / 2;
        // A worker node holds no lease, so its lapse orphans nothing.
        if node.node_id == cluster.node_id || !missed_a_beat || !node.hosts_sessions {
            continue;
        }
        if let Some(left) = cluster.registry.expires_in(&node.node_id).await? {
            soonest = Some(soonest.map_or(left, |s| s.min(left)));
        }
    }
    Ok(soonest.map(|left| left + LAPSE_MARGIN))
}

/// At boot: the sessions whose lease still names this node (a restart under the same `NODE_ID`, as a
/// StatefulSet pod gets) come back here at once, not after their lease lapses and a sweep deals them.
async fn reclaim_past_life(cluster: &Cluster, host: &dyn SessionHost) -> Result<(), SweepError> {
    let candidates = sessions::list_takeover_candidates(&cluster.db).await?;
    let mut own = cluster.leases.held_by_this_node(&candidates).await?;
    own.retain(|id| !host.loaded_ids().contains(id));
    if own.is_empty() {
        return Ok(());
    }
    tracing::info!(
        sessions = own.len(),
        "taking back the sessions this node held before it restarted"
    );
    let max = cluster.timing.max_takeovers.max(1);
    futures::stream::iter(own)
        .for_each_concurrent(max, |id| async move { host.take_over(&id).await })
        .await;
    if let Err(err) = cluster.announce(host.loaded_count()).await {
        tracing::warn!(error = %err, "node registry not refreshed after taking sessions back");
    }
    Ok(())
}

/// One sweep; returns how many orphans it found (dealt to this node or to others).
async fn sweep(cluster: &Cluster, host: &dyn SessionHost) -> Result<usize, SweepError> {
    if cluster.is_draining() {
        return Ok(0);
    }
    let candidates = sessions::list_takeover_candidates(&cluster.db).await?;
    let prefix = cluster.prefix.as_str();
    let mut orphans = cluster
        .leases
        .unheld(&candidates, |id| super::handover::mark_key(prefix, id))
        .await?;
    metrics::gauge!(wagate_workers::telemetry::metrics::SESSIONS_UNOWNED).set(orphans.len() as f64);
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
    let found = orphans.len();
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
    Ok(found)
}
