//! The `browser` engine as the engine API sees it: `BrowserFactory` and `BrowserEngine` implement
//! `wagate_engine_api`'s `EngineFactory` and `Engine` over this crate's `BrowserSession` (one Chromium per
//! session driving WhatsApp Web). This folder only translates: lifecycle and the profile archive here,
//! events in `events.rs`, operations and error mapping in `ops.rs`, the facade's answers in `page.rs`.
//! Chromium, the page and the bridge are the rest of the crate. What it touches of the node goes through
//! the `EngineContext` it is handed: events, and the profile archive stored through `EngineContext::store`.

mod events;
mod media;
mod ops;
mod page;
#[cfg(test)]
mod tests;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use parking_lot::Mutex;
use tokio::task::JoinHandle;
use wagate_engine_api::{
    Capabilities, Engine, EngineContext, EngineError, EngineFactory, EngineKind, EngineResult,
    LinkedAccount,
};

use crate::{BrowserSession, Launcher, SessionOptions, profile};

/// How often a running session's memory is published.
const MEMORY_EVERY: Duration = Duration::from_secs(15);

/// Builds browser engines over one node-wide launcher (config, wa-js bundle, launch limit).
pub struct BrowserFactory {
    launcher: Launcher,
    /// The node's sessions directory: a session's profile is `<sessions_dir>/<id>/browser`, the data dir
    /// the supervisor hands this kind of engine.
    sessions_dir: PathBuf,
}

impl BrowserFactory {
    pub fn new(launcher: Launcher, sessions_dir: PathBuf) -> Self {
        Self {
            launcher,
            sessions_dir,
        }
    }
}

impl BrowserFactory {
    /// The concrete engine (`create` hands it out as a trait object).
    fn build(&self, ctx: EngineContext) -> Arc<BrowserEngine> {
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
        let opts = SessionOptions {
            session_id: ctx.session_id.clone(),
            profile_dir: ctx.data_dir.clone(),
            proxy_url: ctx.proxy_url.clone(),
        };
        let session = BrowserSession::new(self.launcher.clone(), opts, tx);
        let account = Arc::new(Mutex::new(ctx.linked.clone()));
        let pump = tokio::spawn(events::forward(
            rx,
            ctx.events.clone(),
            account.clone(),
            session.clone(),
            ctx.media.clone(),
        ));
        Arc::new(BrowserEngine {
            ctx,
            session,
            account,
            tasks: Mutex::new(vec![pump]),
        })
    }
}

#[async_trait]
impl EngineFactory for BrowserFactory {
    fn create(&self, ctx: EngineContext) -> Arc<dyn Engine> {
        self.build(ctx)
    }

    fn capabilities(&self) -> &Capabilities {
        &Capabilities::BROWSER
    }

    fn kind(&self) -> EngineKind {
        EngineKind::Browser
    }

    /// The profile directory is the browser's own credential (the archive of it in the node's store is
    /// deleted by the node): without it the next start shows a QR.
    async fn wipe_credentials(&self, session_id: &str) -> EngineResult<()> {
        let dir = self
            .sessions_dir
            .join(session_id)
            .join(EngineKind::Browser.as_str());
        tokio::task::spawn_blocking(move || profile::delete(&dir))
            .await
            .map_err(|e| EngineError::Network(e.to_string()))?
            .map_err(|e| EngineError::Network(format!("browser profile not deleted: {e}")))
    }
}

/// One session's browser engine; a fresh instance per launch (the supervisor's rule).
pub(crate) struct BrowserEngine {
    ctx: EngineContext,
    session: BrowserSession,
    /// The linked account (stored credentials, or what the page reported), for the profile archive.
    account: Arc<Mutex<Option<LinkedAccount>>>,
    tasks: Mutex<Vec<JoinHandle<()>>>,
}

impl Drop for BrowserEngine {
    fn drop(&mut self) {
        for task in self.tasks.lock().drain(..) {
            task.abort();
        }
    }
}

impl BrowserEngine {
    pub(super) fn session(&self) -> &BrowserSession {
        &self.session
    }

    /// Restores the profile from the stored archive when this node has none (a takeover), then launches.
    async fn start_browser(&self) -> EngineResult<()> {
        let dir = self.ctx.data_dir.clone();
        let archive = self
            .ctx
            .linked
            .as_ref()
            .and_then(|a| STANDARD.decode(&a.credentials).ok())
            .filter(|bytes| !bytes.is_empty());
        if let Some(bytes) = archive
            && !profile::exists(&dir)
        {
            let restored = tokio::task::spawn_blocking(move || profile::restore(&dir, &bytes))
                .await
                .map_err(|e| EngineError::Network(e.to_string()))?;
            if let Err(err) = restored {
                tracing::warn!(session_id = %self.ctx.session_id, error = %err, "browser profile not restored");
            }
        }
        self.session.start().await.map_err(ops::lifecycle_error)?;
        self.tasks.lock().push(tokio::spawn(publish_memory(
            self.ctx.session_id.clone(),
            self.session.clone(),
        )));
        Ok(())
    }

    /// Stops the browser, then stores the profile archive as the session's credentials so another node
    /// can take over without a QR.
    async fn stop_browser(&self, graceful: bool) -> EngineResult<()> {
        let stopped = if graceful {
            self.session.stop().await
        } else {
            self.session.kill().await
        };
        stopped.map_err(ops::lifecycle_error)?;
        self.store_profile().await;
        Ok(())
    }

    async fn store_profile(&self) {
        let Some(mut account) = self.account.lock().clone() else {
            return;
        };
        let dir = self.ctx.data_dir.clone();
        if !profile::exists(&dir) {
            return;
        }
        let archived = tokio::task::spawn_blocking(move || profile::archive(&dir)).await;
        let bytes = match archived {
            Ok(Ok(bytes)) => bytes,
            Ok(Err(err)) => {
                tracing::warn!(session_id = %self.ctx.session_id, error = %err, "browser profile not archived");
                return;
            }
            Err(err) => {
                tracing::warn!(session_id = %self.ctx.session_id, error = %err, "browser profile archive task failed");
                return;
            }
        };
        account.credentials = STANDARD.encode(bytes);
        let saved = self
            .ctx
            .store
            .save_credentials(&self.ctx.session_id, EngineKind::Browser, &account)
            .await;
        if let Err(err) = saved {
            tracing::warn!(session_id = %self.ctx.session_id, error = %err, "browser profile archive not stored");
        }
    }
}

/// Publishes the session's memory (PSS and RSS of its whole process tree) until the engine is dropped.
async fn publish_memory(session_id: String, session: BrowserSession) {
    loop {
        let mem = session.memory();
        metrics::gauge!("wagate_browser_session_memory_bytes", "session_id" => session_id.clone(), "kind" => "pss")
            .set(mem.pss_bytes as f64);
        metrics::gauge!("wagate_browser_session_memory_bytes", "session_id" => session_id.clone(), "kind" => "rss")
            .set(mem.rss_bytes as f64);
        tokio::time::sleep(MEMORY_EVERY).await;
    }
}
