//! `browser-sessions`: the browser engine's footprint, offline. Starts N browser sessions at once (each its
//! own Debian Chromium through `wagate-engine-browser`, the launch limit set to N) against the loopback fake
//! WhatsApp Web the engine's tests use, and prints launch-to-first-QR (min/median/max) and PSS per session
//! (the fair share of resident memory, summed over each session's whole process tree) for each N of
//! `--sessions`, after a bare-Chromium baseline (same binary and flags on `about:blank`, nothing injected).
//! The node is not involved: it has no knob to open another page than WhatsApp Web. The fake page is tiny,
//! so these are the engine's floor; the real WhatsApp Web adds its own heap (not measurable offline).

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::Context;
use tokio::sync::mpsc::{UnboundedReceiver, unbounded_channel};
use wagate_engine_browser::{
    BrowserConfig, BrowserEvent, BrowserSession, Launcher, SessionOptions, default_chromium_path,
};

#[path = "../../../node/engine-browser/tests/fake/server.rs"]
#[allow(dead_code)]
// FAKE_WPP resolves against this crate's manifest dir; `scanned`: nothing links here.
mod fake_server;

/// The fake `window.WPP` the engine injects in place of the wa-js bundle.
const FAKE_WPP: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../node/engine-browser/tests/fake/fake-wpp.js"
);
/// How long one session may take to show its QR before the run fails.
const QR_PATIENCE: Duration = Duration::from_secs(120);

#[derive(clap::Args, Debug, Clone)]
pub struct BrowserSessionsArgs {
    /// Session counts to measure, one round each, comma-separated
    #[arg(long, value_delimiter = ',', default_value = "1,5", value_parser = clap::value_parser!(u32).range(1..=64))]
    pub sessions: Vec<u32>,
    /// Seconds to let the sessions settle after their QR before PSS is read
    #[arg(long, default_value_t = 3)]
    pub settle_secs: u64,
    /// The Chromium binary [default: Debian's /usr/lib/chromium/chromium, else /usr/bin/chromium]
    #[arg(long, value_name = "PATH")]
    pub chromium: Option<PathBuf>,
}

fn launcher(args: &BrowserSessionsArgs, url: &str, concurrency: usize) -> anyhow::Result<Launcher> {
    let chromium = args.chromium.clone().unwrap_or_else(default_chromium_path);
    anyhow::ensure!(
        chromium.exists(),
        "Chromium is missing at {} (apt-get install chromium, or --chromium)",
        chromium.display()
    );
    Launcher::new(BrowserConfig {
        chromium_path: chromium,
        bundle_path: PathBuf::from(FAKE_WPP),
        url: url.to_string(),
        launch_concurrency: concurrency,
        ..BrowserConfig::default()
    })
    .context("the fake wa-js bundle")
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

/// Launches one session and waits for its first QR; answers the time it took.
async fn until_qr(
    s: &BrowserSession,
    rx: &mut UnboundedReceiver<BrowserEvent>,
) -> anyhow::Result<Duration> {
    let t0 = Instant::now();
    s.start()
        .await
        .map_err(|e| anyhow::anyhow!("launch: {e}"))?;
    tokio::time::timeout(QR_PATIENCE, async {
        loop {
            match rx.recv().await {
                Some(BrowserEvent::Qr(_)) => return Ok(t0.elapsed()),
                Some(_) => continue,
                None => anyhow::bail!("the session closed its event channel"),
            }
        }
    })
    .await
    .context("no QR in time")?
}

/// Starts `n` sessions at once and reports launch-to-QR and PSS per session.
async fn round(args: &BrowserSessionsArgs, url: &str, n: usize) -> anyhow::Result<String> {
    let dir = tempfile::tempdir()?;
    let l = launcher(args, url, n)?;
    let mut tasks = Vec::new();
    for i in 0..n {
        let (s, mut rx) = session(&l, dir.path(), &format!("b{i}"));
        tasks.push(tokio::spawn(async move {
            let took = until_qr(&s, &mut rx).await;
            (s, took)
        }));
    }
    let mut sessions = Vec::new();
    let mut qr_ms = Vec::new();
    let mut failure = None;
    for t in tasks {
        let (s, took) = t.await?;
        match took {
            Ok(took) => qr_ms.push(took.as_millis() as u64),
            Err(err) => failure = Some(err),
        }
        sessions.push(s);
    }
    if failure.is_none() {
        tokio::time::sleep(Duration::from_secs(args.settle_secs)).await;
    }
    let total: u64 = sessions.iter().map(|s| s.memory().pss_bytes).sum();
    let processes = sessions.first().map_or(0, |s| s.processes().len());
    for s in &sessions {
        if let Err(err) = s.stop().await {
            eprintln!("browser-sessions: stop: {err}");
        }
    }
    if let Some(err) = failure {
        return Err(err);
    }
    qr_ms.sort_unstable();
    Ok(format!(
        "sessions={n} launch_to_qr_ms(min/median/max)={}/{}/{} pss_per_session_mib={:.0} pss_total_mib={:.0} processes_per_session={processes}",
        qr_ms[0],
        qr_ms[qr_ms.len() / 2],
        qr_ms[qr_ms.len() - 1],
        mib(total) / n as f64,
        mib(total),
    ))
}

/// Same Chromium and flags on about:blank: what the browser alone costs.
async fn baseline(args: &BrowserSessionsArgs) -> anyhow::Result<String> {
    let dir = tempfile::tempdir()?;
    let l = launcher(args, "about:blank", 1)?;
    let (s, _rx) = session(&l, dir.path(), "base");
    let t0 = Instant::now();
    s.start()
        .await
        .map_err(|e| anyhow::anyhow!("launch: {e}"))?;
    let launched = t0.elapsed();
    tokio::time::sleep(Duration::from_secs(args.settle_secs)).await;
    let pss = s.memory().pss_bytes;
    s.stop().await.map_err(|e| anyhow::anyhow!("stop: {e}"))?;
    Ok(format!(
        "baseline bare_chromium_about_blank launch_ms={} pss_mib={:.0}",
        launched.as_millis(),
        mib(pss)
    ))
}

pub async fn run(args: BrowserSessionsArgs) -> anyhow::Result<()> {
    let fake = fake_server::fake_whatsapp().await;
    println!("{}", baseline(&args).await?);
    for n in &args.sessions {
        println!("{}", round(&args, &fake.url, *n as usize).await?);
    }
    Ok(())
}
