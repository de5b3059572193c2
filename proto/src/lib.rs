//! wagate wire types: everything that crosses a process boundary, with no I/O.
//!
//! # Layout
//! - `error_body`: the one JSON error body every failure answers with.
//! - `status`: session status, key roles and other wire enums.
//! - `events`: the event names and the webhook envelope.
//! - `jid`: parsing and validation of WhatsApp ids (JIDs).
//! - `headers`: header names used between nodes and towards webhook receivers.
//! - `jobs`: queue job payloads shared by the node and the workers.
//! - `dto`: request and response bodies of the REST API, one file per resource.

pub mod dto;
pub mod error_body;
pub mod events;
pub mod headers;
pub mod jid;
pub mod jobs;
pub mod status;

pub use dto::common::iso_ms;
pub use error_body::ErrorBody;
pub use events::{EventEnvelope, EventName};
pub use jid::Jid;
pub use status::{Role, SessionStatus};

/// The release line reported by `GET /api/health` to callers holding a valid key.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");
