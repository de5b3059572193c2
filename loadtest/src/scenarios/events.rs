//! `sends` and `inbound-storm`: message throughput and latency on the sim network. `sends` times each
//! send-text from the HTTP request to the recipient's stored message (its `message.received` reaches a WebSocket
//! subscriber right after the commit) and to the signed webhook delivery of that event; `inbound-storm` times
//! sim inbound messages to their webhook deliveries on a loopback receiver. Each starts its own node; request
//! loops are bounded in count and time. Figures are printed beside the targets, never asserted. Each
//! also prints the node process's CPU time (user + sys) per 1,000 operations over the measured part: on a
//! shared machine wall-clock rates move with the load, the CPU cost per operation much less.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::{FutureExt, SinkExt, StreamExt};
use parking_lot::Mutex;
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use wagate_loadtest::harness::sessions::create_linked;
use wagate_loadtest::harness::{ADMIN_KEY, Client, Delivery, Node, NodeOptions, Receiver};

use super::arg;

const SECRET: &str = "loadtest-webhook-secret-0001";

struct Setup {
    node: Node,
    client: Client,
    receiver: Receiver,
}

async fn setup(args: &[String], sessions: usize) -> anyhow::Result<(Setup, Vec<String>)> {
    let mut options = NodeOptions::new(arg(args, "--binary", "target/release/wagate"))
        .env("LOG_LEVEL", "warn")
        .env("WEBHOOK_RETRY_DELAY", "200");
    let dispatch = arg(args, "--dispatch", "");
    if !dispatch.is_empty() {
        options = options.env("WEBHOOK_DISPATCH_CONCURRENCY", dispatch);
    }
    let node = Node::start(options).await?;
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
            node,
            client,
            receiver,
        },
        ids,
    ))
}

/// User + system CPU seconds the process has used so far (`/proc/PID/stat` fields 14 and 15, in clock ticks of
/// 1/100 s, the value on every Linux target this runs on); `None` when unreadable.
fn cpu_seconds(pid: Option<u32>) -> Option<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{}/stat", pid?)).ok()?;
    // The command name (field 2) may hold spaces; the fields after it follow its closing parenthesis.
    let rest = stat.get(stat.rfind(')')? + 2..)?;
    let fields: Vec<&str> = rest.split(' ').collect();
    let ticks = |i: usize| fields.get(i).and_then(|f| f.parse::<u64>().ok());
    Some((ticks(11)? + ticks(12)?) as f64 / 100.0)
}

/// Prints the node's CPU time spent since `before` per 1,000 of `ops`.
fn print_cpu(node: &Node, before: Option<f64>, ops: usize, what: &str) {
    if let (Some(a), Some(b)) = (before, cpu_seconds(node.pid())) {
        println!(
            "node CPU: {:.2} s user+sys for {ops} {what} = {:.0} ms per 1000",
            b - a,
            (b - a) * 1_000_000.0 / ops.max(1) as f64
        );
    }
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted
        .get(((sorted.len() as f64) * p) as usize)
        .copied()
        .unwrap_or_default()
}

fn print_latency(label: &str, mut samples: Vec<Duration>, target: &str) {
    samples.sort();
    println!(
        "{label}: p50={:.2?} p99={:.2?} max={:.2?} (n={}){target}",
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

/// Deliveries per second over the span from the first event to the last delivery, loss and duplicates, and
/// the event-to-delivery latencies.
fn report(started: &HashMap<String, Instant>, deliveries: &[Delivery], targets: (&str, &str)) {
    let (arrived, duplicates, unsigned) = arrivals(deliveries);
    let lost = started
        .keys()
        .filter(|tag| !arrived.contains_key(*tag))
        .count();
    let latencies = started
        .iter()
        .filter_map(|(tag, t0)| arrived.get(tag).map(|at| at.duration_since(*t0)))
        .collect();
    let first = started.values().min().copied();
    let last = arrived.values().max().copied();
    let span = match (first, last) {
        (Some(a), Some(b)) => b.duration_since(a),
        _ => Duration::ZERO,
    };
    println!(
        "deliveries: {} in {:.2} s = {:.0}/s{}; lost {lost}, duplicated {duplicates}, bad signatures {unsigned} (target 0 lost)",
        arrived.len(),
        span.as_secs_f64(),
        arrived.len() as f64 / span.as_secs_f64().max(1e-9),
        targets.0,
    );
    print_latency("event-to-delivery", latencies, targets.1);
}

/// Arrival times of `message.received` events on a WebSocket subscribed to `session`, by message body.
async fn watch_stored(
    node: &Node,
    session: &str,
) -> anyhow::Result<Arc<Mutex<HashMap<String, Instant>>>> {
    let mut req = format!("ws://127.0.0.1:{}/api/ws", node.port).into_client_request()?;
    req.headers_mut().insert("X-API-Key", ADMIN_KEY.parse()?);
    let (mut ws, _) = tokio_tungstenite::connect_async(req).await?;
    let sub = json!({ "type": "subscribe", "sessionId": session, "events": ["message.received"] });
    ws.send(Message::Text(sub.to_string().into())).await?;
    loop {
        let frame = tokio::time::timeout(Duration::from_secs(5), ws.next())
            .await?
            .ok_or_else(|| anyhow::anyhow!("socket closed"))??;
        if let Message::Text(t) = frame {
            let v: Value = serde_json::from_str(&t)?;
            anyhow::ensure!(v["type"] != "error", "subscribe: {t}");
            if v["type"] == "subscribed" {
                break;
            }
        }
    }
    let seen = Arc::new(Mutex::new(HashMap::new()));
    let out = seen.clone();
    tokio::spawn(async move {
        while let Some(Ok(frame)) = ws.next().await {
            let at = Instant::now();
            let Message::Text(t) = frame else { continue };
            let Ok(v) = serde_json::from_str::<Value>(&t) else {
                continue;
            };
            if let Some(tag) = v["payload"]["data"]["body"].as_str() {
                out.lock().entry(tag.to_string()).or_insert(at);
            }
        }
    });
    Ok(seen)
}

/// One send-text: its tag, start, HTTP latency and whether it was accepted.
async fn send_one(
    client: Client,
    from: String,
    to: String,
    i: usize,
) -> (String, Instant, Duration, bool) {
    let t0 = Instant::now();
    let tag = format!("send-{i}");
    let body = json!({ "chatId": to, "text": tag });
    let reply = client
        .post(&format!("/api/sessions/{from}/messages/send-text"), body)
        .await;
    let ok = reply.map(|r| r.status == 201).unwrap_or(false);
    (tag, t0, t0.elapsed(), ok)
}

/// One CSV line per send: start (ms into the run), HTTP latency, recipient-stored and webhook latencies
/// (ms; -1 when it never came).
fn timeline(
    results: &[(String, Instant, Duration, bool)],
    stored: &HashMap<String, Instant>,
    deliveries: &[Delivery],
    begun: Instant,
) -> String {
    let (hooked, _, _) = arrivals(deliveries);
    let since = |at: Option<&Instant>, t0: Instant| {
        at.map_or(-1.0, |at| at.duration_since(t0).as_secs_f64() * 1e3)
    };
    results
        .iter()
        .map(|(tag, t0, http, _)| {
            format!(
                "{:.3},{:.3},{:.3},{:.3}\n",
                t0.duration_since(begun).as_secs_f64() * 1e3,
                http.as_secs_f64() * 1e3,
                since(stored.get(tag), *t0),
                since(hooked.get(tag), *t0)
            )
        })
        .collect()
}

/// `sends --binary PATH [--rate R --seconds T | --count N --concurrency C] [--dispatch D] [--dump CSV]`:
/// send-text from one session to another, open loop at R/s when `--rate` is given, else N sends with C in
/// flight. `--dump` writes one line per send (start ms, HTTP ms, recipient-stored ms, webhook ms; -1 = never)
/// to find when in a run the slow ones happened.
pub async fn sends(args: &[String]) -> anyhow::Result<()> {
    let rate: u64 = arg(args, "--rate", "0").parse()?;
    let (s, ids) = setup(args, 2).await?;
    let stored = watch_stored(&s.node, &ids[1]).await?;
    let to = "4916000000001@c.us".to_string();
    let cpu_before = cpu_seconds(s.node.pid());
    let begun = Instant::now();
    let (results, label) = if rate > 0 {
        let seconds: u64 = arg(args, "--seconds", "10").parse()?;
        let total = (rate * seconds) as usize;
        let mut tick = tokio::time::interval(Duration::from_micros(1_000_000 / rate));
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Burst);
        let mut inflight = futures::stream::FuturesUnordered::new();
        let mut results = Vec::with_capacity(total);
        for i in 0..total {
            tick.tick().await;
            inflight.push(send_one(s.client.clone(), ids[0].clone(), to.clone(), i));
            while let Some(Some(r)) = inflight.next().now_or_never() {
                results.push(r);
            }
        }
        while let Some(r) = inflight.next().await {
            results.push(r);
        }
        (results, format!("open loop at {rate}/s"))
    } else {
        let (count, concurrency): (usize, usize) = (
            arg(args, "--count", "3000").parse()?,
            arg(args, "--concurrency", "32").parse()?,
        );
        let work = (0..count).map(|i| send_one(s.client.clone(), ids[0].clone(), to.clone(), i));
        let results = futures::stream::iter(work)
            .buffer_unordered(concurrency)
            .collect::<Vec<_>>()
            .await;
        (results, format!("closed loop, concurrency {concurrency}"))
    };
    let sent_in = begun.elapsed();
    let ok = results.iter().filter(|r| r.3).count();
    println!(
        "send-text: {ok}/{} accepted in {:.2} s = {:.0} sends/s ({label}; target >= 3000 sends/s)",
        results.len(),
        sent_in.as_secs_f64(),
        ok as f64 / sent_in.as_secs_f64()
    );
    let p99_target = if rate > 0 {
        " (target p99 < 20 ms at 1000/s)"
    } else {
        ""
    };
    print_latency("HTTP send-text", results.iter().map(|r| r.2).collect(), "");
    let deliveries = s.receiver.wait_count(ok, Duration::from_secs(60)).await;
    let started: HashMap<String, Instant> = results
        .iter()
        .filter(|r| r.3)
        .map(|r| (r.0.clone(), r.1))
        .collect();
    let stored = stored.lock().clone();
    let to_stored: Vec<Duration> = started
        .iter()
        .filter_map(|(tag, t0)| stored.get(tag).map(|at| at.duration_since(*t0)))
        .collect();
    println!(
        "recipient stored: {}/{} (WebSocket message.received after commit)",
        to_stored.len(),
        started.len()
    );
    print_latency("request-to-recipient-stored", to_stored, p99_target);
    report(&started, &deliveries, ("", ""));
    print_cpu(&s.node, cpu_before, ok, "sends (with their deliveries)");
    let dump = arg(args, "--dump", "");
    if !dump.is_empty() {
        std::fs::write(&dump, timeline(&results, &stored, &deliveries, begun))?;
    }
    Ok(())
}

/// `inbound-storm --binary PATH --sessions S --rate R --seconds T [--dispatch D]`: sim inbound messages at R/s
/// spread over S sessions, each with one signed webhook.
pub async fn inbound_storm(args: &[String]) -> anyhow::Result<()> {
    let sessions: usize = arg(args, "--sessions", "10").parse()?;
    let (rate, seconds): (u64, u64) = (
        arg(args, "--rate", "1000").parse()?,
        arg(args, "--seconds", "10").parse()?,
    );
    let (s, ids) = setup(args, sessions).await?;
    let total = (rate * seconds) as usize;
    let mut tick = tokio::time::interval(Duration::from_micros(1_000_000 / rate.max(1)));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Burst);
    let begun = Instant::now();
    let mut started = HashMap::with_capacity(total);
    let mut inflight = futures::stream::FuturesUnordered::new();
    let mut refused = 0usize;
    let cpu_before = cpu_seconds(s.node.pid());
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
        while let Some(Some(ok)) = inflight.next().now_or_never() {
            refused += usize::from(!ok);
        }
        while inflight.len() > 256 {
            if let Some(ok) = inflight.next().await {
                refused += usize::from(!ok);
            }
        }
    }
    while let Some(ok) = inflight.next().await {
        refused += usize::from(!ok);
    }
    println!(
        "inbound: {total} injected over {:.2} s into {sessions} sessions (asked {rate}/s), {refused} refused",
        begun.elapsed().as_secs_f64()
    );
    let deliveries = s.receiver.wait_count(total, Duration::from_secs(120)).await;
    let p99_target = if rate <= 1000 {
        " (target p99 < 50 ms at 1000/s)"
    } else {
        ""
    };
    report(
        &started,
        &deliveries,
        (" (target >= 5000/s sustained)", p99_target),
    );
    print_cpu(
        &s.node,
        cpu_before,
        total,
        "inbound messages and deliveries",
    );
    Ok(())
}
