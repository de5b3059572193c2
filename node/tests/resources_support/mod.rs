//! Shared steps of the `resources_*` tests: start a sim node, link a session to a phone, build session
//! paths and issue role-limited keys.

#![allow(dead_code)]

use std::time::Duration;

use serde_json::json;
use wagate_loadtest::harness::{Client, Node, NodeOptions};

pub async fn node_with(env: &[(&str, &str)]) -> Node {
    let mut options = NodeOptions::new(env!("CARGO_BIN_EXE_wagate"));
    for (k, v) in env {
        options = options.env(k, *v);
    }
    Node::start(options).await.expect("node starts")
}

pub async fn node() -> Node {
    node_with(&[]).await
}

/// `/api/sessions/{id}{rest}`.
pub fn at(id: &str, rest: &str) -> String {
    format!("/api/sessions/{id}{rest}")
}

/// A session that exists but was never started.
pub async fn created_session(client: &Client, name: &str) -> String {
    let reply = client
        .post("/api/sessions", json!({ "name": name }))
        .await
        .expect("create");
    assert_eq!(reply.status, 201, "{}", reply.text);
    reply.str("id")
}

/// Creates, starts and links a session to `phone`; returns its id once it is `ready`.
pub async fn linked_session(client: &Client, name: &str, phone: &str) -> String {
    let id = created_session(client, name).await;
    let start = client.post_empty(&at(&id, "/start")).await.expect("start");
    assert!(start.status < 300, "{}", start.text);
    let scan = client
        .post(
            &format!("/api/sim/sessions/{id}/scan"),
            json!({ "phone": phone, "pushName": name }),
        )
        .await
        .expect("scan");
    assert!(scan.status < 300, "{}", scan.text);
    for _ in 0..200 {
        let got = client.get(&at(&id, "")).await.expect("get");
        if got.str("status") == "ready" {
            return id;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("session {name} never became ready");
}

/// A key with `role`, optionally restricted to `sessions`.
pub async fn key(admin: &Client, role: &str, sessions: Option<&[&str]>) -> String {
    let mut body = json!({ "name": format!("{role}-key"), "role": role });
    if let Some(list) = sessions {
        body["allowedSessions"] = json!(list);
    }
    let reply = admin
        .post("/api/auth/api-keys", body)
        .await
        .expect("create key");
    assert_eq!(reply.status, 201, "{}", reply.text);
    reply.str("apiKey")
}

/// `phone@c.us`.
pub fn jid(phone: &str) -> String {
    format!("{phone}@c.us")
}
