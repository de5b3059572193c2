//! The one test harness: nodes, clients, webhook receivers and throwaway databases, all on loopback.

pub mod chaos;
pub mod client;
pub mod cluster;
pub mod node;
pub mod pg;
pub mod receiver;
pub mod s3;
pub mod sessions;
pub mod ws;

pub use client::{Client, Reply};
pub use node::{Node, NodeOptions};
pub use receiver::{Delivery, Receiver};
pub use s3::S3Server;

/// The admin key every harness node is started with.
pub const ADMIN_KEY: &str = "wagate-test-admin-key-0123456789abcdef";

/// The `CLUSTER_SECRET` every harness cluster is started with (nodes trust each other's requests by it).
pub const CLUSTER_SECRET: &str = "wagate-test-cluster-secret-0123456789";

/// A free TCP port on 127.0.0.1 (bound once and released, so a race is possible but unlikely).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .unwrap_or(0)
}
