//! The engine of a kind this build carries but this host cannot run (the browser engine without its
//! Chromium or wa-js bundle): every start fails with the reason, so the session lands in `failed` with a
//! `lastError` instead of hanging, and the node's other routes stay usable.

use std::sync::Arc;

use async_trait::async_trait;

use super::{
    Capabilities, Engine, EngineContext, EngineError, EngineFactory, EngineKind, EngineResult,
};

pub(crate) struct UnavailableFactory {
    kind: EngineKind,
    reason: String,
}

impl UnavailableFactory {
    /// An engine kind this build carries but cannot run on this host (`reason` becomes `lastError`).
    pub(crate) fn broken(kind: EngineKind, reason: String) -> UnavailableFactory {
        UnavailableFactory { kind, reason }
    }
}

struct UnavailableEngine {
    reason: String,
}

#[async_trait]
impl Engine for UnavailableEngine {
    async fn start(&self) -> EngineResult<()> {
        Err(EngineError::Rejected(self.reason.clone()))
    }
    async fn stop(&self) -> EngineResult<()> {
        Ok(())
    }
    async fn kill(&self) -> EngineResult<()> {
        Ok(())
    }
    async fn logout(&self) -> EngineResult<()> {
        Ok(())
    }
}

#[async_trait]
impl EngineFactory for UnavailableFactory {
    fn create(&self, _ctx: EngineContext) -> Arc<dyn Engine> {
        Arc::new(UnavailableEngine {
            reason: self.reason.clone(),
        })
    }

    fn capabilities(&self) -> &Capabilities {
        match self.kind {
            EngineKind::Browser => &Capabilities::BROWSER,
            // The sim follows the socket column.
            EngineKind::Socket | EngineKind::Sim => &Capabilities::SOCKET,
        }
    }

    fn kind(&self) -> EngineKind {
        self.kind
    }

    /// An engine that never started never stored anything.
    async fn wipe_credentials(&self, _session_id: &str) -> EngineResult<()> {
        Ok(())
    }
}
