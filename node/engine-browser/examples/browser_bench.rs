//! Browser engine benchmark: memory (PSS, the fair share of resident memory, summed over each session's
//! whole Chromium process tree) per session at 1 and 5 sessions, and launch-to-QR time, against the
//! loopback fake WhatsApp Web. Baseline in the same run: a bare Chromium (same flags) on `about:blank`,
//! nothing injected. Run: `cargo run --release -p wagate-engine-browser --example browser_bench`.
//! The fake page is tiny, so the figures are the engine's floor; the real WhatsApp Web adds its own
//! JavaScript heap on top (not measurable offline).

use std::path::Path;
use std::time::{Duration, Instant};

use tokio::sync::mpsc::{UnboundedReceiver, unbounded_channel};
use wagate_engine_browser::{
    BrowserConfig, BrowserEvent, BrowserSession, Launcher, SessionOptions,
};

#[path = "../tests/fake/server.rs"]
#[allow(dead_code)] // `scanned`: the benchmark never links.
mod fake_server;

const SETTLE: Duration = Duration::from_secs(3);

fn launcher(url: &str, concurrency: usize) -> Launcher {
    Launcher::new(BrowserConfig {
        bundle_path: fake_server::FAKE_WPP.into(),
        url: url.to_string(),
        launch_concurrency: concurrency,
        ..BrowserConfig::default()
    })
    .expect("the fake bundle")
}

fn session(
    l: &Launcher,
    dir: &Path,
    id: &str,
) -> (BrowserSession, UnboundedReceiver<BrowserEvent>) {
    let (tx, rx) = unbounded_channel();
    let opts = SessionOptions {
        session_id: id.into(),
        profile_dir: dir.join(id),
        proxy_url: None,
    };
    (BrowserSession::new(l.clone(), opts, tx), rx)
}

fn mib(bytes: u64) -> f64 {
    bytes as f64 / (1024.0 * 1024.0)
}

/// Starts `n` sessions at once (the launcher's limit applies) and reports launch-to-QR and PSS.
async fn run(url: &str, n: usize) {
    let dir = tempfile::tempdir().expect("tempdir");
    let l = launcher(url, n.max(1));
    let mut tasks = Vec::new();
    for i in 0..n {
        let (s, mut rx) = session(&l, dir.path(), &format!("b{i}"));
        tasks.push(tokio::spawn(async move {
            let t0 = Instant::now();
            s.start().await.expect("launch");
            loop {
                match rx.recv().await {
                    Some(BrowserEvent::Qr(_)) => break,
                    Some(_) => continue,
                    None => panic!("channel closed"),
                }
            }
            (s, t0.elapsed())
        }));
    }
    let mut sessions = Vec::new();
    let mut qr_ms = Vec::new();
    for t in tasks {
        let (s, took) = t.await.expect("session task");
        qr_ms.push(took.as_millis() as u64);
        sessions.push(s);
    }
    tokio::time::sleep(SETTLE).await;
    let pss: Vec<u64> = sessions.iter().map(|s| s.memory().pss_bytes).collect();
    let total: u64 = pss.iter().sum();
    qr_ms.sort_unstable();
    println!(
        "sessions={n} launch_to_qr_ms(min/median/max)={}/{}/{} pss_per_session_mib={:.0} pss_total_mib={:.0} processes_per_session={}",
        qr_ms[0],
        qr_ms[qr_ms.len() / 2],
        qr_ms[qr_ms.len() - 1],
        mib(total) / n as f64,
        mib(total),
        sessions[0].processes().len(),
    );
    for s in &sessions {
        s.stop().await.expect("stop");
    }
}

/// Same Chromium and flags on about:blank: what the browser alone costs.
async fn baseline() {
    let dir = tempfile::tempdir().expect("tempdir");
    let l = launcher("about:blank", 1);
    let (s, _rx) = session(&l, dir.path(), "base");
    let t0 = Instant::now();
    s.start().await.expect("launch");
    let launched = t0.elapsed();
    tokio::time::sleep(SETTLE).await;
    println!(
        "baseline bare_chromium_about_blank launch_ms={} pss_mib={:.0}",
        launched.as_millis(),
        mib(s.memory().pss_bytes)
    );
    s.stop().await.expect("stop");
}

#[tokio::main]
async fn main() {
    let fake = fake_server::fake_whatsapp().await;
    baseline().await;
    run(&fake.url, 1).await;
    run(&fake.url, 5).await;
}
