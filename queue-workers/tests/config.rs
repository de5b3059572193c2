//! The real `wagate-worker` against the shared table of refused values: the same line and exit code as
//! `wagate`, `--help` lists every knob, and nothing starts before either. The worker's own loader reads every
//! row of the shared table of accepted values as the row says.

#[test]
fn the_worker_refuses_the_shared_table_and_prints_help() {
    let checked = wagate_config::cases::check_binary::<wagate_config::WorkerCli>(
        std::path::Path::new(env!("CARGO_BIN_EXE_wagate-worker")),
        &[],
    );
    if let Err(e) = checked {
        panic!("{e}");
    }
}

/// Every accepted row of the shared table through the worker's real loader, reading what each row says it
/// reads; the node-only knobs are not the worker's, so a row naming one fails.
#[test]
fn the_worker_loads_every_accepted_row() {
    use wagate_config::cases::{ACCEPTED, Expect, check_loader};
    use wagate_workers::QueueBackend;
    use wagate_workers::config::WorkerConfig;
    let holds = |c: &WorkerConfig, expect: &Expect| {
        Some(match *expect {
            Expect::DatabaseType(t) => {
                let kind = match t {
                    wagate_config::DatabaseType::Sqlite => wagate_workers::DatabaseKind::Sqlite,
                    wagate_config::DatabaseType::Postgres => wagate_workers::DatabaseKind::Postgres,
                };
                c.database_kind == kind
            }
            Expect::DatabaseUrl(url) => c.database_url == url,
            Expect::WebhookTimeoutMs(ms) => c.webhook.timeout_ms == ms,
            Expect::OutboxStaleMs(ms) => c.stale_after.as_millis() == u128::from(ms),
            Expect::LogLevel(level) => c.log_filter == level.tracing_level(),
            Expect::LogFormat(format) => c.log_json == (format == wagate_config::LogFormat::Json),
            Expect::RedisEnabled(on) => matches!(c.queue.backend, QueueBackend::Redis { .. }) == on,
            Expect::QueuePrefix(prefix) => {
                c.queue.webhook_queue == format!("{prefix}webhook-queue")
                    && c.queue.ingress_queue == format!("{prefix}ingress-queue")
            }
            Expect::OtelEndpoint(url) => c.otel_endpoint.as_deref() == url,
            Expect::TraceSampling {
                ratio,
                follows_parent,
            } => {
                c.trace_sampling.ratio == ratio && c.trace_sampling.follows_parent == follows_parent
            }
            Expect::S3Bucket(_)
            | Expect::S3Endpoint(_)
            | Expect::S3ForcePathStyle(_)
            | Expect::BrowserWebUrl(_)
            | Expect::BenchAckOnReceipt(_)
            | Expect::BenchLocalLimiter(_) => return None,
        })
    };
    let checked = check_loader(
        ACCEPTED,
        |source| WorkerConfig::load(["wagate-worker"], source),
        holds,
    );
    if let Err(e) = checked {
        panic!("{e}");
    }
}
