//! The Prometheus recorder both processes install, and the one list of metric families (the names the
//! dashboards and alerts are built from: `metrics-contract.md`). Every family is described here, with its
//! HELP text, whoever records it, so a scrape always names and types it; counters and histograms whose label
//! values are known are registered at zero so a dashboard has a series before the first event.
//!
//! The `process_*` families come from `metrics-process`'s readings, but `process_cpu_seconds_total` is
//! rendered here: the `metrics` crate's counters hold whole numbers, and its collector truncated the CPU
//! time to whole seconds (1.93 s read 1), which made `rate()` of it a staircase.

use std::time::Duration;

use metrics::{Unit, describe_counter, describe_gauge, describe_histogram};
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};

pub const BUILD_INFO: &str = "wagate_build_info";
pub const READY: &str = "wagate_ready";
pub const HTTP_REQUESTS: &str = "wagate_http_requests_total";
pub const HTTP_DURATION: &str = "wagate_http_request_duration_seconds";
pub const RATE_LIMITED: &str = "wagate_rate_limited_total";
pub const RATE_LIMIT_FALLBACK: &str = "wagate_rate_limit_fallback_total";
pub const SESSIONS: &str = "wagate_sessions";
pub const SESSIONS_UNOWNED: &str = "wagate_sessions_unowned";
pub const MESSAGES_RECEIVED: &str = "wagate_messages_received_total";
pub const MESSAGES_SENT: &str = "wagate_messages_sent_total";
pub const MESSAGES_FAILED: &str = "wagate_messages_failed_total";
pub const SENDS_REFUSED: &str = "wagate_sends_refused_total";
pub const WEBHOOK_DELIVERIES: &str = "wagate_webhook_deliveries_total";
pub const WEBHOOK_DURATION: &str = "wagate_webhook_delivery_duration_seconds";
pub const EVENT_DELIVERY_LAG: &str = "wagate_event_delivery_lag_seconds";
pub const OUTBOX_ROWS: &str = "wagate_outbox_rows";
pub const QUEUE_JOBS: &str = "wagate_queue_jobs";
pub const RECONNECTS: &str = "wagate_session_reconnects_total";
pub const RECONNECT_LOOP_ALERTS: &str = "wagate_session_reconnect_loop_alerts_total";
pub const LEASES_HELD: &str = "wagate_leases_held";
pub const TAKEOVERS: &str = "wagate_takeovers_total";
pub const FORWARDS: &str = "wagate_forwards_total";
pub const FORWARD_DURATION: &str = "wagate_forward_duration_seconds";
pub const ENGINE_QUERY_TIMEOUTS: &str = "wagate_engine_query_timeouts_total";
pub const EVENTS_PERSIST_FAILED: &str = "wagate_events_persist_failed_total";

/// Outcomes of one webhook delivery attempt (`wagate_webhook_deliveries_total{outcome}`).
pub mod outcome {
    /// The receiver answered 2xx.
    pub const SUCCESS: &str = "success";
    /// The attempt failed and another is scheduled.
    pub const RETRY: &str = "retry";
    /// The last allowed attempt failed: the row went to the delivery-failure log.
    pub const FAILED: &str = "failed";
    /// Never sent: the SSRF guard refused the address, or the payload can never be sent.
    pub const BLOCKED: &str = "blocked";
    pub const ALL: [&str; 4] = [SUCCESS, RETRY, FAILED, BLOCKED];
}

/// Outbox row states, as the `status` column spells them.
pub const OUTBOX_STATES: [&str; 6] = [
    "pending",
    "queued",
    "delivering",
    "retrying",
    "delivered",
    "failed",
];
/// Job states shown for each queue (the queue dashboard's and `wagate_queue_jobs{state}`'s).
pub const JOB_STATES: [&str; 5] = ["waiting", "active", "delayed", "completed", "failed"];

/// Request latency: sub-millisecond reads up to slow engine queries.
const HTTP_BUCKETS: [f64; 15] = [
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
];
/// One webhook HTTP attempt, bounded by `WEBHOOK_TIMEOUT`.
const DELIVERY_BUCKETS: [f64; 13] = [
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
];
/// Event created -> delivered: milliseconds when healthy, hours when a receiver was down and retries backed off.
const LAG_BUCKETS: [f64; 16] = [
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0, 1800.0,
    7200.0,
];

/// What `wagate_build_info` says about this process.
#[derive(Debug, Clone)]
pub struct BuildInfo {
    pub version: &'static str,
    /// The engine family (`sim`, `socket`, `browser`), or `none` for the worker.
    pub engine: String,
    /// `all`, `api`, `worker`.
    pub role: String,
}

/// The installed recorder: renders the scrape and samples the process gauges on each render.
#[derive(Clone)]
pub struct Recorder {
    handle: PrometheusHandle,
}

impl std::fmt::Debug for Recorder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Recorder")
    }
}

impl Recorder {
    /// Installs the process-wide recorder and describes every family. `None` when a recorder is already
    /// installed (a second install in one process, as in-process tests do).
    pub fn install(info: &BuildInfo) -> Option<Recorder> {
        let handle = PrometheusBuilder::new()
            .set_buckets_for_metric(Matcher::Full(HTTP_DURATION.into()), &HTTP_BUCKETS)
            .and_then(|b| {
                b.set_buckets_for_metric(Matcher::Full(FORWARD_DURATION.into()), &HTTP_BUCKETS)
            })
            .and_then(|b| {
                b.set_buckets_for_metric(Matcher::Full(WEBHOOK_DURATION.into()), &DELIVERY_BUCKETS)
            })
            .and_then(|b| {
                b.set_buckets_for_metric(Matcher::Full(EVENT_DELIVERY_LAG.into()), &LAG_BUCKETS)
            })
            .ok()?
            .install_recorder()
            .ok()?;
        describe_process();
        describe_all();
        register_zeroes();
        metrics::gauge!(
            BUILD_INFO,
            "version" => info.version,
            "engine" => info.engine.clone(),
            "role" => info.role.clone()
        )
        .set(1.0);
        collect_process();
        Some(Recorder { handle })
    }

    /// The Prometheus text of every family, with fresh process figures.
    pub fn render(&self) -> String {
        let cpu_seconds = collect_process();
        let mut text = self.handle.render();
        if let Some(seconds) = cpu_seconds {
            push_cpu_seconds(&mut text, seconds);
        }
        text
    }

    /// Folds histogram samples recorded since the last call (without a listener of its own, the exporter
    /// needs this every few seconds to bound its memory).
    pub fn run_upkeep(&self) {
        self.handle.run_upkeep();
    }
}

/// How often a process calls [`Recorder::run_upkeep`].
pub const UPKEEP_EVERY: Duration = Duration::from_secs(5);

/// The CPU time counter, fractional (see the module comment).
pub const PROCESS_CPU_SECONDS: &str = "process_cpu_seconds_total";
const PROCESS_OPEN_FDS: &str = "process_open_fds";
const PROCESS_MAX_FDS: &str = "process_max_fds";
const PROCESS_VIRTUAL_MEMORY: &str = "process_virtual_memory_bytes";
const PROCESS_VIRTUAL_MEMORY_MAX: &str = "process_virtual_memory_max_bytes";
const PROCESS_RESIDENT_MEMORY: &str = "process_resident_memory_bytes";
const PROCESS_START_TIME: &str = "process_start_time_seconds";
const PROCESS_THREADS: &str = "process_threads";

/// The process gauges, described as `metrics-process` describes them.
fn describe_process() {
    describe_gauge!(
        PROCESS_OPEN_FDS,
        Unit::Count,
        "Number of open file descriptors."
    );
    describe_gauge!(
        PROCESS_MAX_FDS,
        Unit::Count,
        "Maximum number of open file descriptors."
    );
    describe_gauge!(
        PROCESS_VIRTUAL_MEMORY,
        Unit::Bytes,
        "Virtual memory size in bytes."
    );
    describe_gauge!(
        PROCESS_VIRTUAL_MEMORY_MAX,
        Unit::Bytes,
        "Maximum amount of virtual memory available in bytes."
    );
    describe_gauge!(
        PROCESS_RESIDENT_MEMORY,
        Unit::Bytes,
        "Resident memory size in bytes."
    );
    describe_gauge!(
        PROCESS_START_TIME,
        Unit::Seconds,
        "Start time of the process since unix epoch in seconds."
    );
    describe_gauge!(
        PROCESS_THREADS,
        Unit::Count,
        "Number of OS threads in the process."
    );
}

/// Reads the process figures (`/proc/self` on Linux), sets the gauges and returns the CPU seconds (user +
/// system, to the kernel's clock tick), which [`push_cpu_seconds`] renders.
fn collect_process() -> Option<f64> {
    let m = metrics_process::collector::collect();
    let gauges = [
        (PROCESS_OPEN_FDS, m.open_fds),
        (PROCESS_MAX_FDS, m.max_fds),
        (PROCESS_VIRTUAL_MEMORY, m.virtual_memory_bytes),
        (PROCESS_VIRTUAL_MEMORY_MAX, m.virtual_memory_max_bytes),
        (PROCESS_RESIDENT_MEMORY, m.resident_memory_bytes),
        (PROCESS_START_TIME, m.start_time_seconds),
        (PROCESS_THREADS, m.threads),
    ];
    for (name, value) in gauges {
        if let Some(v) = value {
            metrics::gauge!(name).set(v as f64);
        }
    }
    m.cpu_seconds_total.filter(|s| s.is_finite() && *s >= 0.0)
}

/// Appends `process_cpu_seconds_total` to a rendered scrape as a counter with its fraction.
fn push_cpu_seconds(text: &mut String, seconds: f64) {
    use std::fmt::Write as _;
    if !text.is_empty() && !text.ends_with('\n') {
        text.push('\n');
    }
    let _ = write!(
        text,
        "# HELP {PROCESS_CPU_SECONDS} Total user and system CPU time spent in seconds.\n\
         # TYPE {PROCESS_CPU_SECONDS} counter\n\
         {PROCESS_CPU_SECONDS} {seconds}\n"
    );
}

fn describe_all() {
    describe_gauge!(
        BUILD_INFO,
        "Always 1; the labels say which version, engine and role this process runs"
    );
    describe_gauge!(READY, "1 when /api/health/ready would answer 200, else 0");
    describe_counter!(
        HTTP_REQUESTS,
        "HTTP requests answered, by route template, method and status code"
    );
    describe_histogram!(
        HTTP_DURATION,
        Unit::Seconds,
        "Time from a request's arrival to its response head, by route template and method"
    );
    describe_counter!(
        RATE_LIMITED,
        "Requests refused with 429 by the global rate limiter, by tier"
    );
    describe_counter!(
        RATE_LIMIT_FALLBACK,
        "Rate-limit decisions taken by the local limiter because the shared Redis limiter was unreachable"
    );
    describe_gauge!(
        SESSIONS,
        "Sessions by status and engine (embedded: every stored session; cluster: sessions loaded on this node)"
    );
    describe_gauge!(
        SESSIONS_UNOWNED,
        "Sessions that should run but hold no lease, as this node's last takeover sweep saw them (0 outside a \
         cluster); a cluster-wide count every node reports, so aggregate it with max, not sum"
    );
    describe_counter!(
        MESSAGES_RECEIVED,
        "Messages received from the network, by message type"
    );
    describe_counter!(
        MESSAGES_SENT,
        "Messages sent through the API and accepted by the engine, by message type"
    );
    describe_counter!(
        MESSAGES_FAILED,
        "Messages that failed, by message type: sends the engine refused (the API answered an error) and \
         sends it accepted that the network then failed (message.failed), each message once"
    );
    describe_counter!(
        SENDS_REFUSED,
        "Sends refused before reaching the engine, by reason (pacing, rate_limit)"
    );
    describe_counter!(
        WEBHOOK_DELIVERIES,
        "Webhook delivery attempts by outcome (success, retry, failed, blocked)"
    );
    describe_histogram!(
        WEBHOOK_DURATION,
        Unit::Seconds,
        "Duration of one webhook HTTP attempt"
    );
    describe_histogram!(
        EVENT_DELIVERY_LAG,
        Unit::Seconds,
        "Time from an event's creation to its successful webhook delivery"
    );
    describe_gauge!(
        OUTBOX_ROWS,
        "Webhook outbox rows by state, sampled at scrape time from the shared data database: every pod \
         reports the same global count, so aggregate it with max, not sum"
    );
    describe_gauge!(
        QUEUE_JOBS,
        "Jobs per queue and state (waiting, active, delayed, completed, failed), sampled at scrape time from \
         the shared data database: every pod reports the same global count, so aggregate it with max, not sum"
    );
    describe_counter!(RECONNECTS, "Automatic session reconnect attempts");
    describe_counter!(
        RECONNECT_LOOP_ALERTS,
        "session.reconnect_loop alerts raised (every fifth consecutive reconnect attempt)"
    );
    describe_gauge!(LEASES_HELD, "Session leases held by this node");
    describe_counter!(
        TAKEOVERS,
        "Sessions this node took over from a lapsed owner"
    );
    describe_counter!(
        FORWARDS,
        "Session-scoped requests forwarded to the owner node, by outcome"
    );
    describe_histogram!(
        FORWARD_DURATION,
        Unit::Seconds,
        "Duration of a forwarded request, to the owner's response head"
    );
    describe_counter!(
        ENGINE_QUERY_TIMEOUTS,
        "Engine queries that outlived ENGINE_QUERY_TIMEOUT_MS, by engine"
    );
    describe_counter!(
        EVENTS_PERSIST_FAILED,
        "Engine events that could not be persisted and were acknowledged anyway"
    );
}

/// Series whose label values are known up front start at zero: `rate()` and alerts see the first increment.
fn register_zeroes() {
    for name in [
        RATE_LIMIT_FALLBACK,
        RECONNECTS,
        RECONNECT_LOOP_ALERTS,
        TAKEOVERS,
        EVENTS_PERSIST_FAILED,
    ] {
        metrics::counter!(name).increment(0);
    }
    for tier in ["second", "minute", "hour"] {
        metrics::counter!(RATE_LIMITED, "tier" => tier).increment(0);
    }
    for reason in ["pacing", "rate_limit"] {
        metrics::counter!(SENDS_REFUSED, "reason" => reason).increment(0);
    }
    for outcome in outcome::ALL {
        metrics::counter!(WEBHOOK_DELIVERIES, "outcome" => outcome).increment(0);
    }
    for outcome in ["success", "error"] {
        metrics::counter!(FORWARDS, "outcome" => outcome).increment(0);
    }
    for name in [WEBHOOK_DURATION, EVENT_DELIVERY_LAG, FORWARD_DURATION] {
        // A registered histogram is rendered (with empty buckets) before its first sample.
        let _ = metrics::histogram!(name);
    }
    metrics::gauge!(SESSIONS_UNOWNED).set(0.0);
    metrics::gauge!(LEASES_HELD).set(0.0);
}

/// Sets `wagate_outbox_rows{state}` from `(state, count)` pairs; states not listed read 0. The count is the
/// shared table's, so every process that is scraped reports the same figure.
pub fn set_outbox_rows(counts: &[(String, i64)]) {
    for state in OUTBOX_STATES {
        let n = counts
            .iter()
            .find(|(s, _)| s == state)
            .map_or(0, |(_, n)| *n);
        metrics::gauge!(OUTBOX_ROWS, "state" => state).set(n as f64);
    }
}

/// Sets `wagate_queue_jobs{queue,state}` for one queue.
pub fn set_queue_jobs(queue: &str, counts: &crate::queue::JobCounts) {
    for (state, n) in counts.by_state() {
        metrics::gauge!(QUEUE_JOBS, "queue" => queue.to_owned(), "state" => state).set(n as f64);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_seconds_keep_their_fraction() {
        let mut text = String::from("# TYPE wagate_ready gauge\nwagate_ready 1\n");
        push_cpu_seconds(&mut text, 1.93);
        assert!(text.ends_with(
            "# HELP process_cpu_seconds_total Total user and system CPU time spent in seconds.\n\
             # TYPE process_cpu_seconds_total counter\n\
             process_cpu_seconds_total 1.93\n"
        ));
        assert!(text.starts_with("# TYPE wagate_ready gauge\nwagate_ready 1\n# HELP"));
        let mut small = String::new();
        push_cpu_seconds(&mut small, 0.41);
        assert!(
            small.contains("\nprocess_cpu_seconds_total 0.41\n"),
            "{small}"
        );
        let mut unterminated = String::from("wagate_ready 1");
        push_cpu_seconds(&mut unterminated, 0.0);
        assert!(
            unterminated.starts_with("wagate_ready 1\n# HELP"),
            "{unterminated}"
        );
        assert!(unterminated.ends_with("process_cpu_seconds_total 0\n"));
    }

    #[test]
    fn this_process_reports_its_cpu_time() {
        let seconds = collect_process();
        if cfg!(target_os = "linux") {
            assert!(seconds.is_some_and(|s| s >= 0.0), "{seconds:?}");
        }
    }
}
