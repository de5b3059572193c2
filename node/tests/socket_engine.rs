//! The socket engine offline, through the real HTTP API of a node: the client dials a local WebSocket
//! endpoint (`SOCKET_WS_URL`) that accepts and closes at once, or a port that refuses. The session reads
//! `initializing`, the start budget answers 504, the client keeps retrying on its own, `lastError` appears
//! after the fifth consecutive failed attempt, and a stop ends the retries.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use futures::SinkExt;
use tokio::net::TcpListener;
use tokio_tungstenite::tungstenite::Message;
use wagate_loadtest::harness::sessions::create;
use wagate_loadtest::harness::{Client, Node, NodeOptions};

/// Upper bound for the retries to reach the fifth failure (the library's Fibonacci backoff: 1+1+2+3+5 s).
const RETRY_WAIT: Duration = Duration::from_secs(60);

/// Accepts WebSocket upgrades and closes each one at once; counts the connections.
async fn closing_server() -> (u16, Arc<AtomicU32>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let port = listener.local_addr().expect("addr").port();
    let count = Arc::new(AtomicU32::new(0));
    let seen = count.clone();
    tokio::spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            seen.fetch_add(1, Ordering::SeqCst);
            tokio::spawn(async move {
                if let Ok(mut ws) = tokio_tungstenite::accept_async(tcp).await {
                    let _ = ws.send(Message::Close(None)).await;
                }
            });
        }
    });
    (port, count)
}

async fn socket_node(ws_url: &str) -> Node {
    Node::start(
        NodeOptions::new(env!("CARGO_BIN_EXE_wagate"))
            .env("ENGINE_TYPE", "socket")
            .env("SOCKET_WS_URL", ws_url)
            .env("SESSION_START_TIMEOUT_MS", "1500"),
    )
    .await
    .expect("node")
}

/// Polls the session record until `lastError` is set; answers the record.
async fn wait_last_error(c: &Client, id: &str) -> serde_json::Value {
    let deadline = tokio::time::Instant::now() + RETRY_WAIT;
    loop {
        let record = c.get(&format!("/api/sessions/{id}")).await.expect("get");
        if record.body.get("lastError").is_some_and(|e| !e.is_null()) {
            return record.body;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "no lastError: {}",
            record.text
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

#[tokio::test]
async fn a_closing_endpoint_keeps_initializing_answers_504_then_shows_last_error() {
    let (port, connections) = closing_server().await;
    let node = socket_node(&format!("ws://127.0.0.1:{port}/ws/chat")).await;
    let c = node.client();
    let id = create(&c, "offline").await.expect("create");

    let started = c
        .post_empty(&format!("/api/sessions/{id}/start"))
        .await
        .expect("start");
    assert_eq!(started.status, 504, "{}", started.text);
    let record = c.get(&format!("/api/sessions/{id}")).await.expect("get");
    assert_eq!(record.body["status"], "initializing", "{}", record.text);
    assert!(
        connections.load(Ordering::SeqCst) >= 1,
        "the client dialled our endpoint"
    );

    let record = wait_last_error(&c, &id).await;
    assert_eq!(record["status"], "initializing", "{record}");
    let last_error = record["lastError"].as_str().unwrap_or_default();
    assert!(last_error.contains("handshake"), "{last_error}");
    // Five failed attempts are known when the sixth begins.
    assert!(
        connections.load(Ordering::SeqCst) >= 6,
        "retries: {}",
        connections.load(Ordering::SeqCst)
    );

    let stopped = c
        .post_empty(&format!("/api/sessions/{id}/stop"))
        .await
        .expect("stop");
    assert_eq!(stopped.status, 200, "{}", stopped.text);
    assert_eq!(stopped.body["status"], "disconnected", "{}", stopped.text);
    assert!(
        stopped.body.get("lastError").is_none_or(|e| e.is_null()),
        "{}",
        stopped.text
    );
}

#[tokio::test]
async fn a_refusing_endpoint_reports_the_dial_error() {
    let port = {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        listener.local_addr().expect("addr").port()
    };
    let node = socket_node(&format!("ws://127.0.0.1:{port}/ws/chat")).await;
    let c = node.client();
    let id = create(&c, "refused").await.expect("create");
    let started = c
        .post_empty(&format!("/api/sessions/{id}/start"))
        .await
        .expect("start");
    assert_eq!(started.status, 504, "{}", started.text);

    let record = wait_last_error(&c, &id).await;
    assert_eq!(record["status"], "initializing", "{record}");
    let last_error = record["lastError"].as_str().unwrap_or_default();
    assert!(
        last_error.contains(&format!("cannot reach ws://127.0.0.1:{port}/ws/chat")),
        "{last_error}"
    );
    // No QR was ever produced.
    assert_eq!(
        c.get(&format!("/api/sessions/{id}/qr"))
            .await
            .expect("qr")
            .status,
        400
    );
    let killed = c
        .post_empty(&format!("/api/sessions/{id}/force-kill"))
        .await
        .expect("kill");
    assert!(killed.status < 300, "{}", killed.text);
}

/// The socket column allows presence, catalog reads and send-product: with the client running but not
/// connected each answers the spec's 409 (never 501), and a presence read answers null while nothing
/// was heard.
#[tokio::test]
async fn presence_catalog_and_product_routes_answer_409_before_ready_never_501() {
    let (port, _connections) = closing_server().await;
    let node = socket_node(&format!("ws://127.0.0.1:{port}/ws/chat")).await;
    let c = node.client();
    let id = create(&c, "not-ready").await.expect("create");
    let started = c
        .post_empty(&format!("/api/sessions/{id}/start"))
        .await
        .expect("start");
    assert_eq!(started.status, 504, "{}", started.text);

    let base = format!("/api/sessions/{id}");
    let replies = [
        c.put(
            &format!("{base}/presence"),
            serde_json::json!({"available": true}),
        )
        .await,
        c.post(
            &format!("{base}/presence/subscribe"),
            serde_json::json!({"chatId": "15550001111@c.us"}),
        )
        .await,
        c.get(&format!("{base}/catalog")).await,
        c.get(&format!("{base}/catalog/products?page=1&limit=10"))
            .await,
        c.get(&format!("{base}/catalog/products/p1")).await,
        c.post(
            &format!("{base}/messages/send-product"),
            serde_json::json!({"chatId": "15550001111@c.us", "productId": "p1"}),
        )
        .await,
    ];
    for reply in replies {
        let reply = reply.expect("request");
        assert_eq!(reply.status, 409, "{}", reply.text);
        assert_eq!(
            reply.body["message"], "Session is not connected",
            "{}",
            reply.text
        );
    }
    let presence = c
        .get(&format!("{base}/presence/15550001111@c.us"))
        .await
        .expect("presence read");
    assert_eq!(presence.status, 200, "{}", presence.text);
    assert!(presence.body.is_null(), "{}", presence.text);
}
