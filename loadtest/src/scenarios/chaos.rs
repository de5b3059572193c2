//! `chaos`: the kill loop of issue 30 (`harness::chaos`). Cluster (default): 3 `ROLE=api` nodes and a
//! `wagate-worker` on a throwaway PostgreSQL database and Redis, a steady inbound stream over N sessions, an
//! owner killed with SIGKILL at a random moment and restarted, K times. Embedded: one node killed mid-stream
//! and restarted on its data directory, K times. Prints accepted, delivered, lost and duplicated.

use std::path::PathBuf;

use wagate_loadtest::harness::chaos::{self, ChaosOptions};

use super::binary_or_default;
use super::common::sibling_binary;

/// Where the kill loop runs.
#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChaosMode {
    /// 3 `ROLE=api` nodes and a worker on PostgreSQL and Redis; an owner is killed each round
    Cluster,
    /// One node on SQLite, killed and restarted on its data directory each round
    Embedded,
}

#[derive(clap::Args, Debug, Clone)]
pub struct ChaosArgs {
    /// Cluster or embedded
    #[arg(long, value_enum, default_value_t = ChaosMode::Cluster)]
    pub mode: ChaosMode,
    /// The `wagate` binary to start [default: `wagate` beside this executable]
    #[arg(long, value_name = "PATH")]
    pub binary: Option<PathBuf>,
    /// The `wagate-worker` binary (cluster mode) [default: `wagate-worker` beside this executable]
    #[arg(long, value_name = "PATH")]
    pub worker: Option<PathBuf>,
    /// Sim sessions the inbound stream is spread over
    #[arg(long, default_value_t = 20, value_parser = clap::value_parser!(u64).range(1..))]
    pub sessions: u64,
    /// Inbound messages per second [default: 200 in a cluster, 1000 embedded]
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    pub rate: Option<u64>,
    /// Kill rounds
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u64).range(1..))]
    pub kills: u64,
}

pub async fn run(args: ChaosArgs) -> anyhow::Result<()> {
    let mode = args.mode;
    let default_rate = if mode == ChaosMode::Embedded {
        1000
    } else {
        200
    };
    let options = ChaosOptions {
        binary: PathBuf::from(binary_or_default(&args.binary, "wagate")),
        worker: Some(
            args.worker
                .clone()
                .unwrap_or_else(|| sibling_binary("wagate-worker")),
        ),
        sessions: usize::try_from(args.sessions)?,
        rate: u32::try_from(args.rate.unwrap_or(default_rate))?,
        kills: usize::try_from(args.kills)?,
    };
    let report = match mode {
        ChaosMode::Embedded => chaos::embedded_kill_restart(&options).await?,
        ChaosMode::Cluster => chaos::cluster_kill_loop(&options).await?,
    };
    println!(
        "chaos {mode:?}: sessions {}, rate {}/s",
        options.sessions, options.rate
    );
    println!("accepted   {}", report.accepted);
    println!("delivered  {}", report.delivered);
    println!("lost       {}", report.lost);
    println!("duplicated {}", report.duplicated);
    println!(
        "listed wrong {} (GET .../messages not exactly once)",
        report.listed_wrong
    );
    println!(
        "refused    {} (not accepted by the network: node down)",
        report.refused
    );
    if !report.lost_examples.is_empty() {
        println!("lost e.g. {:?}", report.lost_examples);
    }
    Ok(())
}
