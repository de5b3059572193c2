//! The edge from outside (issue 29, and issue 20 item 4): who the client is behind trusted proxies, the
//! spec's rate-limit tiers counted exactly (one node, and three nodes sharing one Redis), forwarded requests
//! counted once, the fall back to per-node limits while Redis is away, and keep-alive connections that
//! survive early refusals. Clients pick their source address on loopback (127.0.0.1 is the trusted proxy,
//! other 127.x addresses are untrusted peers) with `local_address`.

use std::net::IpAddr;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use futures::future::join_all;
use reqwest::StatusCode;
use serde_json::{Value, json};
use wagate_loadtest::harness::cluster::{ClusterOptions, TestCluster, Timings};
use wagate_loadtest::harness::{ADMIN_KEY, Node, NodeOptions, free_port};

const BIN: &str = env!("CARGO_BIN_EXE_wagate");
const SPEC_TIERS: [(&str, &str); 3] = [
    ("RATE_LIMIT_SHORT_LIMIT", "10"),
    ("RATE_LIMIT_MEDIUM_LIMIT", "100"),
    ("RATE_LIMIT_LONG_LIMIT", "1000"),
];
const METRICS_TOKEN: &str = "edge-metrics-token";

fn ip(s: &str) -> IpAddr {
    s.parse().expect("ip")
}

/// A pooled HTTP client whose connections leave from `source`.
fn http_from(source: &str) -> reqwest::Client {
    let _ = rustls::crypto::ring::default_provider().install_default();
    reqwest::Client::builder()
        .no_proxy()
        .local_address(ip(source))
        .build()
        .expect("client")
}

async fn single_node() -> Node {
    let mut options = NodeOptions::new(BIN).env("TRUSTED_PROXIES", "127.0.0.1");
    for (k, v) in SPEC_TIERS {
        options = options.env(k, v);
    }
    Node::start(options).await.expect("node")
}

struct Answer {
    status: StatusCode,
    headers: reqwest::header::HeaderMap,
    body: Value,
}

impl Answer {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }
}

/// `GET {base}{path}` with the admin key and the given extra headers.
async fn get(http: &reqwest::Client, base: &str, path: &str, headers: &[(&str, &str)]) -> Answer {
    let mut req = http
        .get(format!("{base}{path}"))
        .header("X-API-Key", ADMIN_KEY);
    for (name, value) in headers {
        req = req.header(*name, *value);
    }
    let response = req.send().await.expect("request");
    let status = response.status();
    let headers = response.headers().clone();
    let body = response.json::<Value>().await.unwrap_or(Value::Null);
    Answer {
        status,
        headers,
        body,
    }
}

fn count(answers: &[Answer], status: StatusCode) -> usize {
    answers.iter().filter(|a| a.status == status).count()
}

/// Every 429 carries `Retry-After` and the spec's error body.
fn assert_refusal_shape(answer: &Answer) {
    assert_eq!(answer.status, StatusCode::TOO_MANY_REQUESTS);
    let retry: u64 = answer
        .header("retry-after")
        .and_then(|v| v.parse().ok())
        .expect("Retry-After on a 429");
    assert!((1..=1).contains(&retry), "short tier: {retry}");
    assert_eq!(answer.body["statusCode"], 429);
    assert_eq!(answer.body["error"], "Too Many Requests");
    assert_eq!(answer.body["code"], "RATE_LIMITED");
    assert!(answer.body["message"].is_string());
}

#[tokio::test]
async fn forwarded_headers_count_only_from_a_trusted_peer() {
    let node = single_node().await;
    let base = node.base_url();
    let (proxy, stranger) = (http_from("127.0.0.1"), http_from("127.0.0.2"));
    let admin = node.client();
    let created = admin
        .post(
            "/api/auth/api-keys",
            json!({"name": "pinned", "role": "viewer", "allowedIps": ["203.0.113.5"]}),
        )
        .await
        .expect("create key");
    assert_eq!(created.status, 201, "{}", created.text);
    let pinned = created.str("apiKey");
    let validate = |http: &reqwest::Client, xff: &'static str| {
        http.post(format!("{base}/api/auth/validate"))
            .header("X-API-Key", pinned.clone())
            .header("X-Forwarded-For", xff)
            .send()
    };
    let through_proxy = validate(&proxy, "203.0.113.5").await.expect("validate");
    assert_eq!(
        through_proxy.status(),
        200,
        "the trusted proxy's word decides the client"
    );
    let spoofed = validate(&stranger, "203.0.113.5").await.expect("validate");
    assert_eq!(
        spoofed.status(),
        401,
        "an untrusted peer's header is ignored"
    );
    let body: Value = spoofed.json().await.expect("json");
    assert_eq!(body["message"], "API key is not allowed from this address");

    // Audit rows name the client the proxy reported.
    let made = proxy
        .post(format!("{base}/api/auth/api-keys"))
        .header("X-API-Key", ADMIN_KEY)
        .header("X-Forwarded-For", "198.51.100.23, 127.0.0.1")
        .json(&json!({"name": "audited", "role": "viewer"}))
        .send()
        .await
        .expect("create");
    assert_eq!(made.status(), 201);
    let audit = admin.get("/api/audit?limit=200").await.expect("audit");
    let rows = audit.body["data"].as_array().cloned().unwrap_or_default();
    assert!(
        rows.iter().any(|r| r["ipAddress"] == "198.51.100.23"),
        "audit rows: {rows:?}"
    );
}

#[tokio::test]
async fn a_spoofed_header_from_an_untrusted_peer_changes_nothing() {
    let node = single_node().await;
    let base = node.base_url();
    let stranger = http_from("127.0.0.2");
    let mut answers = Vec::new();
    for i in 0..11 {
        let xff = format!("203.0.113.{i}");
        let spoofed_hop = format!("for=198.51.100.{i}");
        answers.push(
            get(
                &stranger,
                &base,
                "/api/sessions",
                &[
                    ("X-Forwarded-For", &xff),
                    ("Forwarded", &spoofed_hop),
                    ("X-Wagate-Cluster-Secret", "not-the-cluster-secret-at-all"),
                    ("X-Wagate-Client-Address", &xff),
                ],
            )
            .await,
        );
    }
    assert_eq!(count(&answers, StatusCode::OK), 10);
    assert_refusal_shape(&answers[10]);
    // The trusted proxy's clients are untouched by the stranger's bucket.
    let proxied = get(
        &http_from("127.0.0.1"),
        &base,
        "/api/sessions",
        &[("X-Forwarded-For", "127.0.0.2")],
    )
    .await;
    assert_eq!(
        proxied.status,
        StatusCode::TOO_MANY_REQUESTS,
        "a proxied 127.0.0.2 is the same client"
    );
    let health = get(&stranger, &base, "/api/health", &[]).await;
    assert_eq!(health.status, StatusCode::OK, "health stays exempt");
}

#[tokio::test]
async fn two_clients_behind_one_trusted_proxy_have_separate_buckets() {
    let node = single_node().await;
    let base = node.base_url();
    let proxy = http_from("127.0.0.1");
    let mut first = Vec::new();
    for _ in 0..11 {
        first.push(
            get(
                &proxy,
                &base,
                "/api/sessions",
                &[("X-Forwarded-For", "192.0.2.1")],
            )
            .await,
        );
    }
    assert_eq!(count(&first, StatusCode::OK), 10);
    assert_refusal_shape(&first[10]);
    let other = get(
        &proxy,
        &base,
        "/api/sessions",
        &[("X-Forwarded-For", "192.0.2.2")],
    )
    .await;
    assert_eq!(
        other.status,
        StatusCode::OK,
        "another client behind the proxy"
    );
    assert_eq!(other.header("ratelimit-limit"), Some("10"));
    assert_eq!(other.header("ratelimit-remaining"), Some("9"));
    assert_eq!(other.header("ratelimit-reset"), Some("1"));
}

#[tokio::test]
async fn eleven_at_once_and_eleven_spread_over_900_ms_both_meet_a_429() {
    let node = single_node().await;
    let base = node.base_url();
    let proxy = http_from("127.0.0.1");
    let burst = join_all((0..11).map(|_| {
        get(
            &proxy,
            &base,
            "/api/sessions",
            &[("X-Forwarded-For", "192.0.2.10")],
        )
    }))
    .await;
    assert_eq!(count(&burst, StatusCode::OK), 10);
    let refused: Vec<&Answer> = burst
        .iter()
        .filter(|a| a.status == StatusCode::TOO_MANY_REQUESTS)
        .collect();
    assert_eq!(refused.len(), 1);
    assert_refusal_shape(refused[0]);
    let mut remaining: Vec<u64> = burst
        .iter()
        .filter(|a| a.status == StatusCode::OK)
        .filter_map(|a| a.header("ratelimit-remaining")?.parse().ok())
        .collect();
    remaining.sort_unstable();
    assert_eq!(
        remaining,
        (0..10).collect::<Vec<u64>>(),
        "one count per request"
    );

    // Warm the connection so the spread is not a connect time.
    let _ = get(&proxy, &base, "/api/health", &[]).await;
    let mut spread = Vec::new();
    let mut tick = tokio::time::interval(Duration::from_millis(90));
    for _ in 0..11 {
        tick.tick().await;
        spread.push(
            get(
                &proxy,
                &base,
                "/api/sessions",
                &[("X-Forwarded-For", "192.0.2.11")],
            )
            .await,
        );
    }
    assert_eq!(
        count(&spread, StatusCode::OK),
        10,
        "a token bucket lets these through"
    );
    assert_refusal_shape(&spread[10]);
}

/// A cluster of `size` nodes with the spec's tiers and extra env.
async fn cluster(size: usize, env: &[(&str, &str)]) -> TestCluster {
    let mut all: Vec<(String, String)> = SPEC_TIERS
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    all.push(("METRICS_TOKEN".into(), METRICS_TOKEN.into()));
    all.extend(env.iter().map(|(k, v)| (k.to_string(), v.to_string())));
    let options = ClusterOptions {
        size,
        timings: Timings::default(),
        env: all,
        ..ClusterOptions::default()
    };
    TestCluster::start_with(BIN, options)
        .await
        .expect("cluster")
}

/// `n` requests at once from `source`, spread round-robin over the nodes.
async fn burst_over(c: &TestCluster, source: &str, n: usize) -> Vec<Answer> {
    let http = http_from(source);
    let bases: Vec<String> = c.nodes.iter().map(Node::base_url).collect();
    join_all((0..n).map(|i| {
        let (http, base) = (http.clone(), bases[i % bases.len()].clone());
        async move { get(&http, &base, "/api/sessions", &[]).await }
    }))
    .await
}

#[tokio::test]
async fn one_client_spread_over_three_nodes_meets_the_limit_once() {
    let c = cluster(3, &[]).await;
    let answers = burst_over(&c, "127.0.0.3", 15).await;
    assert_eq!(
        count(&answers, StatusCode::OK),
        10,
        "one window for the cluster, not ten per node"
    );
    for refused in answers
        .iter()
        .filter(|a| a.status == StatusCode::TOO_MANY_REQUESTS)
    {
        assert_refusal_shape(refused);
    }
}

#[tokio::test]
async fn forwarded_requests_are_counted_once_at_the_node_that_received_them() {
    let c = cluster(3, &[]).await;
    let on_b = create_linked(&c.nodes[1].base_url(), "edge-b", "15550029001").await;
    let on_c = create_linked(&c.nodes[2].base_url(), "edge-c", "15550029002").await;
    let base_a = c.nodes[0].base_url();
    // 10 clients x 3 requests per second for 20 s (each client under every tier: 3 per second, 60 per
    // minute), all to node a, all for sessions b and c own: node a forwards about 30 per second, past the
    // short and the medium tier of either owner if the owners counted node a as the client.
    let clients: Vec<(reqwest::Client, String)> = (0..10)
        .map(|k| {
            let session = if k % 2 == 0 { &on_b } else { &on_c };
            (
                http_from(&format!("127.0.0.{}", 10 + k)),
                format!("/api/sessions/{session}"),
            )
        })
        .collect();
    let mut tick = tokio::time::interval(Duration::from_millis(333));
    let mut answers = Vec::new();
    for _ in 0..60 {
        tick.tick().await;
        answers.extend(
            join_all(
                clients
                    .iter()
                    .map(|(http, path)| get(http, &base_a, path, &[])),
            )
            .await,
        );
    }
    let refused = count(&answers, StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(refused, 0, "no 429 from forwarding");
    assert_eq!(count(&answers, StatusCode::OK), answers.len());
    assert!(
        answers
            .iter()
            .all(|a| matches!(a.header("x-wagate-served-by"), Some("node-b" | "node-c"))),
        "served by the owners"
    );
    assert!(
        answers
            .iter()
            .all(|a| a.header("ratelimit-limit") == Some("10")),
        "counted at node a, which answers with the quota"
    );
}

/// Setup traffic leaves from a fresh loopback address per request, so it spends no client's quota.
async fn setup_call(
    base: &str,
    method: reqwest::Method,
    path: &str,
    body: Option<Value>,
) -> (u16, Value) {
    static SEQ: AtomicU32 = AtomicU32::new(0);
    let n = SEQ.fetch_add(1, Ordering::Relaxed);
    let http = http_from(&format!("127.0.{}.{}", 2 + (n / 250) % 50, 1 + n % 250));
    let mut req = http
        .request(method, format!("{base}{path}"))
        .header("X-API-Key", ADMIN_KEY);
    if let Some(body) = body {
        req = req.json(&body);
    }
    let response = req.send().await.expect("setup request");
    let status = response.status().as_u16();
    (status, response.json().await.unwrap_or(Value::Null))
}

/// Creates, starts and links a session on the node at `base` (which then owns it).
async fn create_linked(base: &str, name: &str, phone: &str) -> String {
    use reqwest::Method;
    let (status, created) = setup_call(
        base,
        Method::POST,
        "/api/sessions",
        Some(json!({"name": name})),
    )
    .await;
    assert_eq!(status, 201, "{created}");
    let id = created["id"].as_str().expect("id").to_string();
    let (status, body) = setup_call(
        base,
        Method::POST,
        &format!("/api/sessions/{id}/start"),
        None,
    )
    .await;
    assert_eq!(status, 200, "start: {body}");
    let (status, body) = setup_call(
        base,
        Method::POST,
        &format!("/api/sim/sessions/{id}/scan"),
        Some(json!({"phone": phone})),
    )
    .await;
    assert_eq!(status, 200, "scan: {body}");
    for _ in 0..400 {
        let (_, session) =
            setup_call(base, Method::GET, &format!("/api/sessions/{id}"), None).await;
        if session["status"] == "ready" {
            return id;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    panic!("session {name} not ready");
}

/// A Redis of this test's own on a free loopback port, so stopping it touches nobody else.
struct OwnRedis {
    port: u16,
    child: Option<Child>,
}

impl OwnRedis {
    fn start(port: u16) -> OwnRedis {
        let child = Command::new("redis-server")
            .args([
                "--port",
                &port.to_string(),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("redis-server");
        let mut redis = OwnRedis {
            port,
            child: Some(child),
        };
        redis.wait_up();
        redis
    }

    fn wait_up(&mut self) {
        for _ in 0..200 {
            if std::net::TcpStream::connect(("127.0.0.1", self.port)).is_ok() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        panic!("own redis-server did not start on {}", self.port);
    }

    fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

impl Drop for OwnRedis {
    fn drop(&mut self) {
        self.stop();
    }
}

async fn fallback_count(node: &Node) -> f64 {
    let text = reqwest::Client::new()
        .get(format!("{}/api/metrics", node.base_url()))
        .bearer_auth(METRICS_TOKEN)
        .send()
        .await
        .expect("metrics")
        .text()
        .await
        .expect("text");
    text.lines()
        .find(|l| l.starts_with("wagate_rate_limit_fallback_total"))
        .and_then(|l| l.split_whitespace().last())
        .and_then(|v| v.parse().ok())
        .unwrap_or(0.0)
}

#[tokio::test]
async fn without_redis_each_node_limits_alone_and_the_shared_limit_resumes() {
    let port = free_port();
    let mut redis = OwnRedis::start(port);
    let url = format!("redis://127.0.0.1:{port}");
    let c = cluster(2, &[("REDIS_URL", &url)]).await;

    let shared = burst_over(&c, "127.0.0.4", 14).await;
    assert_eq!(
        count(&shared, StatusCode::OK),
        10,
        "shared while Redis is up"
    );

    redis.stop();
    for (n, source) in [(0, "127.0.0.5"), (1, "127.0.0.5")] {
        let http = http_from(source);
        let base = c.nodes[n].base_url();
        let local = join_all((0..12).map(|_| get(&http, &base, "/api/sessions", &[]))).await;
        assert_eq!(
            count(&local, StatusCode::OK),
            10,
            "node {n} applies the tiers alone while Redis is away"
        );
        assert_eq!(count(&local, StatusCode::TOO_MANY_REQUESTS), 2);
    }
    assert!(fallback_count(&c.nodes[0]).await >= 12.0);

    redis = OwnRedis::start(port);
    assert!(redis.child.is_some());
    let mut resumed = false;
    for k in 0..40 {
        // A fresh client each round: 14 spread over two nodes pass per-node limits, not the shared one.
        let answers = burst_over(&c, &format!("127.0.1.{k}"), 14).await;
        if count(&answers, StatusCode::OK) == 10 {
            resumed = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    assert!(resumed, "the shared limit applies again once Redis is back");
}

// Issue 20, item 4: a refusal answered before the body arrived must not break the pooled connection.

/// A body whose bytes arrive only after the request head, as a slow or streaming client sends them.
fn late_body(len: usize) -> reqwest::Body {
    let chunk = bytes::Bytes::from(vec![b'{'; len]);
    reqwest::Body::wrap_stream(futures::stream::once(async move {
        tokio::time::sleep(Duration::from_millis(30)).await;
        Ok::<_, std::io::Error>(chunk)
    }))
}

#[tokio::test]
async fn early_refusals_leave_pooled_connections_usable() {
    let node = Node::start(NodeOptions::new(BIN).env("BODY_SIZE_LIMIT", "2kb"))
        .await
        .expect("node");
    let base = node.base_url();
    let http = reqwest::Client::builder()
        .no_proxy()
        .pool_max_idle_per_host(1)
        .build()
        .expect("client");
    let url = format!("{base}/api/sessions");
    type Case = (
        &'static str,
        u16,
        fn(reqwest::RequestBuilder) -> reqwest::RequestBuilder,
    );
    let cases: [Case; 5] = [
        ("no key", 401, |r| r.body(late_body(100))),
        ("wrong key", 401, |r| {
            r.header("X-API-Key", "not-a-key").body(late_body(100))
        }),
        ("encoded", 415, |r| {
            r.header("X-API-Key", ADMIN_KEY)
                .header("Content-Encoding", "gzip")
                .body(late_body(100))
        }),
        ("declared over the limit", 413, |r| {
            r.header("X-API-Key", ADMIN_KEY)
                .header("Content-Length", "4096")
                .body(late_body(4096))
        }),
        ("declared far over the limit", 413, |r| {
            r.header("X-API-Key", ADMIN_KEY)
                .header("Content-Length", "1048576")
                .body(late_body(1_048_576))
        }),
    ];
    for (name, status, build) in cases {
        let mut next_ok = 0;
        for _ in 0..10 {
            let refused = build(http.post(&url).header("Content-Type", "application/json"))
                .send()
                .await
                .unwrap_or_else(|e| panic!("{name}: the refusal itself failed: {e}"));
            assert_eq!(refused.status().as_u16(), status, "{name}");
            let _ = refused.bytes().await;
            let next = http.get(format!("{base}/api/health")).send().await;
            if next.is_ok_and(|r| r.status() == 200) {
                next_ok += 1;
            }
        }
        assert_eq!(next_ok, 10, "{name}: the next pooled request must work");
    }
}

/// The same on a raw connection, as clients that do not watch for a server-side close see it: the head,
/// then the body a moment later, then a second request on the same socket must get its own answer.
#[tokio::test]
async fn a_401_before_the_body_arrives_keeps_the_raw_connection_open() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let node = Node::start(NodeOptions::new(BIN)).await.expect("node");
    let mut answered = 0;
    for _ in 0..10 {
        let mut socket = tokio::net::TcpStream::connect(("127.0.0.1", node.port))
            .await
            .expect("connect");
        let body = "{\"name\":\"late-body\"}";
        let head = format!(
            "POST /api/sessions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nX-API-Key: wrong\r\nContent-Length: {}\r\n\r\n",
            body.len()
        );
        socket.write_all(head.as_bytes()).await.expect("head");
        tokio::time::sleep(Duration::from_millis(50)).await;
        let _ = socket.write_all(body.as_bytes()).await;
        let _ = socket
            .write_all(b"GET /api/health HTTP/1.1\r\nHost: x\r\n\r\n")
            .await;
        let mut seen = Vec::new();
        let mut buf = [0u8; 4096];
        let read_all = async {
            loop {
                match socket.read(&mut buf).await {
                    Ok(0) | Err(_) => break,
                    Ok(n) => {
                        seen.extend_from_slice(&buf[..n]);
                        if String::from_utf8_lossy(&seen).matches("HTTP/1.1 ").count() >= 2 {
                            break;
                        }
                    }
                }
            }
        };
        let _ = tokio::time::timeout(Duration::from_secs(5), read_all).await;
        let text = String::from_utf8_lossy(&seen);
        assert!(text.starts_with("HTTP/1.1 401"), "{text}");
        if text.contains("HTTP/1.1 200") {
            answered += 1;
        }
    }
    assert_eq!(
        answered, 10,
        "the second request on each connection is answered"
    );
}

// Read timeouts: a request head or body that stops arriving must not hold a connection (and its file
// descriptor) for ever, while a slow upload that keeps sending, an idle WebSocket and plain requests work.

/// A node whose read timeouts are short enough to pass within a test.
async fn node_with_short_read_timeouts() -> Node {
    let options = NodeOptions::new(BIN)
        .env("HTTP_HEADER_READ_TIMEOUT_MS", "400")
        .env("HTTP_BODY_READ_TIMEOUT_MS", "400");
    Node::start(options).await.expect("node")
}

/// Everything the server sends until it closes the connection, or `None` when it is still open after 20 s
/// (far beyond the timeouts under test: only a connection nobody closes gets there).
async fn read_until_closed(socket: &mut tokio::net::TcpStream) -> Option<String> {
    use tokio::io::AsyncReadExt;
    let mut seen = Vec::new();
    let mut buf = [0u8; 4096];
    let read_all = async {
        loop {
            match socket.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(n) => seen.extend_from_slice(&buf[..n]),
            }
        }
    };
    tokio::time::timeout(Duration::from_secs(20), read_all)
        .await
        .ok()?;
    Some(String::from_utf8_lossy(&seen).into_owned())
}

async fn raw_connection(node: &Node, sent: &[u8]) -> tokio::net::TcpStream {
    use tokio::io::AsyncWriteExt;
    let mut socket = tokio::net::TcpStream::connect(("127.0.0.1", node.port))
        .await
        .expect("connect");
    socket.write_all(sent).await.expect("write");
    socket
}

#[tokio::test]
async fn a_request_head_that_never_ends_is_dropped_and_the_node_keeps_answering() {
    let node = node_with_short_read_timeouts().await;
    // The head without its final empty line, half a request line, and nothing at all.
    let mut unfinished = raw_connection(&node, b"GET /api/health HTTP/1.1\r\nHost: x\r\n").await;
    let mut half_line = raw_connection(&node, b"GET /api/hea").await;
    let mut silent = raw_connection(&node, b"").await;
    // An HTTP/2 connection preface cut short: the bytes the server reads to tell HTTP/1 from HTTP/2.
    let mut half_preface = raw_connection(&node, b"PRI * HTTP/2.0\r\n").await;
    for (name, socket) in [
        ("unfinished head", &mut unfinished),
        ("half a request line", &mut half_line),
        ("no bytes", &mut silent),
        ("half an HTTP/2 preface", &mut half_preface),
    ] {
        let answer = read_until_closed(socket)
            .await
            .unwrap_or_else(|| panic!("{name}: the connection is still open"));
        assert!(
            answer.is_empty() || answer.starts_with("HTTP/1.1 408"),
            "{name}: closed without an answer or with 408, got {answer:?}"
        );
    }
    // A keep-alive connection that asked once and then sits idle is closed as well, after its answer.
    let mut idle = raw_connection(&node, b"GET /api/health HTTP/1.1\r\nHost: x\r\n\r\n").await;
    let answer = read_until_closed(&mut idle)
        .await
        .expect("an idle keep-alive connection is closed");
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    let health = reqwest::get(format!("{}/api/health", node.base_url()))
        .await
        .expect("health");
    assert_eq!(health.status(), 200);
}

#[tokio::test]
async fn a_body_that_stops_arriving_answers_408_and_a_slow_one_that_keeps_coming_is_served() {
    use futures::StreamExt;
    let node = node_with_short_read_timeouts().await;
    let head = format!(
        "POST /api/auth/api-keys HTTP/1.1\r\nHost: x\r\nX-API-Key: {ADMIN_KEY}\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{{\"na"
    );
    let mut stalled = raw_connection(&node, head.as_bytes()).await;
    let answer = read_until_closed(&mut stalled)
        .await
        .expect("the stalled request is answered and its connection closed");
    assert!(answer.starts_with("HTTP/1.1 408"), "{answer}");
    let (_, body) = answer.split_once("\r\n\r\n").expect("head and body");
    let body: Value = serde_json::from_str(body).expect("a JSON error body");
    assert_eq!(body["statusCode"], 408, "{body}");
    assert_eq!(body["error"], "Request Timeout", "{body}");
    assert!(body["message"].as_str().is_some_and(|m| !m.is_empty()));

    // The same key request sent in eight pieces 150 ms apart: 1.2 s in all, three times the body timeout,
    // but never a wait as long as it.
    let text = json!({ "name": "slow-upload", "role": "viewer" }).to_string();
    let pieces: Vec<Vec<u8>> = text
        .as_bytes()
        .chunks(text.len().div_ceil(8))
        .map(<[u8]>::to_vec)
        .collect();
    let slow = futures::stream::iter(pieces).then(|piece| async move {
        tokio::time::sleep(Duration::from_millis(150)).await;
        Ok::<_, std::io::Error>(bytes::Bytes::from(piece))
    });
    let created = reqwest::Client::new()
        .post(format!("{}/api/auth/api-keys", node.base_url()))
        .header("X-API-Key", ADMIN_KEY)
        .header("Content-Type", "application/json")
        .body(reqwest::Body::wrap_stream(slow))
        .send()
        .await
        .expect("slow upload");
    assert_eq!(created.status(), 201);
    let created: Value = created.json().await.expect("json");
    assert_eq!(created["name"], "slow-upload", "{created}");
}

#[tokio::test]
async fn a_websocket_subscription_outlives_the_read_timeouts() {
    use futures::{SinkExt, StreamExt};
    use tokio_tungstenite::tungstenite::Message;
    use tokio_tungstenite::tungstenite::client::IntoClientRequest;
    let node = node_with_short_read_timeouts().await;
    let mut req = format!("ws://127.0.0.1:{}/api/ws", node.port)
        .into_client_request()
        .expect("request");
    req.headers_mut()
        .insert("X-API-Key", ADMIN_KEY.parse().expect("header"));
    let (mut ws, _) = tokio_tungstenite::connect_async(req)
        .await
        .expect("upgrade");
    let mut ask = async |frame: Value| -> Value {
        ws.send(Message::Text(frame.to_string().into()))
            .await
            .expect("send");
        loop {
            let next = tokio::time::timeout(Duration::from_secs(15), ws.next())
                .await
                .expect("an answer")
                .expect("the socket is open")
                .expect("a frame");
            if let Message::Text(text) = next {
                return serde_json::from_str(&text).expect("json");
            }
        }
    };
    let subscribed = ask(json!({ "type": "subscribe", "sessionId": "*", "events": ["*"] })).await;
    assert_eq!(subscribed["type"], "subscribed", "{subscribed}");
    // Silent for five times the header and body timeouts.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let pong = ask(json!({ "type": "ping", "requestId": "late" })).await;
    assert_eq!(pong["type"], "pong", "{pong}");
    assert_eq!(pong["requestId"], "late");
}

// Graceful stop: requests being served finish, but a client stalled in a request head or body, or an
// HTTP/2 peer that never answers the server's GOAWAY ping, must not hold a SIGTERM for the whole stop grace
// (30 s, then exit 1). The node's default read timeouts (75 s head, 60 s body) are far beyond that grace.

fn sigterm(node: &Node) {
    let pid = node.pid().expect("a running node");
    let sent = Command::new("kill")
        .arg("-TERM")
        .arg(pid.to_string())
        .status()
        .expect("kill");
    assert!(sent.success());
}

/// Well under the 30 s stop grace, and far over the shutdown allowance a stalled connection gets.
const PROMPT_EXIT: Duration = Duration::from_secs(15);

#[tokio::test]
async fn a_client_stalled_in_its_first_request_or_an_idle_http2_peer_does_not_hold_a_sigterm() {
    use tokio::io::AsyncReadExt;
    let mut node = Node::start(NodeOptions::new(BIN)).await.expect("node");
    let _partial_head = raw_connection(&node, b"GET /").await;
    let _unfinished_head = raw_connection(&node, b"GET /api/health HTTP/1.1\r\nHost: x\r\n").await;
    let head = format!(
        "POST /api/auth/api-keys HTTP/1.1\r\nHost: x\r\nX-API-Key: {ADMIN_KEY}\r\nContent-Type: application/json\r\nContent-Length: 50\r\n\r\n{{"
    );
    let mut stalled_body = raw_connection(&node, head.as_bytes()).await;
    // HTTP/2 by prior knowledge: the preface and an empty SETTINGS frame, then silence (no ping answered).
    let mut h2 = raw_connection(
        &node,
        b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\x00\x00\x00\x04\x00\x00\x00\x00\x00",
    )
    .await;
    let mut settings = [0u8; 9];
    tokio::time::timeout(Duration::from_secs(10), h2.read_exact(&mut settings))
        .await
        .expect("the server's SETTINGS in time")
        .expect("the server's SETTINGS");
    assert_eq!(settings[3], 0x4, "a SETTINGS frame first: {settings:?}");
    // Connections are accepted in order: a later one answered means the stalled ones were taken too.
    let health = reqwest::get(format!("{}/api/health", node.base_url()))
        .await
        .expect("health");
    assert_eq!(health.status(), 200);
    tokio::time::sleep(Duration::from_millis(300)).await;
    sigterm(&node);
    let code = node.wait_exit(PROMPT_EXIT).await;
    assert_eq!(
        code,
        Some(0),
        "the node exits 0 well within its stop grace:\n{}",
        node.logs()
    );
    assert!(!node.logs().contains("did not finish within its grace"));
    // The stalled body was cut with the 408 the body readers give a stall.
    let answer = read_until_closed(&mut stalled_body).await.expect("closed");
    assert!(answer.starts_with("HTTP/1.1 408"), "{answer}");
    assert!(answer.contains("shutting down"), "{answer}");
}

#[tokio::test]
async fn a_request_being_served_when_sigterm_arrives_is_answered_before_the_node_exits() {
    use tokio::io::AsyncWriteExt;
    let mut node = Node::start(NodeOptions::new(BIN)).await.expect("node");
    let text = json!({ "name": "through-the-stop", "role": "viewer" }).to_string();
    let head = format!(
        "POST /api/auth/api-keys HTTP/1.1\r\nHost: x\r\nX-API-Key: {ADMIN_KEY}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
        text.len()
    );
    let mut socket = raw_connection(&node, head.as_bytes()).await;
    let health = reqwest::get(format!("{}/api/health", node.base_url()))
        .await
        .expect("health");
    assert_eq!(health.status(), 200);
    tokio::time::sleep(Duration::from_millis(300)).await;
    sigterm(&node);
    // The body in ten pieces 400 ms apart: 4 s, twice the shutdown allowance, no wait as long as it.
    for piece in text.as_bytes().chunks(text.len().div_ceil(10)) {
        tokio::time::sleep(Duration::from_millis(400)).await;
        socket
            .write_all(piece)
            .await
            .expect("the request is still read");
    }
    let answer = read_until_closed(&mut socket).await.expect("answered");
    assert!(answer.starts_with("HTTP/1.1 201"), "{answer}");
    assert!(answer.contains("through-the-stop"), "{answer}");
    let code = node.wait_exit(PROMPT_EXIT).await;
    assert_eq!(code, Some(0), "{}", node.logs());
}
