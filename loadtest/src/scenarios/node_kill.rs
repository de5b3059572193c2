//! `node-kill`: an inbound storm into a cluster this tool starts (PostgreSQL data DB and Redis leases on
//! loopback), with one node killed by SIGKILL part-way. Injections go round-robin to the live nodes (as a
//! load balancer would after the node's readiness fails), so sessions the dead node owned answer errors
//! until a survivor takes their lease over. Every accepted injection is one expected signed webhook; the
//! report says what was lost or duplicated across the kill.

use std::collections::HashMap;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use futures::{FutureExt, StreamExt};
use serde_json::json;
use wagate_loadtest::harness::Receiver;
use wagate_loadtest::harness::cluster::{ClusterOptions, TestCluster, Timings};
use wagate_loadtest::harness::sessions::create_linked;

use super::common::{
    Counters, Progress, Report, build_of, measure_rss, parse_env_pair, phone, run_tag,
    sibling_binary, tally,
};
use super::events::SECRET;

#[derive(clap::Args, Debug, Clone)]
pub struct NodeKillArgs {
    /// The `wagate` binary of the nodes [default: `wagate` beside this executable]
    #[arg(long, value_name = "PATH")]
    pub binary: Option<PathBuf>,
    /// Nodes in the cluster (one is killed)
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u64).range(2..=8))]
    pub nodes: u64,
    /// Run the nodes as ROLE=api with one `wagate-worker` delivering (default: every node ROLE=all)
    #[arg(long)]
    pub with_worker: bool,
    /// The `wagate-worker` binary for --with-worker [default: `wagate-worker` beside this executable]
    #[arg(long, value_name = "PATH")]
    pub worker_binary: Option<PathBuf>,
    /// Sim sessions, created round-robin through the nodes, each with one signed webhook
    #[arg(long, default_value_t = 6, value_parser = clap::value_parser!(u64).range(1..=1000))]
    pub sessions: u64,
    /// Inbound messages injected per second (open loop)
    #[arg(long, default_value_t = 200, value_parser = clap::value_parser!(u64).range(1..=100_000))]
    pub rate: u64,
    /// Length of the injection, in seconds
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u64).range(2..))]
    pub seconds: u64,
    /// Seconds into the injection at which the last node gets SIGKILL [default: half of --seconds]
    #[arg(long, value_name = "SECONDS")]
    pub kill_at: Option<u64>,
    /// SESSION_LEASE_TTL_MS of the nodes, in milliseconds
    #[arg(long, default_value_t = 3000)]
    pub ttl_ms: u64,
    /// SESSION_LEASE_HEARTBEAT_MS of the nodes, in milliseconds (less than half the TTL)
    #[arg(long, default_value_t = 1000)]
    pub heartbeat_ms: u64,
    /// SESSION_TAKEOVER_SWEEP_MS of the nodes, in milliseconds
    #[arg(long, default_value_t = 500)]
    pub sweep_ms: u64,
    /// How long to wait for the webhook deliveries after the last injection, in seconds
    #[arg(long, default_value_t = 90)]
    pub drain_seconds: u64,
    /// Extra environment for the nodes and the worker; repeatable, e.g. --node-env OUTBOX_STALE_MS=5000
    #[arg(long = "node-env", value_name = "KEY=VALUE", value_parser = parse_env_pair)]
    pub node_env: Vec<(String, String)>,
}

pub async fn run(args: NodeKillArgs) -> anyhow::Result<Report> {
    let binary = args
        .binary
        .clone()
        .unwrap_or_else(|| sibling_binary("wagate"));
    anyhow::ensure!(
        binary.is_file(),
        "no wagate binary at {} (build it with `cargo build -p wagate-node` or pass --binary PATH)",
        binary.display()
    );
    let worker_binary = args.with_worker.then(|| {
        args.worker_binary
            .clone()
            .unwrap_or_else(|| sibling_binary("wagate-worker"))
    });
    let size = args.nodes as usize;
    let kill_at = Duration::from_secs(args.kill_at.unwrap_or(args.seconds / 2));
    anyhow::ensure!(
        kill_at < Duration::from_secs(args.seconds),
        "--kill-at {} must be less than --seconds {}",
        kill_at.as_secs(),
        args.seconds
    );
    // The outbox sweep is what re-enqueues events a killed node persisted but never queued; the cluster
    // secret lets the nodes trust each other's forwarded requests.
    let mut env: Vec<(String, String)> = [
        ("LOG_LEVEL", "warn"),
        ("CLUSTER_SECRET", "loadtest-cluster-secret-0123456789abcdef"),
        ("WEBHOOK_RETRY_DELAY", "200"),
        ("OUTBOX_RECONCILE_MS", "1000"),
        ("OUTBOX_STALE_MS", "3000"),
    ]
    .iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    env.extend(args.node_env.iter().cloned());
    let options = ClusterOptions {
        size,
        timings: Timings {
            ttl_ms: args.ttl_ms,
            heartbeat_ms: args.heartbeat_ms,
            sweep_ms: args.sweep_ms,
        },
        worker_binary,
        env,
    };
    let mut cluster = TestCluster::start_with(&binary.display().to_string(), options).await?;
    let receiver = Receiver::start().await?;
    let tag = run_tag();
    let mut ids = Vec::new();
    for n in 0..args.sessions as usize {
        let client = cluster.client(n % size);
        let id = create_linked(&client, &format!("lt-{tag}-k{n}"), &phone(&tag, n)).await?;
        let hook =
            json!({ "url": receiver.url(), "events": ["message.received"], "secret": SECRET });
        let reply = client
            .post(&format!("/api/sessions/{id}/webhooks"), hook)
            .await?;
        anyhow::ensure!(reply.status == 201, "webhook: {}", reply.text);
        ids.push(id);
    }
    let victim = size - 1;
    let clients: Vec<_> = (0..size).map(|i| cluster.client(i)).collect();
    let counters = Counters::new();
    let progress = Progress::start("node-kill", counters.clone());
    let total = args.rate * args.seconds;
    let mut tick = tokio::time::interval(Duration::from_micros(1_000_000 / args.rate));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Burst);
    let begun = Instant::now();
    let mut killed_at = None;
    let mut expected = HashMap::with_capacity(total as usize);
    let mut inflight = futures::stream::FuturesUnordered::new();
    let mut after_kill = (0u64, 0u64);
    for i in 0..total as usize {
        tick.tick().await;
        if killed_at.is_none() && begun.elapsed() >= kill_at {
            cluster.nodes[victim].kill9();
            killed_at = Some(Instant::now());
        }
        let live = if killed_at.is_some() { size - 1 } else { size };
        let client = clients[i % live].clone();
        let (id, counters) = (ids[i % ids.len()].clone(), counters.clone());
        let body = json!({ "from": format!("{}@c.us", phone(&tag, 20_000 + i % 997)), "type": "text", "body": format!("kill-{tag}-{i}") });
        let is_after_kill = killed_at.is_some();
        inflight.push(async move {
            let t0 = Instant::now();
            let tag = body["body"].as_str().unwrap_or_default().to_string();
            let reply = client
                .post(&format!("/api/sim/sessions/{id}/inbound"), body)
                .await
                .map(|r| r.status);
            counters.record(&reply, &[200], t0.elapsed());
            (tag, t0, matches!(reply, Ok(200)), is_after_kill)
        });
        while let Some(Some(r)) = inflight.next().now_or_never() {
            settle(r, &mut expected, &mut after_kill);
        }
        while inflight.len() > 256 {
            if let Some(r) = inflight.next().await {
                settle(r, &mut expected, &mut after_kill);
            }
        }
    }
    while let Some(r) = inflight.next().await {
        settle(r, &mut expected, &mut after_kill);
    }
    let elapsed = begun.elapsed();
    drop(progress);
    let mut started: Vec<(String, u32)> = cluster
        .nodes
        .iter()
        .enumerate()
        .filter_map(|(i, n)| {
            n.pid()
                .map(|pid| (format!("wagate {}", cluster.ids[i]), pid))
        })
        .collect();
    if let Some(pid) = cluster.worker.as_ref().and_then(|w| w.pid()) {
        started.push(("wagate-worker".to_string(), pid));
    }
    let mut report = Report::new(
        "node-kill",
        &format!(
            "{size} nodes started here ({} build{}), node {} killed",
            build_of(&binary),
            if args.with_worker {
                ", ROLE=api + 1 wagate-worker"
            } else {
                ", ROLE=all"
            },
            cluster.ids[victim]
        ),
    )
    .with_counters(&counters, elapsed);
    report.processes = measure_rss(&started);
    let deliveries = receiver
        .wait_count(expected.len(), Duration::from_secs(args.drain_seconds))
        .await;
    let (events, latencies) = tally(&expected, &deliveries, SECRET);
    report = report.with_events(events, latencies);
    report.note(format!(
        "{} sessions, {}/s for {} s; SIGKILL at {:.1} s; after the kill {} injections accepted, {} refused (sessions of the dead node until their takeover)",
        args.sessions,
        args.rate,
        args.seconds,
        killed_at.map_or(0.0, |k| k.duration_since(begun).as_secs_f64()),
        after_kill.0,
        after_kill.1
    ));
    report.note(format!(
        "lease TTL {} ms, heartbeat {} ms, sweep {} ms; throughput and latency are of the accepted injections",
        args.ttl_ms, args.heartbeat_ms, args.sweep_ms
    ));
    receiver.stop();
    Ok(report)
}

/// Books one finished injection: accepted ones are expected deliveries; those after the kill are counted.
fn settle(
    (tag, t0, accepted, is_after_kill): (String, Instant, bool, bool),
    expected: &mut HashMap<String, Instant>,
    after_kill: &mut (u64, u64),
) {
    if accepted {
        expected.insert(tag, t0);
    }
    if is_after_kill {
        if accepted {
            after_kill.0 += 1;
        } else {
            after_kill.1 += 1;
        }
    }
}
