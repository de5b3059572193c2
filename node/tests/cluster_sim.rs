//! The sim network and the WebSocket across a cluster: a send from a session on one node reaches a session
//! on another as `message.received` (acks and reactions cross back), "who exists" and contact lists are
//! cluster-wide, the shared view of connected devices names each session's node, and `/api/ws` sockets on
//! any node get the events raised on every node (once each; scope and QR rules on the receiving node).
//! Three real nodes on one PostgreSQL data DB and one Redis (own key prefix).

use std::time::Duration;

use futures::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use wagate_loadtest::harness::cluster::{TestCluster, Timings};
use wagate_loadtest::harness::sessions::{create, create_linked, wait_status};
use wagate_loadtest::harness::{ADMIN_KEY, Client, Node};

type Socket =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

const PHONE_X: &str = "15550003001";
const PHONE_Y: &str = "15550003002";

async fn connect(node: &Node, key: &str) -> Socket {
    let mut req = format!("ws://127.0.0.1:{}/api/ws", node.port)
        .into_client_request()
        .expect("request");
    req.headers_mut()
        .insert("X-API-Key", key.parse().expect("header"));
    let mut ws = tokio_tungstenite::connect_async(req)
        .await
        .expect("upgrade")
        .0;
    let sub = json!({ "type": "subscribe", "sessionId": "*", "events": ["*"], "requestId": "s" });
    ws.send(Message::Text(sub.to_string().into()))
        .await
        .expect("subscribe");
    let ack = until(&mut ws, |f| f["type"] != "pong").await;
    assert_eq!(ack["type"], "subscribed", "{ack}");
    ws
}

async fn next(ws: &mut Socket) -> Option<Value> {
    loop {
        match tokio::time::timeout(Duration::from_secs(20), ws.next())
            .await
            .ok()??
        {
            Ok(Message::Text(t)) => return serde_json::from_str(&t).ok(),
            Ok(Message::Close(_)) | Err(_) => return None,
            Ok(_) => continue,
        }
    }
}

async fn until(ws: &mut Socket, pred: impl Fn(&Value) -> bool) -> Value {
    loop {
        let f = next(ws).await.expect("socket closed before the frame");
        if pred(&f) {
            return f;
        }
    }
}

/// Every frame up to and including the first that satisfies `pred`.
async fn collect_until(ws: &mut Socket, pred: impl Fn(&Value) -> bool) -> Vec<Value> {
    let mut seen = Vec::new();
    loop {
        let f = next(ws).await.expect("socket closed before the frame");
        let is_last = pred(&f);
        seen.push(f);
        if is_last {
            return seen;
        }
    }
}

fn is_event(f: &Value, name: &str, session: &str) -> bool {
    f["type"] == "event" && f["payload"]["event"] == name && f["payload"]["sessionId"] == session
}

async fn new_key(c: &Client, name: &str, role: &str, sessions: Option<Vec<String>>) -> String {
    let r = c
        .post(
            "/api/auth/api-keys",
            json!({ "name": name, "role": role, "allowedSessions": sessions }),
        )
        .await
        .expect("key");
    assert_eq!(r.status, 201, "{}", r.text);
    r.str("apiKey")
}

async fn cluster() -> TestCluster {
    TestCluster::start(env!("CARGO_BIN_EXE_wagate"), 3, Timings::default())
        .await
        .expect("cluster")
}

#[tokio::test]
async fn sim_traffic_crosses_nodes_and_every_nodes_sockets_see_it() {
    let c = cluster().await;
    let x = create_linked(&c.client(0), "sim-x", PHONE_X)
        .await
        .expect("x on node a");
    let y = create_linked(&c.client(1), "sim-y", PHONE_Y)
        .await
        .expect("y on node b");
    // Sockets: admin on node c (neither owner), admin on node a (raises x's events), and on node c a key
    // scoped to y plus a viewer (keys are per node: they are created where they are used).
    let mut on_c = connect(&c.nodes[2], ADMIN_KEY).await;
    let mut on_a = connect(&c.nodes[0], ADMIN_KEY).await;
    let scoped_key = new_key(&c.client(2), "scoped-y", "operator", Some(vec![y.clone()])).await;
    let mut scoped = connect(&c.nodes[2], &scoped_key).await;
    let viewer_key = new_key(&c.client(2), "viewer", "viewer", None).await;
    let mut viewer = connect(&c.nodes[2], &viewer_key).await;

    // A send from x, asked of node c (forwarded to node a), reaches y on node b.
    let sent = c
        .client(2)
        .post(
            &format!("/api/sessions/{x}/messages/send-text"),
            json!({ "chatId": format!("{PHONE_Y}@c.us"), "text": "across nodes" }),
        )
        .await
        .expect("send");
    assert!(sent.status < 300, "{}", sent.text);
    let message_id = sent.str("messageId");
    let received = until(&mut on_c, |f| is_event(f, "message.received", &y)).await;
    assert_eq!(
        received["payload"]["data"]["body"], "across nodes",
        "{received}"
    );
    assert_eq!(received["payload"]["data"]["id"], message_id.as_str());
    let on_scoped = until(&mut scoped, |f| f["type"] == "event").await;
    assert!(
        is_event(&on_scoped, "message.received", &y),
        "a key scoped to y gets y's events only (x's message.sent came first): {on_scoped}"
    );
    // The recipient is online elsewhere, so the sender's message is delivered and read.
    let read = until(&mut on_c, |f| {
        is_event(f, "message.ack", &x) && f["payload"]["data"]["status"] == "read"
    })
    .await;
    assert_eq!(read["payload"]["data"]["id"], message_id.as_str(), "{read}");

    // y (owned by node b, asked of node a) reacts; x on node a gets the reaction.
    let react = c
        .client(0)
        .post(
            &format!("/api/sessions/{y}/messages/react"),
            json!({ "chatId": format!("{PHONE_X}@c.us"), "messageId": message_id, "emoji": "🎉" }),
        )
        .await
        .expect("react");
    assert_eq!(react.status, 200, "{}", react.text);
    // On the raising node a, x's events arrive exactly once each (no echo from Redis).
    let frames = collect_until(&mut on_a, |f| is_event(f, "message.reaction", &x)).await;
    let sent_frames = frames
        .iter()
        .filter(|f| is_event(f, "message.sent", &x))
        .count();
    assert_eq!(sent_frames, 1, "{frames:?}");
    assert!(
        frames.iter().any(|f| is_event(f, "message.received", &y)),
        "node a's socket also gets node b's events"
    );

    // Who exists and contact lists are cluster-wide.
    let check = c
        .client(1)
        .get(&format!("/api/sessions/{y}/contacts/check/{PHONE_X}"))
        .await
        .expect("check");
    assert_eq!(check.body["exists"], true, "{}", check.text);
    let nobody = c
        .client(1)
        .get(&format!("/api/sessions/{y}/contacts/check/15550003999"))
        .await
        .expect("check");
    assert_eq!(nobody.body["exists"], false, "{}", nobody.text);
    let contacts = c
        .client(2)
        .get(&format!("/api/sessions/{x}/contacts"))
        .await
        .expect("contacts");
    let ids: Vec<&str> = contacts
        .body
        .as_array()
        .map(|rows| rows.iter().filter_map(|r| r["id"].as_str()).collect())
        .unwrap_or_default();
    assert!(
        ids.contains(&format!("{PHONE_Y}@c.us").as_str()),
        "{}",
        contacts.text
    );

    // The shared view of connected devices, asked of any node.
    let devices = c
        .client(2)
        .get(&format!("/api/sim/devices?phone={PHONE_X}"))
        .await
        .expect("devices");
    assert_eq!(devices.status, 200, "{}", devices.text);
    let rows = devices.body.as_array().cloned().unwrap_or_default();
    assert_eq!(rows.len(), 1, "{}", devices.text);
    assert_eq!(rows[0]["sessionId"], x.as_str());
    assert_eq!(rows[0]["nodeId"], "node-a");
    assert_eq!(rows[0]["isNodeLive"], true);

    // A QR raised on node a reaches the admin on node c but not the viewer there.
    let z = create(&c.client(0), "sim-z").await.expect("z");
    let started = c
        .client(0)
        .post_empty(&format!("/api/sessions/{z}/start"))
        .await
        .expect("start");
    assert_eq!(started.status, 200, "{}", started.text);
    wait_status(&c.client(0), &z, "qr_ready", Duration::from_secs(10))
        .await
        .expect("qr");
    until(&mut on_c, |f| is_event(f, "session.qr", &z)).await;
    let status = until(&mut viewer, |f| {
        is_event(f, "session.qr", &z) || is_event(f, "session.status", &z)
    })
    .await;
    assert!(
        !is_event(&status, "session.qr", &z),
        "the viewer on node c got a QR: {status}"
    );
}
