//! The delivery side of a node's background work: the in-process queue workers (`ROLE=all`; with
//! `ROLE=api` a separate `wagate-worker` consumes), the outbox reconciler (re-enqueues rows a crash or a lost
//! push left behind) and the pruning of settled outbox rows. It does not deliver anything itself.

use std::time::Duration;

use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use wagate_workers::db::now_ms;
use wagate_workers::{
    DatabaseKind, PastClaims, reconcile_outbox, release_claims_of_past_life, spawn_workers,
};

use crate::app::ApiContext;
use crate::config::NodeRole;

/// Delivered and failed outbox rows are kept this long (the failure log keeps failed payloads).
const KEEP_SETTLED_MS: i64 = 10 * 60 * 1000;
const HOUSEKEEP_EVERY: Duration = Duration::from_secs(60);

pub(crate) fn spawn(
    ctx: &ApiContext,
    tasks: &TaskTracker,
    shutdown: &CancellationToken,
) -> anyhow::Result<()> {
    let settings = ctx.config.webhook_settings();
    let boot_ms = now_ms();
    // An embedded node (SQLite data DB, in-process workers) is the only deliverer of its outbox.
    let sole_deliverer =
        ctx.config.role == NodeRole::All && ctx.infra.data_db().kind() == DatabaseKind::Sqlite;
    if matches!(ctx.config.role, NodeRole::All | NodeRole::Worker) {
        let (db, queue, node_id) = (
            ctx.infra.data_db().clone(),
            ctx.infra.queue().clone(),
            ctx.config.node_id.clone(),
        );
        tasks.spawn(async move {
            let whose = match sole_deliverer {
                true => PastClaims::All,
                false => PastClaims::MadeBy(&node_id),
            };
            if let Err(e) = release_claims_of_past_life(&db, &queue, whose, boot_ms).await {
                tracing::warn!(error = %e, op = "reconcile_outbox", "cannot release past claims");
            }
        });
        let workers = spawn_workers(
            settings.clone(),
            ctx.infra.data_db().clone(),
            ctx.infra.queue().clone(),
            shutdown.clone(),
        )?;
        tasks.spawn(async move {
            let _ = workers.await;
        });
    }
    if matches!(ctx.config.role, NodeRole::All | NodeRole::Api) {
        let (db, queue, stop) = (
            ctx.infra.data_db().clone(),
            ctx.infra.queue().clone(),
            shutdown.clone(),
        );
        let every = Duration::from_millis(ctx.config.outbox_reconcile_ms);
        let stale = Duration::from_millis(ctx.config.outbox_stale_ms);
        tasks.spawn(async move {
            // At boot every pending row of this node's past life is an orphan: sweep them all at once.
            let mut stale_after = Duration::ZERO;
            loop {
                if let Err(e) = reconcile_outbox(&db, &queue, &settings, stale_after).await {
                    tracing::warn!(error = %e, op = "reconcile_outbox", "outbox sweep failed");
                }
                stale_after = stale;
                tokio::select! {
                    _ = stop.cancelled() => break,
                    _ = tokio::time::sleep(every) => {}
                }
            }
        });
    }
    let (pipeline, stop) = (ctx.pipeline.clone(), shutdown.clone());
    tasks.spawn(async move {
        loop {
            tokio::select! {
                _ = stop.cancelled() => break,
                _ = tokio::time::sleep(HOUSEKEEP_EVERY) => {}
            }
            match pipeline.housekeep(KEEP_SETTLED_MS).await {
                Ok(n) if n > 0 => tracing::debug!(pruned = n, "settled outbox rows pruned"),
                Ok(_) => {}
                Err(e) => tracing::warn!(error = %e, op = "outbox_prune", "outbox prune failed"),
            }
        }
    });
    Ok(())
}
