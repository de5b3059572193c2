//! Cross-cutting HTTP behaviour: health, the error body everywhere, 415, 413, 429, request ids, OpenAPI.

use reqwest::Method;
use serde_json::json;
use wagate_loadtest::harness::{Node, NodeOptions, Reply};

fn binary() -> NodeOptions {
    NodeOptions::new(env!("CARGO_BIN_EXE_wagate"))
}

fn assert_error_shape(reply: &Reply, status: u16) {
    assert_eq!(reply.status, status, "{}", reply.text);
    assert_eq!(reply.body["statusCode"], status, "{}", reply.text);
    assert!(reply.body["message"].is_string(), "{}", reply.text);
    assert!(reply.body["error"].is_string(), "{}", reply.text);
}

#[tokio::test]
async fn health_shows_the_version_only_to_a_valid_key() {
    let node = Node::start(binary()).await.expect("node");
    let anonymous = node
        .client_with_key(None)
        .get("/api/health")
        .await
        .expect("health");
    assert_eq!(anonymous.status, 200);
    assert_eq!(anonymous.body["status"], "ok");
    assert!(anonymous.body.get("version").is_none());
    let wrong = node
        .client_with_key(Some("wrong"))
        .get("/api/health")
        .await
        .expect("health");
    assert!(wrong.body.get("version").is_none());
    let admin = node.client().get("/api/health").await.expect("health");
    assert_eq!(admin.body["version"], "0.23.5");
    let live = node
        .client_with_key(None)
        .get("/api/health/live")
        .await
        .expect("live");
    assert_eq!(live.status, 200);
    let ready = node
        .client_with_key(None)
        .get("/api/health/ready")
        .await
        .expect("ready");
    assert_eq!(ready.body["details"]["mainDatabase"]["status"], "up");
    assert_eq!(ready.body["details"]["dataDatabase"]["status"], "up");
}

#[tokio::test]
async fn errors_always_have_the_spec_shape() {
    let node = Node::start(binary()).await.expect("node");
    let anon = node.client_with_key(None);
    assert_error_shape(
        &anon.post_empty("/api/auth/validate").await.expect("401"),
        401,
    );
    assert_error_shape(
        &node.client().get("/api/no-such-route").await.expect("404"),
        404,
    );
    let bad_json = node
        .client()
        .raw(Method::POST, "/api/auth/api-keys")
        .body("{not json");
    assert_error_shape(&node.client().send(bad_json).await.expect("400"), 400);
    // An array would fill a body's fields in order: every body is an object.
    let array = node
        .client()
        .post(
            "/api/auth/api-keys",
            json!(["array-key", "viewer", null, null, null]),
        )
        .await
        .expect("400");
    assert_error_shape(&array, 400);
    assert_eq!(
        array.body["message"],
        "Invalid request body: expected a JSON object"
    );
    // No store keeps a NUL character (PostgreSQL refuses it): refused as input, never a failed write.
    let nul = node
        .client()
        .post("/api/auth/api-keys", json!({ "name": "nul\u{0}key" }))
        .await
        .expect("400");
    assert_error_shape(&nul, 400);
    assert!(nul.str("message").contains("NUL"), "{}", nul.text);
    let bad_query = node
        .client()
        .get("/api/audit?limit=abc")
        .await
        .expect("400");
    assert_error_shape(&bad_query, 400);
}

#[tokio::test]
async fn a_content_encoding_is_refused_with_415_before_auth() {
    let node = Node::start(binary()).await.expect("node");
    let anon = node.client_with_key(None);
    let req = anon
        .raw(Method::POST, "/api/auth/validate")
        .header("Content-Encoding", "gzip")
        .body("x");
    assert_error_shape(&anon.send(req).await.expect("415"), 415);
    // A second header line is read too (reqwest's `header` appends a line).
    let two_lines = anon
        .raw(Method::POST, "/api/auth/validate")
        .header("Content-Encoding", "identity")
        .header("Content-Encoding", "gzip")
        .body("x");
    assert_error_shape(&anon.send(two_lines).await.expect("415"), 415);
    let identity = node
        .client()
        .raw(Method::POST, "/api/auth/validate")
        .header("Content-Encoding", "identity");
    assert_eq!(node.client().send(identity).await.expect("ok").status, 200);
}

#[tokio::test]
async fn a_body_over_the_limit_is_refused_with_413() {
    let node = Node::start(binary().env("BODY_SIZE_LIMIT", "1kb"))
        .await
        .expect("node");
    let big = json!({ "name": "x".repeat(4096) });
    let reply = node
        .client()
        .post("/api/auth/api-keys", big)
        .await
        .expect("413");
    assert_error_shape(&reply, 413);
    assert!(reply.body.get("code").is_none(), "413 has no code field");
}

#[tokio::test]
async fn the_short_rate_tier_answers_429_with_retry_after() {
    let node = Node::start(
        binary()
            .env("RATE_LIMIT_SHORT_LIMIT", "5")
            .env("RATE_LIMIT_SHORT_TTL", "60000"),
    )
    .await
    .expect("node");
    let client = node.client();
    let mut statuses = Vec::new();
    for _ in 0..8 {
        statuses.push(
            client
                .post_empty("/api/auth/validate")
                .await
                .expect("reply"),
        );
    }
    let refused = statuses
        .iter()
        .find(|r| r.status == 429)
        .expect("a 429 after the limit");
    assert_error_shape(refused, 429);
    assert_eq!(refused.body["code"], "RATE_LIMITED", "{}", refused.text);
    assert!(
        refused
            .header("retry-after")
            .is_some_and(|v| v.parse::<u64>().is_ok_and(|s| s >= 1))
    );
    assert_eq!(statuses.iter().filter(|r| r.status == 200).count(), 5);
    assert_eq!(
        client.get("/api/health").await.expect("health").status,
        200,
        "health is never limited"
    );
}

#[tokio::test]
async fn every_response_carries_a_request_id() {
    let node = Node::start(binary()).await.expect("node");
    let reply = node.client().get("/api/health").await.expect("health");
    assert!(reply.header("x-request-id").is_some_and(|v| !v.is_empty()));
}

/// A caller's `X-Request-Id` is repeated (answer and access line) only when it is a short plain token; one
/// with spaces or `key=value` pairs, or 20000 characters long, is replaced by a fresh id, so it can neither
/// forge fields in the text access line nor make every answer and line that long.
#[tokio::test]
async fn only_a_short_plain_request_id_is_kept() {
    let node = Node::start(binary().env("LOG_FORMAT", "text"))
        .await
        .expect("node");
    let client = node.client();
    let with_id = async |id: &str| {
        let req = client
            .raw(Method::GET, "/api/sessions")
            .header("X-Request-Id", id);
        let reply = client.send(req).await.expect("reply");
        assert_eq!(reply.status, 200, "{}", reply.text);
        reply.header("x-request-id").unwrap_or_default().to_owned()
    };
    let traceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
    assert_eq!(with_id(traceparent).await, traceparent);
    assert!(
        node.wait_logged(
            &format!("request_id={traceparent}"),
            std::time::Duration::from_secs(10)
        )
        .await,
        "{}",
        node.logs()
    );
    let forged = "abc status=500 route=/api/admin key_id=forged";
    let replaced = with_id(forged).await;
    assert!(uuid::Uuid::parse_str(&replaced).is_ok(), "{replaced}");
    let long = "a".repeat(20_000);
    let fresh = with_id(&long).await;
    assert!(uuid::Uuid::parse_str(&fresh).is_ok(), "{fresh}");
    assert_ne!(fresh, replaced);
    assert!(
        node.wait_logged(
            &format!("request_id={fresh}"),
            std::time::Duration::from_secs(10)
        )
        .await,
        "{}",
        node.logs()
    );
    let logs = node.logs();
    assert!(logs.contains(&format!("request_id={replaced}")), "{logs}");
    assert!(!logs.contains("key_id=forged"), "{logs}");
    assert!(!logs.contains(&long), "the long id is not logged");
}

#[tokio::test]
async fn the_openapi_document_and_ui_are_served_offline() {
    let node = Node::start(binary()).await.expect("node");
    // DOCS_PUBLIC is off by default: the document needs a key (api_docs_and_clients.rs covers the rest).
    let doc = node
        .client()
        .get("/api/docs/openapi.json")
        .await
        .expect("doc");
    assert_eq!(doc.status, 200);
    for path in [
        "/api/health",
        "/api/auth/api-keys",
        "/api/audit",
        "/api/metrics",
        "/api/settings",
        "/api/stats/overview",
    ] {
        assert!(
            doc.body["paths"].get(path).is_some(),
            "{path} missing from the OpenAPI document"
        );
    }
    let ui = node
        .client_with_key(None)
        .get("/api/docs/")
        .await
        .expect("ui");
    assert_eq!(ui.status, 200);
    assert!(
        ui.text.contains("swagger"),
        "the UI page is served from the binary"
    );
}

#[tokio::test]
async fn graceful_shutdown_exits_cleanly() {
    let mut node = Node::start(binary()).await.expect("node");
    assert_eq!(node.stop().await, Some(0));
}

#[tokio::test]
async fn metrics_need_the_metrics_token() {
    let plain = Node::start(binary()).await.expect("node");
    assert_eq!(
        plain
            .client()
            .get("/api/metrics")
            .await
            .expect("reply")
            .status,
        404
    );
    let node = Node::start(binary().env("METRICS_TOKEN", "scrape-me"))
        .await
        .expect("node");
    let anon = node.client_with_key(None);
    assert_eq!(anon.get("/api/metrics").await.expect("reply").status, 401);
    let req = anon
        .raw(Method::GET, "/api/metrics")
        .bearer_auth("scrape-me");
    let scrape = anon.send(req).await.expect("reply");
    assert_eq!(scrape.status, 200);
    // The CPU time is one counter family, with its fraction (the value itself is whatever the boot took).
    let text = &scrape.text;
    assert_eq!(
        text.matches("# TYPE process_cpu_seconds_total counter\n")
            .count(),
        1,
        "{text}"
    );
    let cpu = text
        .lines()
        .find_map(|l| l.strip_prefix("process_cpu_seconds_total "))
        .and_then(|v| v.parse::<f64>().ok());
    assert!(cpu.is_some_and(|s| s > 0.0), "{text}");
    for global in ["wagate_queue_jobs", "wagate_outbox_rows"] {
        let help = text
            .lines()
            .find(|l| l.starts_with(&format!("# HELP {global} ")))
            .unwrap_or_default();
        assert!(help.contains("global count"), "{help}");
    }
}

#[tokio::test]
async fn settings_and_stats_overview_are_served() {
    let node = Node::start(binary()).await.expect("node");
    let settings = node.client().get("/api/settings").await.expect("settings");
    assert_eq!(settings.status, 200, "{}", settings.text);
    assert_eq!(settings.body["engineType"], "sim");
    assert_eq!(settings.body["version"], "0.23.5");
    let anon = node.client_with_key(None);
    assert_error_shape(&anon.get("/api/settings").await.expect("401"), 401);
    let stats = node
        .client()
        .get("/api/stats/overview")
        .await
        .expect("stats");
    assert_eq!(stats.status, 200, "{}", stats.text);
    assert!(stats.body["sessions"]["total"].is_i64(), "{}", stats.text);
    assert!(stats.body["messages"]["total"].is_i64(), "{}", stats.text);
}

#[tokio::test]
async fn every_session_scoped_answer_names_the_node_refusals_included() {
    const SERVED_BY: &str = "x-wagate-served-by";
    let node = Node::start(binary().env("NODE_ID", "node-basics"))
        .await
        .expect("node");
    let client = node.client();
    let unknown = client
        .get("/api/sessions/00000000-0000-4000-8000-000000000000")
        .await
        .expect("404");
    assert_eq!(unknown.status, 404);
    assert_eq!(unknown.header(SERVED_BY), Some("node-basics"));
    let by_name = client
        .get("/api/sessions/no-such-name/chats")
        .await
        .expect("by name");
    assert!(by_name.status >= 400, "{}", by_name.text);
    assert_eq!(by_name.header(SERVED_BY), Some("node-basics"));
    let encoded = client
        .raw(
            Method::POST,
            "/api/sessions/00000000-0000-4000-8000-000000000000/messages/send-text",
        )
        .header("Content-Encoding", "gzip")
        .body("x");
    let refused = client.send(encoded).await.expect("415");
    assert_error_shape(&refused, 415);
    assert_eq!(refused.header(SERVED_BY), Some("node-basics"));
    let list = client.get("/api/sessions").await.expect("list");
    assert_eq!(list.header(SERVED_BY), None, "not session-scoped");
}
