//! `wagate-worker` configuration: the knobs defined in `wagate-config` (the ones the node reads too, with
//! the same rules and messages, plus `METRICS_PORT`), turned into what the worker runs with.

use std::ffi::OsString;
use std::path::PathBuf;
use std::time::Duration;

use wagate_config::{DatabaseType, LogFormat, Source, Stop, WorkerCli};

use crate::db::DatabaseKind;
use crate::queue::{QueueBackend, QueueConfig};
use crate::telemetry::TraceSampling;
use crate::webhook::WebhookSettings;

/// Everything `wagate-worker` reads at boot.
#[derive(Debug, Clone, PartialEq)]
pub struct WorkerConfig {
    pub database_kind: DatabaseKind,
    pub database_url: String,
    pub data_dir: PathBuf,
    pub queue: QueueConfig,
    pub webhook: WebhookSettings,
    /// `OUTBOX_RECONCILE_MS`: how often the outbox sweep runs.
    pub reconcile_every: Duration,
    /// `OUTBOX_STALE_MS`: how long a due outbox row may sit untouched before the sweep re-enqueues it.
    pub stale_after: Duration,
    /// A `tracing` level from `LOG_LEVEL` (`verbose` is `trace`).
    pub log_filter: String,
    /// `LOG_FORMAT=json`.
    pub log_json: bool,
    /// `METRICS_TOKEN`: the scrape's bearer token; unset, the worker opens no metrics listener.
    pub metrics_token: Option<String>,
    /// `BIND_HOST`:`METRICS_PORT` (default 9464), where the worker serves `GET /api/metrics`.
    pub metrics_host: String,
    pub metrics_port: u16,
    /// `OTEL_EXPORTER_OTLP_ENDPOINT`: spans exported over OTLP/HTTP when set.
    pub otel_endpoint: Option<String>,
    /// `OTEL_TRACES_SAMPLER` and `OTEL_TRACES_SAMPLER_ARG`: which traces are exported.
    pub trace_sampling: TraceSampling,
    /// `service.instance.id` of the worker's spans: `NODE_ID`, else the host name.
    pub instance_id: String,
}

impl WorkerConfig {
    /// Reads the command line (`args`, program name first) and `source`; stops on `--help` or a bad value.
    pub fn load(
        args: impl IntoIterator<Item = impl Into<OsString> + Clone>,
        source: &Source,
    ) -> Result<WorkerConfig, Stop> {
        let WorkerCli { shared, worker } = wagate_config::load(args, source)?;
        let database_url = shared.database_url()?;
        let backend = if shared.redis_enabled {
            QueueBackend::Redis {
                url: shared.redis_url.clone(),
            }
        } else {
            QueueBackend::Sqlite {
                path: shared.data_dir.join("queue.sqlite"),
            }
        };
        let w = &shared.webhooks;
        Ok(WorkerConfig {
            database_kind: match shared.database_type {
                DatabaseType::Sqlite => DatabaseKind::Sqlite,
                DatabaseType::Postgres => DatabaseKind::Postgres,
            },
            database_url,
            queue: QueueConfig::new(backend).with_prefix(&shared.queue_prefix),
            webhook: WebhookSettings {
                timeout_ms: w.webhook_timeout,
                retry_delay_ms: w.webhook_retry_delay,
                max_payload_bytes: usize::try_from(w.webhook_max_payload_bytes)
                    .unwrap_or(usize::MAX),
                dispatch_concurrency: usize::try_from(w.webhook_dispatch_concurrency)
                    .unwrap_or(usize::MAX),
                is_ssrf_protected: w.webhook_ssrf_protect,
                is_redirect_followed: w.webhook_ssrf_redirects,
                claimer: shared.node_id("wagate-worker"),
            },
            reconcile_every: Duration::from_millis(w.outbox_reconcile_ms),
            stale_after: Duration::from_millis(w.outbox_stale_ms),
            log_filter: shared.log_level.tracing_level().to_owned(),
            log_json: shared.log_format == LogFormat::Json,
            metrics_token: shared.metrics_token.clone(),
            metrics_host: shared.bind_host.clone(),
            metrics_port: worker.metrics_port,
            otel_endpoint: shared.otel_exporter_otlp_endpoint.clone(),
            trace_sampling: TraceSampling::new(
                shared.otel_traces_sampler,
                shared.otel_traces_sampler_arg,
            ),
            instance_id: shared.node_id("wagate-worker"),
            data_dir: shared.data_dir,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(pairs: &[(&str, &str)]) -> Result<WorkerConfig, Stop> {
        WorkerConfig::load(
            ["wagate-worker"],
            &Source::from_pairs(pairs.iter().copied()),
        )
    }

    #[test]
    fn defaults_are_embedded_mode() {
        let c = parse(&[]).expect("defaults");
        assert_eq!(c.database_kind, DatabaseKind::Sqlite);
        assert_eq!(c.database_url, "./data/wagate.sqlite");
        assert_eq!(
            c.queue.backend,
            QueueBackend::Sqlite {
                path: "./data/queue.sqlite".into()
            }
        );
        assert_eq!(
            c.webhook,
            WebhookSettings {
                claimer: c.instance_id.clone(),
                ..WebhookSettings::default()
            },
            "the spec's webhook defaults, claiming under this worker's id"
        );
        assert_eq!(c.reconcile_every, Duration::from_secs(30));
        assert_eq!(
            c.stale_after,
            crate::webhook::reconcile::DEFAULT_STALE_AFTER
        );
        assert_eq!(c.log_filter, "info");
        assert!(!c.log_json);
        assert_eq!(c.metrics_port, 9464);
        assert_eq!(c.metrics_token, None);
        assert_eq!(c.otel_endpoint, None);
        assert_eq!(c.trace_sampling, TraceSampling::default());
    }

    #[test]
    fn reconcile_interval_and_log_format_are_read() {
        let c = parse(&[
            ("OUTBOX_RECONCILE_MS", "1500"),
            ("OUTBOX_STALE_MS", "2500"),
            ("LOG_FORMAT", "json"),
            ("LOG_LEVEL", "verbose"),
        ])
        .expect("loads");
        assert_eq!(c.reconcile_every, Duration::from_millis(1500));
        assert_eq!(c.stale_after, Duration::from_millis(2500));
        assert!(c.log_json);
        assert_eq!(c.log_filter, "trace");
        let c = parse(&[
            ("DATABASE_TYPE", "postgresql"),
            ("DATABASE_URL", "postgres://db/x"),
        ])
        .expect("loads");
        assert_eq!(c.database_kind, DatabaseKind::Postgres);
    }
}
