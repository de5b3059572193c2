//! The browser engine against a real (Debian) Chromium, offline: a fake WhatsApp Web served on loopback
//! by the test, whose `window.WPP` (tests/fake/fake-wpp.js, injected in place of the wa-js bundle) runs a
//! tiny simulated backend. The engine's own launch, injection, calls, pushes, reload and crash handling
//! and teardown are what run.

use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::sync::mpsc::{UnboundedReceiver, unbounded_channel};
#[path = "fake/server.rs"]
mod fake_server;
use fake_server::{FAKE_WPP, FakeWhatsApp, fake_whatsapp};
use wagate_engine_browser::{
    BrowserConfig, BrowserError, BrowserEvent, BrowserSession, Launcher, SessionOptions,
    default_chromium_path, procs, profile,
};

/// Generous: the machine is shared; nothing here asserts a duration.
const PATIENCE: Duration = Duration::from_secs(60);

fn launcher(url: &str, grace: Duration) -> Launcher {
    let chromium = std::env::var_os("CHROMIUM_PATH")
        .map(PathBuf::from)
        .unwrap_or_else(default_chromium_path);
    assert!(
        chromium.exists(),
        "Chromium is missing at {} (scripts/test.sh installs Debian's chromium)",
        chromium.display()
    );
    Launcher::new(BrowserConfig {
        chromium_path: chromium,
        bundle_path: PathBuf::from(FAKE_WPP),
        url: url.to_string(),
        reinject_grace: grace,
        auth_wait: Duration::from_millis(500),
        watch_interval: Duration::from_millis(100),
        ..BrowserConfig::default()
    })
    .unwrap()
}

fn session(
    launcher: &Launcher,
    dir: &Path,
    id: &str,
) -> (BrowserSession, UnboundedReceiver<BrowserEvent>) {
    let (tx, rx) = unbounded_channel();
    let opts = SessionOptions {
        session_id: id.to_string(),
        profile_dir: dir.join(id),
        proxy_url: None,
    };
    (BrowserSession::new(launcher.clone(), opts, tx), rx)
}

async fn next_event(rx: &mut UnboundedReceiver<BrowserEvent>) -> BrowserEvent {
    tokio::time::timeout(PATIENCE, rx.recv())
        .await
        .expect("an event in time")
        .expect("the session keeps its channel")
}

/// Calls until `done` accepts the answer (the page heals in its own time).
async fn call_until(
    s: &BrowserSession,
    name: &str,
    args: &[Value],
    done: impl Fn(&Result<Value, BrowserError>) -> bool,
) -> Result<Value, BrowserError> {
    let deadline = tokio::time::Instant::now() + PATIENCE;
    loop {
        let answer = s.call(name, args).await;
        if done(&answer) || tokio::time::Instant::now() > deadline {
            return answer;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn link_by_qr(fake: &FakeWhatsApp, rx: &mut UnboundedReceiver<BrowserEvent>) {
    match next_event(rx).await {
        BrowserEvent::Qr(payload) => assert!(payload.starts_with("2@fake-"), "{payload}"),
        other => panic!("expected a QR first, got {other:?}"),
    }
    fake.scanned.store(true, Ordering::SeqCst);
    match next_event(rx).await {
        BrowserEvent::Authenticated(me) => {
            assert_eq!(me.id.as_deref(), Some("15550001111@c.us"));
            assert_eq!(me.push_name.as_deref(), Some("Fake Phone"));
        }
        other => panic!("expected Authenticated, got {other:?}"),
    }
    assert_eq!(next_event(rx).await, BrowserEvent::Ready);
}

async fn ready_without_qr(rx: &mut UnboundedReceiver<BrowserEvent>) {
    assert!(matches!(
        next_event(rx).await,
        BrowserEvent::Authenticated(_)
    ));
    assert_eq!(next_event(rx).await, BrowserEvent::Ready);
}

fn assert_no_process_left(s: &BrowserSession, seen: &[u32]) {
    assert!(s.processes().is_empty(), "left: {:?}", s.processes());
    let alive: Vec<_> = seen.iter().filter(|p| procs::is_alive(**p)).collect();
    assert!(alive.is_empty(), "still alive: {alive:?}");
}

fn send_args(to: &str, body: &str) -> Vec<Value> {
    vec![json!(to), json!(body), json!({})]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn links_sends_receives_heals_reloads_and_crashes_then_stops_clean() {
    let fake = fake_whatsapp().await;
    let dir = tempfile::tempdir().unwrap();
    let launcher = launcher(&fake.url, Duration::from_secs(10));
    let (s, mut rx) = session(&launcher, dir.path(), "s1");

    assert_eq!(s.call("chats", &[]).await, Err(BrowserError::NotReady));
    s.start().await.unwrap();
    link_by_qr(&fake, &mut rx).await;

    // Send and receive: the fake echoes what is sent to echo@c.us.
    let sent = s
        .call("sendText", &send_args("echo@c.us", "hello"))
        .await
        .unwrap();
    assert!(sent["id"].as_str().unwrap().starts_with("true_echo@c.us_"));
    match next_event(&mut rx).await {
        BrowserEvent::Message(m) => {
            assert_eq!(m["body"], "echo: hello");
            assert_eq!(m["from"], "echo@c.us");
            assert_eq!(m["fromMe"], false);
        }
        other => panic!("expected the echo, got {other:?}"),
    }
    let chats = s.call("chats", &[]).await.unwrap();
    assert_eq!(chats[0]["id"], "echo@c.us");

    // A reload in the middle of a send: 409 (Reloading), then the same route works again, no event.
    let during = s.call("sendText", &send_args("a@c.us", "/reload")).await;
    assert_eq!(during, Err(BrowserError::Reloading));
    let after = call_until(&s, "sendText", &send_args("a@c.us", "again"), |r| {
        r != &Err(BrowserError::Reloading)
    })
    .await;
    assert!(after.is_ok(), "{after:?}");

    // A renderer crash: 503 (PageDead) while a fresh page loads, then calls work again.
    s.crash_renderer_for_test();
    let dead = call_until(&s, "chats", &[], |r| r == &Err(BrowserError::PageDead)).await;
    assert_eq!(dead, Err(BrowserError::PageDead));
    let healed = call_until(&s, "chats", &[], |r| r.is_ok()).await;
    assert!(healed.is_ok(), "{healed:?}");
    assert!(
        rx.try_recv().is_err(),
        "a reload or a recovered crash emits nothing"
    );

    let mem = s.memory();
    assert!(mem.pss_bytes > 0 && mem.rss_bytes >= mem.pss_bytes);
    let seen = s.processes();
    assert!(seen.len() > 1, "a browser and its helpers: {seen:?}");
    s.stop().await.unwrap();
    assert_no_process_left(&s, &seen);

    // The profile is the credential: a restart links without a QR, and so does another "node" that
    // restores the archive into its own directory.
    let archive = profile::archive(s.profile_dir()).unwrap();
    s.start().await.unwrap();
    ready_without_qr(&mut rx).await;
    s.kill().await.unwrap();
    assert!(s.processes().is_empty());

    let other = tempfile::tempdir().unwrap();
    profile::restore(&other.path().join("s1"), &archive).unwrap();
    let (taken, mut rx2) = session(&launcher, other.path(), "s1");
    taken.start().await.unwrap();
    ready_without_qr(&mut rx2).await;
    taken.stop().await.unwrap();
    assert!(taken.processes().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reload_that_never_heals_is_a_disconnect_after_three_grace_windows() {
    let fake = fake_whatsapp().await;
    fake.scanned.store(true, Ordering::SeqCst);
    let dir = tempfile::tempdir().unwrap();
    let launcher = launcher(&fake.url, Duration::from_millis(400));
    let (s, mut rx) = session(&launcher, dir.path(), "s2");
    s.start().await.unwrap();
    // Scanned already: the QR shows, then the phone links at once.
    assert!(matches!(next_event(&mut rx).await, BrowserEvent::Qr(_)));
    ready_without_qr(&mut rx).await;

    // "/break" moves the page where WPP never gets ready: 409 first, then Disconnected.
    let during = s.call("sendText", &send_args("a@c.us", "/break")).await;
    assert_eq!(during, Err(BrowserError::Reloading));
    assert_eq!(s.call("chats", &[]).await, Err(BrowserError::Reloading));
    match next_event(&mut rx).await {
        BrowserEvent::Disconnected(reason) => assert!(reason.contains("three grace windows")),
        other => panic!("expected Disconnected, got {other:?}"),
    }
    assert_eq!(s.call("chats", &[]).await, Err(BrowserError::NotReady));
    let seen = s.processes();
    s.kill().await.unwrap();
    assert_no_process_left(&s, &seen);
}

#[tokio::test]
async fn a_missing_chromium_is_a_clear_launch_error() {
    let dir = tempfile::tempdir().unwrap();
    let launcher = Launcher::new(BrowserConfig {
        chromium_path: dir.path().join("no-chromium"),
        bundle_path: PathBuf::from(FAKE_WPP),
        ..BrowserConfig::default()
    })
    .unwrap();
    let (s, _rx) = session(&launcher, dir.path(), "s3");
    match s.start().await {
        Err(BrowserError::Launch(message)) => assert!(message.contains("Chromium not found")),
        other => panic!("expected a launch error, got {other:?}"),
    }
}
