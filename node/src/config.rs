//! Boot configuration: every knob is an environment variable with the spec's default, parsed and validated
//! once at start-up. A refusal names the variable and the rule in one line; nothing else reads the env.

use std::fmt;
use std::net::IpAddr;
use std::path::PathBuf;

use ipnet::IpNet;

use crate::config_parse::{Env, parse_bool, parse_byte_size, parse_i64, parse_u64};

/// `ENGINE_TYPE`: the engine API's one engine-kind enum.
pub use wagate_engine_api::EngineKind as EngineType;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DatabaseType {
    Sqlite,
    Postgres,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NodeEnv {
    Production,
    Development,
    Test,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NodeRole {
    All,
    Api,
    Worker,
}

/// How the main DB (API keys, audit log) is kept: `none` is one local SQLite file per node; `raft` makes it
/// one logical database replicated by openraft across the cluster's API nodes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MainDbReplication {
    None,
    Raft,
}

/// The `RAFT_*` knobs, read only with `MAIN_DB_REPLICATION=raft`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RaftSettings {
    /// `RAFT_VOTERS`: the node ids of the fixed voters (3 or 5); every other API node is a learner.
    pub voters: Vec<String>,
    /// `RAFT_HEARTBEAT_MS` (200): how often the leader sends heartbeats.
    pub heartbeat_ms: u64,
    /// `RAFT_ELECTION_TIMEOUT_MIN_MS` (1000) and `RAFT_ELECTION_TIMEOUT_MAX_MS` (2000): a follower that heard
    /// no leader for a random time in this range starts an election.
    pub election_timeout_min_ms: u64,
    pub election_timeout_max_ms: u64,
    /// `RAFT_SNAPSHOT_LOGS` (5000): log entries since the last snapshot that trigger a new one.
    pub snapshot_logs: u64,
    /// `RAFT_WRITE_TIMEOUT_MS` (5000): how long a write waits for a commit before the caller gets 503.
    pub write_timeout_ms: u64,
}

impl NodeRole {
    pub fn as_str(self) -> &'static str {
        match self {
            NodeRole::All => "all",
            NodeRole::Api => "api",
            NodeRole::Worker => "worker",
        }
    }
}

/// `OTEL_EXPORTER_OTLP_ENDPOINT`: the collector's base URL (http or https); empty is unset.
fn otel_endpoint(value: Option<String>) -> Result<Option<String>, ConfigError> {
    match value.filter(|v| !v.is_empty()) {
        None => Ok(None),
        Some(v) => match url::Url::parse(&v) {
            Ok(u) if matches!(u.scheme(), "http" | "https") => Ok(Some(v)),
            _ => Err(refuse(
                "OTEL_EXPORTER_OTLP_ENDPOINT",
                format!("must be an http:// or https:// URL (got '{v}')"),
            )),
        },
    }
}

/// One rate-limit tier: at most `limit` requests per `ttl_ms` per client address.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RateTier {
    pub ttl_ms: u64,
    pub limit: u64,
}

#[derive(Debug, Clone)]
pub struct Config {
    pub api_port: u16,
    pub bind_host: String,
    pub data_dir: PathBuf,
    pub node_env: NodeEnv,
    pub log_level: String,
    pub log_json: bool,
    pub engine_type: EngineType,
    pub database_type: DatabaseType,
    pub database_url: String,
    pub redis_enabled: bool,
    pub redis_url: String,
    /// Prefix of every Redis key this node writes (leases, registry); lets clusters share one Redis.
    pub redis_key_prefix: String,
    /// `MAIN_DB_REPLICATION` (`none`).
    pub main_db_replication: MainDbReplication,
    pub raft: RaftSettings,
    pub api_master_key: Option<String>,
    /// `CLUSTER_SECRET`: what nodes of one cluster present to each other (a forwarded request, so the owner
    /// believes its word about the client address and does not count it again; raft traffic). Required with
    /// `MAIN_DB_REPLICATION=raft`; a Redis cluster without it shares one generated at boot through Redis.
    pub cluster_secret: Option<String>,
    /// `TRUSTED_PROXIES` (empty): the peers whose `X-Forwarded-For` / `Forwarded` headers are read.
    pub trusted_proxies: Vec<IpNet>,
    pub rate_tiers: [RateTier; 3],
    pub body_size_limit: u64,
    pub media_download_max_bytes: u64,
    pub media_conversion_max_output_bytes: u64,
    pub export_inline_media_budget_bytes: u64,
    pub storage_export_ttl_ms: u64,
    /// `MEDIA_CONVERSION_ENABLED` (true): false makes the conversion routes answer 503.
    pub media_conversion_enabled: bool,
    /// `FFMPEG_PATH` (`ffmpeg`, looked up on `PATH`): the conversion binary.
    pub ffmpeg_path: String,
    /// `MEDIA_CONVERSION_CONCURRENCY` (2): conversions running at once.
    pub media_conversion_concurrency: u64,
    /// `MEDIA_CONVERSION_QUEUE` (8): conversions that may wait for a slot; more are refused (503).
    pub media_conversion_queue: u64,
    /// `MEDIA_CONVERSION_TIMEOUT_MS` (120000): a conversion's child process is killed after it.
    pub media_conversion_timeout_ms: u64,
    pub webhook_timeout_ms: u64,
    pub webhook_retry_delay_ms: u64,
    pub webhook_max_payload_bytes: u64,
    pub webhook_dispatch_concurrency: u64,
    pub webhook_ssrf_protect: bool,
    pub webhook_ssrf_redirects: bool,
    pub audit_retention_days: i64,
    pub browser_protocol_timeout_ms: u64,
    pub main_database_synchronize: bool,
    pub auto_start_sessions: bool,
    pub session_restore_concurrency: u64,
    pub session_start_timeout_ms: u64,
    /// `ENGINE_QUERY_TIMEOUT_MS` (30000): the budget of the engine queries the API bounds (503 after it).
    pub engine_query_timeout_ms: u64,
    /// `SOCKET_WS_URL` (WhatsApp Web's `wss://web.whatsapp.com/ws/chat`): the socket engine's endpoint.
    pub socket_ws_url: wagate_engine_socket::transport::Endpoint,
    pub session_proxy_url_fetch: bool,
    pub send_pacing_enabled: bool,
    /// `SEND_PACING_DAILY_CAP` (1000): sends per session per rolling 24 h once warmed up.
    pub send_pacing_daily_cap: u64,
    /// `SEND_PACING_WARMUP_DAYS` (7): days a new session ramps up to the daily cap.
    pub send_pacing_warmup_days: u64,
    /// `SEND_PACING_WARMUP_START` (50): sends allowed on a session's first day.
    pub send_pacing_warmup_start: u64,
    /// `SEND_PACING_COLD_DAILY` (100): first-contact sends per session per rolling 24 h.
    pub send_pacing_cold_daily: u64,
    /// `SEND_PACING_BREAKER_FAILURES` (5): consecutive network failures that open the 15-minute breaker.
    pub send_pacing_breaker_failures: u64,
    /// `MEDIA_URL_GUARD` (true): media URL fetches refuse loopback, private, link-local and metadata
    /// addresses. Turn off only for tests serving media from loopback.
    pub media_url_guard: bool,
    pub metrics_token: Option<String>,
    /// `DOCS_PUBLIC` (false): serve `/api/docs/openapi.json` without an API key.
    pub docs_public: bool,
    pub otel_endpoint: Option<String>,
    pub node_id: String,
    pub node_url: String,
    pub session_lease_ttl_ms: u64,
    pub session_lease_heartbeat_ms: u64,
    pub session_takeover_sweep_ms: u64,
    pub session_proxy_timeout_ms: u64,
    pub role: NodeRole,
    /// `WS_REVALIDATE_MS`: how often live WebSocket keys are checked again (default 60000).
    pub ws_revalidate_ms: u64,
    /// `OUTBOX_RECONCILE_MS`: how often the outbox reconciler sweeps (default 30000).
    pub outbox_reconcile_ms: u64,
    /// `OUTBOX_STALE_MS`: how long a due outbox row may sit untouched before it is re-enqueued (default 60000).
    pub outbox_stale_ms: u64,
    /// `QUEUE_PREFIX`: prepended to the queue names (`webhook-queue`, `ingress-queue`); default empty.
    pub queue_prefix: String,
}

/// Why boot refuses: the variable and the rule it broke.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError {
    pub var: &'static str,
    pub rule: String,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "invalid configuration: {} {}", self.var, self.rule)
    }
}

impl std::error::Error for ConfigError {}

pub(crate) fn refuse(var: &'static str, rule: impl Into<String>) -> ConfigError {
    ConfigError {
        var,
        rule: rule.into(),
    }
}

const MAX_TIMEOUT_MS: u64 = 2_147_483_647;
const MIN_CLUSTER_SECRET_CHARS: usize = 16;

impl Config {
    /// Reads the process environment.
    pub fn from_env() -> Result<Config, ConfigError> {
        Self::from_lookup(|k| std::env::var(k).ok())
    }

    /// Reads from any lookup, so tests can pass a map instead of mutating the process env.
    pub fn from_lookup(
        lookup: impl Fn(&str) -> Option<String> + 'static,
    ) -> Result<Config, ConfigError> {
        let env = Env::new(lookup);
        let data_dir = PathBuf::from(env.string("DATA_DIR", "./data"));
        let database_type = match env.string("DATABASE_TYPE", "sqlite").as_str() {
            "sqlite" => DatabaseType::Sqlite,
            "postgres" | "postgresql" => DatabaseType::Postgres,
            other => {
                return Err(refuse(
                    "DATABASE_TYPE",
                    format!("must be sqlite or postgres (got '{other}')"),
                ));
            }
        };
        let database_url = match (env.get("DATABASE_URL"), database_type) {
            (Some(url), _) => url,
            (None, DatabaseType::Sqlite) => data_dir.join("wagate.sqlite").display().to_string(),
            (None, DatabaseType::Postgres) => {
                return Err(refuse(
                    "DATABASE_URL",
                    "is required when DATABASE_TYPE=postgres",
                ));
            }
        };
        let node_env = match env.string("NODE_ENV", "development").as_str() {
            "production" => NodeEnv::Production,
            "development" => NodeEnv::Development,
            "test" => NodeEnv::Test,
            other => {
                return Err(refuse(
                    "NODE_ENV",
                    format!("must be production, development or test (got '{other}')"),
                ));
            }
        };
        let api_master_key = env.get("API_MASTER_KEY");
        if let (NodeEnv::Production, Some(key)) = (node_env, &api_master_key)
            && key.chars().count() < 32
        {
            return Err(refuse(
                "API_MASTER_KEY",
                "must be at least 32 characters in production",
            ));
        }
        let node_id = env.get("NODE_ID").unwrap_or_else(default_node_id);
        let api_port = parse_u64(&env, "API_PORT", 2785)?;
        let api_port = u16::try_from(api_port)
            .ok()
            .filter(|p| *p > 0)
            .ok_or_else(|| refuse("API_PORT", "must be a port number between 1 and 65535"))?;
        let config = Config {
            api_port,
            bind_host: env.string("BIND_HOST", "0.0.0.0"),
            node_url: env
                .get("NODE_URL")
                .unwrap_or_else(|| format!("http://127.0.0.1:{api_port}")),
            node_id,
            data_dir,
            node_env,
            log_level: parse_log_level(&env)?,
            log_json: match env.string("LOG_FORMAT", "text").as_str() {
                "text" => false,
                "json" => true,
                other => {
                    return Err(refuse(
                        "LOG_FORMAT",
                        format!("must be text or json (got '{other}')"),
                    ));
                }
            },
            engine_type: parse_engine_type(&env)?,
            database_type,
            database_url,
            redis_enabled: parse_bool(&env, "REDIS_ENABLED", false)?,
            redis_url: env.string("REDIS_URL", "redis://127.0.0.1:6379"),
            redis_key_prefix: env.string("REDIS_KEY_PREFIX", "wagate:"),
            main_db_replication: match env.string("MAIN_DB_REPLICATION", "none").as_str() {
                "none" => MainDbReplication::None,
                "raft" => MainDbReplication::Raft,
                other => {
                    return Err(refuse(
                        "MAIN_DB_REPLICATION",
                        format!("must be none or raft (got '{other}')"),
                    ));
                }
            },
            raft: parse_raft(&env)?,
            api_master_key,
            cluster_secret: env.get("CLUSTER_SECRET"),
            trusted_proxies: parse_trusted_proxies(&env)?,
            rate_tiers: parse_rate_tiers(&env)?,
            body_size_limit: parse_byte_size(&env, "BODY_SIZE_LIMIT", 25 * 1024 * 1024)?,
            media_download_max_bytes: positive(&env, "MEDIA_DOWNLOAD_MAX_BYTES", 50 * 1024 * 1024)?,
            media_conversion_max_output_bytes: positive(
                &env,
                "MEDIA_CONVERSION_MAX_OUTPUT_BYTES",
                64 * 1024 * 1024,
            )?,
            export_inline_media_budget_bytes: parse_u64(
                &env,
                "EXPORT_INLINE_MEDIA_BUDGET_BYTES",
                8 * 1024 * 1024,
            )?,
            storage_export_ttl_ms: positive(&env, "STORAGE_EXPORT_TTL_MS", 3_600_000)?,
            media_conversion_enabled: parse_bool(&env, "MEDIA_CONVERSION_ENABLED", true)?,
            ffmpeg_path: env.string("FFMPEG_PATH", "ffmpeg"),
            media_conversion_concurrency: positive(&env, "MEDIA_CONVERSION_CONCURRENCY", 2)?,
            media_conversion_queue: parse_u64(&env, "MEDIA_CONVERSION_QUEUE", 8)?,
            media_conversion_timeout_ms: positive(&env, "MEDIA_CONVERSION_TIMEOUT_MS", 120_000)?,
            webhook_timeout_ms: positive(&env, "WEBHOOK_TIMEOUT", 10_000)?,
            webhook_retry_delay_ms: parse_u64(&env, "WEBHOOK_RETRY_DELAY", 5_000)?,
            webhook_max_payload_bytes: positive(&env, "WEBHOOK_MAX_PAYLOAD_BYTES", 1024 * 1024)?,
            webhook_dispatch_concurrency: positive(
                &env,
                "WEBHOOK_DISPATCH_CONCURRENCY",
                wagate_workers::webhook::DEFAULT_DISPATCH_CONCURRENCY as u64,
            )?,
            webhook_ssrf_protect: parse_bool(&env, "WEBHOOK_SSRF_PROTECT", true)?,
            webhook_ssrf_redirects: parse_bool(&env, "WEBHOOK_SSRF_REDIRECTS", false)?,
            audit_retention_days: parse_i64(&env, "AUDIT_RETENTION_DAYS", 90)?,
            browser_protocol_timeout_ms: parse_browser_timeout(&env)?,
            main_database_synchronize: parse_bool(&env, "MAIN_DATABASE_SYNCHRONIZE", true)?,
            auto_start_sessions: parse_bool(&env, "AUTO_START_SESSIONS", true)?,
            session_restore_concurrency: positive(&env, "SESSION_RESTORE_CONCURRENCY", 5)?,
            session_start_timeout_ms: positive(&env, "SESSION_START_TIMEOUT_MS", 30_000)?,
            engine_query_timeout_ms: positive(&env, "ENGINE_QUERY_TIMEOUT_MS", 30_000)?,
            socket_ws_url: wagate_engine_socket::transport::Endpoint::parse(&env.string(
                "SOCKET_WS_URL",
                wagate_engine_socket::transport::DEFAULT_WS_URL,
            ))
            .map_err(|rule| refuse("SOCKET_WS_URL", rule))?,
            session_proxy_url_fetch: parse_bool(&env, "SESSION_PROXY_URL_FETCH", true)?,
            send_pacing_enabled: parse_bool(&env, "SEND_PACING_ENABLED", false)?,
            send_pacing_daily_cap: positive(&env, "SEND_PACING_DAILY_CAP", 1000)?,
            send_pacing_warmup_days: parse_u64(&env, "SEND_PACING_WARMUP_DAYS", 7)?,
            send_pacing_warmup_start: positive(&env, "SEND_PACING_WARMUP_START", 50)?,
            send_pacing_cold_daily: parse_u64(&env, "SEND_PACING_COLD_DAILY", 100)?,
            send_pacing_breaker_failures: positive(&env, "SEND_PACING_BREAKER_FAILURES", 5)?,
            media_url_guard: parse_bool(&env, "MEDIA_URL_GUARD", true)?,
            metrics_token: env.get("METRICS_TOKEN"),
            docs_public: parse_bool(&env, "DOCS_PUBLIC", false)?,
            otel_endpoint: otel_endpoint(env.get("OTEL_EXPORTER_OTLP_ENDPOINT"))?,
            session_lease_ttl_ms: positive(&env, "SESSION_LEASE_TTL_MS", 15_000)?,
            session_lease_heartbeat_ms: positive(&env, "SESSION_LEASE_HEARTBEAT_MS", 5_000)?,
            session_takeover_sweep_ms: positive(&env, "SESSION_TAKEOVER_SWEEP_MS", 5_000)?,
            session_proxy_timeout_ms: positive(&env, "SESSION_PROXY_TIMEOUT_MS", 60_000)?,
            role: match env.string("ROLE", "all").as_str() {
                "all" => NodeRole::All,
                "api" => NodeRole::Api,
                "worker" => NodeRole::Worker,
                other => {
                    return Err(refuse(
                        "ROLE",
                        format!("must be all, api or worker (got '{other}')"),
                    ));
                }
            },
            ws_revalidate_ms: positive(&env, "WS_REVALIDATE_MS", 60_000)?,
            outbox_reconcile_ms: positive(&env, "OUTBOX_RECONCILE_MS", 30_000)?,
            outbox_stale_ms: parse_u64(&env, "OUTBOX_STALE_MS", 60_000)?,
            queue_prefix: env.string("QUEUE_PREFIX", ""),
        };
        config.check_lease_timing()?;
        config.check_cluster_trust()?;
        Ok(config)
    }

    fn check_lease_timing(&self) -> Result<(), ConfigError> {
        if 2 * self.session_lease_heartbeat_ms >= self.session_lease_ttl_ms {
            return Err(refuse(
                "SESSION_LEASE_HEARTBEAT_MS",
                "must be less than half of SESSION_LEASE_TTL_MS",
            ));
        }
        Ok(())
    }

    /// A cluster needs a secret its nodes prove peer requests with (forwarded client addresses, raft).
    /// `CLUSTER_SECRET` sets it; a Redis cluster without one shares a generated secret through Redis
    /// (`boot::shared_cluster_secret`), which no client can read. Raft needs it set explicitly, the registry
    /// (peer URLs) and an odd set of voters.
    fn check_cluster_trust(&self) -> Result<(), ConfigError> {
        let is_raft = self.main_db_replication == MainDbReplication::Raft;
        if let Some(secret) = &self.cluster_secret {
            if secret.len() < MIN_CLUSTER_SECRET_CHARS
                || !secret.bytes().all(|b| b.is_ascii_graphic())
            {
                return Err(refuse(
                    "CLUSTER_SECRET",
                    format!(
                        "must be at least {MIN_CLUSTER_SECRET_CHARS} printable ASCII characters without spaces"
                    ),
                ));
            }
        } else if is_raft {
            return Err(refuse(
                "CLUSTER_SECRET",
                "is required when MAIN_DB_REPLICATION=raft",
            ));
        }
        if !is_raft {
            return Ok(());
        }
        if !self.redis_enabled {
            return Err(refuse(
                "MAIN_DB_REPLICATION",
                "raft needs REDIS_ENABLED=true (the node registry gives the peers' URLs)",
            ));
        }
        match self.raft.voters.len() {
            3 | 5 => Ok(()),
            0 => Err(refuse(
                "RAFT_VOTERS",
                "is required when MAIN_DB_REPLICATION=raft (3 or 5 node ids)",
            )),
            n if n % 2 == 0 => Err(refuse(
                "RAFT_VOTERS",
                format!("must name an odd number of voters, 3 or 5 (got {n})"),
            )),
            n => Err(refuse(
                "RAFT_VOTERS",
                format!("must name 3 or 5 voters (got {n})"),
            )),
        }
    }

    pub fn is_raft(&self) -> bool {
        self.main_db_replication == MainDbReplication::Raft
    }

    /// The raft log, vote and spool file.
    pub fn raft_db_path(&self) -> PathBuf {
        self.data_dir.join("raft.sqlite")
    }

    pub fn main_db_path(&self) -> PathBuf {
        self.data_dir.join("main.sqlite")
    }

    pub fn queue_db_path(&self) -> PathBuf {
        self.data_dir.join("queue.sqlite")
    }

    /// The `WEBHOOK_*` knobs in the workers crate's shape.
    pub fn webhook_settings(&self) -> wagate_workers::WebhookSettings {
        wagate_workers::WebhookSettings {
            timeout_ms: self.webhook_timeout_ms,
            retry_delay_ms: self.webhook_retry_delay_ms,
            max_payload_bytes: usize::try_from(self.webhook_max_payload_bytes)
                .unwrap_or(usize::MAX),
            dispatch_concurrency: usize::try_from(self.webhook_dispatch_concurrency)
                .unwrap_or(usize::MAX),
            is_ssrf_protected: self.webhook_ssrf_protect,
            is_redirect_followed: self.webhook_ssrf_redirects,
        }
    }

    /// Where the queues live: Redis with `REDIS_ENABLED=true`, else `DATA_DIR/queue.sqlite`.
    pub fn queue_config(&self) -> wagate_workers::QueueConfig {
        let backend = if self.redis_enabled {
            wagate_workers::QueueBackend::Redis {
                url: self.redis_url.clone(),
            }
        } else {
            wagate_workers::QueueBackend::Sqlite {
                path: self.queue_db_path(),
            }
        };
        wagate_workers::QueueConfig::new(backend).with_prefix(&self.queue_prefix)
    }

    pub fn is_production(&self) -> bool {
        self.node_env == NodeEnv::Production
    }
}

fn positive(env: &Env, var: &'static str, default: u64) -> Result<u64, ConfigError> {
    let value = parse_u64(env, var, default)?;
    if value == 0 {
        return Err(refuse(var, "must be a positive integer (0 is refused)"));
    }
    Ok(value)
}

fn parse_raft(env: &Env) -> Result<RaftSettings, ConfigError> {
    let mut voters: Vec<String> = Vec::new();
    for id in env.string("RAFT_VOTERS", "").split(',') {
        let id = id.trim();
        if id.is_empty() {
            continue;
        }
        if voters.iter().any(|v| v == id) {
            return Err(refuse("RAFT_VOTERS", format!("names '{id}' twice")));
        }
        voters.push(id.to_string());
    }
    let settings = RaftSettings {
        voters,
        heartbeat_ms: positive(env, "RAFT_HEARTBEAT_MS", 200)?,
        election_timeout_min_ms: positive(env, "RAFT_ELECTION_TIMEOUT_MIN_MS", 1_000)?,
        election_timeout_max_ms: positive(env, "RAFT_ELECTION_TIMEOUT_MAX_MS", 2_000)?,
        snapshot_logs: positive(env, "RAFT_SNAPSHOT_LOGS", 5_000)?,
        write_timeout_ms: positive(env, "RAFT_WRITE_TIMEOUT_MS", 5_000)?,
    };
    if settings.election_timeout_min_ms <= 2 * settings.heartbeat_ms {
        return Err(refuse(
            "RAFT_ELECTION_TIMEOUT_MIN_MS",
            "must be more than twice RAFT_HEARTBEAT_MS",
        ));
    }
    if settings.election_timeout_max_ms <= settings.election_timeout_min_ms {
        return Err(refuse(
            "RAFT_ELECTION_TIMEOUT_MAX_MS",
            "must be greater than RAFT_ELECTION_TIMEOUT_MIN_MS",
        ));
    }
    Ok(settings)
}

fn parse_log_level(env: &Env) -> Result<String, ConfigError> {
    let level = env.string("LOG_LEVEL", "info");
    match level.as_str() {
        "error" | "warn" | "info" | "debug" | "verbose" => Ok(level),
        other => Err(refuse(
            "LOG_LEVEL",
            format!("must be error, warn, info, debug or verbose (got '{other}')"),
        )),
    }
}

fn parse_engine_type(env: &Env) -> Result<EngineType, ConfigError> {
    match env.string("ENGINE_TYPE", "browser").as_str() {
        "browser" => Ok(EngineType::Browser),
        "socket" => Ok(EngineType::Socket),
        "sim" => Ok(EngineType::Sim),
        other => Err(refuse(
            "ENGINE_TYPE",
            format!("must be browser, socket or sim (got '{other}')"),
        )),
    }
}

fn parse_browser_timeout(env: &Env) -> Result<u64, ConfigError> {
    let value = parse_u64(env, "BROWSER_PROTOCOL_TIMEOUT_MS", 180_000)?;
    if value == 0 || value > MAX_TIMEOUT_MS {
        return Err(refuse(
            "BROWSER_PROTOCOL_TIMEOUT_MS",
            format!("must be between 1 and {MAX_TIMEOUT_MS}"),
        ));
    }
    Ok(value)
}

/// Comma-separated addresses and CIDR ranges; an address is a range of one. Empty entries are skipped.
fn parse_trusted_proxies(env: &Env) -> Result<Vec<IpNet>, ConfigError> {
    let Some(raw) = env.get("TRUSTED_PROXIES") else {
        return Ok(Vec::new());
    };
    raw.split(',')
        .map(str::trim)
        .filter(|entry| !entry.is_empty())
        .map(|entry| {
            entry
                .parse::<IpNet>()
                .or_else(|_| entry.parse::<IpAddr>().map(IpNet::from))
                .map_err(|_| {
                    refuse(
                        "TRUSTED_PROXIES",
                        format!("entry '{entry}' is not an IP address or CIDR range"),
                    )
                })
        })
        .collect()
}

fn parse_rate_tiers(env: &Env) -> Result<[RateTier; 3], ConfigError> {
    Ok([
        RateTier {
            ttl_ms: positive(env, "RATE_LIMIT_SHORT_TTL", 1_000)?,
            limit: positive(env, "RATE_LIMIT_SHORT_LIMIT", 10)?,
        },
        RateTier {
            ttl_ms: positive(env, "RATE_LIMIT_MEDIUM_TTL", 60_000)?,
            limit: positive(env, "RATE_LIMIT_MEDIUM_LIMIT", 100)?,
        },
        RateTier {
            ttl_ms: positive(env, "RATE_LIMIT_LONG_TTL", 3_600_000)?,
            limit: positive(env, "RATE_LIMIT_LONG_LIMIT", 1_000)?,
        },
    ])
}

fn default_node_id() -> String {
    std::fs::read_to_string("/etc/hostname")
        .ok()
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
        .or_else(|| std::env::var("HOSTNAME").ok())
        .unwrap_or_else(|| "wagate-node".to_string())
}

#[cfg(test)]
mod tests;
