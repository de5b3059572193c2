//! What operators see of the two queues: counts per state, recent and failed jobs, and the retry and remove
//! actions (queue dashboard, `/api/infra/status`, the `wagate_queue_jobs` and `wagate_outbox_rows` gauges).
//! apalis jobs here are only wake-ups: a delivery's state lives in its `webhook_outbox_events` row and an
//! ingress event's in its `ingress_events` row, so this reads and changes those tables, never apalis storage.

use serde::Serialize;

use crate::db::{DataPool, now_ms, write_turn};
use crate::on_pool;
use crate::queue::{JobCounts, QueueClient, QueueError};

const OUTBOX_COUNTS: &str = "SELECT status, \
     CAST(CASE WHEN next_attempt_at > $1 THEN 1 ELSE 0 END AS BIGINT) AS later, COUNT(*) AS n \
     FROM webhook_outbox_events GROUP BY status, later";
const OUTBOX_STATUS_COUNTS: &str =
    "SELECT status, COUNT(*) AS n FROM webhook_outbox_events GROUP BY status";
const INGRESS_COUNTS: &str = "SELECT status, COUNT(*) AS n FROM ingress_events GROUP BY status";
const OUTBOX_COLUMNS: &str = "id, webhook_id, session_id, event, payload, status, \
     CAST(attempts AS BIGINT), next_attempt_at, CAST(last_status_code AS BIGINT), last_error, created_at, \
     updated_at";
const INGRESS_COLUMNS: &str = "id, source, session_id, payload, status, CAST(attempts AS BIGINT), \
     last_error, created_at, processed_at";
const RETRY_OUTBOX: &str = "UPDATE webhook_outbox_events \
     SET status = 'pending', attempts = 0, next_attempt_at = $2, updated_at = $2 \
     WHERE id = $1 AND status = 'failed'";
/// A retried or removed row leaves the delivery-failure log too, so a later redrive does not send it again.
const FORGET_FAILURE: &str =
    "DELETE FROM webhook_delivery_failures WHERE webhook_id = $1 AND idempotency_key = $2";
const OUTBOX_KEY: &str =
    "SELECT webhook_id, idempotency_key FROM webhook_outbox_events WHERE id = $1";
const REMOVE_OUTBOX: &str = "DELETE FROM webhook_outbox_events WHERE id = $1";
const RETRY_INGRESS: &str = "UPDATE ingress_events SET status = 'pending', last_error = NULL WHERE id = $1 AND status = 'failed'";
const REMOVE_INGRESS: &str = "DELETE FROM ingress_events WHERE id = $1";

/// The two queues, by their dashboard names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QueueName {
    Webhook,
    Ingress,
}

impl QueueName {
    pub fn parse(name: &str) -> Option<QueueName> {
        match name {
            wagate_proto::jobs::WEBHOOK_QUEUE => Some(QueueName::Webhook),
            wagate_proto::jobs::INGRESS_QUEUE => Some(QueueName::Ingress),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            QueueName::Webhook => wagate_proto::jobs::WEBHOOK_QUEUE,
            QueueName::Ingress => wagate_proto::jobs::INGRESS_QUEUE,
        }
    }
}

/// Which jobs a listing shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Listing {
    /// Newest first, any state.
    Recent,
    /// Failed only, newest first.
    Failed,
}

/// One job as the dashboard shows it.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct JobView {
    pub id: String,
    /// waiting, active, delayed, completed, failed.
    pub state: &'static str,
    /// The stored row's own status (outbox: pending, queued, delivering, retrying, delivered, failed).
    pub status: String,
    pub attempts: i64,
    pub last_error: Option<String>,
    pub last_status_code: Option<i64>,
    pub webhook_id: Option<String>,
    pub session_id: Option<String>,
    pub event: Option<String>,
    /// The stored payload, parsed when it is JSON.
    pub payload: serde_json::Value,
    pub created_at: i64,
    pub updated_at: Option<i64>,
    pub next_attempt_at: Option<i64>,
}

#[derive(Debug, thiserror::Error)]
pub enum ViewError {
    #[error("queue database error: {0}")]
    Db(#[from] sqlx::Error),
    #[error(transparent)]
    Queue(#[from] QueueError),
}

/// Counts per state of `webhook-queue`, from the outbox: waiting (due), delayed (due later), active
/// (`delivering`), completed (`delivered`), failed.
pub async fn webhook_counts(pool: &DataPool) -> Result<JobCounts, ViewError> {
    let rows: Vec<(String, i64, i64)> = on_pool!(pool, |p| sqlx::query_as(OUTBOX_COUNTS)
        .bind(now_ms())
        .fetch_all(p)
        .await)?;
    let mut counts = JobCounts::default();
    for (status, later, n) in rows {
        let n = u64::try_from(n).unwrap_or(0);
        match status.as_str() {
            "delivering" => counts.active += n,
            "delivered" => counts.completed += n,
            "failed" => counts.failed += n,
            _ if later == 1 => counts.delayed += n,
            _ => counts.waiting += n,
        }
    }
    Ok(counts)
}

/// Counts per state of `ingress-queue`, from `ingress_events`.
pub async fn ingress_counts(pool: &DataPool) -> Result<JobCounts, ViewError> {
    let rows: Vec<(String, i64)> =
        on_pool!(pool, |p| sqlx::query_as(INGRESS_COUNTS).fetch_all(p).await)?;
    let mut counts = JobCounts::default();
    for (status, n) in rows {
        let n = u64::try_from(n).unwrap_or(0);
        match status.as_str() {
            "processed" => counts.completed += n,
            "failed" => counts.failed += n,
            "processing" => counts.active += n,
            _ => counts.waiting += n,
        }
    }
    Ok(counts)
}

pub async fn counts(pool: &DataPool, queue: QueueName) -> Result<JobCounts, ViewError> {
    match queue {
        QueueName::Webhook => webhook_counts(pool).await,
        QueueName::Ingress => ingress_counts(pool).await,
    }
}

/// Outbox rows per raw status (`wagate_outbox_rows{state}`).
pub async fn outbox_rows(pool: &DataPool) -> Result<Vec<(String, i64)>, ViewError> {
    Ok(on_pool!(pool, |p| sqlx::query_as(OUTBOX_STATUS_COUNTS)
        .fetch_all(p)
        .await)?)
}

/// Samples the depth gauges (`wagate_outbox_rows`, `wagate_queue_jobs`) just before a scrape is rendered.
/// A failed read leaves the previous values and is logged at debug: the scrape itself must still answer.
pub async fn sample_depth_gauges(pool: &DataPool) {
    match outbox_rows(pool).await {
        Ok(rows) => crate::telemetry::metrics::set_outbox_rows(&rows),
        Err(e) => tracing::debug!(error = %e, "outbox depth not sampled"),
    }
    for queue in [QueueName::Webhook, QueueName::Ingress] {
        match counts(pool, queue).await {
            Ok(c) => crate::telemetry::metrics::set_queue_jobs(queue.as_str(), &c),
            Err(e) => {
                tracing::debug!(error = %e, queue = queue.as_str(), "queue depth not sampled")
            }
        }
    }
}

type OutboxRow = (
    String,
    String,
    String,
    String,
    String,
    String,
    i64,
    i64,
    Option<i64>,
    Option<String>,
    i64,
    i64,
);
type IngressRow = (
    String,
    String,
    Option<String>,
    String,
    String,
    i64,
    Option<String>,
    i64,
    Option<i64>,
);

fn parse_payload(text: String) -> serde_json::Value {
    serde_json::from_str(&text).unwrap_or(serde_json::Value::String(text))
}

fn outbox_job(row: OutboxRow, now: i64) -> JobView {
    let (
        id,
        webhook_id,
        session_id,
        event,
        payload,
        status,
        attempts,
        next_at,
        code,
        error,
        created,
        updated,
    ) = row;
    let state = match status.as_str() {
        "delivering" => "active",
        "delivered" => "completed",
        "failed" => "failed",
        _ if next_at > now => "delayed",
        _ => "waiting",
    };
    JobView {
        id,
        state,
        status,
        attempts,
        last_error: error,
        last_status_code: code,
        webhook_id: Some(webhook_id),
        session_id: Some(session_id),
        event: Some(event),
        payload: parse_payload(payload),
        created_at: created,
        updated_at: Some(updated),
        next_attempt_at: Some(next_at),
    }
}

fn ingress_job(row: IngressRow) -> JobView {
    let (id, source, session_id, payload, status, attempts, error, created, processed) = row;
    let state = match status.as_str() {
        "processed" => "completed",
        "failed" => "failed",
        "processing" => "active",
        _ => "waiting",
    };
    JobView {
        id,
        state,
        status,
        attempts,
        last_error: error,
        last_status_code: None,
        webhook_id: None,
        session_id,
        event: Some(source),
        payload: parse_payload(payload),
        created_at: created,
        updated_at: processed,
        next_attempt_at: None,
    }
}

/// Up to `limit` jobs of a queue, newest first.
pub async fn jobs(
    pool: &DataPool,
    queue: QueueName,
    listing: Listing,
    limit: i64,
) -> Result<Vec<JobView>, ViewError> {
    let filter = match listing {
        Listing::Recent => "",
        Listing::Failed => "WHERE status = 'failed'",
    };
    match queue {
        QueueName::Webhook => {
            let sql = format!(
                "SELECT {OUTBOX_COLUMNS} FROM webhook_outbox_events {filter} \
                 ORDER BY updated_at DESC, id DESC LIMIT $1"
            );
            let rows: Vec<OutboxRow> =
                on_pool!(pool, |p| sqlx::query_as(sqlx::AssertSqlSafe(sql.clone()))
                    .bind(limit)
                    .fetch_all(p)
                    .await)?;
            let now = now_ms();
            Ok(rows.into_iter().map(|r| outbox_job(r, now)).collect())
        }
        QueueName::Ingress => {
            let sql = format!(
                "SELECT {INGRESS_COLUMNS} FROM ingress_events {filter} \
                 ORDER BY created_at DESC, id DESC LIMIT $1"
            );
            let rows: Vec<IngressRow> =
                on_pool!(pool, |p| sqlx::query_as(sqlx::AssertSqlSafe(sql.clone()))
                    .bind(limit)
                    .fetch_all(p)
                    .await)?;
            Ok(rows.into_iter().map(ingress_job).collect())
        }
    }
}

/// What a retry or remove found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    Done,
    /// No such job, or (retry) not failed.
    NotFound,
}

/// Retries a failed job: the row waits again with its attempts reset, and a job is pushed for it.
pub async fn retry(
    pool: &DataPool,
    queue_client: &QueueClient,
    queue: QueueName,
    id: &str,
) -> Result<Action, ViewError> {
    let changed = {
        let _turn = write_turn(pool).await;
        match queue {
            QueueName::Webhook => {
                let key = outbox_key(pool, id).await?;
                let n = on_pool!(pool, |p| sqlx::query(RETRY_OUTBOX)
                    .bind(id)
                    .bind(now_ms())
                    .execute(p)
                    .await
                    .map(|r| r.rows_affected()))?;
                if let (1, Some((webhook_id, key))) = (n, key) {
                    forget_failure(pool, &webhook_id, &key).await?;
                }
                n
            }
            QueueName::Ingress => on_pool!(pool, |p| sqlx::query(RETRY_INGRESS)
                .bind(id)
                .execute(p)
                .await
                .map(|r| r.rows_affected()))?,
        }
    };
    if changed == 0 {
        return Ok(Action::NotFound);
    }
    match queue {
        QueueName::Webhook => queue_client.push_delivery(id, None).await?,
        QueueName::Ingress => {
            queue_client
                .push_ingress(wagate_proto::jobs::IngressJob {
                    ingress_event_id: id.to_owned(),
                })
                .await?
        }
    }
    Ok(Action::Done)
}

/// Removes a job's row (a queued wake-up for it then finds nothing and does nothing).
pub async fn remove(pool: &DataPool, queue: QueueName, id: &str) -> Result<Action, ViewError> {
    let _turn = write_turn(pool).await;
    let sql = match queue {
        QueueName::Webhook => {
            if let Some((webhook_id, key)) = outbox_key(pool, id).await? {
                forget_failure(pool, &webhook_id, &key).await?;
            }
            REMOVE_OUTBOX
        }
        QueueName::Ingress => REMOVE_INGRESS,
    };
    let n = on_pool!(pool, |p| sqlx::query(sql)
        .bind(id)
        .execute(p)
        .await
        .map(|r| r.rows_affected()))?;
    Ok(if n == 0 {
        Action::NotFound
    } else {
        Action::Done
    })
}

async fn outbox_key(pool: &DataPool, id: &str) -> Result<Option<(String, String)>, ViewError> {
    Ok(on_pool!(pool, |p| sqlx::query_as(OUTBOX_KEY)
        .bind(id)
        .fetch_optional(p)
        .await)?)
}

async fn forget_failure(pool: &DataPool, webhook_id: &str, key: &str) -> Result<(), ViewError> {
    on_pool!(pool, |p| sqlx::query(FORGET_FAILURE)
        .bind(webhook_id)
        .bind(key)
        .execute(p)
        .await
        .map(|_| ()))?;
    Ok(())
}
