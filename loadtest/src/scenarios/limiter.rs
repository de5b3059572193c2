//! What the shared (Redis) rate limiter costs: the same authenticated read against two nodes on the same kind
//! of data DB (a throwaway PostgreSQL database each), one in the embedded mode (in-process limiter) and one a
//! one-node cluster (`REDIS_ENABLED=true`, the three tiers counted in Redis), in one run. Prints req/s and
//! p50/p99 for each and the p99 the shared limiter adds. Tier limits are raised so nothing is refused: every
//! request still runs the full check.

use std::time::{Duration, Instant};

use wagate_loadtest::harness::cluster::{ClusterOptions, TestCluster};
use wagate_loadtest::harness::pg::PgDatabase;
use wagate_loadtest::harness::{Client, Node, NodeOptions};

use super::arg;

struct Figures {
    ok: usize,
    failed: usize,
    per_second: f64,
    p50: Duration,
    p99: Duration,
}

/// `connections` loops of GET `path` for `seconds`; latencies of the 200s only.
async fn measure(client: &Client, path: &str, seconds: u64, connections: usize) -> Figures {
    let deadline = Instant::now() + Duration::from_secs(seconds);
    let workers: Vec<_> = (0..connections)
        .map(|_| {
            let (client, path) = (client.clone(), path.to_string());
            tokio::spawn(async move {
                let (mut latencies, mut failed) = (Vec::new(), 0usize);
                while Instant::now() < deadline {
                    let started = Instant::now();
                    match client.get(&path).await {
                        Ok(reply) if reply.status == 200 => latencies.push(started.elapsed()),
                        _ => failed += 1,
                    }
                }
                (latencies, failed)
            })
        })
        .collect();
    let (mut all, mut failed) = (Vec::new(), 0);
    for worker in workers {
        if let Ok((latencies, f)) = worker.await {
            all.extend(latencies);
            failed += f;
        }
    }
    all.sort();
    let pct = |p: f64| {
        all.get(((all.len() as f64) * p) as usize)
            .copied()
            .unwrap_or_default()
    };
    Figures {
        ok: all.len(),
        failed,
        per_second: all.len() as f64 / seconds as f64,
        p50: pct(0.50),
        p99: pct(0.99),
    }
}

fn print(label: &str, f: &Figures) {
    println!(
        "{label:<28} {:>8.0} req/s  p50={:>9.3?}  p99={:>9.3?}  ({} ok, {} failed)",
        f.per_second, f.p50, f.p99, f.ok, f.failed
    );
}

/// Tiers no benchmark reaches, so every request is admitted after a full check.
const UNREACHABLE_TIERS: [(&str, &str); 3] = [
    ("RATE_LIMIT_SHORT_LIMIT", "100000000"),
    ("RATE_LIMIT_MEDIUM_LIMIT", "100000000"),
    ("RATE_LIMIT_LONG_LIMIT", "100000000"),
];

pub async fn run(args: &[String]) -> anyhow::Result<()> {
    let binary = arg(args, "--binary", "target/release/wagate");
    let seconds: u64 = arg(args, "--seconds", "10").parse()?;
    let connections: usize = arg(args, "--connections", "8").parse()?;
    let path = arg(args, "--path", "/api/auth/api-keys");

    let pg = PgDatabase::create()?;
    let mut local = NodeOptions::new(&binary)
        .env("DATABASE_TYPE", "postgres")
        .env("DATABASE_URL", pg.url.clone());
    for (k, v) in UNREACHABLE_TIERS {
        local = local.env(k, v);
    }
    let local = Node::start(local).await?;
    let shared = TestCluster::start_with(
        &binary,
        ClusterOptions {
            size: 1,
            env: UNREACHABLE_TIERS
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            ..ClusterOptions::default()
        },
    )
    .await?;

    // Warm both (connections, prepared statements, the script cache in Redis) before measuring.
    let warm = seconds.clamp(1, 2);
    measure(&local.client(), &path, warm, connections).await;
    measure(&shared.client(0), &path, warm, connections).await;
    let off = measure(&local.client(), &path, seconds, connections).await;
    let on = measure(&shared.client(0), &path, seconds, connections).await;

    println!("GET {path}, {connections} connections, {seconds}s each, binary {binary}");
    print("shared limiter off (local)", &off);
    print("shared limiter on (Redis)", &on);
    let added = on.p99.as_secs_f64() - off.p99.as_secs_f64();
    println!(
        "p99 added by the shared limiter: {:.3} ms (target < 0.3 ms)",
        added * 1000.0
    );
    Ok(())
}
