//! What an engine is handed (`EngineContext`), which engine family serves the node (`EngineKind`, the
//! `ENGINE_TYPE` knob's enum) and the `EngineFactory` the node holds. Built by the supervisor and boot code; no
//! engine behaviour lives here.

use async_trait::async_trait;

use super::Engine;
use super::ack::EventSender;
use super::error::EngineResult;
use super::event::LinkedAccount;
use super::media::{EngineMedia, MemoryMedia};
use super::op::Capabilities;
use super::reconnect::ReconnectPolicy;
use super::store::{EmptyStore, EngineStore};
use std::fmt;
use std::path::PathBuf;
use std::sync::Arc;

/// Everything an engine instance is given, and all it may touch of the node. Created by the supervisor
/// per start.
#[derive(Clone)]
pub struct EngineContext {
    pub session_id: String,
    /// Events, each with the acknowledgement its traffic is owed (`ack.rs`). Unbounded: engines emit while
    /// holding their own locks; the supervisor drains its channel in one loop and applies no backpressure.
    pub events: EventSender,
    /// This session's engine auth directory (keyed by session id).
    pub data_dir: PathBuf,
    pub proxy_url: Option<String>,
    /// Credentials stored after an earlier link; `None` means the engine must link (QR or pairing).
    pub linked: Option<LinkedAccount>,
    /// The node's data an engine may read and write (chats, contacts, push names, stored messages,
    /// statuses), keyed by session id.
    pub store: Arc<dyn EngineStore>,
    /// The node's media store, by key.
    pub media: Arc<dyn EngineMedia>,
    /// The session's reconnect policy for this start. An engine that reconnects by itself schedules its
    /// attempts with it (`ReconnectPolicy::next_attempt`); one that hands drops back ignores it.
    pub reconnect: ReconnectPolicy,
}

impl EngineContext {
    /// A context outside a node: an empty store and a media store in memory, files under the system's
    /// temporary directory. For engines under test and the conformance checks.
    pub fn standalone(
        session_id: impl Into<String>,
        events: EventSender,
        linked: Option<LinkedAccount>,
    ) -> EngineContext {
        let session_id = session_id.into();
        EngineContext {
            data_dir: std::env::temp_dir().join("wagate-engine").join(&session_id),
            session_id,
            events,
            proxy_url: None,
            linked,
            store: Arc::new(EmptyStore),
            media: Arc::new(MemoryMedia::default()),
            reconnect: ReconnectPolicy::default(),
        }
    }
}

impl fmt::Debug for EngineContext {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EngineContext")
            .field("session_id", &self.session_id)
            .field("data_dir", &self.data_dir)
            .field("proxy_url", &self.proxy_url.as_ref().map(|_| "<set>"))
            .field("linked", &self.linked.is_some())
            .field("reconnect", &self.reconnect)
            .finish_non_exhaustive()
    }
}

/// Which engine family serves the node: the `ENGINE_TYPE` knob's own enum, so the configuration and the
/// engines name the kinds with one type.
pub use wagate_config::EngineType as EngineKind;

/// Builds engine instances for one engine kind. The node holds one factory, chosen at boot.
#[async_trait]
pub trait EngineFactory: Send + Sync {
    /// A fresh engine for one start of one session.
    fn create(&self, ctx: EngineContext) -> Arc<dyn Engine>;
    /// What this kind of engine can do (the spec's support table column).
    fn capabilities(&self) -> &Capabilities;
    fn kind(&self) -> EngineKind;
    /// Forgets whatever credentials and auth state this kind of engine keeps for `session_id` on its own
    /// (beyond the `LinkedAccount` the node stores), so the next start links again. Called by the
    /// session service on logout and delete, with no engine of the session running.
    async fn wipe_credentials(&self, session_id: &str) -> EngineResult<()>;
}
