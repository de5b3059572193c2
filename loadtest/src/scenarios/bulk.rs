//! `bulk`: bulk batches (`send-bulk`) from several sender sessions to one recipient session on the sim
//! network. Each batch is polled until it finishes; every message a batch reports sent is one expected
//! `message.received` webhook at the recipient, verified and counted by idempotency key. The pacing delay
//! between a batch's messages (minimum 1000 ms by the spec) bounds a batch's speed, so throughput grows with
//! the number of batches in flight.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use futures::StreamExt;
use serde_json::json;

use wagate_loadtest::harness::Client;

use super::common::{Counters, Progress, Report, TargetArgs, measure_rss, phone, tally};
use super::events::{SECRET, setup};

#[derive(clap::Args, Debug, Clone)]
pub struct BulkArgs {
    #[command(flatten)]
    pub target: TargetArgs,
    /// Sender sessions; each submits its batches one after another
    #[arg(long, default_value_t = 8, value_parser = clap::value_parser!(u64).range(1..=500))]
    pub senders: u64,
    /// Batches per sender
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u64).range(1..))]
    pub batches: u64,
    /// Messages per batch (the spec allows 1 to 100)
    #[arg(long, default_value_t = 20, value_parser = clap::value_parser!(u64).range(1..=100))]
    pub batch_size: u64,
    /// delayBetweenMessages of each batch, in milliseconds (the spec's minimum is 1000)
    #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(u64).range(1000..))]
    pub delay_ms: u64,
    /// How long to wait for one batch to finish and for the deliveries, in seconds
    #[arg(long, default_value_t = 300)]
    pub drain_seconds: u64,
}

/// One sender's part: its session, the recipient chat and the batch shape.
#[derive(Clone)]
struct Sender {
    client: Client,
    counters: std::sync::Arc<Counters>,
    from: String,
    to: String,
    size: u64,
    delay_ms: u64,
    budget: Duration,
}

/// Submits one batch and polls it to its end; returns the tags of the messages it reports sent, with the
/// submit time, and how many failed.
async fn one_batch(sender: &Sender, prefix: String) -> (Vec<(String, Instant)>, u64) {
    let Sender {
        client,
        counters,
        from,
        to,
        size,
        delay_ms,
        budget,
    } = sender;
    let (size, delay_ms, budget) = (*size, *delay_ms, *budget);
    let tags: Vec<String> = (0..size).map(|i| format!("{prefix}-{i}")).collect();
    let messages: Vec<_> = tags
        .iter()
        .map(|t| json!({ "chatId": to, "type": "text", "content": { "text": t } }))
        .collect();
    let t0 = Instant::now();
    let body = json!({ "messages": messages, "options": { "delayBetweenMessages": delay_ms } });
    let accepted = client
        .post(&format!("/api/sessions/{from}/messages/send-bulk"), body)
        .await;
    let batch_id = match accepted {
        Ok(r) if r.status == 202 => {
            counters.success(t0.elapsed());
            r.str("batchId")
        }
        Ok(r) => {
            counters.failure(format!("send-bulk HTTP {}", r.status));
            return (Vec::new(), size);
        }
        Err(_) => {
            counters.failure("send-bulk transport");
            return (Vec::new(), size);
        }
    };
    let deadline = Instant::now() + budget;
    loop {
        tokio::time::sleep(Duration::from_millis(250)).await;
        let status = client
            .get(&format!("/api/sessions/{from}/messages/batch/{batch_id}"))
            .await;
        let Ok(status) = status else { continue };
        let done = matches!(
            status.body["status"].as_str(),
            Some("completed" | "failed" | "cancelled")
        );
        if done || Instant::now() >= deadline {
            let results = status.body["results"]
                .as_array()
                .cloned()
                .unwrap_or_default();
            let sent: Vec<(String, Instant)> = results
                .iter()
                .enumerate()
                .filter(|(_, r)| r["messageId"].is_string())
                .filter_map(|(i, _)| tags.get(i).map(|t| (t.clone(), t0)))
                .collect();
            let failed = size - sent.len() as u64;
            if !done {
                counters.failure("batch unfinished");
            } else if failed > 0 {
                counters.failure(format!("batch {}", status.body["status"]));
            }
            return (sent, failed);
        }
    }
}

pub async fn run(args: BulkArgs) -> anyhow::Result<Report> {
    let senders = args.senders as usize;
    let (s, ids) = setup(&args.target, None, senders + 1).await?;
    let recipient = format!("{}@c.us", phone(&s.tag, senders));
    let counters = Counters::new();
    let progress = Progress::start("bulk", counters.clone());
    let begun = Instant::now();
    let budget = Duration::from_secs(args.drain_seconds);
    let per_sender = (0..senders).map(|n| {
        let sender = Sender {
            client: s.target.client.clone(),
            counters: counters.clone(),
            from: ids[n].clone(),
            to: recipient.clone(),
            size: args.batch_size,
            delay_ms: args.delay_ms,
            budget,
        };
        let (tag, batches) = (s.tag.clone(), args.batches);
        async move {
            let mut sent = Vec::new();
            let mut failed = 0;
            for b in 0..batches {
                let (ok, bad) = one_batch(&sender, format!("bulk-{tag}-{n}-{b}")).await;
                sent.extend(ok);
                failed += bad;
            }
            (sent, failed)
        }
    });
    let outcomes: Vec<_> = futures::stream::iter(per_sender)
        .buffer_unordered(senders)
        .collect()
        .await;
    let elapsed = begun.elapsed();
    drop(progress);
    let expected: HashMap<String, Instant> = outcomes
        .iter()
        .flat_map(|(sent, _)| sent.iter().cloned())
        .collect();
    let failed_messages: u64 = outcomes.iter().map(|(_, f)| f).sum();
    let mut report = Report::new("bulk", &s.target.label).with_counters(&counters, elapsed);
    report.processes = measure_rss(&s.target.started_processes());
    let deliveries = s.receiver.wait_count(expected.len(), budget).await;
    let (events, latencies) = tally(&expected, &deliveries, SECRET);
    report = report.with_events(events, latencies);
    let messages_per_sec = expected.len() as f64 / elapsed.as_secs_f64().max(1e-9);
    report.note(format!(
        "{} batches of {} messages from {senders} senders, {} ms apart; throughput and latency are of the send-bulk submissions (202)",
        args.senders * args.batches,
        args.batch_size,
        args.delay_ms
    ));
    report.note(format!(
        "batch messages: {} sent, {failed_messages} failed or unfinished = {messages_per_sec:.1} messages/s; event latency is from the batch's submission (includes the pacing delay)",
        expected.len()
    ));
    s.cleanup(&ids).await;
    Ok(report)
}
