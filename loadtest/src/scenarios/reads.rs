//! `reads`: the authenticated REST read mix a dashboard or CRM makes: a session, the session list, a
//! session's chats and its messages, round-robin over sessions this run links on the sim network and seeds
//! with inbound messages. Sessions created on a running node are deleted afterwards.

use std::time::{Duration, Instant};

use serde_json::json;
use wagate_loadtest::harness::sessions::create_linked;

use super::common::{Counters, Progress, Report, Target, TargetArgs, measure_rss, phone, run_tag};

#[derive(clap::Args, Debug, Clone)]
pub struct ReadsArgs {
    #[command(flatten)]
    pub target: TargetArgs,
    /// How long to read, in seconds
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u64).range(1..))]
    pub seconds: u64,
    /// Concurrent request loops (each waits for its reply before the next request)
    #[arg(long, default_value_t = 32, value_parser = clap::value_parser!(u64).range(1..=4096))]
    pub connections: u64,
    /// Sessions to create and link on the sim network for the reads
    #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u64).range(1..=1000))]
    pub sessions: u64,
    /// Inbound messages stored per session before the reads, so chat and message lists have rows
    #[arg(long, default_value_t = 20, value_parser = clap::value_parser!(u64).range(0..=10_000))]
    pub seed_messages: u64,
}

/// The read mix; `{id}` is a session of the run.
const MIX: [&str; 4] = [
    "/api/sessions/{id}",
    "/api/sessions?limit=100",
    "/api/sessions/{id}/chats?limit=50",
    "/api/sessions/{id}/messages?limit=50",
];

pub async fn run(args: ReadsArgs) -> anyhow::Result<Report> {
    let target = Target::connect(&args.target, &[]).await?;
    let tag = run_tag();
    let mut ids = Vec::new();
    for n in 0..args.sessions as usize {
        let id = create_linked(&target.client, &format!("lt-{tag}-r{n}"), &phone(&tag, n)).await?;
        for m in 0..args.seed_messages {
            let body = json!({ "from": format!("{}@c.us", phone(&tag, 50_000 + (m as usize % 7))), "type": "text", "body": format!("seed-{m}") });
            let reply = target
                .client
                .post(&format!("/api/sim/sessions/{id}/inbound"), body)
                .await?;
            anyhow::ensure!(
                reply.status == 200,
                "seeding inbound messages: {} {}",
                reply.status,
                reply.text
            );
        }
        ids.push(id);
    }
    let counters = Counters::new();
    let progress = Progress::start("reads", counters.clone());
    let begun = Instant::now();
    let deadline = begun + Duration::from_secs(args.seconds);
    let mut loops = Vec::new();
    for worker in 0..args.connections as usize {
        let (client, ids, counters) = (target.client.clone(), ids.clone(), counters.clone());
        loops.push(tokio::spawn(async move {
            let mut i = worker;
            while Instant::now() < deadline {
                let path = MIX[i % MIX.len()].replace("{id}", &ids[(i / MIX.len()) % ids.len()]);
                let started = Instant::now();
                let reply = client.get(&path).await.map(|r| r.status);
                counters.record(&reply, &[200], started.elapsed());
                i += 1;
            }
        }));
    }
    for l in loops {
        l.await?;
    }
    let elapsed = begun.elapsed();
    drop(progress);
    let mut report = Report::new("reads", &target.label).with_counters(&counters, elapsed);
    report.processes = measure_rss(&target.started_processes());
    report.note(format!(
        "mix: {} over {} sessions with {} stored messages each, {} connections",
        MIX.join(", "),
        ids.len(),
        args.seed_messages,
        args.connections
    ));
    if !target.is_started() {
        for id in &ids {
            let _ = target.client.delete(&format!("/api/sessions/{id}")).await;
        }
    }
    Ok(report)
}
