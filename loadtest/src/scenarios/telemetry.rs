//! Telemetry overhead: the same node binary run twice, once with trace export off and no scrape, once with
//! spans exported over OTLP to a loopback sink and its metrics scraped every second; for each, authenticated
//! session reads per second and closed-loop send-text throughput. Prints both runs and the difference.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use futures::StreamExt;
use serde_json::json;
use wagate_loadtest::harness::sessions::create_linked;
use wagate_loadtest::harness::{Client, Node, NodeOptions};

use super::arg;

/// An OTLP/HTTP sink on loopback that accepts every export and counts the bytes.
async fn otlp_sink() -> anyhow::Result<(String, Arc<AtomicU64>)> {
    let bytes = Arc::new(AtomicU64::new(0));
    let seen = bytes.clone();
    let app = axum::Router::new().route(
        "/v1/traces",
        axum::routing::post(move |body: axum::body::Bytes| {
            let seen = seen.clone();
            async move {
                seen.fetch_add(body.len() as u64, Ordering::Relaxed);
                axum::http::StatusCode::OK
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let url = format!("http://{}", listener.local_addr()?);
    tokio::spawn(async move { axum::serve(listener, app).await });
    Ok((url, bytes))
}

struct Figures {
    reads_per_s: f64,
    sends_per_s: f64,
}

async fn reads(client: &Client, id: &str, seconds: u64, connections: usize) -> f64 {
    let deadline = Instant::now() + Duration::from_secs(seconds);
    let path = format!("/api/sessions/{id}");
    let loops = (0..connections).map(|_| {
        let (client, path) = (client.clone(), path.clone());
        async move {
            let mut ok = 0u64;
            while Instant::now() < deadline {
                if client.get(&path).await.is_ok_and(|r| r.status == 200) {
                    ok += 1;
                }
            }
            ok
        }
    });
    let total: u64 = futures::future::join_all(loops).await.into_iter().sum();
    total as f64 / seconds as f64
}

async fn sends(client: &Client, from: &str, to: &str, count: usize, concurrency: usize) -> f64 {
    let started = Instant::now();
    let path = format!("/api/sessions/{from}/messages/send-text");
    let ok = futures::stream::iter(0..count)
        .map(|i| {
            let (client, path) = (client.clone(), path.clone());
            let body = json!({ "chatId": to, "text": format!("telemetry {i}") });
            async move { client.post(&path, body).await.is_ok_and(|r| r.status < 300) }
        })
        .buffer_unordered(concurrency)
        .filter(|ok| futures::future::ready(*ok))
        .count()
        .await;
    ok as f64 / started.elapsed().as_secs_f64()
}

async fn one_run(args: &[String], otlp: Option<&str>) -> anyhow::Result<Figures> {
    let seconds: u64 = arg(args, "--seconds", "10").parse()?;
    let connections: usize = arg(args, "--connections", "32").parse()?;
    let count: usize = arg(args, "--count", "3000").parse()?;
    let concurrency: usize = arg(args, "--concurrency", "32").parse()?;
    let mut options = NodeOptions::new(arg(args, "--binary", "target/release/wagate"))
        .env("LOG_LEVEL", "warn")
        .env("RATE_LIMIT_SHORT_LIMIT", "1000000")
        .env("RATE_LIMIT_MEDIUM_LIMIT", "100000000")
        .env("RATE_LIMIT_LONG_LIMIT", "1000000000")
        .env("METRICS_TOKEN", "bench-token");
    if let Some(endpoint) = otlp {
        options = options.env("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint);
    }
    let node = Node::start(options).await?;
    let client = node.client();
    let from = create_linked(&client, "telemetry-a", "4917000000001").await?;
    create_linked(&client, "telemetry-b", "4917000000002").await?;
    // With telemetry on, a scrape every second, as a Prometheus server would.
    let scraping = otlp.map(|_| {
        let scraper = reqwest::Client::new();
        let url = format!("{}/api/metrics", node.base_url());
        tokio::spawn(async move {
            loop {
                let _ = scraper.get(&url).bearer_auth("bench-token").send().await;
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
        })
    });
    let reads_per_s = reads(&client, &from, seconds, connections).await;
    let sends_per_s = sends(&client, &from, "4917000000002@c.us", count, concurrency).await;
    if let Some(task) = scraping {
        task.abort();
    }
    Ok(Figures {
        reads_per_s,
        sends_per_s,
    })
}

/// `wagate-loadtest telemetry [--binary PATH] [--seconds N] [--connections N] [--count N] [--concurrency N]`
pub async fn run(args: &[String]) -> anyhow::Result<()> {
    let off = one_run(args, None).await?;
    let (sink, exported) = otlp_sink().await?;
    let on = one_run(args, Some(&sink)).await?;
    let change = |on: f64, off: f64| (on - off) / off.max(f64::MIN_POSITIVE) * 100.0;
    println!(
        "telemetry off: reads {:.0}/s, sends {:.0}/s",
        off.reads_per_s, off.sends_per_s
    );
    println!(
        "telemetry on (OTLP to a loopback sink, scrape every 1 s): reads {:.0}/s, sends {:.0}/s; {} bytes of spans exported",
        on.reads_per_s,
        on.sends_per_s,
        exported.load(Ordering::Relaxed)
    );
    println!(
        "change with telemetry on: reads {:+.1}%, sends {:+.1}% (target: no worse than -5%)",
        change(on.reads_per_s, off.reads_per_s),
        change(on.sends_per_s, off.sends_per_s)
    );
    Ok(())
}
