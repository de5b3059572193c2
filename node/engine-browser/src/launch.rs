//! Starting Chromium: the command line (headless, per-session profile, desktop user agent, proxy, flags
//! that keep an idle browser off the network), the DevTools connection, and the node-wide limit on
//! launches running at once (a restart of 100 sessions must not start 100 browsers together).

use std::path::Path;
use std::sync::Arc;

use chromiumoxide::browser::{Browser, BrowserConfig as CdpConfig};
use futures::StreamExt;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::task::JoinHandle;

use crate::config::{BrowserConfig, ConfigError};
use crate::error::BrowserError;

/// Flags on top of chromiumoxide's defaults: no background traffic, no crash reporter (its handler would
/// outlive the browser), no GPU in a container.
const QUIET_FLAGS: &[&str] = &[
    "--disable-gpu",
    "--disable-software-rasterizer",
    "--no-default-browser-check",
    "--disable-component-update",
    "--disable-domain-reliability",
    "--disable-crash-reporter",
    // Memory: no spare renderer kept warm, no back-forward cache, GPU work inside the browser process.
    "--disable-features=TranslateUI,MediaRouter,OptimizationHints,AutofillServerCommunication,CertificateTransparencyComponentUpdater,InterestFeedContentSuggestions,SpareRendererForSitePerProcess,BackForwardCache",
    "--in-process-gpu",
    "--no-pings",
    "--no-service-autorun",
    "--disable-notifications",
    "--window-size=1280,900",
];

/// The node's launcher: the config, the wa-js bundle (read once) and the launch limit. Cheap to clone.
#[derive(Clone)]
pub struct Launcher {
    pub(crate) config: Arc<BrowserConfig>,
    pub(crate) bundle: Arc<String>,
    permits: Arc<Semaphore>,
}

/// A started browser with its DevTools handler task and its process id.
pub(crate) struct Launched {
    pub browser: Browser,
    pub handler: JoinHandle<()>,
    pub pid: Option<u32>,
}

impl Launcher {
    /// Fails when the wa-js bundle is missing (a deployment error the node reports at boot).
    pub fn new(config: BrowserConfig) -> Result<Launcher, ConfigError> {
        let bundle = config.load_bundle()?;
        let permits = Arc::new(Semaphore::new(config.launch_concurrency.max(1)));
        Ok(Launcher {
            config: Arc::new(config),
            bundle: Arc::new(bundle),
            permits,
        })
    }

    pub fn config(&self) -> &BrowserConfig {
        &self.config
    }

    /// Waits for a launch slot; the caller holds it until its page is loading.
    pub(crate) async fn permit(&self) -> Result<OwnedSemaphorePermit, BrowserError> {
        self.permits
            .clone()
            .acquire_owned()
            .await
            .map_err(|_| BrowserError::Launch("launcher closed".into()))
    }

    pub(crate) async fn launch(
        &self,
        profile_dir: &Path,
        proxy_url: Option<&str>,
    ) -> Result<Launched, BrowserError> {
        let cfg = &self.config;
        if !cfg.chromium_path.exists() {
            return Err(BrowserError::Launch(format!(
                "Chromium not found at {} (install Debian's chromium or set CHROMIUM_PATH)",
                cfg.chromium_path.display()
            )));
        }
        std::fs::create_dir_all(profile_dir)
            .map_err(|e| BrowserError::Launch(format!("profile directory: {e}")))?;
        let mut builder = CdpConfig::builder()
            .chrome_executable(&cfg.chromium_path)
            .user_data_dir(profile_dir)
            .new_headless_mode()
            .request_timeout(cfg.protocol_timeout)
            .launch_timeout(cfg.launch_timeout)
            .viewport(None)
            .hide()
            .arg(format!("--user-agent={}", cfg.user_agent))
            .args(QUIET_FLAGS.iter().copied());
        if let Some(proxy) = proxy_url {
            builder = builder.arg(format!("--proxy-server={proxy}"));
        }
        if running_as_root() {
            // Chromium's sandbox refuses root; containers run the gateway as root by default.
            builder = builder.no_sandbox();
        }
        let config = builder.build().map_err(BrowserError::Launch)?;
        let (mut browser, mut handler) = Browser::launch(config)
            .await
            .map_err(|e| BrowserError::Launch(e.to_string()))?;
        let pid = browser.get_mut_child().and_then(|c| c.as_mut_inner().id());
        let handler = tokio::spawn(async move {
            // Each item is one DevTools message handled; errors are per message, the loop ends with the
            // connection.
            while let Some(item) = handler.next().await {
                if let Err(err) = item {
                    tracing::debug!(error = %err, "devtools message");
                }
            }
        });
        Ok(Launched {
            browser,
            handler,
            pid,
        })
    }
}

fn running_as_root() -> bool {
    // SAFETY: geteuid(2) has no preconditions and cannot fail.
    unsafe { libc::geteuid() == 0 }
}
