//! The WebSocket at `/api/ws` with a real client: both ways of presenting the key, subscriptions and event
//! frames, `session.qr` only for OPERATOR/ADMIN, scoped keys, error codes, the frame rate limit, and the
//! periodic key re-validation (WS_REVALIDATE_MS shortened).

mod support;

use std::time::Duration;

use futures::{SinkExt, StreamExt};
use serde_json::{Value, json};
use support::{inbound, ready_session};
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use wagate_loadtest::harness::{ADMIN_KEY, Client, Node, NodeOptions};

type Socket =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

async fn start() -> Node {
    let opts = NodeOptions::new(env!("CARGO_BIN_EXE_wagate")).env("WS_REVALIDATE_MS", "200");
    Node::start(opts).await.expect("node")
}

async fn connect(node: &Node, key: Option<&str>) -> Socket {
    let mut req = format!("ws://127.0.0.1:{}/api/ws", node.port)
        .into_client_request()
        .unwrap();
    if let Some(k) = key {
        req.headers_mut().insert("X-API-Key", k.parse().unwrap());
    }
    tokio_tungstenite::connect_async(req)
        .await
        .expect("upgrade")
        .0
}

async fn send(ws: &mut Socket, v: Value) {
    ws.send(Message::Text(v.to_string().into())).await.unwrap();
}

/// The next JSON text frame; `None` once the server closed.
async fn next(ws: &mut Socket) -> Option<Value> {
    loop {
        match tokio::time::timeout(Duration::from_secs(15), ws.next())
            .await
            .ok()??
        {
            Ok(Message::Text(t)) => return serde_json::from_str(&t).ok(),
            Ok(Message::Close(_)) | Err(_) => return None,
            Ok(_) => continue,
        }
    }
}

/// Frames until one satisfies `pred`.
async fn until(ws: &mut Socket, pred: impl Fn(&Value) -> bool) -> Value {
    loop {
        let f = next(ws)
            .await
            .expect("socket closed before the expected frame");
        if pred(&f) {
            return f;
        }
    }
}

fn is_event(f: &Value, name: &str) -> bool {
    f["type"] == "event" && f["payload"]["event"] == name
}

async fn new_key(
    c: &Client,
    name: &str,
    role: &str,
    sessions: Option<Vec<String>>,
) -> (String, String) {
    let r = c
        .post(
            "/api/auth/api-keys",
            json!({ "name": name, "role": role, "allowedSessions": sessions }),
        )
        .await
        .unwrap();
    assert_eq!(r.status, 201, "{}", r.text);
    (r.str("id"), r.str("apiKey"))
}

#[tokio::test]
async fn header_key_subscribes_and_receives_events() {
    let n = start().await;
    let c = n.client();
    let s = ready_session(&c, "ws-one").await;
    let mut ws = connect(&n, Some(ADMIN_KEY)).await;
    send(&mut ws, json!({ "type": "subscribe", "sessionId": s, "events": ["message.received"], "requestId": "r1" })).await;
    let ack = next(&mut ws).await.unwrap();
    assert_eq!(ack["type"], "subscribed");
    assert_eq!(ack["requestId"], "r1");
    assert_eq!(ack["sessionId"], s.as_str());
    assert!(ack["timestamp"].is_string());
    inbound(&c, &s, "15551112222@c.us", "over the socket").await;
    let ev = until(&mut ws, |f| f["type"] == "event").await;
    assert_eq!(ev["payload"]["event"], "message.received");
    assert_eq!(ev["payload"]["sessionId"], s.as_str());
    assert_eq!(ev["payload"]["data"]["body"], "over the socket");
    assert!(ev["timestamp"].is_string());
    send(&mut ws, json!({ "type": "ping", "requestId": 7 })).await;
    let pong = until(&mut ws, |f| f["type"] == "pong").await;
    assert_eq!(pong["requestId"], 7);
    send(
        &mut ws,
        json!({ "type": "unsubscribe", "sessionId": s, "events": ["*"] }),
    )
    .await;
    assert_eq!(
        until(&mut ws, |f| f["type"] != "event").await["type"],
        "unsubscribed"
    );
}

#[tokio::test]
async fn first_frame_auth_and_refusals() {
    let n = start().await;
    let mut ws = connect(&n, None).await;
    send(&mut ws, json!({ "type": "auth", "apiKey": ADMIN_KEY })).await;
    send(&mut ws, json!({ "type": "ping" })).await;
    assert_eq!(next(&mut ws).await.unwrap()["type"], "pong");

    let mut bad = connect(&n, Some("wrong-key")).await;
    let f = next(&mut bad).await.unwrap();
    assert_eq!(
        (f["type"].as_str(), f["code"].as_str()),
        (Some("error"), Some("UNAUTHORIZED"))
    );
    assert!(next(&mut bad).await.is_none(), "closed after UNAUTHORIZED");

    let mut bad_frame = connect(&n, None).await;
    send(&mut bad_frame, json!({ "type": "auth", "apiKey": "nope" })).await;
    assert_eq!(next(&mut bad_frame).await.unwrap()["code"], "UNAUTHORIZED");
    assert!(next(&mut bad_frame).await.is_none());
}

#[tokio::test]
async fn errors_have_codes_and_frames_are_rate_limited() {
    let n = start().await;
    let c = n.client();
    let s = c
        .post("/api/sessions", json!({ "name": "ws-errs" }))
        .await
        .unwrap()
        .str("id");
    let mut ws = connect(&n, Some(ADMIN_KEY)).await;
    let cases = [
        (json!("not an object"), "INVALID_MESSAGE"),
        (json!({ "type": "dance" }), "INVALID_MESSAGE"),
        (
            json!({ "type": "subscribe", "events": ["*"] }),
            "INVALID_SESSION",
        ),
        (
            json!({ "type": "subscribe", "sessionId": "nope", "events": ["*"] }),
            "INVALID_SESSION",
        ),
        (
            json!({ "type": "subscribe", "sessionId": "00000000-0000-4000-8000-000000000000", "events": ["*"] }),
            "INVALID_SESSION",
        ),
        (
            json!({ "type": "subscribe", "sessionId": s, "events": ["message.nope"], "requestId": "x" }),
            "INVALID_EVENTS",
        ),
        (
            json!({ "type": "subscribe", "sessionId": s, "events": [] }),
            "INVALID_EVENTS",
        ),
    ];
    for (frame, code) in cases {
        send(&mut ws, frame.clone()).await;
        let f = next(&mut ws).await.unwrap();
        assert_eq!(f["code"], code, "{frame}: {f}");
    }
    tokio::time::sleep(Duration::from_millis(1100)).await;
    for i in 0..40 {
        send(
            &mut ws,
            json!({ "type": "ping", "requestId": format!("p{i}") }),
        )
        .await;
    }
    // One answer per frame, in order; a RATE_LIMITED error echoes the requestId of the frame it refused,
    // as every other error frame does (wire-notes §6).
    let mut limited = Vec::new();
    for i in 0..40 {
        let f = next(&mut ws).await.expect("an answer per frame");
        assert_eq!(f["requestId"], format!("p{i}"), "{f}");
        if f["type"] == "error" {
            assert_eq!(f["code"], "RATE_LIMITED", "{f}");
            limited.push(f);
        } else {
            assert_eq!(f["type"], "pong", "{f}");
        }
    }
    assert!(!limited.is_empty(), "40 frames at once exceed 20 a second");
}

#[tokio::test]
async fn session_qr_reaches_only_operators_and_scoped_keys_get_their_sessions() {
    let n = start().await;
    let c = n.client();
    let mine = c
        .post("/api/sessions", json!({ "name": "ws-mine" }))
        .await
        .unwrap()
        .str("id");
    let other = c
        .post("/api/sessions", json!({ "name": "ws-other" }))
        .await
        .unwrap()
        .str("id");
    let (_, viewer) = new_key(&c, "ws-viewer", "viewer", None).await;
    let (_, scoped) = new_key(&c, "ws-scoped", "operator", Some(vec![mine.clone()])).await;
    let mut v = connect(&n, Some(&viewer)).await;
    let mut o = connect(&n, Some(&scoped)).await;
    let mut a = connect(&n, Some(ADMIN_KEY)).await;
    for ws in [&mut v, &mut o, &mut a] {
        send(
            ws,
            json!({ "type": "subscribe", "sessionId": "*", "events": ["*"] }),
        )
        .await;
        assert_eq!(next(ws).await.unwrap()["type"], "subscribed");
    }
    send(
        &mut o,
        json!({ "type": "subscribe", "sessionId": other, "events": ["*"] }),
    )
    .await;
    assert_eq!(next(&mut o).await.unwrap()["code"], "FORBIDDEN_SESSION");

    for id in [&other, &mine] {
        let r = c
            .post_empty(&format!("/api/sessions/{id}/start"))
            .await
            .unwrap();
        assert!(r.status < 300, "{}", r.text);
    }
    // The admin sees both QR events; the scoped operator only its own session's; the viewer none.
    let mut qr_sessions = Vec::new();
    while qr_sessions.len() < 2 {
        let f = until(&mut a, |f| is_event(f, "session.qr")).await;
        qr_sessions.push(f["payload"]["sessionId"].as_str().unwrap().to_string());
    }
    let f = until(&mut o, |f| is_event(f, "session.qr")).await;
    assert_eq!(f["payload"]["sessionId"], mine.as_str());
    assert!(
        f["payload"]["data"]["qr"]
            .as_str()
            .unwrap()
            .starts_with("data:image/png;base64,")
    );
    // A later marker everybody may see: `mine` becomes ready. Events arrive in publication order, so
    // anything the viewer or the scoped key should not get would have shown up before it.
    let scan = c
        .post(
            &format!("/api/sim/sessions/{mine}/scan"),
            json!({ "phone": "15550002222@c.us" }),
        )
        .await
        .unwrap();
    assert!(scan.status < 300, "{}", scan.text);
    let ready =
        |f: &Value| is_event(f, "session.status") && f["payload"]["data"]["status"] == "ready";
    loop {
        let f = next(&mut v).await.expect("viewer socket open");
        assert!(
            !is_event(&f, "session.qr"),
            "viewer received session.qr: {f}"
        );
        if ready(&f) {
            break;
        }
    }
    loop {
        let f = next(&mut o).await.expect("scoped socket open");
        assert_ne!(
            f["payload"]["sessionId"],
            other.as_str(),
            "scoped key got another session's event: {f}"
        );
        if ready(&f) {
            break;
        }
    }
}

#[tokio::test]
async fn keys_are_revalidated_revoked_and_narrowed_keys_are_evicted_renames_are_not() {
    let n = start().await;
    let c = n.client();
    let s = c
        .post("/api/sessions", json!({ "name": "ws-reval" }))
        .await
        .unwrap()
        .str("id");
    let (revoked_id, revoked) = new_key(&c, "ws-revoked", "operator", None).await;
    let (renamed_id, renamed) = new_key(&c, "ws-renamed", "operator", None).await;
    let (narrowed_id, narrowed) = new_key(&c, "ws-narrowed", "operator", None).await;
    let (fenced_id, fenced) = new_key(&c, "ws-fenced", "operator", None).await;
    let mut r1 = connect(&n, Some(&revoked)).await;
    let mut r2 = connect(&n, Some(&renamed)).await;
    let mut r3 = connect(&n, Some(&narrowed)).await;
    let mut r4 = connect(&n, Some(&fenced)).await;
    for ws in [&mut r1, &mut r2, &mut r3, &mut r4] {
        send(ws, json!({ "type": "ping" })).await;
        assert_eq!(next(ws).await.unwrap()["type"], "pong");
    }
    assert_eq!(
        c.post_empty(&format!("/api/auth/api-keys/{revoked_id}/revoke"))
            .await
            .unwrap()
            .status,
        200
    );
    assert_eq!(
        c.put(
            &format!("/api/auth/api-keys/{renamed_id}"),
            json!({ "name": "ws-renamed-2" })
        )
        .await
        .unwrap()
        .status,
        200
    );
    let r = c
        .put(
            &format!("/api/auth/api-keys/{narrowed_id}"),
            json!({ "allowedSessions": [s] }),
        )
        .await
        .unwrap();
    assert_eq!(r.status, 200, "{}", r.text);
    // The sockets connect from loopback; an address list without it narrows the key for them.
    let r = c
        .put(
            &format!("/api/auth/api-keys/{fenced_id}"),
            json!({ "allowedIps": ["192.0.2.0/24"] }),
        )
        .await
        .unwrap();
    assert_eq!(r.status, 200, "{}", r.text);
    for ws in [&mut r1, &mut r3, &mut r4] {
        let f = next(ws).await.expect("an UNAUTHORIZED frame");
        assert_eq!(f["code"], "UNAUTHORIZED", "{f}");
        assert!(next(ws).await.is_none());
    }
    tokio::time::sleep(Duration::from_millis(600)).await;
    send(&mut r2, json!({ "type": "ping" })).await;
    assert_eq!(
        next(&mut r2).await.unwrap()["type"],
        "pong",
        "a rename evicts nobody"
    );
}

#[tokio::test]
async fn a_plain_request_gets_the_json_error_of_any_keyed_route() {
    let node = start().await;
    let anonymous = node
        .client_with_key(None)
        .get("/api/ws")
        .await
        .expect("no key");
    assert_eq!(anonymous.status, 401, "{}", anonymous.text);
    assert_eq!(anonymous.body["statusCode"], 401);
    assert_eq!(anonymous.body["message"], "API key is missing");
    let wrong = node
        .client_with_key(Some("wrong"))
        .get("/api/ws")
        .await
        .expect("bad key");
    assert_eq!(wrong.status, 401, "{}", wrong.text);
    let keyed = node.client().get("/api/ws").await.expect("keyed");
    assert!(keyed.status == 400 || keyed.status == 426, "{}", keyed.text);
    assert_eq!(keyed.body["statusCode"], keyed.status);
    assert!(keyed.body["message"].is_string(), "{}", keyed.text);
    assert!(keyed.body["error"].is_string(), "{}", keyed.text);
}

#[tokio::test]
async fn stopping_a_ready_session_announces_session_disconnected() {
    let n = start().await;
    let c = n.client();
    let s = ready_session(&c, "ws-stop").await;
    let mut ws = connect(&n, Some(ADMIN_KEY)).await;
    send(
        &mut ws,
        json!({ "type": "subscribe", "sessionId": s, "events": ["session.disconnected"] }),
    )
    .await;
    assert_eq!(next(&mut ws).await.unwrap()["type"], "subscribed");
    let stopped = c
        .post(&format!("/api/sessions/{s}/stop"), json!({}))
        .await
        .unwrap();
    assert_eq!(stopped.status, 200, "{}", stopped.text);
    let ev = until(&mut ws, |f| is_event(f, "session.disconnected")).await;
    assert_eq!(ev["payload"]["data"]["sessionId"], s.as_str());
    assert_eq!(ev["payload"]["data"]["reason"], "stopped");
}
