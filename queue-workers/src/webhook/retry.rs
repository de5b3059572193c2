//! The delivery job handler: claim the outbox row, make one attempt, then record success, schedule the next
//! attempt (our table owns the schedule; a new delayed job is pushed) or record the exhausted delivery.
//! Input: one `WebhookDeliveryJob`. It does not speak HTTP itself (`deliver`) or hold SQL (`store`).

use std::time::Duration;

use crate::db::{DataPool, now_ms};
use crate::queue::QueueClient;

use super::WebhookSettings;
use super::deliver::{
    AttemptOutcome, Delivery, WebhookClient, deliver_once, envelope_body, new_delivery_id,
};
use super::store::{self, ClaimedAttempt, FailureRecord, StoreError, WebhookTarget};

/// The longest wait between two attempts, however many retries a webhook allows.
pub const MAX_BACKOFF_MS: u64 = 5 * 60 * 1000;

/// Queue timestamps have one-second resolution, so a delayed job can fire up to a second before its row is
/// due. A job this close to its row's due time waits in place; one further off is a duplicate and is dropped.
const EARLY_JOB_GRACE_MS: i64 = 3_000;

/// What the handler needs, shared by every job of one worker process.
#[derive(Debug, Clone)]
pub struct DeliveryContext {
    pub pool: DataPool,
    pub queue: QueueClient,
    pub client: WebhookClient,
    pub settings: WebhookSettings,
}

/// The wait after the `failed_attempts`-th failed attempt: the base delay, doubled for each earlier failure,
/// capped at [`MAX_BACKOFF_MS`].
pub fn backoff_ms(base_ms: u64, failed_attempts: u32) -> u64 {
    let doublings = failed_attempts.saturating_sub(1).min(32);
    base_ms
        .saturating_mul(1u64 << doublings)
        .min(MAX_BACKOFF_MS)
}

/// Handles one delivery job. Duplicate, early or stale jobs do nothing: only a due, waiting row is claimed,
/// and only one claimer wins.
pub async fn process_delivery(ctx: &DeliveryContext, outbox_id: &str) -> Result<(), StoreError> {
    let Some(claimed) = claim_when_due(&ctx.pool, outbox_id).await? else {
        return Ok(());
    };
    let target = store::load_target(&ctx.pool, &claimed.webhook_id).await?;
    let Some(target) = target.filter(|t| t.active) else {
        tracing::debug!(outbox_id, webhook_id = %claimed.webhook_id, "webhook gone or inactive; dropping row");
        return store::drop_row(&ctx.pool, outbox_id).await;
    };
    let delivery_id = claimed.delivery_id.clone().unwrap_or_else(new_delivery_id);
    let body = match envelope_body(&claimed.payload, &delivery_id) {
        Ok(body) => body,
        Err(e) => {
            return never_dispatched(ctx, &claimed, &target, &delivery_id, &e.to_string()).await;
        }
    };
    if body.len() > ctx.settings.max_payload_bytes {
        let why = format!(
            "payload of {} bytes exceeds WEBHOOK_MAX_PAYLOAD_BYTES ({}); not dispatched",
            body.len(),
            ctx.settings.max_payload_bytes
        );
        return never_dispatched(ctx, &claimed, &target, &delivery_id, &why).await;
    }
    let outcome = attempt(ctx, &claimed, &target, &delivery_id, &body).await;
    settle(ctx, &claimed, &target, &delivery_id, outcome).await
}

/// Claims the row, waiting out the queue's rounding when the job fired just before the row is due.
async fn claim_when_due(
    pool: &DataPool,
    outbox_id: &str,
) -> Result<Option<ClaimedAttempt>, StoreError> {
    let fresh_id = new_delivery_id();
    for _ in 0..3 {
        let now = now_ms();
        if let Some(c) = store::claim_attempt(pool, outbox_id, &fresh_id, now).await? {
            return Ok(Some(c));
        }
        let wait = match store::outbox_state(pool, outbox_id).await? {
            Some((status, due))
                if status.is_waiting() && due > now && due - now <= EARLY_JOB_GRACE_MS =>
            {
                due - now
            }
            _ => return Ok(None),
        };
        tokio::time::sleep(Duration::from_millis(wait.unsigned_abs())).await;
    }
    Ok(None)
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
    deliver_once(&ctx.client, &d).await
}

async fn settle(
    ctx: &DeliveryContext,
    claimed: &ClaimedAttempt,
    target: &WebhookTarget,
    delivery_id: &str,
    outcome: AttemptOutcome,
) -> Result<(), StoreError> {
    let code = outcome.status_code().map(i32::from);
    let error = match outcome {
        AttemptOutcome::Delivered { status_code } => {
            metrics::counter!("wagate_webhook_deliveries_total", "outcome" => "delivered")
                .increment(1);
            return store::record_success(&ctx.pool, claimed, status_code, now_ms()).await;
        }
        AttemptOutcome::Failed { error, .. } => error,
    };
    tracing::info!(outbox_id = %claimed.id, attempts = claimed.attempts, status = ?code, %error, "webhook attempt failed");
    if claimed.attempts <= target.retry_count {
        return schedule_retry(ctx, claimed, code, &error).await;
    }
    metrics::counter!("wagate_webhook_deliveries_total", "outcome" => "failed").increment(1);
    let record = FailureRecord {
        claimed,
        url: &target.url,
        delivery_id,
        attempts: claimed.attempts,
        last_status_code: code,
        last_error: &error,
    };
    store::record_failure(&ctx.pool, &record, now_ms()).await
}

async fn schedule_retry(
    ctx: &DeliveryContext,
    claimed: &ClaimedAttempt,
    code: Option<i32>,
    error: &str,
) -> Result<(), StoreError> {
    let failed = u32::try_from(claimed.attempts).unwrap_or(1);
    let delay_ms = backoff_ms(ctx.settings.retry_delay_ms, failed);
    let now = now_ms();
    let due = now.saturating_add(i64::try_from(delay_ms).unwrap_or(i64::MAX));
    store::schedule_retry(&ctx.pool, &claimed.id, due, code, error, now).await?;
    if let Err(e) = ctx
        .queue
        .push_delivery(&claimed.id, Some(Duration::from_millis(delay_ms)))
        .await
    {
        // The row is `retrying` and will be due; the reconciler re-enqueues it once it is stale.
        tracing::warn!(outbox_id = %claimed.id, error = %e, "cannot push the retry job");
    }
    Ok(())
}

/// The row can never be sent (oversize or unreadable payload): a failure row with `attempts` 0.
async fn never_dispatched(
    ctx: &DeliveryContext,
    claimed: &ClaimedAttempt,
    target: &WebhookTarget,
    delivery_id: &str,
    why: &str,
) -> Result<(), StoreError> {
    tracing::warn!(outbox_id = %claimed.id, reason = why, "webhook payload not dispatched");
    metrics::counter!("wagate_webhook_deliveries_total", "outcome" => "not_dispatched")
        .increment(1);
    let record = FailureRecord {
        claimed,
        url: &target.url,
        delivery_id,
        attempts: 0,
        last_status_code: None,
        last_error: why,
    };
    store::record_failure(&ctx.pool, &record, now_ms()).await
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
