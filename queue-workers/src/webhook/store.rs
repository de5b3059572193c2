//! SQL for the webhook outbox state machine, the delivery-failure log and `webhooks.last_triggered_at`.
//! Input: a [`DataPool`] (SQLite or PostgreSQL; one SQL text serves both, except where a set of ids is one
//! parameter). Statements over many rows serve the batched jobs. It does not decide when to retry.
//!
//! Outbox row status: `pending` (written by the node) -> `queued` (a job was pushed; the node writes its rows
//! `queued` straight away when it pushes their job right after the commit) -> `delivering` (claimed
//! by one worker for one attempt) -> `delivered` | `retrying` (next job pushed with a delay) | `failed`.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::str::FromStr;

use crate::db::{DataPool, write_turn};
use crate::on_pool;

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
const SELECT_STALE_WAITING: &str = "SELECT id FROM webhook_outbox_events \
     WHERE status IN ('pending', 'queued', 'retrying') AND next_attempt_at <= $1 AND updated_at <= $1 \
     ORDER BY next_attempt_at LIMIT $2";
const RESET_STALE_INFLIGHT: &str = "UPDATE webhook_outbox_events \
     SET status = 'retrying', attempts = attempts - 1, updated_at = $2 \
     WHERE status = 'delivering' AND updated_at <= $1 RETURNING id";
/// `$3` NULL: every claim, whoever made it.
const RELEASE_CLAIMS_BEFORE: &str = "UPDATE webhook_outbox_events \
     SET status = 'retrying', attempts = attempts - 1, updated_at = $2 \
     WHERE status = 'delivering' AND updated_at < $1 AND ($3 IS NULL OR claimed_by = $3) RETURNING id";

/// A database failure in the outbox store.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("outbox database error: {0}")]
    Db(#[from] sqlx::Error),
    #[error("unknown outbox status {0:?}")]
    UnknownStatus(String),
    #[error("the outbox writer has stopped")]
    WriterStopped,
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
    /// When the row (its event) was written; 0 when a statement did not return it.
    #[sqlx(default)]
    pub created_at: i64,
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

/// A 2xx: the row is delivered and the webhook's `last_triggered_at` moves, in one transaction.
pub async fn record_success(
    pool: &DataPool,
    claimed: &ClaimedAttempt,
    status_code: u16,
    now_ms: i64,
) -> Result<(), StoreError> {
    let _turn = write_turn(pool).await;
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
    let _turn = write_turn(pool).await;
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
    let _turn = write_turn(pool).await;
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
) -> Result<Vec<String>, StoreError> {
    let _turn = write_turn(pool).await;
    Ok(on_pool!(pool, |p| sqlx::query_scalar::<_, String>(
        RESET_STALE_INFLIGHT
    )
    .bind(stale_before_ms)
    .bind(now_ms)
    .fetch_all(p)
    .await)?)
}

/// Sends back to waiting every attempt claimed before `before_ms` by `claimer` (by anyone when `None`),
/// however recent, and returns their ids.
pub async fn release_claims_before(
    pool: &DataPool,
    claimer: Option<&str>,
    before_ms: i64,
    now_ms: i64,
) -> Result<Vec<String>, StoreError> {
    let _turn = write_turn(pool).await;
    Ok(on_pool!(pool, |p| sqlx::query_scalar::<_, String>(
        RELEASE_CLAIMS_BEFORE
    )
    .bind(before_ms)
    .bind(now_ms)
    .bind(claimer)
    .fetch_all(p)
    .await)?)
}

// Statements over a set of rows. The id set is one parameter (a JSON array on SQLite, a `text[]` on
// PostgreSQL), so each statement has one text whatever the batch size and is prepared once per connection.

/// A statement over a set of ids: `(SQLite text, PostgreSQL text)`, the set spliced in where `$1` goes.
macro_rules! over_ids {
    ($head:literal, $tail:literal) => {
        (
            concat!($head, " id IN (SELECT value FROM json_each($1)) ", $tail),
            concat!($head, " id = ANY($1) ", $tail),
        )
    };
}

/// The delivery id is `dlv_<outbox id>` (a uuid): one per webhook and occurrence, kept across retries.
const CLAIM_MANY: (&str, &str) = over_ids!(
    "UPDATE webhook_outbox_events \
     SET status = 'delivering', attempts = attempts + 1, delivery_id = COALESCE(delivery_id, 'dlv_' || id), \
     updated_at = $2, claimed_by = $3 WHERE",
    "AND status IN ('pending', 'queued', 'retrying') AND next_attempt_at <= $2 \
     RETURNING id, webhook_id, session_id, event, idempotency_key, payload, attempts, delivery_id, created_at"
);
const STATES_OF: (&str, &str) = over_ids!(
    "SELECT id, status, next_attempt_at FROM webhook_outbox_events WHERE",
    ""
);
const TARGETS_OF: (&str, &str) = over_ids!(
    "SELECT id, url, secret, headers, active, retry_count FROM webhooks WHERE",
    ""
);
const DELETE_MANY: (&str, &str) = over_ids!("DELETE FROM webhook_outbox_events WHERE", "");
const MARK_DELIVERED_MANY: (&str, &str) = over_ids!(
    "UPDATE webhook_outbox_events \
     SET status = 'delivered', last_status_code = $2, last_error = NULL, updated_at = $3 WHERE",
    ""
);
const MARK_QUEUED_MANY: (&str, &str) = over_ids!(
    "UPDATE webhook_outbox_events SET status = 'queued', updated_at = $2 WHERE",
    "AND status IN ('pending', 'queued', 'retrying') RETURNING id"
);

fn json_ids(ids: &[String]) -> String {
    serde_json::to_string(ids).unwrap_or_else(|_| "[]".to_owned())
}

/// Runs `$build(sql)` with the id set bound first, on whichever backend `$pool` is; `$run` finishes the query.
macro_rules! with_ids {
    ($pool:expr, $sql:expr, $ids:expr, |$q:ident| $run:expr) => {
        match $pool {
            DataPool::Sqlite(p) => {
                let $q = (p, json_ids($ids), $sql.0);
                $run
            }
            DataPool::Postgres(p) => {
                let $q = (p, $ids.to_vec(), $sql.1);
                $run
            }
        }
    };
}

/// Claims one attempt of every due, waiting row among `ids`; rows not returned are gone, not waiting, not due,
/// or claimed by someone else first: the conditional UPDATE lets exactly one claimer through per row.
/// `claimer` is the claiming process's `NODE_ID`, kept on the row so that process, restarted, can release the
/// attempts its past life died in (see [`release_claims_before`]).
pub async fn claim_many(
    pool: &DataPool,
    ids: &[String],
    claimer: &str,
    now_ms: i64,
) -> Result<Vec<ClaimedAttempt>, StoreError> {
    let _turn = write_turn(pool).await;
    Ok(with_ids!(pool, CLAIM_MANY, ids, |q| sqlx::query_as::<
        _,
        ClaimedAttempt,
    >(q.2)
    .bind(q.1)
    .bind(now_ms)
    .bind(claimer)
    .fetch_all(q.0)
    .await)?)
}

#[derive(sqlx::FromRow)]
struct IdStateRow {
    id: String,
    status: String,
    next_attempt_at: i64,
}

/// Status and due time of each row among `ids` that still exists.
pub async fn states_of(
    pool: &DataPool,
    ids: &[String],
) -> Result<Vec<(String, OutboxStatus, i64)>, StoreError> {
    let rows = with_ids!(pool, STATES_OF, ids, |q| sqlx::query_as::<_, IdStateRow>(
        q.2
    )
    .bind(q.1)
    .fetch_all(q.0)
    .await)?;
    rows.into_iter()
        .map(|r| Ok((r.id, r.status.parse()?, r.next_attempt_at)))
        .collect()
}

#[derive(sqlx::FromRow)]
struct TargetRow {
    id: String,
    #[sqlx(flatten)]
    target: WebhookTarget,
}

/// The delivery targets of `webhook_ids`, by webhook id; a deleted webhook is absent.
pub async fn load_targets(
    pool: &DataPool,
    webhook_ids: &[String],
) -> Result<HashMap<String, WebhookTarget>, StoreError> {
    let rows = with_ids!(pool, TARGETS_OF, webhook_ids, |q| sqlx::query_as::<
        _,
        TargetRow,
    >(q.2)
    .bind(q.1)
    .fetch_all(q.0)
    .await)?;
    Ok(rows.into_iter().map(|r| (r.id, r.target)).collect())
}

/// Drops rows whose webhook was deleted or deactivated.
pub async fn drop_rows(pool: &DataPool, ids: &[String]) -> Result<(), StoreError> {
    let _turn = write_turn(pool).await;
    with_ids!(pool, DELETE_MANY, ids, |q| sqlx::query(q.2)
        .bind(q.1)
        .execute(q.0)
        .await
        .map(|r| r.rows_affected()))?;
    Ok(())
}

/// One 2xx among a settled batch.
#[derive(Debug, Clone)]
pub struct Success {
    pub outbox_id: String,
    pub webhook_id: String,
    pub status_code: u16,
}

/// Many 2xx at once: the rows are delivered and their webhooks' `last_triggered_at` moves, in one transaction
/// (one UPDATE per distinct status code, one per distinct webhook).
pub async fn record_successes(
    pool: &DataPool,
    done: &[Success],
    now_ms: i64,
) -> Result<(), StoreError> {
    let _turn = write_turn(pool).await;
    if done.is_empty() {
        return Ok(());
    }
    let mut by_code: BTreeMap<u16, Vec<String>> = BTreeMap::new();
    let mut webhooks: BTreeSet<&str> = BTreeSet::new();
    for s in done {
        by_code
            .entry(s.status_code)
            .or_default()
            .push(s.outbox_id.clone());
        webhooks.insert(&s.webhook_id);
    }
    macro_rules! settle {
        ($p:expr, $sql:expr, $bind:expr) => {{
            let mut tx = $p.begin().await?;
            for (code, ids) in &by_code {
                sqlx::query($sql)
                    .bind($bind(ids))
                    .bind(i32::from(*code))
                    .bind(now_ms)
                    .execute(&mut *tx)
                    .await?;
            }
            for webhook_id in &webhooks {
                sqlx::query(TOUCH_WEBHOOK)
                    .bind(*webhook_id)
                    .bind(now_ms)
                    .execute(&mut *tx)
                    .await?;
            }
            tx.commit().await
        }};
    }
    match pool {
        DataPool::Sqlite(p) => settle!(p, MARK_DELIVERED_MANY.0, |ids: &Vec<String>| json_ids(ids)),
        DataPool::Postgres(p) => {
            settle!(p, MARK_DELIVERED_MANY.1, |ids: &Vec<String>| ids.clone())
        }
    }?;
    Ok(())
}

/// In ONE transaction: claims the due, waiting rows among `claim_ids` (as [`claim_many`]) and records the
/// successes `done` (as [`record_successes`]). The worker's writes of many jobs share it (`writer.rs`), so they
/// share one write turn and one commit.
pub async fn claim_and_settle(
    pool: &DataPool,
    claim_ids: &[String],
    claimer: &str,
    done: &[Success],
    now_ms: i64,
) -> Result<Vec<ClaimedAttempt>, StoreError> {
    let _turn = write_turn(pool).await;
    let mut by_code: BTreeMap<u16, Vec<String>> = BTreeMap::new();
    let mut webhooks: BTreeSet<&str> = BTreeSet::new();
    for s in done {
        by_code
            .entry(s.status_code)
            .or_default()
            .push(s.outbox_id.clone());
        webhooks.insert(&s.webhook_id);
    }
    macro_rules! run {
        ($p:expr, $claim:expr, $delivered:expr, $bind:expr) => {{
            let mut tx = $p.begin().await?;
            let claimed = if claim_ids.is_empty() {
                Vec::new()
            } else {
                sqlx::query_as::<_, ClaimedAttempt>($claim)
                    .bind($bind(claim_ids))
                    .bind(now_ms)
                    .bind(claimer)
                    .fetch_all(&mut *tx)
                    .await?
            };
            for (code, ids) in &by_code {
                sqlx::query($delivered)
                    .bind($bind(ids))
                    .bind(i32::from(*code))
                    .bind(now_ms)
                    .execute(&mut *tx)
                    .await?;
            }
            for webhook_id in &webhooks {
                sqlx::query(TOUCH_WEBHOOK)
                    .bind(*webhook_id)
                    .bind(now_ms)
                    .execute(&mut *tx)
                    .await?;
            }
            tx.commit().await?;
            claimed
        }};
    }
    Ok(match pool {
        DataPool::Sqlite(p) => run!(
            p,
            CLAIM_MANY.0,
            MARK_DELIVERED_MANY.0,
            |ids: &[String]| { json_ids(ids) }
        ),
        DataPool::Postgres(p) => {
            run!(
                p,
                CLAIM_MANY.1,
                MARK_DELIVERED_MANY.1,
                |ids: &[String]| ids.to_vec()
            )
        }
    })
}

/// Marks the waiting rows among `ids` queued just before their job is pushed; returns those it marked (the
/// others are no longer waiting and need no job).
pub async fn mark_queued_many(
    pool: &DataPool,
    ids: &[String],
    now_ms: i64,
) -> Result<Vec<String>, StoreError> {
    let _turn = write_turn(pool).await;
    Ok(with_ids!(pool, MARK_QUEUED_MANY, ids, |q| {
        sqlx::query_scalar::<_, String>(q.2)
            .bind(q.1)
            .bind(now_ms)
            .fetch_all(q.0)
            .await
    })?)
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
