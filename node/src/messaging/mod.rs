//! Messaging: the rules of every send, the operations on existing messages, message reads from the
//! store, templates, bulk batches, idempotent replays and send pacing. Handlers call
//! `MessagingService`; engines are reached through `SessionService::ready_engine` (409 before any 501),
//! SQL stays in `store/`, media files in `media/`.
//!
//! # Layout
//! - `validate`, `draft`: field rules and send bodies -> `Draft`.
//! - `send`: the send path (ready engine, quote, media, hook, pacing, engine, record).
//! - `record`: `Recorder`, the message store's write path shared with `events::ingest`.
//! - `commit`: `GroupCommit`, the one task that commits waiting message writes together.
//! - `ops`: react, edit, delete, pin, unpin, poll vote, star, chat read.
//! - `reads`: message list, chat history, reactions, media bytes.
//! - `templates`, `bulk`, `idempotency`, `pacing`, `hooks`.
//! - `statuses`: the session's own status posts; `search`: full-text search over stored messages.

pub(crate) mod bulk;
pub(crate) mod commit;
pub(crate) mod draft;
pub(crate) mod error;
pub(crate) mod forward;
pub(crate) mod idempotency;
pub(crate) mod ops;
pub(crate) mod pacing;
mod page_cache;
pub(crate) mod reads;
pub(crate) mod record;
#[cfg(test)]
mod record_tests;
mod resource_media;
mod search;
pub(crate) use resource_media::{
    ResourceMedia, check_media_body, check_picture_body, picture_type,
};
pub(crate) mod send;
mod statuses;
pub(crate) mod templates;
pub(crate) mod validate;

use std::sync::Arc;

pub(crate) use error::{MessagingError, MessagingResult};
pub(crate) use record::Recorder;

use crate::sessions::SessionService;
use crate::store::DataPool;
use pacing::Pacer;

/// The messaging service; one per node, shared by the handlers and the bulk runner.
pub(crate) struct MessagingService {
    db: DataPool,
    sessions: Arc<SessionService>,
    recorder: Recorder,
    /// `None` unless `SEND_PACING_ENABLED=true`.
    pacer: Option<Pacer>,
    /// Converts media for sends that ask for it (`convert: true`, or `ptt` audio that is not Opus).
    converter: Option<crate::media::convert::Converter>,
    /// Message JSON kept between page reads, checked against each row's version.
    page_cache: page_cache::PageCache,
}

impl MessagingService {
    pub(crate) fn new(
        db: DataPool,
        sessions: Arc<SessionService>,
        recorder: Recorder,
        pacer: Option<Pacer>,
    ) -> MessagingService {
        MessagingService {
            db,
            sessions,
            recorder,
            pacer,
            converter: None,
            page_cache: page_cache::PageCache::new(false),
        }
    }

    /// Sends may convert their media with `converter`.
    pub(crate) fn with_converter(mut self, converter: crate::media::convert::Converter) -> Self {
        self.converter = Some(converter);
        self
    }

    /// Whole message pages may be kept between reads: this process is the data DB's only writer of
    /// messages (`page_cache.rs`).
    pub(crate) fn keeping_whole_pages(mut self) -> Self {
        self.page_cache = page_cache::PageCache::new(true);
        self
    }

    /// Waits (at most `budget`) until the event writes queued so far are committed (a stopping process).
    pub(crate) async fn flush_event_writes(&self, budget: std::time::Duration) {
        self.recorder.flush(budget).await;
    }

    /// `MEDIA_DOWNLOAD_MAX_BYTES`: the most media one send may carry.
    pub(crate) fn media_max_bytes(&self) -> u64 {
        self.recorder.media().max_bytes()
    }

    /// 404 for an unknown session.
    pub(crate) async fn check_session(&self, session_id: &str) -> MessagingResult<()> {
        self.sessions.cached_record(session_id).await?;
        Ok(())
    }
}
