//! `reads`: what dashboards and bots poll, each route measured alone with `wrk` against a bare axum route
//! with the same header check (`wagate-bare-route`, started by this run), so every figure is a share of
//! what the machine can serve at all. Routes: health with a key, one session, the session list (100
//! sessions), a 50-message page of 50 stored messages and the chat list, each with a viewer key and with a
//! session-scoped key. With `--forward`, also a two-node cluster (PostgreSQL + Redis on loopback): a session
//! read through its owner and through the other node, whose difference is the forward's cost.
//!
//! The load generator is `wrk` (Debian package `wrk`) by default: this tool's own reqwest loops
//! (`--generator builtin`, used by the smoke test) cost more CPU per request than the node on the same two
//! cores and top out well below the bare route, which would hide the gateway's share.

use std::path::PathBuf;
use std::process::Stdio;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::json;
use wagate_loadtest::harness::cluster::{TestCluster, Timings};
use wagate_loadtest::harness::sessions::{create, create_linked};
use wagate_loadtest::harness::{Client, free_port};

use super::common::{
    Counters, Progress, Report, Target, TargetArgs, measure_rss, percentile, phone, run_tag,
    sibling_binary,
};

/// What sends the requests.
#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum Generator {
    /// `wrk` (apt package wrk): the figures for docs/architecture.md
    Wrk,
    /// This tool's reqwest loops (no external tool; slower than the node, so shares are understated)
    Builtin,
}

#[derive(clap::Args, Debug, Clone)]
pub struct ReadsArgs {
    #[command(flatten)]
    pub target: TargetArgs,
    /// How long each route is loaded, in seconds
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u64).range(1..))]
    pub seconds: u64,
    /// Open connections (wrk -c)
    #[arg(long, default_value_t = 64, value_parser = clap::value_parser!(u64).range(1..=4096))]
    pub connections: u64,
    /// Load-generator threads (wrk -t)
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u64).range(1..=64))]
    pub threads: u64,
    /// Sessions the list holds (one linked on the sim network, the others created only)
    #[arg(long, default_value_t = 100, value_parser = clap::value_parser!(u64).range(1..=1000))]
    pub sessions: u64,
    /// Inbound messages stored in the linked session before the reads (the page asks for 50)
    #[arg(long, alias = "seed-messages", default_value_t = 50, value_parser = clap::value_parser!(u64).range(0..=10_000))]
    pub messages: u64,
    /// The load generator
    #[arg(long, value_enum, default_value_t = Generator::Wrk)]
    pub generator: Generator,
    /// The `wrk` executable
    #[arg(long, default_value = "wrk", value_name = "PATH")]
    pub wrk: PathBuf,
    /// The bare route binary [default: `wagate-bare-route` beside this executable]
    #[arg(long, value_name = "PATH")]
    pub bare_binary: Option<PathBuf>,
    /// Only routes whose label contains this text (the bare route always runs)
    #[arg(long, value_name = "TEXT")]
    pub only: Option<String>,
    /// Also measure the forward to the owner on a two-node cluster it starts (PostgreSQL + Redis on loopback)
    #[arg(long)]
    pub forward: bool,
}

/// One `wrk` run's figures.
#[derive(Debug, Clone, Copy, Default)]
struct Figures {
    rps: f64,
    p50_ms: f64,
    p99_ms: f64,
    requests: u64,
    non_2xx: u64,
}

/// A route to load: its label, path and key.
struct Probe {
    label: String,
    path: String,
    key: String,
}

pub async fn run(args: ReadsArgs) -> anyhow::Result<Report> {
    // The node's default log level: the access log line is part of what a read costs.
    // Limits far above what one run sends: a run that reached them would measure 429s, not reads.
    let env = [
        ("LOG_LEVEL", "info"),
        ("RATE_LIMIT_SHORT_LIMIT", "1000000000"),
        ("RATE_LIMIT_MEDIUM_LIMIT", "1000000000"),
        ("RATE_LIMIT_LONG_LIMIT", "1000000000"),
    ];
    let target = Target::connect(&args.target, &env).await?;
    let tag = run_tag();
    let admin = &target.client;
    let linked = create_linked(admin, &format!("lt-{tag}-r0"), &phone(&tag, 0)).await?;
    let mut created = vec![linked.clone()];
    for n in 1..args.sessions as usize {
        created.push(create(admin, &format!("lt-{tag}-r{n}")).await?);
    }
    for m in 0..args.messages {
        let from = format!("{}@c.us", phone(&tag, 50_000 + (m as usize % 5)));
        let body = json!({ "from": from, "type": "text", "body": format!("seed-{m}") });
        let reply = admin
            .post(&format!("/api/sim/sessions/{linked}/inbound"), body)
            .await?;
        anyhow::ensure!(
            reply.status == 200,
            "seeding inbound messages: {} {}",
            reply.status,
            reply.text
        );
    }
    let (viewer_id, viewer) = new_key(admin, &format!("lt-{tag}-viewer"), None).await?;
    let (scoped_id, scoped) = new_key(admin, &format!("lt-{tag}-scoped"), Some(&linked)).await?;
    let seeded = wait_page(admin, &linked, args.messages.min(50) as usize).await?;

    let mut probes = vec![Probe {
        label: "GET /api/health (viewer key)".into(),
        path: "/api/health".into(),
        key: viewer.clone(),
    }];
    for (kind, key) in [("viewer", &viewer), ("scoped", &scoped)] {
        for (what, path) in [
            ("GET /api/sessions/{id}", format!("/api/sessions/{linked}")),
            (
                "GET /api/sessions?limit=100",
                "/api/sessions?limit=100".into(),
            ),
            (
                "GET /api/sessions/{id}/messages?limit=50",
                format!("/api/sessions/{linked}/messages?limit=50"),
            ),
            (
                "GET /api/sessions/{id}/chats?limit=50",
                format!("/api/sessions/{linked}/chats?limit=50"),
            ),
        ] {
            probes.push(Probe {
                label: format!("{what} ({kind} key)"),
                path,
                key: key.clone(),
            });
        }
    }
    if let Some(only) = &args.only {
        probes.retain(|p| p.label.contains(only.as_str()));
    }
    for probe in &probes {
        let reply = admin.with_key(&probe.key).get(&probe.path).await?;
        anyhow::ensure!(
            reply.status == 200,
            "{}: {} {}",
            probe.label,
            reply.status,
            reply.text
        );
    }

    let bare_port = free_port();
    let bare_binary = args
        .bare_binary
        .clone()
        .unwrap_or_else(|| sibling_binary("wagate-bare-route"));
    let mut bare = tokio::process::Command::new(&bare_binary)
        .args(["--port", &bare_port.to_string()])
        .env("BARE_ROUTE_KEY", &viewer)
        .stdout(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| anyhow::anyhow!("starting {}: {e}", bare_binary.display()))?;
    let bare_url = format!("http://127.0.0.1:{bare_port}/bare");
    wait_answers(&bare_url, &viewer).await?;

    let counters = Counters::new();
    let progress = Progress::start("reads", counters.clone());
    let begun = Instant::now();
    let load = Load {
        args: &args,
        counters: &counters,
    };
    let mut rows: Vec<(String, Figures)> = Vec::new();
    let bare_before = load.run(&bare_url, &viewer).await?;
    rows.push((
        "bare axum route with a header check (before)".into(),
        bare_before,
    ));
    for probe in &probes {
        let url = format!("{}{}", target.base_url, probe.path);
        rows.push((probe.label.clone(), load.run(&url, &probe.key).await?));
    }
    let bare_after = load.run(&bare_url, &viewer).await?;
    rows.push((
        "bare axum route with a header check (after)".into(),
        bare_after,
    ));
    let elapsed = begun.elapsed();
    drop(progress);
    let _ = bare.kill().await;

    let mut report = Report::new("reads", &target.label);
    if args.generator == Generator::Builtin {
        report = report.with_counters(&counters, elapsed);
    }
    report.processes = measure_rss(&target.started_processes());
    let bare_rps = (bare_before.rps + bare_after.rps) / 2.0;
    let generator = match args.generator {
        Generator::Wrk => format!("wrk -t{} -c{}", args.threads, args.connections),
        Generator::Builtin => format!("builtin reqwest loops x{}", args.connections),
    };
    report.note(format!(
        "{generator}, {}s per route, one after another; share = req/s over the mean of the two bare runs ({bare_rps:.0} req/s)",
        args.seconds
    ));
    report.note(format!(
        "{} sessions, {} stored messages in the linked one (page holds {seeded}), node LOG_LEVEL=info",
        created.len(),
        args.messages
    ));
    let mut table =
        String::from("| Route | req/s | p50 ms | p99 ms | share of bare |\n|---|---|---|---|---|");
    for (label, f) in &rows {
        table += &format!(
            "\n| {label} | {:.0} | {:.2} | {:.2} | {:.0}%{} |",
            f.rps,
            f.p50_ms,
            f.p99_ms,
            100.0 * f.rps / bare_rps.max(1e-9),
            if f.non_2xx > 0 {
                format!(" ({} non-2xx)", f.non_2xx)
            } else {
                String::new()
            }
        );
        if args.generator == Generator::Wrk {
            report.operations += f.requests;
            report.errors += f.non_2xx;
        }
    }
    if args.generator == Generator::Wrk {
        report.ok = report.operations.saturating_sub(report.errors);
        report.seconds = elapsed.as_secs_f64();
        report.throughput_per_sec = report.ok as f64 / report.seconds.max(1e-9);
    }
    report.note(format!("\n{table}"));

    if args.forward {
        report.note(forward_cost(&args, &tag).await?);
    }
    if !target.is_started() {
        for id in &created {
            let _ = admin.delete(&format!("/api/sessions/{id}")).await;
        }
        for id in [&viewer_id, &scoped_id] {
            let _ = admin.delete(&format!("/api/auth/api-keys/{id}")).await;
        }
    }
    Ok(report)
}

/// Loads one URL for `--seconds` with the chosen generator.
struct Load<'a> {
    args: &'a ReadsArgs,
    counters: &'a Arc<Counters>,
}

impl Load<'_> {
    async fn run(&self, url: &str, key: &str) -> anyhow::Result<Figures> {
        match self.args.generator {
            Generator::Wrk => wrk(self.args, url, key).await,
            Generator::Builtin => builtin(self.args, self.counters, url, key).await,
        }
    }
}

/// `--connections` loops, each waiting for its reply before the next request.
async fn builtin(
    args: &ReadsArgs,
    counters: &Arc<Counters>,
    url: &str,
    key: &str,
) -> anyhow::Result<Figures> {
    let http = reqwest::Client::builder().no_proxy().build()?;
    let begun = Instant::now();
    let deadline = begun + Duration::from_secs(args.seconds);
    let mut loops = Vec::new();
    for _ in 0..args.connections {
        let (http, url, key, counters) = (
            http.clone(),
            url.to_string(),
            key.to_string(),
            counters.clone(),
        );
        loops.push(tokio::spawn(async move {
            let (mut took, mut failed) = (Vec::new(), 0u64);
            while Instant::now() < deadline {
                let started = Instant::now();
                let reply = http.get(&url).header("x-api-key", &key).send().await;
                let status = match reply {
                    Ok(r) => {
                        let status = r.status().as_u16();
                        let _ = r.bytes().await;
                        Ok(status)
                    }
                    Err(e) => Err(anyhow::Error::from(e)),
                };
                let elapsed = started.elapsed();
                if matches!(status, Ok(s) if (200..300).contains(&s)) {
                    took.push(elapsed);
                } else {
                    failed += 1;
                }
                counters.record(&status, &[200], elapsed);
            }
            (took, failed)
        }));
    }
    let mut took = Vec::new();
    let mut non_2xx = 0;
    for l in loops {
        let (t, f) = l.await?;
        took.extend(t);
        non_2xx += f;
    }
    let seconds = begun.elapsed().as_secs_f64();
    took.sort();
    Ok(Figures {
        rps: took.len() as f64 / seconds.max(1e-9),
        p50_ms: percentile(&took, 0.50).as_secs_f64() * 1000.0,
        p99_ms: percentile(&took, 0.99).as_secs_f64() * 1000.0,
        requests: took.len() as u64 + non_2xx,
        non_2xx,
    })
}

/// A viewer key, restricted to `session` when given; returns its id and plaintext.
async fn new_key(
    admin: &Client,
    name: &str,
    session: Option<&str>,
) -> anyhow::Result<(String, String)> {
    let body =
        json!({ "name": name, "role": "viewer", "allowedSessions": session.map(|s| vec![s]) });
    let reply = admin.post("/api/auth/api-keys", body).await?;
    anyhow::ensure!(
        reply.status == 201,
        "creating key {name}: {} {}",
        reply.status,
        reply.text
    );
    Ok((reply.str("id"), reply.str("apiKey")))
}

/// Waits until the message page holds `want` messages (inbound messages are stored by the engine's event
/// path, a moment after the sim accepted them); returns how many it holds.
async fn wait_page(admin: &Client, session: &str, want: usize) -> anyhow::Result<usize> {
    let path = format!("/api/sessions/{session}/messages?limit=50");
    for _ in 0..200 {
        let reply = admin.get(&path).await?;
        let held = page_len(&reply.body);
        if held >= want {
            return Ok(held);
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let reply = admin.get(&path).await?;
    Ok(page_len(&reply.body))
}

/// The number of messages in a page body (an array, or an object with an array under `messages`/`data`).
fn page_len(body: &serde_json::Value) -> usize {
    body.as_array()
        .or_else(|| body.get("messages").and_then(|m| m.as_array()))
        .or_else(|| body.get("data").and_then(|m| m.as_array()))
        .map_or(0, Vec::len)
}

async fn wait_answers(url: &str, key: &str) -> anyhow::Result<()> {
    let http = reqwest::Client::builder().no_proxy().build()?;
    for _ in 0..100 {
        if let Ok(r) = http.get(url).header("x-api-key", key).send().await
            && r.status().is_success()
        {
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    anyhow::bail!("the bare route at {url} did not answer")
}

async fn wrk(args: &ReadsArgs, url: &str, key: &str) -> anyhow::Result<Figures> {
    let out = tokio::process::Command::new(&args.wrk)
        .arg(format!("-t{}", args.threads))
        .arg(format!("-c{}", args.connections))
        .arg(format!("-d{}s", args.seconds))
        .arg("--latency")
        .args(["-H", &format!("X-API-Key: {key}")])
        .arg(url)
        .output()
        .await
        .map_err(|e| anyhow::anyhow!("running {} (apt package wrk): {e}", args.wrk.display()))?;
    let text = String::from_utf8_lossy(&out.stdout);
    anyhow::ensure!(
        out.status.success(),
        "wrk failed: {text} {}",
        String::from_utf8_lossy(&out.stderr)
    );
    parse_wrk(&text).ok_or_else(|| anyhow::anyhow!("unreadable wrk output: {text}"))
}

/// Reads `Requests/sec`, the 50% and 99% latency lines, the request count and the non-2xx count.
fn parse_wrk(text: &str) -> Option<Figures> {
    let mut f = Figures::default();
    for line in text.lines().map(str::trim) {
        let words: Vec<&str> = line.split_whitespace().collect();
        match words.as_slice() {
            ["Requests/sec:", rps] => f.rps = rps.parse().ok()?,
            ["50%", v] => f.p50_ms = duration_ms(v)?,
            ["99%", v] => f.p99_ms = duration_ms(v)?,
            ["Non-2xx", "or", "3xx", "responses:", n] => f.non_2xx = n.parse().ok()?,
            [n, "requests", "in", ..] => f.requests = n.parse().ok()?,
            _ => {}
        }
    }
    (f.rps > 0.0).then_some(f)
}

/// `635.91us`, `1.20ms`, `2.00s` in milliseconds.
fn duration_ms(v: &str) -> Option<f64> {
    if let Some(n) = v.strip_suffix("us") {
        n.parse::<f64>().ok().map(|n| n / 1000.0)
    } else if let Some(n) = v.strip_suffix("ms") {
        n.parse().ok()
    } else if let Some(n) = v.strip_suffix("m") {
        n.parse::<f64>().ok().map(|n| n * 60_000.0)
    } else {
        v.strip_suffix('s')?.parse::<f64>().ok().map(|n| n * 1000.0)
    }
}

/// A session read on a two-node cluster, through its owner and through the other node; the p50 difference
/// is what the forward adds.
async fn forward_cost(args: &ReadsArgs, tag: &str) -> anyhow::Result<String> {
    let binary = args
        .target
        .binary
        .clone()
        .unwrap_or_else(|| sibling_binary("wagate"));
    let cluster = TestCluster::start(&binary.display().to_string(), 2, Timings::default()).await?;
    let owner = cluster.client(0);
    let id = create_linked(&owner, &format!("lt-{tag}-fwd"), &phone(tag, 900)).await?;
    // The master key: the test cluster runs without a replicated main DB, so a key created through one
    // node is unknown to the other, which checks it before it forwards.
    let key = wagate_loadtest::harness::ADMIN_KEY.to_string();
    let through = cluster.client(1).with_key(&key);
    let reply = through.get(&format!("/api/sessions/{id}")).await?;
    anyhow::ensure!(
        reply.status == 200 && reply.header("x-wagate-served-by") == Some(cluster.ids[0].as_str()),
        "the read through the other node was not served by the owner: {} {:?}",
        reply.status,
        reply.header("x-wagate-served-by")
    );
    let path = format!("/api/sessions/{id}");
    let owner_url = format!("{}{path}", cluster.nodes[0].base_url());
    let through_url = format!("{}{path}", cluster.nodes[1].base_url());
    let counters = Counters::new();
    let loaded = Load {
        args,
        counters: &counters,
    };
    // One connection as well: at `--connections` on a saturated machine p50 follows throughput, and the
    // forwarded read costs both nodes' CPU; one request at a time shows the forward's own latency.
    let single_args = ReadsArgs {
        connections: 1,
        threads: 1,
        ..args.clone()
    };
    let single = Load {
        args: &single_args,
        counters: &counters,
    };
    let local = loaded.run(&owner_url, &key).await?;
    let forwarded = loaded.run(&through_url, &key).await?;
    let local_one = single.run(&owner_url, &key).await?;
    let forwarded_one = single.run(&through_url, &key).await?;
    Ok(format!(
        "forward (2-node cluster, PostgreSQL + Redis): GET /api/sessions/{{id}} at its owner {:.0} req/s p50 {:.2} ms p99 {:.2} ms; \
         through the other node {:.0} req/s p50 {:.2} ms p99 {:.2} ms; the forward adds {:.2} ms p50. \
         One connection: at its owner p50 {:.3} ms, through the other node p50 {:.3} ms; the forward adds {:.3} ms p50",
        local.rps,
        local.p50_ms,
        local.p99_ms,
        forwarded.rps,
        forwarded.p50_ms,
        forwarded.p99_ms,
        forwarded.p50_ms - local.p50_ms,
        local_one.p50_ms,
        forwarded_one.p50_ms,
        forwarded_one.p50_ms - local_one.p50_ms
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wrk_output_is_read() {
        let text = "Running 10s test @ http://127.0.0.1:1/bare\n  2 threads and 64 connections\n  \
            Latency Distribution\n     50%  635.91us\n     75%    1.00ms\n     99%    4.20ms\n  \
            630000 requests in 10.00s, 80.00MB read\n  Non-2xx or 3xx responses: 3\n\
            Requests/sec:  63000.50\nTransfer/sec:      8.00MB\n";
        let f = parse_wrk(text).unwrap();
        assert_eq!(f.requests, 630_000);
        assert_eq!(f.non_2xx, 3);
        assert!((f.rps - 63000.5).abs() < 1e-6);
        assert!((f.p50_ms - 0.63591).abs() < 1e-9);
        assert!((f.p99_ms - 4.2).abs() < 1e-9);
        assert_eq!(duration_ms("2.00s"), Some(2000.0));
    }
}
