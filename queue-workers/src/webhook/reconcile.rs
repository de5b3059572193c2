//! Getting outbox rows onto the queue: `enqueue_outbox` after the node's commit, and `reconcile_outbox`, the
//! crash-recovery sweep that re-enqueues rows whose job was lost and releases attempts a dead worker held.
//! Input: outbox ids from the node, or the table itself. It does not deliver anything.

use std::time::Duration;

use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::db::{DataPool, now_ms};
use crate::queue::{QueueClient, QueueError};

use super::WebhookSettings;
use super::store::{self, StoreError};

/// How long a due row may sit untouched before the sweep re-enqueues it, by default.
pub const DEFAULT_STALE_AFTER: Duration = Duration::from_secs(60);
/// Rows re-enqueued per sweep; the next sweep continues.
const SWEEP_BATCH: i64 = 500;

#[derive(Debug, thiserror::Error)]
pub enum ReconcileError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Queue(#[from] QueueError),
}

/// What one sweep did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ReconcileReport {
    pub requeued: usize,
    pub released_inflight: u64,
}

/// Marks each waiting row `queued` and pushes its delivery job. The row is marked first, so a worker that
/// picks the job up at once finds it claimable; if the push fails, the row is stale-queued and the sweep
/// pushes it again. Returns how many jobs were pushed.
pub async fn enqueue_outbox(
    pool: &DataPool,
    queue: &QueueClient,
    outbox_ids: &[String],
) -> Result<usize, ReconcileError> {
    let mut pushed = 0;
    for id in outbox_ids {
        if store::mark_queued(pool, id, now_ms()).await? {
            queue.push_delivery(id, None).await?;
            pushed += 1;
        }
    }
    Ok(pushed)
}

/// One sweep: rows claimed by a worker that never finished (older than `WEBHOOK_TIMEOUT` + `stale_after`) go
/// back to waiting, then every waiting row that has been due and untouched for `stale_after` is re-enqueued.
/// Safe to run on every node at once: a duplicate job finds the row claimed or not due and does nothing.
pub async fn reconcile_outbox(
    pool: &DataPool,
    queue: &QueueClient,
    settings: &WebhookSettings,
    stale_after: Duration,
) -> Result<ReconcileReport, ReconcileError> {
    let now = now_ms();
    let stale_ms = i64::try_from(stale_after.as_millis()).unwrap_or(i64::MAX);
    let inflight_ms =
        stale_ms.saturating_add(i64::try_from(settings.timeout_ms).unwrap_or(i64::MAX));
    let released_inflight =
        store::reset_stale_inflight(pool, now.saturating_sub(inflight_ms), now).await?;
    let ids = store::stale_waiting(pool, now.saturating_sub(stale_ms), SWEEP_BATCH).await?;
    let requeued = enqueue_outbox(pool, queue, &ids).await?;
    if requeued > 0 || released_inflight > 0 {
        tracing::info!(requeued, released_inflight, "outbox reconciled");
    }
    Ok(ReconcileReport {
        requeued,
        released_inflight,
    })
}

/// Runs [`reconcile_outbox`] now and then every `interval` until `shutdown`.
pub fn spawn_reconciler(
    pool: DataPool,
    queue: QueueClient,
    settings: WebhookSettings,
    interval: Duration,
    shutdown: CancellationToken,
) -> JoinHandle<()> {
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(interval);
        loop {
            tokio::select! {
                _ = shutdown.cancelled() => break,
                _ = tick.tick() => {}
            }
            if let Err(e) = reconcile_outbox(&pool, &queue, &settings, DEFAULT_STALE_AFTER).await {
                tracing::warn!(error = %e, op = "reconcile_outbox", "outbox sweep failed");
            }
        }
    })
}
