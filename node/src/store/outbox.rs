//! The node's side of `webhook_outbox_events` and `webhook_delivery_failures`: outbox inserts inside the
//! event transaction, pruning of settled rows, and the failure log's list/redrive reads. The delivery state
//! machine itself is the workers crate's (`wagate_workers::webhook::store`).

use std::sync::LazyLock;

use super::{DataPool, DataTx, MultiRow, StoreResult, execute, placeholders, with_pool, with_tx};

/// Rows of many events in one statement per chunk (see [`MultiRow`]): `(id, webhook_id, session_id, event,
/// idempotency_key, payload, status, now, now, now)` per row
/// (each placeholder once, see [`MultiRow::new`]).
static INSERT_OUTBOX: LazyLock<MultiRow> = LazyLock::new(|| {
    MultiRow::new(
        "INSERT INTO webhook_outbox_events (id, webhook_id, session_id, event, idempotency_key, payload, \
         status, attempts, next_attempt_at, created_at, updated_at) VALUES",
        10,
        |n| {
            format!(
                "{}, 0, {}",
                placeholders(n, 7).trim_end_matches(')'),
                placeholders(n + 7, 3).trim_start_matches('(')
            )
        },
        "",
    )
});
/// [`INSERT_OUTBOX`] in ONE statement on SQLite: `$1` is a JSON array of `[id, webhook_id, session_id, event,
/// idempotency_key, payload, now]` rows, `$2` the status (one round trip to the connection's thread instead
/// of one per 64/16/4/1-row chunk).
const INSERT_OUTBOX_SQLITE_JSON: &str = "INSERT INTO webhook_outbox_events (id, webhook_id, session_id, event, \
     idempotency_key, payload, status, attempts, next_attempt_at, created_at, updated_at) \
     SELECT value ->> 0, value ->> 1, value ->> 2, value ->> 3, value ->> 4, value ->> 5, $2, 0, value ->> 6, \
     value ->> 6, value ->> 6 FROM json_each($1) ORDER BY key";
const PRUNE_SETTLED: &str = "DELETE FROM webhook_outbox_events \
     WHERE status IN ('delivered', 'failed') AND updated_at <= $1";
const SELECT_FAILURES: &str = "SELECT * FROM webhook_delivery_failures \
     WHERE ($1 IS NULL OR session_id = $1) ORDER BY created_at DESC, id DESC LIMIT $2 OFFSET $3";
const SELECT_FAILURES_FOR_REDRIVE: &str = "SELECT * FROM webhook_delivery_failures \
     WHERE ($1 IS NULL OR session_id = $1) AND ($2 IS NULL OR webhook_id = $2) ORDER BY created_at, id";
const DELETE_FAILURE: &str = "DELETE FROM webhook_delivery_failures WHERE id = $1";
const UPDATE_FAILURE: &str = "UPDATE webhook_delivery_failures \
     SET attempts = attempts + 1, last_status_code = $2, last_error = $3 WHERE id = $1";

/// One outbox row to write: `payload` is the envelope without `deliveryId` (the worker inserts it).
#[derive(Debug, Clone)]
pub(crate) struct NewOutboxRow<'a> {
    pub id: &'a str,
    pub webhook_id: &'a str,
    pub session_id: &'a str,
    pub event: &'a str,
    pub idempotency_key: &'a str,
    pub payload: &'a str,
    pub now_ms: i64,
}

/// Writes `rows` inside the event transaction, `queued` when a job will be pushed for them right after the
/// commit (the enqueuer then pushes without touching the rows again), else `pending` (the reconciler's).
pub(crate) async fn insert_many_in(
    tx: &mut DataTx,
    rows: &[NewOutboxRow<'_>],
    queued: bool,
) -> StoreResult<()> {
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
        sqlx::query(INSERT_OUTBOX_SQLITE_JSON)
            .bind(super::to_json(&list)?)
            .bind(status)
            .execute(&mut **t)
            .await?;
        return Ok(());
    }
    for (sql, chunk) in INSERT_OUTBOX.chunks(tx, rows) {
        with_tx!(tx, c => {
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
/// the failure log). Returns how many.
pub(crate) async fn prune_settled(db: &DataPool, before_ms: i64) -> StoreResult<u64> {
    Ok(execute!(db, sqlx::query(PRUNE_SETTLED).bind(before_ms))?)
}

/// A delivery-failure row, payload included (redrive sends it again).
#[derive(Debug, Clone, sqlx::FromRow)]
pub(crate) struct FailureRow {
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
pub(crate) async fn list_failures(
    db: &DataPool,
    session_id: Option<&str>,
    limit: i64,
    offset: i64,
) -> StoreResult<Vec<FailureRow>> {
    Ok(with_pool!(db, p => sqlx::query_as(SELECT_FAILURES)
        .bind(session_id)
        .bind(limit)
        .bind(offset)
        .fetch_all(p)
        .await)?)
}

/// Oldest first, so a redrive replays occurrences in their original order.
pub(crate) async fn failures_for_redrive(
    db: &DataPool,
    session_id: Option<&str>,
    webhook_id: Option<&str>,
) -> StoreResult<Vec<FailureRow>> {
    Ok(
        with_pool!(db, p => sqlx::query_as(SELECT_FAILURES_FOR_REDRIVE)
        .bind(session_id)
        .bind(webhook_id)
        .fetch_all(p)
        .await)?,
    )
}

pub(crate) async fn delete_failure(db: &DataPool, id: &str) -> StoreResult<()> {
    execute!(db, sqlx::query(DELETE_FAILURE).bind(id))?;
    Ok(())
}

/// A redrive attempt that failed again: the row stays, counting the attempt.
pub(crate) async fn record_failed_redrive(
    db: &DataPool,
    id: &str,
    status_code: Option<i32>,
    error: &str,
) -> StoreResult<()> {
    execute!(
        db,
        sqlx::query(UPDATE_FAILURE)
            .bind(id)
            .bind(status_code)
            .bind(error)
    )?;
    Ok(())
}
