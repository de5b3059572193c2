//! Getting outbox rows onto the queue: `enqueue_outbox` after the node's commit, and `reconcile_outbox`, the
//! crash-recovery sweep that re-enqueues rows whose job was lost and releases attempts a dead worker held.
//! Input: outbox ids from the node, or the table itself. It does not deliver anything.

use std::collections::BTreeMap;
use std::time::Duration;

use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::db::{DataPool, now_ms};
use crate::queue::{QueueClient, QueueError};

use super::WebhookSettings;
use super::store::StoreError;
use super::store::outbox;

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

/// Rows one delivery job carries at most.
pub const MAX_JOB_ROWS: usize = 128;

/// Marks the waiting rows among `outbox_ids` `queued` and pushes one delivery job per [`MAX_JOB_ROWS`] of them.
/// Rows are marked first, so a worker that picks a job up at once finds them claimable; if a push fails, its
/// rows are stale-queued and the sweep pushes them again. Returns how many rows were pushed.
pub async fn enqueue_outbox(
    pool: &DataPool,
    queue: &QueueClient,
    outbox_ids: &[String],
) -> Result<usize, ReconcileError> {
    let mut pushed = 0;
    for part in outbox_ids.chunks(MAX_JOB_ROWS) {
        let waiting = outbox::mark_queued_many(pool, part, now_ms()).await?;
        if waiting.is_empty() {
            continue;
        }
        let n = waiting.len();
        queue.push_deliveries(waiting, None).await?;
        pushed += n;
    }
    Ok(pushed)
}

/// Pushes jobs for rows just committed as `queued` (the node writes them so when it will push them at once):
/// they are waiting by construction, so unlike [`enqueue_outbox`] this costs no write to the data DB. A row
/// whose push never happens is found by the reconciler like a `pending` one.
async fn push_fresh(
    queue: &QueueClient,
    outbox_ids: &[String],
    traces: &BTreeMap<String, String>,
) -> Result<(), ReconcileError> {
    for part in outbox_ids.chunks(MAX_JOB_ROWS) {
        let part_traces: BTreeMap<String, String> = if traces.is_empty() {
            BTreeMap::new()
        } else {
            part.iter()
                .filter_map(|id| traces.get(id).map(|t| (id.clone(), t.clone())))
                .collect()
        };
        queue
            .push_traced_deliveries(part.to_vec(), part_traces, None)
            .await?;
    }
    Ok(())
}

/// Committed outbox ids, and the `traceparent` of the event they deliver when it was traced.
type Submitted = (Vec<String>, Option<String>);

/// The after-commit path onto the queue. Event transactions hand their new outbox ids over without waiting;
/// one task gathers whatever has arrived while the previous push ran and pushes it as one job, so a burst of
/// commits costs a few queue round trips, not one each. Ids it never pushed (a crash, a failed push) stay
/// waiting in the outbox, where the reconciler finds them.
#[derive(Debug, Clone)]
pub struct Enqueuer {
    ids: mpsc::UnboundedSender<Submitted>,
}

/// How long a push waits for more ids when it has fewer than a full job.
const COALESCE: Duration = Duration::from_millis(5);

/// Ids and trace contexts gathered for one push.
#[derive(Default)]
struct Batch {
    ids: Vec<String>,
    traces: BTreeMap<String, String>,
}

impl Batch {
    fn add(&mut self, (ids, trace): Submitted) {
        if let Some(trace) = trace {
            for id in &ids {
                self.traces.insert(id.clone(), trace.clone());
            }
        }
        self.ids.extend(ids);
    }
}

fn take_waiting(rx: &mut mpsc::UnboundedReceiver<Submitted>, batch: &mut Batch) {
    while batch.ids.len() < MAX_JOB_ROWS {
        match rx.try_recv() {
            Ok(more) => batch.add(more),
            Err(_) => break,
        }
    }
}

impl Enqueuer {
    /// Starts the pushing task; it ends when every handle is dropped.
    pub fn spawn(queue: QueueClient) -> Enqueuer {
        let (tx, mut rx) = mpsc::unbounded_channel::<Submitted>();
        tokio::spawn(async move {
            while let Some(first) = rx.recv().await {
                let mut batch = Batch::default();
                batch.add(first);
                take_waiting(&mut rx, &mut batch);
                if batch.ids.len() < MAX_JOB_ROWS {
                    // Each job costs the queue a handful of statements whatever its size, so at a low rate
                    // (one id per push) a short wait for more ids halves the node's CPU per delivery.
                    tokio::time::sleep(COALESCE).await;
                    take_waiting(&mut rx, &mut batch);
                }
                if let Err(e) = push_fresh(&queue, &batch.ids, &batch.traces).await {
                    // The rows are committed; the reconciler enqueues them once they are stale.
                    tracing::warn!(error = %e, rows = batch.ids.len(), op = "enqueue_outbox", "cannot enqueue deliveries");
                }
            }
        });
        Enqueuer { ids: tx }
    }

    /// Hands committed outbox ids over for enqueueing; never waits.
    pub fn submit(&self, outbox_ids: Vec<String>) {
        self.submit_traced(outbox_ids, None);
    }

    /// [`Enqueuer::submit`] for the rows of one traced event: their jobs carry its `traceparent`.
    pub fn submit_traced(&self, outbox_ids: Vec<String>, traceparent: Option<String>) {
        if !outbox_ids.is_empty() && self.ids.send((outbox_ids, traceparent)).is_err() {
            tracing::warn!(
                op = "enqueue_outbox",
                "enqueuer stopped; rows wait for the reconciler"
            );
        }
    }
}

/// One sweep: rows claimed by a worker that never finished (older than `WEBHOOK_TIMEOUT` + `stale_after`) go
/// back to waiting and are re-enqueued at once (they have no job left), then every waiting row that has been
/// due and untouched for `stale_after` is re-enqueued. Safe to run on every node at once: a duplicate job
/// finds the row claimed or not due and does nothing.
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
    let mut ids = outbox::reset_stale_inflight(pool, now.saturating_sub(inflight_ms), now).await?;
    let released_inflight = u64::try_from(ids.len()).unwrap_or(u64::MAX);
    let waiting = outbox::stale_waiting(pool, now.saturating_sub(stale_ms), SWEEP_BATCH).await?;
    ids.extend(waiting);
    ids.sort_unstable();
    ids.dedup();
    let requeued = enqueue_outbox(pool, queue, &ids).await?;
    if requeued > 0 || released_inflight > 0 {
        tracing::info!(requeued, released_inflight, "outbox reconciled");
    }
    Ok(ReconcileReport {
        requeued,
        released_inflight,
    })
}

/// Whose claims a process releases when it boots (see [`release_claims_of_past_life`]).
#[derive(Debug, Clone, Copy)]
pub enum PastClaims<'a> {
    /// Those made under this `NODE_ID`: a process restarted under its id finds what its past life held.
    MadeBy(&'a str),
    /// Every claim: only for the sole deliverer of its data DB (an embedded node on SQLite), whose id may
    /// have changed with the host name.
    All,
}

/// Sends back to waiting, and enqueues at once, every attempt claimed before `boot_ms` by `whose`, however
/// recent, and every row that was already due at boot; returns how many rows it enqueued. A claim was made
/// by a past life that died mid-attempt, and a due row may be a retry whose job that life held: waiting out
/// the stale window (`WEBHOOK_TIMEOUT` + `OUTBOX_STALE_MS`) would hold those events back for over a
/// minute. A due row whose job another worker still holds gets a second job, which finds it claimed or
/// delivered and does nothing.
pub async fn release_claims_of_past_life(
    pool: &DataPool,
    queue: &QueueClient,
    whose: PastClaims<'_>,
    boot_ms: i64,
) -> Result<usize, ReconcileError> {
    let claimer = match whose {
        PastClaims::MadeBy(id) => Some(id),
        PastClaims::All => None,
    };
    let mut ids = outbox::release_claims_before(pool, claimer, boot_ms, now_ms()).await?;
    if !ids.is_empty() {
        tracing::info!(
            released = ids.len(),
            "attempts a past life of this node left claimed are waiting again"
        );
    }
    let due = outbox::stale_waiting(pool, boot_ms, SWEEP_BATCH).await?;
    if !due.is_empty() {
        tracing::info!(due = due.len(), "rows due at boot are enqueued again");
    }
    ids.extend(due);
    ids.sort_unstable();
    ids.dedup();
    if ids.is_empty() {
        return Ok(0);
    }
    enqueue_outbox(pool, queue, &ids).await
}

/// Runs [`reconcile_outbox`] now and then every `interval` until `shutdown`.
pub fn spawn_reconciler(
    pool: DataPool,
    queue: QueueClient,
    settings: WebhookSettings,
    interval: Duration,
    stale_after: Duration,
    shutdown: CancellationToken,
) -> JoinHandle<()> {
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(interval);
        loop {
            tokio::select! {
                _ = shutdown.cancelled() => break,
                _ = tick.tick() => {}
            }
            if let Err(e) = reconcile_outbox(&pool, &queue, &settings, stale_after).await {
                tracing::warn!(error = %e, op = "reconcile_outbox", "outbox sweep failed");
            }
        }
    })
}
