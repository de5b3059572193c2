//! The scenarios and their command line: one clap subcommand per scenario, each with its own `Args`
//! struct beside its code (every flag documented with its default and unit).
//!
//! Wiring a new scenario:
//! 1. In `scenarios/<name>.rs`, define `#[derive(clap::Args)] pub struct <Name>Args` (embed
//!    `#[command(flatten)] target: common::TargetArgs` to run against `--url` or a node it starts) and
//!    `pub async fn run(args: <Name>Args) -> anyhow::Result<common::Report>`, filling the report from a
//!    `common::Counters` (and `common::tally` for webhook events, `common::measure_rss` for the processes
//!    it started).
//! 2. Here: `mod <name>;`, a variant `<Name>(<name>::<Name>Args)` with a doc comment (the help line), and
//!    one arm in `Scenario::run`.
//!
//! A scenario still written as `fn run(args: &[String]) -> anyhow::Result<()>` (printing its own figures)
//! plugs in through a typed `Args` struct whose `argv()` rebuilds the flags, as `sessions`,
//! `socket-sessions` and `cluster` do below; clap still rejects unknown flags and bad values first.

mod browser_sessions;
mod bulk;
mod chaos;
mod cluster;
pub mod common;
mod data_admin;
mod events;
mod limiter;
mod media_storage;
mod node_kill;
mod raft;
mod reads;
mod sessions;
mod socket_sessions;
mod telemetry;

use std::path::PathBuf;
use std::time::Instant;

use common::{Report, sibling_binary};

/// The value after `name` in the arguments, or `default` (for scenarios that take raw arguments; the clap
/// layer has already checked them).
pub(crate) fn arg(args: &[String], name: &str, default: &str) -> String {
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .cloned()
        .unwrap_or_else(|| default.to_string())
}

#[derive(clap::Subcommand, Debug)]
pub enum Scenario {
    /// Authenticated REST read mix (session, session list, chats, messages) over sim sessions
    Reads(reads::ReadsArgs),
    /// send-text between two sim sessions: HTTP latency, recipient-stored latency, signed webhook deliveries
    Sends(events::SendsArgs),
    /// Sim inbound messages at a fixed rate, every webhook signature verified, events counted by idempotency key
    InboundStorm(events::InboundStormArgs),
    /// Bulk batches (send-bulk) from several senders to one recipient, polled to completion
    Bulk(bulk::BulkArgs),
    /// Inbound storm into a cluster it starts (PostgreSQL + Redis on loopback) with one node SIGKILLed part-way
    NodeKill(node_kill::NodeKillArgs),
    /// Session link and restart times and RSS per idle session on a node it starts (prints text)
    Sessions(LegacyCountArgs),
    /// Sessions on the socket engine against a local fake server (prints text)
    SocketSessions(SocketSessionsArgs),
    /// Browser engine footprint: launch-to-QR and PSS per session for 1 and 5 Chromium sessions against
    /// the loopback fake WhatsApp Web, after a bare-Chromium baseline (prints text)
    BrowserSessions(browser_sessions::BrowserSessionsArgs),
    /// Request mix and takeover on a 3-node cluster + worker it starts (prints text)
    Cluster(ClusterArgs),
    /// Replicated main DB on a 3-node raft cluster it starts: key checks on a follower vs embedded, key
    /// creates through a follower, audit rows replicated, leader election after kill -9 (prints text)
    Raft(RaftArgs),
    /// Inbound stream while owners are killed with SIGKILL and restarted, repeatedly: accepted, delivered,
    /// lost and duplicated events (prints text)
    Chaos(chaos::ChaosArgs),
    /// Data export and import of N messages and server-side voice-note conversions on a node it starts:
    /// time and peak RSS (prints text)
    DataAdmin(DataAdminArgs),
    /// Concurrent media sends by URL and a storage archive round trip on a node it starts, with local media
    /// and then S3 media (moto on loopback): MB/s and peak RSS per backend (prints text)
    MediaStorage(MediaStorageArgs),
    /// Reads and sends on two nodes it starts, one with telemetry off, one with metrics scraped and traces
    /// exported to a loopback OTLP receiver, in alternating phases of one run (prints text)
    Telemetry(TelemetryArgs),
    /// Authenticated reads on two one-node clusters, one counting the rate-limit tiers in Redis, one
    /// in-process, in one run: req/s, p50/p99 and the p99 the shared limiter adds (prints text)
    Limiter(LimiterArgs),
}

impl Scenario {
    pub async fn run(self) -> anyhow::Result<Report> {
        match self {
            Scenario::Reads(a) => reads::run(a).await,
            Scenario::Sends(a) => events::sends(a).await,
            Scenario::InboundStorm(a) => events::inbound_storm(a).await,
            Scenario::Bulk(a) => bulk::run(a).await,
            Scenario::NodeKill(a) => node_kill::run(a).await,
            Scenario::Sessions(a) => legacy("sessions", sessions::run(&a.argv())).await,
            Scenario::SocketSessions(a) => {
                legacy("socket-sessions", socket_sessions::run(&a.argv())).await
            }
            Scenario::BrowserSessions(a) => {
                legacy("browser-sessions", browser_sessions::run(a)).await
            }
            Scenario::Cluster(a) => legacy("cluster", cluster::run(&a.argv())).await,
            Scenario::Raft(a) => legacy("raft", raft::run(&a.argv())).await,
            Scenario::Chaos(a) => legacy("chaos", chaos::run(a)).await,
            Scenario::DataAdmin(a) => legacy("data-admin", data_admin::run(&a.argv())).await,
            Scenario::MediaStorage(a) => {
                legacy("media-storage", media_storage::run(&a.argv())).await
            }
            Scenario::Telemetry(a) => legacy("telemetry", telemetry::run(&a.argv())).await,
            Scenario::Limiter(a) => legacy("limiter", limiter::run(&a.argv())).await,
        }
    }
}

/// Runs a scenario that prints its own figures; its report carries only the wall time.
async fn legacy(
    name: &str,
    scenario: impl Future<Output = anyhow::Result<()>>,
) -> anyhow::Result<Report> {
    let begun = Instant::now();
    scenario.await?;
    let mut report = Report::new(name, "processes started by the scenario");
    report.seconds = begun.elapsed().as_secs_f64();
    report.note(
        "this scenario prints its figures as text above; the report holds its wall time only",
    );
    Ok(report)
}

fn binary_or_default(binary: &Option<PathBuf>, name: &str) -> String {
    binary
        .clone()
        .unwrap_or_else(|| sibling_binary(name))
        .display()
        .to_string()
}

#[derive(clap::Args, Debug, Clone)]
pub struct LegacyCountArgs {
    /// The `wagate` binary to start [default: `wagate` beside this executable]
    #[arg(long, value_name = "PATH")]
    pub binary: Option<PathBuf>,
    /// Sessions to create and link
    #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(u64).range(1..))]
    pub count: u64,
    /// Sessions linked or restarted at once
    #[arg(long, default_value_t = 32, value_parser = clap::value_parser!(u64).range(1..))]
    pub concurrency: u64,
}

impl LegacyCountArgs {
    fn argv(&self) -> Vec<String> {
        vec![
            "--binary".into(),
            binary_or_default(&self.binary, "wagate"),
            "--count".into(),
            self.count.to_string(),
            "--concurrency".into(),
            self.concurrency.to_string(),
        ]
    }
}

#[derive(clap::Args, Debug, Clone)]
pub struct SocketSessionsArgs {
    /// The `wagate` binary to start [default: `wagate` beside this executable]
    #[arg(long, value_name = "PATH")]
    pub binary: Option<PathBuf>,
    /// Sessions to create and link
    #[arg(long, default_value_t = 200, value_parser = clap::value_parser!(u64).range(1..))]
    pub count: u64,
    /// Sessions linked at once
    #[arg(long, default_value_t = 16, value_parser = clap::value_parser!(u64).range(1..))]
    pub concurrency: u64,
    /// Seconds to let the sessions settle before RSS is read
    #[arg(long, default_value_t = 15)]
    pub settle_secs: u64,
}

impl SocketSessionsArgs {
    fn argv(&self) -> Vec<String> {
        vec![
            "--binary".into(),
            binary_or_default(&self.binary, "wagate"),
            "--count".into(),
            self.count.to_string(),
            "--concurrency".into(),
            self.concurrency.to_string(),
            "--settle-secs".into(),
            self.settle_secs.to_string(),
        ]
    }
}

#[derive(clap::Args, Debug, Clone)]
pub struct ClusterArgs {
    /// The `wagate` binary of the nodes [default: `wagate` beside this executable]
    #[arg(long, value_name = "PATH")]
    pub binary: Option<PathBuf>,
    /// The `wagate-worker` binary [default: `wagate-worker` beside this executable]
    #[arg(long, value_name = "PATH")]
    pub worker: Option<PathBuf>,
    /// Sim sessions started round-robin through the nodes
    #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(u64).range(1..))]
    pub sessions: u64,
    /// Length of the request mix, in seconds
    #[arg(long, default_value_t = 20)]
    pub seconds: u64,
    /// Requests of the mix in flight at once
    #[arg(long, default_value_t = 16, value_parser = clap::value_parser!(u64).range(1..))]
    pub concurrency: u64,
    /// SESSION_LEASE_TTL_MS of the nodes, in milliseconds
    #[arg(long, default_value_t = 15000)]
    pub ttl_ms: u64,
    /// SESSION_LEASE_HEARTBEAT_MS of the nodes, in milliseconds
    #[arg(long, default_value_t = 5000)]
    pub heartbeat_ms: u64,
    /// SESSION_TAKEOVER_SWEEP_MS of the nodes, in milliseconds
    #[arg(long, default_value_t = 5000)]
    pub sweep_ms: u64,
    /// SESSION_RESTORE_CONCURRENCY of the nodes [default: the node's]
    #[arg(long, value_name = "N")]
    pub restore_concurrency: Option<u64>,
}

impl ClusterArgs {
    fn argv(&self) -> Vec<String> {
        let mut argv: Vec<String> = vec![
            "--binary".into(),
            binary_or_default(&self.binary, "wagate"),
            "--worker".into(),
            binary_or_default(&self.worker, "wagate-worker"),
        ];
        for (flag, value) in [
            ("--sessions", self.sessions),
            ("--seconds", self.seconds),
            ("--concurrency", self.concurrency),
            ("--ttl-ms", self.ttl_ms),
            ("--heartbeat-ms", self.heartbeat_ms),
            ("--sweep-ms", self.sweep_ms),
        ] {
            argv.extend([flag.to_string(), value.to_string()]);
        }
        if let Some(n) = self.restore_concurrency {
            argv.extend(["--restore-concurrency".into(), n.to_string()]);
        }
        argv
    }
}

#[derive(clap::Args, Debug, Clone)]
pub struct RaftArgs {
    /// The `wagate` binary of the nodes [default: `wagate` beside this executable]
    #[arg(long, value_name = "PATH")]
    pub binary: Option<PathBuf>,
    /// Key checks timed on a follower and on an embedded node
    #[arg(long, default_value_t = 2000, value_parser = clap::value_parser!(u64).range(1..))]
    pub checks: u64,
    /// Keys created through a follower
    #[arg(long, default_value_t = 200, value_parser = clap::value_parser!(u64).range(1..))]
    pub creates: u64,
    /// Key creates in flight at once
    #[arg(long, default_value_t = 8, value_parser = clap::value_parser!(u64).range(1..))]
    pub concurrency: u64,
    /// Rounds of kill -9 of the leader (during key writes), each timed until a new leader
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u64).range(1..))]
    pub kills: u64,
}

impl RaftArgs {
    fn argv(&self) -> Vec<String> {
        vec![
            "--binary".into(),
            binary_or_default(&self.binary, "wagate"),
            "--checks".into(),
            self.checks.to_string(),
            "--creates".into(),
            self.creates.to_string(),
            "--concurrency".into(),
            self.concurrency.to_string(),
            "--kills".into(),
            self.kills.to_string(),
        ]
    }
}

#[derive(clap::Args, Debug, Clone)]
pub struct DataAdminArgs {
    /// The `wagate` binary to start [default: `wagate` beside this executable]
    #[arg(long, value_name = "PATH")]
    pub binary: Option<PathBuf>,
    /// Messages stored before the export and import are timed
    #[arg(long, default_value_t = 100_000, value_parser = clap::value_parser!(u64).range(1..))]
    pub messages: u64,
    /// 30-second voice notes converted
    #[arg(long, default_value_t = 8, value_parser = clap::value_parser!(u64).range(1..))]
    pub conversions: u64,
}

impl DataAdminArgs {
    fn argv(&self) -> Vec<String> {
        vec![
            "--binary".into(),
            binary_or_default(&self.binary, "wagate"),
            "--messages".into(),
            self.messages.to_string(),
            "--conversions".into(),
            self.conversions.to_string(),
        ]
    }
}

#[derive(clap::Args, Debug, Clone)]
pub struct MediaStorageArgs {
    /// The `wagate` binary to start [default: `wagate` beside this executable]
    #[arg(long, value_name = "PATH")]
    pub binary: Option<PathBuf>,
    /// Documents sent at once, per backend
    #[arg(long, default_value_t = 20, value_parser = clap::value_parser!(u64).range(1..))]
    pub files: u64,
    /// Size of each document, in MiB
    #[arg(long, default_value_t = 20, value_parser = clap::value_parser!(u64).range(1..=512))]
    pub megabytes: u64,
    /// An `s3s-fs` binary (`cargo install s3s-fs --features binary`) to serve S3 instead of moto
    #[arg(long, value_name = "PATH")]
    pub s3_server: Option<PathBuf>,
}

impl MediaStorageArgs {
    fn argv(&self) -> Vec<String> {
        let mut argv = vec![
            "--binary".into(),
            binary_or_default(&self.binary, "wagate"),
            "--files".into(),
            self.files.to_string(),
            "--megabytes".into(),
            self.megabytes.to_string(),
        ];
        if let Some(server) = &self.s3_server {
            argv.extend(["--s3-server".into(), server.display().to_string()]);
        }
        argv
    }
}

#[derive(clap::Args, Debug, Clone)]
pub struct TelemetryArgs {
    /// The `wagate` binary to start [default: `wagate` beside this executable]
    #[arg(long, value_name = "PATH")]
    pub binary: Option<PathBuf>,
    /// Length of each read phase, in seconds
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u64).range(1..))]
    pub seconds: u64,
    /// Concurrent read connections
    #[arg(long, default_value_t = 32, value_parser = clap::value_parser!(u64).range(1..))]
    pub connections: u64,
    /// Sends per phase
    #[arg(long, default_value_t = 3000, value_parser = clap::value_parser!(u64).range(1..))]
    pub count: u64,
    /// Sends in flight at once
    #[arg(long, default_value_t = 32, value_parser = clap::value_parser!(u64).range(1..))]
    pub concurrency: u64,
    /// Pairs of phases (off then on, then on then off, ...)
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u64).range(1..))]
    pub rounds: u64,
    /// Share of traces the node with telemetry on samples (OpenTelemetry's `OTEL_TRACES_SAMPLER=
    /// parentbased_traceidratio` with this `OTEL_TRACES_SAMPLER_ARG`); 1 keeps the SDK's default, every trace
    #[arg(long, default_value_t = 1.0, value_parser = ratio)]
    pub trace_ratio: f64,
}

fn ratio(text: &str) -> Result<f64, String> {
    match text.parse::<f64>() {
        Ok(r) if (0.0..=1.0).contains(&r) => Ok(r),
        _ => Err(format!("{text:?} is not a ratio between 0 and 1")),
    }
}

impl TelemetryArgs {
    fn argv(&self) -> Vec<String> {
        vec![
            "--binary".into(),
            binary_or_default(&self.binary, "wagate"),
            "--seconds".into(),
            self.seconds.to_string(),
            "--connections".into(),
            self.connections.to_string(),
            "--count".into(),
            self.count.to_string(),
            "--concurrency".into(),
            self.concurrency.to_string(),
            "--rounds".into(),
            self.rounds.to_string(),
            "--trace-ratio".into(),
            self.trace_ratio.to_string(),
        ]
    }
}

#[derive(clap::Args, Debug, Clone)]
pub struct LimiterArgs {
    /// The `wagate` binary to start [default: `wagate` beside this executable]
    #[arg(long, value_name = "PATH")]
    pub binary: Option<PathBuf>,
    /// Length of each phase, in seconds
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u64).range(1..))]
    pub seconds: u64,
    /// Concurrent connections
    #[arg(long, default_value_t = 8, value_parser = clap::value_parser!(u64).range(1..))]
    pub connections: u64,
    /// The authenticated route read
    #[arg(long, default_value = "/api/auth/api-keys")]
    pub path: String,
    /// Pairs of phases (off then on, then on then off, ...)
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u64).range(1..))]
    pub rounds: u64,
}

impl LimiterArgs {
    fn argv(&self) -> Vec<String> {
        vec![
            "--binary".into(),
            binary_or_default(&self.binary, "wagate"),
            "--seconds".into(),
            self.seconds.to_string(),
            "--connections".into(),
            self.connections.to_string(),
            "--path".into(),
            self.path.clone(),
            "--rounds".into(),
            self.rounds.to_string(),
        ]
    }
}
