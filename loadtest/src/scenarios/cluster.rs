//! `cluster`: three `wagate` nodes (`ROLE=api`) and one `wagate-worker` on a throwaway PostgreSQL database
//! and Redis (own key prefix), N sim sessions started round-robin through the nodes, then a request mix sent
//! to random nodes for random sessions (so about two thirds are forwarded). Prints requests/s, p50/p99,
//! the forwarding overhead (p50 of forwarded minus local session reads), sessions per node (max/min), and
//! the takeover after kill -9 of one node: time until every session it owned is `ready` elsewhere, and
//! the spread of its sessions over the survivors (the sweep's placement).

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::StreamExt;
use parking_lot::Mutex;
use serde_json::json;
use wagate_loadtest::harness::Client;
use wagate_loadtest::harness::cluster::{ClusterOptions, TestCluster, Timings};
use wagate_loadtest::harness::sessions::{create, link};

use super::arg;

const SERVED_BY: &str = "x-wagate-served-by";

/// What one request of the mix was, and how it went.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Read,
    Send,
    Chats,
}

struct Sample {
    kind: Kind,
    is_forwarded: bool,
    took: Duration,
    is_ok: bool,
    /// HTTP status, 0 for a transport error.
    status: u16,
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let index = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[index.min(sorted.len() - 1)]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// Sessions per node from the data DB (`owner_node` is written by every lease claim).
fn per_node(c: &TestCluster) -> anyhow::Result<Vec<(String, usize)>> {
    let out = c.pg.query(
        "SELECT owner_node, count(*) FROM sessions WHERE owner_node IS NOT NULL GROUP BY owner_node ORDER BY owner_node",
    )?;
    Ok(out
        .lines()
        .filter_map(|l| l.split_once('|'))
        .map(|(node, n)| (node.to_string(), n.trim().parse().unwrap_or(0)))
        .collect())
}

fn balance(counts: &[(String, usize)]) -> String {
    let max = counts.iter().map(|(_, n)| *n).max().unwrap_or(0);
    let min = counts.iter().map(|(_, n)| *n).min().unwrap_or(0);
    let ratio = if min == 0 {
        f64::INFINITY
    } else {
        max as f64 / min as f64
    };
    let list: Vec<String> = counts
        .iter()
        .map(|(node, n)| format!("{node}={n}"))
        .collect();
    format!("{} (max/min {ratio:.2})", list.join(" "))
}

async fn one_request(client: &Client, node_id: &str, kind: Kind, id: &str, to: &str) -> Sample {
    let started = Instant::now();
    let reply = match kind {
        Kind::Read => client.get(&format!("/api/sessions/{id}")).await,
        Kind::Chats => client.get(&format!("/api/sessions/{id}/chats")).await,
        Kind::Send => {
            client
                .post(
                    &format!("/api/sessions/{id}/messages/send-text"),
                    json!({ "chatId": to, "text": "bench" }),
                )
                .await
        }
    };
    let took = started.elapsed();
    match reply {
        Ok(r) => Sample {
            kind,
            is_forwarded: r.header(SERVED_BY).is_some_and(|by| by != node_id),
            took,
            is_ok: r.status < 300,
            status: r.status,
        },
        Err(_) => Sample {
            kind,
            is_forwarded: false,
            took,
            is_ok: false,
            status: 0,
        },
    }
}

/// Sends the mix for `seconds` with `concurrency` loops; a cheap xorshift picks node, session and kind.
async fn request_mix(
    c: &TestCluster,
    ids: &[String],
    phones: &[String],
    seconds: u64,
    concurrency: usize,
) -> (Vec<Sample>, Duration) {
    let samples = Arc::new(Mutex::new(Vec::new()));
    let clients: Vec<Client> = (0..c.nodes.len()).map(|i| c.client(i)).collect();
    let deadline = Instant::now() + Duration::from_secs(seconds);
    let started = Instant::now();
    let loops = (0..concurrency).map(|worker| {
        let (samples, clients) = (samples.clone(), clients.clone());
        let node_ids = c.ids.clone();
        async move {
            let mut seed = 0x9E37_79B9_7F4A_7C15_u64 ^ (worker as u64 + 1);
            let mut next = move || {
                seed ^= seed << 13;
                seed ^= seed >> 7;
                seed ^= seed << 17;
                seed
            };
            while Instant::now() < deadline {
                let node = (next() % clients.len() as u64) as usize;
                let session = (next() % ids.len() as u64) as usize;
                let peer = (next() % phones.len() as u64) as usize;
                let kind = match next() % 10 {
                    0..=4 => Kind::Read,
                    5..=7 => Kind::Send,
                    _ => Kind::Chats,
                };
                let to = format!("{}@c.us", phones[peer]);
                let sample =
                    one_request(&clients[node], &node_ids[node], kind, &ids[session], &to).await;
                samples.lock().push(sample);
            }
        }
    });
    futures::future::join_all(loops).await;
    let elapsed = started.elapsed();
    let samples = std::mem::take(&mut *samples.lock());
    (samples, elapsed)
}

/// `status x count` of the failed samples.
fn failures(samples: &[Sample]) -> String {
    let mut by_status = std::collections::BTreeMap::new();
    for s in samples.iter().filter(|s| !s.is_ok) {
        *by_status.entry(s.status).or_insert(0usize) += 1;
    }
    let parts: Vec<String> = by_status
        .iter()
        .map(|(status, n)| format!("{status} x{n}"))
        .collect();
    format!("[{}]", parts.join(", "))
}

fn report_mix(samples: &[Sample], elapsed: Duration) {
    let failed = format!(
        "{} {}",
        samples.iter().filter(|s| !s.is_ok).count(),
        failures(samples)
    );
    let mut all: Vec<Duration> = samples.iter().map(|s| s.took).collect();
    all.sort();
    println!(
        "request mix (50% session read, 30% send-text to another sim session, 20% chat list; random node): \
         {} requests in {:.1} s = {:.0} req/s, p50 {:.2} ms, p99 {:.2} ms, {failed} failed",
        samples.len(),
        elapsed.as_secs_f64(),
        samples.len() as f64 / elapsed.as_secs_f64(),
        ms(percentile(&all, 0.5)),
        ms(percentile(&all, 0.99)),
    );
    let reads = |forwarded: bool| {
        let mut v: Vec<Duration> = samples
            .iter()
            .filter(|s| s.kind == Kind::Read && s.is_ok && s.is_forwarded == forwarded)
            .map(|s| s.took)
            .collect();
        v.sort();
        v
    };
    let (local, forwarded) = (reads(false), reads(true));
    let (p50_local, p50_fwd) = (percentile(&local, 0.5), percentile(&forwarded, 0.5));
    println!(
        "session reads under the mix: local p50 {:.2} ms (n={}), forwarded p50 {:.2} ms (n={}); forwarding adds {:.2} ms p50",
        ms(p50_local),
        local.len(),
        ms(p50_fwd),
        forwarded.len(),
        ms(p50_fwd) - ms(p50_local),
    );
}

/// Forwarding overhead without queueing: one request at a time, the same session read asked of its owner
/// and of the two other nodes, `rounds` times per session sample.
async fn quiet_reads(c: &TestCluster, ids: &[String], rounds: usize) -> anyhow::Result<()> {
    let clients: Vec<Client> = (0..c.nodes.len()).map(|i| c.client(i)).collect();
    let (mut local, mut forwarded, mut failed) = (Vec::new(), Vec::new(), Vec::new());
    for id in ids.iter().take(rounds) {
        for (node, client) in clients.iter().enumerate() {
            let sample = one_request(client, &c.ids[node], Kind::Read, id, "").await;
            if !sample.is_ok {
                failed.push(sample);
            } else if sample.is_forwarded {
                forwarded.push(sample.took);
            } else {
                local.push(sample.took);
            }
        }
    }
    local.sort();
    forwarded.sort();
    let (p50_local, p50_fwd) = (percentile(&local, 0.5), percentile(&forwarded, 0.5));
    println!(
        "quiet session reads (one at a time): local p50 {:.2} ms (n={}), forwarded p50 {:.2} ms (n={}); forwarding adds {:.2} ms p50; {} failed {}",
        ms(p50_local),
        local.len(),
        ms(p50_fwd),
        forwarded.len(),
        ms(p50_fwd) - ms(p50_local),
        failed.len(),
        failures(&failed),
    );
    Ok(())
}

/// Kills node a and waits until every session it owned is `ready` on a survivor; answers the time taken.
async fn takeover(c: &mut TestCluster, budget: Duration) -> anyhow::Result<Duration> {
    let owned: usize =
        c.pg.query("SELECT count(*) FROM sessions WHERE owner_node = 'node-a'")?
            .trim()
            .parse()?;
    c.nodes[0].kill9();
    let started = Instant::now();
    // When the first session left node a: the lease lapse plus the wait for a sweep, before any work.
    let mut first_moved: Option<Duration> = None;
    loop {
        let left: usize =
            c.pg.query(
                "SELECT count(*) FROM sessions WHERE owner_node = 'node-a' OR status <> 'ready'",
            )?
            .trim()
            .parse()?;
        if first_moved.is_none() {
            let on_a: usize =
                c.pg.query("SELECT count(*) FROM sessions WHERE owner_node = 'node-a'")?
                    .trim()
                    .parse()?;
            if on_a < owned {
                first_moved = Some(started.elapsed());
            }
        }
        if left == 0 {
            let took = started.elapsed();
            let first = first_moved.unwrap_or(took);
            println!(
                "takeover after kill -9 of node-a ({owned} sessions): all ready elsewhere after {:.2} s \
                 (first session claimed after {:.2} s: lease lapse + sweep; the takeovers took {:.2} s)",
                took.as_secs_f64(),
                first.as_secs_f64(),
                (took - first).as_secs_f64()
            );
            return Ok(took);
        }
        if started.elapsed() > budget {
            let states = c.pg.query(
                "SELECT owner_node, status, count(*) FROM sessions GROUP BY owner_node, status ORDER BY 1, 2",
            )?;
            for node in &c.nodes {
                let logs = node.logs();
                let warnings: Vec<&str> = logs.lines().filter(|l| l.contains("WARN")).collect();
                eprintln!(
                    "node on port {}: {} warnings, last:",
                    node.port,
                    warnings.len()
                );
                for line in warnings.iter().rev().take(8) {
                    eprintln!("  {line}");
                }
            }
            anyhow::bail!(
                "{left} sessions not taken over in {budget:?}; owner|status|count:\n{states}"
            );
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The profile the node binary was built with, from its path (figures differ by an order of magnitude).
fn build_of(binary: &str) -> &'static str {
    if binary.contains("/release/") {
        "release"
    } else if binary.contains("/debug/") {
        "debug"
    } else {
        "unknown"
    }
}

pub async fn run(args: &[String]) -> anyhow::Result<()> {
    let binary = arg(args, "--binary", "target/release/wagate");
    let default_worker = Path::new(&binary)
        .with_file_name("wagate-worker")
        .display()
        .to_string();
    let worker = arg(args, "--worker", &default_worker);
    let count: usize = arg(args, "--sessions", "1000").parse()?;
    let seconds: u64 = arg(args, "--seconds", "20").parse()?;
    let concurrency: usize = arg(args, "--concurrency", "16").parse()?;
    // `SESSION_RESTORE_CONCURRENCY` of the nodes (how many sessions a sweep takes over at once); empty
    // leaves the node default.
    let restore_concurrency = arg(args, "--restore-concurrency", "");
    let timings = Timings {
        ttl_ms: arg(args, "--ttl-ms", "15000").parse()?,
        heartbeat_ms: arg(args, "--heartbeat-ms", "5000").parse()?,
        sweep_ms: arg(args, "--sweep-ms", "5000").parse()?,
    };
    let mut env = vec![
        ("LOG_LEVEL".into(), "warn".into()),
        ("SESSION_PROXY_TIMEOUT_MS".into(), "10000".into()),
    ];
    if !restore_concurrency.is_empty() {
        env.push(("SESSION_RESTORE_CONCURRENCY".into(), restore_concurrency));
    }
    let options = ClusterOptions {
        size: 3,
        timings,
        worker_binary: Some(worker.into()),
        env,
    };
    let mut c = TestCluster::start_with(&binary, options).await?;
    let mut ids = Vec::with_capacity(count);
    let mut phones = Vec::with_capacity(count);
    for i in 0..count {
        ids.push(create(&c.client(i % 3), &format!("bench-{i}")).await?);
        phones.push(format!("4916{i:08}"));
    }
    let link_started = Instant::now();
    let clients: Vec<Client> = (0..3).map(|i| c.client(i)).collect();
    let linked: Vec<anyhow::Result<()>> = futures::stream::iter(ids.iter().enumerate())
        .map(|(i, id)| {
            let (client, phone) = (&clients[i % 3], &phones[i]);
            async move { link(client, id, phone).await.map(|_| ()) }
        })
        .buffer_unordered(16)
        .collect()
        .await;
    if let Err(err) = linked.into_iter().collect::<anyhow::Result<()>>() {
        for node in &c.nodes {
            let logs = node.logs();
            let warnings: Vec<&str> = logs.lines().filter(|l| l.contains("WARN")).collect();
            eprintln!(
                "node on port {}: {} warnings, last:",
                node.port,
                warnings.len()
            );
            for line in warnings.iter().rev().take(10) {
                eprintln!("  {line}");
            }
        }
        return Err(err);
    }
    println!(
        "cluster: 3 nodes (ROLE=api) + 1 wagate-worker, PostgreSQL + Redis; {count} sim sessions linked \
         round-robin in {:.1} s ({} build); lease TTL {} ms, heartbeat {} ms, sweep {} ms",
        link_started.elapsed().as_secs_f64(),
        build_of(&binary),
        timings.ttl_ms,
        timings.heartbeat_ms,
        timings.sweep_ms
    );
    println!("sessions per node: {}", balance(&per_node(&c)?));
    quiet_reads(&c, &ids, 200).await?;
    let (samples, elapsed) = request_mix(&c, &ids, &phones, seconds, concurrency).await;
    report_mix(&samples, elapsed);
    let took = takeover(&mut c, Duration::from_secs(120)).await?;
    let bound = timings.ttl_ms + timings.sweep_ms + 2000;
    println!(
        "takeover target: <= TTL + sweep + 2 s = {:.1} s; measured {:.2} s",
        bound as f64 / 1000.0,
        took.as_secs_f64()
    );
    println!(
        "sessions per node after the takeover (sweep placement): {}",
        balance(&per_node(&c)?)
    );
    let lost: usize = c
        .nodes
        .iter()
        .map(|n| n.logs().matches("session lease lost").count())
        .sum();
    println!("leases lost by live nodes during the run (missed renewals under load): {lost}");
    Ok(())
}
