//! `Ingest`: what happens to an engine event that is not about the session's lifecycle (messages, acks,
//! reactions, groups, calls, presence, statuses). Events with a row (messages and their acks, revokes,
//! edits, reactions, history, poll votes, status posts) go to the message store's `Recorder` (row +
//! outbox rows in one transaction); the rest are normalised and published as they are, retried through a
//! database outage when the network will not send them again.

use super::Pipeline;
use super::normalise::normalise;
use super::pipeline::settle;
use crate::engine::{Ack, EngineEvent};
use crate::messaging::Recorder;

#[derive(Clone)]
pub(crate) struct Ingest {
    pipeline: Pipeline,
    recorder: Recorder,
}

impl Ingest {
    pub(crate) fn new(pipeline: Pipeline, recorder: Recorder) -> Ingest {
        Ingest { pipeline, recorder }
    }

    /// Waits (at most `budget`) until the event writes queued so far are committed.
    pub(crate) async fn flush(&self, budget: std::time::Duration) {
        self.recorder.flush(budget).await;
    }

    /// Persists and publishes `event`; `ack` (the network's acknowledgement of its traffic) is settled once
    /// the event's transaction committed, or by the failure rule of `pipeline::settle`.
    pub(crate) async fn handle(&self, session_id: &str, mut event: EngineEvent, ack: Ack) {
        super::nul::strip_nul(&mut event);
        if Recorder::records(&event) {
            return self.recorder.record_event(session_id, &event, ack).await;
        }
        let Some(event) = normalise(session_id, &event) else {
            return ack.complete();
        };
        // An event the network will not send again is retried through a database outage (the session's
        // event loop waits meanwhile, so its later events keep their order).
        let result = if ack.is_owed() {
            self.pipeline.publish(event).await
        } else {
            self.pipeline.publish_kept(event).await
        };
        settle(ack, session_id, &result);
    }
}
