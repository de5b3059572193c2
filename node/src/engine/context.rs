//! What an engine is handed (`EngineContext`), which engine family serves the node (`EngineKind`, parsed
//! from `ENGINE_TYPE`) and the `EngineFactory` the node holds. Built by the supervisor and boot code; no
//! engine behaviour lives here.

use super::Engine;
use super::ack::EventSender;
use super::event::LinkedAccount;
use super::op::Capabilities;
use std::fmt;
use std::path::PathBuf;
use std::str::FromStr;
use std::sync::Arc;

/// Everything an engine instance is given. Created by the supervisor per start.
#[derive(Debug, Clone)]
pub(crate) struct EngineContext {
    pub session_id: String,
    /// Events, each with the acknowledgement its traffic is owed (`ack.rs`). Unbounded: engines emit while
    /// holding their own locks; the supervisor drains its channel in one loop and applies no backpressure.
    pub events: EventSender,
    /// This session's engine auth directory (keyed by session id).
    pub data_dir: PathBuf,
    pub proxy_url: Option<String>,
    /// Credentials stored after an earlier link; `None` means the engine must link (QR or pairing).
    pub linked: Option<LinkedAccount>,
}

/// Which engine family serves the node (`ENGINE_TYPE`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum EngineKind {
    Browser,
    Socket,
    Sim,
}

impl EngineKind {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Self::Browser => "browser",
            Self::Socket => "socket",
            Self::Sim => "sim",
        }
    }
}

impl fmt::Display for EngineKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for EngineKind {
    type Err = wagate_proto::status::UnknownValue;
    /// Parses `ENGINE_TYPE`; the caller treats an unset variable as `browser`.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "browser" => Ok(Self::Browser),
            "socket" => Ok(Self::Socket),
            "sim" => Ok(Self::Sim),
            other => Err(wagate_proto::status::UnknownValue(other.to_string())),
        }
    }
}

/// Builds engine instances for one engine kind. The node holds one factory, chosen at boot.
pub(crate) trait EngineFactory: Send + Sync {
    fn create(&self, ctx: EngineContext) -> Arc<dyn Engine>;
    fn capabilities(&self) -> &Capabilities;
    fn kind(&self) -> EngineKind;
}
