//! Boot refusals: the real binary exits non-zero with one line naming the variable.

use std::time::Duration;

use wagate_loadtest::harness::{Node, NodeOptions};

async fn refusal(var: &str, value: &str) -> (Option<i32>, String) {
    let mut opts = NodeOptions::new(env!("CARGO_BIN_EXE_wagate")).env(var, value);
    opts.wait_ready = false;
    let mut node = Node::start(opts).await.expect("spawn");
    let code = node.wait_exit(Duration::from_secs(20)).await;
    (code, node.logs())
}

async fn assert_refused(var: &str, value: &str) {
    let (code, logs) = refusal(var, value).await;
    assert!(
        matches!(code, Some(c) if c != 0),
        "{var}={value} should refuse boot, got {code:?}: {logs}"
    );
    let line = logs.lines().find(|l| l.contains(var)).unwrap_or_default();
    assert!(
        line.contains("invalid configuration"),
        "{var}={value}: {logs}"
    );
}

#[tokio::test]
async fn boot_refuses_each_invalid_setting() {
    let cases = [
        ("WEBHOOK_TIMEOUT", "1e4"),
        ("WEBHOOK_RETRY_DELAY", "0x100"),
        ("MEDIA_DOWNLOAD_MAX_BYTES", "50mb"),
        ("MEDIA_CONVERSION_MAX_OUTPUT_BYTES", "10MB"),
        ("REDIS_ENABLED", "yes"),
        ("LOG_LEVEL", "trace"),
        ("ENGINE_TYPE", "whatsapp"),
        ("WEBHOOK_MAX_PAYLOAD_BYTES", "0"),
        ("AUDIT_RETENTION_DAYS", "ninety"),
        ("BROWSER_PROTOCOL_TIMEOUT_MS", "0"),
        ("BROWSER_PROTOCOL_TIMEOUT_MS", "2147483648"),
        ("SOCKET_WS_URL", "https://web.whatsapp.com/ws/chat"),
    ];
    for (var, value) in cases {
        assert_refused(var, value).await;
    }
}

#[tokio::test]
async fn production_refuses_a_short_master_key() {
    let mut opts = NodeOptions::new(env!("CARGO_BIN_EXE_wagate"))
        .env("NODE_ENV", "production")
        .env("API_MASTER_KEY", "short-key");
    opts.wait_ready = false;
    let mut node = Node::start(opts).await.expect("spawn");
    let code = node.wait_exit(Duration::from_secs(20)).await;
    assert!(matches!(code, Some(c) if c != 0), "{}", node.logs());
    assert!(node.logs().contains("API_MASTER_KEY"));
}

#[tokio::test]
async fn negative_audit_retention_boots() {
    let node = Node::start(
        NodeOptions::new(env!("CARGO_BIN_EXE_wagate")).env("AUDIT_RETENTION_DAYS", "-1"),
    )
    .await
    .expect("boots");
    assert_eq!(
        node.client()
            .get("/api/health")
            .await
            .expect("health")
            .status,
        200
    );
}

#[tokio::test]
async fn first_boot_without_master_key_writes_an_admin_key_file() {
    use std::os::unix::fs::PermissionsExt;
    let mut opts = NodeOptions::new(env!("CARGO_BIN_EXE_wagate")).env("API_MASTER_KEY", "");
    opts.env.insert("API_MASTER_KEY".into(), String::new());
    let node = Node::start(opts).await.expect("boots");
    let path = node.dir.path().join("data/.api-key");
    let key = std::fs::read_to_string(&path).expect("key file");
    let mode = std::fs::metadata(&path).expect("meta").permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
    assert!(node.logs().contains(key.trim()), "the key is printed once");
    let check = node
        .client_with_key(Some(key.trim()))
        .post_empty("/api/auth/validate")
        .await
        .expect("validate");
    assert_eq!(check.body["role"], "admin");
}

/// The real `wagate` against the table `wagate-worker` is checked with too: the same line and exit code,
/// `--help` lists every knob without starting a node or writing a key.
#[test]
fn the_node_refuses_the_shared_table_and_prints_help() {
    let checked = wagate_config::cases::check_binary::<wagate_config::NodeCli>(
        std::path::Path::new(env!("CARGO_BIN_EXE_wagate")),
        wagate_config::cases::NODE_REFUSED,
    );
    if let Err(e) = checked {
        panic!("{e}");
    }
}
