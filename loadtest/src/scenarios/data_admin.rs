//! `data-admin`: data import and export of N messages (time, and the node's anonymous RSS sampled every 20 ms while
//! each runs: the export streams rows, so its peak should not grow with N) at two sizes, and the
//! throughput of ffmpeg voice-note conversions of a 30-second tone. Starts its own node; loopback only.

use std::time::{Duration, Instant};

use futures::StreamExt;
use serde_json::{Value, json};
use wagate_loadtest::harness::{ADMIN_KEY, Client, Node, NodeOptions};

use super::arg;

const SESSION: &str = "11111111-1111-4111-8111-111111111111";

pub async fn run(args: &[String]) -> anyhow::Result<()> {
    let binary = arg(args, "--binary", "target/release/wagate");
    let messages: usize = arg(args, "--messages", "100000").parse()?;
    let conversions: usize = arg(args, "--conversions", "8").parse()?;
    for n in [messages / 10, messages] {
        export_import(&binary, n).await?;
    }
    convert_throughput(&binary, conversions).await
}

/// The node's anonymous resident memory in KiB, from `/proc` (the heap; file-backed pages, such as SQLite's
/// memory-mapped database file that an export reads through, are left out).
pub(super) fn rss_kib(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("RssAnon:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|v| v.parse().ok())
        })
        .unwrap_or(0)
}

/// Samples RSS until `stop` flips; answers the highest value seen.
pub(super) fn sample_peak(
    pid: u32,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
) -> tokio::task::JoinHandle<u64> {
    tokio::spawn(async move {
        let mut peak = rss_kib(pid);
        while !stop.load(std::sync::atomic::Ordering::Acquire) {
            peak = peak.max(rss_kib(pid));
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        peak.max(rss_kib(pid))
    })
}

fn payload(n: usize) -> Value {
    let t = 1_700_000_000_000i64;
    let messages: Vec<Value> = (0..n)
        .map(|i| {
            json!({"id": format!("m-{i:08}"), "sessionId": SESSION, "waMessageId": format!("WA{i}"),
                   "chatId": "15550002222@c.us", "fromJid": "15550002222@c.us",
                   "toJid": "15550001111@c.us", "body": format!("benchmark message number {i} with some text"),
                   "type": "text", "direction": "incoming", "status": "read",
                   "timestamp": 1_700_000_000 + i as i64, "createdAt": t + i as i64})
        })
        .collect();
    json!({"tables": {
        "sessions": [{"id": SESSION, "name": "bench", "status": "created", "config": {},
                      "createdAt": t, "updatedAt": t}],
        "messages": messages,
    }})
}

async fn export_import(binary: &str, n: usize) -> anyhow::Result<()> {
    let node = Node::start(
        NodeOptions::new(binary)
            .env("LOG_LEVEL", "warn")
            .env("BODY_SIZE_LIMIT", "512mb"),
    )
    .await?;
    let pid = node.pid().unwrap_or(0);
    let client = node.client();
    let body = payload(n);
    let idle = rss_kib(pid);

    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let sampler = sample_peak(pid, stop.clone());
    let started = Instant::now();
    let reply = client.post("/api/infra/import-data", body).await?;
    let import_time = started.elapsed();
    stop.store(true, std::sync::atomic::Ordering::Release);
    let import_peak = sampler.await?;
    anyhow::ensure!(
        reply.body["imported"] == true,
        "import failed: {}",
        reply.text
    );

    let before_export = rss_kib(pid);
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let sampler = sample_peak(pid, stop.clone());
    let started = Instant::now();
    let response = reqwest::Client::new()
        .get(format!("{}/api/infra/export-data", node.base_url()))
        .header("X-API-Key", ADMIN_KEY)
        .send()
        .await?;
    anyhow::ensure!(
        response.status() == 200,
        "export answered {}",
        response.status()
    );
    let mut bytes = 0usize;
    let mut stream = response.bytes_stream();
    while let Some(chunk) = stream.next().await {
        bytes += chunk?.len();
    }
    let export_time = started.elapsed();
    stop.store(true, std::sync::atomic::Ordering::Release);
    let export_peak = sampler.await?;
    println!(
        "data-admin n={n}: import {:.2}s ({:.0} rows/s), node anonymous RSS idle {:.1} MB, peak during import {:.1} MB",
        import_time.as_secs_f64(),
        n as f64 / import_time.as_secs_f64(),
        idle as f64 / 1024.0,
        import_peak as f64 / 1024.0,
    );
    println!(
        "data-admin n={n}: export {:.2}s ({:.0} rows/s, {:.1} MB streamed), anonymous RSS before {:.1} MB, peak during export {:.1} MB (+{:.1} MB)",
        export_time.as_secs_f64(),
        n as f64 / export_time.as_secs_f64(),
        bytes as f64 / 1_048_576.0,
        before_export as f64 / 1024.0,
        export_peak as f64 / 1024.0,
        export_peak.saturating_sub(before_export) as f64 / 1024.0,
    );
    Ok(())
}

async fn convert_throughput(binary: &str, count: usize) -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let tone = dir.path().join("tone.wav");
    let status = std::process::Command::new("ffmpeg")
        .args([
            "-hide_banner",
            "-loglevel",
            "error",
            "-y",
            "-f",
            "lavfi",
            "-i",
        ])
        .arg("sine=frequency=440:duration=30")
        .arg(&tone)
        .status()?;
    anyhow::ensure!(status.success(), "ffmpeg could not generate the tone");
    let audio = base64::Engine::encode(
        &base64::engine::general_purpose::STANDARD,
        std::fs::read(&tone)?,
    );
    let node = Node::start(NodeOptions::new(binary).env("LOG_LEVEL", "warn")).await?;
    let client: Client = node.client();
    let created = client
        .post("/api/sessions", json!({"name": "bench-convert"}))
        .await?;
    let id = created.str("id");
    let path = format!("/api/sessions/{id}/media/convert/voice");
    let started = Instant::now();
    let mut tasks = Vec::new();
    // More requests than the default two slots plus eight queued would be refused: send them two at a time.
    let lanes = 2usize;
    for lane in 0..lanes {
        let (client, path, audio) = (client.clone(), path.clone(), audio.clone());
        let mine = (lane..count).step_by(lanes).count();
        tasks.push(tokio::spawn(async move {
            let mut ok = 0usize;
            for _ in 0..mine {
                let reply = client
                    .post(&path, json!({"base64": audio, "mimetype": "audio/wav"}))
                    .await?;
                anyhow::ensure!(
                    reply.status == 200,
                    "conversion answered {}: {}",
                    reply.status,
                    reply.text
                );
                ok += 1;
            }
            Ok(ok)
        }));
    }
    let mut done = 0usize;
    for task in tasks {
        done += task.await??;
    }
    let elapsed = started.elapsed().as_secs_f64();
    println!(
        "data-admin convert: {done} x 30 s voice notes in {elapsed:.2}s = {:.2} conversions/s ({:.0} s of audio per second)",
        done as f64 / elapsed,
        done as f64 * 30.0 / elapsed
    );
    Ok(())
}
