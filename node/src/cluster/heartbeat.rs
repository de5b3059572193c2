//! The node's heartbeat: every `SESSION_LEASE_HEARTBEAT_MS` it renews each held lease and refreshes the
//! registry entry. A lease whose renewal is refused, or whose monotonic deadline (the last successful
//! renewal plus the TTL) has passed, is given up at once: the session is unloaded and its engine killed, because WhatsApp
//! cannot check our fence and a peer may already run it. A `ROLE=worker` node beats too, with no lease to
//! renew, so the registry lists it (as no session host).

use std::sync::Arc;
use std::time::Instant;

use tokio::time::MissedTickBehavior;
use tokio_util::sync::CancellationToken;

use super::lease_redis::Held;
use super::{Cluster, SessionHost};

/// Leases renewed per round trip.
const RENEW_BATCH: usize = 512;

pub(crate) async fn run(
    cluster: Arc<Cluster>,
    host: Arc<dyn SessionHost>,
    shutdown: CancellationToken,
) {
    let mut tick = tokio::time::interval(cluster.timing.heartbeat);
    // After a stall (SIGSTOP, an overloaded host) beat once at once, not a burst of catch-up beats.
    tick.set_missed_tick_behavior(MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => break,
            _ = tick.tick() => beat(&cluster, host.as_ref()).await,
        }
    }
}

async fn beat(cluster: &Cluster, host: &dyn SessionHost) {
    let held = cluster.leases.held();
    for batch in held.chunks(RENEW_BATCH) {
        for (id, generation) in renew_batch(cluster, batch).await {
            tracing::warn!(session_id = %id, generation, "session lease lost; unloading the session");
            cluster.leases.forget(&id, generation);
            host.lease_lost(&id, generation).await;
        }
    }
    if let Err(err) = cluster.announce(host.loaded_count()).await {
        tracing::warn!(error = %err, "node registry not refreshed");
    }
}

/// Renews one batch within what is left of its earliest deadline; answers the leases that are lost. A lease
/// whose deadline has passed is lost without asking: a peer may hold it already.
async fn renew_batch(cluster: &Cluster, batch: &[(String, Held)]) -> Vec<(String, i64)> {
    let now = Instant::now();
    let (live, mut lost): (Vec<_>, Vec<_>) = batch
        .iter()
        .map(|(id, h)| ((id.clone(), h.generation), h.deadline))
        .partition(|(_, deadline)| *deadline > now);
    let Some(left) = live.iter().map(|(_, deadline)| *deadline - now).min() else {
        return lost.into_iter().map(|(lease, _)| lease).collect();
    };
    let asked: Vec<(String, i64)> = live.iter().map(|(lease, _)| lease.clone()).collect();
    match tokio::time::timeout(left, cluster.leases.renew_many(&asked)).await {
        Ok(Ok(renewed)) => lost.extend(
            live.into_iter()
                .zip(renewed)
                .filter(|(_, ok)| !ok)
                .map(|(l, _)| l),
        ),
        Ok(Err(err)) => {
            // Redis did not answer: keep each lease until its deadline, which the next beat checks.
            tracing::warn!(error = %err, "lease renewal failed");
            let now = Instant::now();
            lost.extend(live.into_iter().filter(|(_, deadline)| *deadline <= now));
        }
        Err(_) => {
            let now = Instant::now();
            lost.extend(live.into_iter().filter(|(_, deadline)| *deadline <= now));
        }
    }
    lost.into_iter().map(|(lease, _)| lease).collect()
}
