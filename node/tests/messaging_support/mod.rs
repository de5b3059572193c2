//! Shared setup of the messaging suites: a sim node with two linked sessions, and polling helpers.
#![allow(dead_code)]

use std::time::{Duration, Instant};

use serde_json::{Value, json};
use wagate_loadtest::harness::{Client, Node, NodeOptions};

pub const PHONE_A: &str = "4915100000001";
pub const PHONE_B: &str = "4915100000002";

pub fn jid(phone: &str) -> String {
    format!("{phone}@c.us")
}

pub fn options() -> NodeOptions {
    NodeOptions::new(env!("CARGO_BIN_EXE_wagate"))
}

pub async fn create_session(client: &Client, name: &str) -> String {
    let reply = client
        .post("/api/sessions", json!({ "name": name }))
        .await
        .unwrap();
    assert_eq!(reply.status, 201, "{}", reply.text);
    reply.str("id")
}

pub async fn wait_status(client: &Client, id: &str, status: &str) {
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let reply = client.get(&format!("/api/sessions/{id}")).await.unwrap();
        if reply.body["status"] == status {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "session not {status}: {}",
            reply.text
        );
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}

pub async fn link(client: &Client, id: &str, phone: &str) {
    let started = client
        .post_empty(&format!("/api/sessions/{id}/start"))
        .await
        .unwrap();
    assert_eq!(started.status, 200, "{}", started.text);
    let scan = client
        .post(
            &format!("/api/sim/sessions/{id}/scan"),
            json!({ "phone": phone, "pushName": phone }),
        )
        .await
        .unwrap();
    assert_eq!(scan.status, 200, "{}", scan.text);
    wait_status(client, id, "ready").await;
}

/// A node with sessions A and B linked on the sim network.
pub struct Pair {
    pub node: Node,
    pub client: Client,
    pub a: String,
    pub b: String,
}

pub async fn pair(options: NodeOptions) -> Pair {
    let node = Node::start(options).await.unwrap();
    let client = node.client();
    let a = create_session(&client, "alice").await;
    let b = create_session(&client, "bob").await;
    link(&client, &a, PHONE_A).await;
    link(&client, &b, PHONE_B).await;
    Pair { node, client, a, b }
}

impl Pair {
    pub async fn post(&self, route: &str, body: Value) -> wagate_loadtest::harness::Reply {
        self.client
            .post(&format!("/api/sessions/{}/{route}", self.a), body)
            .await
            .unwrap()
    }

    /// Polls `GET /messages` of `session` until a row matches `pred`.
    pub async fn wait_message(
        &self,
        session: &str,
        query: &str,
        pred: impl Fn(&Value) -> bool,
    ) -> Value {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let reply = self
                .client
                .get(&format!("/api/sessions/{session}/messages?{query}"))
                .await
                .unwrap();
            assert_eq!(reply.status, 200, "{}", reply.text);
            if let Some(found) = reply
                .body
                .as_array()
                .and_then(|rows| rows.iter().find(|r| pred(r)))
            {
                return found.clone();
            }
            assert!(
                Instant::now() < deadline,
                "no matching message: {}",
                reply.text
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}
