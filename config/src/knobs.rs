//! Every knob, defined once: its environment variable (the field name in upper case), its default and its
//! meaning, as `clap` arguments. `wagate` reads [`NodeCli`] (shared + node knobs), `wagate-worker` reads
//! [`WorkerCli`] (shared + worker knobs); both print them all on `--help`. A numeric knob takes the rule of
//! its kind in `values` (count, requests, milliseconds, bytes, MiB, days), each with an upper bound no use of
//! the value can overflow with.

use std::path::PathBuf;

use clap::{ArgAction, Args, Parser, ValueEnum};

use crate::values::{
    AddressList, NameList, bind_host, boolean, bounded_timeout, byte_size, bytes, bytes_or_zero,
    count, count_or_zero, days_or_zero, handover_wait, http_url, mebibytes_or_zero, millis,
    millis_or_zero, port, postgres_url, ratio, redis_url, requests, signed, sqlite_location,
};
use crate::{ConfigError, refuse};

/// The data database's kind (`postgresql` is accepted for `postgres`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum DatabaseType {
    Sqlite,
    #[value(alias = "postgresql")]
    Postgres,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LogLevel {
    Error,
    Warn,
    Info,
    Debug,
    Verbose,
}

impl LogLevel {
    /// The `tracing` level (`verbose` is `trace`).
    pub fn tracing_level(self) -> &'static str {
        match self {
            Self::Error => "error",
            Self::Warn => "warn",
            Self::Info => "info",
            Self::Debug => "debug",
            Self::Verbose => "trace",
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Verbose => "verbose",
            other => other.tracing_level(),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    Text,
    Json,
}

/// `OTEL_TRACES_SAMPLER`: OpenTelemetry's standard sampler names, those the SDK implements (an unknown name
/// is refused rather than falling back to keeping everything, as the SDK would).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
#[value(rename_all = "snake_case")]
pub enum TraceSampler {
    /// Every trace
    AlwaysOn,
    /// No trace
    AlwaysOff,
    /// The share OTEL_TRACES_SAMPLER_ARG of traces
    Traceidratio,
    /// A caller's traceparent decides; other traces all
    ParentbasedAlwaysOn,
    /// A caller's traceparent decides; other traces none
    ParentbasedAlwaysOff,
    /// A caller's traceparent decides; of other traces the share OTEL_TRACES_SAMPLER_ARG
    ParentbasedTraceidratio,
}

impl TraceSampler {
    /// The share of traces that start here that is kept: the argument for the ratio samplers.
    pub fn ratio(self, arg: f64) -> f64 {
        match self {
            Self::AlwaysOn | Self::ParentbasedAlwaysOn => 1.0,
            Self::AlwaysOff | Self::ParentbasedAlwaysOff => 0.0,
            Self::Traceidratio | Self::ParentbasedTraceidratio => arg,
        }
    }

    /// Whether a caller's sampled flag decides (the `parentbased_*` samplers).
    pub fn follows_parent(self) -> bool {
        matches!(
            self,
            Self::ParentbasedAlwaysOn | Self::ParentbasedAlwaysOff | Self::ParentbasedTraceidratio
        )
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum NodeEnv {
    Production,
    Development,
    Test,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, ValueEnum)]
pub enum EngineType {
    Browser,
    Socket,
    Sim,
}

impl EngineType {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Browser => "browser",
            Self::Socket => "socket",
            Self::Sim => "sim",
        }
    }
}

impl std::fmt::Display for EngineType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum NodeRole {
    All,
    Api,
    Worker,
}

impl NodeRole {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::All => "all",
            Self::Api => "api",
            Self::Worker => "worker",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum MainDbReplication {
    None,
    Raft,
}

/// The socket engine's default endpoint (WhatsApp Web's chat socket).
pub const DEFAULT_SOCKET_WS_URL: &str = "wss://web.whatsapp.com/ws/chat";
/// `BROWSER_WEB_URL`'s default: WhatsApp Web itself.
pub const DEFAULT_BROWSER_WEB_URL: &str = "https://web.whatsapp.com/";

/// Webhook deliveries a process runs at once.
pub const DEFAULT_WEBHOOK_DISPATCH_CONCURRENCY: u64 = 64;

/// The worker's scrape port (the port OpenTelemetry's Prometheus exporters use).
pub const DEFAULT_METRICS_PORT: u16 = 9464;

/// Knobs both binaries read, with one meaning.
#[derive(Debug, Clone, PartialEq, Args)]
#[command(next_help_heading = "Storage, queues and logs (wagate and wagate-worker)")]
pub struct SharedKnobs {
    /// Where main.sqlite, wagate.sqlite, queue.sqlite, .api-key, sessions/, media/ and exports/ live
    #[arg(long, env, default_value = "./data")]
    pub data_dir: PathBuf,
    /// The data database (the main database is always SQLite)
    #[arg(long, env, value_enum, default_value_t = DatabaseType::Sqlite)]
    pub database_type: DatabaseType,
    /// sqlite: a file path or sqlite: URL (default DATA_DIR/wagate.sqlite); postgres: postgres://user:pass@host:5432/db or postgresql://... (required)
    #[arg(long, env)]
    pub database_url: Option<String>,
    /// Redis for queues, leases and the node registry; false keeps everything in DATA_DIR
    #[arg(long, env, action = ArgAction::Set, value_parser = boolean, default_value_t = false)]
    pub redis_enabled: bool,
    /// The Redis server REDIS_ENABLED=true uses (queues; on the node also session leases, the node registry, event fan-out and the shared rate limit): redis://host[:port][/db] or unix:///path/to/socket (no TLS)
    #[arg(long, env, value_parser = redis_url, default_value = "redis://127.0.0.1:6379")]
    pub redis_url: String,
    /// Prepended to the queue names (webhook-queue, ingress-queue)
    #[arg(long, env, default_value = "")]
    pub queue_prefix: String,
    /// Listen address (the node's API; the worker's metrics scrape): an IP address (0.0.0.0, ::) or a host name
    #[arg(long, env, value_parser = bind_host, default_value = "0.0.0.0")]
    pub bind_host: String,
    /// This process's id in the cluster and in exported spans (default: the host name)
    #[arg(long, env)]
    pub node_id: Option<String>,
    /// Least severe log lines written (verbose is trace); trace export keeps info spans even when this is quieter
    #[arg(long, env, value_enum, default_value_t = LogLevel::Info)]
    pub log_level: LogLevel,
    /// Log lines on stdout: text (coloured only on a terminal) or json (one object per line)
    #[arg(long, env, value_enum, default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,
    /// Bearer token of the metrics scrape; unset, no metrics are served
    #[arg(long, env)]
    pub metrics_token: Option<String>,
    /// OTLP/HTTP collector base URL for trace export; unset, no export
    #[arg(long, env, value_parser = http_url)]
    pub otel_exporter_otlp_endpoint: Option<String>,
    /// Which traces are exported (OpenTelemetry's sampler names); the parentbased_* samplers follow the sampled flag of a caller's traceparent
    #[arg(long, env, value_enum, default_value_t = TraceSampler::ParentbasedAlwaysOn)]
    pub otel_traces_sampler: TraceSampler,
    /// The share of traces the traceidratio samplers keep, a decimal from 0 to 1; the other samplers ignore it
    #[arg(long, env, value_parser = ratio, default_value_t = 1.0)]
    pub otel_traces_sampler_arg: f64,
    #[command(flatten)]
    pub webhooks: WebhookKnobs,
}

#[derive(Debug, Clone, PartialEq, Eq, Args)]
#[command(next_help_heading = "Webhooks (wagate and wagate-worker)")]
pub struct WebhookKnobs {
    /// Milliseconds per delivery attempt
    #[arg(long, env, value_parser = millis, default_value_t = 10_000)]
    pub webhook_timeout: u64,
    /// Base delay in milliseconds; doubles per retry, capped at 5 minutes
    #[arg(long, env, value_parser = millis_or_zero, default_value_t = 5_000)]
    pub webhook_retry_delay: u64,
    /// Larger payloads are not dispatched
    #[arg(long, env, value_parser = bytes, default_value_t = 1_048_576)]
    pub webhook_max_payload_bytes: u64,
    /// Deliveries running at once per process
    #[arg(long, env, value_parser = count, default_value_t = DEFAULT_WEBHOOK_DISPATCH_CONCURRENCY)]
    pub webhook_dispatch_concurrency: u64,
    /// Refuse private, loopback and link-local targets
    #[arg(long, env, action = ArgAction::Set, value_parser = boolean, default_value_t = true)]
    pub webhook_ssrf_protect: bool,
    /// Follow redirects (only when SSRF protection is off)
    #[arg(long, env, action = ArgAction::Set, value_parser = boolean, default_value_t = false)]
    pub webhook_ssrf_redirects: bool,
    /// Milliseconds between sweeps that re-enqueue outbox rows a crash left behind
    #[arg(long, env, value_parser = millis, default_value_t = 30_000)]
    pub outbox_reconcile_ms: u64,
    /// Milliseconds a due outbox row may sit untouched before a sweep re-enqueues it
    #[arg(long, env, value_parser = millis_or_zero, default_value_t = 60_000)]
    pub outbox_stale_ms: u64,
}

impl SharedKnobs {
    /// `DATABASE_URL`, or `DATA_DIR/wagate.sqlite` for SQLite; PostgreSQL needs it set. Its form is
    /// checked against `DATABASE_TYPE` (a PostgreSQL URL, or an SQLite file), so a mismatch is refused
    /// here rather than when the database is opened.
    pub fn database_url(&self) -> Result<String, ConfigError> {
        let checked = |url: &String, rule: fn(&str) -> Result<(), String>| {
            rule(url)
                .map(|()| url.clone())
                .map_err(|rule| refuse("DATABASE_URL", rule))
        };
        match (&self.database_url, self.database_type) {
            (Some(url), DatabaseType::Postgres) => checked(url, postgres_url),
            (Some(url), DatabaseType::Sqlite) => checked(url, sqlite_location),
            (None, DatabaseType::Sqlite) => {
                Ok(self.data_dir.join("wagate.sqlite").display().to_string())
            }
            (None, DatabaseType::Postgres) => Err(refuse(
                "DATABASE_URL",
                "is required when DATABASE_TYPE=postgres",
            )),
        }
    }

    /// `NODE_ID`, or the host name, or `fallback` when the host has none.
    pub fn node_id(&self, fallback: &str) -> String {
        self.node_id.clone().unwrap_or_else(|| host_name(fallback))
    }
}

fn host_name(fallback: &str) -> String {
    std::fs::read_to_string("/etc/hostname")
        .ok()
        .map(|s| s.trim().to_owned())
        .filter(|s| !s.is_empty())
        .or_else(|| std::env::var("HOSTNAME").ok().filter(|s| !s.is_empty()))
        .unwrap_or_else(|| fallback.to_owned())
}

#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "Server")]
pub struct ServerKnobs {
    /// REST and WebSocket port
    #[arg(long, env, value_parser = port, default_value_t = 2785)]
    pub api_port: u16,
    /// production enforces an API_MASTER_KEY of at least 32 characters
    #[arg(long, env, value_enum, default_value_t = NodeEnv::Development)]
    pub node_env: NodeEnv,
    /// all: API and queue workers; api; worker
    #[arg(long, env, value_enum, default_value_t = NodeRole::All)]
    pub role: NodeRole,
    /// Admin key; unset on first boot: one is generated, printed once and written to DATA_DIR/.api-key
    #[arg(long, env)]
    pub api_master_key: Option<String>,
    /// Serve /api/docs/openapi.json without an API key
    #[arg(long, env, action = ArgAction::Set, value_parser = boolean, default_value_t = false)]
    pub docs_public: bool,
    /// Prune audit rows older than this many days; 0 or negative disables pruning
    #[arg(long, env, value_parser = signed, default_value_t = 90, allow_negative_numbers = true)]
    pub audit_retention_days: i64,
    /// Main database schema sync (NOT READ YET: migrations always run)
    #[arg(long, env, action = ArgAction::Set, value_parser = boolean, default_value_t = true)]
    pub main_database_synchronize: bool,
}

#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "Engine")]
pub struct EngineKnobs {
    /// sim is an in-process simulated network
    #[arg(long, env, value_enum, default_value_t = EngineType::Browser)]
    pub engine_type: EngineType,
    /// The WebSocket endpoint the socket engine dials (ws:// or wss://)
    #[arg(long, env, default_value = DEFAULT_SOCKET_WS_URL)]
    pub socket_ws_url: String,
    /// A start that does not leave `initializing` in time answers 504
    #[arg(long, env, value_parser = millis, default_value_t = 30_000)]
    pub session_start_timeout_ms: u64,
    /// Budget of the engine queries the API bounds (group list, contact check, ...); 503 after it
    #[arg(long, env, value_parser = millis, default_value_t = 30_000)]
    pub engine_query_timeout_ms: u64,
    /// Restart the sessions that were running when the node stopped
    #[arg(long, env, action = ArgAction::Set, value_parser = boolean, default_value_t = true)]
    pub auto_start_sessions: bool,
    /// Sessions boot restore starts at once
    #[arg(long, env, value_parser = count, default_value_t = 5)]
    pub session_restore_concurrency: u64,
    /// Browser engine: DevTools protocol timeout, ms
    #[arg(long, env, value_parser = bounded_timeout, default_value_t = 180_000)]
    pub browser_protocol_timeout_ms: u64,
    /// Browser engine: the Chromium binary (default Debian's /usr/lib/chromium/chromium, else /usr/bin/chromium)
    #[arg(long, env)]
    pub chromium_path: Option<std::path::PathBuf>,
    /// Browser engine: the WhatsApp Web page each session opens (http:// or https://; tests serve a fake on loopback)
    #[arg(long, env, value_parser = http_url, default_value = DEFAULT_BROWSER_WEB_URL)]
    pub browser_web_url: String,
    /// Browser engine: the wa-js bundle (default /usr/share/wagate/wa-js/wppconnect-wa.js in the image, else the pinned npm install under node/engine-browser/js)
    #[arg(long, env)]
    pub browser_wajs_path: Option<std::path::PathBuf>,
    /// Browser engine: a session's process tree above this many MiB gets a fresh page (0 = no ceiling)
    #[arg(long, env, value_parser = mebibytes_or_zero, default_value_t = 1024)]
    pub browser_max_rss_mb: u64,
    /// Browser engine: Chromium launches running at once
    #[arg(long, env, value_parser = count, default_value_t = 2)]
    pub browser_launch_concurrency: u64,
    /// Fetch media URLs through the session's proxy
    #[arg(long, env, action = ArgAction::Set, value_parser = boolean, default_value_t = true)]
    pub session_proxy_url_fetch: bool,
}

#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "Limits")]
pub struct LimitKnobs {
    /// Comma-separated IPs/CIDRs of proxies whose X-Forwarded-For/Forwarded headers are read (default none)
    #[arg(long, env)]
    pub trusted_proxies: Option<AddressList>,
    /// Short rate-limit window, ms (tiers are keyed on the client address)
    #[arg(long, env, value_parser = millis, default_value_t = 1_000)]
    pub rate_limit_short_ttl: u64,
    /// Requests a client address may make per short window; over it 429
    #[arg(long, env, value_parser = requests, default_value_t = 10)]
    pub rate_limit_short_limit: u64,
    /// Medium rate-limit window, ms
    #[arg(long, env, value_parser = millis, default_value_t = 60_000)]
    pub rate_limit_medium_ttl: u64,
    /// Requests a client address may make per medium window; over it 429
    #[arg(long, env, value_parser = requests, default_value_t = 100)]
    pub rate_limit_medium_limit: u64,
    /// Long rate-limit window, ms
    #[arg(long, env, value_parser = millis, default_value_t = 3_600_000)]
    pub rate_limit_long_ttl: u64,
    /// Requests a client address may make per long window; over it 429
    #[arg(long, env, value_parser = requests, default_value_t = 1_000)]
    pub rate_limit_long_limit: u64,
    /// Whole request body: bytes, or a number with a kb/mb suffix
    #[arg(long, env, value_parser = byte_size, default_value = "25mb")]
    pub body_size_limit: u64,
    /// How long a connection may take to send a whole request head, ms, which is also how long a keep-alive connection may sit idle; past it the connection is closed (the 75 s default outlasts the 60 s idle timeouts of AWS ALB and nginx's upstream keep-alive, so a balancer never sends on a connection the node is closing)
    #[arg(long, env, value_parser = bounded_timeout, default_value_t = 75_000)]
    pub http_header_read_timeout_ms: u64,
    /// How long a request body may go without a byte arriving while it is read, ms; past it the request answers 408 (a slow upload that keeps sending is not cut)
    #[arg(long, env, value_parser = bounded_timeout, default_value_t = 60_000)]
    pub http_body_read_timeout_ms: u64,
    /// Decoded media blob cap in bytes; over it a send answers 413
    #[arg(long, env, value_parser = bytes, default_value_t = 50 * 1024 * 1024)]
    pub media_download_max_bytes: u64,
    /// Media URL fetches refuse loopback, private, link-local and metadata addresses (false only for tests)
    #[arg(long, env, action = ArgAction::Set, value_parser = boolean, default_value_t = true)]
    pub media_url_guard: bool,
    /// Milliseconds between re-checks of live WebSocket keys
    #[arg(long, env, value_parser = millis, default_value_t = 60_000)]
    pub ws_revalidate_ms: u64,
}

#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "Media and exports")]
pub struct MediaKnobs {
    /// Server-side conversion with ffmpeg; false makes the conversion routes answer 503
    #[arg(long, env, action = ArgAction::Set, value_parser = boolean, default_value_t = true)]
    pub media_conversion_enabled: bool,
    /// The conversion binary (looked up on PATH)
    #[arg(long, env, default_value = "ffmpeg")]
    pub ffmpeg_path: String,
    /// Conversions running at once
    #[arg(long, env, value_parser = count, default_value_t = 2)]
    pub media_conversion_concurrency: u64,
    /// Conversions that may wait for a slot; more answer 503
    #[arg(long, env, value_parser = count_or_zero, default_value_t = 8)]
    pub media_conversion_queue: u64,
    /// A conversion's ffmpeg process is killed after this many ms (503)
    #[arg(long, env, value_parser = millis, default_value_t = 120_000)]
    pub media_conversion_timeout_ms: u64,
    /// Cap on a converted result in bytes
    #[arg(long, env, value_parser = bytes, default_value_t = 64 * 1024 * 1024)]
    pub media_conversion_max_output_bytes: u64,
    /// Inline base64 media an export may embed, in bytes, spent newest first
    #[arg(long, env, value_parser = bytes_or_zero, default_value_t = 8 * 1024 * 1024)]
    pub export_inline_media_budget_bytes: u64,
    /// How long an export archive is kept, ms
    #[arg(long, env, value_parser = millis, default_value_t = 3_600_000)]
    pub storage_export_ttl_ms: u64,
}

/// Where media objects live.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum StorageType {
    /// Files under `DATA_DIR/media` (one node).
    Local,
    /// A bucket every node of a cluster shares.
    S3,
}

#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "Media storage")]
pub struct StorageKnobs {
    /// local: objects under DATA_DIR/media (one node); s3: a bucket every node of a cluster shares
    #[arg(long, env, value_enum, default_value_t = StorageType::Local)]
    pub storage_type: StorageType,
    /// The bucket (required with STORAGE_TYPE=s3)
    #[arg(long, env)]
    pub s3_bucket: Option<String>,
    /// The bucket's region (S3-compatible servers mostly ignore it)
    #[arg(long, env, default_value = "us-east-1")]
    pub s3_region: String,
    /// An S3-compatible server such as http://minio:9000; unset for AWS itself
    #[arg(long, env, value_parser = http_url)]
    pub s3_endpoint: Option<String>,
    /// Address objects as {endpoint}/{bucket}/{key} (most S3-compatible servers need it)
    #[arg(long, env, action = ArgAction::Set, value_parser = boolean, default_value_t = false)]
    pub s3_force_path_style: bool,
    /// S3 credentials; unset, the AWS default chain is used (web identity, container or instance role)
    #[arg(long, env)]
    pub aws_access_key_id: Option<String>,
    /// Required when AWS_ACCESS_KEY_ID is set
    #[arg(long, env)]
    pub aws_secret_access_key: Option<String>,
    /// Temporary credentials' session token
    #[arg(long, env)]
    pub aws_session_token: Option<String>,
}

/// The media backend the storage knobs select, checked as a whole.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StorageConfig {
    Local,
    S3(Box<S3Config>),
}

/// The bucket settings of `STORAGE_TYPE=s3`.
#[derive(Clone, PartialEq, Eq)]
pub struct S3Config {
    pub bucket: String,
    pub region: String,
    /// An S3-compatible server; `None` for AWS itself.
    pub endpoint: Option<url::Url>,
    /// `{endpoint}/{bucket}/{key}` instead of `{bucket}.{host}/{key}`.
    pub force_path_style: bool,
    pub access_key_id: Option<String>,
    pub secret_access_key: Option<String>,
    pub session_token: Option<String>,
}

impl std::fmt::Debug for S3Config {
    // Keeps the secret and the token out of logs and panics.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("S3Config")
            .field("bucket", &self.bucket)
            .field("region", &self.region)
            .field("endpoint", &self.endpoint.as_ref().map(url::Url::as_str))
            .field("force_path_style", &self.force_path_style)
            .field("access_key_id", &self.access_key_id)
            .finish_non_exhaustive()
    }
}

impl StorageKnobs {
    /// The backend, or the one rule the knobs break together: s3 needs a bucket (a valid bucket name)
    /// and a secret key with an access key id.
    pub fn settings(&self) -> Result<StorageConfig, ConfigError> {
        if self.storage_type == StorageType::Local {
            return Ok(StorageConfig::Local);
        }
        let bucket = self
            .s3_bucket
            .clone()
            .ok_or_else(|| refuse("S3_BUCKET", "is required when STORAGE_TYPE=s3"))?;
        let valid_name = (3..=63).contains(&bucket.len())
            && bucket
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'.' || b == b'-')
            && !bucket.starts_with(['.', '-'])
            && !bucket.ends_with(['.', '-']);
        if !valid_name {
            return Err(refuse(
                "S3_BUCKET",
                format!(
                    "must be 3 to 63 lower-case letters, digits, dots or hyphens (got '{bucket}')"
                ),
            ));
        }
        let endpoint = match &self.s3_endpoint {
            None => None,
            Some(raw) => Some(
                url::Url::parse(raw)
                    .ok()
                    .filter(url::Url::has_host)
                    .ok_or_else(|| {
                        refuse(
                            "S3_ENDPOINT",
                            format!("must be an http:// or https:// URL (got '{raw}')"),
                        )
                    })?,
            ),
        };
        if self.aws_access_key_id.is_some() != self.aws_secret_access_key.is_some() {
            return Err(refuse(
                "AWS_SECRET_ACCESS_KEY",
                "and AWS_ACCESS_KEY_ID must be set together",
            ));
        }
        Ok(StorageConfig::S3(Box::new(S3Config {
            bucket,
            region: self.s3_region.clone(),
            endpoint,
            force_path_style: self.s3_force_path_style,
            access_key_id: self.aws_access_key_id.clone(),
            secret_access_key: self.aws_secret_access_key.clone(),
            session_token: self.aws_session_token.clone(),
        })))
    }
}

#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "Send pacing")]
pub struct PacingKnobs {
    /// Opt-in send pacing governor (429 SEND_PACING_LIMITED with retryAfterSeconds)
    #[arg(long, env, action = ArgAction::Set, value_parser = boolean, default_value_t = false)]
    pub send_pacing_enabled: bool,
    /// Sends per session per rolling 24 h once warmed up
    #[arg(long, env, value_parser = count, default_value_t = 1_000)]
    pub send_pacing_daily_cap: u64,
    /// Days a new session ramps from SEND_PACING_WARMUP_START to the daily cap (0: no ramp)
    #[arg(long, env, value_parser = days_or_zero, default_value_t = 7)]
    pub send_pacing_warmup_days: u64,
    /// Sends allowed on a session's first day
    #[arg(long, env, value_parser = count, default_value_t = 50)]
    pub send_pacing_warmup_start: u64,
    /// Sends to chats with no stored history per rolling 24 h
    #[arg(long, env, value_parser = count_or_zero, default_value_t = 100)]
    pub send_pacing_cold_daily: u64,
    /// Consecutive network send failures that open the 15-minute breaker
    #[arg(long, env, value_parser = count, default_value_t = 5)]
    pub send_pacing_breaker_failures: u64,
}

#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "Cluster")]
pub struct ClusterKnobs {
    /// How peers reach this node: an http:// or https:// URL with a host (default http://127.0.0.1:API_PORT)
    #[arg(long, env, value_parser = http_url)]
    pub node_url: Option<String>,
    /// Prefix of every Redis key the cluster writes (leases, node registry, rate limits)
    #[arg(long, env, default_value = "wagate:")]
    pub redis_key_prefix: String,
    /// At least 16 printable characters, the same on every node; required with MAIN_DB_REPLICATION=raft, a Redis cluster without it shares a generated one
    #[arg(long, env)]
    pub cluster_secret: Option<String>,
    /// How long a node's lease on a session (and its entry in the node registry) lives in Redis unrenewed, ms; after it the takeover sweep of another node may run the session
    #[arg(long, env, value_parser = millis, default_value_t = 15_000)]
    pub session_lease_ttl_ms: u64,
    /// Must be less than half of SESSION_LEASE_TTL_MS
    #[arg(long, env, value_parser = millis, default_value_t = 5_000)]
    pub session_lease_heartbeat_ms: u64,
    /// Milliseconds between sweeps, on every node, that start sessions which should run but whose lease nobody holds
    #[arg(long, env, value_parser = millis, default_value_t = 5_000)]
    pub session_takeover_sweep_ms: u64,
    /// Forward-to-owner timeout, ms (504 after it)
    #[arg(long, env, value_parser = millis, default_value_t = 60_000)]
    pub session_proxy_timeout_ms: u64,
    /// How long a request for a session that a stopping or draining node hands to a peer waits for the new
    /// owner, ms (0-60000; 0: answered at once)
    #[arg(long, env, value_parser = handover_wait, default_value_t = 5_000)]
    pub session_handover_wait_ms: u64,
    /// none: one SQLite main DB per node; raft: replicated across the API nodes
    #[arg(long, env, value_enum, default_value_t = MainDbReplication::None)]
    pub main_db_replication: MainDbReplication,
    /// Node ids of the fixed raft voters, comma-separated (3 or 5; required with raft)
    #[arg(long, env)]
    pub raft_voters: Option<NameList>,
    /// How often the raft leader sends heartbeats to the other replicas, ms
    #[arg(long, env, value_parser = millis, default_value_t = 100)]
    pub raft_heartbeat_ms: u64,
    /// The shortest time a follower waits without hearing a leader before it starts an election, ms; must be more than twice RAFT_HEARTBEAT_MS
    #[arg(long, env, value_parser = millis, default_value_t = 500)]
    pub raft_election_timeout_min_ms: u64,
    /// A follower that hears no leader for a random time between RAFT_ELECTION_TIMEOUT_MIN_MS and this starts an election, ms; must be greater than the minimum
    #[arg(long, env, value_parser = millis, default_value_t = 800)]
    pub raft_election_timeout_max_ms: u64,
    /// Log entries since the last snapshot that trigger a new one
    #[arg(long, env, value_parser = count, default_value_t = 5_000)]
    pub raft_snapshot_logs: u64,
    /// How long a write waits for a commit before the caller gets 503, ms
    #[arg(long, env, value_parser = millis, default_value_t = 5_000)]
    pub raft_write_timeout_ms: u64,
}

/// Switches of `wagate-loadtest` scenarios: each measures a baseline by turning one part of the node off,
/// so none is a product setting.
#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "Benchmarks only (not settings)")]
pub struct BenchKnobs {
    /// Benchmark only: acknowledge received traffic to the network as it arrives instead of after its commit, to measure what that ordering costs
    #[arg(long, env, action = ArgAction::Set, value_parser = boolean, default_value_t = false)]
    pub wagate_bench_ack_on_receipt: bool,
    /// Benchmark only: with REDIS_ENABLED=true, count the rate limit in this process instead of in Redis, to compare the two limiters
    #[arg(long, env, action = ArgAction::Set, value_parser = boolean, default_value_t = false)]
    pub wagate_bench_local_limiter: bool,
}

/// Everything `wagate` reads.
#[derive(Debug, Clone, Parser)]
#[command(
    name = "wagate",
    version,
    about = "wagate API node. Every option is an environment variable (shown in brackets); a .env file in the working directory is read too, and real environment variables win."
)]
pub struct NodeCli {
    #[command(flatten)]
    pub server: ServerKnobs,
    #[command(flatten)]
    pub engine: EngineKnobs,
    #[command(flatten)]
    pub shared: SharedKnobs,
    #[command(flatten)]
    pub limits: LimitKnobs,
    #[command(flatten)]
    pub media: MediaKnobs,
    #[command(flatten)]
    pub storage: StorageKnobs,
    #[command(flatten)]
    pub pacing: PacingKnobs,
    #[command(flatten)]
    pub cluster: ClusterKnobs,
    #[command(flatten)]
    pub bench: BenchKnobs,
}

/// Everything `wagate-worker` reads.
#[derive(Debug, Clone, Parser)]
#[command(
    name = "wagate-worker",
    version,
    about = "wagate queue worker: webhook delivery and ingress. Every option is an environment variable (shown in brackets); a .env file in the working directory is read too, and real environment variables win."
)]
pub struct WorkerCli {
    #[command(flatten)]
    pub shared: SharedKnobs,
    #[command(flatten)]
    pub worker: WorkerKnobs,
}

#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "Worker")]
pub struct WorkerKnobs {
    /// Port of the worker's metrics scrape on BIND_HOST (served only with METRICS_TOKEN)
    #[arg(long, env, value_parser = port, default_value_t = DEFAULT_METRICS_PORT)]
    pub metrics_port: u16,
}
