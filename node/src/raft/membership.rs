//! Who is in the raft group: the voters of `RAFT_VOTERS` always; every other live node of the registry as a
//! learner, added by the leader when it appears and removed when its registry entry expired. The same loop
//! keeps the transport's URL book in step with the registry.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;
use std::time::Duration;

use openraft::ChangeMembers;
use tokio_util::sync::CancellationToken;

use super::network::HttpTransport;
use super::{MainRaft, Member, NodeId, node_id_of};
use crate::cluster::registry::Registry;

const PERIOD: Duration = Duration::from_secs(1);

pub(crate) async fn run(
    raft: Arc<MainRaft>,
    registry: Registry,
    http: Arc<HttpTransport>,
    shutdown: CancellationToken,
) {
    let mut tick = tokio::time::interval(PERIOD);
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = tick.tick() => {}
        }
        let live = match registry.live_nodes().await {
            Ok(live) => live,
            Err(err) => {
                tracing::debug!(error = %err, "registry unreadable; raft membership unchanged");
                continue;
            }
        };
        let urls: HashMap<String, String> = live
            .iter()
            .map(|n| (n.node_id.clone(), n.url.clone()))
            .collect();
        http.set_urls(urls.clone());
        if raft.is_leader() {
            reconcile(&raft, &urls).await;
        }
    }
}

/// Adds live non-voters as learners and removes learners that left the registry.
pub(crate) async fn reconcile(raft: &MainRaft, live: &HashMap<String, String>) {
    let members: Vec<(NodeId, Member)> = {
        let m = raft.raft.metrics();
        let m = m.borrow();
        m.membership_config
            .nodes()
            .map(|(id, n)| (*id, n.clone()))
            .collect()
    };
    for (name, url) in live {
        let id = node_id_of(name);
        if members.iter().any(|(m, _)| *m == id) {
            continue;
        }
        let member = Member {
            name: name.clone(),
            url: url.clone(),
        };
        match raft.raft.add_learner(id, member, false).await {
            Ok(_) => tracing::info!(node = %name, "raft learner added"),
            Err(err) => tracing::debug!(node = %name, error = %err, "raft learner not added"),
        }
    }
    let gone: BTreeSet<NodeId> = members
        .iter()
        .filter(|(id, m)| !raft.voters.contains_key(id) && !live.contains_key(&m.name))
        .map(|(id, _)| *id)
        .collect();
    if !gone.is_empty() {
        match raft
            .raft
            .change_membership(ChangeMembers::RemoveNodes(gone.clone()), false)
            .await
        {
            Ok(_) => tracing::info!(count = gone.len(), "raft learners removed"),
            Err(err) => tracing::debug!(error = %err, "raft learners not removed"),
        }
    }
}
