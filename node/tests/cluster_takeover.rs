//! Takeover: when the owner of a session dies, stalls past its lease, stops or drains, another node runs
//! the session from the stored credentials, and the old owner never writes the session again.
//! Three real nodes on one PostgreSQL data DB and one Redis (own key prefix). Polls, never asserts how fast.
//! "No two owners" is checked through the sim network's shared view of connected devices. With
//! `STORAGE_TYPE=s3` (moto on loopback), media the dead owner received is read back through a survivor.

use std::time::{Duration, Instant};

use wagate_loadtest::harness::S3Server;
use wagate_loadtest::harness::cluster::{ClusterOptions, TestCluster, Timings};
use wagate_loadtest::harness::sessions::{create, create_linked, get};

const SERVED_BY: &str = "x-wagate-served-by";
const BUDGET: Duration = Duration::from_secs(30);

async fn cluster(timings: Timings) -> TestCluster {
    TestCluster::start(env!("CARGO_BIN_EXE_wagate"), 3, timings)
        .await
        .expect("cluster")
}

/// `engineLoaded` of the session in `node`'s own list (a list is answered locally, from the lease owner's
/// view: loaded when any live node holds the lease).
async fn listed_loaded(c: &TestCluster, node: usize, id: &str) -> bool {
    let list = c.client(node).get("/api/sessions").await.expect("list");
    list.body
        .as_array()
        .or_else(|| list.body["data"].as_array())
        .and_then(|rows| rows.iter().find(|s| s["id"] == id))
        .is_some_and(|s| s["engineLoaded"] == true)
}

/// Whether `node_id` still has the session's device connected on the sim network (its engine runs there).
async fn connected_on(c: &TestCluster, node_id: &str, id: &str) -> bool {
    let reply = c.client(1).get("/api/sim/devices").await.expect("devices");
    reply.body.as_array().is_some_and(|rows| {
        rows.iter()
            .any(|r| r["sessionId"] == id && r["nodeId"] == node_id)
    })
}

/// `(session, node)` of the devices of `phone` connected on a live node, per the sim network's view.
async fn live_devices(c: &TestCluster, phone: &str) -> Vec<(String, String)> {
    let reply = c
        .client(1)
        .get(&format!("/api/sim/devices?phone={phone}"))
        .await
        .expect("devices");
    assert_eq!(reply.status, 200, "{}", reply.text);
    reply
        .body
        .as_array()
        .map(|rows| {
            rows.iter()
                .filter(|r| r["isNodeLive"] == true)
                .map(|r| {
                    (
                        r["sessionId"].as_str().unwrap_or("").to_string(),
                        r["nodeId"].as_str().unwrap_or("").to_string(),
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

#[tokio::test]
async fn kill_9_of_the_owner_moves_the_session_to_a_survivor() {
    let mut c = cluster(Timings::default()).await;
    let id = create_linked(&c.client(0), "kill-owner", "15550002001")
        .await
        .expect("linked on node a");
    c.nodes[0].kill9();
    let reply = c
        .wait_served_ready(1, &id, &["node-a", ""], BUDGET)
        .await
        .expect("taken over");
    let owner = reply.header(SERVED_BY).unwrap_or_default().to_string();
    assert!(owner == "node-b" || owner == "node-c", "{owner}");
    assert_eq!(reply.body["engineLoaded"], true);
    assert!(
        reply.str("phone").starts_with("15550002001"),
        "{}",
        reply.text
    );
    let other = get(&c.client(2), &id).await.expect("get");
    assert_eq!(other.header(SERVED_BY), Some(owner.as_str()));
    assert!(c.row(&id).expect("row").starts_with(&format!("{owner}|")));
}

#[tokio::test]
async fn a_stalled_owner_past_its_ttl_never_writes_again_and_unloads_its_engine() {
    let c = cluster(Timings::default()).await;
    let id = create_linked(&c.client(0), "stall-owner", "15550002002")
        .await
        .expect("linked on node a");
    c.nodes[0].pause();
    let reply = c
        .wait_served_ready(1, &id, &["node-a", ""], BUDGET)
        .await
        .expect("taken over");
    let owner = reply.header(SERVED_BY).unwrap_or_default().to_string();
    let row = c.row(&id).expect("row");
    assert!(row.starts_with(&format!("{owner}|")), "{row}");

    // The sim network's shared view: while node a is stalled its connection no longer counts (its node is
    // not live), and the new owner's is there.
    let live = live_devices(&c, "15550002002").await;
    assert_eq!(
        live,
        vec![(id.clone(), owner.clone())],
        "after the takeover"
    );

    c.nodes[0].resume();
    // From the moment node a runs again until well after it noticed, the view never shows two live owners.
    let mut samples = 0;
    let mut settled: Option<Instant> = None;
    let resumed = Instant::now();
    while settled.is_none_or(|at| at.elapsed() < Duration::from_secs(2)) {
        assert!(
            resumed.elapsed() < BUDGET,
            "node a never logged 'session lease lost'"
        );
        let live = live_devices(&c, "15550002002").await;
        assert!(live.len() <= 1, "two owners connected at once: {live:?}");
        samples += 1;
        if settled.is_none() && c.nodes[0].logs().contains("session lease lost") {
            settled = Some(Instant::now());
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    assert!(samples > 10);
    let all = c
        .client(2)
        .get("/api/sim/devices?phone=15550002002")
        .await
        .expect("devices");
    let rows = all.body.as_array().cloned().unwrap_or_default();
    assert_eq!(
        rows.len(),
        1,
        "node a's device left the network: {}",
        all.text
    );
    assert_eq!(rows[0]["nodeId"], owner.as_str());
    assert!(
        !connected_on(&c, "node-a", &id).await,
        "the stalled node unloaded it"
    );
    assert!(
        listed_loaded(&c, 0, &id).await,
        "node a lists the owner's view"
    );
    let via_a = get(&c.client(0), &id).await.expect("get via node a");
    assert_eq!(via_a.header(SERVED_BY), Some(owner.as_str()));
    assert_eq!(via_a.body["status"], "ready");
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(
        c.row(&id).expect("row"),
        row,
        "nobody wrote the row since the takeover"
    );
}

/// A long TTL and a sweep interval longer than the test: a session moving within the budget can only
/// have been handed over (the sweep runs once at boot, before the session exists).
const NO_SWEEP: Timings = Timings {
    ttl_ms: 120_000,
    heartbeat_ms: 5_000,
    sweep_ms: 120_000,
};

#[tokio::test]
async fn graceful_stop_hands_the_session_to_a_peer_without_the_sweep() {
    let timings = NO_SWEEP;
    let mut c = cluster(timings).await;
    let id = create_linked(&c.client(0), "stop-owner", "15550002003")
        .await
        .expect("linked on node a");
    assert_eq!(c.nodes[0].stop().await, Some(0));
    let logs = c.nodes[0].logs();
    assert!(logs.contains("session handed over"), "{logs}");
    assert!(logs.contains("left the cluster"));
    let reply = c
        .wait_served_ready(2, &id, &["node-a", ""], BUDGET)
        .await
        .expect("taken over");
    assert_eq!(reply.body["engineLoaded"], true);
}

#[tokio::test]
async fn drain_hands_the_nodes_sessions_to_peers_and_takes_none_back() {
    let timings = NO_SWEEP;
    let c = cluster(timings).await;
    let id = create_linked(&c.client(0), "drain-owner", "15550002004")
        .await
        .expect("linked on node a");
    let drained = c
        .client(0)
        .post_empty("/api/infra/drain")
        .await
        .expect("drain");
    assert_eq!(drained.status, 200, "{}", drained.text);
    assert_eq!(drained.body["released"], 1);
    assert_eq!(drained.body["nodeId"], "node-a");
    let reply = c
        .wait_served_ready(0, &id, &["node-a", ""], BUDGET)
        .await
        .expect("taken over");
    let owner = reply.header(SERVED_BY).unwrap_or_default().to_string();
    assert!(!connected_on(&c, "node-a", &id).await, "drained");
    assert!(
        listed_loaded(&c, 0, &id).await,
        "node a lists the owner's view"
    );
    let viewer = c
        .client(1)
        .post(
            "/api/auth/api-keys",
            serde_json::json!({ "name": "drain-viewer", "role": "viewer" }),
        )
        .await
        .expect("key");
    assert_eq!(viewer.status, 201, "{}", viewer.text);
    let refused = c.nodes[1]
        .client_with_key(Some(&viewer.str("apiKey")))
        .post_empty("/api/infra/drain")
        .await
        .expect("drain as viewer");
    assert_eq!(refused.status, 403, "{}", refused.text);
    assert!(c.row(&id).expect("row").starts_with(&format!("{owner}|")));
}

/// Issue 30, item 4: once a dead owner's lease lapsed and no node serves the session, reads say its engine
/// is not loaded, whatever status the row keeps. Node b drained first, so nobody takes the session over.
#[tokio::test]
async fn a_lapsed_session_nobody_serves_reads_as_not_loaded() {
    let mut c = TestCluster::start(env!("CARGO_BIN_EXE_wagate"), 2, Timings::default())
        .await
        .expect("cluster");
    let id = create_linked(&c.client(0), "lapsed-owner", "15550002005")
        .await
        .expect("linked on node a");
    let drained = c
        .client(1)
        .post_empty("/api/infra/drain")
        .await
        .expect("drain");
    assert_eq!(drained.status, 200, "{}", drained.text);
    c.nodes[0].kill9();
    // Until a's lease lapses, b forwards to the dead owner (503); then it answers from the stored row.
    let deadline = Instant::now() + BUDGET;
    let reply = loop {
        let reply = get(&c.client(1), &id).await.expect("get");
        if reply.status == 200 {
            break reply;
        }
        assert!(Instant::now() < deadline, "{} {}", reply.status, reply.text);
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(
        reply.body["status"], "ready",
        "the row is left as a kept it"
    );
    assert_eq!(reply.body["engineLoaded"], false, "{}", reply.text);
    // The single read routes on the holder's registry announcement, which lapses first; the list reads the
    // lease keys, which lapse within one lease TTL after it.
    while listed_loaded(&c, 1, &id).await {
        assert!(Instant::now() < deadline, "the list says so too");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let by_name = c
        .client(1)
        .get("/api/sessions?name=lapsed-owner")
        .await
        .expect("by name");
    let rows = by_name
        .body
        .as_array()
        .or_else(|| by_name.body["data"].as_array())
        .cloned()
        .unwrap_or_default();
    assert!(
        !rows.is_empty() && rows.iter().all(|s| s["engineLoaded"] == false),
        "{}",
        by_name.text
    );
}

/// A start sent to a survivor once the dead owner's lease lapsed, before any sweep came by: the row still
/// reads `ready` as the dead owner left it, and the start runs the session here rather than answering that
/// it is already active and leaving it without an engine.
#[tokio::test]
async fn a_start_on_a_survivor_before_the_sweep_brings_the_session_back() {
    let slow_sweep = Timings {
        sweep_ms: 120_000,
        ..Timings::default()
    };
    let mut c = TestCluster::start(env!("CARGO_BIN_EXE_wagate"), 2, slow_sweep)
        .await
        .expect("cluster");
    let id = create_linked(&c.client(0), "restart-early", "15550002006")
        .await
        .expect("linked on node a");
    c.nodes[0].kill9();
    let deadline = Instant::now() + BUDGET;
    loop {
        let start = c
            .client(1)
            .post_empty(&format!("/api/sessions/{id}/start"))
            .await
            .expect("start");
        // 503 or 409 while the dead owner still holds its lease (the forward reaches nobody, or the node
        // knows the owner is gone but not yet its lease).
        if start.status == 200 {
            break;
        }
        assert!(matches!(start.status, 409 | 503), "{}", start.text);
        assert!(Instant::now() < deadline, "{}", start.text);
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let reply = c
        .wait_served_ready(1, &id, &["node-a", ""], BUDGET)
        .await
        .expect("running on node b");
    assert_eq!(reply.header(SERVED_BY), Some("node-b"));
}

/// A node restarted under its own `NODE_ID` (a StatefulSet pod) takes its sessions back at boot, long
/// before their leases (two minutes here) would lapse and a sweep deal them.
#[tokio::test]
async fn a_node_restarted_under_its_id_takes_its_sessions_back_at_once() {
    let long_lease = Timings {
        ttl_ms: 120_000,
        ..Timings::default()
    };
    let mut c = TestCluster::start(env!("CARGO_BIN_EXE_wagate"), 2, long_lease)
        .await
        .expect("cluster");
    let id = create_linked(&c.client(0), "own-again", "15550002008")
        .await
        .expect("linked on node a");
    c.nodes[0].kill9();
    c.nodes[0].restart().await.expect("restart node a");
    let reply = c
        .wait_served_ready(1, &id, &["node-b", ""], BUDGET)
        .await
        .expect("running on node a again");
    assert_eq!(reply.header(SERVED_BY), Some("node-a"));
    assert!(
        reply.str("phone").starts_with("15550002008"),
        "{}",
        reply.text
    );
}

/// The sweep's `qr_ready` row: a session whose QR nobody scanned, its owner dead, is left `disconnected`
/// (no phone to scan a new QR), not started again elsewhere.
#[tokio::test]
async fn a_dead_owners_unscanned_session_is_left_disconnected() {
    let mut c = TestCluster::start(env!("CARGO_BIN_EXE_wagate"), 2, Timings::default())
        .await
        .expect("cluster");
    let id = create(&c.client(0), "never-scanned").await.expect("create");
    let started = c
        .client(0)
        .post_empty(&format!("/api/sessions/{id}/start"))
        .await
        .expect("start");
    assert_eq!(started.body["status"], "qr_ready", "{}", started.text);
    c.nodes[0].kill9();
    let deadline = Instant::now() + BUDGET;
    loop {
        let reply = get(&c.client(1), &id).await.expect("get");
        if reply.status == 200 && reply.body["status"] == "disconnected" {
            break;
        }
        assert!(Instant::now() < deadline, "{} {}", reply.status, reply.text);
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // Several sweeps later it is still there, with no engine anywhere.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let reply = get(&c.client(1), &id).await.expect("get");
    assert_eq!(
        (&reply.body["status"], &reply.body["engineLoaded"]),
        (
            &serde_json::json!("disconnected"),
            &serde_json::json!(false)
        ),
        "{}",
        reply.text
    );
}

/// A logout ends the link on every node: a node that ran the session before does not bring it back
/// linked from what it remembered.
#[tokio::test]
async fn a_logout_on_one_node_ends_the_link_on_the_node_that_ran_it_before() {
    let c = TestCluster::start(env!("CARGO_BIN_EXE_wagate"), 2, Timings::default())
        .await
        .expect("cluster");
    let id = create_linked(&c.client(0), "moved-then-out", "15550002007")
        .await
        .expect("linked on node a");
    let post = |node: usize, action: &'static str| {
        let client = c.client(node);
        let path = format!("/api/sessions/{id}/{action}");
        async move { client.post_empty(&path).await.expect(action) }
    };
    assert_eq!(post(0, "stop").await.status, 200);
    let on_b = post(1, "start").await;
    assert_eq!(on_b.body["status"], "ready", "{}", on_b.text);
    assert_eq!(on_b.header(SERVED_BY), Some("node-b"));
    let out = post(1, "logout").await;
    assert_eq!(out.status, 200, "{}", out.text);
    let again = post(0, "start").await;
    assert_eq!(again.body["status"], "qr_ready", "{}", again.text);
    assert!(again.body["phone"].is_null(), "{}", again.text);
}

/// The sim outbox is the network's, shared in a cluster: it lists what the session sent on every node
/// that ran it.
#[tokio::test]
async fn the_sim_outbox_lists_sends_made_on_every_node_that_ran_the_session() {
    let c = TestCluster::start(env!("CARGO_BIN_EXE_wagate"), 2, Timings::default())
        .await
        .expect("cluster");
    let id = create_linked(&c.client(0), "outbox-moves", "15550002008")
        .await
        .expect("linked on node a");
    let send = |node: usize, text: &'static str| {
        let client = c.client(node);
        let path = format!("/api/sessions/{id}/messages/send-text");
        async move {
            let sent = client
                .post(
                    &path,
                    serde_json::json!({ "chatId": "15550002999@c.us", "text": text }),
                )
                .await
                .expect("send");
            assert_eq!(sent.status, 201, "{}", sent.text);
        }
    };
    send(0, "sent on a").await;
    let stopped = c
        .client(0)
        .post_empty(&format!("/api/sessions/{id}/stop"))
        .await
        .expect("stop");
    assert_eq!(stopped.status, 200, "{}", stopped.text);
    let started = c
        .client(1)
        .post_empty(&format!("/api/sessions/{id}/start"))
        .await
        .expect("start");
    assert_eq!(
        started.header(SERVED_BY),
        Some("node-b"),
        "{}",
        started.text
    );
    c.wait_served_ready(1, &id, &["node-a", ""], BUDGET)
        .await
        .expect("ready on b");
    send(1, "sent on b").await;
    let outbox = c
        .client(0)
        .get(&format!("/api/sim/sessions/{id}/outbox"))
        .await
        .expect("outbox");
    let bodies: Vec<&str> = outbox
        .body
        .as_array()
        .map(|rows| rows.iter().filter_map(|r| r["body"].as_str()).collect())
        .unwrap_or_default();
    assert_eq!(bodies, ["sent on a", "sent on b"], "{}", outbox.text);
}

#[tokio::test]
async fn after_a_takeover_a_survivor_serves_media_the_dead_owner_received_from_s3() {
    let s3 = S3Server::start().await.expect("moto");
    let options = ClusterOptions {
        size: 3,
        timings: Timings::default(),
        worker_binary: None,
        env: s3
            .node_env()
            .into_iter()
            .map(|(k, v)| (k.to_string(), v))
            .collect(),
    };
    let mut c = TestCluster::start_with(env!("CARGO_BIN_EXE_wagate"), options)
        .await
        .expect("cluster");
    let (phone_rx, phone_tx) = ("15550002101", "15550002102");
    let receiver = create_linked(&c.client(0), "media-owner", phone_rx)
        .await
        .expect("linked on node a");
    let sender = create_linked(&c.client(0), "media-sender", phone_tx)
        .await
        .expect("linked on node a");
    let b64 = base64::Engine::encode(&base64::engine::general_purpose::STANDARD, b"RECEIVED-ON-A");
    let sent = c
        .client(0)
        .post(
            &format!("/api/sessions/{sender}/messages/send-image"),
            serde_json::json!({ "chatId": format!("{phone_rx}@c.us"), "base64": b64, "mimetype": "image/png" }),
        )
        .await
        .expect("send");
    assert_eq!(sent.status, 201, "{}", sent.text);
    let wa_id = sent.str("messageId");
    let deadline = Instant::now() + BUDGET;
    let message_id = loop {
        let list = c
            .client(0)
            .get(&format!("/api/sessions/{receiver}/messages?type=image"))
            .await
            .expect("list");
        let found = list.body.as_array().and_then(|rows| {
            rows.iter()
                .find(|m| m["waMessageId"] == wa_id.as_str())
                .and_then(|m| m["id"].as_str().map(str::to_string))
        });
        if let Some(id) = found {
            break id;
        }
        assert!(Instant::now() < deadline, "never received: {}", list.text);
        tokio::time::sleep(Duration::from_millis(100)).await;
    };

    c.nodes[0].kill9();
    let reply = c
        .wait_served_ready(1, &receiver, &["node-a", ""], BUDGET)
        .await
        .expect("taken over");
    let owner = reply.header(SERVED_BY).unwrap_or_default().to_string();
    let route = format!("/api/sessions/{receiver}/messages/{phone_tx}@c.us/{message_id}/media");
    for node in [1, 2] {
        let media = c.client(node).get(&route).await.expect("media");
        assert_eq!(
            (media.status, media.text.as_str()),
            (200, "RECEIVED-ON-A"),
            "through node {node}, owner {owner}"
        );
    }
}
