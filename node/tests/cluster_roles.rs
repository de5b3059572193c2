//! Roles in a cluster: a `wagate` node with `ROLE=worker` beside `ROLE=api` nodes is a queue worker. It is
//! listed in the registry but hosts no session (a killed owner's sessions go to the surviving api node),
//! answers the health routes and the metrics scrape, and 503 for the rest of the API.
//! Two api nodes and the worker on one PostgreSQL data DB and one Redis (own key prefix). Polls, never
//! asserts how fast.

use std::time::{Duration, Instant};

use wagate_loadtest::harness::cluster::{ClusterOptions, TestCluster, Timings};
use wagate_loadtest::harness::sessions::create_linked;
use wagate_loadtest::harness::{CLUSTER_SECRET, Node, NodeOptions, free_port};

const SERVED_BY: &str = "x-wagate-served-by";
const BUDGET: Duration = Duration::from_secs(30);
const METRICS_TOKEN: &str = "roles-metrics-token";
/// Sorts before `node-a` and `node-b`: placement breaks ties by node id, so a worker still dealt orphans
/// would get the first of them.
const WORKER_ID: &str = "node-0";

async fn api_nodes(timings: Timings) -> TestCluster {
    let options = ClusterOptions {
        size: 2,
        timings,
        env: vec![("ROLE".into(), "api".into())],
        ..ClusterOptions::default()
    };
    TestCluster::start_with(env!("CARGO_BIN_EXE_wagate"), options)
        .await
        .expect("cluster")
}

/// A `wagate` with `ROLE=worker` joining `c` (same data DB, Redis prefix, queues and lease timings).
async fn worker_node(c: &TestCluster, timings: Timings) -> Node {
    let port = free_port();
    let options = NodeOptions::new(env!("CARGO_BIN_EXE_wagate"))
        .env("ROLE", "worker")
        .env("DATABASE_TYPE", "postgres")
        .env("DATABASE_URL", c.pg.url.clone())
        .env("REDIS_ENABLED", "true")
        .env("CLUSTER_SECRET", CLUSTER_SECRET)
        .env("QUEUE_PREFIX", c.prefix.clone())
        .env("REDIS_KEY_PREFIX", c.prefix.clone())
        .env("WEBHOOK_SSRF_PROTECT", "false")
        .env("METRICS_TOKEN", METRICS_TOKEN)
        .env("API_PORT", port.to_string())
        .env("NODE_ID", WORKER_ID)
        .env("NODE_URL", format!("http://127.0.0.1:{port}"))
        .env("SESSION_LEASE_TTL_MS", timings.ttl_ms.to_string())
        .env(
            "SESSION_LEASE_HEARTBEAT_MS",
            timings.heartbeat_ms.to_string(),
        )
        .env("SESSION_TAKEOVER_SWEEP_MS", timings.sweep_ms.to_string())
        .env("SESSION_PROXY_TIMEOUT_MS", "1000");
    Node::start(options).await.expect("worker node")
}

/// Waits until api node `node` lists `peer` among its live peers (the registry has its announcement).
async fn wait_listed(c: &TestCluster, node: usize, peer: &str) {
    let deadline = Instant::now() + BUDGET;
    while Instant::now() < deadline {
        let status = c
            .client(node)
            .get("/api/infra/status")
            .await
            .expect("status");
        let peers = status.body["peers"].as_array().cloned().unwrap_or_default();
        if peers.iter().any(|p| p["nodeId"] == peer) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("{peer} never listed as a live peer of node {node}");
}

#[tokio::test]
async fn a_worker_node_answers_probes_and_metrics_and_refuses_the_api_with_503() {
    let timings = Timings::default();
    let c = api_nodes(timings).await;
    let worker = worker_node(&c, timings).await;
    let client = worker.client();
    for probe in ["/api/health", "/api/health/live", "/api/health/ready"] {
        let reply = client.get(probe).await.expect("probe");
        assert_eq!(reply.status, 200, "{probe}: {}", reply.text);
    }
    let scrape = client
        .send(
            client
                .raw(reqwest::Method::GET, "/api/metrics")
                .bearer_auth(METRICS_TOKEN),
        )
        .await
        .expect("metrics");
    assert_eq!(scrape.status, 200, "{}", scrape.text);
    let id = create_linked(&c.client(0), "role-refused", "15550003001")
        .await
        .expect("linked on node a");
    for path in [
        "/api/sessions".to_string(),
        format!("/api/sessions/{id}"),
        "/api/infra/status".to_string(),
    ] {
        let reply = client.get(&path).await.expect("api");
        assert_eq!(reply.status, 503, "{path}: {}", reply.text);
        assert_eq!(reply.body["statusCode"], 503, "{path}");
        assert_eq!(reply.body["error"], "Service Unavailable", "{path}");
        assert!(
            reply.str("message").contains("ROLE=worker"),
            "{path}: {}",
            reply.text
        );
    }
    let created = client
        .post("/api/sessions", serde_json::json!({ "name": "on-worker" }))
        .await
        .expect("create");
    assert_eq!(created.status, 503, "{}", created.text);
}

#[tokio::test]
async fn a_killed_owners_sessions_go_to_the_api_node_never_to_the_worker() {
    let timings = Timings::default();
    let mut c = api_nodes(timings).await;
    let _worker = worker_node(&c, timings).await;
    // The worker is in the registry before the owner dies: only placement keeps it from being dealt one.
    wait_listed(&c, 1, WORKER_ID).await;
    let mut ids = Vec::new();
    for (name, phone) in [("role-a", "15550003101"), ("role-b", "15550003102")] {
        let id = create_linked(&c.client(0), name, phone)
            .await
            .expect("linked on node a");
        ids.push(id);
    }
    c.nodes[0].kill9();
    for id in &ids {
        let reply = c
            .wait_served_ready(1, id, &["node-a", ""], BUDGET)
            .await
            .expect("taken over");
        assert_eq!(
            reply.header(SERVED_BY),
            Some("node-b"),
            "session {id} must run on the api node: {}",
            reply.text
        );
        let row = c.row(id).expect("row");
        assert!(row.starts_with("node-b|"), "{row}");
    }
}
