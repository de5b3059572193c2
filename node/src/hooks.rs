//! The named hook points where plugins will run, as one small registry: the `Hooks` trait, one method per
//! point, every method a no-op by default. Call sites call `hooks()`; the plugin host (not built yet) will
//! answer its own implementation there, so the call sites do not move when plugins arrive. Hooks observe;
//! they cannot veto or rewrite yet (that needs the plugin design's rules first).

use wagate_proto::SessionStatus;

use crate::engine::{InboundMessage, OutgoingMessage};
use crate::events::Event;

/// What runs at each hook point (named as plugin configuration names them). Every method defaults to
/// nothing.
pub(crate) trait Hooks: Send + Sync {
    /// `message:received`: a message from the network, before it is recorded.
    fn message_received(&self, _session_id: &str, _msg: &InboundMessage) {}
    /// `message:sending`: a send, after validation, before pacing and the engine.
    fn message_sending(&self, _session_id: &str, _msg: &OutgoingMessage) {}
    /// `webhook:before`: an event, before its webhook outbox rows are written.
    fn webhook_before(&self, _event: &Event) {}
    /// `session:status`: a session changed status (before `session.status` goes out).
    fn session_status(&self, _session_id: &str, _status: SessionStatus) {}
    /// `session:error`: a session's engine failed (the state table's error effect).
    fn session_error(&self, _session_id: &str, _error: Option<&str>) {}
}

/// The default: no plugin host, nothing runs.
struct NoHooks;

impl Hooks for NoHooks {}

static NO_HOOKS: NoHooks = NoHooks;

/// The hooks in force.
pub(crate) fn hooks() -> &'static dyn Hooks {
    &NO_HOOKS
}
