//! Telemetry overhead: two nodes of the same binary started side by side, one with telemetry off (no
//! `METRICS_TOKEN`, so no metrics recorder, and no `OTEL_EXPORTER_OTLP_ENDPOINT`), one with both on (metrics
//! recorded and scraped every second, spans exported over OTLP to a loopback sink). Authenticated session
//! reads per second and closed-loop send-text throughput are measured on each in alternating phases
//! (off, on, on, off, ... for `--rounds` pairs), so drift from other load on the machine falls on both alike.
//! Prints each phase, the totals per node and the change.

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

const METRICS_TOKEN: &str = "bench-token";

/// Where the node with telemetry on exports its spans, and the share of traces it samples.
#[derive(Clone, Copy)]
struct Traces<'a> {
    endpoint: &'a str,
    ratio: f64,
}

/// One node of the comparison, with a linked session to read and send from.
struct Subject {
    node: Node,
    client: Client,
    from: String,
    sent: usize,
}

impl Subject {
    async fn start(
        binary: &str,
        telemetry_on: Option<Traces<'_>>,
        tag: &str,
    ) -> anyhow::Result<Subject> {
        let mut options = NodeOptions::new(binary)
            .env("LOG_LEVEL", "warn")
            .env("RATE_LIMIT_SHORT_LIMIT", "1000000")
            .env("RATE_LIMIT_MEDIUM_LIMIT", "100000000")
            .env("RATE_LIMIT_LONG_LIMIT", "1000000000");
        if let Some(traces) = telemetry_on {
            options = options
                .env("METRICS_TOKEN", METRICS_TOKEN)
                .env("OTEL_EXPORTER_OTLP_ENDPOINT", traces.endpoint);
            if traces.ratio < 1.0 {
                options = options
                    .env("OTEL_TRACES_SAMPLER", "parentbased_traceidratio")
                    .env("OTEL_TRACES_SAMPLER_ARG", traces.ratio.to_string());
            }
        }
        let node = Node::start(options).await?;
        let client = node.client();
        let from = create_linked(&client, &format!("telemetry-{tag}-a"), "4917000000001").await?;
        create_linked(&client, &format!("telemetry-{tag}-b"), "4917000000002").await?;
        Ok(Subject {
            node,
            client,
            from,
            sent: 0,
        })
    }
}

async fn reads(client: &Client, id: &str, seconds: u64, connections: usize) -> u64 {
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
    futures::future::join_all(loops).await.into_iter().sum()
}

/// `count` sends with `concurrency` in flight; answers (accepted sends, elapsed).
async fn sends(s: &mut Subject, to: &str, count: usize, concurrency: usize) -> (u64, Duration) {
    let started = Instant::now();
    let path = format!("/api/sessions/{}/messages/send-text", s.from);
    let first = s.sent;
    s.sent += count;
    let ok = futures::stream::iter(first..first + count)
        .map(|i| {
            let (client, path) = (s.client.clone(), path.clone());
            let body = json!({ "chatId": to, "text": format!("telemetry {i}") });
            async move { client.post(&path, body).await.is_ok_and(|r| r.status < 300) }
        })
        .buffer_unordered(concurrency)
        .filter(|ok| futures::future::ready(*ok))
        .count()
        .await;
    (ok as u64, started.elapsed())
}

#[derive(Default)]
struct Totals {
    reads: u64,
    read_time: Duration,
    sends: u64,
    send_time: Duration,
}

impl Totals {
    fn reads_per_s(&self) -> f64 {
        self.reads as f64 / self.read_time.as_secs_f64().max(f64::MIN_POSITIVE)
    }
    fn sends_per_s(&self) -> f64 {
        self.sends as f64 / self.send_time.as_secs_f64().max(f64::MIN_POSITIVE)
    }
}

/// `wagate-loadtest telemetry [--binary PATH] [--seconds N] [--connections N] [--count N]
/// [--concurrency N] [--rounds N] [--trace-ratio R]`
pub async fn run(args: &[String]) -> anyhow::Result<()> {
    let binary = arg(args, "--binary", "target/release/wagate");
    let seconds: u64 = arg(args, "--seconds", "5").parse()?;
    let connections: usize = arg(args, "--connections", "32").parse()?;
    let count: usize = arg(args, "--count", "3000").parse()?;
    let concurrency: usize = arg(args, "--concurrency", "32").parse()?;
    let rounds: usize = arg(args, "--rounds", "3").parse()?;
    let ratio: f64 = arg(args, "--trace-ratio", "1").parse()?;
    let (sink, exported) = otlp_sink().await?;
    let traces = Traces {
        endpoint: &sink,
        ratio,
    };
    let mut subjects = [
        Subject::start(&binary, None, "off").await?,
        Subject::start(&binary, Some(traces), "on").await?,
    ];
    // The node with telemetry on is scraped every second for the whole run, as a Prometheus server would.
    let scraper = reqwest::Client::new();
    let url = format!("{}/api/metrics", subjects[1].node.base_url());
    let scraping = tokio::spawn(async move {
        loop {
            let scraped = scraper.get(&url).bearer_auth(METRICS_TOKEN).send().await;
            if let Ok(reply) = scraped {
                let _ = reply.bytes().await;
            }
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
    });
    // Warm both (connections, statements, page cache) before anything counts.
    for s in &mut subjects {
        reads(&s.client, &s.from, 1, connections).await;
        sends(s, "4917000000002@c.us", count / 10, concurrency).await;
    }
    let mut totals = [Totals::default(), Totals::default()];
    let label = ["off", "on "];
    for round in 0..rounds {
        // off, on, then on, off: each node gets the earlier and the later slot equally often.
        let order = if round % 2 == 0 { [0, 1] } else { [1, 0] };
        for which in order {
            let s = &mut subjects[which];
            let started = Instant::now();
            let n = reads(&s.client, &s.from, seconds, connections).await;
            let read_time = started.elapsed();
            let (sent, send_time) = sends(s, "4917000000002@c.us", count, concurrency).await;
            println!(
                "round {round} telemetry {}: reads {:>8.0}/s, sends {:>6.0}/s",
                label[which],
                n as f64 / read_time.as_secs_f64(),
                sent as f64 / send_time.as_secs_f64()
            );
            let t = &mut totals[which];
            t.reads += n;
            t.read_time += read_time;
            t.sends += sent;
            t.send_time += send_time;
        }
    }
    scraping.abort();
    let change = |on: f64, off: f64| (on - off) / off.max(f64::MIN_POSITIVE) * 100.0;
    let [off, on] = &totals;
    println!(
        "binary {binary}; {rounds} rounds of {seconds}s reads ({connections} connections) and {count} sends ({concurrency} in flight) per node; traces sampled: {}",
        if ratio < 1.0 {
            format!("{ratio} (parentbased_traceidratio)")
        } else {
            "every one (SDK default)".to_owned()
        }
    );
    println!(
        "telemetry off (no METRICS_TOKEN, no OTLP endpoint): reads {:.0}/s, sends {:.0}/s",
        off.reads_per_s(),
        off.sends_per_s()
    );
    println!(
        "telemetry on (metrics scraped every 1 s, OTLP to a loopback sink): reads {:.0}/s, sends {:.0}/s; {} bytes of spans exported",
        on.reads_per_s(),
        on.sends_per_s(),
        exported.load(Ordering::Relaxed)
    );
    println!(
        "change with telemetry on: reads {:+.1}%, sends {:+.1}% (target: no worse than -5%)",
        change(on.reads_per_s(), off.reads_per_s()),
        change(on.sends_per_s(), off.sends_per_s())
    );
    Ok(())
}
