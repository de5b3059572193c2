//! Any node serves any session: requests for a session another node owns are forwarded there once and
//! answered with `X-Wagate-Served-By: <owner>`; a request already forwarded is never forwarded again.
//! Three real nodes on one PostgreSQL data DB and one Redis (own key prefix).

use reqwest::Method;
use serde_json::json;
use wagate_loadtest::harness::CLUSTER_SECRET;
use wagate_loadtest::harness::cluster::{TestCluster, Timings};
use wagate_loadtest::harness::sessions::{create_linked, get};

const SERVED_BY: &str = "x-wagate-served-by";

async fn cluster() -> TestCluster {
    TestCluster::start(env!("CARGO_BIN_EXE_wagate"), 3, Timings::default())
        .await
        .expect("cluster")
}

#[tokio::test]
async fn every_node_answers_for_a_session_owned_elsewhere_naming_the_owner() {
    let c = cluster().await;
    let id = create_linked(&c.client(0), "fwd-read", "15550001001")
        .await
        .expect("linked on node a");
    for node in 0..3 {
        let reply = get(&c.client(node), &id).await.expect("get");
        assert_eq!(reply.status, 200, "node {node}: {}", reply.text);
        assert_eq!(reply.header(SERVED_BY), Some("node-a"), "node {node}");
        assert_eq!(reply.body["status"], "ready");
        assert_eq!(reply.body["engineLoaded"], true, "the owner's view");
    }
    let missing = get(&c.client(1), "00000000-0000-4000-8000-000000000000")
        .await
        .expect("get");
    assert_eq!(missing.status, 404);
    assert_eq!(missing.header(SERVED_BY), Some("node-b"));
    let stats = c.client(1).get("/api/sessions/stats").await.expect("stats");
    assert_eq!(stats.header(SERVED_BY), None, "not session-scoped");
}

#[tokio::test]
async fn start_on_a_non_owner_is_answered_by_the_owner_and_a_forwarded_one_there_answers_409() {
    let c = cluster().await;
    let id = create_linked(&c.client(0), "fwd-start", "15550001002")
        .await
        .expect("linked on node a");
    let path = format!("/api/sessions/{id}/start");
    let forwarded = c.client(1).post_empty(&path).await.expect("start");
    assert_eq!(forwarded.status, 409, "{}", forwarded.text);
    assert_eq!(
        forwarded.header(SERVED_BY),
        Some("node-a"),
        "the owner answered"
    );
    assert!(forwarded.str("message").contains("already active"));

    let b = c.client(1);
    let again = b
        .send(
            b.raw(Method::POST, &path)
                .header("X-Wagate-Forwarded", "node-c")
                .header("X-Wagate-Cluster-Secret", CLUSTER_SECRET),
        )
        .await
        .expect("start");
    assert_eq!(again.status, 409, "{}", again.text);
    assert_eq!(
        again.header(SERVED_BY),
        Some("node-b"),
        "never forwarded twice"
    );
    assert!(again.str("message").contains("held by another node"));
    assert!(c.row(&id).expect("row").starts_with("node-a|"));

    // The mark alone, without the cluster secret, is anyone's header: no key is still 401, and a keyed
    // request is forwarded as any other, so nobody learns where a session runs without a key.
    let keyless = c.client(1).without_key();
    let unproven = keyless
        .send(
            keyless
                .raw(Method::GET, &format!("/api/sessions/{id}"))
                .header("X-Wagate-Forwarded", "node-c"),
        )
        .await
        .expect("get");
    assert_eq!(unproven.status, 401, "{}", unproven.text);
    let keyed = b
        .send(
            b.raw(Method::GET, &format!("/api/sessions/{id}"))
                .header("X-Wagate-Forwarded", "node-c"),
        )
        .await
        .expect("get");
    assert_eq!(keyed.status, 200, "{}", keyed.text);
    assert_eq!(keyed.header(SERVED_BY), Some("node-a"));
}

/// A session id in capitals or with percent-escapes is the same session to every route (path segments are
/// percent-decoded), so a non-owner forwards it like the canonical id instead of answering itself.
#[tokio::test]
async fn every_spelling_of_a_session_id_is_forwarded_to_the_owner() {
    let c = cluster().await;
    let id = create_linked(&c.client(0), "fwd-spelling", "15550001006")
        .await
        .expect("linked on node a");
    create_linked(&c.client(0), "fwd-spelling-peer", "15550001007")
        .await
        .expect("peer linked on node a");
    let upper = id.to_uppercase();
    let escaped_hyphen = id.replacen('-', "%2D", 1);
    let escaped_first = format!("%{:02X}{}", id.as_bytes()[0], &id[1..]);
    let at = |spelling: &str, rest: &str| format!("/api/sessions/{spelling}{rest}");

    for (node, spelling) in [(1, &upper), (2, &escaped_hyphen), (1, &escaped_first)] {
        let read = c.client(node).get(&at(spelling, "")).await.expect("get");
        assert_eq!(read.status, 200, "{spelling} on {node}: {}", read.text);
        assert_eq!(read.header(SERVED_BY), Some("node-a"), "{spelling}");
        assert_eq!(read.body["id"], id.as_str());
        assert_eq!(read.body["engineLoaded"], true, "the owner's view");
        let sent = c
            .client(node)
            .post(
                &at(spelling, "/messages/send-text"),
                json!({ "chatId": "15550001007@c.us", "text": "spelt" }),
            )
            .await
            .expect("send");
        assert_eq!(sent.status, 201, "{spelling} on {node}: {}", sent.text);
        assert_eq!(sent.header(SERVED_BY), Some("node-a"), "{spelling}");
        let start = c
            .client(node)
            .post_empty(&at(spelling, "/start"))
            .await
            .expect("start");
        assert_eq!(start.status, 409, "{spelling}: {}", start.text);
        assert_eq!(start.header(SERVED_BY), Some("node-a"), "{spelling}");
        assert!(
            start.str("message").contains("already active"),
            "{}",
            start.text
        );
    }

    let stopped = c
        .client(2)
        .post_empty(&at(&escaped_first, "/stop"))
        .await
        .expect("stop");
    assert_eq!(stopped.status, 200, "{}", stopped.text);
    assert_eq!(stopped.header(SERVED_BY), Some("node-a"));
    let at_owner = get(&c.client(0), &id).await.expect("get");
    assert_eq!(at_owner.body["status"], "disconnected", "{}", at_owner.text);
    assert_eq!(at_owner.body["engineLoaded"], false, "the owner stopped it");

    // Nobody holds it now: a start in capitals runs it on the node asked, which then owns it.
    let started = c
        .client(1)
        .post_empty(&at(&upper, "/start"))
        .await
        .expect("start");
    assert_eq!(started.status, 200, "{}", started.text);
    assert_eq!(started.header(SERVED_BY), Some("node-b"));
    assert!(c.row(&id).expect("row").starts_with("node-b|"));

    let deleted = c.client(2).delete(&at(&upper, "")).await.expect("delete");
    assert_eq!(deleted.status, 204, "{}", deleted.text);
    assert_eq!(
        deleted.header(SERVED_BY),
        Some("node-b"),
        "the owner deleted it"
    );
    assert_eq!(c.row(&id).expect("row"), "", "the row is gone");
    let gone = get(&c.client(1), &id).await.expect("get");
    assert_eq!(gone.status, 404, "the owner let go of it: {}", gone.text);
    assert_eq!(gone.header(SERVED_BY), Some("node-b"));
}

#[tokio::test]
async fn a_session_nobody_holds_starts_on_the_node_asked() {
    let c = cluster().await;
    let id = create_linked(&c.client(0), "fwd-move", "15550001004")
        .await
        .expect("linked on node a");
    let stopped = c
        .client(2)
        .post_empty(&format!("/api/sessions/{id}/stop"))
        .await
        .expect("stop");
    assert_eq!(stopped.status, 200, "{}", stopped.text);
    assert_eq!(stopped.header(SERVED_BY), Some("node-a"));
    let started = c
        .client(2)
        .post_empty(&format!("/api/sessions/{id}/start"))
        .await
        .expect("start");
    assert_eq!(started.status, 200, "{}", started.text);
    assert_eq!(started.header(SERVED_BY), Some("node-c"));
    assert_eq!(started.body["status"], "ready", "stored credentials, no QR");
    let via_a = get(&c.client(0), &id).await.expect("get");
    assert_eq!(via_a.header(SERVED_BY), Some("node-c"));
    assert!(c.row(&id).expect("row").starts_with("node-c|"));
}

#[tokio::test]
async fn sim_control_routes_are_forwarded_to_the_owner_too() {
    let c = cluster().await;
    let id = create_linked(&c.client(0), "fwd-sim", "15550001003")
        .await
        .expect("linked on node a");
    let drop = c
        .client(2)
        .post_empty(&format!("/api/sim/sessions/{id}/drop"))
        .await
        .expect("drop");
    assert_eq!(drop.status, 200, "{}", drop.text);
    assert_eq!(drop.header(SERVED_BY), Some("node-a"));
}

#[tokio::test]
async fn a_stalled_owner_answers_504_and_an_unreachable_one_503() {
    // A long lease: the owner stays the owner for the whole test, whatever happens to its process.
    let timings = Timings {
        ttl_ms: 120_000,
        heartbeat_ms: 5_000,
        sweep_ms: 500,
    };
    let mut c = TestCluster::start(env!("CARGO_BIN_EXE_wagate"), 2, timings)
        .await
        .expect("cluster");
    let id = create_linked(&c.client(0), "fwd-errors", "15550001005")
        .await
        .expect("linked on node a");
    c.nodes[0].pause();
    let stalled = get(&c.client(1), &id).await.expect("get");
    assert_eq!(stalled.status, 504, "{}", stalled.text);
    assert_eq!(stalled.header(SERVED_BY), Some("node-b"));
    c.nodes[0].resume();
    c.nodes[0].kill9();
    let gone = get(&c.client(1), &id).await.expect("get");
    assert_eq!(gone.status, 503, "{}", gone.text);
    assert_eq!(gone.body["statusCode"], 503);
}
