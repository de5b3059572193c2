//! What hostile and careless callers found (issue #20), each reproduced from outside over HTTP: the admin
//! lock-out and its recovery, the sim control API and scoped keys, authorisation before validation, the
//! bulk delay ceiling, the pairing phone format, role narrowing on live sockets and control characters in
//! names.

mod support;

use std::time::Duration;

use futures::{SinkExt, StreamExt};
use reqwest::Method;
use serde_json::{Value, json};
use support::ready_session;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use wagate_loadtest::harness::{Client, Node, NodeOptions, sessions};

async fn node() -> Node {
    Node::start(NodeOptions::new(env!("CARGO_BIN_EXE_wagate")))
        .await
        .expect("node")
}

async fn create_key(admin: &Client, body: Value) -> (String, String) {
    let reply = admin
        .post("/api/auth/api-keys", body)
        .await
        .expect("create key");
    assert_eq!(reply.status, 201, "{}", reply.text);
    (reply.str("id"), reply.str("apiKey"))
}

async fn master_id(admin: &Client) -> String {
    let keys = admin.get("/api/auth/api-keys").await.expect("list keys");
    keys.body
        .as_array()
        .and_then(|list| list.iter().find(|k| k["name"] == "master"))
        .and_then(|k| k["id"].as_str())
        .expect("the master key is listed")
        .to_string()
}

fn assert_error(reply: &wagate_loadtest::harness::Reply, status: u16) {
    assert_eq!(reply.status, status, "{}", reply.text);
    assert_eq!(reply.body["statusCode"], status, "{}", reply.text);
    assert!(reply.body["message"].is_string(), "{}", reply.text);
}

// 1. The last usable admin key.

#[tokio::test]
async fn no_change_may_leave_the_node_without_a_usable_admin_key() {
    let node = node().await;
    let admin = node.client();
    let master = master_id(&admin).await;
    let path = format!("/api/auth/api-keys/{master}");
    for change in [
        json!({ "allowedIps": [] }),
        json!({ "allowedSessions": ["2f1d6c0e-0000-4000-8000-000000000001"] }),
        json!({ "allowedIps": ["203.0.113.7"] }),
        json!({ "isActive": false }),
        json!({ "role": "operator" }),
    ] {
        let reply = admin.put(&path, change.clone()).await.expect("update");
        assert_error(&reply, 409);
        assert_eq!(
            reply.body["message"], "This change would leave no usable admin key",
            "{change}"
        );
    }
    // An expiry in the past is refused as bad input before the guard is asked.
    let expired = admin
        .put(&path, json!({ "expiresAt": "2001-01-01T00:00:00.000Z" }))
        .await
        .expect("update");
    assert_error(&expired, 400);
    let still = admin.get("/api/auth/api-keys").await.expect("list");
    assert_eq!(still.status, 200, "the admin still gets in: {}", still.text);
}

#[tokio::test]
async fn a_restart_with_the_master_key_lets_a_locked_out_operator_back_in() {
    // Behind a trusted proxy a caller can act from an address this loopback client never has.
    let options =
        NodeOptions::new(env!("CARGO_BIN_EXE_wagate")).env("TRUSTED_PROXIES", "127.0.0.1");
    let mut node = Node::start(options).await.expect("node");
    let admin = node.client();
    let master = master_id(&admin).await;
    let (second_id, second) =
        create_key(&admin, json!({ "name": "second-admin", "role": "admin" })).await;
    let second = node.client_with_key(Some(&second));
    // The master key is bound to an address this loopback client never has; with the second admin deleted
    // by a caller at that address (the guard only keeps an admin key usable from the caller's own address),
    // nobody here can manage keys any more.
    let narrowed = second
        .put(
            &format!("/api/auth/api-keys/{master}"),
            json!({ "allowedIps": ["203.0.113.7"] }),
        )
        .await
        .expect("narrow");
    assert_eq!(narrowed.status, 200, "{}", narrowed.text);
    let from_there = second
        .raw(Method::DELETE, &format!("/api/auth/api-keys/{second_id}"))
        .header("X-Forwarded-For", "203.0.113.7");
    let deleted = second.send(from_there).await.expect("delete");
    assert_eq!(deleted.status, 204, "{}", deleted.text);
    let locked = admin.get("/api/auth/api-keys").await.expect("locked");
    assert_eq!(locked.status, 401, "{}", locked.text);

    node.restart().await.expect("restart");
    let admin = node.client();
    let back = admin.get("/api/auth/api-keys").await.expect("back in");
    assert_eq!(back.status, 200, "{}", back.text);
    let record = admin
        .get(&format!("/api/auth/api-keys/{master}"))
        .await
        .expect("master record");
    assert_eq!(record.body["allowedIps"], Value::Null, "{}", record.text);
    assert_eq!(record.body["role"], "admin");
}

// 2. The sim control API and session scope.

#[tokio::test]
async fn the_sim_control_api_honours_the_key_session_scope() {
    let node = node().await;
    let admin = node.client();
    let a = sessions::create(&admin, "scope-a").await.expect("a");
    let b = sessions::create(&admin, "scope-b").await.expect("b");
    let (_, key) = create_key(
        &admin,
        json!({ "name": "scoped-admin", "role": "admin", "allowedSessions": [a] }),
    )
    .await;
    let scoped = node.client_with_key(Some(&key));
    let bodies = [
        ("scan", json!({ "phone": "15550009999" })),
        (
            "inbound",
            json!({ "from": "15550002222", "type": "text", "body": "hi" }),
        ),
        ("ack", json!({ "messageId": "x", "status": "read" })),
        (
            "react",
            json!({ "messageId": "x", "emoji": "👍", "from": "15550002222" }),
        ),
        ("revoke", json!({ "messageId": "x" })),
        ("edit", json!({ "messageId": "x", "body": "y" })),
        ("drop", json!({})),
        ("unlink", json!({})),
        (
            "restrict",
            json!({ "kind": "temporary_ban", "active": true }),
        ),
        ("call", json!({ "from": "15550002222", "isVideo": false })),
        (
            "group-event",
            json!({ "groupId": "123@g.us", "action": "join", "participantIds": [] }),
        ),
        ("faults", json!({ "failNextStarts": 1 })),
    ];
    for (route, body) in bodies {
        let reply = scoped
            .post(&format!("/api/sim/sessions/{b}/{route}"), body)
            .await
            .expect("sim call");
        assert_error(&reply, 403);
    }
    let outbox = scoped
        .get(&format!("/api/sim/sessions/{b}/outbox"))
        .await
        .expect("outbox");
    assert_error(&outbox, 403);
    let own = scoped
        .get(&format!("/api/sim/sessions/{a}/outbox"))
        .await
        .expect("own outbox");
    assert_eq!(own.status, 200, "{}", own.text);
    let (_, operator) = create_key(
        &admin,
        json!({ "name": "sim-operator", "role": "operator" }),
    )
    .await;
    let operator = node.client_with_key(Some(&operator));
    let refused = operator
        .get(&format!("/api/sim/sessions/{a}/outbox"))
        .await
        .expect("operator");
    assert_error(&refused, 403);
}

// 3. The bulk delay ceiling.

#[tokio::test]
async fn a_bulk_delay_above_one_hour_is_refused() {
    let node = node().await;
    let admin = node.client();
    let id = ready_session(&admin, "bulk-delay").await;
    let path = format!("/api/sessions/{id}/messages/send-bulk");
    let messages =
        json!([{ "chatId": "15550003333@c.us", "type": "text", "content": { "text": "a" } }]);
    for (delay, randomize) in [
        (json!(18446744073709551615u64), true),
        (json!(18446744073709551615u64), false),
        (json!(3_600_001), false),
    ] {
        let reply = admin
            .post(
                &path,
                json!({ "messages": messages, "options": { "delayBetweenMessages": delay, "randomizeDelay": randomize } }),
            )
            .await
            .expect("bulk");
        assert_error(&reply, 400);
        assert!(
            reply.str("message").contains("delayBetweenMessages"),
            "{}",
            reply.text
        );
    }
    let accepted = admin
        .post(
            &path,
            json!({ "messages": messages, "options": { "delayBetweenMessages": 3_600_000, "randomizeDelay": true } }),
        )
        .await
        .expect("bulk at the ceiling");
    assert_eq!(accepted.status, 202, "{}", accepted.text);
}

// 5. Scoped keys see only their sessions.

#[tokio::test]
async fn a_scoped_admin_reads_only_its_sessions_in_audit_and_statistics() {
    let node = node().await;
    let admin = node.client();
    let a = sessions::create(&admin, "audit-a").await.expect("a");
    let b = sessions::create(&admin, "audit-b").await.expect("b");
    let (_, key) = create_key(
        &admin,
        json!({ "name": "scoped-auditor", "role": "admin", "allowedSessions": [a] }),
    )
    .await;
    let scoped = node.client_with_key(Some(&key));
    let other = scoped
        .get(&format!("/api/audit?sessionId={b}"))
        .await
        .expect("audit of b");
    assert_error(&other, 403);
    let all = scoped.get("/api/audit").await.expect("audit");
    assert_eq!(all.status, 200, "{}", all.text);
    let rows = all.body["data"].as_array().cloned().unwrap_or_default();
    assert!(!rows.is_empty(), "its own session's rows: {}", all.text);
    assert!(
        rows.iter().all(|r| r["sessionId"] == a.as_str()),
        "{}",
        all.text
    );
    assert_eq!(all.body["total"], rows.len());
    let own = scoped
        .get(&format!("/api/audit?sessionId={a}"))
        .await
        .expect("audit of a");
    assert_eq!(own.status, 200, "{}", own.text);

    let overview = scoped.get("/api/stats/overview").await.expect("stats");
    assert_eq!(overview.status, 200, "{}", overview.text);
    assert_eq!(overview.body["sessions"]["total"], 1, "{}", overview.text);
    let sessions_overview = scoped
        .get("/api/sessions/stats/overview")
        .await
        .expect("session stats");
    assert_eq!(
        sessions_overview.body["total"], 1,
        "{}",
        sessions_overview.text
    );
    let unscoped = admin.get("/api/stats/overview").await.expect("stats");
    assert_eq!(unscoped.body["sessions"]["total"], 2, "{}", unscoped.text);
}

// 6. 401, then 403, then 400.

#[tokio::test]
async fn callers_who_may_not_make_a_call_are_refused_whatever_the_input() {
    let node = node().await;
    let admin = node.client();
    let a = sessions::create(&admin, "order-a").await.expect("a");
    let b = sessions::create(&admin, "order-b").await.expect("b");
    let (_, viewer) = create_key(&admin, json!({ "name": "order-viewer", "role": "viewer" })).await;
    let (_, scoped) = create_key(
        &admin,
        json!({ "name": "order-scoped", "role": "operator", "allowedSessions": [a] }),
    )
    .await;
    let viewer = node.client_with_key(Some(&viewer));
    let scoped = node.client_with_key(Some(&scoped));
    let nobody = node.client_with_key(None);
    let send = |client: &Client, session: &str| {
        client
            .raw(
                Method::POST,
                &format!("/api/sessions/{session}/messages/send-text"),
            )
            .header("content-type", "application/json")
            .body("{not json")
    };
    let reply = nobody.send(send(&nobody, &a)).await.expect("anonymous");
    assert_error(&reply, 401);
    let reply = viewer.send(send(&viewer, &a)).await.expect("viewer");
    assert_error(&reply, 403);
    let reply = scoped.send(send(&scoped, &b)).await.expect("out of scope");
    assert_error(&reply, 403);
    let reply = scoped.send(send(&scoped, &a)).await.expect("in scope");
    assert_error(&reply, 400);
    // A typed-but-wrong body, a session create and a key create follow the same order.
    let typed = viewer
        .post(
            &format!("/api/sessions/{a}/messages/send-text"),
            json!({ "chatId": 5 }),
        )
        .await
        .expect("typed");
    assert_error(&typed, 403);
    let create = viewer
        .post("/api/sessions", json!({ "name": 7 }))
        .await
        .expect("create");
    assert_error(&create, 403);
    let keys = scoped
        .post("/api/auth/api-keys", json!({ "name": "x" }))
        .await
        .expect("keys");
    assert_error(&keys, 403);
    let bad_path = scoped
        .post("/api/sessions/not-a-uuid/messages/send-text", json!({}))
        .await
        .expect("named");
    assert_error(&bad_path, 403);
    let bad_query = scoped
        .get(&format!("/api/search?q=hello&sessionId={b}&limit=oops"))
        .await
        .expect("search");
    assert_error(&bad_query, 403);
}

// 8. Spine behaviours: the pairing phone and role narrowing on live sockets.

#[tokio::test]
async fn a_pairing_phone_with_a_plus_sign_is_refused() {
    let node = node().await;
    let admin = node.client();
    let id = sessions::create(&admin, "pairing-plus")
        .await
        .expect("session");
    let started = admin
        .post_empty(&format!("/api/sessions/{id}/start"))
        .await
        .expect("start");
    assert!(started.status < 300, "{}", started.text);
    sessions::wait_status(&admin, &id, "qr_ready", Duration::from_secs(20))
        .await
        .expect("qr_ready");
    let path = format!("/api/sessions/{id}/pairing-code");
    for phone in ["+15551234567", "1555 123 4567", "", "1234567890123456"] {
        let reply = admin
            .post(&path, json!({ "phoneNumber": phone }))
            .await
            .expect("pairing");
        assert_error(&reply, 400);
    }
    let ok = admin
        .post(&path, json!({ "phoneNumber": "15551234567" }))
        .await
        .expect("pairing");
    assert_eq!(ok.status, 201, "{}", ok.text);
}

type Socket =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

async fn next_frame(ws: &mut Socket) -> Option<Value> {
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

#[tokio::test]
async fn a_key_narrowed_to_viewer_loses_its_socket() {
    let opts = NodeOptions::new(env!("CARGO_BIN_EXE_wagate")).env("WS_REVALIDATE_MS", "200");
    let node = Node::start(opts).await.expect("node");
    let admin = node.client();
    let (id, key) = create_key(&admin, json!({ "name": "ws-demoted", "role": "operator" })).await;
    let mut req = format!("ws://127.0.0.1:{}/api/ws", node.port)
        .into_client_request()
        .expect("request");
    req.headers_mut()
        .insert("X-API-Key", key.parse().expect("header"));
    let (mut ws, _) = tokio_tungstenite::connect_async(req)
        .await
        .expect("upgrade");
    ws.send(Message::Text(json!({ "type": "ping" }).to_string().into()))
        .await
        .expect("ping");
    assert_eq!(next_frame(&mut ws).await.expect("pong")["type"], "pong");
    let demoted = admin
        .put(
            &format!("/api/auth/api-keys/{id}"),
            json!({ "role": "viewer" }),
        )
        .await
        .expect("demote");
    assert_eq!(demoted.status, 200, "{}", demoted.text);
    let frame = next_frame(&mut ws).await.expect("an UNAUTHORIZED frame");
    assert_eq!(frame["code"], "UNAUTHORIZED", "{frame}");
    assert!(
        next_frame(&mut ws).await.is_none(),
        "then the socket closes"
    );
}

// 9. Control characters in names.

#[tokio::test]
async fn names_with_control_characters_are_refused() {
    let node = node().await;
    let admin = node.client();
    for name in [
        "nul\u{0}name",
        "two\nlines",
        "carriage\rreturn",
        "esc\u{1b}[31mred",
    ] {
        let key = admin
            .post("/api/auth/api-keys", json!({ "name": name }))
            .await
            .expect("key");
        assert_error(&key, 400);
        let session = admin
            .post("/api/sessions", json!({ "name": name }))
            .await
            .expect("session");
        assert_error(&session, 400);
    }
    let (key_id, _) = create_key(&admin, json!({ "name": "plain-name" })).await;
    let rename = admin
        .put(
            &format!("/api/auth/api-keys/{key_id}"),
            json!({ "name": "bad\nname" }),
        )
        .await
        .expect("rename");
    assert_error(&rename, 400);
    let id = sessions::create(&admin, "names-session")
        .await
        .expect("session");
    let template = admin
        .post(
            &format!("/api/sessions/{id}/templates"),
            json!({ "name": "greeting\u{0}", "body": "hello" }),
        )
        .await
        .expect("template");
    assert_error(&template, 400);
    let rule = admin
        .post(
            &format!("/api/sessions/{id}/automation-rules"),
            json!({ "name": "rule\nforged log line", "enabled": true, "conditions": [], "replyText": "hi", "cooldownSeconds": 0 }),
        )
        .await
        .expect("rule");
    assert_error(&rule, 400);
}
