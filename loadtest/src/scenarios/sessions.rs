//! `sessions`: starts a fresh node on the sim engine, creates, starts and links N sessions, then restarts
//! them from stored credentials; prints the time per session for both and the RSS per idle ready session.

use std::time::{Duration, Instant};

use futures::StreamExt;
use wagate_loadtest::harness::sessions::{create, link};
use wagate_loadtest::harness::{Client, Node, NodeOptions};

use super::arg;

pub(super) fn rss_kb(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmRSS:"))
                .map(str::to_string)
        })
        .and_then(|l| l.split_whitespace().nth(1).and_then(|v| v.parse().ok()))
        .unwrap_or(0)
}

async fn for_each<F, Fut>(ids: &[String], concurrency: usize, op: F) -> anyhow::Result<Duration>
where
    F: Fn(usize, String) -> Fut,
    Fut: std::future::Future<Output = anyhow::Result<()>>,
{
    let started = Instant::now();
    let work = ids.iter().cloned().enumerate().map(|(n, id)| op(n, id));
    let results: Vec<anyhow::Result<()>> = futures::stream::iter(work)
        .buffer_unordered(concurrency)
        .collect()
        .await;
    results.into_iter().collect::<anyhow::Result<()>>()?;
    Ok(started.elapsed())
}

async fn restart_all(
    client: &Client,
    ids: &[String],
    concurrency: usize,
) -> anyhow::Result<Duration> {
    for_each(ids, concurrency, |_, id: String| async move {
        client
            .post_empty(&format!("/api/sessions/{id}/stop"))
            .await?;
        let started = client
            .post_empty(&format!("/api/sessions/{id}/start"))
            .await?;
        anyhow::ensure!(
            started.body["status"] == "ready",
            "restart {id}: {}",
            started.text
        );
        Ok(())
    })
    .await
}

pub async fn run(args: &[String]) -> anyhow::Result<()> {
    let binary = arg(args, "--binary", "target/release/wagate");
    let count: usize = arg(args, "--count", "1000").parse()?;
    let concurrency: usize = arg(args, "--concurrency", "32").parse()?;
    let node = Node::start(NodeOptions::new(binary).env("LOG_LEVEL", "warn")).await?;
    let pid = node.pid().unwrap_or(0);
    let client = node.client();
    let baseline = rss_kb(pid);
    let mut ids = Vec::with_capacity(count);
    for i in 0..count {
        ids.push(create(&client, &format!("bench-{i}")).await?);
    }
    let client_ref = &client;
    let linked = for_each(&ids, concurrency, |n, id: String| async move {
        link(client_ref, &id, &format!("49150{n:08}"))
            .await
            .map(|_| ())
    })
    .await?;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let idle = rss_kb(pid);
    let restarted = restart_all(&client, &ids, concurrency).await?;
    let per = |d: Duration| d.as_secs_f64() * 1000.0 / count as f64;
    println!("sessions: {count} linked (concurrency {concurrency})");
    println!(
        "first link (start, QR, scan, ready): {:.2} ms/session wall, {:.1} s total",
        per(linked),
        linked.as_secs_f64()
    );
    println!(
        "start-to-ready with stored credentials: {:.2} ms/session wall, {:.1} s total",
        per(restarted),
        restarted.as_secs_f64()
    );
    println!(
        "RSS: baseline {} MB, {count} idle ready sessions {} MB, {:.1} KB/session",
        baseline / 1024,
        idle / 1024,
        (idle.saturating_sub(baseline)) as f64 / count as f64
    );
    Ok(())
}
