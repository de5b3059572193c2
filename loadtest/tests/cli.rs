//! `wagate-loadtest` from outside: help and argument errors, a target that does not answer, and a short
//! smoke run of every scenario (seconds each) against nodes on loopback, checked through `--json`.

use std::path::PathBuf;
use std::process::{Command, Output};

use serde_json::Value;
use wagate_loadtest::harness::{ADMIN_KEY, Node, NodeOptions, free_port};

fn loadtest() -> Command {
    Command::new(env!("CARGO_BIN_EXE_wagate-loadtest"))
}

/// The `wagate` binary the scenarios start by default: beside the loadtest binary.
fn wagate_binary() -> PathBuf {
    let path = PathBuf::from(env!("CARGO_BIN_EXE_wagate-loadtest")).with_file_name("wagate");
    assert!(
        path.is_file(),
        "{} is missing: build it first (cargo build -p wagate-node)",
        path.display()
    );
    path
}

fn run(args: &[&str]) -> Output {
    loadtest()
        .args(args)
        .output()
        .expect("wagate-loadtest runs")
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).to_string()
}

/// Runs a scenario with `--json` and returns its report; fails with the tool's stderr when it fails.
fn report(args: &[&str]) -> (Value, String) {
    wagate_binary();
    let out = run(&[&["--json"], args].concat());
    assert!(
        out.status.success(),
        "{args:?} failed: {}\n{}",
        out.status,
        stderr(&out)
    );
    let json = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "{args:?}: stdout is not one JSON object ({e}): {}",
            String::from_utf8_lossy(&out.stdout)
        )
    });
    (json, stderr(&out))
}

fn n(v: &Value, path: &str) -> u64 {
    v.pointer(path)
        .and_then(Value::as_u64)
        .unwrap_or_else(|| panic!("{path} missing in {v}"))
}

fn assert_latency(v: &Value) {
    let lat = &v["latencyMs"];
    assert!(lat["samples"].as_u64().unwrap_or(0) > 0, "{v}");
    let (p50, p99, p999) = (
        lat["p50"].as_f64().unwrap_or(-1.0),
        lat["p99"].as_f64().unwrap_or(-1.0),
        lat["p999"].as_f64().unwrap_or(-1.0),
    );
    assert!(0.0 < p50 && p50 <= p99 && p99 <= p999, "{lat}");
}

/// Every delivered event was signed right and arrived once, and nothing accepted was lost.
fn assert_events_exact(v: &Value) {
    let ok = n(v, "/ok");
    assert_eq!(n(v, "/events/expected"), ok, "{v}");
    assert_eq!(n(v, "/events/delivered"), ok, "{v}");
    assert_eq!(n(v, "/events/lost"), 0, "{v}");
    assert_eq!(n(v, "/events/duplicated"), 0, "{v}");
    assert_eq!(n(v, "/events/badSignatures"), 0, "{v}");
}

#[test]
fn help_lists_scenarios_and_flag_defaults_without_running() {
    let out = run(&["--help"]);
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    for scenario in [
        "reads",
        "sends",
        "inbound-storm",
        "bulk",
        "node-kill",
        "--json",
    ] {
        assert!(text.contains(scenario), "--help lacks {scenario}:\n{text}");
    }
    let out = run(&["sends", "--help"]);
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("[default: 3000]") && text.contains("in seconds"),
        "{text}"
    );
}

#[test]
fn argument_errors_exit_2_and_name_the_argument() {
    let none = run(&[]);
    assert_eq!(none.status.code(), Some(2), "{}", stderr(&none));
    for (args, named) in [
        (&["sends", "--cuont", "5"][..], "--cuont"),
        (&["sends", "--count", "many"][..], "--count"),
        (&["raeds"][..], "raeds"),
    ] {
        let out = run(args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        assert!(stderr(&out).contains(named), "{args:?}: {}", stderr(&out));
    }
}

#[test]
fn a_target_that_does_not_answer_fails_non_zero() {
    let url = format!("http://127.0.0.1:{}", free_port());
    let out = run(&["reads", "--url", &url, "--seconds", "1"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("does not answer"), "{}", stderr(&out));
    assert!(out.stdout.is_empty());
}

#[test]
fn reads_smoke_on_a_started_node_prints_progress() {
    let (v, err) = report(&[
        "reads",
        "--generator",
        "builtin",
        "--only",
        "GET /api/sessions/{id} (viewer",
        "--seconds",
        "2",
        "--sessions",
        "2",
        "--messages",
        "3",
        "--connections",
        "4",
    ]);
    assert!(n(&v, "/ok") > 0 && n(&v, "/errors") == 0, "{v}");
    assert_latency(&v);
    assert_eq!(v["processes"].as_array().map(Vec::len), Some(1), "{v}");
    assert!(v["processes"][0]["rssMib"].as_f64().unwrap_or(0.0) > 0.0);
    assert!(
        err.contains("reads:") && err.contains("last second"),
        "{err}"
    );
}

#[tokio::test]
async fn reads_smoke_against_a_running_node_cleans_up() {
    let node = Node::start(NodeOptions::new(wagate_binary()))
        .await
        .expect("node");
    let url = node.base_url();
    let (v, _) = tokio::task::spawn_blocking(move || {
        report(&[
            "reads",
            "--url",
            &url,
            "--key",
            ADMIN_KEY,
            "--generator",
            "builtin",
            "--only",
            "GET /api/health",
            "--seconds",
            "1",
            "--sessions",
            "1",
            "--seed-messages",
            "2",
        ])
    })
    .await
    .expect("joined");
    assert!(n(&v, "/ok") > 0 && n(&v, "/errors") == 0, "{v}");
    assert_eq!(v["processes"], serde_json::json!([]), "it started nothing");
    let left = node.client().get("/api/sessions").await.expect("list").body;
    assert_eq!(
        left,
        serde_json::json!([]),
        "the run's sessions are deleted"
    );
}

#[test]
fn sends_smoke_delivers_every_event_once() {
    let (v, _) = report(&["sends", "--count", "40", "--concurrency", "8"]);
    assert_eq!(n(&v, "/ok"), 40, "{v}");
    assert_latency(&v);
    assert_events_exact(&v);
}

#[test]
fn inbound_storm_smoke_verifies_and_counts_deliveries() {
    let (v, _) = report(&[
        "inbound-storm",
        "--rate",
        "50",
        "--seconds",
        "2",
        "--sessions",
        "2",
    ]);
    assert_eq!(n(&v, "/ok"), 100, "{v}");
    assert_events_exact(&v);
    assert!(v["eventLatencyMs"]["p999"].as_f64().unwrap_or(0.0) > 0.0);
}

#[test]
fn bulk_smoke_runs_batches_to_completion() {
    let (v, _) = report(&[
        "bulk",
        "--senders",
        "2",
        "--batches",
        "1",
        "--batch-size",
        "3",
        "--drain-seconds",
        "60",
    ]);
    assert_eq!((n(&v, "/ok"), n(&v, "/errors")), (2, 0), "{v}");
    assert_eq!(n(&v, "/events/expected"), 6, "{v}");
    assert_eq!(n(&v, "/events/lost"), 0, "{v}");
    assert_eq!(n(&v, "/events/badSignatures"), 0, "{v}");
}

#[test]
fn node_kill_smoke_reports_what_crossed_the_kill() {
    let (v, _) = report(&[
        "node-kill",
        "--nodes",
        "2",
        "--sessions",
        "2",
        "--rate",
        "40",
        "--seconds",
        "4",
        "--drain-seconds",
        "30",
    ]);
    let (ok, expected, delivered, lost) = (
        n(&v, "/ok"),
        n(&v, "/events/expected"),
        n(&v, "/events/delivered"),
        n(&v, "/events/lost"),
    );
    assert!(
        ok > 0 && expected == ok && delivered + lost == expected,
        "{v}"
    );
    assert_eq!(n(&v, "/operations"), 160, "{v}");
    assert_eq!(n(&v, "/events/badSignatures"), 0, "{v}");
    // Only the survivor is measured: the killed node has no process left.
    assert_eq!(v["processes"].as_array().map(Vec::len), Some(1), "{v}");
    assert!(
        v["notes"][0]
            .as_str()
            .is_some_and(|s| s.contains("SIGKILL")),
        "{v}"
    );
}

/// A scenario that prints its own text still runs through the typed flags.
#[test]
fn sessions_smoke_runs_through_the_typed_flags() {
    wagate_binary();
    let out = run(&["sessions", "--count", "3", "--concurrency", "2"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("sessions: 3 linked") && text.contains("RSS:"),
        "{text}"
    );
}
