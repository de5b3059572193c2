//! `chaos`: the kill loop of issue 30 (`harness::chaos`). Cluster (default): 3 `ROLE=api` nodes and a
//! `wagate-worker` on a throwaway PostgreSQL database and Redis, a steady inbound stream over N sessions, an
//! owner killed with SIGKILL at a random moment and restarted, K times. Embedded: one node killed mid-stream
//! and restarted on its data directory, K times. Prints accepted, delivered, lost and duplicated.

use std::path::PathBuf;

use wagate_loadtest::harness::chaos::{self, ChaosOptions};

use super::arg;

pub async fn run(args: &[String]) -> anyhow::Result<()> {
    let mode = arg(args, "--mode", "cluster");
    let options = ChaosOptions {
        binary: PathBuf::from(arg(args, "--binary", "target/release/wagate")),
        worker: Some(PathBuf::from(arg(
            args,
            "--worker",
            "target/release/wagate-worker",
        ))),
        sessions: arg(args, "--sessions", "20").parse()?,
        rate: arg(
            args,
            "--rate",
            if mode == "embedded" { "1000" } else { "200" },
        )
        .parse()?,
        kills: arg(args, "--kills", "10").parse()?,
    };
    let report = match mode.as_str() {
        "embedded" => chaos::embedded_kill_restart(&options).await?,
        _ => chaos::cluster_kill_loop(&options).await?,
    };
    println!(
        "chaos {mode}: sessions {}, rate {}/s",
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
