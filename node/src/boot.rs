//! Start-up and shutdown of a node: logging, storage, the first admin key, background tasks, the HTTP
//! listener, and a graceful stop on SIGTERM/SIGINT (in-flight requests finish, usage is flushed).

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use tokio::signal::unix::{Signal, SignalKind, signal};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use wagate_workers::telemetry::{self, BuildInfo, LogSettings, TracingGuard};

use crate::admin::DataAdmin;
use crate::app::{ApiContext, ContextParts};
use crate::audit::AuditLog;
use crate::automation::{AutomationService, SessionSender};
use crate::cluster::lease::{Leases, LocalLeases};
use crate::cluster::{self, Cluster};
use crate::config::{Config, DatabaseType, EngineType};
use crate::engine::node_store::NodeStore;
use crate::engine::unavailable::UnavailableFactory;
use crate::engine::{EngineFactory, EngineKind};
use crate::events::Pipeline;
use crate::events::hub::ClusterLink;
use crate::events::ingest::Ingest;
use crate::http::limits::{Limiter, SharedWindows, run_limiter_upkeep};
use crate::keys::KeyService;
use crate::maindb::MainWriter;
use crate::media::convert::{ConvertLimits, Converter};
use crate::media::{FetchOptions, MediaStore};
use crate::messaging::bulk::BulkRunner;
use crate::messaging::pacing::{Pacer, PacingLimits};
use crate::messaging::{MessagingService, Recorder};
use crate::raft::RaftNode;
use crate::sessions::SessionService;
use crate::sessions::cache::RecordCache;
use crate::sessions::deps::Deps;
use crate::store::{DataPool, backends};
use crate::webhooks::WebhookService;
use wagate_engine_sim::peers_redis::RedisPeers;
use wagate_engine_sim::{SimFactory, SimNetwork, network::SimConfig};
use wagate_engine_socket::{SocketConfig, SocketFactory};

fn init_tracing(config: &Config) -> anyhow::Result<TracingGuard> {
    let level = if config.log_level == "verbose" {
        "trace"
    } else {
        config.log_level.as_str()
    };
    telemetry::logs::init(&LogSettings {
        level: level.to_owned(),
        json: config.log_json,
        otel_endpoint: config.otel_endpoint.clone(),
        sampling: config.trace_sampling,
        service_name: "wagate",
        instance_id: config.node_id.clone(),
    })
    .context("could not set up trace export (OTEL_EXPORTER_OTLP_ENDPOINT)")
}

/// The recorder, only when `METRICS_TOKEN` is set: without a token nobody can scrape, and with no recorder
/// installed every `metrics::` call is a no-op, so metrics cost nothing when they are off.
fn install_metrics(config: &Config) -> Option<telemetry::Recorder> {
    use telemetry::metrics::{
        ENGINE_QUERY_TIMEOUTS, MESSAGES_FAILED, MESSAGES_RECEIVED, MESSAGES_SENT,
    };
    config.metrics_token.as_ref()?;
    let recorder = telemetry::Recorder::install(&BuildInfo {
        version: wagate_proto::VERSION,
        engine: config.engine_type.as_str().to_owned(),
        role: config.role.as_str().to_owned(),
    })?;
    // The node's bounded label sets start at zero, so every series exists before its first event.
    for kind in crate::engine::MessageType::ALL {
        for name in [MESSAGES_RECEIVED, MESSAGES_SENT, MESSAGES_FAILED] {
            metrics::counter!(name, "type" => kind.as_str()).increment(0);
        }
    }
    metrics::counter!(ENGINE_QUERY_TIMEOUTS, "engine" => config.engine_type.as_str()).increment(0);
    Some(recorder)
}

async fn open_data_db(config: &Config) -> anyhow::Result<DataPool> {
    let pool = match config.database_type {
        DatabaseType::Sqlite => {
            backends::connect_data_sqlite(Path::new(&config.database_url)).await
        }
        DatabaseType::Postgres => backends::connect_data_postgres(&config.database_url).await,
    };
    pool.context("could not open the data database")
}

/// Writes a generated admin key to `DATA_DIR/.api-key`, readable by the owner only.
fn write_generated_key(data_dir: &Path, key: &str) -> anyhow::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let path = data_dir.join(".api-key");
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(&path)?;
    file.write_all(key.as_bytes())?;
    Ok(())
}

/// Makes `API_MASTER_KEY` (or a generated key, printed once and saved) an admin key.
async fn ensure_master(keys: &KeyService, config: &Config) -> anyhow::Result<()> {
    if let Some(generated) = keys.ensure_master(config.api_master_key.as_deref()).await? {
        write_generated_key(&config.data_dir, &generated)?;
        tracing::warn!(
            "generated the first admin API key; it is shown once and saved to DATA_DIR/.api-key"
        );
        println!("{}", admin_key_line(config.log_json, &generated));
    }
    Ok(())
}

/// The one stdout line that shows a generated admin key: plain text, or with `LOG_FORMAT=json` one JSON
/// object laid out as the log lines are (`timestamp`, `level`, `fields.message`, `target`), so a collector
/// that parses every line as JSON keeps it too.
fn admin_key_line(json: bool, key: &str) -> String {
    let message = format!("wagate admin API key: {key}");
    if !json {
        return message;
    }
    let timestamp = chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Micros, true);
    format!(
        r#"{{"timestamp":{},"level":"WARN","fields":{{"message":{}}},"target":"{}"}}"#,
        serde_json::Value::String(timestamp),
        serde_json::Value::String(message),
        module_path!()
    )
}

/// With raft: applies the first admin key through the log once a quorum answers, retrying until then.
async fn ensure_master_replicated(ctx: ApiContext, shutdown: CancellationToken) {
    loop {
        match ensure_master(&ctx.keys, &ctx.config).await {
            Ok(()) => return,
            Err(err) => tracing::info!(error = %err, "first admin key waits for a raft quorum"),
        }
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = tokio::time::sleep(Duration::from_millis(500)) => {}
        }
    }
}

/// With raft: the key cache follows the state machine, the audit spool drains into the log, learners
/// join and leave through the registry, the first admin key is applied, and the `wagate_raft_*` gauges
/// are published.
fn spawn_raft_duties(ctx: &ApiContext, tasks: &TaskTracker, shutdown: &CancellationToken) {
    let Some(node) = ctx.infra.raft() else { return };
    tasks.spawn(ctx.keys.clone().follow_changes(shutdown.clone()));
    tasks.spawn(crate::raft::spool::drain(
        node.raft.clone(),
        shutdown.clone(),
    ));
    tasks.spawn(crate::raft::publish_metrics(
        node.raft.clone(),
        shutdown.clone(),
    ));
    tasks.spawn(ensure_master_replicated(ctx.clone(), shutdown.clone()));
    if let Some(cluster) = ctx.infra.cluster() {
        tasks.spawn(crate::raft::membership::run(
            node.raft.clone(),
            cluster.registry.clone(),
            node.http.clone(),
            shutdown.clone(),
        ));
    }
}

/// The engine family of this node, and the sim network when it is the sim. A queue worker (`ROLE=worker`)
/// runs no engine: its factory refuses every start, and it joins no sim network.
fn engine_factory(
    config: &Config,
    data_db: &DataPool,
) -> (Arc<dyn EngineFactory>, Option<SimNetwork>) {
    if !cluster::hosts_sessions(config) {
        let reason = "This node runs ROLE=worker and hosts no sessions".to_string();
        let factory = UnavailableFactory::broken(config.engine_type, reason);
        return (Arc::new(factory), None);
    }
    match config.engine_type {
        EngineType::Sim => {
            // Ids must stay unique across restarts: the message store deduplicates on them.
            let config = SimConfig {
                id_prefix: format!("3EB0SIM{:06X}", rand::random::<u32>() & 0xFF_FFFF),
                // Embedded, traffic the sessions have not acknowledged survives a restart on disk; a
                // cluster holds it in Redis.
                journal_dir: (!config.redis_enabled).then(|| config.data_dir.clone()),
                ..SimConfig::default()
            };
            let net = SimNetwork::new(config);
            (Arc::new(SimFactory::new(net.clone())), Some(net))
        }
        EngineType::Socket => {
            let socket = SocketConfig {
                endpoint: config.socket_ws_url.clone(),
            };
            let factory = SocketFactory::new(data_db.clone(), socket);
            (Arc::new(factory), None)
        }
        EngineType::Browser => (browser_factory(config), None),
    }
}

/// The browser engine over one node-wide launcher; without its wa-js bundle every start fails with the
/// reason (the node still boots: other routes and the sessions' records stay usable).
fn browser_factory(config: &Config) -> Arc<dyn EngineFactory> {
    let browser = wagate_engine_browser::BrowserConfig {
        chromium_path: config.chromium_path.clone(),
        bundle_path: config.browser_wajs_path.clone(),
        url: config.browser_web_url.clone(),
        protocol_timeout: std::time::Duration::from_millis(config.browser_protocol_timeout_ms),
        call_budget: std::time::Duration::from_millis(config.engine_query_timeout_ms),
        max_rss_mb: config.browser_max_rss_mb,
        launch_concurrency: usize::try_from(config.browser_launch_concurrency)
            .unwrap_or(usize::MAX),
        ..wagate_engine_browser::BrowserConfig::default()
    };
    match wagate_engine_browser::Launcher::new(browser) {
        Ok(launcher) => Arc::new(wagate_engine_browser::BrowserFactory::new(
            launcher,
            config.data_dir.join("sessions"),
        )),
        Err(err) => {
            tracing::error!(error = %err, "browser engine unavailable");
            Arc::new(UnavailableFactory::broken(
                EngineKind::Browser,
                err.to_string(),
            ))
        }
    }
}

fn session_service(
    config: &Config,
    data_db: &DataPool,
    pipeline: &Pipeline,
    recorder: &Recorder,
    shutdown: &CancellationToken,
    leases: Arc<dyn Leases>,
    cluster: Option<&Cluster>,
) -> (Arc<SessionService>, Option<SimNetwork>) {
    let (factory, sim) = engine_factory(config, data_db);
    let deps = Arc::new(Deps {
        db: data_db.clone(),
        pipeline: pipeline.clone(),
        ingest: Ingest::new(pipeline.clone(), recorder.clone()),
        media: recorder.media().clone(),
        factory,
        engine_store: Arc::new(NodeStore::new(data_db.clone())),
        sessions_dir: config.data_dir.join("sessions"),
        shutdown: shutdown.clone(),
        leases: leases.clone(),
        // A benchmark's baseline, not a setting (docs/architecture.md "Measured").
        ack_on_receipt: config.bench_ack_on_receipt,
        // In a cluster other nodes write the same rows: entries are checked against tokens in Redis.
        records: match cluster {
            Some(cluster) => RecordCache::shared(cluster.lookups.clone(), &cluster.prefix),
            None => RecordCache::local(),
        },
    });
    (
        Arc::new(SessionService::new(
            deps,
            leases,
            config.session_start_timeout_ms,
        )),
        sim,
    )
}

/// The global rate limit: counted in Redis for a cluster (one limit whichever node serves), else in-process.
fn limiter(config: &Config) -> anyhow::Result<Limiter> {
    // Benchmark only (not a product setting): a cluster node that limits in-process, so `wagate-loadtest
    // limiter` compares two cluster nodes that differ in the limiter alone.
    if !config.redis_enabled || config.bench_local_limiter {
        return Ok(Limiter::local(&config.rate_tiers));
    }
    let shared = SharedWindows::new(
        &config.redis_url,
        &config.redis_key_prefix,
        &config.node_id,
        &config.rate_tiers,
    )
    .context("could not set up the shared rate limiter (REDIS_URL)")?;
    Ok(Limiter::Shared(shared))
}

/// The cluster membership with `REDIS_ENABLED=true` (boot fails when Redis does not answer).
async fn join_cluster(config: &Config, db: &DataPool) -> anyhow::Result<Option<Arc<Cluster>>> {
    if !config.redis_enabled {
        return Ok(None);
    }
    let cluster = Cluster::connect(config, db.clone())
        .await
        .context("could not reach Redis (REDIS_URL)")?;
    tracing::info!(node_id = %cluster.node_id, url = %cluster.node_url, "joined the cluster");
    Ok(Some(Arc::new(cluster)))
}

/// Sessions at boot: in a cluster the heartbeat and the takeover sweep run them; embedded, the restore.
/// The restore reads and normalises the sessions before the node serves (a session a client starts in
/// the first moments is this process's own, never one a stopped process left), then starts them in the
/// background. A queue worker (`ROLE=worker`) restores nothing: the sessions in its data DB are the API
/// nodes'.
async fn spawn_session_duties(ctx: &ApiContext, tasks: &TaskTracker, shutdown: &CancellationToken) {
    let config = &ctx.config;
    match ctx.infra.cluster() {
        Some(cluster) => cluster::spawn_duties(cluster, ctx.sessions.clone(), tasks, shutdown),
        None if !cluster::hosts_sessions(config) => {}
        None => {
            let concurrency = usize::try_from(config.session_restore_concurrency).unwrap_or(1);
            let wanted = ctx
                .sessions
                .normalise_at_boot(config.auto_start_sessions)
                .await;
            tasks.spawn(ctx.sessions.clone().start_restored(wanted, concurrency));
        }
    }
}

/// The media backend `STORAGE_TYPE` selects; boot stops with one line when it cannot be built.
fn media_store(config: &Config) -> anyhow::Result<MediaStore> {
    let fetch = FetchOptions {
        is_guarded: config.media_url_guard,
        use_session_proxy: config.session_proxy_url_fetch,
    };
    MediaStore::from_config(
        &config.storage,
        &config.data_dir,
        config.media_download_max_bytes,
        fetch,
    )
    .map_err(|err| anyhow::anyhow!("media storage (STORAGE_TYPE): {err}"))
}

/// The ffmpeg converter with the `MEDIA_CONVERSION_*` knobs.
fn converter(config: &Config, media: &MediaStore) -> Converter {
    Converter::new(ConvertLimits {
        enabled: config.media_conversion_enabled,
        ffmpeg: config.ffmpeg_path.clone().into(),
        concurrency: usize::try_from(config.media_conversion_concurrency).unwrap_or(usize::MAX),
        queue: usize::try_from(config.media_conversion_queue).unwrap_or(usize::MAX),
        timeout_ms: config.media_conversion_timeout_ms,
        max_output_bytes: config.media_conversion_max_output_bytes,
        scratch_dir: media.scratch_dir().to_path_buf(),
    })
}

/// The send pacing governor, when `SEND_PACING_ENABLED=true`.
/// Whether this node alone writes messages to its data DB: an SQLite file outside a cluster. In a cluster
/// the sessions' owners write them, and they move between nodes.
fn sole_message_writer(config: &Config) -> bool {
    config.database_type == DatabaseType::Sqlite && !config.redis_enabled
}

fn pacer(config: &Config) -> Option<Pacer> {
    config.send_pacing_enabled.then(|| {
        Pacer::new(PacingLimits {
            daily_cap: config.send_pacing_daily_cap,
            warmup_days: config.send_pacing_warmup_days,
            warmup_start: config.send_pacing_warmup_start,
            cold_daily: config.send_pacing_cold_daily,
            breaker_failures: config.send_pacing_breaker_failures,
        })
    })
}

async fn build_context(
    config: Arc<Config>,
    shutdown: &CancellationToken,
) -> anyhow::Result<ApiContext> {
    std::fs::create_dir_all(&config.data_dir).context("could not create DATA_DIR")?;
    let main_db = backends::connect_main(&config.main_db_path())
        .await
        .context("could not open the main database")?;
    let data_db = open_data_db(&config).await?;
    let raft = match config.is_raft() {
        true => Some(Arc::new(
            RaftNode::start(&config, main_db.clone())
                .await
                .context("could not start the raft replica of the main database")?,
        )),
        false => None,
    };
    let writer = match &raft {
        Some(node) => MainWriter::Raft(node.raft.clone()),
        None => MainWriter::local(main_db.clone()),
    };
    let keys = Arc::new(KeyService::load_with(main_db.clone(), writer).await?);
    // With raft the first admin key is applied once a quorum exists (`ensure_master_replicated`).
    if raft.is_none() {
        ensure_master(&keys, &config).await?;
    }
    let queue = wagate_workers::QueueClient::connect(&config.queue_config())
        .await
        .context("could not open the job queues")?;
    let pipeline = Pipeline::new(data_db.clone()).with_queue(queue.clone());
    let webhooks =
        WebhookService::new(data_db.clone(), pipeline.clone(), config.webhook_settings())
            .context("could not build the webhook HTTP client")?;
    let cluster = join_cluster(&config, &data_db).await?;
    // Only WebSockets read the cluster-wide event feed, and a queue worker serves none.
    if let Some(cluster) = cluster
        .as_ref()
        .filter(|_| cluster::hosts_sessions(&config))
    {
        let link = ClusterLink {
            pool: cluster.pool.clone(),
            redis_url: config.redis_url.clone(),
            node_id: cluster.node_id.clone(),
            prefix: cluster.prefix.clone(),
        };
        pipeline
            .hub()
            .attach_cluster(link, shutdown.clone())
            .await
            .context("could not join the cluster's event fan-out")?;
    }
    let leases: Arc<dyn Leases> = match &cluster {
        Some(cluster) => cluster.leases.clone(),
        None => Arc::new(LocalLeases::new(data_db.clone(), config.node_id.clone())),
    };
    let media = media_store(&config)?;
    tracing::info!(
        storage_type = media.storage_type().as_str(),
        "media store ready"
    );
    match crate::events::statuses::move_inline_media(&data_db, &media).await {
        Ok(0) => {}
        Ok(moved) => tracing::info!(
            moved,
            "status media moved from the database to the media store"
        ),
        Err(err) => {
            tracing::warn!(error = %err, "status media not moved to the media store yet; retried at next boot")
        }
    }
    let recorder = Recorder::new(data_db.clone(), pipeline.clone(), media.clone());
    let (sessions, sim) = session_service(
        &config,
        &data_db,
        &pipeline,
        &recorder,
        shutdown,
        leases,
        cluster.as_deref(),
    );
    if let Some(cluster) = &cluster {
        sessions.join_cluster(cluster.clone());
    }
    if let (Some(cluster), Some(net)) = (&cluster, &sim) {
        // In a cluster the sim network spans every node (wire-notes §10).
        let peers = RedisPeers::new(
            cluster.pool.clone(),
            &config.redis_url,
            cluster.node_id.clone(),
            cluster.prefix.clone(),
        )
        .context("could not connect the sim network to Redis")?;
        // A node whose lease lapsed (stalled, partitioned) must not hand a session's traffic to its own
        // stale device: the fence is the same deadline the session's fenced writes check.
        let leases = cluster.leases.clone();
        let peers = peers.with_fence(Box::new(move |session| leases.holds(session)));
        wagate_engine_sim::peers::attach(net, Arc::new(peers));
    }
    let converter = converter(&config, &media);
    let mut messaging =
        MessagingService::new(data_db.clone(), sessions.clone(), recorder, pacer(&config))
            .with_converter(converter.clone());
    if sole_message_writer(&config) {
        messaging = messaging.keeping_whole_pages();
    }
    let messaging = Arc::new(messaging);
    let mut automation = AutomationService::new(data_db.clone());
    if let Some(cluster) = &cluster {
        automation = automation.with_shared_cooldowns(cluster.pool.clone(), &cluster.prefix);
    }
    let automation = Arc::new(automation);
    automation.set_sender(Box::new(SessionSender::new(messaging.clone())));
    let admin = Arc::new(DataAdmin::new(
        data_db.clone(),
        media.clone(),
        sessions.clone(),
        pipeline.clone(),
        automation.clone(),
        config.export_inline_media_budget_bytes,
        config.data_dir.clone(),
        config.storage_export_ttl_ms,
        config.webhook_ssrf_protect,
    ));
    let infra = Arc::new(crate::infra::NodeInfra::new(
        main_db.clone(),
        data_db.clone(),
        queue,
        sessions.clone(),
        cluster,
        raft.clone(),
    ));
    Ok(ApiContext::new(ContextParts {
        admin,
        converter,
        media,
        webhooks: Arc::new(webhooks),
        automation,
        infra,
        bulk: BulkRunner::new(messaging.clone(), shutdown.clone()),
        messaging,
        stats: crate::stats::StatsService::new(data_db.clone()),
        sessions,
        pipeline,
        sim,
        limiter: Arc::new(limiter(&config)?),
        audit: match &raft {
            Some(node) => AuditLog::replicated(main_db.clone(), node.raft.clone()),
            None => AuditLog::new(main_db.clone()),
        },
        metrics: install_metrics(&config),
        forwarder: crate::http::peer_client::PeerClient::new(config.session_proxy_timeout_ms),
        config,
        keys,
    }))
}

fn spawn_background(
    ctx: &ApiContext,
    tasks: &TaskTracker,
    shutdown: &CancellationToken,
) -> anyhow::Result<()> {
    crate::events::reconciler::spawn(ctx, tasks, shutdown)?;
    tasks.spawn(crate::automation::spawn_matcher(
        ctx.automation.clone(),
        &ctx.pipeline,
        shutdown.clone(),
    ));
    tasks.spawn(
        ctx.audit
            .clone()
            .run_pruning(ctx.config.audit_retention_days, shutdown.clone()),
    );
    tasks.spawn(run_limiter_upkeep(ctx.limiter.clone(), shutdown.clone()));
    let (keys, stop) = (ctx.keys.clone(), shutdown.clone());
    let metrics = ctx.metrics.clone();
    tasks.spawn(async move {
        let mut tick = tokio::time::interval(telemetry::metrics::UPKEEP_EVERY);
        loop {
            tokio::select! {
                _ = stop.cancelled() => break,
                _ = tick.tick() => {
                    keys.flush_usage().await;
                    if let Some(recorder) = &metrics { recorder.run_upkeep(); }
                }
            }
        }
        keys.flush_usage().await;
    });
    Ok(())
}

/// Resolves on SIGTERM, SIGINT or `shutdown`. The handlers are installed by the caller before the listener
/// opens: `http::serve` polls this future from a task of its own, and a SIGTERM that arrived before that
/// task first ran (a supervisor stopping a node right after its first health check) killed the process
/// outright.
/// A cluster node first hands its sessions to its peers while it still accepts requests (those for a
/// session in transit wait for the new owner, then go there), and only then closes the listener.
async fn shutdown_signal(
    mut terminate: Signal,
    mut interrupt: Signal,
    shutdown: CancellationToken,
    ctx: ApiContext,
) {
    tokio::select! {
        _ = terminate.recv() => {},
        _ = interrupt.recv() => {},
        _ = shutdown.cancelled() => {},
    }
    tracing::info!("shutting down");
    if let Some(cluster) = ctx.infra.cluster() {
        cluster.leave(ctx.sessions.as_ref()).await;
    }
    // The sessions still here stop taking traffic and store what their engines already handed over (the
    // network does not send receipts or notifications again), before the loops and the writer stop.
    ctx.sessions.quiesce_all(QUIESCE_BUDGET).await;
    ctx.messaging.flush_event_writes(QUIESCE_BUDGET).await;
    shutdown.cancel();
    tokio::spawn(exit_if_stuck(stop_grace(&ctx.config)));
}

/// How long a stopping node gives its sessions to hand their queued events to the writer, and the writer
/// to commit them (each).
const QUIESCE_BUDGET: Duration = Duration::from_secs(5);

/// How long open requests and background work (a webhook attempt runs up to `WEBHOOK_TIMEOUT`) may take to
/// finish once the node is told to stop.
fn stop_grace(config: &Config) -> Duration {
    Duration::from_secs(30)
        .max(Duration::from_millis(config.webhook_timeout_ms) + Duration::from_secs(5))
}

/// A node told to stop always stops: past the grace, whatever still runs (a connection that never closes, a
/// task that missed the cancellation) is logged and the process exits, as a supervisor would kill it anyway.
/// Everything acknowledged is committed already, so nothing is lost.
async fn exit_if_stuck(grace: Duration) {
    tokio::time::sleep(grace).await;
    tracing::error!(
        grace_ms = grace.as_millis() as u64,
        "shutdown did not finish within its grace (a connection or a background task did not stop); exiting"
    );
    wagate_workers::telemetry::logs::flush_logs();
    std::process::exit(1);
}

/// The secret a Redis cluster's nodes prove peer requests with when `CLUSTER_SECRET` is not set: the first
/// node to boot stores a random one under `{REDIS_KEY_PREFIX}cluster-secret` (`SET NX`) and every node reads
/// it back, so all share it and no client (who cannot read Redis) can forge it.
async fn shared_cluster_secret(config: &Config) -> anyhow::Result<String> {
    use deadpool_redis::redis::AsyncCommands;
    use rand::distr::{Alphanumeric, SampleString};
    let client = deadpool_redis::redis::Client::open(config.redis_url.as_str())
        .context("REDIS_URL is not a Redis URL")?;
    let mut conn = client
        .get_multiplexed_async_connection()
        .await
        .context("could not reach Redis to share the cluster secret")?;
    let key = format!("{}cluster-secret", config.redis_key_prefix);
    let candidate = Alphanumeric.sample_string(&mut rand::rng(), 48);
    let _: Option<String> = deadpool_redis::redis::cmd("SET")
        .arg(&key)
        .arg(&candidate)
        .arg("NX")
        .query_async(&mut conn)
        .await
        .context("could not store the shared cluster secret in Redis")?;
    let secret: String = conn
        .get(&key)
        .await
        .context("could not read the shared cluster secret from Redis")?;
    tracing::info!("CLUSTER_SECRET not set: using the cluster's shared secret kept in Redis");
    Ok(secret)
}

/// Runs a node until SIGTERM or SIGINT.
pub async fn run(config: Config) -> anyhow::Result<()> {
    let _ = rustls::crypto::ring::default_provider().install_default();
    // Held to the end of `run`: dropping it flushes the spans still buffered.
    let _tracing = init_tracing(&config)?;
    let mut config = config;
    if config.redis_enabled && config.cluster_secret.is_none() {
        config.cluster_secret = Some(shared_cluster_secret(&config).await?);
    }
    let config = Arc::new(config);
    let shutdown = CancellationToken::new();
    let ctx = build_context(config.clone(), &shutdown).await?;
    let tasks = TaskTracker::new();
    spawn_background(&ctx, &tasks, &shutdown)?;
    spawn_raft_duties(&ctx, &tasks, &shutdown);
    spawn_session_duties(&ctx, &tasks, &shutdown).await;
    tasks.spawn(ctx.bulk.clone().keep_resuming());
    let terminate = signal(SignalKind::terminate()).context("could not handle SIGTERM")?;
    let interrupt = signal(SignalKind::interrupt()).context("could not handle SIGINT")?;
    let addr = format!("{}:{}", config.bind_host, config.api_port);
    let listener = tokio::net::TcpListener::bind(&addr)
        .await
        .with_context(|| format!("could not listen on {addr}"))?;
    tracing::info!(%addr, engine = config.engine_type.as_str(), "wagate listening");
    let app = crate::http::router(ctx.clone());
    let timeouts = crate::http::serve::ReadTimeouts {
        head: Duration::from_millis(config.http_header_read_timeout_ms),
        body_idle: Duration::from_millis(config.http_body_read_timeout_ms),
    };
    let pools = ctx.infra.sqlite_pools();
    crate::footprint::release_after_boot(&pools).await;
    tasks.spawn(crate::footprint::release_when_quiet(
        pools,
        shutdown.clone(),
    ));
    crate::http::serve::serve(
        listener,
        app,
        timeouts,
        shutdown_signal(terminate, interrupt, shutdown.clone(), ctx.clone()),
    )
    .await;
    tasks.close();
    tasks.wait().await;
    if let Some(node) = ctx.infra.raft() {
        node.raft.shutdown().await;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::admin_key_line;

    #[test]
    fn the_admin_key_line_follows_the_log_format() {
        assert_eq!(
            admin_key_line(false, "wag_abc"),
            "wagate admin API key: wag_abc"
        );
        let line = admin_key_line(true, "wag_a\"b");
        let parsed: serde_json::Value = serde_json::from_str(&line).expect("one JSON object");
        assert_eq!(
            parsed["fields"]["message"],
            "wagate admin API key: wag_a\"b"
        );
        assert_eq!(parsed["level"], "WARN");
        assert_eq!(parsed["target"], "wagate_node::boot");
        assert!(
            parsed["timestamp"]
                .as_str()
                .is_some_and(|t| t.ends_with('Z') && t.contains('T')),
            "{line}"
        );
        assert!(!line.contains('\n'));
    }
}
