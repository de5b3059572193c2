//! `Ingest`: what happens to an engine event that is not about the session's lifecycle (messages, acks,
//! reactions, groups, calls, presence, statuses). Message-related events go to the message store's
//! `Recorder` (row + outbox rows in one transaction); the rest are normalised and published as they are.

use super::Pipeline;
use super::normalise::normalise;
use crate::engine::EngineEvent;
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

    pub(crate) async fn handle(&self, session_id: &str, event: EngineEvent) {
        if Recorder::records(&event) {
            if let Err(err) = self.recorder.record_event(session_id, &event).await {
                tracing::error!(session_id, error = %err, "message event could not be persisted");
            }
            return;
        }
        let Some(event) = normalise(session_id, &event) else {
            return;
        };
        let name = event.name;
        if let Err(err) = self.pipeline.publish(event).await {
            tracing::error!(session_id, event = name.as_str(), error = %err, "event could not be persisted");
        }
    }
}
