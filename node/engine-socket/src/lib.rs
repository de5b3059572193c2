//! The socket engine's library side: everything that touches the `whatsapp-rust` crate lives here, so the
//! heavy protocol dependency is compiled once and the node crate only sees this crate's small surface.

pub mod build;
pub mod failure;
pub mod http;
pub mod jid;
pub mod proxy;
pub mod store;
pub mod transport;

/// The library itself, for the node's socket engine (client, events, protocol types, feature APIs).
pub use whatsapp_rust;
