//! Nothing the network hands the gateway is lost when a process dies (issue 30), with real processes: a
//! steady inbound sim stream while owners are killed with SIGKILL (`harness::chaos`). Cluster: 3 `ROLE=api`
//! nodes and a `wagate-worker` on PostgreSQL and Redis, 20 sessions, an owner killed at a random moment and
//! restarted, ten times (about a minute). Embedded: one node killed mid-stream and restarted on the same
//! data directory. Every accepted message reaches the webhook
//! receiver (duplicates counted, bounded per kill by the attempts a process may have made and not recorded) and
//! `GET .../messages` lists each exactly once.

mod support;

// The kill loops are `wagate_loadtest::harness::chaos`, compiled into this test from their source: the test
// crate then never links a copy of the harness built before them.
#[path = "../../loadtest/src/harness/chaos.rs"]
#[allow(dead_code)]
mod chaos;

use chaos::{ChaosOptions, ChaosReport, DUPLICATES_PER_KILL};
use support::worker_binary;
use wagate_loadtest::harness::{Client, Node, NodeOptions, Receiver, cluster, sessions};

/// The node binary: `WAGATE_TEST_BINARY` when set (a copy of this branch's build), else cargo's; the
/// worker likewise (`WAGATE_TEST_WORKER`).
fn binary() -> std::path::PathBuf {
    std::env::var_os("WAGATE_TEST_BINARY")
        .map(Into::into)
        .unwrap_or_else(|| env!("CARGO_BIN_EXE_wagate").into())
}

fn check(report: &ChaosReport) {
    println!("{report}");
    assert!(
        report.accepted > 0,
        "the network accepted nothing: {report}"
    );
    assert_eq!(
        report.lost, 0,
        "lost messages, e.g. {:?}: {report}",
        report.lost_examples
    );
    assert!(
        report.duplicated <= DUPLICATES_PER_KILL * report.kills.max(1),
        "duplicates beyond the unrecorded attempts per kill: {report}"
    );
    assert_eq!(report.listed_wrong, 0, "message list: {report}");
}

#[tokio::test]
async fn cluster_owners_killed_under_an_inbound_stream_lose_no_accepted_message() {
    let options = ChaosOptions {
        binary: binary(),
        worker: Some(
            std::env::var_os("WAGATE_TEST_WORKER")
                .map(Into::into)
                .unwrap_or_else(worker_binary),
        ),
        sessions: 20,
        rate: 100,
        kills: 10,
    };
    let report = chaos::cluster_kill_loop(&options).await.expect("kill loop");
    check(&report);
}

#[tokio::test]
async fn embedded_node_killed_mid_stream_and_restarted_loses_no_accepted_message() {
    let options = ChaosOptions {
        binary: binary(),
        worker: None,
        sessions: 4,
        rate: 200,
        kills: 1,
    };
    let report = chaos::embedded_kill_restart(&options)
        .await
        .expect("kill and restart");
    check(&report);
}

/// Issue 30, item 6: a send answered 201 was committed (its row and its `message.sent` outbox row) before
/// the answer, so a node killed right after answering still has it after the restart and delivers the
/// event. Three rounds, each killing the node at once after the 201.
#[tokio::test]
async fn a_send_answered_201_survives_a_kill_9_right_after_the_answer() {
    let receiver = Receiver::start().await.expect("receiver");
    let mut node = Node::start(support::fast_options().env("AUTO_START_SESSIONS", "true"))
        .await
        .expect("node");
    let c = node.client();
    let id = support::ready_session(&c, "send-then-die").await;
    support::add_webhook(
        &c,
        &id,
        serde_json::json!({ "url": receiver.url(), "events": ["message.sent"] }),
    )
    .await;
    let mut sent = Vec::new();
    for round in 0..3 {
        let text = format!("answered then killed {round}");
        // After a restart the stored row may read `ready` a moment before the engine is back: a send then
        // answers 409 (nothing accepted), so ask again until one is answered 201; that one must survive.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        let reply = loop {
            let reply = c
                .post(
                    &format!("/api/sessions/{id}/messages/send-text"),
                    serde_json::json!({ "chatId": "15557770002@c.us", "text": text }),
                )
                .await
                .expect("send");
            if reply.status != 409 || std::time::Instant::now() > deadline {
                break reply;
            }
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        };
        assert_eq!(reply.status, 201, "{}", reply.text);
        node.kill9();
        node.restart()
            .await
            .expect("restart on the same data directory");
        sessions::wait_status(&c, &id, "ready", std::time::Duration::from_secs(20))
            .await
            .expect("the session comes back");
        sent.push((reply.str("messageId"), text));
    }
    let budget = std::time::Duration::from_secs(30);
    let events = receiver
        .wait_until(budget, |got| {
            sent.iter().all(|(_, text)| {
                got.iter()
                    .any(|d| d.json()["data"]["body"].as_str() == Some(text.as_str()))
            })
        })
        .await;
    for (message_id, text) in &sent {
        let of_it = events
            .iter()
            .filter(|d| d.json()["data"]["body"].as_str() == Some(text.as_str()))
            .count();
        assert!(of_it >= 1, "message.sent of {text:?} never delivered");
        let listed = c
            .get(&format!("/api/sessions/{id}/messages?limit=100"))
            .await
            .expect("list");
        let rows = listed.body.as_array().cloned().unwrap_or_default();
        let stored = rows
            .iter()
            .filter(|m| m["waMessageId"].as_str() == Some(message_id.as_str()))
            .count();
        assert_eq!(stored, 1, "{text:?} stored once: {}", listed.text);
    }
}
