//! Runs the apalis workers for `webhook-queue` and `ingress-queue` until shutdown, restarting a worker whose
//! backend fails. Input: settings, the data pool and a [`QueueClient`]. Used by `wagate-worker` and by the node
//! with `ROLE=all`. Job handlers always answer `Ok`: outcomes live in our tables, not in apalis.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use apalis::prelude::{BackendExt, BoxDynError, Data, WorkerBuilder, WorkerBuilderExt};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;
use wagate_proto::jobs::{IngressJob, WebhookDeliveryJob};

use crate::db::DataPool;
use crate::ingress::process_ingress;
use crate::queue::{QueueClient, Storages};
use crate::wake::{self, Pushers};
use crate::webhook::WebhookSettings;
use crate::webhook::deliver::{DeliverError, WebhookClient};
use crate::webhook::retry::{DeliveryContext, process_traced_batch};

/// How often, and after how long, finished jobs are deleted from the queue storage.
const VACUUM_EVERY: Duration = Duration::from_secs(600);
const KEEP_FINISHED: Duration = Duration::from_secs(3600);

/// Pause before restarting a worker whose backend failed (Redis gone, SQLite locked).
const RESTART_PAUSE: Duration = Duration::from_secs(1);

#[derive(Debug, thiserror::Error)]
pub enum WorkersError {
    #[error(transparent)]
    Client(#[from] DeliverError),
}

/// Jobs a worker's handler is running now. At shutdown apalis waits for them, but it can also wait for
/// ever on jobs it fetched and will no longer start (seen with more jobs in flight than its concurrency);
/// once the running ones are done, [`supervise`] stops waiting.
#[derive(Debug, Clone, Default)]
struct JobGauge(Arc<AtomicUsize>);

struct Running<'a>(&'a AtomicUsize);

impl Drop for Running<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

impl JobGauge {
    fn enter(&self) -> Running<'_> {
        self.0.fetch_add(1, Ordering::SeqCst);
        Running(&self.0)
    }

    /// Resolves once `shutdown` has fired and no job has run for two looks in a row, or `grace` after
    /// `shutdown`, whichever is first. Jobs fetched but never started keep their rows `queued`: the next
    /// boot (or the outbox sweep) enqueues them again.
    async fn drained_after(&self, shutdown: &CancellationToken, grace: Duration) -> bool {
        shutdown.cancelled().await;
        let deadline = tokio::time::Instant::now() + grace;
        let mut idle_looks = 0;
        while tokio::time::Instant::now() < deadline {
            idle_looks = match self.0.load(Ordering::SeqCst) {
                0 => idle_looks + 1,
                _ => 0,
            };
            if idle_looks >= 2 {
                return true;
            }
            tokio::time::sleep(DRAIN_LOOK).await;
        }
        false
    }
}

/// How often a stopping worker looks whether its running jobs are done.
const DRAIN_LOOK: Duration = Duration::from_millis(100);

async fn handle_delivery(
    job: WebhookDeliveryJob,
    ctx: Data<Arc<DeliveryContext>>,
    gauge: Data<JobGauge>,
) -> Result<(), BoxDynError> {
    let _running = gauge.enter();
    let (ids, traces) = job.into_parts();
    let span = tracing::info_span!(
        "webhook_delivery_job",
        rows = ids.len(),
        trace_id = tracing::field::Empty
    );
    // A job's rows may come from several events; the job joins the first traced one, and each attempt its own.
    crate::telemetry::propagation::adopt_traceparent(
        &span,
        traces.values().next().map(String::as_str),
    );
    crate::telemetry::propagation::record_trace_id(&span);
    if let Err(e) = process_traced_batch(&ctx, &ids, &traces)
        .instrument(span)
        .await
    {
        // The rows stay where they were; the outbox reconciler re-enqueues them once they are stale.
        tracing::warn!(rows = ids.len(), error = %e, op = "webhook_delivery", "delivery job failed");
    }
    Ok(())
}

async fn handle_ingress(
    job: IngressJob,
    pool: Data<DataPool>,
    gauge: Data<JobGauge>,
) -> Result<(), BoxDynError> {
    let _running = gauge.enter();
    match process_ingress(&pool, &job.ingress_event_id).await {
        Ok(false) => {
            tracing::debug!(id = %job.ingress_event_id, "ingress event missing or already processed")
        }
        Ok(true) => {}
        Err(e) => {
            tracing::warn!(id = %job.ingress_event_id, error = %e, op = "ingress", "ingress job failed")
        }
    }
    Ok(())
}

/// Starts both workers; the returned task ends once `shutdown` fires and in-flight jobs have finished.
pub fn spawn_workers(
    settings: WebhookSettings,
    pool: DataPool,
    queue: QueueClient,
    shutdown: CancellationToken,
) -> Result<JoinHandle<()>, WorkersError> {
    let client = WebhookClient::new(&settings)?;
    let concurrency = settings.dispatch_concurrency.max(1);
    // A job's attempts each take up to WEBHOOK_TIMEOUT; past this a stopping worker stops waiting.
    let stop_grace = Duration::from_secs(30)
        .max(Duration::from_millis(settings.timeout_ms) + Duration::from_secs(5));
    let poll = match queue.config.pushers {
        Pushers::AnyProcess => Some(Duration::from_millis(queue.config.poll_interval_ms.max(10))),
        Pushers::ThisProcess => None,
    };
    let ctx = Arc::new(DeliveryContext::new(
        pool.clone(),
        queue.clone(),
        client,
        settings,
    ));
    let (webhook_wake, ingress_wake) = (queue.wakes.webhook.clone(), queue.wakes.ingress.clone());
    let suffix = uuid::Uuid::new_v4().simple().to_string();
    let (wh_name, in_name) = (
        format!("wagate-webhook-{suffix}"),
        format!("wagate-ingress-{suffix}"),
    );
    let shutdown_for_vacuum = shutdown.clone();
    let (wh_gauge, in_gauge) = (JobGauge::default(), JobGauge::default());
    let drain = |gauge: &JobGauge| Drain {
        gauge: gauge.clone(),
        grace: stop_grace,
    };
    // The two storages are different types behind the same builder calls.
    macro_rules! start_workers {
        ($webhook:ident, $ingress:ident) => {{
            let t = shutdown.clone();
            let wh = supervise(
                wh_name.clone(),
                shutdown.clone(),
                drain(&wh_gauge),
                move || {
                    let w = WorkerBuilder::new(wh_name.as_str())
                        .backend(
                            $webhook
                                .clone()
                                .poll_with_stream(wake::stream(webhook_wake.clone(), poll)),
                        )
                        .concurrency(concurrency)
                        .data(ctx.clone())
                        .data(wh_gauge.clone())
                        .build(handle_delivery);
                    let t = t.clone();
                    async move { w.run_until(cancelled(t)).await }
                },
            );
            let t = shutdown.clone();
            let ing = supervise(in_name.clone(), shutdown, drain(&in_gauge), move || {
                let w = WorkerBuilder::new(in_name.as_str())
                    .backend(
                        $ingress
                            .clone()
                            .poll_with_stream(wake::stream(ingress_wake.clone(), poll)),
                    )
                    .data(pool.clone())
                    .data(in_gauge.clone())
                    .build(handle_ingress);
                let t = t.clone();
                async move { w.run_until(cancelled(t)).await }
            });
            (wh, ing)
        }};
    }
    let (webhook, ingress) = match queue.storages.clone() {
        Storages::Sqlite { webhook, ingress } => start_workers!(webhook, ingress),
        Storages::Redis { webhook, ingress } => start_workers!(webhook, ingress),
    };
    let vacuum = spawn_vacuum(queue, shutdown_for_vacuum);
    Ok(tokio::spawn(async move {
        let _ = tokio::join!(webhook, ingress, vacuum);
    }))
}

fn spawn_vacuum(queue: QueueClient, shutdown: CancellationToken) -> JoinHandle<()> {
    tokio::spawn(async move {
        loop {
            tokio::select! {
                _ = shutdown.cancelled() => break,
                _ = tokio::time::sleep(VACUUM_EVERY) => {}
            }
            match queue.vacuum_finished(KEEP_FINISHED).await {
                Ok(n) => tracing::debug!(deleted = n, "queue vacuumed"),
                Err(e) => tracing::warn!(error = %e, op = "queue_vacuum", "queue vacuum failed"),
            }
        }
    })
}

async fn cancelled(token: CancellationToken) -> Result<(), std::io::Error> {
    token.cancelled().await;
    Ok(())
}

/// When a stopping worker stops waiting for apalis (see [`JobGauge`]).
struct Drain {
    gauge: JobGauge,
    grace: Duration,
}

/// Runs one worker, building a fresh one after a failure, until `shutdown` and then until its running jobs
/// are done (`drain`).
fn supervise<F, Fut, E>(
    name: String,
    shutdown: CancellationToken,
    drain: Drain,
    run: F,
) -> JoinHandle<()>
where
    F: Fn() -> Fut + Send + 'static,
    Fut: Future<Output = Result<(), E>> + Send,
    E: std::fmt::Display + Send,
{
    tokio::spawn(async move {
        loop {
            let result = tokio::select! {
                result = run() => result,
                drained = drain.gauge.drained_after(&shutdown, drain.grace) => {
                    if !drained {
                        tracing::warn!(worker = %name, grace_ms = drain.grace.as_millis() as u64,
                            "jobs still running at the end of the stop grace are left to the next boot");
                    }
                    break;
                }
            };
            if shutdown.is_cancelled() {
                break;
            }
            match result {
                Ok(()) => tracing::warn!(worker = %name, "worker stopped on its own; restarting"),
                Err(e) => tracing::warn!(worker = %name, error = %e, "worker failed; restarting"),
            }
            tokio::select! {
                _ = shutdown.cancelled() => break,
                _ = tokio::time::sleep(RESTART_PAUSE) => {}
            }
        }
    })
}
