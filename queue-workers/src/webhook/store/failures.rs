//! SQL of `webhook_delivery_failures`, the log of deliveries that were exhausted or never dispatchable
//! (wire-notes §12): the row the state machine inserts (`outbox::record_failure`, in its transaction), and the
//! reads and writes behind the API's failure list and redrive. It decides nothing about redriving.

use wagate_db::{DataPool, execute, on_pool};

use super::StoreError;
use wagate_db::table_spec::{TableSpec, int, json, text};

/// `webhook_delivery_failures` as the spec's data export shows it (`webhookDeliveryFailures`).
pub const WEBHOOK_DELIVERY_FAILURES_EXPORT: TableSpec = TableSpec {
    key: "webhookDeliveryFailures",
    name: "webhook_delivery_failures",
    columns: &[
        text("id"),
        text("webhook_id"),
        text("session_id"),
        text("event"),
        text("url"),
        text("idempotency_key"),
        text("delivery_id"),
        int("attempts"),
        int("last_status_code"),
        text("last_error"),
        json("payload"),
        int("created_at"),
    ],
    order_by: "id",
};

/// Inserted with the outbox row's `failed` mark, in one transaction (see `outbox::record_failure`).
pub(super) const INSERT: &str = "INSERT INTO webhook_delivery_failures \
     (id, webhook_id, session_id, event, url, idempotency_key, delivery_id, attempts, last_status_code, \
      last_error, payload, created_at) \
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)";
const SELECT_PAGE: &str = "SELECT * FROM webhook_delivery_failures \
     WHERE ($1 IS NULL OR session_id = $1) ORDER BY created_at DESC, id DESC LIMIT $2 OFFSET $3";
const SELECT_FOR_REDRIVE: &str = "SELECT * FROM webhook_delivery_failures \
     WHERE ($1 IS NULL OR session_id = $1) AND ($2 IS NULL OR webhook_id = $2) ORDER BY created_at, id";
const DELETE: &str = "DELETE FROM webhook_delivery_failures WHERE id = $1";
const COUNT_REDRIVE: &str = "UPDATE webhook_delivery_failures \
     SET attempts = attempts + 1, last_status_code = $2, last_error = $3 WHERE id = $1";

/// A delivery-failure row, payload included (redrive sends it again).
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct FailureRow {
    pub id: String,
    pub webhook_id: String,
    pub session_id: String,
    pub event: String,
    pub url: String,
    pub idempotency_key: String,
    pub delivery_id: String,
    pub attempts: i32,
    pub last_status_code: Option<i32>,
    pub last_error: Option<String>,
    pub payload: String,
    pub created_at: i64,
}

/// Newest first.
pub async fn list(
    pool: &DataPool,
    session_id: Option<&str>,
    limit: i64,
    offset: i64,
) -> Result<Vec<FailureRow>, StoreError> {
    Ok(on_pool!(pool, |p| sqlx::query_as(SELECT_PAGE)
        .bind(session_id)
        .bind(limit)
        .bind(offset)
        .fetch_all(p)
        .await)?)
}

/// Oldest first, so a redrive replays occurrences in their original order.
pub async fn for_redrive(
    pool: &DataPool,
    session_id: Option<&str>,
    webhook_id: Option<&str>,
) -> Result<Vec<FailureRow>, StoreError> {
    Ok(on_pool!(pool, |p| sqlx::query_as(SELECT_FOR_REDRIVE)
        .bind(session_id)
        .bind(webhook_id)
        .fetch_all(p)
        .await)?)
}

/// A redriven row that was delivered leaves the log.
pub async fn delete(pool: &DataPool, id: &str) -> Result<(), StoreError> {
    execute!(pool, sqlx::query(DELETE).bind(id))?;
    Ok(())
}

/// A redrive attempt that failed again: the row stays, counting the attempt.
pub async fn record_failed_redrive(
    pool: &DataPool,
    id: &str,
    status_code: Option<i32>,
    error: &str,
) -> Result<(), StoreError> {
    execute!(
        pool,
        sqlx::query(COUNT_REDRIVE)
            .bind(id)
            .bind(status_code)
            .bind(error)
    )?;
    Ok(())
}
