//! What a session does itself with a non-lifecycle engine event, before the event pipeline sees it:
//! remember a presence report for the presence read (`presence.rs`), and reject an incoming call when the
//! session's config says `autoRejectCalls` (re-read from the store on every call, so a config change
//! applies to the next ring). A received status post is recorded by the event path with its event
//! (`messaging/record.rs`).

use std::sync::Arc;

use super::runtime::Runtime;
use crate::engine::{CallEvent, CallPhase, EngineEvent};
use crate::store::sessions as session_store;

/// Runs the session-side effects of `event`; failures are logged, never returned to the engine.
pub(super) async fn before_ingest(runtime: &Runtime, event: &EngineEvent) {
    match event {
        EngineEvent::Call(call) if call.phase == CallPhase::Received => {
            auto_reject_call(runtime, call).await;
        }
        EngineEvent::Presence {
            chat_id,
            participants,
        } => runtime.remember_presence(chat_id, participants),
        _ => {}
    }
}

/// Rejects a ringing call when the session's stored config asks for it. The rejection runs on its own
/// task: an engine call must not hold up the session's event loop.
async fn auto_reject_call(runtime: &Runtime, call: &CallEvent) {
    let wanted = match session_store::get(&runtime.deps.db, &runtime.id).await {
        Ok(record) => record.config.auto_reject_calls,
        Err(err) => {
            tracing::warn!(session_id = %runtime.id, error = %err, "autoRejectCalls not read");
            return;
        }
    };
    let Some(engine) = runtime.engine().filter(|_| wanted) else {
        return;
    };
    let (session_id, call_id) = (runtime.id.clone(), call.call_id.clone());
    tokio::spawn(reject(engine, session_id, call_id));
}

async fn reject(engine: Arc<dyn crate::engine::Engine>, session_id: String, call_id: String) {
    match engine.reject_call(&call_id).await {
        Ok(()) => tracing::info!(
            session_id,
            call_id,
            "incoming call rejected (autoRejectCalls)"
        ),
        Err(err) => tracing::warn!(session_id, call_id, error = %err, "auto-reject failed"),
    }
}
