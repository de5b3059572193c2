//! Nothing the network hands the gateway is lost when a process dies (issue 30), with real processes: a
//! steady inbound sim stream while owners are killed with SIGKILL (`harness::chaos`). Cluster: 3 `ROLE=api`
//! nodes and a `wagate-worker` on PostgreSQL and Redis, 20 sessions, an owner killed at a random moment and
//! restarted, ten times (about a minute). Embedded: one node killed mid-stream and restarted on the same
//! data directory. Every accepted message reaches the webhook
//! receiver (duplicates counted, bounded by the stream's in-flight window per kill) and
//! `GET .../messages` lists each exactly once.

mod support;

// The kill loops are `wagate_loadtest::harness::chaos`, compiled into this test from their source: the test
// crate then never links a copy of the harness built before them.
#[path = "../../loadtest/src/harness/chaos.rs"]
#[allow(dead_code)]
mod chaos;

use chaos::{ChaosOptions, ChaosReport, IN_FLIGHT};
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
        report.duplicated <= IN_FLIGHT * report.kills.max(1),
        "duplicates beyond the in-flight window: {report}"
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
