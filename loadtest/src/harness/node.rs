//! A real `wagate` process for tests: its own temp dir and port, readiness polled (never slept on), logs
//! kept in the temp dir, and the child killed on drop. Restart keeps the data dir.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use super::{ADMIN_KEY, Client, free_port};

/// The `CLUSTER_SECRET` of every harness node: one value, so any harness nodes sharing a Redis are peers.
pub const TEST_CLUSTER_SECRET: &str = "wagate-test-cluster-secret-0123456789";

/// How to start a node. `env` overrides the harness defaults.
#[derive(Debug, Clone)]
pub struct NodeOptions {
    pub binary: PathBuf,
    pub env: HashMap<String, String>,
    /// Wait for `/api/health/ready`; false for tests that expect the boot to fail.
    pub wait_ready: bool,
}

impl NodeOptions {
    pub fn new(binary: impl Into<PathBuf>) -> NodeOptions {
        NodeOptions {
            binary: binary.into(),
            env: HashMap::new(),
            wait_ready: true,
        }
    }

    pub fn env(mut self, key: &str, value: impl Into<String>) -> NodeOptions {
        self.env.insert(key.to_string(), value.into());
        self
    }
}

pub struct Node {
    pub options: NodeOptions,
    pub port: u16,
    pub dir: tempfile::TempDir,
    child: Option<Child>,
    /// The throwaway data DB when the suite runs on PostgreSQL (`WAGATE_TEST_DATABASE=postgres`).
    _pg: Option<super::pg::PgDatabase>,
}

/// With `WAGATE_TEST_DATABASE=postgres`, a node whose options do not pick a database gets its own
/// throwaway PostgreSQL database, so the whole suite can run on either backend.
fn suite_database(options: &mut NodeOptions) -> anyhow::Result<Option<super::pg::PgDatabase>> {
    let wants_pg = std::env::var("WAGATE_TEST_DATABASE").is_ok_and(|v| v == "postgres");
    if !wants_pg || options.env.contains_key("DATABASE_TYPE") {
        return Ok(None);
    }
    let db = super::pg::PgDatabase::create()?;
    options
        .env
        .insert("DATABASE_TYPE".into(), "postgres".into());
    options.env.insert("DATABASE_URL".into(), db.url.clone());
    Ok(Some(db))
}

fn default_env(dir: &Path, port: u16) -> Vec<(String, String)> {
    [
        ("API_PORT", port.to_string()),
        ("BIND_HOST", "127.0.0.1".to_string()),
        ("DATA_DIR", dir.join("data").display().to_string()),
        ("API_MASTER_KEY", ADMIN_KEY.to_string()),
        ("ENGINE_TYPE", "sim".to_string()),
        ("NODE_ENV", "test".to_string()),
        ("LOG_LEVEL", "info".to_string()),
        ("RATE_LIMIT_SHORT_LIMIT", "100000".to_string()),
        ("RATE_LIMIT_MEDIUM_LIMIT", "1000000".to_string()),
        ("RATE_LIMIT_LONG_LIMIT", "10000000".to_string()),
        ("WEBHOOK_SSRF_PROTECT", "false".to_string()),
        // Ignored in the embedded mode; every node of a test cluster (REDIS_ENABLED=true) needs the same one.
        ("CLUSTER_SECRET", TEST_CLUSTER_SECRET.to_string()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect()
}

impl Node {
    /// Starts a node and (unless told not to) waits until it is ready. An `API_PORT` in the options is
    /// used as given (cluster tests need each node's URL before it starts); otherwise a free port.
    pub async fn start(mut options: NodeOptions) -> anyhow::Result<Node> {
        let dir = tempfile::tempdir()?;
        let pg = suite_database(&mut options)?;
        let port = options
            .env
            .get("API_PORT")
            .and_then(|p| p.parse().ok())
            .unwrap_or_else(free_port);
        let mut node = Node {
            options,
            port,
            dir,
            child: None,
            _pg: pg,
        };
        node.spawn().await?;
        Ok(node)
    }

    async fn spawn(&mut self) -> anyhow::Result<()> {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.log_path())?;
        let mut cmd = Command::new(&self.options.binary);
        cmd.env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default());
        cmd.envs(default_env(self.dir.path(), self.port))
            .envs(&self.options.env);
        cmd.stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log);
        self.child = Some(cmd.spawn()?);
        if self.options.wait_ready {
            self.wait_ready(Duration::from_secs(60)).await?;
        }
        Ok(())
    }

    pub fn log_path(&self) -> PathBuf {
        self.dir.path().join("node.log")
    }

    pub fn logs(&self) -> String {
        std::fs::read_to_string(self.log_path()).unwrap_or_default()
    }

    /// Whether `needle` shows up in the node's log within `within`. The node writes its log lines from a
    /// thread of their own, so a line logged while serving a request may land a moment after the answer.
    pub async fn wait_logged(&self, needle: &str, within: Duration) -> bool {
        let deadline = Instant::now() + within;
        loop {
            if self.logs().contains(needle) {
                return true;
            }
            if Instant::now() >= deadline {
                return false;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    pub fn base_url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    pub fn client(&self) -> Client {
        Client::new(self.base_url(), Some(ADMIN_KEY.to_string()))
    }

    pub fn client_with_key(&self, key: Option<&str>) -> Client {
        Client::new(self.base_url(), key.map(str::to_string))
    }

    async fn wait_ready(&mut self, budget: Duration) -> anyhow::Result<()> {
        let deadline = Instant::now() + budget;
        let client = self.client();
        while Instant::now() < deadline {
            if let Some(status) = self
                .child
                .as_mut()
                .and_then(|c| c.try_wait().ok().flatten())
            {
                anyhow::bail!(
                    "wagate exited with {status} before it was ready:\n{}",
                    self.logs()
                );
            }
            if client
                .get("/api/health/ready")
                .await
                .map(|r| r.status == 200)
                .unwrap_or(false)
            {
                return Ok(());
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        anyhow::bail!("wagate was not ready within {budget:?}:\n{}", self.logs())
    }

    /// Waits for the process to exit by itself (boot refusals); returns its exit code.
    pub async fn wait_exit(&mut self, budget: Duration) -> Option<i32> {
        let deadline = Instant::now() + budget;
        while Instant::now() < deadline {
            if let Some(status) = self
                .child
                .as_mut()
                .and_then(|c| c.try_wait().ok().flatten())
            {
                return status.code();
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        None
    }

    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    fn signal(&self, sig: &str) {
        if let Some(pid) = self.pid() {
            let _ = Command::new("kill")
                .arg(format!("-{sig}"))
                .arg(pid.to_string())
                .status();
        }
    }

    /// SIGTERM and wait for a graceful exit.
    pub async fn stop(&mut self) -> Option<i32> {
        self.signal("TERM");
        let code = self.wait_exit(Duration::from_secs(30)).await;
        self.child = None;
        code
    }

    /// SIGKILL: the crash case.
    pub fn kill9(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    pub fn pause(&self) {
        self.signal("STOP");
    }

    pub fn resume(&self) {
        self.signal("CONT");
    }

    /// Starts the process again on the same data dir and port.
    pub async fn restart(&mut self) -> anyhow::Result<()> {
        if self.child.is_some() {
            self.stop().await;
        }
        self.spawn().await
    }
}

/// Lines of a node's log a failed test prints: its temp dir, log included, goes with it.
const LOG_TAIL_ON_FAILURE: usize = 60;

impl Drop for Node {
    fn drop(&mut self) {
        self.kill9();
        if std::thread::panicking() {
            let logs = self.logs();
            let lines: Vec<&str> = logs.lines().collect();
            let tail = &lines[lines.len().saturating_sub(LOG_TAIL_ON_FAILURE)..];
            eprintln!(
                "--- last {} lines of the node's log ---\n{}",
                tail.len(),
                tail.join("\n")
            );
        }
    }
}
