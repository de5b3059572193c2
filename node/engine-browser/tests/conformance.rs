//! The browser engine against the engine conformance checks (`wagate_engine_api::conformance`), over a
//! real (Debian) Chromium and the loopback fake WhatsApp Web: the fake's "phone" scans the QR, another
//! account's message arrives through the fake's inbound queue, and the credential wipe is the factory
//! deleting the profile directory the checks' sessions run in.

use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::time::Duration;

use async_trait::async_trait;
use wagate_engine_api::conformance::{self, Driver};
use wagate_engine_browser::{BrowserConfig, BrowserFactory, Launcher, default_chromium_path};
use wagate_proto::Jid;

#[path = "fake/server.rs"]
mod fake_server;
use fake_server::{FAKE_WPP, FakeWhatsApp, fake_whatsapp};

const PEER: &str = "15550002222@c.us";

struct FakeDriver {
    fake: FakeWhatsApp,
    /// The factory's sessions directory: a session's profile is `<sessions>/<id>/browser`.
    sessions: PathBuf,
}

#[async_trait]
impl Driver for FakeDriver {
    async fn link(&self, _session_id: &str) -> Result<(), String> {
        self.fake.scanned.store(true, Ordering::SeqCst);
        Ok(())
    }

    fn peer(&self) -> Jid {
        Jid::parse(PEER).expect("test JID")
    }

    /// Called once the session is ready: the phone has done its scan, so it stops answering "scanned"
    /// and the fresh profile after the credential wipe shows its QR.
    async fn deliver(&self, _session_id: &str, from: &Jid, body: &str) -> Result<(), String> {
        self.fake.scanned.store(false, Ordering::SeqCst);
        self.fake.deliver(&from.to_string(), body);
        Ok(())
    }

    fn data_dir(&self, session_id: &str) -> PathBuf {
        self.sessions.join(session_id).join("browser")
    }

    /// Each start launches a Chromium on a machine shared with builds.
    fn event_wait(&self) -> Duration {
        Duration::from_secs(60)
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_browser_engine_passes_the_conformance_checks() {
    let dir = tempfile::tempdir().expect("temp dir");
    let fake = fake_whatsapp().await;
    let chromium = std::env::var_os("CHROMIUM_PATH")
        .map(PathBuf::from)
        .unwrap_or_else(default_chromium_path);
    let launcher = Launcher::new(BrowserConfig {
        chromium_path: chromium,
        bundle_path: PathBuf::from(FAKE_WPP),
        url: fake.url.clone(),
        auth_wait: Duration::from_millis(500),
        watch_interval: Duration::from_millis(100),
        ..BrowserConfig::default()
    })
    .expect("launcher");
    let sessions = dir.path().join("sessions");
    let factory = BrowserFactory::new(launcher, sessions.clone());
    let driver = FakeDriver { fake, sessions };
    let outcome = conformance::run_all(&factory, &driver, "conformance-browser").await;
    assert_eq!(outcome, Ok(()));
}
