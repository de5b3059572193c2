//! `sends` and `inbound-storm`: message throughput and latency on the sim network. `sends` times each
//! send-text from the HTTP request to the recipient's stored message (its `message.received` reaches a WebSocket
//! subscriber right after the commit) and to the signed webhook delivery of that event; `inbound-storm` times
//! sim inbound messages to their webhook deliveries on the built-in receiver (every signature verified, events
//! counted by idempotency key). Both run against `--url` or a node they start; request loops are bounded in
//! count and time. For a node it started, the report also has the node's CPU time (user + sys) per 1,000
//! operations: on a shared machine wall-clock rates move with the load, the CPU cost per operation much less.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::{FutureExt, SinkExt, StreamExt};
use parking_lot::Mutex;
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use wagate_loadtest::harness::sessions::create_linked;
use wagate_loadtest::harness::{Client, Delivery, Receiver};

use super::common::{
    Counters, Progress, Report, Target, TargetArgs, measure_rss, phone, run_tag, tally,
};

pub(super) const SECRET: &str = "loadtest-webhook-secret-0001";

#[derive(clap::Args, Debug, Clone)]
pub struct SendsArgs {
    #[command(flatten)]
    pub target: TargetArgs,
    /// Sends in closed-loop mode (ignored with --rate)
    #[arg(long, default_value_t = 3000, value_parser = clap::value_parser!(u64).range(1..))]
    pub count: u64,
    /// Sends in flight at once in closed-loop mode
    #[arg(long, default_value_t = 32, value_parser = clap::value_parser!(u64).range(1..=4096))]
    pub concurrency: u64,
    /// Open loop: sends per second, for --seconds (0 = closed loop of --count)
    #[arg(long, default_value_t = 0, value_parser = clap::value_parser!(u64).range(0..=100_000))]
    pub rate: u64,
    /// Length of an open-loop run, in seconds
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u64).range(1..))]
    pub seconds: u64,
    /// WEBHOOK_DISPATCH_CONCURRENCY of the node this tool starts [default: the node's]
    #[arg(long, value_name = "N")]
    pub dispatch: Option<u64>,
    /// Writes one CSV line per send: start ms, HTTP ms, recipient-stored ms, webhook ms (-1 = never)
    #[arg(long, value_name = "CSV")]
    pub dump: Option<PathBuf>,
    /// How long to wait for the webhook deliveries after the last send, in seconds
    #[arg(long, default_value_t = 60)]
    pub drain_seconds: u64,
}

#[derive(clap::Args, Debug, Clone)]
pub struct InboundStormArgs {
    #[command(flatten)]
    pub target: TargetArgs,
    /// Sessions the inbound messages are spread over, each with one signed webhook
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u64).range(1..=1000))]
    pub sessions: u64,
    /// Inbound messages injected per second (open loop)
    #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(u64).range(1..=100_000))]
    pub rate: u64,
    /// Length of the injection, in seconds
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u64).range(1..))]
    pub seconds: u64,
    /// WEBHOOK_DISPATCH_CONCURRENCY of the node this tool starts [default: the node's]
    #[arg(long, value_name = "N")]
    pub dispatch: Option<u64>,
    /// How long to wait for the webhook deliveries after the last injection, in seconds
    #[arg(long, default_value_t = 120)]
    pub drain_seconds: u64,
}

pub(super) struct Setup {
    pub target: Target,
    pub receiver: Receiver,
    pub tag: String,
}

/// Connects (or starts a node), starts the receiver and links `sessions` sim sessions, each with a signed
/// webhook for `message.received` to the receiver.
pub(super) async fn setup(
    target: &TargetArgs,
    dispatch: Option<u64>,
    sessions: usize,
) -> anyhow::Result<(Setup, Vec<String>)> {
    let dispatch = dispatch.map(|d| d.to_string());
    let mut env = vec![("WEBHOOK_RETRY_DELAY", "200")];
    if let Some(d) = &dispatch {
        env.push(("WEBHOOK_DISPATCH_CONCURRENCY", d));
    }
    let target = Target::connect(target, &env).await?;
    let receiver = Receiver::start().await?;
    let tag = run_tag();
    let mut ids = Vec::new();
    for n in 0..sessions {
        let id = create_linked(&target.client, &format!("lt-{tag}-{n}"), &phone(&tag, n)).await?;
        let hook =
            json!({ "url": receiver.url(), "events": ["message.received"], "secret": SECRET });
        let reply = target
            .client
            .post(&format!("/api/sessions/{id}/webhooks"), hook)
            .await?;
        anyhow::ensure!(reply.status == 201, "webhook: {}", reply.text);
        ids.push(id);
    }
    Ok((
        Setup {
            target,
            receiver,
            tag,
        },
        ids,
    ))
}

impl Setup {
    /// Deletes the sessions a run created on a node it did not start.
    pub async fn cleanup(&self, ids: &[String]) {
        if !self.target.is_started() {
            for id in ids {
                let _ = self
                    .target
                    .client
                    .delete(&format!("/api/sessions/{id}"))
                    .await;
            }
        }
        self.receiver.stop();
    }

    pub fn node_pid(&self) -> Option<u32> {
        self.target.started_processes().first().map(|p| p.1)
    }
}

/// User + system CPU seconds the process has used so far (`/proc/PID/stat` fields 14 and 15, in clock ticks of
/// 1/100 s, the value on every Linux target this runs on); `None` when unreadable.
pub(super) fn cpu_seconds(pid: Option<u32>) -> Option<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{}/stat", pid?)).ok()?;
    // The command name (field 2) may hold spaces; the fields after it follow its closing parenthesis.
    let rest = stat.get(stat.rfind(')')? + 2..)?;
    let fields: Vec<&str> = rest.split(' ').collect();
    let ticks = |i: usize| fields.get(i).and_then(|f| f.parse::<u64>().ok());
    Some((ticks(11)? + ticks(12)?) as f64 / 100.0)
}

/// The node's CPU time spent since `before` per 1,000 of `ops`, as a report note.
pub(super) fn cpu_note(
    pid: Option<u32>,
    before: Option<f64>,
    ops: u64,
    what: &str,
) -> Option<String> {
    let (a, b) = (before?, cpu_seconds(pid)?);
    Some(format!(
        "node CPU: {:.2} s user+sys for {ops} {what} = {:.0} ms per 1000",
        b - a,
        (b - a) * 1_000_000.0 / ops.max(1) as f64
    ))
}

/// First arrival of each tagged delivery (duplicates by idempotency key skipped).
fn arrivals(deliveries: &[Delivery]) -> HashMap<String, Instant> {
    let mut first = HashMap::new();
    for d in deliveries {
        if let Some(tag) = d.json()["data"]["body"].as_str() {
            first.entry(tag.to_string()).or_insert(d.at);
        }
    }
    first
}

/// Arrival times of `message.received` events on a WebSocket subscribed to `session`, by message body.
async fn watch_stored(
    target: &Target,
    session: &str,
) -> anyhow::Result<Arc<Mutex<HashMap<String, Instant>>>> {
    let mut req = target.ws_url().into_client_request()?;
    req.headers_mut().insert("X-API-Key", target.key.parse()?);
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

/// One send-text: its tag, start, HTTP latency and whether it was accepted; counted in `counters`.
async fn send_one(
    client: Client,
    counters: Arc<Counters>,
    from: String,
    to: String,
    tag: String,
) -> (String, Instant, Duration, bool) {
    let t0 = Instant::now();
    let body = json!({ "chatId": to, "text": tag });
    let reply = client
        .post(&format!("/api/sessions/{from}/messages/send-text"), body)
        .await
        .map(|r| r.status);
    let took = t0.elapsed();
    counters.record(&reply, &[201], took);
    (tag, t0, took, matches!(reply, Ok(201)))
}

/// One CSV line per send: start (ms into the run), HTTP latency, recipient-stored and webhook latencies
/// (ms; -1 when it never came).
fn timeline(
    results: &[(String, Instant, Duration, bool)],
    stored: &HashMap<String, Instant>,
    deliveries: &[Delivery],
    begun: Instant,
) -> String {
    let hooked = arrivals(deliveries);
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

/// `sends`: send-text from one session to another, open loop at `--rate`/s when given, else `--count`
/// sends with `--concurrency` in flight. Each accepted send is one expected `message.received` webhook on
/// the recipient's side.
pub async fn sends(args: SendsArgs) -> anyhow::Result<Report> {
    let (s, ids) = setup(&args.target, args.dispatch, 2).await?;
    let stored = watch_stored(&s.target, &ids[1]).await?;
    let to = format!("{}@c.us", phone(&s.tag, 1));
    let counters = Counters::new();
    let cpu_before = cpu_seconds(s.node_pid());
    let progress = Progress::start("sends", counters.clone());
    let begun = Instant::now();
    let send = |i: u64| {
        send_one(
            s.target.client.clone(),
            counters.clone(),
            ids[0].clone(),
            to.clone(),
            format!("send-{}-{i}", s.tag),
        )
    };
    let (results, label) = if args.rate > 0 {
        let total = args.rate * args.seconds;
        let mut tick = tokio::time::interval(Duration::from_micros(1_000_000 / args.rate));
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Burst);
        let mut inflight = futures::stream::FuturesUnordered::new();
        let mut results = Vec::with_capacity(total as usize);
        for i in 0..total {
            tick.tick().await;
            inflight.push(send(i));
            while let Some(Some(r)) = inflight.next().now_or_never() {
                results.push(r);
            }
        }
        while let Some(r) = inflight.next().await {
            results.push(r);
        }
        (results, format!("open loop at {}/s", args.rate))
    } else {
        let results = futures::stream::iter((0..args.count).map(send))
            .buffer_unordered(args.concurrency as usize)
            .collect::<Vec<_>>()
            .await;
        (
            results,
            format!("closed loop, concurrency {}", args.concurrency),
        )
    };
    let elapsed = begun.elapsed();
    drop(progress);
    let mut report = Report::new("sends", &s.target.label).with_counters(&counters, elapsed);
    report.processes = measure_rss(&s.target.started_processes());
    let expected: HashMap<String, Instant> = results
        .iter()
        .filter(|r| r.3)
        .map(|r| (r.0.clone(), r.1))
        .collect();
    let deliveries = s
        .receiver
        .wait_count(expected.len(), Duration::from_secs(args.drain_seconds))
        .await;
    let (events, latencies) = tally(&expected, &deliveries, SECRET);
    report = report.with_events(events, latencies);
    let stored = stored.lock().clone();
    let to_stored: Vec<Duration> = expected
        .iter()
        .filter_map(|(tag, t0)| stored.get(tag).map(|at| at.duration_since(*t0)))
        .collect();
    let stored_summary = super::common::summarize(to_stored);
    report.note(format!(
        "{label}; throughput and latency are of the HTTP send-text (201)"
    ));
    report.note(format!(
        "request-to-recipient-stored ms (WebSocket message.received after commit): {}/{} seen, p50 {:.2} p99 {:.2} p999 {:.2}",
        stored_summary.samples,
        expected.len(),
        stored_summary.p50,
        stored_summary.p99,
        stored_summary.p999
    ));
    if let Some(note) = cpu_note(
        s.node_pid(),
        cpu_before,
        report.ok,
        "sends (with their deliveries)",
    ) {
        report.note(note);
    }
    if let Some(dump) = &args.dump {
        std::fs::write(dump, timeline(&results, &stored, &deliveries, begun))?;
    }
    s.cleanup(&ids).await;
    Ok(report)
}

/// `inbound-storm`: sim inbound messages at `--rate`/s spread over `--sessions` sessions, each with one
/// signed webhook; every accepted injection is one expected delivery.
pub async fn inbound_storm(args: InboundStormArgs) -> anyhow::Result<Report> {
    let (s, ids) = setup(&args.target, args.dispatch, args.sessions as usize).await?;
    let total = args.rate * args.seconds;
    let mut tick = tokio::time::interval(Duration::from_micros(1_000_000 / args.rate));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Burst);
    let counters = Counters::new();
    let progress = Progress::start("inbound-storm", counters.clone());
    let begun = Instant::now();
    let mut inflight = futures::stream::FuturesUnordered::new();
    let mut expected = HashMap::with_capacity(total as usize);
    let cpu_before = cpu_seconds(s.node_pid());
    let accept = |r: Option<(String, Instant, bool)>, expected: &mut HashMap<String, Instant>| {
        if let Some((tag, t0, true)) = r {
            expected.insert(tag, t0);
        }
    };
    for i in 0..total as usize {
        tick.tick().await;
        let (client, id, counters) = (
            s.target.client.clone(),
            ids[i % ids.len()].clone(),
            counters.clone(),
        );
        let tag = format!("storm-{}-{i}", s.tag);
        let from = format!("{}@c.us", phone(&s.tag, 10_000 + i % 997));
        inflight.push(async move {
            let t0 = Instant::now();
            let body = json!({ "from": from, "type": "text", "body": tag });
            let reply = client
                .post(&format!("/api/sim/sessions/{id}/inbound"), body)
                .await
                .map(|r| r.status);
            counters.record(&reply, &[200], t0.elapsed());
            (tag, t0, matches!(reply, Ok(200)))
        });
        while let Some(Some(r)) = inflight.next().now_or_never() {
            accept(Some(r), &mut expected);
        }
        while inflight.len() > 256 {
            let r = inflight.next().await;
            accept(r, &mut expected);
        }
    }
    while let Some(r) = inflight.next().await {
        accept(Some(r), &mut expected);
    }
    let elapsed = begun.elapsed();
    drop(progress);
    let mut report =
        Report::new("inbound-storm", &s.target.label).with_counters(&counters, elapsed);
    report.processes = measure_rss(&s.target.started_processes());
    let deliveries = s
        .receiver
        .wait_count(expected.len(), Duration::from_secs(args.drain_seconds))
        .await;
    let span = deliveries
        .iter()
        .map(|d| d.at)
        .max()
        .map(|last| last.duration_since(begun))
        .unwrap_or_default();
    let (events, latencies) = tally(&expected, &deliveries, SECRET);
    report = report.with_events(events, latencies);
    report.note(format!(
        "asked {}/s over {} sessions for {} s; throughput is of the accepted injections; deliveries {:.0}/s from the first injection to the last delivery",
        args.rate,
        args.sessions,
        args.seconds,
        deliveries.len() as f64 / span.as_secs_f64().max(1e-9)
    ));
    if let Some(note) = cpu_note(
        s.node_pid(),
        cpu_before,
        report.ok,
        "inbound messages and deliveries",
    ) {
        report.note(note);
    }
    s.cleanup(&ids).await;
    Ok(report)
}
