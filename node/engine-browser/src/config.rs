//! `BrowserConfig`: everything one node's browser engine is tuned with. The node fills it from its
//! validated environment (`CHROMIUM_PATH`, `BROWSER_PROTOCOL_TIMEOUT_MS`, `BROWSER_MAX_RSS_MB`, ...);
//! tests shrink the windows. No environment reading here.

use std::path::{Path, PathBuf};
use std::time::Duration;

/// Where the container image puts the pinned wa-js bundle (the Dockerfile's `wajs` stage).
pub const INSTALLED_BUNDLE_PATH: &str = "/usr/share/wagate/wa-js/wppconnect-wa.js";

/// Where the pinned wa-js bundle lands when `scripts/lib.sh` (or `npm ci` in `js/`) installs it.
pub const DEFAULT_BUNDLE_PATH: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/js/node_modules/@wppconnect/wa-js/dist/wppconnect-wa.js"
);

/// WhatsApp Web.
pub const DEFAULT_URL: &str = "https://web.whatsapp.com/";

/// A current desktop Chrome on Linux: WhatsApp Web refuses headless and unknown browsers.
pub const DESKTOP_USER_AGENT: &str = "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/142.0.0.0 Safari/537.36";

/// The spec's page re-inject grace (a build-time constant): a reload answers 409 while it heals, and a
/// 409 outlasting three of these windows is a disconnect.
pub const NAVIGATION_REINJECT_GRACE_MS: u64 = 60_000;

/// Debian's real binary (the `/usr/bin/chromium` wrapper only adds a shell start and distro flags).
pub fn default_chromium_path() -> PathBuf {
    let real = Path::new("/usr/lib/chromium/chromium");
    if real.exists() {
        real.to_path_buf()
    } else {
        PathBuf::from("/usr/bin/chromium")
    }
}

/// The bundle `BROWSER_WAJS_PATH` defaults to: the image's copy when it is there, else the source tree's
/// npm install (a build from source; a missing file is reported at boot, naming the path).
pub fn default_bundle_path() -> PathBuf {
    let installed = Path::new(INSTALLED_BUNDLE_PATH);
    if installed.exists() {
        installed.to_path_buf()
    } else {
        PathBuf::from(DEFAULT_BUNDLE_PATH)
    }
}

#[derive(Debug, Clone)]
pub struct BrowserConfig {
    /// The Chromium executable (`CHROMIUM_PATH`); never a downloaded browser.
    pub chromium_path: PathBuf,
    /// The wa-js bundle injected before the facade.
    pub bundle_path: PathBuf,
    /// The page every session opens (`BROWSER_WEB_URL`).
    pub url: String,
    pub user_agent: String,
    /// Budget of one DevTools request (`BROWSER_PROTOCOL_TIMEOUT_MS`, 180000).
    pub protocol_timeout: Duration,
    /// Budget of one call into the page (the engine's 30-second budget); 503 after it.
    pub call_budget: Duration,
    /// How long a page with a stored profile may take to authenticate before its QR is shown (30000).
    pub auth_wait: Duration,
    /// The re-inject grace window (`NAVIGATION_REINJECT_GRACE_MS`).
    pub reinject_grace: Duration,
    /// Memory ceiling of one session's process tree, in MiB (`BROWSER_MAX_RSS_MB`); 0 = none.
    pub max_rss_mb: u64,
    /// How often the watchdog re-injects a reloading page and reads memory.
    pub watch_interval: Duration,
    /// Chromium launches running at once (`BROWSER_LAUNCH_CONCURRENCY`).
    pub launch_concurrency: usize,
    /// Budget of Chromium's start-up (until its DevTools endpoint answers).
    pub launch_timeout: Duration,
}

impl Default for BrowserConfig {
    fn default() -> Self {
        Self {
            chromium_path: default_chromium_path(),
            bundle_path: default_bundle_path(),
            url: DEFAULT_URL.to_string(),
            user_agent: DESKTOP_USER_AGENT.to_string(),
            protocol_timeout: Duration::from_millis(180_000),
            call_budget: Duration::from_secs(30),
            auth_wait: Duration::from_millis(30_000),
            reinject_grace: Duration::from_millis(NAVIGATION_REINJECT_GRACE_MS),
            max_rss_mb: 1024,
            watch_interval: Duration::from_secs(5),
            launch_concurrency: 2,
            launch_timeout: Duration::from_secs(30),
        }
    }
}

/// Why a `BrowserConfig` cannot run.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    #[error(
        "the wa-js bundle is missing at {0}: run `npm ci` in node/engine-browser/js or set BROWSER_WAJS_PATH"
    )]
    BundleMissing(String),
}

impl BrowserConfig {
    /// Reads the bundle once; the caller keeps it for every injection.
    pub fn load_bundle(&self) -> Result<String, ConfigError> {
        std::fs::read_to_string(&self.bundle_path)
            .map_err(|_| ConfigError::BundleMissing(self.bundle_path.display().to_string()))
    }
}
