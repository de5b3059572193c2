//! `Ingest`: what happens to an engine event that is not about the session's lifecycle (messages, acks,
//! reactions, groups, calls, presence, statuses): normalise it and hand it to the pipeline. The message
//! store hooks in here so a message and its outbox rows commit in one transaction.

use super::Pipeline;
use super::normalise::normalise;
use crate::engine::EngineEvent;

#[derive(Clone)]
pub(crate) struct Ingest {
    pipeline: Pipeline,
}

impl Ingest {
    pub(crate) fn new(pipeline: Pipeline) -> Ingest {
        Ingest { pipeline }
    }

    pub(crate) async fn handle(&self, session_id: &str, event: EngineEvent) {
        let Some(event) = normalise(session_id, &event) else {
            return;
        };
        let name = event.name;
        if let Err(err) = self.pipeline.publish(event).await {
            tracing::error!(session_id, event = name.as_str(), error = %err, "event could not be persisted");
        }
    }
}
