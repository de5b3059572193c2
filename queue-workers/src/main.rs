//! `wagate-worker`: runs the webhook and ingress queue workers against the data DB until SIGTERM/SIGINT.
//! Input: the command line, the environment and `.env` (see `config.rs`; `--help` lists every knob). It runs no sessions; its only HTTP is the metrics scrape on
//! `METRICS_PORT` when `METRICS_TOKEN` is set.

use anyhow::Context;
use tokio_util::sync::CancellationToken;
use wagate_config::{Source, Stop};
use wagate_workers::config::WorkerConfig;
use wagate_workers::telemetry::{self, BuildInfo, LogSettings, Recorder};
use wagate_workers::{
    DataPool, PastClaims, QueueBackend, QueueClient, release_claims_of_past_life, spawn_reconciler,
    spawn_workers,
};

#[global_allocator]
static ALLOCATOR: wagate_workers::allocator::Allocator = wagate_workers::allocator::Allocator;

#[tokio::main]
async fn main() -> std::process::ExitCode {
    wagate_workers::allocator::tune();
    // Help and refused values stop here, before anything is opened, exactly as `wagate` does.
    let loaded = Source::process()
        .map_err(Stop::from)
        .and_then(|source| WorkerConfig::load(std::env::args_os(), &source));
    let config = match loaded {
        Ok(config) => config,
        Err(stop) => return stop.exit(),
    };
    // Boot errors are for an operator: one line naming the cause, no backtrace.
    match run(config).await {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("wagate-worker: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}

async fn run(config: WorkerConfig) -> anyhow::Result<()> {
    let _ = rustls::crypto::ring::default_provider().install_default();
    // Held to the end of `run`: dropping it flushes the spans still buffered.
    let _tracing = telemetry::logs::init(&LogSettings {
        level: config.log_filter.clone(),
        json: config.log_json,
        otel_endpoint: config.otel_endpoint.clone(),
        sampling: config.trace_sampling,
        service_name: "wagate-worker",
        instance_id: config.instance_id.clone(),
    })
    .context("could not set up trace export (OTEL_EXPORTER_OTLP_ENDPOINT)")?;
    // Without `METRICS_TOKEN` nothing can scrape: no recorder (every `metrics::` call is then a no-op), and so
    // no histogram samples piling up without the upkeep that only the scrape listener's task runs.
    let recorder = config.metrics_token.as_ref().and_then(|_| {
        Recorder::install(&BuildInfo {
            version: wagate_proto::VERSION,
            engine: "none".to_owned(),
            role: "worker".to_owned(),
        })
    });
    if let QueueBackend::Sqlite { .. } = config.queue.backend {
        std::fs::create_dir_all(&config.data_dir)
            .with_context(|| format!("cannot create DATA_DIR {}", config.data_dir.display()))?;
    }
    let pool = DataPool::connect(config.database_kind, &config.database_url).await?;
    pool.migrate().await?;
    let queue = QueueClient::connect(&config.queue).await?;
    let shutdown = CancellationToken::new();
    let metrics_listener = match (&config.metrics_token, recorder) {
        (Some(token), Some(recorder)) => {
            let addr = format!("{}:{}", config.metrics_host, config.metrics_port);
            let addr: std::net::SocketAddr = tokio::net::lookup_host(&addr)
                .await
                .ok()
                .and_then(|mut a| a.next())
                .with_context(|| format!("BIND_HOST:METRICS_PORT ({addr}) is not an address"))?;
            let listener = telemetry::scrape::serve_worker_metrics(
                addr,
                Some(token.clone()),
                recorder.clone(),
                pool.clone(),
                shutdown.clone(),
            )
            .await?;
            spawn_upkeep(recorder, shutdown.clone());
            Some(listener)
        }
        _ => None,
    };
    let boot_ms = wagate_workers::db::now_ms();
    let released = release_claims_of_past_life(
        &pool,
        &queue,
        PastClaims::MadeBy(&config.webhook.claimer),
        boot_ms,
    )
    .await;
    if let Err(e) = released {
        tracing::warn!(error = %e, op = "reconcile_outbox", "cannot release past claims");
    }
    let workers = spawn_workers(
        config.webhook.clone(),
        pool.clone(),
        queue.clone(),
        shutdown.clone(),
    )?;
    let reconciler = spawn_reconciler(
        pool,
        queue,
        config.webhook,
        config.reconcile_every,
        config.stale_after,
        shutdown.clone(),
    );
    tracing::info!("wagate-worker running");
    wait_for_signal().await?;
    tracing::info!("shutting down; finishing in-flight jobs");
    shutdown.cancel();
    let _ = tokio::join!(workers, reconciler);
    if let Some(listener) = metrics_listener {
        let _ = listener.await;
    }
    Ok(())
}

fn spawn_upkeep(recorder: Recorder, shutdown: CancellationToken) {
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(telemetry::metrics::UPKEEP_EVERY);
        loop {
            tokio::select! {
                _ = shutdown.cancelled() => break,
                _ = tick.tick() => recorder.run_upkeep(),
            }
        }
    });
}

async fn wait_for_signal() -> anyhow::Result<()> {
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    tokio::select! {
        r = tokio::signal::ctrl_c() => r?,
        _ = term.recv() => {}
    }
    Ok(())
}
