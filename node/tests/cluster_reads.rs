//! Reads never run behind writes: a write acknowledged through any node (a status change, config, proxy,
//! delete) is what the next read through every node of a three-node cluster shows, however the reads are
//! served (from memory, the owner, or the data DB); and a revoked key is refused on its next request even
//! on routes it has just been reading hot.

use serde_json::json;
use wagate_loadtest::harness::cluster::{TestCluster, Timings};
use wagate_loadtest::harness::sessions::{create, create_linked};
use wagate_loadtest::harness::{Client, Node, NodeOptions};

async fn cluster() -> TestCluster {
    TestCluster::start(env!("CARGO_BIN_EXE_wagate"), 3, Timings::default())
        .await
        .expect("cluster")
}

/// Reads `path` through every node a few times (so whatever a node keeps in memory is warm).
async fn read_everywhere(c: &TestCluster, path: &str) -> Vec<serde_json::Value> {
    let mut bodies = Vec::new();
    for node in 0..c.nodes.len() {
        for _ in 0..3 {
            let r = c.client(node).get(path).await.expect("read");
            assert_eq!(r.status, 200, "node {node} {path}: {}", r.text);
        }
        bodies.push(c.client(node).get(path).await.expect("read").body);
    }
    bodies
}

#[tokio::test]
async fn a_write_through_any_node_is_seen_by_the_next_read_on_every_node() {
    let c = cluster().await;
    // Linked through node b: node b owns it, the others forward or read the data DB.
    let id = create_linked(&c.client(1), "reads-linked", "15550002001")
        .await
        .expect("linked");
    let session = format!("/api/sessions/{id}");
    for body in read_everywhere(&c, &session).await {
        assert_eq!(body["status"], "ready");
    }

    // Config through node a (not the owner).
    let config = format!("{session}/config");
    read_everywhere(&c, &config).await;
    let patched = c
        .client(0)
        .patch(&config, json!({ "autoRejectCalls": true }))
        .await
        .expect("patch config");
    assert_eq!(patched.status, 200, "{}", patched.text);
    for (node, body) in read_everywhere(&c, &config).await.iter().enumerate() {
        assert_eq!(body["autoRejectCalls"], true, "node {node}");
    }

    // Proxy through node c.
    let proxy = format!("{session}/proxy");
    read_everywhere(&c, &proxy).await;
    let set = c
        .client(2)
        .patch(&proxy, json!({ "proxyUrl": "http://10.1.2.3:3128" }))
        .await
        .expect("patch proxy");
    assert_eq!(set.status, 200, "{}", set.text);
    for (node, body) in read_everywhere(&c, &proxy).await.iter().enumerate() {
        assert_eq!(body["enabled"], true, "node {node}");
    }

    // A status change through node c (forwarded to the owner).
    let stopped = c
        .client(2)
        .post_empty(&format!("{session}/stop"))
        .await
        .expect("stop");
    assert_eq!(stopped.status, 200, "{}", stopped.text);
    let status = stopped.body["status"].clone();
    assert_ne!(status, "ready");
    for node in 0..3 {
        let r = c.client(node).get(&session).await.expect("read");
        assert_eq!(r.body["status"], status, "node {node}: {}", r.text);
        assert_eq!(
            r.body["updatedAt"], stopped.body["updatedAt"],
            "node {node}"
        );
    }
    let listed = c
        .client(0)
        .get("/api/sessions?limit=100")
        .await
        .expect("list");
    let row = listed
        .body
        .as_array()
        .and_then(|all| all.iter().find(|s| s["id"] == id.as_str()).cloned())
        .expect("listed");
    assert_eq!(row["status"], status);

    // A session nobody runs, deleted through node a: gone on every node at once.
    let idle = create(&c.client(2), "reads-idle").await.expect("create");
    let idle_path = format!("/api/sessions/{idle}");
    read_everywhere(&c, &idle_path).await;
    let renamed = c
        .client(1)
        .patch(
            &format!("{idle_path}/config"),
            json!({ "reconnectBaseDelay": 7000 }),
        )
        .await
        .expect("config");
    assert_eq!(renamed.status, 200, "{}", renamed.text);
    for node in 0..3 {
        let r = c
            .client(node)
            .get(&format!("{idle_path}/config"))
            .await
            .expect("read");
        assert_eq!(r.body["reconnectBaseDelay"], 7000, "node {node}");
    }
    let deleted = c.client(0).delete(&idle_path).await.expect("delete");
    assert_eq!(deleted.status, 204, "{}", deleted.text);
    for node in 0..3 {
        let r = c.client(node).get(&idle_path).await.expect("read");
        assert_eq!(r.status, 404, "node {node}: {}", r.text);
    }
    let deleted = c.client(1).delete(&session).await.expect("delete");
    assert_eq!(deleted.status, 204, "{}", deleted.text);
    for node in 0..3 {
        let r = c.client(node).get(&session).await.expect("read");
        assert_eq!(r.status, 404, "node {node}: {}", r.text);
    }
}

#[tokio::test]
async fn a_revoked_key_is_refused_on_its_next_request() {
    let node = Node::start(NodeOptions::new(env!("CARGO_BIN_EXE_wagate")))
        .await
        .expect("node");
    let admin = node.client();
    let id = create(&admin, "reads-revoked").await.expect("create");
    let made = admin
        .post(
            "/api/auth/api-keys",
            json!({ "name": "poller", "role": "viewer", "allowedSessions": [id] }),
        )
        .await
        .expect("key");
    assert_eq!(made.status, 201, "{}", made.text);
    let key_id = made.str("id");
    let poller: Client = node.client_with_key(Some(&made.str("apiKey")));
    let reads = [
        format!("/api/sessions/{id}"),
        "/api/sessions?limit=100".to_string(),
        format!("/api/sessions/{id}/messages?limit=50"),
        "/api/health".to_string(),
    ];
    for _ in 0..5 {
        for path in &reads {
            let r = poller.get(path).await.expect("read");
            assert_eq!(r.status, 200, "{path}: {}", r.text);
        }
    }
    let revoked = admin
        .post_empty(&format!("/api/auth/api-keys/{key_id}/revoke"))
        .await
        .expect("revoke");
    assert_eq!(revoked.status, 200, "{}", revoked.text);
    for path in reads.iter().filter(|p| !p.starts_with("/api/health")) {
        let r = poller.get(path).await.expect("read");
        assert_eq!(r.status, 401, "{path}: {}", r.text);
        assert_eq!(r.body["statusCode"], 401);
    }
}

/// The record cache itself: rows nobody runs are read on the node asked (no owner to forward to), from
/// memory once warm. Each round writes through one node and at once reads through the other two, which
/// have just served the old row from memory; the session list likewise sees a row created or deleted
/// through another node at the next read.
#[tokio::test]
async fn a_cached_row_is_never_served_after_a_write_through_another_node() {
    let c = cluster().await;
    let id = create(&c.client(0), "reads-cached").await.expect("create");
    let session = format!("/api/sessions/{id}");
    let config = format!("{session}/config");
    let list = "/api/sessions?limit=1000";
    for round in 0..6u64 {
        let writer = usize::try_from(round % 3).expect("node index");
        // Warm every node's memory with the current row and list.
        read_everywhere(&c, &session).await;
        read_everywhere(&c, &config).await;
        read_everywhere(&c, list).await;
        let delay = 1000 + round * 1000;
        let patched = c
            .client(writer)
            .patch(&config, json!({ "reconnectBaseDelay": delay }))
            .await
            .expect("patch config");
        assert_eq!(patched.status, 200, "{}", patched.text);
        let updated_at =
            c.client(writer).get(&session).await.expect("read").body["updatedAt"].clone();
        for node in (0..3).filter(|n| *n != writer) {
            let r = c.client(node).get(&config).await.expect("read");
            assert_eq!(
                r.body["reconnectBaseDelay"], delay,
                "round {round} node {node}"
            );
            let r = c.client(node).get(&session).await.expect("read");
            assert_eq!(r.body["updatedAt"], updated_at, "round {round} node {node}");
        }

        // A row created through the writer is in every node's next list; deleted, it is gone from it.
        let extra = create(&c.client(writer), &format!("reads-extra-{round}"))
            .await
            .expect("create");
        let listed = |body: &serde_json::Value| {
            body.as_array()
                .is_some_and(|all| all.iter().any(|s| s["id"] == extra.as_str()))
        };
        for node in (0..3).filter(|n| *n != writer) {
            let r = c.client(node).get(list).await.expect("list");
            assert!(listed(&r.body), "round {round} node {node}: {}", r.text);
        }
        read_everywhere(&c, list).await;
        read_everywhere(&c, &format!("/api/sessions/{extra}")).await;
        let deleted = c
            .client(writer)
            .delete(&format!("/api/sessions/{extra}"))
            .await
            .expect("delete");
        assert_eq!(deleted.status, 204, "{}", deleted.text);
        for node in (0..3).filter(|n| *n != writer) {
            let r = c.client(node).get(list).await.expect("list");
            assert!(!listed(&r.body), "round {round} node {node}: {}", r.text);
            let r = c
                .client(node)
                .get(&format!("/api/sessions/{extra}"))
                .await
                .expect("read");
            assert_eq!(r.status, 404, "round {round} node {node}: {}", r.text);
        }
    }
}
