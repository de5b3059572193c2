//! `media-storage`: media through the media store on each backend, local directory and S3 (moto on
//! loopback, started here, or with `--s3-server PATH` an `s3s-fs` binary, a Rust server that moto's
//! own throughput does not cap). Per backend: N concurrent `send-document`s of an M MB file the node fetches by
//! URL from a loopback server (end to end: fetch, store, the sim engine passing the object on by key, the
//! recipient's copy made by the backend), then a storage archive export and import of what was stored (the store
//! alone: every object streamed out and back in). Prints MB/s and the node's anonymous RSS growth over
//! idle, sampled every 20 ms. The local run is the baseline of the same run. After the S3 run, the
//! ceiling the loopback server allows: the same number of objects of the same size written straight to
//! it from memory, without a node (single PUTs, then each with the server-side copy a send's recipient
//! costs), so the node's S3 figure reads against what the server itself can take.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use serde_json::json;
use wagate_loadtest::harness::sessions::create_linked;
use wagate_loadtest::harness::{Node, NodeOptions, S3Server};

use super::arg;
use super::data_admin::{rss_kib, sample_peak};

pub async fn run(args: &[String]) -> anyhow::Result<()> {
    let binary = arg(args, "--binary", "target/release/wagate");
    let files: usize = arg(args, "--files", "20").parse()?;
    let megabytes: usize = arg(args, "--megabytes", "20").parse()?;
    let body: Vec<u8> = (0..megabytes * 1024 * 1024)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect();
    let ceiling_body = bytes::Bytes::from(body.clone());
    let server = serve(body).await?;
    println!(
        "media-storage: {files} concurrent send-document of {megabytes} MB each, fetched by URL from loopback"
    );
    let local = run_backend(&binary, None, &server, files, megabytes).await?;
    let s3_server = arg(args, "--s3-server", "");
    let s3 = if s3_server.is_empty() {
        S3Server::start().await?
    } else {
        S3Server::start_s3s_fs(std::path::Path::new(&s3_server)).await?
    };
    let on_s3 = run_backend(&binary, Some(&s3), &server, files, megabytes).await?;
    let [_, put_copy, _] = ceiling(&s3, files, megabytes, ceiling_body).await?;
    println!(
        "media-storage summary: s3 send at {:.0}% of local, {:.0}% of the server's PUT + copy ceiling",
        100.0 * on_s3 / local,
        100.0 * on_s3 / put_copy
    );
    Ok(())
}

/// The loopback server alone: `files` concurrent uploads of the benchmark's bytes from memory (one
/// buffer shared by every request, so the client costs next to nothing), three ways: single PUTs (what
/// the node does), single PUTs each followed by a server-side copy to a second key (what a send costs
/// the server: the sender's object and the recipient's copy), and multipart uploads of 5 MiB parts (what
/// the node did before, for comparison).
async fn ceiling(
    s3: &S3Server,
    files: usize,
    megabytes: usize,
    body: bytes::Bytes,
) -> anyhow::Result<[f64; 3]> {
    use object_store::path::Path as ObjectPath;
    use object_store::{ObjectStoreExt, WriteMultipart};
    const PART: usize = 5 * 1024 * 1024;
    let bucket = Arc::new(s3.bucket()?);
    let total_mb = (files * megabytes) as f64;
    let mut figures = Vec::new();
    for mode in ["put", "put-copy", "multipart"] {
        let started = Instant::now();
        let mut tasks = Vec::new();
        for i in 0..files {
            let (bucket, body) = (bucket.clone(), body.clone());
            tasks.push(tokio::spawn(async move {
                let key = ObjectPath::from(format!("ceiling-{mode}/{i}"));
                if mode == "multipart" {
                    let upload = bucket.put_multipart(&key).await?;
                    let mut parts = WriteMultipart::new_with_chunk_size(upload, PART);
                    for part in body.chunks(PART) {
                        parts.wait_for_capacity(2).await?;
                        parts.put(body.slice_ref(part));
                    }
                    parts.finish().await?;
                    return anyhow::Ok(());
                }
                bucket.put(&key, body.into()).await?;
                if mode == "put-copy" {
                    let copy = ObjectPath::from(format!("ceiling-{mode}/{i}-copy"));
                    bucket.copy(&key, &copy).await?;
                }
                anyhow::Ok(())
            }));
        }
        for task in tasks {
            task.await??;
        }
        figures.push(total_mb / started.elapsed().as_secs_f64());
    }
    println!(
        "media-storage s3 ceiling (the server alone, no node, {files} concurrent x {megabytes} MB from memory): single PUT {:.1} MB/s; PUT + server-side copy {:.1} MB/s; multipart (5 MiB parts) {:.1} MB/s",
        figures[0], figures[1], figures[2]
    );
    Ok([figures[0], figures[1], figures[2]])
}

/// A loopback HTTP server answering a GET with `body`, its first bytes replaced by the query string so
/// that every document is a different object (content addressing would store identical ones once).
async fn serve(body: Vec<u8>) -> anyhow::Result<String> {
    let body = Arc::new(body);
    let app = axum::Router::new().route(
        "/file.pdf",
        axum::routing::get(
            move |axum::extract::RawQuery(query): axum::extract::RawQuery| {
                let body = body.clone();
                async move {
                    let mut copy = body.as_ref().clone();
                    let tag = query.unwrap_or_default();
                    let n = tag.len().min(copy.len());
                    copy[..n].copy_from_slice(&tag.as_bytes()[..n]);
                    (
                        [("content-type", "application/pdf")],
                        axum::body::Bytes::from(copy),
                    )
                }
            },
        ),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let url = format!("http://{}/file.pdf", listener.local_addr()?);
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    Ok(url)
}

async fn run_backend(
    binary: &str,
    s3: Option<&S3Server>,
    url: &str,
    files: usize,
    megabytes: usize,
) -> anyhow::Result<f64> {
    let name = if s3.is_some() { "s3" } else { "local" };
    let mut options = NodeOptions::new(binary)
        .env("LOG_LEVEL", "warn")
        .env("MEDIA_URL_GUARD", "false")
        .env(
            "MEDIA_DOWNLOAD_MAX_BYTES",
            ((megabytes + 1) * 1024 * 1024).to_string(),
        )
        .env("RATE_LIMIT_SHORT_LIMIT", "1000000");
    if let Some(s3) = s3 {
        for (key, value) in s3.node_env() {
            options = options.env(key, value);
        }
    }
    let node = Node::start(options).await?;
    let pid = node.pid().unwrap_or(0);
    let client = node.client();
    let sender = create_linked(&client, "bench-sender", "15550003001").await?;
    create_linked(&client, "bench-recipient", "15550003002").await?;
    let idle = rss_kib(pid);

    let stop = Arc::new(AtomicBool::new(false));
    let sampler = sample_peak(pid, stop.clone());
    let started = Instant::now();
    let mut tasks = Vec::new();
    for i in 0..files {
        let (client, sender, url) = (client.clone(), sender.clone(), url.to_string());
        tasks.push(tokio::spawn(async move {
            client
                .post(
                    &format!("/api/sessions/{sender}/messages/send-document"),
                    json!({ "chatId": "15550003002@c.us", "url": format!("{url}?n={i}"),
                            "mimetype": "application/pdf", "filename": format!("f{i}.pdf") }),
                )
                .await
        }));
    }
    for task in tasks {
        let reply = task.await??;
        anyhow::ensure!(
            reply.status == 201,
            "{name}: send answered {}: {}",
            reply.status,
            reply.text
        );
    }
    let send_time = started.elapsed().as_secs_f64();
    stop.store(true, Ordering::Release);
    let send_peak = sampler.await?;
    let total_mb = (files * megabytes) as f64;
    let send_rate = total_mb / send_time;
    println!(
        "media-storage {name}: send {total_mb:.0} MB in {send_time:.2}s = {:.1} MB/s; anonymous RSS idle {:.1} MB, peak {:.1} MB (+{:.1} MB)",
        total_mb / send_time,
        idle as f64 / 1024.0,
        send_peak as f64 / 1024.0,
        send_peak.saturating_sub(idle) as f64 / 1024.0,
    );

    let count = client.get("/api/infra/storage/files/count").await?;
    let stored_mb = count.body["sizeBytes"].as_f64().unwrap_or(0.0) / 1_048_576.0;
    let before = rss_kib(pid);
    let stop = Arc::new(AtomicBool::new(false));
    let sampler = sample_peak(pid, stop.clone());
    let started = Instant::now();
    let exported = client.get("/api/infra/storage/export").await?;
    anyhow::ensure!(exported.status == 200, "{name}: export {}", exported.text);
    let export_time = started.elapsed().as_secs_f64();
    let started = Instant::now();
    let imported = client
        .post(
            "/api/infra/storage/import",
            json!({ "filePath": exported.str("download") }),
        )
        .await?;
    anyhow::ensure!(imported.status == 200, "{name}: import {}", imported.text);
    let import_time = started.elapsed().as_secs_f64();
    stop.store(true, Ordering::Release);
    let archive_peak = sampler.await?;
    println!(
        "media-storage {name}: archive of {} objects ({stored_mb:.0} MB): export {export_time:.2}s = {:.1} MB/s, import {import_time:.2}s = {:.1} MB/s; anonymous RSS before {:.1} MB, peak {:.1} MB (+{:.1} MB)",
        count.body["count"],
        stored_mb / export_time,
        stored_mb / import_time,
        before as f64 / 1024.0,
        archive_peak as f64 / 1024.0,
        archive_peak.saturating_sub(before) as f64 / 1024.0,
    );
    Ok(send_rate)
}
