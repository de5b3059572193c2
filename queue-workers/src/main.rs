//! `wagate-worker`: runs the webhook and ingress queue workers against the data DB until SIGTERM/SIGINT.
//! Input: the environment (see `config.rs`). It serves no HTTP and runs no sessions.

use std::time::Duration;

use anyhow::Context;
use tokio_util::sync::CancellationToken;
use wagate_workers::config::WorkerConfig;
use wagate_workers::{DataPool, QueueBackend, QueueClient, spawn_reconciler, spawn_workers};

const RECONCILE_EVERY: Duration = Duration::from_secs(30);

#[tokio::main]
async fn main() -> std::process::ExitCode {
    // Boot errors are for an operator: one line naming the cause, no backtrace.
    match run().await {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("wagate-worker: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}

async fn run() -> anyhow::Result<()> {
    let config = WorkerConfig::from_env()?;
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::new(&config.log_filter))
        .init();
    if let QueueBackend::Sqlite { .. } = config.queue.backend {
        std::fs::create_dir_all(&config.data_dir)
            .with_context(|| format!("cannot create DATA_DIR {}", config.data_dir.display()))?;
    }
    let pool = DataPool::connect(config.database_kind, &config.database_url).await?;
    pool.migrate().await?;
    let queue = QueueClient::connect(&config.queue).await?;
    let shutdown = CancellationToken::new();
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
        RECONCILE_EVERY,
        shutdown.clone(),
    );
    tracing::info!("wagate-worker running");
    wait_for_signal().await?;
    tracing::info!("shutting down; finishing in-flight jobs");
    shutdown.cancel();
    let _ = tokio::join!(workers, reconciler);
    Ok(())
}

async fn wait_for_signal() -> anyhow::Result<()> {
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    tokio::select! {
        r = tokio::signal::ctrl_c() => r?,
        _ = term.recv() => {}
    }
    Ok(())
}
