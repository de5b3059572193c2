//! `EngineError`: why an engine call failed, in engine terms. Engines produce it; only `http/error.rs`
//! turns it into a status, and nothing here knows about HTTP beyond the documented mapping.

use super::op::Op;

/// Why an engine call failed, in engine terms. `http/error.rs` maps each variant to one status:
/// `NotSupported` 501, `NotReady` 409, `Timeout` 503, `Rejected` 403, `NotFound` 404, `BadInput` 400,
/// `Network` 503, `Busy` 409 (retryable), `Internal` 500.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EngineError {
    #[error("Operation not supported by the active engine: {0}")]
    NotSupported(Op),
    #[error("Session is not connected")]
    NotReady,
    #[error("The network did not answer in time")]
    Timeout,
    #[error("{0}")]
    Rejected(String),
    #[error("{0}")]
    NotFound(String),
    #[error("{0}")]
    BadInput(String),
    #[error("{0}")]
    Network(String),
    #[error("{0}")]
    Busy(String),
    /// A failure the spec leaves at 500: a dead browser page (or its unanswered call) on the routes that
    /// never answer 503 (group and channel create, media sends, status posts, call-link create).
    #[error("{0}")]
    Internal(String),
}

pub type EngineResult<T> = Result<T, EngineError>;
