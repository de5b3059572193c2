//! The session's own status posts: post through the ready engine, keep the post (its media and audience)
//! for the status routes, forget it, read its media back. The row is built by `events::statuses` and
//! written by the event path's one writer (`Recorder::record_own_status`).

use wagate_proto::Jid;

use super::{MessagingResult, MessagingService};
use crate::engine::{StatusPost, StatusUpdate};
use crate::events::statuses;
use crate::store::StoreResult;

impl MessagingService {
    /// Posts `post` and records it; `media` (mimetype, bytes) is what `status_media` answers later. A post
    /// that is live but could not be recorded still answers the update: failing the request would invite a
    /// duplicate retry.
    pub(crate) async fn post_status(
        &self,
        session: &str,
        post: StatusPost,
        media: Option<(&str, &[u8])>,
    ) -> MessagingResult<StatusUpdate> {
        let engine = self.sessions.ready_engine(session)?;
        let audience: Vec<Jid> = post.recipients.clone();
        let update = engine.post_status(post).await?;
        let row = statuses::own_row(session, &update, media, &audience);
        if let Err(err) = self.recorder.record_own_status(row).await {
            tracing::warn!(session_id = session, error = %err, "own status post not persisted");
        }
        Ok(update)
    }

    pub(crate) async fn forget_status(&self, session: &str, status_id: &str) -> StoreResult<()> {
        statuses::forget(&self.db, session, status_id).await
    }

    /// The stored media of one of the session's statuses as (mimetype, bytes); `None` when there is none.
    pub(crate) async fn status_media(
        &self,
        session: &str,
        status_id: &str,
    ) -> StoreResult<Option<(String, Vec<u8>)>> {
        statuses::media(&self.db, session, status_id).await
    }
}
