//! Reads never run behind writes: a write acknowledged through any node (a status change, config, proxy,
//! delete) is what the next read through every node of a three-node cluster shows, however the reads are
//! served (from memory, the owner, or the data DB), in the session read and in the list; and a revoked,
//! deleted or narrowed key is refused on its next request even on routes it has just been reading hot (in
//! a raft cluster: at once on the node that revoked it, on the others once they applied it).

use std::time::{Duration, Instant};

use serde_json::{Value, json};
use wagate_loadtest::harness::cluster::{ClusterOptions, TestCluster, Timings};
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

/// One read of the session and one of the list through `node`: the session's body and its list entry.
async fn row_on(c: &TestCluster, node: usize, id: &str) -> (u16, Value, Option<Value>) {
    let r = c
        .client(node)
        .get(&format!("/api/sessions/{id}"))
        .await
        .expect("read");
    let listed = c
        .client(node)
        .get("/api/sessions?limit=1000")
        .await
        .expect("list");
    assert_eq!(listed.status, 200, "node {node}: {}", listed.text);
    let entry = listed
        .body
        .as_array()
        .and_then(|all| all.iter().find(|s| s["id"] == id).cloned());
    (r.status, r.body, entry)
}

/// Warms every node's memory with the session, its config and proxy reads, and the list.
async fn warm(c: &TestCluster, id: &str) {
    let session = format!("/api/sessions/{id}");
    read_everywhere(c, &session).await;
    read_everywhere(c, &format!("{session}/config")).await;
    read_everywhere(c, &format!("{session}/proxy")).await;
    read_everywhere(c, "/api/sessions?limit=1000").await;
}

/// After `route`'s write was acknowledged: every node's next session read and next list agree, and
/// `check` holds for the session as they show it. Returns the session as node a showed it.
async fn agreed_everywhere(
    c: &TestCluster,
    id: &str,
    route: &str,
    check: impl Fn(&Value) -> bool,
) -> Value {
    let mut seen: Vec<Value> = Vec::new();
    for node in 0..c.nodes.len() {
        let (status, body, entry) = row_on(c, node, id).await;
        assert_eq!(status, 200, "{route}: node {node}: {body}");
        assert!(check(&body), "{route}: node {node} read {body}");
        let entry = entry.unwrap_or_else(|| panic!("{route}: node {node} does not list {id}"));
        for field in ["status", "updatedAt"] {
            assert_eq!(
                entry[field], body[field],
                "{route}: node {node} list {field}"
            );
        }
        if let Some(first) = seen.first() {
            for field in ["status", "updatedAt", "engineLoaded"] {
                assert_eq!(body[field], first[field], "{route}: node {node} {field}");
            }
        }
        seen.push(body);
    }
    seen.swap_remove(0)
}

/// Every write route, each through another node, on a session no node runs and then on one a node runs:
/// config, proxy, start and stop (status changes, forwarded to the owner once it runs), delete. Before
/// each write every node has just served the old row from memory; after it, every node's next read of the
/// session and of the list shows the write.
#[tokio::test]
async fn every_write_route_is_in_the_next_session_and_list_read_of_every_node() {
    let c = cluster().await;
    let id = create(&c.client(0), "reads-routes").await.expect("create");
    let session = format!("/api/sessions/{id}");

    // Config through node b.
    warm(&c, &id).await;
    let before = c.client(0).get(&session).await.expect("read").body;
    let patched = c
        .client(1)
        .patch(
            &format!("{session}/config"),
            json!({ "reconnectBaseDelay": 4200 }),
        )
        .await
        .expect("config");
    assert_eq!(patched.status, 200, "{}", patched.text);
    let after = agreed_everywhere(&c, &id, "config", |_| true).await;
    assert!(
        after["updatedAt"].as_str() >= before["updatedAt"].as_str(),
        "{after}"
    );
    for node in 0..3 {
        let r = c
            .client(node)
            .get(&format!("{session}/config"))
            .await
            .expect("read");
        assert_eq!(r.body["reconnectBaseDelay"], 4200, "node {node}");
    }

    // Proxy through node c.
    warm(&c, &id).await;
    let set = c
        .client(2)
        .patch(
            &format!("{session}/proxy"),
            json!({ "proxyUrl": "http://10.9.8.7:3128" }),
        )
        .await
        .expect("proxy");
    assert_eq!(set.status, 200, "{}", set.text);
    agreed_everywhere(&c, &id, "proxy", |_| true).await;
    for node in 0..3 {
        let r = c
            .client(node)
            .get(&format!("{session}/proxy"))
            .await
            .expect("read");
        assert_eq!(r.body["enabled"], true, "node {node}");
    }
    let cleared = c
        .client(0)
        .patch(&format!("{session}/proxy"), json!({ "proxyUrl": null }))
        .await
        .expect("proxy");
    assert_eq!(cleared.status, 200, "{}", cleared.text);
    for node in 0..3 {
        let r = c
            .client(node)
            .get(&format!("{session}/proxy"))
            .await
            .expect("read");
        assert_eq!(r.body["enabled"], false, "node {node}");
    }

    // Start through node a: node a runs it from now on and the engine writes on after the answer, so the
    // next reads show this write or a later one, never an earlier one.
    warm(&c, &id).await;
    let started = c
        .client(0)
        .post_empty(&format!("{session}/start"))
        .await
        .expect("start");
    assert_eq!(started.status, 200, "{}", started.text);
    let started_at = started.body["updatedAt"].as_str().unwrap_or("").to_string();
    for node in 0..3 {
        let (status, body, entry) = row_on(&c, node, &id).await;
        assert_eq!(status, 200, "start: node {node}: {body}");
        assert_ne!(body["status"], "created", "start: node {node}");
        assert_eq!(body["engineLoaded"], true, "start: node {node}");
        assert!(
            body["updatedAt"].as_str() >= Some(started_at.as_str()),
            "start: node {node} read {body}, the start answered {}",
            started.text
        );
        let entry = entry.expect("listed");
        assert!(entry["updatedAt"].as_str() >= Some(started_at.as_str()));
    }

    // Stop through node b (forwarded to node a): nothing writes after it.
    warm(&c, &id).await;
    let stopped = c
        .client(1)
        .post_empty(&format!("{session}/stop"))
        .await
        .expect("stop");
    assert_eq!(stopped.status, 200, "{}", stopped.text);
    let after = agreed_everywhere(&c, &id, "stop", |s| s["engineLoaded"] == false).await;
    assert_eq!(after["status"], stopped.body["status"]);
    assert_eq!(after["updatedAt"], stopped.body["updatedAt"]);

    // Delete through node c.
    warm(&c, &id).await;
    let deleted = c.client(2).delete(&session).await.expect("delete");
    assert_eq!(deleted.status, 204, "{}", deleted.text);
    for node in 0..3 {
        let (status, body, entry) = row_on(&c, node, &id).await;
        assert_eq!(status, 404, "delete: node {node}: {body}");
        assert!(entry.is_none(), "delete: node {node} still lists {id}");
        for sub in ["config", "proxy"] {
            let r = c
                .client(node)
                .get(&format!("{session}/{sub}"))
                .await
                .expect("read");
            assert_eq!(r.status, 404, "delete: node {node} {sub}: {}", r.text);
        }
    }
}

/// A key's change is honoured at its next request on the node that made it, whichever change it is:
/// revoked or deleted (401), narrowed to other sessions (403), on the read routes it was polling.
#[tokio::test]
async fn a_revoked_deleted_or_narrowed_key_is_refused_on_its_next_request() {
    let node = Node::start(NodeOptions::new(env!("CARGO_BIN_EXE_wagate")))
        .await
        .expect("node");
    let admin = node.client();
    let id = create(&admin, "reads-keys").await.expect("create");
    let other = create(&admin, "reads-keys-other").await.expect("create");
    let reads = [
        format!("/api/sessions/{id}"),
        format!("/api/sessions/{id}/config"),
        format!("/api/sessions/{id}/messages?limit=50"),
        "/api/sessions?limit=100".to_string(),
    ];
    let changes = [("revoke", 401), ("delete", 401), ("narrow", 403)];
    for (change, refused) in changes {
        let made = admin
            .post(
                "/api/auth/api-keys",
                json!({ "name": format!("poller-{change}"), "role": "viewer", "allowedSessions": [id] }),
            )
            .await
            .expect("key");
        assert_eq!(made.status, 201, "{}", made.text);
        let key_id = made.str("id");
        let poller = node.client_with_key(Some(&made.str("apiKey")));
        for _ in 0..5 {
            for path in &reads {
                let r = poller.get(path).await.expect("read");
                assert_eq!(r.status, 200, "{change} {path}: {}", r.text);
            }
        }
        let key = format!("/api/auth/api-keys/{key_id}");
        let done = match change {
            "revoke" => admin.post_empty(&format!("{key}/revoke")).await,
            "delete" => admin.delete(&key).await,
            _ => admin.put(&key, json!({ "allowedSessions": [other] })).await,
        }
        .expect("change");
        assert!(done.status < 300, "{change}: {}", done.text);
        for path in &reads {
            let r = poller.get(path).await.expect("read");
            if change == "narrow" && path.starts_with("/api/sessions?") {
                // The list answers, with the sessions the key covers now.
                assert_eq!(r.status, 200, "{}", r.text);
                assert!(!r.text.contains(&id), "narrowed list: {}", r.text);
                continue;
            }
            assert_eq!(r.status, refused, "{change} {path}: {}", r.text);
            assert_eq!(r.body["statusCode"], refused);
        }
    }
}

/// In a raft cluster a key works on every node: a session-scoped key reads hot through all three (the
/// reads of the session's owner, forwarded ones and the list), is revoked through one node and refused
/// there at its next request, whether that node serves it or forwards it (a forward is checked before it
/// leaves, and again by the owner); the other nodes refuse it once they applied the revocation (raft
/// commits it on a quorum, the others apply it after: polled, time and the reads served meanwhile printed).
#[tokio::test]
async fn a_key_revoked_through_one_node_is_refused_through_every_node() {
    let env = [
        ("MAIN_DB_REPLICATION", "raft"),
        ("RAFT_VOTERS", "node-a,node-b,node-c"),
    ];
    let options = ClusterOptions {
        size: 3,
        timings: Timings::default(),
        worker_binary: None,
        env: env
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
    };
    let c = TestCluster::start_with(env!("CARGO_BIN_EXE_wagate"), options)
        .await
        .expect("cluster");
    for node in 0..3 {
        poll_status(&c.client(node), "/api/auth/api-keys", 200).await;
    }
    let id = create_linked(&c.client(1), "reads-raft-key", "15550002002")
        .await
        .expect("linked");
    let made = c
        .client(0)
        .post(
            "/api/auth/api-keys",
            json!({ "name": "poller", "role": "viewer", "allowedSessions": [id] }),
        )
        .await
        .expect("key");
    assert_eq!(made.status, 201, "{}", made.text);
    let (key_id, plaintext) = (made.str("id"), made.str("apiKey"));
    let reads = [
        format!("/api/sessions/{id}"),
        format!("/api/sessions/{id}/config"),
        format!("/api/sessions/{id}/messages?limit=50"),
        "/api/sessions?limit=100".to_string(),
    ];
    let pollers: Vec<Client> = (0..3).map(|n| c.client(n).with_key(&plaintext)).collect();
    for (node, poller) in pollers.iter().enumerate() {
        for _ in 0..3 {
            for path in &reads {
                let r = poller.get(path).await.expect("read");
                assert_eq!(r.status, 200, "node {node} {path}: {}", r.text);
            }
        }
    }
    let revoked = c
        .client(2)
        .post_empty(&format!("/api/auth/api-keys/{key_id}/revoke"))
        .await
        .expect("revoke");
    assert_eq!(revoked.status, 200, "{}", revoked.text);
    let started = Instant::now();
    // Node c refuses the key at once on every read: the list it serves itself and the session reads it
    // would forward to the owner (node b), since it checks the key before forwarding.
    for path in &reads {
        let r = pollers[2].get(path).await.expect("read");
        assert_eq!(r.status, 401, "node c {path}: {}", r.text);
    }
    for (node, poller) in pollers.iter().enumerate() {
        let mut served = 0;
        for path in &reads {
            let deadline = Instant::now() + Duration::from_secs(30);
            loop {
                let r = poller.get(path).await.expect("read");
                if r.status == 401 {
                    break;
                }
                served += 1;
                assert_eq!(r.status, 200, "node {node} {path}: {}", r.text);
                assert!(
                    Instant::now() < deadline,
                    "node {node} {path}: still served"
                );
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        }
        println!(
            "node {node} refused the key {:?} after the revocation ({served} reads served after it)",
            started.elapsed()
        );
    }
}

async fn poll_status(client: &Client, path: &str, status: u16) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let r = client.get(path).await;
        if r.as_ref().is_ok_and(|r| r.status == status) {
            return;
        }
        assert!(Instant::now() < deadline, "{path} never answered {status}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
