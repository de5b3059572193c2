//! A cluster of real nodes on loopback for tests: one throwaway PostgreSQL data DB, one Redis key prefix
//! of its own (so parallel tests never meet), distinct `NODE_ID`s and known `NODE_URL`s, short lease
//! timings. Nodes start one after another (the first runs the migrations).

use std::time::{Duration, Instant};

use super::pg::PgDatabase;
use super::{Client, Node, NodeOptions, Reply, free_port, sessions};

/// The lease timings of a test cluster (`SESSION_LEASE_TTL_MS`, `..._HEARTBEAT_MS`, `..._TAKEOVER_SWEEP_MS`).
#[derive(Debug, Clone, Copy)]
pub struct Timings {
    pub ttl_ms: u64,
    pub heartbeat_ms: u64,
    pub sweep_ms: u64,
}

impl Default for Timings {
    fn default() -> Timings {
        Timings {
            ttl_ms: 3_000,
            heartbeat_ms: 1_000,
            sweep_ms: 500,
        }
    }
}

pub struct TestCluster {
    pub nodes: Vec<Node>,
    pub ids: Vec<String>,
    pub pg: PgDatabase,
    pub prefix: String,
}

impl TestCluster {
    pub async fn start(binary: &str, size: usize, timings: Timings) -> anyhow::Result<TestCluster> {
        let pg = PgDatabase::create()?;
        let prefix = format!("wagate-test:{}:", uuid::Uuid::new_v4().simple());
        let mut nodes = Vec::with_capacity(size);
        let mut ids = Vec::with_capacity(size);
        for i in 0..size {
            let id = format!("node-{}", (b'a' + i as u8) as char);
            let port = free_port();
            let options = NodeOptions::new(binary)
                .env("API_PORT", port.to_string())
                .env("NODE_ID", id.clone())
                .env("NODE_URL", format!("http://127.0.0.1:{port}"))
                .env("DATABASE_TYPE", "postgres")
                .env("DATABASE_URL", pg.url.clone())
                .env("REDIS_ENABLED", "true")
                .env("REDIS_KEY_PREFIX", prefix.clone())
                .env("SESSION_LEASE_TTL_MS", timings.ttl_ms.to_string())
                .env(
                    "SESSION_LEASE_HEARTBEAT_MS",
                    timings.heartbeat_ms.to_string(),
                )
                .env("SESSION_TAKEOVER_SWEEP_MS", timings.sweep_ms.to_string())
                .env("SESSION_PROXY_TIMEOUT_MS", "1000");
            nodes.push(Node::start(options).await?);
            ids.push(id);
        }
        Ok(TestCluster {
            nodes,
            ids,
            pg,
            prefix,
        })
    }

    pub fn client(&self, node: usize) -> Client {
        self.nodes[node].client()
    }

    /// The session row's `owner_node|lease_generation|updated_at|status`, read straight from the data DB.
    pub fn row(&self, session_id: &str) -> anyhow::Result<String> {
        self.pg.query(&format!(
            "SELECT owner_node, lease_generation, updated_at, status FROM sessions WHERE id = '{session_id}'"
        ))
    }

    /// Polls `node` until the session is `ready` with its engine loaded, served by a node other than those
    /// in `not_by` (a row left `ready` by a dead owner and read locally does not count);
    /// returns that reply. Failed requests (a dead owner answers 503 until its lease lapses) are retried.
    pub async fn wait_served_ready(
        &self,
        node: usize,
        session_id: &str,
        not_by: &[&str],
        budget: Duration,
    ) -> anyhow::Result<Reply> {
        let deadline = Instant::now() + budget;
        let client = self.client(node);
        let mut last = String::new();
        while Instant::now() < deadline {
            if let Ok(reply) = sessions::get(&client, session_id).await {
                let by = reply.header("x-wagate-served-by").unwrap_or("").to_string();
                let is_running =
                    reply.body["status"] == "ready" && reply.body["engineLoaded"] == true;
                if reply.status == 200 && is_running && !not_by.contains(&by.as_str()) {
                    return Ok(reply);
                }
                last = format!("{} by {by}: {}", reply.status, reply.text);
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        anyhow::bail!("session {session_id} not ready elsewhere within {budget:?}; last: {last}")
    }
}
