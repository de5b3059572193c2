//! Boot configuration: the real binary exits non-zero with one line naming the variable of a refused value,
//! and the node's own loader reads every row of the shared tables of accepted values as the row says.

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

/// NODE_URL, BIND_HOST, REDIS_URL and DATABASE_URL are refused at configuration like every other knob:
/// exit 2, the one line naming the variable, and nothing written to DATA_DIR (a bad BIND_HOST or REDIS_URL
/// used to fail with exit 1 after the databases were created; a bad NODE_URL booted).
#[tokio::test]
async fn url_and_host_knobs_are_refused_before_anything_is_written() {
    let cases: &[(&[(&str, &str)], &str)] = &[
        (
            &[("NODE_URL", "notaurl")],
            "NODE_URL must be an http:// or https:// URL",
        ),
        (
            &[("NODE_URL", "ftp://x")],
            "NODE_URL must be an http:// or https:// URL",
        ),
        (
            &[
                ("REDIS_ENABLED", "true"),
                ("ROLE", "api"),
                ("NODE_URL", "notaurl"),
            ],
            "NODE_URL must be an http:// or https:// URL",
        ),
        (
            &[("BIND_HOST", "999.1.1.1")],
            "BIND_HOST must be an IP address or a host name",
        ),
        (
            &[("BIND_HOST", "not an ip")],
            "BIND_HOST must be an IP address or a host name",
        ),
        (
            &[("REDIS_ENABLED", "true"), ("REDIS_URL", "notaurl")],
            "REDIS_URL must be a redis://host[:port][/db] or unix:///path/to/socket URL",
        ),
        (
            &[
                ("REDIS_ENABLED", "true"),
                ("REDIS_URL", "http://127.0.0.1:6379"),
            ],
            "REDIS_URL must be a redis://host[:port][/db] or unix:///path/to/socket URL",
        ),
        (
            &[
                ("DATABASE_TYPE", "postgres"),
                ("DATABASE_URL", "mysql://db/wagate"),
            ],
            "DATABASE_URL must be a postgres:// or postgresql:// URL",
        ),
    ];
    for (env, rule) in cases {
        let mut opts = NodeOptions::new(env!("CARGO_BIN_EXE_wagate"));
        for (var, value) in *env {
            opts = opts.env(var, *value);
        }
        opts.wait_ready = false;
        let mut node = Node::start(opts).await.expect("spawn");
        let code = node.wait_exit(Duration::from_secs(20)).await;
        let logs = node.logs();
        assert_eq!(code, Some(2), "{env:?}: {logs}");
        let line = format!("invalid configuration: {rule}");
        assert!(
            logs.lines().any(|l| l.starts_with(&line)),
            "{env:?}: want {line:?} in {logs}"
        );
        assert!(
            !node.dir.path().join("data").exists(),
            "{env:?}: DATA_DIR was written before the refusal"
        );
    }
}

#[tokio::test]
async fn an_explicit_node_url_still_boots() {
    let node = Node::start(
        NodeOptions::new(env!("CARGO_BIN_EXE_wagate")).env("NODE_URL", "http://127.0.0.1:2785/"),
    )
    .await
    .expect("boots");
    let health = node.client().get("/api/health").await.expect("health");
    assert_eq!(health.status, 200);
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

/// With `LOG_FORMAT=json` the line that shows the generated key is one JSON object laid out as the log lines
/// are, so a collector parsing stdout as JSON lines keeps it; it is still printed once.
#[tokio::test]
async fn first_boot_prints_the_generated_key_as_json_with_json_logs() {
    let mut opts = NodeOptions::new(env!("CARGO_BIN_EXE_wagate")).env("LOG_FORMAT", "json");
    opts.env.insert("API_MASTER_KEY".into(), String::new());
    let node = Node::start(opts).await.expect("boots");
    let key = std::fs::read_to_string(node.dir.path().join("data/.api-key")).expect("key file");
    let key = key.trim();
    let logs = node.logs();
    let shown: Vec<&str> = logs.lines().filter(|l| l.contains(key)).collect();
    assert_eq!(shown.len(), 1, "{logs}");
    let line: serde_json::Value = serde_json::from_str(shown[0]).expect("a JSON line");
    assert_eq!(
        line["fields"]["message"],
        format!("wagate admin API key: {key}"),
        "{line}"
    );
    let warned = logs
        .lines()
        .find(|l| l.contains("generated the first admin API key"))
        .and_then(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .expect("the warning is a JSON log line");
    for field in ["timestamp", "level", "target"] {
        assert!(line[field].is_string(), "{field}: {line}");
        assert!(warned[field].is_string(), "{field}: {warned}");
    }
    assert_eq!(line["target"], warned["target"]);
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

/// Every accepted row of the shared table and of the node's own, through the node's real loader (the knobs
/// and the rules that tie several together), reading what each row says it reads.
#[test]
fn the_node_loads_every_accepted_row() {
    use wagate_config::cases::{ACCEPTED, Expect, NODE_ACCEPTED, check_loader};
    use wagate_node::config::{Config, StorageConfig};
    let holds = |c: &Config, expect: &Expect| {
        let s3 = match &c.storage {
            StorageConfig::S3(s3) => Some(s3),
            StorageConfig::Local => None,
        };
        Some(match *expect {
            Expect::DatabaseType(t) => c.database_type == t,
            Expect::DatabaseUrl(url) => c.database_url == url,
            Expect::WebhookTimeoutMs(ms) => c.webhook_timeout_ms == ms,
            Expect::OutboxStaleMs(ms) => c.outbox_stale_ms == ms,
            Expect::LogLevel(level) => c.log_level == level.as_str(),
            Expect::LogFormat(format) => c.log_json == (format == wagate_config::LogFormat::Json),
            Expect::RedisEnabled(on) => c.redis_enabled == on,
            Expect::QueuePrefix(prefix) => c.queue_prefix == prefix,
            Expect::OtelEndpoint(url) => c.otel_endpoint.as_deref() == url,
            Expect::TraceSampling {
                ratio,
                follows_parent,
            } => {
                c.trace_sampling.ratio == ratio && c.trace_sampling.follows_parent == follows_parent
            }
            Expect::S3Bucket(bucket) => s3.map(|s3| s3.bucket.as_str()) == bucket,
            Expect::S3Endpoint(url) => {
                s3.and_then(|s3| s3.endpoint.as_ref()).map(|u| u.as_str()) == url
            }
            Expect::S3ForcePathStyle(on) => s3.is_some_and(|s3| s3.force_path_style == on),
            Expect::BrowserWebUrl(url) => c.browser_web_url == url,
            Expect::BenchAckOnReceipt(on) => c.bench_ack_on_receipt == on,
            Expect::BenchLocalLimiter(on) => c.bench_local_limiter == on,
        })
    };
    for rows in [ACCEPTED, NODE_ACCEPTED] {
        let checked = check_loader(rows, |source| Config::load(["wagate"], source), holds);
        if let Err(e) = checked {
            panic!("{e}");
        }
    }
}
