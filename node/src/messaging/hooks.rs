//! Named hook points of the send path. Plugins are not implemented yet: each hook is a no-op that marks
//! where they will run, so the call sites do not move when they arrive.

use crate::engine::OutgoingMessage;

/// The `message:sending` hook: runs after validation, before pacing and the engine send.
pub(crate) const MESSAGE_SENDING: &str = "message:sending";

/// Runs the `message:sending` hook (no plugin host yet, so nothing happens).
pub(crate) fn message_sending(session_id: &str, msg: &OutgoingMessage) {
    tracing::trace!(hook = MESSAGE_SENDING, session_id, to = %msg.to, "hook point");
}
