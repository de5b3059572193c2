//! Authenticated reads against `/api/auth/validate`-free GETs (`/api/health` with a key): requests/s and
//! latency percentiles. Bounded in time; targets loopback only.

use std::time::{Duration, Instant};

use wagate_loadtest::harness::Client;

use super::arg;

pub async fn run(args: &[String]) -> anyhow::Result<()> {
    let url = arg(args, "--url", "http://127.0.0.1:2785");
    let key = arg(
        args,
        "--key",
        &std::env::var("WAGATE_KEY").unwrap_or_default(),
    );
    let seconds: u64 = arg(args, "--seconds", "10").parse()?;
    let connections: usize = arg(args, "--connections", "64").parse()?;
    anyhow::ensure!(
        url.starts_with("http://127.") || url.starts_with("http://localhost"),
        "loopback targets only"
    );
    let client = Client::new(url, Some(key));
    let deadline = Instant::now() + Duration::from_secs(seconds);
    let mut workers = Vec::new();
    for _ in 0..connections {
        let client = client.clone();
        workers.push(tokio::spawn(async move {
            let mut latencies = Vec::new();
            while Instant::now() < deadline {
                let started = Instant::now();
                if client
                    .get("/api/health")
                    .await
                    .map(|r| r.status == 200)
                    .unwrap_or(false)
                {
                    latencies.push(started.elapsed());
                }
            }
            latencies
        }));
    }
    let mut all = Vec::new();
    for w in workers {
        all.extend(w.await?);
    }
    all.sort();
    let pct = |p: f64| {
        all.get(((all.len() as f64) * p) as usize)
            .copied()
            .unwrap_or_default()
    };
    println!(
        "reads: {} ok in {seconds}s = {:.0}/s",
        all.len(),
        all.len() as f64 / seconds as f64
    );
    println!("latency p50={:?} p99={:?}", pct(0.50), pct(0.99));
    Ok(())
}
