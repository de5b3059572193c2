//! Boot configuration of the node: the knobs defined in `wagate-config` (shared with `wagate-worker`), read
//! once at start-up into [`Config`], plus the rules that tie several knobs together. A refusal names the
//! variable and the rule in one line; nothing else reads the environment.

use std::ffi::OsString;
use std::path::PathBuf;

use ipnet::IpNet;
pub use wagate_config::{
    ConfigError, DatabaseType, EngineType, MainDbReplication, NodeEnv, NodeRole, S3Config, Source,
    Stop, StorageConfig,
};
use wagate_config::{NodeCli, refuse};

/// The `RAFT_*` knobs, read only with `MAIN_DB_REPLICATION=raft`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RaftSettings {
    /// `RAFT_VOTERS`: the node ids of the fixed voters (3 or 5); every other API node is a learner.
    pub voters: Vec<String>,
    /// `RAFT_HEARTBEAT_MS` (100): how often the leader sends heartbeats.
    pub heartbeat_ms: u64,
    /// `RAFT_ELECTION_TIMEOUT_MIN_MS` (500) and `RAFT_ELECTION_TIMEOUT_MAX_MS` (800): a follower that heard
    /// no leader for a random time in this range starts an election.
    pub election_timeout_min_ms: u64,
    pub election_timeout_max_ms: u64,
    /// `RAFT_SNAPSHOT_LOGS` (5000): log entries since the last snapshot that trigger a new one.
    pub snapshot_logs: u64,
    /// `RAFT_WRITE_TIMEOUT_MS` (5000): how long a write waits for a commit before the caller gets 503.
    pub write_timeout_ms: u64,
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
    /// `HTTP_HEADER_READ_TIMEOUT_MS` (75000): a connection that has not sent a whole request head in this
    /// time (an idle keep-alive connection included) is closed.
    pub http_header_read_timeout_ms: u64,
    /// `HTTP_BODY_READ_TIMEOUT_MS` (60000): a request body that sends nothing for this long while it is read
    /// answers 408.
    pub http_body_read_timeout_ms: u64,
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
    /// `CHROMIUM_PATH` (Debian's `/usr/lib/chromium/chromium`, else `/usr/bin/chromium`): the browser engine's binary.
    pub chromium_path: PathBuf,
    /// `BROWSER_WEB_URL` (`https://web.whatsapp.com/`): the page each browser session opens.
    pub browser_web_url: String,
    /// `BROWSER_WAJS_PATH` (the image's /usr/share/wagate/wa-js copy, else the pinned npm install under
    /// `node/engine-browser/js`): the wa-js bundle.
    pub browser_wajs_path: PathBuf,
    /// `BROWSER_MAX_RSS_MB` (1024; 0 = none): a session's process tree above it gets a fresh page.
    pub browser_max_rss_mb: u64,
    /// `BROWSER_LAUNCH_CONCURRENCY` (2): Chromium launches running at once.
    pub browser_launch_concurrency: u64,
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
    /// `STORAGE_TYPE` and, for s3, its bucket settings: where media objects live.
    pub storage: StorageConfig,
    pub metrics_token: Option<String>,
    /// `DOCS_PUBLIC` (false): serve `/api/docs/openapi.json` without an API key.
    pub docs_public: bool,
    pub otel_endpoint: Option<String>,
    /// `OTEL_TRACES_SAMPLER` (`parentbased_always_on`) and `OTEL_TRACES_SAMPLER_ARG` (1): which traces are
    /// exported.
    pub trace_sampling: wagate_workers::telemetry::TraceSampling,
    pub node_id: String,
    pub node_url: String,
    pub session_lease_ttl_ms: u64,
    pub session_lease_heartbeat_ms: u64,
    pub session_takeover_sweep_ms: u64,
    pub session_proxy_timeout_ms: u64,
    /// `SESSION_HANDOVER_WAIT_MS` (5000): how long a request for a session in planned handover waits for
    /// the new owner, and how long the old owner waits for it to confirm. 0: requests do not wait.
    pub session_handover_wait_ms: u64,
    pub role: NodeRole,
    /// `WS_REVALIDATE_MS`: how often live WebSocket keys are checked again (default 60000).
    pub ws_revalidate_ms: u64,
    /// `OUTBOX_RECONCILE_MS`: how often the outbox reconciler sweeps (default 30000).
    pub outbox_reconcile_ms: u64,
    /// `OUTBOX_STALE_MS`: how long a due outbox row may sit untouched before it is re-enqueued (default 60000).
    pub outbox_stale_ms: u64,
    /// `QUEUE_PREFIX`: prepended to the queue names (`webhook-queue`, `ingress-queue`); default empty.
    pub queue_prefix: String,
    /// `WAGATE_BENCH_ACK_ON_RECEIPT` (false): benchmark only, received traffic is acknowledged as it arrives.
    pub bench_ack_on_receipt: bool,
    /// `WAGATE_BENCH_LOCAL_LIMITER` (false): benchmark only, a Redis cluster node limits in process.
    pub bench_local_limiter: bool,
}

const MIN_CLUSTER_SECRET_CHARS: usize = 16;

impl Config {
    /// Reads the command line (`args`, program name first) and `source`; stops on `--help` or a bad value.
    pub fn load(
        args: impl IntoIterator<Item = impl Into<OsString> + Clone>,
        source: &Source,
    ) -> Result<Config, Stop> {
        let cli: NodeCli = wagate_config::load(args, source)?;
        Ok(Self::from_cli(cli)?)
    }

    /// Reads from any lookup, so tests can pass a map instead of mutating the process env.
    pub fn from_lookup(
        lookup: impl Fn(&str) -> Option<String> + 'static,
    ) -> Result<Config, ConfigError> {
        match Self::load(["wagate"], &Source::new(lookup)) {
            Ok(config) => Ok(config),
            Err(Stop::Refused(e)) => Err(e),
            Err(Stop::Show(_)) => Err(refuse("arguments", "asked for help")),
        }
    }

    fn from_cli(cli: NodeCli) -> Result<Config, ConfigError> {
        let NodeCli {
            server,
            engine,
            shared,
            limits,
            media,
            storage,
            pacing,
            cluster,
            bench,
        } = cli;
        let database_url = shared.database_url()?;
        if let (NodeEnv::Production, Some(key)) = (server.node_env, &server.api_master_key)
            && key.chars().count() < 32
        {
            return Err(refuse(
                "API_MASTER_KEY",
                "must be at least 32 characters in production",
            ));
        }
        let socket_ws_url = wagate_engine_socket::transport::Endpoint::parse(&engine.socket_ws_url)
            .map_err(|rule| refuse("SOCKET_WS_URL", rule))?;
        let raft = RaftSettings {
            voters: cluster.raft_voters.map(|v| v.0).unwrap_or_default(),
            heartbeat_ms: cluster.raft_heartbeat_ms,
            election_timeout_min_ms: cluster.raft_election_timeout_min_ms,
            election_timeout_max_ms: cluster.raft_election_timeout_max_ms,
            snapshot_logs: cluster.raft_snapshot_logs,
            write_timeout_ms: cluster.raft_write_timeout_ms,
        };
        raft.check_timing()?;
        let webhooks = &shared.webhooks;
        let config = Config {
            api_port: server.api_port,
            node_url: cluster
                .node_url
                .unwrap_or_else(|| format!("http://127.0.0.1:{}", server.api_port)),
            node_id: shared.node_id("wagate-node"),
            bind_host: shared.bind_host.clone(),
            data_dir: shared.data_dir.clone(),
            node_env: server.node_env,
            log_level: shared.log_level.as_str().to_owned(),
            log_json: shared.log_format == wagate_config::LogFormat::Json,
            engine_type: engine.engine_type,
            database_type: shared.database_type,
            database_url,
            redis_enabled: shared.redis_enabled,
            redis_url: shared.redis_url.clone(),
            redis_key_prefix: cluster.redis_key_prefix,
            main_db_replication: cluster.main_db_replication,
            raft,
            api_master_key: server.api_master_key,
            cluster_secret: cluster.cluster_secret,
            trusted_proxies: limits.trusted_proxies.map(|l| l.0).unwrap_or_default(),
            rate_tiers: [
                RateTier {
                    ttl_ms: limits.rate_limit_short_ttl,
                    limit: limits.rate_limit_short_limit,
                },
                RateTier {
                    ttl_ms: limits.rate_limit_medium_ttl,
                    limit: limits.rate_limit_medium_limit,
                },
                RateTier {
                    ttl_ms: limits.rate_limit_long_ttl,
                    limit: limits.rate_limit_long_limit,
                },
            ],
            body_size_limit: limits.body_size_limit,
            http_header_read_timeout_ms: limits.http_header_read_timeout_ms,
            http_body_read_timeout_ms: limits.http_body_read_timeout_ms,
            media_download_max_bytes: limits.media_download_max_bytes,
            media_conversion_max_output_bytes: media.media_conversion_max_output_bytes,
            export_inline_media_budget_bytes: media.export_inline_media_budget_bytes,
            storage_export_ttl_ms: media.storage_export_ttl_ms,
            media_conversion_enabled: media.media_conversion_enabled,
            ffmpeg_path: media.ffmpeg_path,
            media_conversion_concurrency: media.media_conversion_concurrency,
            media_conversion_queue: media.media_conversion_queue,
            media_conversion_timeout_ms: media.media_conversion_timeout_ms,
            webhook_timeout_ms: webhooks.webhook_timeout,
            webhook_retry_delay_ms: webhooks.webhook_retry_delay,
            webhook_max_payload_bytes: webhooks.webhook_max_payload_bytes,
            webhook_dispatch_concurrency: webhooks.webhook_dispatch_concurrency,
            webhook_ssrf_protect: webhooks.webhook_ssrf_protect,
            webhook_ssrf_redirects: webhooks.webhook_ssrf_redirects,
            audit_retention_days: server.audit_retention_days,
            browser_protocol_timeout_ms: engine.browser_protocol_timeout_ms,
            chromium_path: engine
                .chromium_path
                .clone()
                .unwrap_or_else(wagate_engine_browser::default_chromium_path),
            browser_web_url: engine.browser_web_url.clone(),
            browser_wajs_path: engine
                .browser_wajs_path
                .clone()
                .unwrap_or_else(wagate_engine_browser::default_bundle_path),
            browser_max_rss_mb: engine.browser_max_rss_mb,
            browser_launch_concurrency: engine.browser_launch_concurrency,
            main_database_synchronize: server.main_database_synchronize,
            auto_start_sessions: engine.auto_start_sessions,
            session_restore_concurrency: engine.session_restore_concurrency,
            session_start_timeout_ms: engine.session_start_timeout_ms,
            engine_query_timeout_ms: engine.engine_query_timeout_ms,
            socket_ws_url,
            session_proxy_url_fetch: engine.session_proxy_url_fetch,
            send_pacing_enabled: pacing.send_pacing_enabled,
            send_pacing_daily_cap: pacing.send_pacing_daily_cap,
            send_pacing_warmup_days: pacing.send_pacing_warmup_days,
            send_pacing_warmup_start: pacing.send_pacing_warmup_start,
            send_pacing_cold_daily: pacing.send_pacing_cold_daily,
            send_pacing_breaker_failures: pacing.send_pacing_breaker_failures,
            media_url_guard: limits.media_url_guard,
            storage: storage.settings()?,
            metrics_token: shared.metrics_token.clone(),
            docs_public: server.docs_public,
            otel_endpoint: shared.otel_exporter_otlp_endpoint.clone(),
            trace_sampling: wagate_workers::telemetry::TraceSampling::new(
                shared.otel_traces_sampler,
                shared.otel_traces_sampler_arg,
            ),
            session_lease_ttl_ms: cluster.session_lease_ttl_ms,
            session_lease_heartbeat_ms: cluster.session_lease_heartbeat_ms,
            session_takeover_sweep_ms: cluster.session_takeover_sweep_ms,
            session_proxy_timeout_ms: cluster.session_proxy_timeout_ms,
            session_handover_wait_ms: cluster.session_handover_wait_ms,
            role: server.role,
            ws_revalidate_ms: limits.ws_revalidate_ms,
            outbox_reconcile_ms: webhooks.outbox_reconcile_ms,
            outbox_stale_ms: webhooks.outbox_stale_ms,
            queue_prefix: shared.queue_prefix.clone(),
            bench_ack_on_receipt: bench.wagate_bench_ack_on_receipt,
            bench_local_limiter: bench.wagate_bench_local_limiter,
        };
        config.check_lease_timing()?;
        config.check_cluster_trust()?;
        Ok(config)
    }

    fn check_lease_timing(&self) -> Result<(), ConfigError> {
        if self.session_lease_heartbeat_ms.saturating_mul(2) >= self.session_lease_ttl_ms {
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
            claimer: self.node_id.clone(),
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
        let config = wagate_workers::QueueConfig::new(backend).with_prefix(&self.queue_prefix);
        // Embedded (`ROLE=all`, the SQLite file): no other process pushes to this node's queues, so its
        // workers wake on its own pushes instead of polling the file.
        match (self.redis_enabled, self.role) {
            (false, NodeRole::All) => config.pushed_by_this_process_only(),
            _ => config,
        }
    }

    pub fn is_production(&self) -> bool {
        self.node_env == NodeEnv::Production
    }
}

impl RaftSettings {
    fn check_timing(&self) -> Result<(), ConfigError> {
        if self.election_timeout_min_ms <= self.heartbeat_ms.saturating_mul(2) {
            return Err(refuse(
                "RAFT_ELECTION_TIMEOUT_MIN_MS",
                "must be more than twice RAFT_HEARTBEAT_MS",
            ));
        }
        if self.election_timeout_max_ms <= self.election_timeout_min_ms {
            return Err(refuse(
                "RAFT_ELECTION_TIMEOUT_MAX_MS",
                "must be greater than RAFT_ELECTION_TIMEOUT_MIN_MS",
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests;
