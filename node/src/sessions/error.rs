//! `SessionError`: why a session operation failed, in session terms; `http/error.rs` maps it to a status.

use super::state::TransitionError;
use crate::cluster::lease::LeaseError;
use crate::engine::EngineError;
use crate::store::StoreError;

#[derive(Debug, thiserror::Error)]
pub(crate) enum SessionError {
    #[error("Session {0} not found")]
    NotFound(String),
    #[error("Session '{0}' already exists")]
    NameTaken(String),
    #[error("{0}")]
    BadInput(String),
    #[error("Session is not connected")]
    NotConnected,
    #[error("{0}")]
    Transition(#[from] TransitionError),
    #[error("A credential teardown for this session is in progress; retry shortly")]
    TeardownPending,
    #[error("Session stop did not complete: graceful disconnect and forced teardown both failed")]
    StopIncomplete,
    #[error("Session stopped locally, but the device unlink did not complete")]
    LogoutIncomplete,
    /// A stop, logout, force-kill or delete ended the run a start launched before the start answered.
    #[error("Session was stopped while it was starting")]
    StartInterrupted,
    #[error("Session did not finish initializing within {0} ms")]
    StartTimeout(u64),
    #[error("No QR code is available for this session")]
    NoQr,
    #[error("Drain needs a cluster (REDIS_ENABLED=true)")]
    NotClustered,
    #[error(transparent)]
    Lease(#[from] LeaseError),
    #[error(transparent)]
    Engine(#[from] EngineError),
    #[error(transparent)]
    Store(StoreError),
}

impl From<StoreError> for SessionError {
    fn from(err: StoreError) -> Self {
        match err {
            StoreError::Conflict { what } => SessionError::NameTaken(what),
            StoreError::SessionGone(id) => SessionError::NotFound(id),
            other => SessionError::Store(other),
        }
    }
}

pub(crate) type SessionResult<T> = Result<T, SessionError>;
