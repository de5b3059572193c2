//! Helpers shared by the events test files: a node with fast webhook timings, a ready sim session, a
//! webhook on a receiver, and the `wagate-worker` binary (built on demand next to `wagate`).

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use wagate_loadtest::harness::{Client, Node, NodeOptions};

pub const SECRET: &str = "0123456789abcdef-secret";

/// Fast retries and sweeps so a test sees them within seconds.
pub fn fast_options() -> NodeOptions {
    NodeOptions::new(env!("CARGO_BIN_EXE_wagate"))
        .env("WEBHOOK_RETRY_DELAY", "50")
        .env("WEBHOOK_TIMEOUT", "2000")
        .env("OUTBOX_RECONCILE_MS", "300")
        .env("OUTBOX_STALE_MS", "1000")
}

pub async fn node() -> Node {
    Node::start(fast_options()).await.expect("node starts")
}

/// Creates a session, starts it and scans the QR; waits for `ready`. Returns its id.
pub async fn ready_session(c: &Client, name: &str) -> String {
    let created = c
        .post("/api/sessions", json!({ "name": name }))
        .await
        .unwrap();
    assert_eq!(created.status, 201, "{}", created.text);
    let id = created.str("id");
    let started = c
        .post_empty(&format!("/api/sessions/{id}/start"))
        .await
        .unwrap();
    assert!(started.status < 300, "{}", started.text);
    let scan = c
        .post(
            &format!("/api/sim/sessions/{id}/scan"),
            json!({ "phone": "15550001111@c.us" }),
        )
        .await
        .unwrap();
    assert!(scan.status < 300, "{}", scan.text);
    wait_for(Duration::from_secs(20), || async {
        c.get(&format!("/api/sessions/{id}"))
            .await
            .unwrap()
            .str("status")
            == "ready"
    })
    .await;
    id
}

/// Creates a webhook; answers its record.
pub async fn add_webhook(c: &Client, session: &str, body: Value) -> Value {
    let r = c
        .post(&format!("/api/sessions/{session}/webhooks"), body)
        .await
        .unwrap();
    assert_eq!(r.status, 201, "{}", r.text);
    r.body
}

/// An inbound text message from `from`; answers its message id.
pub async fn inbound(c: &Client, session: &str, from: &str, body: &str) -> String {
    let r = c
        .post(
            &format!("/api/sim/sessions/{session}/inbound"),
            json!({ "from": from, "type": "text", "body": body }),
        )
        .await
        .unwrap();
    assert!(r.status < 300, "{}", r.text);
    r.str("messageId")
}

pub async fn wait_for<F, Fut>(budget: Duration, check: F)
where
    F: Fn() -> Fut,
    Fut: Future<Output = bool>,
{
    let deadline = Instant::now() + budget;
    while Instant::now() < deadline {
        if check().await {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("condition not met within {budget:?}");
}

/// `wagate-worker` next to `wagate`. `cargo test -p wagate-node` does not build it, and a stale one embeds
/// old migrations, so it is (re)built once per test process; cargo makes that a no-op when it is fresh.
pub fn worker_binary() -> PathBuf {
    static BUILT: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    BUILT
        .get_or_init(|| {
            // The test command names the worker its own build made, so no build with another feature set
            // runs here.
            if let Some(built) = std::env::var_os("WAGATE_TEST_WORKER") {
                return built.into();
            }
            let node = Path::new(env!("CARGO_BIN_EXE_wagate"));
            let target_dir = node.parent().and_then(Path::parent).expect("target dir");
            let status = std::process::Command::new(env!("CARGO"))
                .args([
                    "build",
                    "-p",
                    "wagate-workers",
                    "--bin",
                    "wagate-worker",
                    "--target-dir",
                ])
                .arg(target_dir)
                .status()
                .expect("cargo runs");
            assert!(status.success(), "building wagate-worker failed");
            node.with_file_name("wagate-worker")
        })
        .clone()
}
