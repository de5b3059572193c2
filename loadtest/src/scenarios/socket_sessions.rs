//! `socket-sessions`: starts a fresh node on the socket engine against a local WebSocket endpoint that
//! accepts and closes every connection (offline: the clients keep reconnecting), starts N sessions, and
//! prints process RSS before, with the N sessions running, and after stopping them and running them a
//! second time (a leak shows as growth between the two rounds).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use axum::Router;
use axum::extract::WebSocketUpgrade;
use axum::routing::get;
use futures::StreamExt;
use wagate_loadtest::harness::sessions::create;
use wagate_loadtest::harness::{Client, Node, NodeOptions};

use super::arg;
use super::sessions::rss_kb;

/// A WebSocket endpoint that closes each upgraded socket at once; counts the upgrades.
async fn closing_endpoint() -> anyhow::Result<(u16, Arc<AtomicU64>)> {
    let count = Arc::new(AtomicU64::new(0));
    let seen = count.clone();
    let app = Router::new().route(
        "/ws/chat",
        get(move |ws: WebSocketUpgrade| {
            let seen = seen.clone();
            async move {
                seen.fetch_add(1, Ordering::Relaxed);
                ws.on_upgrade(|socket| async move { drop(socket) })
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let port = listener.local_addr()?.port();
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    Ok((port, count))
}

async fn all(
    client: &Client,
    ids: &[String],
    concurrency: usize,
    action: &str,
) -> anyhow::Result<()> {
    let results: Vec<anyhow::Result<()>> = futures::stream::iter(ids.iter().map(|id| async move {
        let reply = client
            .post_empty(&format!("/api/sessions/{id}/{action}"))
            .await?;
        // Offline, a start outlives its budget (504) while the client keeps retrying: that is the point.
        anyhow::ensure!(
            reply.status < 300 || (action == "start" && reply.status == 504),
            "{action} {id}: {} {}",
            reply.status,
            reply.text
        );
        Ok(())
    }))
    .buffer_unordered(concurrency)
    .collect()
    .await;
    results.into_iter().collect()
}

pub async fn run(args: &[String]) -> anyhow::Result<()> {
    let binary = arg(args, "--binary", "target/debug/wagate");
    let count: usize = arg(args, "--count", "200").parse()?;
    let concurrency: usize = arg(args, "--concurrency", "16").parse()?;
    let settle: u64 = arg(args, "--settle-secs", "15").parse()?;
    let (port, upgrades) = closing_endpoint().await?;
    let node = Node::start(
        NodeOptions::new(binary)
            .env("LOG_LEVEL", "warn")
            .env("ENGINE_TYPE", "socket")
            .env("SOCKET_WS_URL", format!("ws://127.0.0.1:{port}/ws/chat"))
            .env("SESSION_START_TIMEOUT_MS", "100")
            .env("RATE_LIMIT_SHORT_LIMIT", "1000000")
            .env("RATE_LIMIT_MEDIUM_LIMIT", "1000000")
            .env("RATE_LIMIT_LONG_LIMIT", "1000000"),
    )
    .await?;
    let pid = node.pid().unwrap_or(0);
    let client = node.client();
    let mut ids = Vec::with_capacity(count);
    for i in 0..count {
        ids.push(create(&client, &format!("socket-bench-{i}")).await?);
    }
    tokio::time::sleep(Duration::from_secs(1)).await;
    let baseline = rss_kb(pid);
    let mut rounds = Vec::new();
    for _ in 0..2 {
        all(&client, &ids, concurrency, "start").await?;
        tokio::time::sleep(Duration::from_secs(settle)).await;
        let running = rss_kb(pid);
        all(&client, &ids, concurrency, "stop").await?;
        tokio::time::sleep(Duration::from_secs(2)).await;
        rounds.push((running, rss_kb(pid)));
    }
    let per = |kb: u64| kb.saturating_sub(baseline) as f64 / count as f64;
    println!(
        "socket sessions: {count} (offline, reconnecting against ws://127.0.0.1:{port}), settle {settle} s"
    );
    println!(
        "connections the endpoint accepted: {}",
        upgrades.load(Ordering::Relaxed)
    );
    println!(
        "RSS baseline (sessions created, none running): {} KB",
        baseline
    );
    for (n, (running, stopped)) in rounds.iter().enumerate() {
        println!(
            "round {}: running {} KB ({:.1} KB/session), after stop {} KB ({:.1} KB/session left)",
            n + 1,
            running,
            per(*running),
            stopped,
            per(*stopped)
        );
    }
    Ok(())
}
