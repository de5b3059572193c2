//! `MessagingError`: why a send, an operation, a batch or a template call failed, in service terms.
//! Only `http/error.rs` turns it into a status.

use crate::engine::EngineError;
use crate::media::MediaError;
use crate::sessions::SessionError;
use crate::store::StoreError;

#[derive(Debug, thiserror::Error)]
pub(crate) enum MessagingError {
    #[error("{0}")]
    BadInput(String),
    #[error("{0}")]
    NotFound(String),
    /// Same Idempotency-Key, different request (422).
    #[error("{0}")]
    Unprocessable(String),
    /// The opt-in send pacing governor refused (429 SEND_PACING_LIMITED).
    #[error("Send refused by send pacing ({rule}); retry in {retry_after_seconds} s")]
    Paced {
        rule: &'static str,
        retry_after_seconds: u64,
    },
    #[error(transparent)]
    Media(#[from] MediaError),
    #[error(transparent)]
    Session(#[from] SessionError),
    #[error(transparent)]
    Engine(#[from] EngineError),
    #[error(transparent)]
    Store(#[from] StoreError),
    /// A send's media conversion failed (503 unavailable/queue full/timeout, 413 output cap, 400 input).
    #[error(transparent)]
    Convert(#[from] crate::media::convert::ConvertError),
}

pub(crate) type MessagingResult<T> = Result<T, MessagingError>;

pub(crate) fn bad(message: impl Into<String>) -> MessagingError {
    MessagingError::BadInput(message.into())
}

pub(crate) fn message_not_found(id: &str) -> MessagingError {
    MessagingError::NotFound(format!("Message {id} not found"))
}
