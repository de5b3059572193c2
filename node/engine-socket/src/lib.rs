//! The socket engine: a WhatsApp Web multi-device client (`whatsapp-rust`) per session. `adapter/` is the
//! engine itself, written against the engine API crate (`wagate-engine-api`) alone: the `Engine` impl, the
//! `SocketFactory` the node builds at boot, the event mapping and the operations. The rest is its library
//! side: the protocol store (the engine's own `socket_*` tables in the data DB), the transport (proxies,
//! the endpoint), message builders and failure mapping. The node sees only the factory and its config; the
//! heavy protocol dependency is compiled once, here.

// The library's app-state calls nest deeper than the default limit.
#![recursion_limit = "512"]

pub mod adapter;
pub mod build;
pub mod failure;
pub mod http;
pub mod jid;
pub mod proxy;
pub mod store;
pub mod transport;

pub use adapter::{SocketConfig, SocketFactory};
/// The library itself (client, events, protocol types), for tests outside the crate that build its events.
pub use whatsapp_rust;
