//! The engine of a kind this build does not carry yet (`browser`, `socket`): every start fails with a
//! message that says so, so the session lands in `failed` with a `lastError` instead of hanging.

use std::sync::Arc;

use async_trait::async_trait;

use super::{
    Capabilities, Engine, EngineContext, EngineError, EngineFactory, EngineKind, EngineResult,
};

pub(crate) struct UnavailableFactory {
    kind: EngineKind,
}

impl UnavailableFactory {
    pub(crate) fn new(kind: EngineKind) -> UnavailableFactory {
        UnavailableFactory { kind }
    }
}

struct UnavailableEngine {
    kind: EngineKind,
}

#[async_trait]
impl Engine for UnavailableEngine {
    async fn start(&self) -> EngineResult<()> {
        Err(EngineError::Rejected(format!(
            "The {} engine is not available in this build; run with ENGINE_TYPE=sim",
            self.kind
        )))
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
        Arc::new(UnavailableEngine { kind: self.kind })
    }

    fn capabilities(&self) -> &Capabilities {
        match self.kind {
            EngineKind::Browser => &Capabilities::BROWSER,
            _ => &Capabilities::SOCKET,
        }
    }

    fn kind(&self) -> EngineKind {
        self.kind
    }

    /// An engine this build lacks never stored anything.
    async fn wipe_credentials(&self, _session_id: &str) -> EngineResult<()> {
        Ok(())
    }
}
