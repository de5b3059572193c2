//! SQL of `webhook_outbox_events`: the node's writes (rows inside its event transaction, pruning of settled
//! rows) and the delivery state machine the workers run over them. Input: a [`DataPool`] or the node's open
//! [`DataTx`] (one SQL text serves both backends, except where a set of ids is one parameter). Statements
//! over many rows serve the batched jobs. It does not decide when to retry, nor which webhooks an event
//! matches (the node's pipeline does).
//!
//! Row status: `pending` (written by the node) -> `queued` (a job was pushed; the node writes its rows
//! `queued` straight away when it pushes their job right after the commit) -> `delivering` (claimed
//! by one worker for one attempt) -> `delivered` | `retrying` (next job pushed with a delay) | `failed`.

use std::collections::{BTreeMap, BTreeSet};
use std::str::FromStr;
use std::sync::LazyLock;

use wagate_db::{DataTx, MultiRow, on_pool, on_tx, placeholders};

use super::{StoreError, failures, json_ids, webhooks};
use crate::db::{DataPool, write_turn};
use wagate_db::table_spec::{TableSpec, int, int_or, json, text};

/// Rows of many events in one statement per chunk (see [`MultiRow`]): `(id, webhook_id, session_id, event,
/// idempotency_key, payload, status, now, now, now)` per row
/// (each placeholder once, see [`MultiRow::new`]).
/// Rows are written only for webhooks that still exist: the event path matches against a per-session
/// memo of a session's webhooks, which a delete can overtake, and a row naming a deleted webhook would
/// break the foreign key and with it the whole event's write (the message itself would be lost).
static INSERT_MANY: LazyLock<MultiRow> = LazyLock::new(|| {
    MultiRow::new(
        "WITH v (id, webhook_id, session_id, event, idempotency_key, payload, status, attempts, \
         next_attempt_at, created_at, updated_at) AS (VALUES",
        10,
        |n| {
            format!(
                "{}, 0, {}",
                placeholders(n, 7).trim_end_matches(')'),
                placeholders(n + 7, 3).trim_start_matches('(')
            )
        },
        ") INSERT INTO webhook_outbox_events (id, webhook_id, session_id, event, idempotency_key, payload, \
         status, attempts, next_attempt_at, created_at, updated_at) \
         SELECT id, webhook_id, session_id, event, idempotency_key, payload, status, attempts, \
         next_attempt_at, created_at, updated_at FROM v \
         WHERE EXISTS (SELECT 1 FROM webhooks w WHERE w.id = v.webhook_id)",
    )
});
/// `webhook_outbox_events` as the spec's data export shows it (`webhookOutboxEvents`).
pub const WEBHOOK_OUTBOX_EVENTS_EXPORT: TableSpec = TableSpec {
    key: "webhookOutboxEvents",
    name: "webhook_outbox_events",
    columns: &[
        text("id"),
        text("webhook_id"),
        text("session_id"),
        text("event"),
        text("idempotency_key"),
        json("payload"),
        text("status"),
        int_or("attempts", "0"),
        int("next_attempt_at"),
        int("last_status_code"),
        text("last_error"),
        text("delivery_id"),
        int("created_at"),
        int("updated_at"),
    ],
    order_by: "id",
};

/// [`INSERT_MANY`] in ONE statement on SQLite: `$1` is a JSON array of `[id, webhook_id, session_id, event,
/// idempotency_key, payload, now]` rows, `$2` the status (one round trip to the connection's thread instead
/// of one per 64/16/4/1-row chunk).
const INSERT_MANY_SQLITE_JSON: &str = "INSERT INTO webhook_outbox_events (id, webhook_id, session_id, event, \
     idempotency_key, payload, status, attempts, next_attempt_at, created_at, updated_at) \
     SELECT value ->> 0, value ->> 1, value ->> 2, value ->> 3, value ->> 4, value ->> 5, $2, 0, value ->> 6, \
     value ->> 6, value ->> 6 FROM json_each($1) \
     WHERE EXISTS (SELECT 1 FROM webhooks w WHERE w.id = value ->> 1) ORDER BY key";
const PRUNE_SETTLED: &str = "DELETE FROM webhook_outbox_events \
     WHERE status IN ('delivered', 'failed') AND updated_at <= $1";
const MARK_DELIVERED: &str = "UPDATE webhook_outbox_events \
     SET status = 'delivered', last_status_code = $2, last_error = NULL, updated_at = $3 WHERE id = $1";
const SCHEDULE_RETRY: &str = "UPDATE webhook_outbox_events \
     SET status = 'retrying', next_attempt_at = $2, last_status_code = $3, last_error = $4, updated_at = $5 \
     WHERE id = $1 AND status = 'delivering'";
const MARK_FAILED: &str = "UPDATE webhook_outbox_events \
     SET status = 'failed', last_status_code = $2, last_error = $3, updated_at = $4 WHERE id = $1";
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

// The node's writes.

/// One outbox row to write: `payload` is the envelope without `deliveryId` (the worker inserts it).
#[derive(Debug, Clone)]
pub struct NewOutboxRow<'a> {
    pub id: &'a str,
    pub webhook_id: &'a str,
    pub session_id: &'a str,
    pub event: &'a str,
    pub idempotency_key: &'a str,
    pub payload: &'a str,
    pub now_ms: i64,
}

/// Writes `rows` inside the node's event transaction, `queued` when a job will be pushed for them right after
/// the commit (the enqueuer then pushes without touching the rows again), else `pending` (the reconciler's).
pub async fn insert_many_in(
    tx: &mut DataTx,
    rows: &[NewOutboxRow<'_>],
    queued: bool,
) -> Result<(), StoreError> {
    let status = if queued { "queued" } else { "pending" };
    if let (DataTx::Sqlite(t, _), [_, _, ..]) = (&mut *tx, rows) {
        // One JSON array per row, in the statement's `value ->> n` order.
        let list: Vec<(&str, &str, &str, &str, &str, &str, i64)> = rows
            .iter()
            .map(|r| {
                (
                    r.id,
                    r.webhook_id,
                    r.session_id,
                    r.event,
                    r.idempotency_key,
                    r.payload,
                    r.now_ms,
                )
            })
            .collect();
        sqlx::query(INSERT_MANY_SQLITE_JSON)
            .bind(serde_json::to_string(&list)?)
            .bind(status)
            .execute(&mut **t)
            .await?;
        return Ok(());
    }
    for (sql, chunk) in INSERT_MANY.chunks(tx, rows) {
        on_tx!(tx, |c| {
            let mut q = sqlx::query(sql);
            for row in chunk {
                q = q
                    .bind(row.id)
                    .bind(row.webhook_id)
                    .bind(row.session_id)
                    .bind(row.event)
                    .bind(row.idempotency_key)
                    .bind(row.payload)
                    .bind(status)
                    .bind(row.now_ms)
                    .bind(row.now_ms)
                    .bind(row.now_ms);
            }
            q.execute(c).await.map(|_| ())
        })?;
    }
    Ok(())
}

/// Deletes delivered and failed rows last touched before `before_ms` (a failed row's payload lives on in
/// the failure log). Returns how many. The node's housekeeping calls it; unlike the state machine's writes it
/// does not wait for the SQLite write turn.
pub async fn prune_settled(pool: &DataPool, before_ms: i64) -> Result<u64, StoreError> {
    Ok(wagate_db::execute!(
        pool,
        sqlx::query(PRUNE_SETTLED).bind(before_ms)
    )?)
}

// The delivery state machine.

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
        sqlx::query(webhooks::TOUCH)
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
        sqlx::query(failures::INSERT)
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
                sqlx::query(webhooks::TOUCH)
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
                sqlx::query(webhooks::TOUCH)
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
