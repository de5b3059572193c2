//! Planned handover: a node that stops (SIGTERM) or drains gives each of its sessions to a live peer instead
//! of letting the lease lapse into the takeover sweep. Per session, the old owner marks it in transit
//! (`{prefix}handover:{sessionId}` = the peer, and locally), waits for the requests it is serving on the
//! session to finish, stops its engine without another write and releases the lease, then puts the id in
//! the peer's inbox (`{prefix}handover-inbox:{nodeId}`). The peer claims the lease, brings the session up
//! from the stored credentials and clears the mark. Requests for a marked session, on any node, wait for
//! the mark to go (at most `SESSION_HANDOVER_WAIT_MS`) and are then routed to the new owner; the takeover
//! sweep leaves marked sessions alone. A mark outlives neither its wait nor a crash of either node: it
//! expires, and the sweep takes over whatever was not brought up.
//!
//! The two engines never overlap: the network keeps one connection per linked device, and the fence lets
//! only the newest lease write. Traffic the old engine had not acknowledged is redelivered to the new one.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use deadpool_redis::redis;
use futures::StreamExt;
use parking_lot::Mutex;
use tokio::sync::Notify;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::lease_redis::RedisError;
use super::registry::NodeInfo;
use super::{Cluster, SessionHost, placement};

/// How often a request waiting on another node's mark, or an old owner waiting for the new one, looks again.
const POLL: Duration = Duration::from_millis(20);

/// How often a node looks into its handover inbox.
const INBOX_POLL: Duration = Duration::from_millis(50);

/// What this node knows about its own sessions in transit, and the requests it serves on each.
#[derive(Default)]
pub(crate) struct Transit {
    slots: Mutex<HashMap<String, Slot>>,
    changed: Notify,
}

#[derive(Default)]
struct Slot {
    /// Requests routed here for the session and not answered yet.
    serving: usize,
    /// The session is leaving this node or arriving on it.
    moving: bool,
}

impl Transit {
    /// Counts a request served here on `session_id`; `None` while the session is moving.
    pub(crate) fn serve(self: &Arc<Self>, session_id: &str) -> Option<Serving> {
        let mut slots = self.slots.lock();
        let slot = slots.entry(session_id.to_string()).or_default();
        if slot.moving {
            return None;
        }
        slot.serving += 1;
        Some(Serving {
            transit: self.clone(),
            session_id: session_id.to_string(),
        })
    }

    pub(crate) fn is_moving(&self, session_id: &str) -> bool {
        self.slots.lock().get(session_id).is_some_and(|s| s.moving)
    }

    fn begin(&self, session_id: &str) {
        self.slots
            .lock()
            .entry(session_id.to_string())
            .or_default()
            .moving = true;
    }

    fn end(&self, session_id: &str) {
        let mut slots = self.slots.lock();
        if let Some(slot) = slots.get_mut(session_id) {
            slot.moving = false;
            if slot.serving == 0 {
                slots.remove(session_id);
            }
        }
        drop(slots);
        self.changed.notify_waiters();
    }

    /// Waits until `done` holds or `deadline` passes; answers whether it holds.
    async fn wait_until(&self, deadline: Instant, done: impl Fn(&Transit) -> bool) -> bool {
        loop {
            let changed = self.changed.notified();
            tokio::pin!(changed);
            changed.as_mut().enable();
            if done(self) {
                return true;
            }
            if tokio::time::timeout_at(deadline, changed).await.is_err() {
                return done(self);
            }
        }
    }

    /// Waits (until `deadline`) for the session to stop moving.
    pub(crate) async fn settled(&self, session_id: &str, deadline: Instant) -> bool {
        self.wait_until(deadline, |t| !t.is_moving(session_id))
            .await
    }

    /// Waits (until `deadline`) for the requests served here on the session to be answered.
    async fn idle(&self, session_id: &str, deadline: Instant) -> bool {
        self.wait_until(deadline, |t| {
            t.slots
                .lock()
                .get(session_id)
                .is_none_or(|s| s.serving == 0)
        })
        .await
    }
}

/// A request being served here on a session; a handover of that session waits for it to drop.
pub(crate) struct Serving {
    transit: Arc<Transit>,
    session_id: String,
}

impl Drop for Serving {
    fn drop(&mut self) {
        let mut slots = self.transit.slots.lock();
        if let Some(slot) = slots.get_mut(&self.session_id) {
            slot.serving = slot.serving.saturating_sub(1);
            if slot.serving == 0 && !slot.moving {
                slots.remove(&self.session_id);
            }
        }
        drop(slots);
        self.transit.changed.notify_waiters();
    }
}

pub(crate) fn mark_key(prefix: &str, session_id: &str) -> String {
    format!("{prefix}handover:{session_id}")
}

fn inbox_key(prefix: &str, node_id: &str) -> String {
    format!("{prefix}handover-inbox:{node_id}")
}

/// The peers a leaving node may hand sessions to: live, hosting sessions (not `ROLE=worker`), not draining,
/// and beating.
async fn peers(cluster: &Cluster) -> Result<Vec<NodeInfo>, RedisError> {
    let beat_ms = i64::try_from(cluster.timing.heartbeat.as_millis()).unwrap_or(i64::MAX);
    let now = crate::store::now_ms();
    let mut nodes = cluster.registry.live_nodes().await?;
    nodes.retain(|n| {
        n.node_id != cluster.node_id && n.takes_sessions() && now - n.heartbeat_at <= 2 * beat_ms
    });
    Ok(nodes)
}

/// Deals `ids` (sorted) to `peers` the way the takeover sweep deals orphans: least loaded first.
fn deal(ids: &[String], peers: &[NodeInfo]) -> Vec<(String, String)> {
    let mut plan = Vec::with_capacity(ids.len());
    for peer in peers {
        let slice = placement::share(&peer.node_id, peer.sessions, peers, ids.len(), usize::MAX);
        for id in ids.get(slice).unwrap_or_default() {
            plan.push((id.clone(), peer.node_id.clone()));
        }
    }
    plan
}

/// Hands every session loaded here to a peer, `max_takeovers` at a time; answers how many the peers
/// confirmed. Sessions with no peer to go to (or whose handover failed) stay loaded for the caller.
pub(crate) async fn hand_over_all(cluster: &Cluster, host: &dyn SessionHost) -> usize {
    let mut ids = host.loaded_ids();
    if ids.is_empty() {
        return 0;
    }
    ids.sort();
    let peers = match peers(cluster).await {
        Ok(peers) if !peers.is_empty() => peers,
        Ok(_) => {
            tracing::info!(
                sessions = ids.len(),
                "no live peer to hand sessions to; releasing them"
            );
            return 0;
        }
        Err(err) => {
            tracing::warn!(error = %err, "peers not read; releasing sessions without a handover");
            return 0;
        }
    };
    let plan = deal(&ids, &peers);
    tracing::info!(sessions = plan.len(), "handing sessions over to peers");
    let max = cluster.timing.max_takeovers.max(1);
    futures::stream::iter(plan)
        .map(|(id, peer)| async move { hand_over(cluster, host, &id, &peer).await })
        .buffer_unordered(max)
        .filter(|confirmed| std::future::ready(*confirmed))
        .count()
        .await
}

/// One session to `peer`; true once the peer confirmed it runs the session.
async fn hand_over(cluster: &Cluster, host: &dyn SessionHost, id: &str, peer: &str) -> bool {
    let wait = cluster.timing.handover_wait;
    cluster.transit.begin(id);
    let outcome = async {
        // The mark outlives both waits below, and no more: a crash of either node leaves it to expire.
        let ttl_ms =
            u64::try_from((2 * wait + Duration::from_secs(1)).as_millis()).unwrap_or(u64::MAX);
        let mark = redis::cmd("SET")
            .arg(mark_key(&cluster.prefix, id))
            .arg(peer)
            .arg("PX")
            .arg(ttl_ms)
            .to_owned();
        run(cluster, &mark).await?;
        if !cluster.transit.idle(id, Instant::now() + wait).await {
            tracing::warn!(
                session_id = id,
                "requests still in flight at the handover; they may fail"
            );
        }
        host.hand_out(id).await;
        let push = redis::cmd("RPUSH")
            .arg(inbox_key(&cluster.prefix, peer))
            .arg(id)
            .to_owned();
        run(cluster, &push).await?;
        Ok::<bool, RedisError>(mark_cleared(cluster, id, Instant::now() + wait).await)
    }
    .await;
    cluster.transit.end(id);
    match outcome {
        Ok(true) => {
            tracing::info!(session_id = id, peer, "session handed over");
            true
        }
        Ok(false) => {
            tracing::warn!(
                session_id = id,
                peer,
                "the peer did not confirm the handover in time; the takeover sweep finishes it"
            );
            false
        }
        Err(err) => {
            tracing::warn!(session_id = id, peer, error = %err, "handover failed; the takeover sweep finishes it");
            false
        }
    }
}

/// One command on a pooled connection, given back at once (a handover waits seconds in between).
async fn run(cluster: &Cluster, cmd: &redis::Cmd) -> Result<(), RedisError> {
    let mut conn = cluster.pool.get().await?;
    let () = cmd.query_async(&mut *conn).await?;
    Ok(())
}

/// Polls until the session's mark is gone (the new owner runs it) or `deadline`.
async fn mark_cleared(cluster: &Cluster, id: &str, deadline: Instant) -> bool {
    loop {
        match cluster.is_marked(id).await {
            Ok(false) => return true,
            Ok(true) => {}
            Err(err) => tracing::debug!(session_id = id, error = %err, "handover mark not read"),
        }
        if Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(POLL).await;
    }
}

/// This node's side of handovers: takes the sessions peers put in its inbox, brings each up and clears its
/// mark. Runs until shutdown; a draining node takes none (its sessions are leaving too).
pub(crate) async fn receive(
    cluster: Arc<Cluster>,
    host: Arc<dyn SessionHost>,
    shutdown: CancellationToken,
) {
    let key = inbox_key(&cluster.prefix, &cluster.node_id);
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => break,
            _ = tokio::time::sleep(INBOX_POLL) => {}
        }
        let popped: Result<Option<String>, RedisError> = async {
            let mut conn = cluster.pool.get().await?;
            Ok(redis::cmd("LPOP").arg(&key).query_async(&mut *conn).await?)
        }
        .await;
        let id = match popped {
            Ok(Some(id)) => id,
            Ok(None) => continue,
            Err(err) => {
                tracing::debug!(error = %err, "handover inbox not read");
                continue;
            }
        };
        let (cluster, host) = (cluster.clone(), host.clone());
        tokio::spawn(async move { take(&cluster, host.as_ref(), &id).await });
    }
}

/// Brings a handed-over session up here, then clears its mark so waiting requests come to this node.
async fn take(cluster: &Cluster, host: &dyn SessionHost, id: &str) {
    if cluster.is_draining() {
        // Leaving too: the mark is cleared and the takeover sweep of a node that stays finds the session.
        clear_mark(cluster, id).await;
        return;
    }
    cluster.transit.begin(id);
    let budget = Instant::now() + cluster.timing.handover_wait;
    let is_up = host.take_handover(id, budget).await;
    clear_mark(cluster, id).await;
    cluster.transit.end(id);
    if is_up {
        metrics::counter!(wagate_workers::telemetry::metrics::TAKEOVERS).increment(1);
        tracing::info!(session_id = id, "session received in a handover");
    }
}

async fn clear_mark(cluster: &Cluster, id: &str) {
    let cleared: Result<(), RedisError> = async {
        let mut conn = cluster.pool.get().await?;
        let _: i64 = redis::cmd("DEL")
            .arg(mark_key(&cluster.prefix, id))
            .query_async(&mut *conn)
            .await?;
        Ok(())
    }
    .await;
    if let Err(err) = cleared {
        tracing::warn!(session_id = id, error = %err, "handover mark not cleared; it expires");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(id: &str, sessions: usize) -> NodeInfo {
        NodeInfo {
            node_id: id.into(),
            url: String::new(),
            sessions,
            is_draining: false,
            hosts_sessions: true,
            heartbeat_at: 0,
        }
    }

    #[test]
    fn sessions_are_dealt_to_the_least_loaded_peers_once_each() {
        let ids: Vec<String> = ["s1", "s2", "s3", "s4"].map(String::from).to_vec();
        let plan = deal(&ids, &[node("b", 3), node("c", 1)]);
        let mut dealt: Vec<&str> = plan.iter().map(|(id, _)| id.as_str()).collect();
        dealt.sort();
        assert_eq!(dealt, ["s1", "s2", "s3", "s4"]);
        let to_c = plan.iter().filter(|(_, p)| p == "c").count();
        assert_eq!(to_c, 3, "c (1 session) fills up to b's 3 first: {plan:?}");
    }

    #[tokio::test]
    async fn a_moving_session_serves_no_new_request_and_waits_for_those_in_flight() {
        let transit = Arc::new(Transit::default());
        let serving = transit.serve("s").expect("not moving");
        transit.begin("s");
        assert!(transit.serve("s").is_none());
        let soon = Instant::now() + Duration::from_millis(20);
        assert!(!transit.idle("s", soon).await, "one request in flight");
        drop(serving);
        assert!(transit.idle("s", Instant::now()).await);
        transit.end("s");
        assert!(transit.settled("s", Instant::now()).await);
        assert!(transit.serve("s").is_some());
    }
}
