//! `Ingest`: what happens to an engine event that is not about the session's lifecycle (messages, acks,
//! reactions, groups, calls, presence, statuses). Events with a row (messages and their acks, revokes,
//! edits, reactions, history, poll votes, status posts) go to the message store's `Recorder` (row +
//! outbox rows in one transaction); the rest are normalised and published as they are, retried through a
//! database outage when the network will not send them again.

use super::normalise::normalise;
use super::pipeline::{FIRST_RETRY_PAUSE, KEEP_RETRYING, MAX_RETRY_PAUSE, is_permanent, settle};
use super::{Event, Pipeline};
use crate::engine::{Ack, EngineEvent};
use crate::messaging::Recorder;
use crate::store::StoreResult;

#[derive(Clone)]
pub(crate) struct Ingest {
    pipeline: Pipeline,
    recorder: Recorder,
}

impl Ingest {
    pub(crate) fn new(pipeline: Pipeline, recorder: Recorder) -> Ingest {
        Ingest { pipeline, recorder }
    }

    /// Persists and publishes `event`; `ack` (the network's acknowledgement of its traffic) is settled once
    /// the event's transaction committed, or by the failure rule of `pipeline::settle`.
    pub(crate) async fn handle(&self, session_id: &str, event: EngineEvent, ack: Ack) {
        if Recorder::records(&event) {
            return self.recorder.record_event(session_id, &event, ack).await;
        }
        let Some(event) = normalise(session_id, &event) else {
            return ack.complete();
        };
        let result = self.publish_kept(event, ack.is_owed()).await;
        settle(ack, session_id, &result);
    }

    /// Publishes; an event the network will not send again (`!is_owed`) whose write failed only for the
    /// moment is tried again, with growing pauses, for up to `KEEP_RETRYING` (the session's event loop
    /// waits meanwhile, so its later events keep their order).
    async fn publish_kept(&self, event: Event, is_owed: bool) -> StoreResult<()> {
        let deadline = tokio::time::Instant::now() + KEEP_RETRYING;
        let mut pause = FIRST_RETRY_PAUSE;
        loop {
            match self.pipeline.publish(event.clone()).await {
                Err(e)
                    if !is_owed && !is_permanent(&e) && tokio::time::Instant::now() < deadline =>
                {
                    tracing::warn!(session_id = %event.session_id, error = %e, "event not persisted yet; retrying");
                    tokio::time::sleep(pause).await;
                    pause = (pause * 2).min(MAX_RETRY_PAUSE);
                }
                result => return result,
            }
        }
    }
}
