//! The session's own status posts: post through the ready engine, keep the post (the key of its media
//! object and its audience) for the status routes, forget it (a tombstone, so deleting it again converges),
//! stream its media back from the media store.
//! The row is built by `events::statuses` and written by the event path's one writer
//! (`Recorder::record_own_status`).

use wagate_proto::Jid;

use super::{MessagingResult, MessagingService};
use crate::engine::{StatusPost, StatusUpdate};
use crate::events::statuses::{self, StatusMedia};
use crate::media::{MediaStream, StoredMedia};
use crate::store::{StoreResult, status_updates};

impl MessagingService {
    /// Posts `post` and records it; `media` (mimetype, the object already in the media store) is what
    /// `status_media` answers later. A post that is live but could not be recorded still answers the
    /// update: failing the request would invite a duplicate retry.
    pub(crate) async fn post_status(
        &self,
        session: &str,
        post: StatusPost,
        media: Option<(&str, &StoredMedia)>,
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

    /// Records that the session deleted its post: the row stays as a tombstone so a repeated delete
    /// answers the same success (`own_status_expiry`).
    pub(crate) async fn forget_status(&self, session: &str, status_id: &str) -> StoreResult<()> {
        statuses::forget(&self.db, session, status_id).await
    }

    /// When the session's own post `status_id` stops (or stopped: deleted or expired) being live, epoch
    /// ms; `None` when the session has no such post stored.
    pub(crate) async fn own_status_expiry(
        &self,
        session: &str,
        status_id: &str,
    ) -> StoreResult<Option<i64>> {
        status_updates::own_expiry(&self.db, session, status_id).await
    }

    /// The stored media of one of the session's statuses as (mimetype, stream); `None` when there is none,
    /// or when its object is missing from the media store (logged: the row outlived its object). A store
    /// that cannot be reached is an error (503), never a 404.
    pub(crate) async fn status_media(
        &self,
        session: &str,
        status_id: &str,
    ) -> MessagingResult<Option<(String, MediaStream)>> {
        match statuses::media(&self.db, session, status_id).await? {
            None => Ok(None),
            Some(StatusMedia::Inline { mimetype, bytes }) => {
                Ok(Some((mimetype, MediaStream::from_bytes(bytes))))
            }
            Some(StatusMedia::Stored { mimetype, key }) => {
                match self.recorder.media().stream(&key).await? {
                    Some(stream) => Ok(Some((mimetype, stream))),
                    None => {
                        tracing::warn!(session_id = session, status_id, %key, "status media object missing from the media store");
                        Ok(None)
                    }
                }
            }
        }
    }
}
