//! `sends` and `inbound-storm`: message throughput and latency on the sim network, measured to the moment
//! a signed webhook delivery of the recipient's `message.received` reaches a loopback receiver. Each
//! starts its own node; request loops are bounded in count and time.

use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant};

use futures::StreamExt;
use serde_json::json;
use wagate_loadtest::harness::sessions::create_linked;
use wagate_loadtest::harness::{Client, Delivery, Node, NodeOptions, Receiver};

use super::arg;

const SECRET: &str = "loadtest-webhook-secret-0001";

struct Setup {
    _node: Node,
    client: Client,
    receiver: Receiver,
}

async fn setup(binary: &str, sessions: usize) -> anyhow::Result<(Setup, Vec<String>)> {
    let node = Node::start(
        NodeOptions::new(binary)
            .env("LOG_LEVEL", "warn")
            .env("WEBHOOK_RETRY_DELAY", "200"),
    )
    .await?;
    let client = node.client();
    let receiver = Receiver::start().await?;
    let mut ids = Vec::new();
    for n in 0..sessions {
        let id = create_linked(&client, &format!("load-{n}"), &format!("49160{n:08}")).await?;
        let hook =
            json!({ "url": receiver.url(), "events": ["message.received"], "secret": SECRET });
        let reply = client
            .post(&format!("/api/sessions/{id}/webhooks"), hook)
            .await?;
        anyhow::ensure!(reply.status == 201, "webhook: {}", reply.text);
        ids.push(id);
    }
    Ok((
        Setup {
            _node: node,
            client,
            receiver,
        },
        ids,
    ))
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted
        .get(((sorted.len() as f64) * p) as usize)
        .copied()
        .unwrap_or_default()
}

fn print_latency(label: &str, mut samples: Vec<Duration>) {
    samples.sort();
    println!(
        "{label}: p50={:?} p99={:?} max={:?} (n={})",
        percentile(&samples, 0.5),
        percentile(&samples, 0.99),
        samples.last().copied().unwrap_or_default(),
        samples.len()
    );
}

/// Arrival time of each tagged delivery, plus duplicate and bad-signature counts.
fn arrivals(deliveries: &[Delivery]) -> (HashMap<String, Instant>, usize, usize) {
    let (mut first, mut seen, mut duplicates, mut unsigned) =
        (HashMap::new(), HashSet::new(), 0, 0);
    for d in deliveries {
        if !d.signed_with(SECRET) {
            unsigned += 1;
        }
        let body = d.json();
        let key = body["idempotencyKey"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        if !seen.insert(key) {
            duplicates += 1;
            continue;
        }
        if let Some(tag) = body["data"]["body"].as_str() {
            first.entry(tag.to_string()).or_insert(d.at);
        }
    }
    (first, duplicates, unsigned)
}

async fn wait_for(receiver: &Receiver, expected: usize, seconds: u64) -> Vec<Delivery> {
    receiver
        .wait_until(Duration::from_secs(seconds), |all| all.len() >= expected)
        .await
}

fn report(started: HashMap<String, Instant>, deliveries: &[Delivery], elapsed: Duration) {
    let (arrived, duplicates, unsigned) = arrivals(deliveries);
    let lost = started
        .keys()
        .filter(|tag| !arrived.contains_key(*tag))
        .count();
    let latencies = started
        .iter()
        .filter_map(|(tag, t0)| arrived.get(tag).map(|at| at.duration_since(*t0)))
        .collect();
    println!(
        "deliveries: {} in {:.1} s = {:.0}/s; lost {lost}, duplicated {duplicates}, bad signatures {unsigned}",
        arrived.len(),
        elapsed.as_secs_f64(),
        arrived.len() as f64 / elapsed.as_secs_f64()
    );
    print_latency("event-to-delivery", latencies);
}

/// `sends --binary PATH --count N --concurrency C`: send-text from one session to another.
pub async fn sends(args: &[String]) -> anyhow::Result<()> {
    let (count, concurrency): (usize, usize) = (
        arg(args, "--count", "2000").parse()?,
        arg(args, "--concurrency", "16").parse()?,
    );
    let (s, ids) = setup(&arg(args, "--binary", "target/release/wagate"), 2).await?;
    let to = "4916000000001@c.us";
    let begun = Instant::now();
    let work = (0..count).map(|i| {
        let (client, from) = (s.client.clone(), ids[0].clone());
        async move {
            let t0 = Instant::now();
            let body = json!({ "chatId": to, "text": format!("send-{i}") });
            let reply = client
                .post(&format!("/api/sessions/{from}/messages/send-text"), body)
                .await;
            (
                format!("send-{i}"),
                t0,
                t0.elapsed(),
                reply.map(|r| r.status == 201).unwrap_or(false),
            )
        }
    });
    let results: Vec<_> = futures::stream::iter(work)
        .buffer_unordered(concurrency)
        .collect()
        .await;
    let sent_in = begun.elapsed();
    let ok = results.iter().filter(|r| r.3).count();
    println!(
        "send-text: {ok}/{count} accepted in {:.1} s = {:.0} sends/s (concurrency {concurrency})",
        sent_in.as_secs_f64(),
        ok as f64 / sent_in.as_secs_f64()
    );
    print_latency("HTTP send-text", results.iter().map(|r| r.2).collect());
    let deliveries = wait_for(&s.receiver, ok, 60).await;
    report(
        results.into_iter().map(|r| (r.0, r.1)).collect(),
        &deliveries,
        begun.elapsed(),
    );
    Ok(())
}

/// `inbound-storm --binary PATH --sessions S --rate R --seconds T`: sim inbound messages at R/s spread over
/// S sessions, each with one signed webhook.
pub async fn inbound_storm(args: &[String]) -> anyhow::Result<()> {
    let sessions: usize = arg(args, "--sessions", "10").parse()?;
    let (rate, seconds): (u64, u64) = (
        arg(args, "--rate", "1000").parse()?,
        arg(args, "--seconds", "10").parse()?,
    );
    let (s, ids) = setup(&arg(args, "--binary", "target/release/wagate"), sessions).await?;
    let total = (rate * seconds) as usize;
    let mut tick = tokio::time::interval(Duration::from_micros(1_000_000 / rate.max(1)));
    let begun = Instant::now();
    let mut started = HashMap::with_capacity(total);
    let mut inflight = futures::stream::FuturesUnordered::new();
    for i in 0..total {
        tick.tick().await;
        let (client, id, tag) = (
            s.client.clone(),
            ids[i % ids.len()].clone(),
            format!("storm-{i}"),
        );
        started.insert(tag.clone(), Instant::now());
        inflight.push(async move {
            let body =
                json!({ "from": format!("4917{:09}@c.us", i % 997), "type": "text", "body": tag });
            client
                .post(&format!("/api/sim/sessions/{id}/inbound"), body)
                .await
                .map(|r| r.status == 200)
                .unwrap_or(false)
        });
        while inflight.len() > 256 {
            inflight.next().await;
        }
    }
    while inflight.next().await.is_some() {}
    println!(
        "inbound: {total} injected over {:.1} s into {sessions} sessions (target {rate}/s)",
        begun.elapsed().as_secs_f64()
    );
    let deliveries = wait_for(&s.receiver, total, 120).await;
    report(started, &deliveries, begun.elapsed());
    Ok(())
}
