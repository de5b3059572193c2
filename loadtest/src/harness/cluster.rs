//! A cluster of real nodes on loopback for tests: one throwaway PostgreSQL data DB, one Redis key prefix
//! of its own (so parallel tests never meet), distinct `NODE_ID`s and known `NODE_URL`s, short lease
//! timings. Nodes start one after another (the first runs the migrations).

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
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

/// How to build a cluster beyond its size and timings.
#[derive(Debug, Clone, Default)]
pub struct ClusterOptions {
    pub size: usize,
    pub timings: Timings,
    /// With a worker binary, the nodes run `ROLE=api` and one `wagate-worker` process delivers.
    pub worker_binary: Option<PathBuf>,
    /// Extra environment for every node and the worker.
    pub env: Vec<(String, String)>,
}

/// A `wagate-worker` process sharing the cluster's data DB and Redis queues; killed on drop.
pub struct Worker {
    binary: PathBuf,
    env: Vec<(String, String)>,
    dir: tempfile::TempDir,
    child: Option<Child>,
}

impl Worker {
    fn spawn(&mut self) -> anyhow::Result<()> {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.dir.path().join("worker.log"))?;
        let child = Command::new(&self.binary)
            .env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("DATA_DIR", self.dir.path().join("data"))
            .envs(self.env.iter().cloned())
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log)
            .spawn()?;
        self.child = Some(child);
        Ok(())
    }

    /// SIGKILL: the crash case.
    pub fn kill9(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Starts the process again (after `kill9`).
    pub fn restart(&mut self) -> anyhow::Result<()> {
        self.kill9();
        self.spawn()
    }

    /// The process id while it runs.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    pub fn logs(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("worker.log")).unwrap_or_default()
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        self.kill9();
    }
}

pub struct TestCluster {
    pub nodes: Vec<Node>,
    pub ids: Vec<String>,
    pub worker: Option<Worker>,
    pub pg: PgDatabase,
    pub prefix: String,
}

impl TestCluster {
    pub async fn start(binary: &str, size: usize, timings: Timings) -> anyhow::Result<TestCluster> {
        let options = ClusterOptions {
            size,
            timings,
            ..ClusterOptions::default()
        };
        TestCluster::start_with(binary, options).await
    }

    pub async fn start_with(binary: &str, options: ClusterOptions) -> anyhow::Result<TestCluster> {
        let (size, timings) = (options.size, options.timings);
        let pg = PgDatabase::create()?;
        let prefix = format!("wagate-test:{}:", uuid::Uuid::new_v4().simple());
        // Queues of their own too: a job of another test's cluster names rows this DB does not have.
        let mut shared = vec![
            ("DATABASE_TYPE".to_string(), "postgres".to_string()),
            ("DATABASE_URL".to_string(), pg.url.clone()),
            ("REDIS_ENABLED".to_string(), "true".to_string()),
            (
                "CLUSTER_SECRET".to_string(),
                super::CLUSTER_SECRET.to_string(),
            ),
            ("QUEUE_PREFIX".to_string(), prefix.clone()),
            ("WEBHOOK_SSRF_PROTECT".to_string(), "false".to_string()),
        ];
        shared.extend(options.env.iter().cloned());
        let mut nodes = Vec::with_capacity(size);
        let mut ids = Vec::with_capacity(size);
        for i in 0..size {
            let id = format!("node-{}", (b'a' + i as u8) as char);
            let port = free_port();
            let mut node_options = NodeOptions::new(binary);
            for (k, v) in &shared {
                node_options = node_options.env(k, v.clone());
            }
            if options.worker_binary.is_some() {
                node_options = node_options.env("ROLE", "api");
            }
            let node_options = node_options
                .env("API_PORT", port.to_string())
                .env("NODE_ID", id.clone())
                .env("NODE_URL", format!("http://127.0.0.1:{port}"))
                .env("REDIS_KEY_PREFIX", prefix.clone())
                .env("SESSION_LEASE_TTL_MS", timings.ttl_ms.to_string())
                .env(
                    "SESSION_LEASE_HEARTBEAT_MS",
                    timings.heartbeat_ms.to_string(),
                )
                .env("SESSION_TAKEOVER_SWEEP_MS", timings.sweep_ms.to_string());
            // A short forward budget unless the options set one (a loaded machine may need more).
            let node_options = if options
                .env
                .iter()
                .any(|(k, _)| k == "SESSION_PROXY_TIMEOUT_MS")
            {
                node_options
            } else {
                node_options.env("SESSION_PROXY_TIMEOUT_MS", "1000")
            };
            nodes.push(Node::start(node_options).await?);
            ids.push(id);
        }
        let worker = match options.worker_binary {
            Some(binary) => {
                let mut worker = Worker {
                    binary,
                    env: shared,
                    dir: tempfile::tempdir()?,
                    child: None,
                };
                worker.spawn()?;
                Some(worker)
            }
            None => None,
        };
        Ok(TestCluster {
            nodes,
            ids,
            worker,
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
