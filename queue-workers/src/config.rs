//! `wagate-worker` configuration from the environment, validated at boot with messages naming the variable.
//! Input: a lookup function (the process environment in `main`, a map in tests). The node parses its own
//! configuration; it may reuse `parse_webhook_settings` for the shared `WEBHOOK_*` knobs.

use std::path::PathBuf;

use crate::db::DatabaseKind;
use crate::queue::{QueueBackend, QueueConfig};
use crate::webhook::WebhookSettings;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    #[error(
        "{var} must be a plain decimal integer (no sign, exponent, hex or unit), got {value:?}"
    )]
    NotAnInteger { var: &'static str, value: String },
    #[error("{var} must be greater than 0")]
    Zero { var: &'static str },
    #[error("{var} must be exactly one of {allowed}, got {value:?}")]
    NotOneOf {
        var: &'static str,
        allowed: String,
        value: String,
    },
    #[error("DATABASE_URL is required when DATABASE_TYPE=postgres")]
    MissingDatabaseUrl,
    #[error("{var} must be a port number between 1 and 65535, got {value:?}")]
    BadPort { var: &'static str, value: String },
    #[error("{var} must be an http:// or https:// URL, got {value:?}")]
    BadUrl { var: &'static str, value: String },
}

/// Everything `wagate-worker` reads at boot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkerConfig {
    pub database_kind: DatabaseKind,
    pub database_url: String,
    pub data_dir: PathBuf,
    pub queue: QueueConfig,
    pub webhook: WebhookSettings,
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
}

/// The worker's scrape port when `METRICS_PORT` is unset (the port OpenTelemetry's Prometheus exporters use).
pub const DEFAULT_METRICS_PORT: u16 = 9464;

impl WorkerConfig {
    pub fn from_env() -> Result<WorkerConfig, ConfigError> {
        WorkerConfig::from_lookup(|k| std::env::var(k).ok())
    }

    pub fn from_lookup(get: impl Fn(&str) -> Option<String>) -> Result<WorkerConfig, ConfigError> {
        let data_dir = PathBuf::from(get("DATA_DIR").unwrap_or_else(|| "./data".to_owned()));
        let database_kind = match one_of(&get, "DATABASE_TYPE", &["sqlite", "postgres"], "sqlite")?
        {
            "postgres" => DatabaseKind::Postgres,
            _ => DatabaseKind::Sqlite,
        };
        let database_url = match (database_kind, get("DATABASE_URL").filter(|u| !u.is_empty())) {
            (_, Some(url)) => url,
            (DatabaseKind::Sqlite, None) => data_dir
                .join("wagate.sqlite")
                .to_string_lossy()
                .into_owned(),
            (DatabaseKind::Postgres, None) => return Err(ConfigError::MissingDatabaseUrl),
        };
        let backend = if boolean(&get, "REDIS_ENABLED", false)? {
            QueueBackend::Redis {
                url: get("REDIS_URL").unwrap_or_else(|| "redis://127.0.0.1:6379".to_owned()),
            }
        } else {
            QueueBackend::Sqlite {
                path: data_dir.join("queue.sqlite"),
            }
        };
        let log_filter = match one_of(
            &get,
            "LOG_LEVEL",
            &["error", "warn", "info", "debug", "verbose"],
            "info",
        )? {
            "verbose" => "trace".to_owned(),
            level => level.to_owned(),
        };
        Ok(WorkerConfig {
            database_kind,
            database_url,
            data_dir,
            queue: QueueConfig::new(backend)
                .with_prefix(get("QUEUE_PREFIX").as_deref().unwrap_or_default()),
            webhook: parse_webhook_settings(&get)?,
            log_filter,
            log_json: one_of(&get, "LOG_FORMAT", &["text", "json"], "text")? == "json",
            metrics_token: get("METRICS_TOKEN").filter(|t| !t.is_empty()),
            metrics_host: get("BIND_HOST").unwrap_or_else(|| "0.0.0.0".to_owned()),
            metrics_port: port(&get, "METRICS_PORT", DEFAULT_METRICS_PORT)?,
            otel_endpoint: otel_endpoint(&get)?,
        })
    }
}

/// The shared `WEBHOOK_*` knobs.
pub fn parse_webhook_settings(
    get: &impl Fn(&str) -> Option<String>,
) -> Result<WebhookSettings, ConfigError> {
    let d = WebhookSettings::default();
    let is_ssrf_protected = boolean(get, "WEBHOOK_SSRF_PROTECT", d.is_ssrf_protected)?;
    Ok(WebhookSettings {
        timeout_ms: positive(get, "WEBHOOK_TIMEOUT", d.timeout_ms)?,
        retry_delay_ms: integer(get, "WEBHOOK_RETRY_DELAY", d.retry_delay_ms)?,
        max_payload_bytes: usize_positive(get, "WEBHOOK_MAX_PAYLOAD_BYTES", d.max_payload_bytes)?,
        dispatch_concurrency: usize_positive(
            get,
            "WEBHOOK_DISPATCH_CONCURRENCY",
            d.dispatch_concurrency,
        )?,
        is_ssrf_protected,
        is_redirect_followed: boolean(get, "WEBHOOK_SSRF_REDIRECTS", d.is_redirect_followed)?,
    })
}

fn port(
    get: &impl Fn(&str) -> Option<String>,
    var: &'static str,
    default: u16,
) -> Result<u16, ConfigError> {
    let Some(value) = get(var) else {
        return Ok(default);
    };
    match value.parse::<u16>() {
        Ok(n) if n > 0 && value.bytes().all(|b| b.is_ascii_digit()) => Ok(n),
        _ => Err(ConfigError::BadPort { var, value }),
    }
}

fn otel_endpoint(get: &impl Fn(&str) -> Option<String>) -> Result<Option<String>, ConfigError> {
    let var = "OTEL_EXPORTER_OTLP_ENDPOINT";
    match get(var).filter(|v| !v.is_empty()) {
        None => Ok(None),
        Some(value) => match url::Url::parse(&value) {
            Ok(url) if matches!(url.scheme(), "http" | "https") => Ok(Some(value)),
            _ => Err(ConfigError::BadUrl { var, value }),
        },
    }
}

/// A plain decimal integer: ASCII digits only, so `1e3`, `0x10`, `10ms`, `+5` and ` 5` are refused.
fn integer(
    get: &impl Fn(&str) -> Option<String>,
    var: &'static str,
    default: u64,
) -> Result<u64, ConfigError> {
    let Some(value) = get(var) else {
        return Ok(default);
    };
    let bad = || ConfigError::NotAnInteger {
        var,
        value: value.clone(),
    };
    if value.is_empty() || !value.bytes().all(|b| b.is_ascii_digit()) {
        return Err(bad());
    }
    value.parse().map_err(|_| bad())
}

fn positive(
    get: &impl Fn(&str) -> Option<String>,
    var: &'static str,
    default: u64,
) -> Result<u64, ConfigError> {
    match integer(get, var, default)? {
        0 => Err(ConfigError::Zero { var }),
        n => Ok(n),
    }
}

fn usize_positive(
    get: &impl Fn(&str) -> Option<String>,
    var: &'static str,
    default: usize,
) -> Result<usize, ConfigError> {
    let n = positive(get, var, default as u64)?;
    usize::try_from(n).map_err(|_| ConfigError::NotAnInteger {
        var,
        value: n.to_string(),
    })
}

fn boolean(
    get: &impl Fn(&str) -> Option<String>,
    var: &'static str,
    default: bool,
) -> Result<bool, ConfigError> {
    match get(var).as_deref() {
        None => Ok(default),
        Some("true") => Ok(true),
        Some("false") => Ok(false),
        Some(other) => Err(ConfigError::NotOneOf {
            var,
            allowed: "true, false".to_owned(),
            value: other.to_owned(),
        }),
    }
}

fn one_of(
    get: &impl Fn(&str) -> Option<String>,
    var: &'static str,
    allowed: &[&'static str],
    default: &'static str,
) -> Result<&'static str, ConfigError> {
    let Some(value) = get(var) else {
        return Ok(default);
    };
    match allowed.iter().copied().find(|a| *a == value) {
        Some(found) => Ok(found),
        None => Err(ConfigError::NotOneOf {
            var,
            allowed: allowed.join(", "),
            value,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn parse(pairs: &[(&str, &str)]) -> Result<WorkerConfig, ConfigError> {
        let map: HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        WorkerConfig::from_lookup(|k| map.get(k).cloned())
    }

    #[test]
    fn defaults_are_embedded_mode() {
        let c = parse(&[]).unwrap();
        assert_eq!(c.database_kind, DatabaseKind::Sqlite);
        assert_eq!(c.database_url, "./data/wagate.sqlite");
        assert_eq!(
            c.queue.backend,
            QueueBackend::Sqlite {
                path: "./data/queue.sqlite".into()
            }
        );
        assert_eq!(c.webhook, WebhookSettings::default());
        assert_eq!(c.log_filter, "info");
        assert!(!c.log_json);
        assert_eq!(c.metrics_port, DEFAULT_METRICS_PORT);
        assert_eq!(c.metrics_token, None);
        assert_eq!(c.otel_endpoint, None);
    }

    #[test]
    fn telemetry_knobs_are_checked() {
        assert!(parse(&[("LOG_FORMAT", "JSON")]).is_err());
        assert!(parse(&[("LOG_FORMAT", "json")]).unwrap().log_json);
        assert!(parse(&[("METRICS_PORT", "0")]).is_err());
        assert!(parse(&[("METRICS_PORT", "70000")]).is_err());
        assert_eq!(
            parse(&[("METRICS_PORT", "9100")]).unwrap().metrics_port,
            9100
        );
        assert!(parse(&[("OTEL_EXPORTER_OTLP_ENDPOINT", "localhost:4318")]).is_err());
        assert_eq!(
            parse(&[("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4318")])
                .unwrap()
                .otel_endpoint
                .as_deref(),
            Some("http://127.0.0.1:4318")
        );
    }

    #[test]
    fn exponent_hex_and_units_are_refused_naming_the_variable() {
        for bad in ["1e3", "0x10", "10ms", "+5", " 5", "", "-1"] {
            let err = parse(&[("WEBHOOK_TIMEOUT", bad)]).unwrap_err();
            assert!(
                err.to_string().starts_with("WEBHOOK_TIMEOUT"),
                "{bad}: {err}"
            );
        }
    }

    #[test]
    fn zero_payload_cap_is_refused() {
        assert_eq!(
            parse(&[("WEBHOOK_MAX_PAYLOAD_BYTES", "0")]).unwrap_err(),
            ConfigError::Zero {
                var: "WEBHOOK_MAX_PAYLOAD_BYTES"
            }
        );
    }

    #[test]
    fn booleans_must_be_exact() {
        assert!(parse(&[("REDIS_ENABLED", "TRUE")]).is_err());
        assert!(parse(&[("WEBHOOK_SSRF_PROTECT", "0")]).is_err());
        let c = parse(&[("REDIS_ENABLED", "true"), ("WEBHOOK_SSRF_PROTECT", "false")]).unwrap();
        assert!(matches!(c.queue.backend, QueueBackend::Redis { .. }));
        assert!(!c.webhook.is_ssrf_protected);
    }

    #[test]
    fn postgres_needs_a_url_and_log_level_is_checked() {
        assert_eq!(
            parse(&[("DATABASE_TYPE", "postgres")]).unwrap_err(),
            ConfigError::MissingDatabaseUrl
        );
        assert!(parse(&[("DATABASE_TYPE", "mysql")]).is_err());
        assert!(parse(&[("LOG_LEVEL", "loud")]).is_err());
        assert_eq!(
            parse(&[("LOG_LEVEL", "verbose")]).unwrap().log_filter,
            "trace"
        );
    }
}
