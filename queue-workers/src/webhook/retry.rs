//! The delivery job handler: claim the job's outbox rows in one statement, make one attempt per row (at most
//! `WEBHOOK_DISPATCH_CONCURRENCY` in flight per process), then record the successes in bulk, schedule the next
//! attempt of each failure (our table owns the schedule; a new delayed job is pushed) or record the exhausted
//! delivery. Input: the row ids of one `WebhookDeliveryJob`. It does not speak HTTP itself (`deliver`) or hold
//! SQL (`store`).

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::StreamExt;
use tokio::sync::{OwnedSemaphorePermit, Semaphore, mpsc};
use tracing::Instrument;

use crate::db::{DataPool, now_ms};
use crate::queue::QueueClient;

use super::WebhookSettings;
use super::deliver::{
    AttemptOutcome, Delivery, WebhookClient, WireBody, deliver_once, envelope_body_within,
    is_blocked, new_delivery_id,
};
use super::store::StoreError;
use super::store::outbox::{self, ClaimedAttempt, FailureRecord, Success};
use super::store::webhooks::{self, WebhookTarget};
use super::writer::OutboxWriter;
use crate::telemetry::metrics::{
    EVENT_DELIVERY_LAG, WEBHOOK_DELIVERIES, WEBHOOK_DURATION, outcome as delivery_outcome,
};
use crate::telemetry::propagation;

/// The longest wait between two attempts, however many retries a webhook allows.
pub const MAX_BACKOFF_MS: u64 = 5 * 60 * 1000;

/// Queue timestamps have one-second resolution, so a delayed job can fire up to a second before its row is
/// due. A job this close to its row's due time waits in place; one further off is a duplicate and is dropped.
const EARLY_JOB_GRACE_MS: i64 = 3_000;

/// Rows claimed at once per dispatch slot. A claimed row is `delivering` until settled, so a claim stays small
/// enough that even a batch against a receiver that always times out settles well inside the reconciler's
/// stale-attempt window (`WEBHOOK_TIMEOUT` + the stale delay).
const CLAIM_PER_SLOT: usize = 4;
const CLAIM_MIN: usize = 16;

/// Finished attempts settled together (one transaction for their successes).
const SETTLE_CHUNK: usize = 64;

/// Groups of one job's finished attempts being settled at once: the next group goes to the outbox writer
/// while the previous one waits for its commit, so both share the writer's next transaction.
const SETTLES_IN_FLIGHT: usize = 2;

/// Attempts made (or in flight) and not yet recorded, per dispatch slot: the most a kill -9 of the process
/// delivers twice is `UNRECORDED_PER_SLOT x WEBHOOK_DISPATCH_CONCURRENCY`. An attempt's record waits for
/// the write turn behind the message commits; with one unrecorded attempt per slot, an inbound storm of
/// 5,000 events/s fell behind (3,400-4,000 deliveries/s, event-to-delivery p50 2.3 s at 64 slots), with
/// four it keeps up (4,900-4,975/s, p50 ~50 ms; docs/architecture.md "Measured").
pub const UNRECORDED_PER_SLOT: usize = 4;

/// What the handler needs, shared by every job of one worker process.
#[derive(Debug, Clone)]
pub struct DeliveryContext {
    pub pool: DataPool,
    pub queue: QueueClient,
    pub client: WebhookClient,
    pub settings: WebhookSettings,
    /// HTTP attempts in flight in this process, whatever job they belong to (`WEBHOOK_DISPATCH_CONCURRENCY`).
    slots: Arc<Semaphore>,
    /// Attempts in flight or made and not yet recorded in this process ([`UNRECORDED_PER_SLOT`] per slot).
    unrecorded: Arc<Semaphore>,
    /// Claims and settles of every job, committed together.
    writer: OutboxWriter,
}

impl DeliveryContext {
    pub fn new(
        pool: DataPool,
        queue: QueueClient,
        client: WebhookClient,
        settings: WebhookSettings,
    ) -> DeliveryContext {
        let slots = Arc::new(Semaphore::new(settings.dispatch_concurrency.max(1)));
        let unrecorded = Arc::new(Semaphore::new(
            settings.dispatch_concurrency.max(1) * UNRECORDED_PER_SLOT,
        ));
        DeliveryContext {
            unrecorded,
            writer: OutboxWriter::spawn(pool.clone(), settings.claimer.clone()),
            pool,
            queue,
            client,
            settings,
            slots,
        }
    }
}

/// The wait after the `failed_attempts`-th failed attempt: the base delay, doubled for each earlier failure,
/// capped at [`MAX_BACKOFF_MS`].
pub fn backoff_ms(base_ms: u64, failed_attempts: u32) -> u64 {
    let doublings = failed_attempts.saturating_sub(1).min(32);
    base_ms
        .saturating_mul(1u64 << doublings)
        .min(MAX_BACKOFF_MS)
}

/// Handles one delivery job for one row (see [`process_batch`]).
pub async fn process_delivery(ctx: &DeliveryContext, outbox_id: &str) -> Result<(), StoreError> {
    process_batch(ctx, &[outbox_id.to_owned()]).await
}

/// Handles one delivery job. Duplicate, early or stale rows do nothing: only due, waiting rows are claimed,
/// and only one claimer wins each. Rows claimed are delivered at once; a row due within the queue's rounding
/// is waited for afterwards.
pub async fn process_batch(ctx: &DeliveryContext, ids: &[String]) -> Result<(), StoreError> {
    process_traced_batch(ctx, ids, &BTreeMap::new()).await
}

/// [`process_batch`] for a job that carried the trace context of some rows: each attempt joins its row's
/// trace.
pub async fn process_traced_batch(
    ctx: &DeliveryContext,
    ids: &[String],
    traces: &BTreeMap<String, String>,
) -> Result<(), StoreError> {
    let chunk = (ctx.settings.dispatch_concurrency * CLAIM_PER_SLOT).max(CLAIM_MIN);
    let mut left: Vec<String> = Vec::new();
    for part in ids.chunks(chunk) {
        let claimed = ctx.writer.claim(part.to_vec()).await?;
        let got: HashSet<&str> = claimed.iter().map(|c| c.id.as_str()).collect();
        left.extend(part.iter().filter(|id| !got.contains(id.as_str())).cloned());
        dispatch(ctx, claimed, traces).await?;
    }
    for _ in 0..3 {
        if left.is_empty() {
            break;
        }
        let now = now_ms();
        // A row that became due since the claim missed it counts too (wait 0): dropping it would leave a
        // due row without a job until the reconciler's stale window.
        let early: Vec<(String, i64)> = outbox::states_of(&ctx.pool, &left)
            .await?
            .into_iter()
            .filter(|(_, status, due)| status.is_waiting() && *due - now <= EARLY_JOB_GRACE_MS)
            .map(|(id, _, due)| (id, due))
            .collect();
        let Some(wait) = early.iter().map(|(_, due)| (due - now).max(0)).max() else {
            break;
        };
        tokio::time::sleep(Duration::from_millis(wait.unsigned_abs())).await;
        left = early.into_iter().map(|(id, _)| id).collect();
        let claimed = ctx.writer.claim(left.clone()).await?;
        let got: HashSet<&str> = claimed.iter().map(|c| c.id.as_str()).collect();
        left.retain(|id| !got.contains(id.as_str()));
        dispatch(ctx, claimed, traces).await?;
    }
    Ok(())
}

/// What became of one claimed row's attempt.
enum Attempted {
    /// Sent, holding its unrecorded permit until its outcome is committed: attempts made and not yet
    /// recorded (the events a kill -9 delivers twice) stay within [`UNRECORDED_PER_SLOT`] x
    /// `WEBHOOK_DISPATCH_CONCURRENCY` per process.
    Sent(AttemptOutcome, Option<OwnedSemaphorePermit>),
    /// The body can never be sent (oversize or unreadable stored payload).
    NeverSent(String),
}

/// Attempts every claimed row, at most the process's dispatch concurrency at a time, settling attempts in
/// groups as they finish.
async fn dispatch(
    ctx: &DeliveryContext,
    claimed: Vec<ClaimedAttempt>,
    traces: &BTreeMap<String, String>,
) -> Result<(), StoreError> {
    if claimed.is_empty() {
        return Ok(());
    }
    let mut webhook_ids: Vec<String> = claimed.iter().map(|c| c.webhook_id.clone()).collect();
    webhook_ids.sort_unstable();
    webhook_ids.dedup();
    let targets: HashMap<String, Arc<WebhookTarget>> =
        webhooks::load_targets(&ctx.pool, &webhook_ids)
            .await?
            .into_iter()
            .map(|(id, t)| (id, Arc::new(t)))
            .collect();
    let mut live = Vec::with_capacity(claimed.len());
    let mut gone = Vec::new();
    for c in claimed {
        match targets.get(&c.webhook_id) {
            Some(target) if target.active => live.push((c, target.clone())),
            // Paused (say for the receiver's maintenance): kept in the failure log, where a redrive
            // delivers it once the webhook is active again, rather than dropped without a trace.
            Some(target) => deactivated(ctx, &c, target).await?,
            None => gone.push(c),
        }
    }
    if !gone.is_empty() {
        tracing::debug!(rows = gone.len(), "webhook deleted; dropping its rows");
        let ids: Vec<String> = gone.into_iter().map(|c| c.id).collect();
        outbox::drop_rows(&ctx.pool, &ids).await?;
    }
    // Attempts and settling run side by side in this task: while a group of finished attempts waits for its
    // write turn and commit, the next attempts are still started and polled. (Settling inside the loop that
    // drives the attempts paused every HTTP attempt for the length of each commit.)
    let (finished, settle_queue) = mpsc::unbounded_channel();
    let attempts = futures::stream::iter(live)
        .map(|(claimed, target)| {
            let trace = traces.get(&claimed.id).cloned();
            let span = attempt_span(&claimed, trace.as_deref());
            let kept = span.clone();
            async move {
                let outcome = attempt_one(ctx, &claimed, &target).await;
                (claimed, target, outcome, trace, kept)
            }
            .instrument(span)
        })
        .buffer_unordered(ctx.settings.dispatch_concurrency.max(1))
        .for_each(move |done| {
            // The receiver lives until every sender is gone, so this send cannot fail.
            let _ = finished.send(done);
            futures::future::ready(())
        });
    let settling = settle_as_they_finish(ctx, settle_queue);
    let ((), first_error) = futures::future::join(attempts, settling).await;
    first_error.map_or(Ok(()), Err)
}

/// Settles finished attempts as they arrive, in groups of up to [`SETTLE_CHUNK`], [`SETTLES_IN_FLIGHT`]
/// groups at a time, until every attempt has finished; answers the first error.
async fn settle_as_they_finish(
    ctx: &DeliveryContext,
    mut queue: mpsc::UnboundedReceiver<Finished>,
) -> Option<StoreError> {
    let mut first_error = None;
    let mut done = Vec::with_capacity(SETTLE_CHUNK);
    let mut settling = futures::stream::FuturesUnordered::new();
    let mut is_open = true;
    loop {
        tokio::select! {
            n = queue.recv_many(&mut done, SETTLE_CHUNK), if is_open && settling.len() < SETTLES_IN_FLIGHT => {
                if n == 0 {
                    is_open = false;
                } else {
                    settling.push(settle_all(ctx, std::mem::take(&mut done)));
                }
            }
            Some(result) = settling.next(), if !settling.is_empty() => {
                if let Err(e) = result {
                    // The rows stay `delivering`; the reconciler releases them once the attempt is stale.
                    tracing::warn!(error = %e, op = "webhook_settle", "cannot record delivery outcomes");
                    first_error.get_or_insert(e);
                }
            }
            else => break,
        }
    }
    first_error
}

/// One attempt's span: a child of its event's trace when the job carried it.
fn attempt_span(claimed: &ClaimedAttempt, trace: Option<&str>) -> tracing::Span {
    let span = tracing::info_span!(
        "webhook_attempt",
        outbox_id = %claimed.id,
        webhook_id = %claimed.webhook_id,
        session_id = %claimed.session_id,
        event = %claimed.event,
        attempt = claimed.attempts,
        trace_id = tracing::field::Empty,
    );
    propagation::adopt_traceparent(&span, trace);
    propagation::record_trace_id(&span);
    span
}

async fn attempt_one(
    ctx: &DeliveryContext,
    claimed: &ClaimedAttempt,
    target: &WebhookTarget,
) -> Attempted {
    let delivery_id = delivery_id_of(claimed);
    let max = ctx.settings.max_payload_bytes;
    let body = match envelope_body_within(&claimed.payload, &delivery_id, max) {
        Ok(WireBody::Fits(body)) => body,
        Ok(WireBody::TooLarge(len)) => {
            return Attempted::NeverSent(format!(
                "payload of {len} bytes exceeds WEBHOOK_MAX_PAYLOAD_BYTES ({max}); not dispatched"
            ));
        }
        Err(e) => return Attempted::NeverSent(e.to_string()),
    };
    // A closed semaphore never happens (neither is ever closed); then the attempt simply runs unbounded.
    let unrecorded = ctx.unrecorded.clone().acquire_owned().await.ok();
    let slot = ctx.slots.acquire().await.ok();
    let outcome = attempt(ctx, claimed, target, &delivery_id, &body).await;
    drop(slot);
    Attempted::Sent(outcome, unrecorded)
}

/// The claim sets the delivery id; a row claimed by an older worker may lack one.
fn delivery_id_of(claimed: &ClaimedAttempt) -> String {
    claimed.delivery_id.clone().unwrap_or_else(new_delivery_id)
}

/// One finished attempt: the row, its target, what happened, the row's trace context, and the attempt's span
/// (a failed attempt is settled inside it, so its log lines carry the row's trace id, not the job's).
type Finished = (
    ClaimedAttempt,
    Arc<WebhookTarget>,
    Attempted,
    Option<String>,
    tracing::Span,
);

/// Event created -> delivered, for rows whose creation time the claim returned.
fn observe_lag(claimed: &ClaimedAttempt, now: i64) {
    if claimed.created_at > 0 {
        let lag_ms = now.saturating_sub(claimed.created_at).max(0);
        metrics::histogram!(EVENT_DELIVERY_LAG).record(lag_ms as f64 / 1000.0);
    }
}

async fn settle_all(ctx: &DeliveryContext, done: Vec<Finished>) -> Result<(), StoreError> {
    let mut successes = Vec::new();
    let mut slots = Vec::with_capacity(done.len());
    let mut result = Ok(());
    let now = now_ms();
    for (claimed, target, attempted, trace, span) in done {
        let delivery_id = delivery_id_of(&claimed);
        let settled = match attempted {
            Attempted::Sent(AttemptOutcome::Delivered { status_code }, slot) => {
                slots.push(slot);
                observe_lag(&claimed, now);
                successes.push(Success {
                    outbox_id: claimed.id,
                    webhook_id: claimed.webhook_id,
                    status_code,
                });
                Ok(())
            }
            Attempted::Sent(outcome, slot) => {
                slots.push(slot);
                let attempt = Settling {
                    claimed: &claimed,
                    target: &target,
                    delivery_id: &delivery_id,
                    trace: trace.as_deref(),
                };
                settle(ctx, &attempt, outcome).instrument(span).await
            }
            Attempted::NeverSent(why) => {
                never_dispatched(ctx, &claimed, &target, &delivery_id, &why)
                    .instrument(span)
                    .await
            }
        };
        if let Err(e) = settled {
            tracing::warn!(error = %e, op = "webhook_settle", "cannot record a delivery outcome");
            result = Err(e);
        }
    }
    if !successes.is_empty() {
        let n = successes.len() as u64;
        ctx.writer.settle(successes).await?;
        metrics::counter!(WEBHOOK_DELIVERIES, "outcome" => delivery_outcome::SUCCESS).increment(n);
    }
    drop(slots);
    result
}

async fn attempt(
    ctx: &DeliveryContext,
    claimed: &ClaimedAttempt,
    target: &WebhookTarget,
    delivery_id: &str,
    body: &[u8],
) -> AttemptOutcome {
    let d = Delivery {
        url: &target.url,
        event: &claimed.event,
        idempotency_key: &claimed.idempotency_key,
        delivery_id,
        retry_count: u32::try_from(claimed.attempts - 1).unwrap_or(0),
        secret: target.secret.as_deref(),
        custom_headers: Some(&target.headers),
        body,
    };
    let started = Instant::now();
    let outcome = deliver_once(&ctx.client, &d).await;
    metrics::histogram!(WEBHOOK_DURATION).record(started.elapsed().as_secs_f64());
    outcome
}

/// A claimed row being settled after a failed attempt.
struct Settling<'a> {
    claimed: &'a ClaimedAttempt,
    target: &'a WebhookTarget,
    delivery_id: &'a str,
    trace: Option<&'a str>,
}

/// A status code for a log line: the number, or `none` when the receiver never answered.
struct StatusText(Option<i32>);

impl std::fmt::Display for StatusText {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.0 {
            Some(code) => write!(f, "{code}"),
            None => f.write_str("none"),
        }
    }
}

async fn settle(
    ctx: &DeliveryContext,
    s: &Settling<'_>,
    outcome: AttemptOutcome,
) -> Result<(), StoreError> {
    let Settling {
        claimed,
        target,
        delivery_id,
        trace,
    } = *s;
    let code = outcome.status_code().map(i32::from);
    let blocked = is_blocked(&outcome);
    let error = match outcome {
        AttemptOutcome::Delivered { status_code } => {
            observe_lag(claimed, now_ms());
            metrics::counter!(WEBHOOK_DELIVERIES, "outcome" => delivery_outcome::SUCCESS)
                .increment(1);
            return outbox::record_success(&ctx.pool, claimed, status_code, now_ms()).await;
        }
        AttemptOutcome::Failed { error, .. } => error,
    };
    let retries = claimed.attempts <= target.retry_count;
    let counted = match (blocked, retries) {
        (true, _) => delivery_outcome::BLOCKED,
        (false, true) => delivery_outcome::RETRY,
        (false, false) => delivery_outcome::FAILED,
    };
    metrics::counter!(WEBHOOK_DELIVERIES, "outcome" => counted).increment(1);
    if retries {
        tracing::info!(
            webhook_id = %claimed.webhook_id, session_id = %claimed.session_id, event = %claimed.event,
            outbox_id = %claimed.id, attempts = claimed.attempts, status_code = %StatusText(code), %error,
            "webhook delivery attempt failed; retrying"
        );
        return schedule_retry(ctx, claimed, code, &error, trace).await;
    }
    tracing::warn!(
        webhook_id = %claimed.webhook_id, session_id = %claimed.session_id, event = %claimed.event,
        outbox_id = %claimed.id, attempts = claimed.attempts, status_code = %StatusText(code), %error,
        "webhook delivery failed; recorded in the delivery-failure log"
    );
    let record = FailureRecord {
        claimed,
        url: &target.url,
        delivery_id,
        attempts: claimed.attempts,
        last_status_code: code,
        last_error: &error,
    };
    outbox::record_failure(&ctx.pool, &record, now_ms()).await
}

async fn schedule_retry(
    ctx: &DeliveryContext,
    claimed: &ClaimedAttempt,
    code: Option<i32>,
    error: &str,
    trace: Option<&str>,
) -> Result<(), StoreError> {
    let failed = u32::try_from(claimed.attempts).unwrap_or(1);
    let delay_ms = backoff_ms(ctx.settings.retry_delay_ms, failed);
    let now = now_ms();
    let due = now.saturating_add(i64::try_from(delay_ms).unwrap_or(i64::MAX));
    outbox::schedule_retry(&ctx.pool, &claimed.id, due, code, error, now).await?;
    let traces: BTreeMap<String, String> = trace
        .map(|t| BTreeMap::from([(claimed.id.clone(), t.to_owned())]))
        .unwrap_or_default();
    if let Err(e) = ctx
        .queue
        .push_traced_deliveries(
            vec![claimed.id.clone()],
            traces,
            Some(Duration::from_millis(delay_ms)),
        )
        .await
    {
        // The row is `retrying` and will be due; the reconciler re-enqueues it once it is stale.
        tracing::warn!(outbox_id = %claimed.id, error = %e, "cannot push the retry job");
    }
    Ok(())
}

/// The webhook was deactivated while the row waited: a failure row with the attempts made so far.
async fn deactivated(
    ctx: &DeliveryContext,
    claimed: &ClaimedAttempt,
    target: &WebhookTarget,
) -> Result<(), StoreError> {
    const WHY: &str = "webhook deactivated before delivery";
    tracing::warn!(
        webhook_id = %claimed.webhook_id, session_id = %claimed.session_id, event = %claimed.event,
        outbox_id = %claimed.id, "webhook inactive; delivery recorded in the delivery-failure log"
    );
    metrics::counter!(WEBHOOK_DELIVERIES, "outcome" => delivery_outcome::FAILED).increment(1);
    let record = FailureRecord {
        claimed,
        url: &target.url,
        delivery_id: &delivery_id_of(claimed),
        // `attempts` already counts the attempt this claim would have made.
        attempts: (claimed.attempts - 1).max(0),
        last_status_code: None,
        last_error: WHY,
    };
    outbox::record_failure(&ctx.pool, &record, now_ms()).await
}

/// The row can never be sent (oversize or unreadable payload): a failure row with `attempts` 0.
async fn never_dispatched(
    ctx: &DeliveryContext,
    claimed: &ClaimedAttempt,
    target: &WebhookTarget,
    delivery_id: &str,
    why: &str,
) -> Result<(), StoreError> {
    tracing::warn!(
        webhook_id = %claimed.webhook_id, session_id = %claimed.session_id, event = %claimed.event,
        outbox_id = %claimed.id, reason = why, "webhook payload not dispatched"
    );
    metrics::counter!(WEBHOOK_DELIVERIES, "outcome" => delivery_outcome::BLOCKED).increment(1);
    let record = FailureRecord {
        claimed,
        url: &target.url,
        delivery_id,
        attempts: 0,
        last_status_code: None,
        last_error: why,
    };
    outbox::record_failure(&ctx.pool, &record, now_ms()).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_from_the_base_and_is_capped() {
        assert_eq!(backoff_ms(5_000, 1), 5_000);
        assert_eq!(backoff_ms(5_000, 2), 10_000);
        assert_eq!(backoff_ms(5_000, 3), 20_000);
        assert_eq!(backoff_ms(5_000, 7), MAX_BACKOFF_MS);
        assert_eq!(backoff_ms(5_000, 40), MAX_BACKOFF_MS);
        assert_eq!(backoff_ms(u64::MAX, 3), MAX_BACKOFF_MS);
    }
}
