//! SQL for the webhook outbox state machine, the delivery-failure log and `webhooks.last_triggered_at`.
//! Input: a [`DataPool`] (SQLite or PostgreSQL; one SQL text serves both). It does not decide when to retry.
//!
//! Outbox row status: `pending` (written by the node) -> `queued` (a job was pushed) -> `delivering` (claimed
//! by one worker for one attempt) -> `delivered` | `retrying` (next job pushed with a delay) | `failed`.

use std::str::FromStr;

use crate::db::DataPool;
use crate::on_pool;

const CLAIM_ATTEMPT: &str = "UPDATE webhook_outbox_events \
     SET status = 'delivering', attempts = attempts + 1, delivery_id = COALESCE(delivery_id, $2), updated_at = $3 \
     WHERE id = $1 AND status IN ('pending', 'queued', 'retrying') AND next_attempt_at <= $3 \
     RETURNING id, webhook_id, session_id, event, idempotency_key, payload, attempts, delivery_id";
const SELECT_OUTBOX_STATE: &str =
    "SELECT status, next_attempt_at FROM webhook_outbox_events WHERE id = $1";
const SELECT_TARGET: &str =
    "SELECT url, secret, headers, active, retry_count FROM webhooks WHERE id = $1";
const DELETE_OUTBOX: &str = "DELETE FROM webhook_outbox_events WHERE id = $1";
const MARK_DELIVERED: &str = "UPDATE webhook_outbox_events \
     SET status = 'delivered', last_status_code = $2, last_error = NULL, updated_at = $3 WHERE id = $1";
const TOUCH_WEBHOOK: &str = "UPDATE webhooks SET last_triggered_at = $2 WHERE id = $1";
const SCHEDULE_RETRY: &str = "UPDATE webhook_outbox_events \
     SET status = 'retrying', next_attempt_at = $2, last_status_code = $3, last_error = $4, updated_at = $5 \
     WHERE id = $1 AND status = 'delivering'";
const MARK_FAILED: &str = "UPDATE webhook_outbox_events \
     SET status = 'failed', last_status_code = $2, last_error = $3, updated_at = $4 WHERE id = $1";
const INSERT_FAILURE: &str = "INSERT INTO webhook_delivery_failures \
     (id, webhook_id, session_id, event, url, idempotency_key, delivery_id, attempts, last_status_code, \
      last_error, payload, created_at) \
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)";
const MARK_QUEUED: &str = "UPDATE webhook_outbox_events SET status = 'queued', updated_at = $2 \
     WHERE id = $1 AND status IN ('pending', 'queued', 'retrying')";
const SELECT_STALE_WAITING: &str = "SELECT id FROM webhook_outbox_events \
     WHERE status IN ('pending', 'queued', 'retrying') AND next_attempt_at <= $1 AND updated_at <= $1 \
     ORDER BY next_attempt_at LIMIT $2";
const RESET_STALE_INFLIGHT: &str = "UPDATE webhook_outbox_events \
     SET status = 'retrying', attempts = attempts - 1, updated_at = $2 \
     WHERE status = 'delivering' AND updated_at <= $1";

/// A database failure in the outbox store.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("outbox database error: {0}")]
    Db(#[from] sqlx::Error),
    #[error("unknown outbox status {0:?}")]
    UnknownStatus(String),
}

/// The status column of `webhook_outbox_events`, spelled as the SQL above spells it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OutboxStatus {
    Pending,
    Queued,
    Delivering,
    Retrying,
    Delivered,
    Failed,
}

impl OutboxStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            OutboxStatus::Pending => "pending",
            OutboxStatus::Queued => "queued",
            OutboxStatus::Delivering => "delivering",
            OutboxStatus::Retrying => "retrying",
            OutboxStatus::Delivered => "delivered",
            OutboxStatus::Failed => "failed",
        }
    }

    /// Waiting for an attempt: a job for the row may claim it once it is due.
    pub fn is_waiting(self) -> bool {
        matches!(
            self,
            OutboxStatus::Pending | OutboxStatus::Queued | OutboxStatus::Retrying
        )
    }
}

impl FromStr for OutboxStatus {
    type Err = StoreError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Ok(match s {
            "pending" => OutboxStatus::Pending,
            "queued" => OutboxStatus::Queued,
            "delivering" => OutboxStatus::Delivering,
            "retrying" => OutboxStatus::Retrying,
            "delivered" => OutboxStatus::Delivered,
            "failed" => OutboxStatus::Failed,
            other => return Err(StoreError::UnknownStatus(other.to_owned())),
        })
    }
}

/// An outbox row this worker has claimed for one attempt; `attempts` already counts this attempt.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct ClaimedAttempt {
    pub id: String,
    pub webhook_id: String,
    pub session_id: String,
    pub event: String,
    pub idempotency_key: String,
    pub payload: String,
    pub attempts: i32,
    pub delivery_id: Option<String>,
}

/// Where and how to deliver, read from `webhooks` for each attempt so edits apply to the next retry.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct WebhookTarget {
    pub url: String,
    pub secret: Option<String>,
    pub headers: String,
    pub active: bool,
    pub retry_count: i32,
}

/// A delivery-failure row (wire-notes §12), written when a delivery is exhausted or never dispatchable.
#[derive(Debug, Clone)]
pub struct FailureRecord<'a> {
    pub claimed: &'a ClaimedAttempt,
    pub url: &'a str,
    pub delivery_id: &'a str,
    /// Attempts made; 0 when the row was never dispatched (oversize payload).
    pub attempts: i32,
    pub last_status_code: Option<i32>,
    pub last_error: &'a str,
}

#[derive(sqlx::FromRow)]
struct StateRow {
    status: String,
    next_attempt_at: i64,
}

/// Claims one attempt of a due, waiting row. `None` when the row is gone, not waiting, not yet due, or
/// another worker claimed it first: the conditional UPDATE lets exactly one claimer through.
pub async fn claim_attempt(
    pool: &DataPool,
    outbox_id: &str,
    new_delivery_id: &str,
    now_ms: i64,
) -> Result<Option<ClaimedAttempt>, StoreError> {
    Ok(on_pool!(pool, |p| sqlx::query_as::<_, ClaimedAttempt>(
        CLAIM_ATTEMPT
    )
    .bind(outbox_id)
    .bind(new_delivery_id)
    .bind(now_ms)
    .fetch_optional(p)
    .await)?)
}

/// The row's status and due time, or `None` when it no longer exists.
pub async fn outbox_state(
    pool: &DataPool,
    outbox_id: &str,
) -> Result<Option<(OutboxStatus, i64)>, StoreError> {
    let row = on_pool!(pool, |p| sqlx::query_as::<_, StateRow>(SELECT_OUTBOX_STATE)
        .bind(outbox_id)
        .fetch_optional(p)
        .await)?;
    row.map(|r| Ok((r.status.parse()?, r.next_attempt_at)))
        .transpose()
}

pub async fn load_target(
    pool: &DataPool,
    webhook_id: &str,
) -> Result<Option<WebhookTarget>, StoreError> {
    Ok(on_pool!(pool, |p| sqlx::query_as::<_, WebhookTarget>(
        SELECT_TARGET
    )
    .bind(webhook_id)
    .fetch_optional(p)
    .await)?)
}

/// Drops a row whose webhook was deleted or deactivated: nothing will ever deliver it.
pub async fn drop_row(pool: &DataPool, outbox_id: &str) -> Result<(), StoreError> {
    on_pool!(pool, |p| sqlx::query(DELETE_OUTBOX)
        .bind(outbox_id)
        .execute(p)
        .await
        .map(|r| r.rows_affected()))?;
    Ok(())
}

/// A 2xx: the row is delivered and the webhook's `last_triggered_at` moves, in one transaction.
pub async fn record_success(
    pool: &DataPool,
    claimed: &ClaimedAttempt,
    status_code: u16,
    now_ms: i64,
) -> Result<(), StoreError> {
    on_pool!(pool, |p| {
        let mut tx = p.begin().await?;
        sqlx::query(MARK_DELIVERED)
            .bind(&claimed.id)
            .bind(i32::from(status_code))
            .bind(now_ms)
            .execute(&mut *tx)
            .await?;
        sqlx::query(TOUCH_WEBHOOK)
            .bind(&claimed.webhook_id)
            .bind(now_ms)
            .execute(&mut *tx)
            .await?;
        tx.commit().await
    })?;
    Ok(())
}

/// A failed attempt with retries left: the row waits until `next_attempt_at`.
pub async fn schedule_retry(
    pool: &DataPool,
    outbox_id: &str,
    next_attempt_at: i64,
    status_code: Option<i32>,
    error: &str,
    now_ms: i64,
) -> Result<(), StoreError> {
    on_pool!(pool, |p| sqlx::query(SCHEDULE_RETRY)
        .bind(outbox_id)
        .bind(next_attempt_at)
        .bind(status_code)
        .bind(error)
        .bind(now_ms)
        .execute(p)
        .await
        .map(|r| r.rows_affected()))?;
    Ok(())
}

/// Exhausted (or undeliverable): insert the failure row and mark the outbox row failed, in one transaction.
pub async fn record_failure(
    pool: &DataPool,
    f: &FailureRecord<'_>,
    now_ms: i64,
) -> Result<(), StoreError> {
    let c = f.claimed;
    let failure_id = uuid::Uuid::new_v4().to_string();
    on_pool!(pool, |p| {
        let mut tx = p.begin().await?;
        sqlx::query(INSERT_FAILURE)
            .bind(&failure_id)
            .bind(&c.webhook_id)
            .bind(&c.session_id)
            .bind(&c.event)
            .bind(f.url)
            .bind(&c.idempotency_key)
            .bind(f.delivery_id)
            .bind(f.attempts)
            .bind(f.last_status_code)
            .bind(f.last_error)
            .bind(&c.payload)
            .bind(now_ms)
            .execute(&mut *tx)
            .await?;
        sqlx::query(MARK_FAILED)
            .bind(&c.id)
            .bind(f.last_status_code)
            .bind(f.last_error)
            .bind(now_ms)
            .execute(&mut *tx)
            .await?;
        tx.commit().await
    })?;
    Ok(())
}

/// Marks a waiting row queued just before its job is pushed; `false` when the row is not waiting any more.
pub async fn mark_queued(
    pool: &DataPool,
    outbox_id: &str,
    now_ms: i64,
) -> Result<bool, StoreError> {
    let done = on_pool!(pool, |p| sqlx::query(MARK_QUEUED)
        .bind(outbox_id)
        .bind(now_ms)
        .execute(p)
        .await
        .map(|r| r.rows_affected()))?;
    Ok(done == 1)
}

/// Waiting rows that have been due, and untouched, since `stale_before_ms`: their job was lost.
pub async fn stale_waiting(
    pool: &DataPool,
    stale_before_ms: i64,
    limit: i64,
) -> Result<Vec<String>, StoreError> {
    Ok(on_pool!(pool, |p| sqlx::query_scalar::<_, String>(
        SELECT_STALE_WAITING
    )
    .bind(stale_before_ms)
    .bind(limit)
    .fetch_all(p)
    .await)?)
}

/// Rows claimed before `stale_before_ms` and never finished (the worker died mid-attempt) go back to waiting;
/// the unfinished attempt is not counted.
pub async fn reset_stale_inflight(
    pool: &DataPool,
    stale_before_ms: i64,
    now_ms: i64,
) -> Result<u64, StoreError> {
    Ok(on_pool!(pool, |p| sqlx::query(RESET_STALE_INFLIGHT)
        .bind(stale_before_ms)
        .bind(now_ms)
        .execute(p)
        .await
        .map(|r| r.rows_affected()))?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_round_trip() {
        use OutboxStatus::*;
        for s in [Pending, Queued, Delivering, Retrying, Delivered, Failed] {
            assert_eq!(s.as_str().parse::<OutboxStatus>().unwrap(), s);
        }
        assert!("lost".parse::<OutboxStatus>().is_err());
    }
}
