//! The one test harness: nodes, clients, webhook receivers and throwaway databases, all on loopback.

pub mod client;
pub mod cluster;
pub mod node;
pub mod pg;
pub mod receiver;
pub mod s3;
pub mod sessions;

pub use client::{Client, Reply};
pub use node::{Node, NodeOptions};
pub use receiver::{Delivery, Receiver};
pub use s3::S3Server;

/// The admin key every harness node is started with.
pub const ADMIN_KEY: &str = "wagate-test-admin-key-0123456789abcdef";

/// A free TCP port on 127.0.0.1 (bound once and released, so a race is possible but unlikely).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .unwrap_or(0)
}
