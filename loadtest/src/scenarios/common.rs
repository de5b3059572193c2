//! What every scenario shares: where the load goes (a running node given by URL, or a node this tool starts),
//! the figures it collects (latencies, error kinds, webhook event tallies, RSS of started processes), the
//! once-a-second progress line, and the report printed as text or JSON.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use serde::Serialize;
use wagate_loadtest::harness::{Client, Delivery, Node, NodeOptions};

/// Where a scenario sends its load.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct TargetArgs {
    /// Base URL of a running node (or of the load balancer of a cluster) on the sim engine, e.g.
    /// http://127.0.0.1:2785. Without it the scenario starts its own node from --binary. Scenarios with a
    /// webhook receiver listen on 127.0.0.1, so the node must run on this machine with WEBHOOK_SSRF_PROTECT=false
    #[arg(long, value_name = "URL", value_parser = parse_base_url)]
    pub url: Option<String>,
    /// Admin API key of the node at --url
    #[arg(long, value_name = "KEY", env = "WAGATE_KEY", hide_env_values = true)]
    pub key: Option<String>,
    /// The `wagate` binary to start when no --url is given [default: `wagate` beside this executable]
    #[arg(long, value_name = "PATH")]
    pub binary: Option<PathBuf>,
    /// Extra environment for the nodes this tool starts; repeatable, e.g. --node-env WEBHOOK_DISPATCH_CONCURRENCY=128
    #[arg(long = "node-env", value_name = "KEY=VALUE", value_parser = parse_env_pair)]
    pub node_env: Vec<(String, String)>,
}

pub fn parse_base_url(raw: &str) -> Result<String, String> {
    let url = url::Url::parse(raw).map_err(|e| format!("not a URL ({e})"))?;
    if !matches!(url.scheme(), "http" | "https") || url.host_str().is_none() {
        return Err("expected http://HOST[:PORT] or https://HOST[:PORT]".into());
    }
    Ok(raw.trim_end_matches('/').to_string())
}

pub fn parse_env_pair(raw: &str) -> Result<(String, String), String> {
    match raw.split_once('=') {
        Some((k, v)) if !k.is_empty() => Ok((k.to_string(), v.to_string())),
        _ => Err("expected KEY=VALUE".into()),
    }
}

/// A binary that sits beside this executable (`target/debug/wagate` next to `target/debug/wagate-loadtest`).
pub fn sibling_binary(name: &str) -> PathBuf {
    std::env::current_exe()
        .ok()
        .and_then(|exe| exe.parent().map(|dir| dir.join(name)))
        .unwrap_or_else(|| PathBuf::from(name))
}

/// The build profile a binary path suggests; debug figures are an order of magnitude off release ones.
pub fn build_of(binary: &std::path::Path) -> &'static str {
    let path = binary.display().to_string();
    if path.contains("/release/") {
        "release"
    } else if path.contains("/debug/") {
        "debug"
    } else {
        "unknown"
    }
}

/// A running node the load goes to, and the process behind it when this tool started it.
pub struct Target {
    pub client: Client,
    pub base_url: String,
    pub key: String,
    pub label: String,
    node: Option<Node>,
}

impl Target {
    /// Checks that the node at `--url` answers and takes the key, or starts a node from the binary with
    /// `env` (then `--node-env`) on top of the harness defaults.
    pub async fn connect(args: &TargetArgs, env: &[(&str, &str)]) -> anyhow::Result<Target> {
        if let Some(url) = &args.url {
            let key = args.key.clone().unwrap_or_default();
            preflight(url, &key).await?;
            return Ok(Target {
                client: Client::new(url.clone(), Some(key.clone())),
                base_url: url.clone(),
                key,
                label: url.clone(),
                node: None,
            });
        }
        let binary = args
            .binary
            .clone()
            .unwrap_or_else(|| sibling_binary("wagate"));
        anyhow::ensure!(
            binary.is_file(),
            "no wagate binary at {} (build it with `cargo build -p wagate-node`, pass --binary PATH, or target a running node with --url)",
            binary.display()
        );
        let mut options = NodeOptions::new(&binary).env("LOG_LEVEL", "warn");
        for (k, v) in env {
            options = options.env(k, *v);
        }
        for (k, v) in &args.node_env {
            options = options.env(k, v.clone());
        }
        let node = Node::start(options).await?;
        Ok(Target {
            client: node.client(),
            base_url: node.base_url(),
            key: wagate_loadtest::harness::ADMIN_KEY.to_string(),
            label: format!(
                "{} (started here: {}, {} build)",
                node.base_url(),
                binary.display(),
                build_of(&binary)
            ),
            node: Some(node),
        })
    }

    pub fn is_started(&self) -> bool {
        self.node.is_some()
    }

    pub fn started_processes(&self) -> Vec<(String, u32)> {
        self.node
            .iter()
            .filter_map(|n| n.pid().map(|pid| ("wagate".to_string(), pid)))
            .collect()
    }

    /// The WebSocket URL of the node (`ws://` for `http://`).
    pub fn ws_url(&self) -> String {
        let rest = self
            .base_url
            .strip_prefix("https://")
            .map(|r| format!("wss://{r}"))
            .or_else(|| {
                self.base_url
                    .strip_prefix("http://")
                    .map(|r| format!("ws://{r}"))
            })
            .unwrap_or_else(|| self.base_url.clone());
        format!("{rest}/api/ws")
    }
}

/// A target that does not answer, is not ready or refuses the key fails the run before any load.
pub async fn preflight(url: &str, key: &str) -> anyhow::Result<()> {
    let probe = Client::new(url.to_string(), Some(key.to_string()));
    let budget = Duration::from_secs(5);
    let ready = tokio::time::timeout(budget, probe.get("/api/health/ready"))
        .await
        .map_err(|_| anyhow::anyhow!("target {url} does not answer (no reply within {budget:?})"))?
        .map_err(|e| anyhow::anyhow!("target {url} does not answer: {e:#}"))?;
    anyhow::ensure!(
        ready.status == 200,
        "target {url} is not ready: GET /api/health/ready answered {} {}",
        ready.status,
        ready.text
    );
    let listed = tokio::time::timeout(budget, probe.get("/api/sessions?limit=1"))
        .await
        .map_err(|_| anyhow::anyhow!("target {url} does not answer GET /api/sessions"))??;
    anyhow::ensure!(
        listed.status == 200,
        "target {url} refused the key: GET /api/sessions answered {} (pass the admin key with --key or WAGATE_KEY)",
        listed.status
    );
    Ok(())
}

/// Unique phone numbers and session names per run, so runs against one long-lived node never collide.
pub fn run_tag() -> String {
    uuid::Uuid::new_v4().simple().to_string()[..8].to_string()
}

/// A sim phone number for the `n`th session of a run: `49` + 11 digits drawn from the run tag and `n`.
pub fn phone(tag: &str, n: usize) -> String {
    let seed = u64::from_str_radix(tag, 16).unwrap_or(0) % 1_000_000;
    format!("49{seed:06}{n:05}")
}

/// `VmRSS` and `VmHWM` (peak) of a process in KiB, from `/proc/PID/status`.
pub fn rss_kib(pid: u32) -> Option<(u64, u64)> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let field = |name: &str| {
        status
            .lines()
            .find(|l| l.starts_with(name))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|v| v.parse::<u64>().ok())
    };
    Some((field("VmRSS:")?, field("VmHWM:")?))
}

#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ProcessRss {
    pub process: String,
    pub pid: u32,
    pub rss_mib: f64,
    pub peak_rss_mib: f64,
}

pub fn measure_rss(processes: &[(String, u32)]) -> Vec<ProcessRss> {
    processes
        .iter()
        .filter_map(|(name, pid)| {
            rss_kib(*pid).map(|(now, peak)| ProcessRss {
                process: name.clone(),
                pid: *pid,
                rss_mib: now as f64 / 1024.0,
                peak_rss_mib: peak as f64 / 1024.0,
            })
        })
        .collect()
}

/// p50/p99/p999/max of a set of durations, in milliseconds.
#[derive(Debug, Clone, Copy, Serialize, PartialEq, Default)]
#[serde(rename_all = "camelCase")]
pub struct LatencySummary {
    pub samples: usize,
    pub p50: f64,
    pub p99: f64,
    pub p999: f64,
    pub max: f64,
}

/// Nearest-rank percentile of sorted samples (`p` in 0..=1).
pub fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let rank = (p * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

pub fn summarize(mut samples: Vec<Duration>) -> LatencySummary {
    samples.sort_unstable();
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    LatencySummary {
        samples: samples.len(),
        p50: ms(percentile(&samples, 0.50)),
        p99: ms(percentile(&samples, 0.99)),
        p999: ms(percentile(&samples, 0.999)),
        max: ms(samples.last().copied().unwrap_or_default()),
    }
}

/// Counts of one run, shared by its tasks and read by the progress line.
#[derive(Default)]
pub struct Counters {
    pub ok: AtomicU64,
    pub errors: AtomicU64,
    latencies: Mutex<Vec<Duration>>,
    error_kinds: Mutex<BTreeMap<String, u64>>,
}

impl Counters {
    pub fn new() -> Arc<Counters> {
        Arc::new(Counters::default())
    }

    pub fn success(&self, took: Duration) {
        self.ok.fetch_add(1, Ordering::Relaxed);
        self.latencies.lock().push(took);
    }

    /// Counts a failed operation under a short kind ("HTTP 503", "transport").
    pub fn failure(&self, kind: impl Into<String>) {
        self.errors.fetch_add(1, Ordering::Relaxed);
        *self.error_kinds.lock().entry(kind.into()).or_default() += 1;
    }

    /// Records an HTTP outcome: `expected` statuses are successes, any other status or a transport error
    /// a failure of its kind.
    pub fn record(&self, reply: &anyhow::Result<u16>, expected: &[u16], took: Duration) {
        match reply {
            Ok(status) if expected.contains(status) => self.success(took),
            Ok(status) => self.failure(format!("HTTP {status}")),
            Err(_) => self.failure("transport"),
        }
    }

    pub fn ok(&self) -> u64 {
        self.ok.load(Ordering::Relaxed)
    }

    pub fn errors(&self) -> u64 {
        self.errors.load(Ordering::Relaxed)
    }

    pub fn latencies(&self) -> Vec<Duration> {
        self.latencies.lock().clone()
    }

    pub fn error_kinds(&self) -> BTreeMap<String, u64> {
        self.error_kinds.lock().clone()
    }
}

/// Prints `scenario: Ns, ok, errors, rate` to stderr once a second until dropped (stdout stays clean for
/// --json). A run shorter than a second prints nothing.
pub struct Progress {
    task: tokio::task::JoinHandle<()>,
}

impl Progress {
    pub fn start(scenario: &'static str, counters: Arc<Counters>) -> Progress {
        let begun = Instant::now();
        let task = tokio::spawn(async move {
            let mut tick = tokio::time::interval(Duration::from_secs(1));
            tick.tick().await;
            let mut last_ok = 0;
            loop {
                tick.tick().await;
                let (ok, errors) = (counters.ok(), counters.errors());
                eprintln!(
                    "{scenario}: {:>4.0} s  ok {ok}  errors {errors}  last second {}/s",
                    begun.elapsed().as_secs_f64(),
                    ok - last_ok
                );
                last_ok = ok;
            }
        });
        Progress { task }
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// What the signed-webhook receiver saw for a set of expected events.
#[derive(Debug, Clone, Copy, Serialize, PartialEq, Eq, Default)]
#[serde(rename_all = "camelCase")]
pub struct EventTally {
    /// Events the run caused (accepted by the node) and expects a delivery of.
    pub expected: usize,
    /// Expected events delivered at least once.
    pub delivered: usize,
    /// Expected events never delivered.
    pub lost: usize,
    /// Deliveries whose idempotency key had been delivered before (at-least-once repeats).
    pub duplicated: usize,
    /// One expected event delivered under more than one idempotency key (stored twice).
    pub reemitted: usize,
    /// Deliveries whose `X-Wagate-Signature` does not match the HMAC of their body.
    pub bad_signatures: usize,
    /// Deliveries without an idempotency key.
    pub missing_keys: usize,
}

/// Tallies deliveries against the expected events (tag -> when the event was caused). The tag of a
/// delivery is `data.body` of its payload; every signature is checked against `secret`. Returns the tally
/// and the cause-to-first-delivery latency of each delivered event.
pub fn tally(
    expected: &HashMap<String, Instant>,
    deliveries: &[Delivery],
    secret: &str,
) -> (EventTally, Vec<Duration>) {
    let mut out = EventTally {
        expected: expected.len(),
        ..EventTally::default()
    };
    let mut keys = HashSet::new();
    let mut first: HashMap<String, Instant> = HashMap::new();
    let mut keys_of_tag: HashMap<String, HashSet<String>> = HashMap::new();
    for d in deliveries {
        if !d.signed_with(secret) {
            out.bad_signatures += 1;
        }
        let body = d.json();
        let key = body["idempotencyKey"].as_str().unwrap_or_default();
        if key.is_empty() {
            out.missing_keys += 1;
        } else if !keys.insert(key.to_string()) {
            out.duplicated += 1;
            continue;
        }
        if let Some(tag) = body["data"]["body"].as_str()
            && expected.contains_key(tag)
        {
            first.entry(tag.to_string()).or_insert(d.at);
            keys_of_tag
                .entry(tag.to_string())
                .or_default()
                .insert(key.to_string());
        }
    }
    out.delivered = first.len();
    out.lost = expected.len() - first.len();
    out.reemitted = keys_of_tag.values().filter(|k| k.len() > 1).count();
    let latencies = expected
        .iter()
        .filter_map(|(tag, t0)| first.get(tag).map(|at| at.saturating_duration_since(*t0)))
        .collect();
    (out, latencies)
}

/// The result of one scenario run.
#[derive(Debug, Clone, Serialize, Default)]
#[serde(rename_all = "camelCase")]
pub struct Report {
    pub scenario: String,
    pub target: String,
    /// Wall time of the measured part, seconds.
    pub seconds: f64,
    pub operations: u64,
    pub ok: u64,
    pub errors: u64,
    pub error_kinds: BTreeMap<String, u64>,
    /// Successful operations per second over the measured part.
    pub throughput_per_sec: f64,
    /// Request latency of the successful operations.
    pub latency_ms: LatencySummary,
    pub events: Option<EventTally>,
    /// Cause-to-webhook-delivery latency of delivered events.
    pub event_latency_ms: Option<LatencySummary>,
    /// Processes this run started, measured at the end of the load.
    pub processes: Vec<ProcessRss>,
    pub notes: Vec<String>,
}

impl Report {
    pub fn new(scenario: &str, target: &str) -> Report {
        Report {
            scenario: scenario.to_string(),
            target: target.to_string(),
            ..Report::default()
        }
    }

    /// Fills the counts, throughput and latency from the run's counters.
    pub fn with_counters(mut self, counters: &Counters, elapsed: Duration) -> Report {
        self.seconds = elapsed.as_secs_f64();
        self.ok = counters.ok();
        self.errors = counters.errors();
        self.operations = self.ok + self.errors;
        self.error_kinds = counters.error_kinds();
        self.throughput_per_sec = self.ok as f64 / self.seconds.max(1e-9);
        self.latency_ms = summarize(counters.latencies());
        self
    }

    pub fn with_events(mut self, tally: EventTally, latencies: Vec<Duration>) -> Report {
        self.events = Some(tally);
        self.event_latency_ms = Some(summarize(latencies));
        self
    }

    pub fn note(&mut self, note: impl Into<String>) {
        self.notes.push(note.into());
    }

    pub fn render_text(&self) -> String {
        let lat = |l: &LatencySummary| {
            format!(
                "p50 {:.2}  p99 {:.2}  p999 {:.2}  max {:.2} (n={})",
                l.p50, l.p99, l.p999, l.max, l.samples
            )
        };
        let mut out = format!("{}: target {}\n", self.scenario, self.target);
        let kinds: Vec<String> = self
            .error_kinds
            .iter()
            .map(|(k, n)| format!("{k}: {n}"))
            .collect();
        out += &format!(
            "  throughput: {} ok of {} in {:.2} s = {:.1}/s; errors {}{}\n",
            self.ok,
            self.operations,
            self.seconds,
            self.throughput_per_sec,
            self.errors,
            if kinds.is_empty() {
                String::new()
            } else {
                format!(" ({})", kinds.join(", "))
            }
        );
        out += &format!("  latency ms: {}\n", lat(&self.latency_ms));
        if let Some(e) = &self.events {
            out += &format!(
                "  events: expected {}, delivered {}, lost {}, duplicated {}, re-emitted {}, bad signatures {}, missing idempotency keys {}\n",
                e.expected,
                e.delivered,
                e.lost,
                e.duplicated,
                e.reemitted,
                e.bad_signatures,
                e.missing_keys
            );
        }
        if let Some(l) = &self.event_latency_ms {
            out += &format!("  event-to-delivery ms: {}\n", lat(l));
        }
        if self.processes.is_empty() {
            out += "  RSS: no process started by this run\n";
        }
        for p in &self.processes {
            out += &format!(
                "  RSS: {} pid {}: {:.1} MiB (peak {:.1} MiB)\n",
                p.process, p.pid, p.rss_mib, p.peak_rss_mib
            );
        }
        for n in &self.notes {
            out += &format!("  note: {n}\n");
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::body::Bytes;
    use hmac::{Hmac, KeyInit, Mac};
    use serde_json::json;
    use sha2::Sha256;

    fn signed(secret: &str, body: &[u8]) -> String {
        let mut mac = Hmac::<Sha256>::new_from_slice(secret.as_bytes()).expect("any key length");
        mac.update(body);
        format!("sha256={}", hex::encode(mac.finalize().into_bytes()))
    }

    fn delivery(secret: &str, key: &str, tag: &str) -> Delivery {
        let body =
            json!({ "event": "message.received", "idempotencyKey": key, "data": { "body": tag } })
                .to_string();
        let headers = [(
            "x-wagate-signature".to_string(),
            signed(secret, body.as_bytes()),
        )]
        .into_iter()
        .collect();
        Delivery {
            headers,
            body: Bytes::from(body),
            at: Instant::now(),
        }
    }

    #[test]
    fn percentiles_use_the_nearest_rank() {
        let samples: Vec<Duration> = (1..=1000).map(Duration::from_millis).collect();
        let s = summarize(samples);
        assert_eq!((s.p50, s.p99, s.p999, s.max), (500.0, 990.0, 999.0, 1000.0));
        assert_eq!(summarize(Vec::new()), LatencySummary::default());
        let one = summarize(vec![Duration::from_millis(7)]);
        assert_eq!((one.p50, one.p999, one.samples), (7.0, 7.0, 1));
    }

    #[test]
    fn tally_counts_lost_duplicated_reemitted_and_bad_signatures() {
        let t0 = Instant::now();
        let expected: HashMap<String, Instant> = ["a", "b", "c", "d"]
            .iter()
            .map(|t| (t.to_string(), t0))
            .collect();
        let mut forged = delivery("another-secret-000", "k-c", "c");
        forged.at = Instant::now();
        let deliveries = vec![
            delivery("secret-0123456789", "k-a", "a"),
            delivery("secret-0123456789", "k-a", "a"),
            delivery("secret-0123456789", "k-b", "b"),
            delivery("secret-0123456789", "k-b2", "b"),
            forged,
            delivery("secret-0123456789", "k-x", "not-expected"),
        ];
        let (t, latencies) = tally(&expected, &deliveries, "secret-0123456789");
        assert_eq!(
            t,
            EventTally {
                expected: 4,
                delivered: 3,
                lost: 1,
                duplicated: 1,
                reemitted: 1,
                bad_signatures: 1,
                missing_keys: 0,
            }
        );
        assert_eq!(latencies.len(), 3);
    }

    #[test]
    fn counters_sort_failures_by_kind() {
        let c = Counters::new();
        c.record(&Ok(200), &[200], Duration::from_millis(1));
        c.record(&Ok(503), &[200], Duration::from_millis(1));
        c.record(&Ok(503), &[200], Duration::from_millis(1));
        c.record(&Err(anyhow::anyhow!("refused")), &[200], Duration::ZERO);
        assert_eq!((c.ok(), c.errors()), (1, 3));
        let kinds = c.error_kinds();
        assert_eq!(
            (kinds.get("HTTP 503"), kinds.get("transport")),
            (Some(&2), Some(&1))
        );
        let report = Report::new("t", "x").with_counters(&c, Duration::from_secs(1));
        assert_eq!((report.operations, report.throughput_per_sec), (4, 1.0));
        assert!(report.render_text().contains("HTTP 503: 2"));
    }

    #[test]
    fn phones_and_urls_are_checked() {
        let tag = "0badcafe";
        assert_eq!(phone(tag, 3).len(), 13);
        assert_ne!(phone(tag, 3), phone(tag, 4));
        assert!(parse_base_url("http://127.0.0.1:2785/").is_ok_and(|u| !u.ends_with('/')));
        assert!(parse_base_url("127.0.0.1:2785").is_err());
        assert!(parse_base_url("ftp://x").is_err());
        assert_eq!(
            parse_env_pair("A=b=c"),
            Ok(("A".to_string(), "b=c".to_string()))
        );
        assert!(parse_env_pair("=x").is_err() && parse_env_pair("AB").is_err());
    }

    /// The built-in receiver records real HTTP deliveries; the tally verifies each signature on the exact
    /// bytes received.
    #[tokio::test]
    async fn receiver_deliveries_are_verified_and_counted_by_key() {
        let receiver = wagate_loadtest::harness::Receiver::start()
            .await
            .expect("receiver binds loopback");
        let _ = rustls::crypto::ring::default_provider().install_default();
        let http = reqwest::Client::builder()
            .no_proxy()
            .build()
            .expect("client");
        let secret = "receiver-secret-0001";
        let post = |key: &str, tag: &str, sign_with: &str| {
            let body = json!({ "idempotencyKey": key, "data": { "body": tag } }).to_string();
            http.post(receiver.url())
                .header("X-Wagate-Signature", signed(sign_with, body.as_bytes()))
                .body(body)
                .send()
        };
        for (key, tag, with) in [
            ("k1", "m1", secret),
            ("k1", "m1", secret),
            ("k2", "m2", "wrong-secret-00000"),
        ] {
            let reply = post(key, tag, with).await.expect("receiver answers");
            assert_eq!(reply.status(), 200);
        }
        let deliveries = receiver.wait_count(3, Duration::from_secs(5)).await;
        let expected = ["m1", "m2", "m3"]
            .iter()
            .map(|t| (t.to_string(), Instant::now()))
            .collect();
        let (t, _) = tally(&expected, &deliveries, secret);
        assert_eq!(
            (t.delivered, t.lost, t.duplicated, t.bad_signatures),
            (2, 1, 1, 1)
        );
        receiver.stop();
    }
}
