//! The engine of a kind this build does not carry yet (`browser`, `socket`): every start fails with a
//! message that says so, so the session lands in `failed` with a `lastError` instead of hanging.

use std::sync::Arc;

use async_trait::async_trait;

use super::{
    Capabilities, Engine, EngineContext, EngineError, EngineFactory, EngineKind, EngineResult,
};

pub(crate) struct UnavailableFactory {
    kind: EngineKind,
    reason: Option<String>,
}

impl UnavailableFactory {
    pub(crate) fn new(kind: EngineKind) -> UnavailableFactory {
        UnavailableFactory { kind, reason: None }
    }

    /// An engine kind this build carries but cannot run on this host (`reason` becomes `lastError`).
    pub(crate) fn broken(kind: EngineKind, reason: String) -> UnavailableFactory {
        UnavailableFactory {
            kind,
            reason: Some(reason),
        }
    }
}

struct UnavailableEngine {
    kind: EngineKind,
    reason: Option<String>,
}

#[async_trait]
impl Engine for UnavailableEngine {
    async fn start(&self) -> EngineResult<()> {
        if let Some(reason) = &self.reason {
            return Err(EngineError::Rejected(reason.clone()));
        }
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

impl EngineFactory for UnavailableFactory {
    fn create(&self, _ctx: EngineContext) -> Arc<dyn Engine> {
        Arc::new(UnavailableEngine {
            kind: self.kind,
            reason: self.reason.clone(),
        })
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
}
