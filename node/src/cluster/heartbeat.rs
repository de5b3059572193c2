//! The node's heartbeat: every `SESSION_LEASE_HEARTBEAT_MS` it renews each held lease and refreshes the
//! registry entry. A lease whose renewal is refused, or whose monotonic deadline (the last successful
//! renewal plus the TTL) has passed, is given up at once: the session is unloaded and its engine killed, because WhatsApp
//! cannot check our fence and a peer may already run it.

use std::sync::Arc;
use std::time::Instant;

use futures::StreamExt;
use tokio::time::MissedTickBehavior;
use tokio_util::sync::CancellationToken;

use super::lease_redis::Held;
use super::{Cluster, SessionHost};

/// How many renewals run at once.
const RENEW_CONCURRENCY: usize = 16;

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
    futures::stream::iter(cluster.leases.held())
        .for_each_concurrent(RENEW_CONCURRENCY, |(id, held)| async move {
            if !renew(cluster, &id, held).await {
                tracing::warn!(session_id = %id, generation = held.generation,
                    "session lease lost; unloading the session");
                cluster.leases.forget(&id, held.generation);
                host.lease_lost(&id, held.generation).await;
            }
        })
        .await;
    if let Err(err) = cluster.announce(host.loaded_count()).await {
        tracing::warn!(error = %err, "node registry not refreshed");
    }
}

/// Renews one lease within what is left of its deadline; false when it is lost.
async fn renew(cluster: &Cluster, id: &str, held: Held) -> bool {
    let Some(left) = held.deadline.checked_duration_since(Instant::now()) else {
        return false;
    };
    match tokio::time::timeout(left, cluster.leases.renew(id, held.generation)).await {
        Ok(Ok(renewed)) => renewed,
        Ok(Err(err)) => {
            // Redis did not answer: keep the lease until its deadline, which the next beat checks.
            tracing::warn!(session_id = id, error = %err, "lease renewal failed");
            Instant::now() < held.deadline
        }
        Err(_) => false,
    }
}
