//! The socket engine offline, through the real HTTP API of a node: the client dials a local WebSocket
//! endpoint (`SOCKET_WS_URL`) that accepts and closes at once, or a port that refuses. The session reads
//! `initializing`, the start budget answers 504, the client keeps retrying on its own on the session's
//! reconnect policy, `lastError` appears after the fifth consecutive failed self-retry, `maxReconnectAttempts`
//! counts reconnects only (the start's own connect is none), each self-retry counts in
//! `wagate_session_reconnects_total`, and a stop ends the retries. Many sessions started at once all get
//! the spec's answer (504, never a 500), and a logout of a linked session whose client is not running dials
//! out with the stored credentials to unlink before it forgets them.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use futures::SinkExt;
use sqlx::SqlitePool;
use sqlx::sqlite::SqliteConnectOptions;
use tokio::net::TcpListener;
use tokio_tungstenite::tungstenite::Message;
use wagate_db::DataPool;
use wagate_engine_socket::store::{SqlBackend, has_device};
use wagate_engine_socket::whatsapp_rust::wacore::store::Device;
use wagate_engine_socket::whatsapp_rust::wacore::store::traits::DeviceStore;
use wagate_loadtest::harness::sessions::{create, wait_status};
use wagate_loadtest::harness::{Client, Node, NodeOptions};

/// Upper bound for the retries to reach the fifth failed reconnect (`reconnectBaseDelay` 1000: 1+2+4+8+16 s).
const RETRY_WAIT: Duration = Duration::from_secs(90);
/// The smallest `reconnectBaseDelay`, so the tests see several self-retries quickly.
const FAST_RETRIES: &str = r#"{ "reconnectBaseDelay": 1000 }"#;

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
            .env("SESSION_START_TIMEOUT_MS", "1500")
            .env("METRICS_TOKEN", METRICS_TOKEN),
    )
    .await
    .expect("node")
}

const METRICS_TOKEN: &str = "socket-metrics";

/// Creates a session with the given config.
async fn create_with(c: &Client, name: &str, config: &str) -> String {
    let id = create(c, name).await.expect("create");
    let config: serde_json::Value = serde_json::from_str(config).expect("config json");
    let set = c
        .patch(&format!("/api/sessions/{id}/config"), config)
        .await
        .expect("config");
    assert_eq!(set.status, 200, "{}", set.text);
    id
}

/// A counter's value on the node's Prometheus page (0 when it was never incremented).
async fn counter(node: &Node, name: &str) -> f64 {
    let anon = node.client_with_key(None);
    let req = anon
        .raw(reqwest::Method::GET, "/api/metrics")
        .bearer_auth(METRICS_TOKEN);
    let page = anon.send(req).await.expect("metrics");
    assert_eq!(page.status, 200, "{}", page.text);
    page.text
        .lines()
        .find_map(|line| {
            let (metric, value) = line.split_once(' ')?;
            (metric == name).then(|| value.trim().parse::<f64>().ok())?
        })
        .unwrap_or(0.0)
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
    let id = create_with(&c, "offline", FAST_RETRIES).await;

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
    // The start's own connect and five failed reconnects.
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
    let id = create_with(&c, "refused", FAST_RETRIES).await;
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

/// `maxReconnectAttempts: 1` makes exactly one self-retry after the start's own connect failed (the start's
/// connect is no reconnect attempt), then the session fails with `lastError`; the self-retry counts in
/// `wagate_session_reconnects_total`, and no connect follows the failure.
#[tokio::test]
async fn max_reconnect_attempts_one_makes_exactly_one_self_retry() {
    let (port, connections) = closing_server().await;
    let node = socket_node(&format!("ws://127.0.0.1:{port}/ws/chat")).await;
    let c = node.client();
    let id = create_with(
        &c,
        "one-retry",
        r#"{ "maxReconnectAttempts": 1, "reconnectBaseDelay": 1000 }"#,
    )
    .await;
    let started = c
        .post_empty(&format!("/api/sessions/{id}/start"))
        .await
        .expect("start");
    assert!(
        started.status == 504 || started.body["status"] == "failed",
        "{}",
        started.text
    );
    let failed = wait_status(&c, &id, "failed", RETRY_WAIT)
        .await
        .expect("failed");
    assert!(
        failed.str("lastError").contains("handshake"),
        "{}",
        failed.text
    );
    assert_eq!(failed.body["engineLoaded"], false, "{}", failed.text);
    // The next reconnect would come 2 s after the failure; none is made.
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(
        connections.load(Ordering::SeqCst),
        2,
        "the start's connect and one reconnect"
    );
    assert_eq!(
        counter(&node, "wagate_session_reconnects_total").await,
        1.0,
        "the one self-retry is an automatic reconnect attempt"
    );
}

#[tokio::test]
async fn many_concurrent_starts_all_answer_504_then_stop_cleanly() {
    // The socket-sessions benchmark once saw 500s when 16 starts ran at once (SQLite writers racing for
    // the write lock); every start must get the spec's answer for a network that never completes: 504.
    const SESSIONS: usize = 24;
    let (port, connections) = closing_server().await;
    let node = socket_node(&format!("ws://127.0.0.1:{port}/ws/chat")).await;
    let client = node.client();
    let c = &client;
    let mut ids = Vec::with_capacity(SESSIONS);
    for i in 0..SESSIONS {
        ids.push(create(c, &format!("burst-{i}")).await.expect("create"));
    }
    let starts = futures::future::join_all(
        ids.iter()
            .map(|id| async move { c.post_empty(&format!("/api/sessions/{id}/start")).await }),
    )
    .await;
    for (id, reply) in ids.iter().zip(starts) {
        let reply = reply.expect("start");
        assert_eq!(reply.status, 504, "start {id}: {}", reply.text);
    }
    assert!(
        connections.load(Ordering::SeqCst) >= SESSIONS as u32,
        "every client dialled: {}",
        connections.load(Ordering::SeqCst)
    );
    let stops = futures::future::join_all(
        ids.iter()
            .map(|id| async move { c.post_empty(&format!("/api/sessions/{id}/stop")).await }),
    )
    .await;
    for (id, reply) in ids.iter().zip(stops) {
        let reply = reply.expect("stop");
        assert_eq!(reply.status, 200, "stop {id}: {}", reply.text);
        assert_eq!(reply.body["status"], "disconnected", "{}", reply.text);
    }
}

async fn data_db(node: &Node) -> SqlitePool {
    let path = node.dir.path().join("data").join("wagate.sqlite");
    let options = SqliteConnectOptions::new()
        .filename(path)
        .busy_timeout(Duration::from_secs(5));
    wagate_db::pool_options()
        .connect_with(options)
        .await
        .expect("data db")
}

/// What a linked session leaves behind once stopped: its phone and `engine_auth` row, and the device record
/// (keys and the paired account) in the socket store.
async fn store_linked_credentials(db: &SqlitePool, id: &str) {
    sqlx::query("UPDATE sessions SET phone = '15550001111', has_credentials = TRUE WHERE id = $1")
        .bind(id)
        .execute(db)
        .await
        .expect("session row");
    let account = serde_json::json!({
        "phone": "15550001111@c.us",
        "pushName": "Alice",
        "credentials": serde_json::json!({"store": "socket", "jid": "15550001111@s.whatsapp.net"}).to_string(),
    });
    sqlx::query("INSERT INTO engine_auth (session_id, engine, data, updated_at) VALUES ($1, 'socket', $2, 0)")
        .bind(id)
        .bind(account.to_string())
        .execute(db)
        .await
        .expect("engine_auth row");
    let mut device = Device::new();
    device.pn = Some("15550001111@s.whatsapp.net".parse().expect("jid"));
    device.push_name = "Alice".into();
    SqlBackend::new(DataPool::Sqlite(db.clone()), id)
        .save(&device)
        .await
        .expect("device");
}

#[tokio::test]
async fn logout_of_a_stopped_linked_session_dials_to_unlink_and_reports_incomplete_offline() {
    let (port, connections) = closing_server().await;
    // The socket store is read directly below: SQLite whatever the suite's backend.
    let node = Node::start(
        NodeOptions::new(env!("CARGO_BIN_EXE_wagate"))
            .env("DATABASE_TYPE", "sqlite")
            .env("ENGINE_TYPE", "socket")
            .env("SOCKET_WS_URL", format!("ws://127.0.0.1:{port}/ws/chat")),
    )
    .await
    .expect("node");
    let c = node.client();
    let id = create(&c, "linked-stopped").await.expect("create");
    let db = data_db(&node).await;
    store_linked_credentials(&db, &id).await;
    let pool = DataPool::Sqlite(db.clone());
    assert!(has_device(&pool, &id).await.expect("has_device"));

    let logout = c
        .post_empty(&format!("/api/sessions/{id}/logout"))
        .await
        .expect("logout");
    // The network cannot be reached, so the unlink did not complete: the spec's 502, local state gone.
    assert_eq!(logout.status, 502, "{}", logout.text);
    assert_eq!(
        logout.body["code"], "SESSION_LOGOUT_INCOMPLETE",
        "{}",
        logout.text
    );
    assert!(
        connections.load(Ordering::SeqCst) >= 1,
        "the logout connected with the stored credentials to send the unlink"
    );
    assert!(!has_device(&pool, &id).await.expect("has_device"));
    let auth_rows: i64 =
        sqlx::query_scalar("SELECT COUNT(*) FROM engine_auth WHERE session_id = $1")
            .bind(&id)
            .fetch_one(&db)
            .await
            .expect("count");
    assert_eq!(auth_rows, 0);
    let record = c.get(&format!("/api/sessions/{id}")).await.expect("get");
    assert!(record.body["phone"].is_null(), "{}", record.text);
    assert_eq!(record.body["engineLoaded"], false, "{}", record.text);

    // Nothing left to unlink: a second logout has no credentials and succeeds without dialling.
    let dialled = connections.load(Ordering::SeqCst);
    let again = c
        .post_empty(&format!("/api/sessions/{id}/logout"))
        .await
        .expect("logout");
    assert_eq!(again.status, 200, "{}", again.text);
    assert_eq!(connections.load(Ordering::SeqCst), dialled);
}

#[tokio::test]
async fn logout_of_a_running_session_that_never_paired_answers_200() {
    // Nothing was linked, so there is nothing to unlink on the server: no 502, and no wait for a connection.
    let (port, _connections) = closing_server().await;
    let node = socket_node(&format!("ws://127.0.0.1:{port}/ws/chat")).await;
    let c = node.client();
    let id = create(&c, "never-paired").await.expect("create");
    let started = c
        .post_empty(&format!("/api/sessions/{id}/start"))
        .await
        .expect("start");
    assert_eq!(started.status, 504, "{}", started.text);
    let logout = c
        .post_empty(&format!("/api/sessions/{id}/logout"))
        .await
        .expect("logout");
    assert_eq!(logout.status, 200, "{}", logout.text);
    assert_eq!(logout.body["engineLoaded"], false, "{}", logout.text);
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

/// Opt-in, against the real WhatsApp network: `WAGATE_LIVE=1 WAGATE_LIVE_TO=<number or JID>` (and
/// optionally `WAGATE_LIVE_PHONE=<own number>` for a pairing code instead of the QR,
/// `WAGATE_LIVE_WAIT_SECS`, default 180). Starts a socket node, shows the QR (a PNG file and its data URL)
/// or a pairing code, waits for the phone to link, sends a text and waits for its server ack, then logs the
/// device out (which unlinks it on the phone's device list).
#[tokio::test]
async fn live_link_send_and_ack() {
    if std::env::var("WAGATE_LIVE").as_deref() != Ok("1") {
        eprintln!(
            "live_link_send_and_ack skipped: set WAGATE_LIVE=1 and WAGATE_LIVE_TO=<number> to run it against WhatsApp"
        );
        return;
    }
    let to =
        std::env::var("WAGATE_LIVE_TO").expect("WAGATE_LIVE_TO: the number (or JID) to send to");
    let chat_id = if to.contains('@') {
        to
    } else {
        format!("{}@c.us", to.trim_start_matches('+'))
    };
    let wait = Duration::from_secs(
        std::env::var("WAGATE_LIVE_WAIT_SECS")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(180),
    );
    let receiver = wagate_loadtest::harness::Receiver::start()
        .await
        .expect("receiver");
    let node = Node::start(
        NodeOptions::new(env!("CARGO_BIN_EXE_wagate"))
            .env("ENGINE_TYPE", "socket")
            .env("LOG_LEVEL", "info")
            .env("SESSION_START_TIMEOUT_MS", "30000"),
    )
    .await
    .expect("node");
    eprintln!("node log: {}", node.log_path().display());
    let c = node.client();
    let id = create(&c, "live").await.expect("create");
    let hook = c
        .post(
            &format!("/api/sessions/{id}/webhooks"),
            serde_json::json!({ "url": receiver.url(), "events": ["message.ack"] }),
        )
        .await
        .expect("webhook");
    assert_eq!(hook.status, 201, "{}", hook.text);
    let started = c
        .post_empty(&format!("/api/sessions/{id}/start"))
        .await
        .expect("start");
    assert!(
        started.status == 200 || started.status == 504,
        "{}",
        started.text
    );

    let deadline = tokio::time::Instant::now() + wait;
    let mut shown = String::new();
    let mut asked_code = false;
    loop {
        let record = c.get(&format!("/api/sessions/{id}")).await.expect("get");
        match record.body["status"].as_str() {
            Some("ready") => break,
            Some("failed") | Some("action_required") => panic!("linking failed: {}", record.text),
            _ => {}
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "not linked within {} s: {}",
            wait.as_secs(),
            record.text
        );
        if let Ok(phone) = std::env::var("WAGATE_LIVE_PHONE")
            && !asked_code
            && record.body["status"] == "qr_ready"
        {
            let code = c
                .post(
                    &format!("/api/sessions/{id}/pairing-code"),
                    serde_json::json!({ "phoneNumber": phone }),
                )
                .await
                .expect("pairing code");
            eprintln!(
                "pairing code ({}): {} -- WhatsApp > Linked devices > Link with phone number",
                code.status, code.body["pairingCode"]
            );
            asked_code = true;
        }
        let qr = c.get(&format!("/api/sessions/{id}/qr")).await.expect("qr");
        if !asked_code
            && qr.status == 200
            && let Some(url) = qr.body["qrCode"].as_str()
            && url != shown
        {
            let png = url
                .strip_prefix("data:image/png;base64,")
                .and_then(|b64| {
                    use base64::Engine as _;
                    base64::engine::general_purpose::STANDARD.decode(b64).ok()
                })
                .unwrap_or_default();
            let path = std::env::temp_dir().join("wagate-live-qr.png");
            let _ = std::fs::write(&path, png);
            eprintln!(
                "scan the QR (WhatsApp > Linked devices): open {} or paste this data URL into a browser:\n{url}\n",
                path.display()
            );
            shown = url.to_string();
        }
        tokio::time::sleep(Duration::from_secs(2)).await;
    }
    eprintln!("linked; sending to {chat_id}");

    let sent = c
        .post(
            &format!("/api/sessions/{id}/messages/send-text"),
            serde_json::json!({ "chatId": chat_id, "text": "wagate live test" }),
        )
        .await
        .expect("send");
    assert_eq!(sent.status, 201, "{}", sent.text);
    let message_id = sent.str("messageId");
    let acks = receiver
        .wait_until(Duration::from_secs(60), |all| {
            all.iter()
                .any(|d| d.json()["data"]["messageId"] == message_id.as_str())
        })
        .await;
    let ack = acks
        .iter()
        .map(|d| d.json())
        .find(|j| j["data"]["messageId"] == message_id.as_str())
        .expect("a message.ack for the sent message");
    eprintln!("ack: {}", ack["data"]);
    assert!(
        ["sent", "delivered", "read"].contains(&ack["data"]["status"].as_str().unwrap_or_default()),
        "{ack}"
    );

    let logout = c
        .post_empty(&format!("/api/sessions/{id}/logout"))
        .await
        .expect("logout");
    assert_eq!(logout.status, 200, "{}", logout.text);
}
