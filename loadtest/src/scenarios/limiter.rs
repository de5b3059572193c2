//! What the shared (Redis) rate limiter costs: the same authenticated read against two one-node clusters
//! (`REDIS_ENABLED=true`, a throwaway PostgreSQL database each), one counting the three tiers in Redis, one
//! limiting in-process (`WAGATE_BENCH_LOCAL_LIMITER=true`, a benchmark switch read once at boot), in one run. Phases alternate
//! (off, on, then on, off, ... for `--rounds` pairs) so drift from other load on the machine falls on both
//! alike. Prints each phase, req/s and p50/p99 over all phases of each, and the p99 the shared limiter adds.
//! Tier limits are raised so nothing is refused: every request still runs the full check.

use std::time::{Duration, Instant};

use wagate_loadtest::harness::Client;
use wagate_loadtest::harness::cluster::{ClusterOptions, TestCluster};

use super::arg;

struct Figures {
    ok: usize,
    failed: usize,
    per_second: f64,
    p50: Duration,
    p99: Duration,
}

/// The 200s' latencies and the failures of one or more phases, and their length.
#[derive(Default)]
struct Samples {
    latencies: Vec<Duration>,
    failed: usize,
    elapsed: Duration,
}

impl Samples {
    fn add(&mut self, other: Samples) {
        self.latencies.extend(other.latencies);
        self.failed += other.failed;
        self.elapsed += other.elapsed;
    }

    fn figures(mut self) -> Figures {
        self.latencies.sort();
        let all = &self.latencies;
        let pct = |p: f64| {
            all.get(((all.len() as f64) * p) as usize)
                .copied()
                .unwrap_or_default()
        };
        Figures {
            ok: all.len(),
            failed: self.failed,
            per_second: all.len() as f64 / self.elapsed.as_secs_f64().max(f64::MIN_POSITIVE),
            p50: pct(0.50),
            p99: pct(0.99),
        }
    }
}

/// `connections` loops of GET `path` for `seconds`; latencies of the 200s only.
async fn measure(client: &Client, path: &str, seconds: u64, connections: usize) -> Samples {
    let started = Instant::now();
    let deadline = started + Duration::from_secs(seconds);
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
    let mut samples = Samples::default();
    for worker in workers {
        if let Ok((latencies, f)) = worker.await {
            samples.latencies.extend(latencies);
            samples.failed += f;
        }
    }
    samples.elapsed = started.elapsed();
    samples
}

fn print(label: &str, f: &Figures) {
    println!(
        "{label:<36} {:>8.0} req/s  p50={:>9.3?}  p99={:>9.3?}  ({} ok, {} failed)",
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
    let seconds: u64 = arg(args, "--seconds", "5").parse()?;
    let rounds: usize = arg(args, "--rounds", "3").parse()?;
    let connections: usize = arg(args, "--connections", "8").parse()?;
    let path = arg(args, "--path", "/api/auth/api-keys");

    let cluster_of_one = |extra: Option<(&str, &str)>| {
        let mut env: Vec<(String, String)> = UNREACHABLE_TIERS
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        env.extend(extra.map(|(k, v)| (k.to_string(), v.to_string())));
        TestCluster::start_with(
            &binary,
            ClusterOptions {
                size: 1,
                env,
                ..ClusterOptions::default()
            },
        )
    };
    // The baseline is the same kind of node (a one-node cluster on PostgreSQL and Redis, with its heartbeat,
    // sweeps and event publishing) that limits in-process, so the two differ in the limiter alone.
    let local = cluster_of_one(Some(("WAGATE_BENCH_LOCAL_LIMITER", "true"))).await?;
    let shared = cluster_of_one(None).await?;

    // Warm both (connections, prepared statements, the script cache in Redis) before measuring.
    let warm = seconds.clamp(1, 2);
    measure(&local.client(0), &path, warm, connections).await;
    measure(&shared.client(0), &path, warm, connections).await;
    let clients = [local.client(0), shared.client(0)];
    let labels = ["off (local)", "on (Redis) "];
    let mut totals = [Samples::default(), Samples::default()];
    for round in 0..rounds {
        let order = if round % 2 == 0 { [0, 1] } else { [1, 0] };
        for which in order {
            let phase = measure(&clients[which], &path, seconds, connections).await;
            let f = Samples {
                latencies: phase.latencies.clone(),
                failed: phase.failed,
                elapsed: phase.elapsed,
            }
            .figures();
            print(
                &format!("round {round} shared limiter {}", labels[which]),
                &f,
            );
            totals[which].add(phase);
        }
    }
    let [off, on] = totals;
    let (off, on) = (off.figures(), on.figures());

    println!(
        "GET {path}, {connections} connections, {rounds} rounds of {seconds}s per mode, binary {binary}"
    );
    print("shared limiter off (local)", &off);
    print("shared limiter on (Redis)", &on);
    let added = on.p99.as_secs_f64() - off.p99.as_secs_f64();
    println!(
        "p99 added by the shared limiter: {:.3} ms (target < 0.3 ms)",
        added * 1000.0
    );
    Ok(())
}
