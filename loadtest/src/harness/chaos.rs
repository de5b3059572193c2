//! Kill loops for the durability checks (node tests and the `chaos` scenario): a steady stream of inbound
//! sim messages across many sessions while owners are killed with SIGKILL, then a count of what the network
//! accepted (answered 200 with a message id) against what reached the webhook receiver and what
//! `GET .../messages` lists. Cluster: 3 `ROLE=api` nodes and a `wagate-worker` on PostgreSQL and Redis, an
//! owner killed at a random moment and restarted, repeated. Embedded: one node killed mid-stream and
//! restarted on the same data directory.

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use serde_json::json;

use super::cluster::{ClusterOptions, TestCluster, Timings};
use super::sessions::{create_linked, wait_status};
use super::{Client, Node, NodeOptions, Receiver};

/// How long everything accepted may take to reach the receiver once the stream stopped.
const SETTLE: Duration = Duration::from_secs(90);

/// Requests of the stream in flight at most.
pub const IN_FLIGHT: usize = 64;

/// The bound the duplicates are held to per kill: a delivering process has at most 4 x
/// `WEBHOOK_DISPATCH_CONCURRENCY` (64 by default) webhook attempts made and not yet recorded
/// (`UNRECORDED_PER_SLOT` in `queue-workers/src/webhook/retry.rs`), and only those are delivered again after
/// a kill -9.
pub const DUPLICATES_PER_KILL: usize = 4 * 64;

#[derive(Debug, Clone)]
pub struct ChaosOptions {
    pub binary: PathBuf,
    /// `wagate-worker` (cluster only).
    pub worker: Option<PathBuf>,
    pub sessions: usize,
    /// Inbound messages per second, over all sessions.
    pub rate: u32,
    /// Kills (cluster: one owner each time; embedded: the node).
    pub kills: usize,
}

/// What the network accepted and what came out of the gateway.
#[derive(Debug, Clone, Default)]
pub struct ChaosReport {
    /// Answered 200 with a message id.
    pub accepted: usize,
    /// Refused while a node was down or a session moved (not the network's: nothing to keep).
    pub refused: usize,
    /// Accepted messages that reached the webhook receiver (by message id, at least once).
    pub delivered: usize,
    /// Accepted messages that never reached it.
    pub lost: usize,
    /// Deliveries beyond the first of one message (another occurrence or a webhook retry).
    pub duplicated: usize,
    /// Accepted messages `GET /api/sessions/{id}/messages` does not list exactly once.
    pub listed_wrong: usize,
    pub kills: usize,
    /// Examples of lost message ids (at most 10), for the failure message.
    pub lost_examples: Vec<String>,
}

impl std::fmt::Display for ChaosReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "kills {}: accepted {}, delivered {}, lost {}, duplicated {}, listed wrong {}, refused {}",
            self.kills,
            self.accepted,
            self.delivered,
            self.lost,
            self.duplicated,
            self.listed_wrong,
            self.refused
        )
    }
}

/// A number in `0..span` (no need for a random crate: a v4 UUID is random).
fn random_below(span: u64) -> u64 {
    (uuid::Uuid::new_v4().as_u128() % u128::from(span.max(1))) as u64
}

/// The inbound stream: `rate`/s round-robin over sessions and clients, open loop, at most `IN_FLIGHT` at once.
struct Stream {
    accepted: Arc<Mutex<Vec<(String, String)>>>,
    refused: Arc<AtomicUsize>,
    stop: Arc<AtomicBool>,
    task: tokio::task::JoinHandle<()>,
}

impl Stream {
    fn start(clients: Arc<Mutex<Vec<Client>>>, sessions: Vec<String>, rate: u32) -> Stream {
        let accepted = Arc::new(Mutex::new(Vec::new()));
        let refused = Arc::new(AtomicUsize::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let (acc, refs, halt) = (accepted.clone(), refused.clone(), stop.clone());
        let task = tokio::spawn(async move {
            let slots = Arc::new(tokio::sync::Semaphore::new(IN_FLIGHT));
            let mut tick =
                tokio::time::interval(Duration::from_secs_f64(1.0 / f64::from(rate.max(1))));
            let mut n: usize = 0;
            let mut running = Vec::new();
            while !halt.load(Ordering::SeqCst) {
                tick.tick().await;
                let Ok(slot) = slots.clone().acquire_owned().await else {
                    break;
                };
                let session = sessions[n % sessions.len()].clone();
                let client = {
                    let clients = clients.lock();
                    clients[n % clients.len()].clone()
                };
                let (acc, refs) = (acc.clone(), refs.clone());
                let body = format!("chaos-{n}");
                running.push(tokio::spawn(async move {
                    let path = format!("/api/sim/sessions/{session}/inbound");
                    let sent = json!({ "from": "15559990000@c.us", "type": "text", "body": body });
                    match client.post(&path, sent).await {
                        Ok(r) if r.status == 200 => acc.lock().push((session, r.str("messageId"))),
                        _ => {
                            refs.fetch_add(1, Ordering::SeqCst);
                        }
                    }
                    drop(slot);
                }));
                running.retain(|t: &tokio::task::JoinHandle<()>| !t.is_finished());
                n += 1;
            }
            for t in running {
                let _ = t.await;
            }
        });
        Stream {
            accepted,
            refused,
            stop,
            task,
        }
    }

    async fn finish(self) -> (Vec<(String, String)>, usize) {
        self.stop.store(true, Ordering::SeqCst);
        let _ = self.task.await;
        let accepted = self.accepted.lock().clone();
        (accepted, self.refused.load(Ordering::SeqCst))
    }
}

async fn webhook(client: &Client, session: &str, rx: &Receiver) -> anyhow::Result<()> {
    let r = client
        .post(
            &format!("/api/sessions/{session}/webhooks"),
            json!({ "url": rx.url(), "events": ["message.received"] }),
        )
        .await?;
    anyhow::ensure!(r.status == 201, "webhook not created: {}", r.text);
    Ok(())
}

/// Waits until every accepted message reached the receiver (or `SETTLE` passed), then counts.
async fn count(
    accepted: &[(String, String)],
    refused: usize,
    rx: &Receiver,
    reader: &Client,
    kills: usize,
) -> anyhow::Result<ChaosReport> {
    let deadline = Instant::now() + SETTLE;
    let ids_seen = |rx: &Receiver| -> HashMap<String, usize> {
        let mut seen = HashMap::new();
        for d in rx.deliveries() {
            if let Some(id) = d.json()["data"]["id"].as_str() {
                *seen.entry(id.to_string()).or_insert(0) += 1;
            }
        }
        seen
    };
    let mut seen = ids_seen(rx);
    while Instant::now() < deadline && accepted.iter().any(|(_, id)| !seen.contains_key(id)) {
        tokio::time::sleep(Duration::from_millis(250)).await;
        seen = ids_seen(rx);
    }
    let mut report = ChaosReport {
        accepted: accepted.len(),
        refused,
        kills,
        ..ChaosReport::default()
    };
    for (_, id) in accepted {
        match seen.get(id) {
            Some(n) => {
                report.delivered += 1;
                report.duplicated += n - 1;
            }
            None => {
                report.lost += 1;
                if report.lost_examples.len() < 10 {
                    report.lost_examples.push(id.clone());
                }
            }
        }
    }
    let mut by_session: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for (session, id) in accepted {
        by_session.entry(session).or_default().push(id);
    }
    for (session, ids) in by_session {
        let listed = listed(reader, session).await?;
        report.listed_wrong += ids
            .iter()
            .filter(|id| listed.get(**id).copied() != Some(1))
            .count();
    }
    Ok(report)
}

/// How often each message id appears in the session's message list (every page).
async fn listed(client: &Client, session: &str) -> anyhow::Result<HashMap<String, usize>> {
    let mut counts = HashMap::new();
    let mut offset = 0;
    loop {
        let r = client
            .get(&format!(
                "/api/sessions/{session}/messages?limit=1000&offset={offset}&direction=incoming"
            ))
            .await?;
        anyhow::ensure!(r.status == 200, "message list: {} {}", r.status, r.text);
        let page = r.body.as_array().cloned().unwrap_or_default();
        for m in &page {
            if let Some(id) = m["waMessageId"].as_str() {
                *counts.entry(id.to_string()).or_insert(0) += 1;
            }
        }
        if page.len() < 1000 {
            return Ok(counts);
        }
        offset += page.len();
    }
}

/// Cluster: owners killed at random moments under the stream, each restarted once its sessions run elsewhere.
pub async fn cluster_kill_loop(options: &ChaosOptions) -> anyhow::Result<ChaosReport> {
    let worker = options
        .worker
        .clone()
        .ok_or_else(|| anyhow::anyhow!("the cluster loop needs a wagate-worker binary"))?;
    let cluster_options = ClusterOptions {
        size: 3,
        timings: Timings::default(),
        worker_binary: Some(worker),
        env: vec![
            ("OUTBOX_RECONCILE_MS".into(), "500".into()),
            ("OUTBOX_STALE_MS".into(), "3000".into()),
        ],
    };
    let binary = options.binary.display().to_string();
    let mut c = TestCluster::start_with(&binary, cluster_options).await?;
    let rx = Receiver::start().await?;
    let mut sessions = Vec::new();
    for i in 0..options.sessions {
        let client = c.client(i % 3);
        let id = create_linked(&client, &format!("chaos-{i}"), &format!("1555800{i:04}")).await?;
        webhook(&client, &id, &rx).await?;
        sessions.push(id);
    }
    let clients = Arc::new(Mutex::new((0..3).map(|i| c.client(i)).collect::<Vec<_>>()));
    let stream = Stream::start(clients, sessions.clone(), options.rate);
    for _ in 0..options.kills {
        tokio::time::sleep(Duration::from_millis(1000 + random_below(2000))).await;
        let victim = random_below(3) as usize;
        c.nodes[victim].kill9();
        let dead = c.ids[victim].clone();
        let survivor = (victim + 1) % 3;
        for id in &sessions {
            c.wait_served_ready(survivor, id, &[dead.as_str(), ""], SETTLE)
                .await?;
        }
        c.nodes[victim].restart().await?;
    }
    tokio::time::sleep(Duration::from_millis(1000)).await;
    let (accepted, refused) = stream.finish().await;
    count(&accepted, refused, &rx, &c.client(0), options.kills).await
}

/// Embedded: the node killed mid-stream (`kills` times), restarted on the same data directory each time.
pub async fn embedded_kill_restart(options: &ChaosOptions) -> anyhow::Result<ChaosReport> {
    let node_options = NodeOptions::new(&options.binary)
        .env("AUTO_START_SESSIONS", "true")
        .env("OUTBOX_RECONCILE_MS", "500");
    let mut node = Node::start(node_options).await?;
    let rx = Receiver::start().await?;
    let client = node.client();
    let mut sessions = Vec::new();
    for i in 0..options.sessions {
        let id = create_linked(&client, &format!("chaos-{i}"), &format!("1555900{i:04}")).await?;
        webhook(&client, &id, &rx).await?;
        sessions.push(id);
    }
    let clients = Arc::new(Mutex::new(vec![client.clone()]));
    let stream = Stream::start(clients, sessions.clone(), options.rate);
    for _ in 0..options.kills {
        tokio::time::sleep(Duration::from_millis(1000 + random_below(2000))).await;
        node.kill9();
        node.restart().await?;
        for id in &sessions {
            wait_status(&client, id, "ready", SETTLE).await?;
        }
    }
    tokio::time::sleep(Duration::from_millis(1000)).await;
    let (accepted, refused) = stream.finish().await;
    count(&accepted, refused, &rx, &client, options.kills).await
}
