//! The `message_batches` table: a bulk batch's items, options, per-item results and the index of the next
//! item to send, so a runner can resume after a restart. A batch is keyed by its session and its id: the
//! id is the client's (or a generated UUID) and unique within its session only (migration 0100).

use super::{DataPool, StoreError, StoreResult, execute, on_pool};

const INSERT: &str = "INSERT INTO message_batches (id, session_id, status, items, options, results, next_index, \
     started_at, completed_at, created_at, updated_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $10)";
const SAVE: &str = "UPDATE message_batches SET status = $3, results = $4, next_index = $5, completed_at = $6, \
     updated_at = $7 WHERE session_id = $1 AND id = $2";
const SELECT_ONE: &str = "SELECT * FROM message_batches WHERE session_id = $1 AND id = $2";
const SELECT_PROCESSING: &str =
    "SELECT * FROM message_batches WHERE status = 'processing' ORDER BY created_at";

#[derive(Debug, Clone, PartialEq, sqlx::FromRow)]
pub(crate) struct BatchRow {
    pub id: String,
    pub session_id: String,
    pub status: String,
    /// JSON array of the accepted items.
    pub items: String,
    /// JSON of the options.
    pub options: String,
    /// JSON array of per-item results.
    pub results: String,
    pub next_index: i64,
    pub started_at: Option<i64>,
    pub completed_at: Option<i64>,
    pub created_at: i64,
    pub updated_at: i64,
}

/// Inserts a batch; `Conflict` when its session already has a batch of that id, `SessionGone` when the
/// session was deleted meanwhile.
pub(crate) async fn insert(db: &DataPool, b: &BatchRow) -> StoreResult<()> {
    execute!(
        db,
        sqlx::query(INSERT)
            .bind(&b.id)
            .bind(&b.session_id)
            .bind(&b.status)
            .bind(&b.items)
            .bind(&b.options)
            .bind(&b.results)
            .bind(b.next_index)
            .bind(b.started_at)
            .bind(b.completed_at)
            .bind(b.created_at)
    )
    .map_err(|e| match StoreError::from(e) {
        StoreError::Conflict { .. } => StoreError::Conflict {
            what: format!("Batch '{}'", b.id),
        },
        other => other.in_session(&b.session_id),
    })?;
    Ok(())
}

/// Writes the mutable part of a batch (status, results, progress).
pub(crate) async fn save(db: &DataPool, b: &BatchRow) -> StoreResult<()> {
    execute!(
        db,
        sqlx::query(SAVE)
            .bind(&b.session_id)
            .bind(&b.id)
            .bind(&b.status)
            .bind(&b.results)
            .bind(b.next_index)
            .bind(b.completed_at)
            .bind(b.updated_at)
    )?;
    Ok(())
}

pub(crate) async fn get(
    db: &DataPool,
    session_id: &str,
    id: &str,
) -> StoreResult<Option<BatchRow>> {
    Ok(on_pool!(db, |p| sqlx::query_as(SELECT_ONE)
        .bind(session_id)
        .bind(id)
        .fetch_optional(p)
        .await)?)
}

/// Batches still running (resumed at boot).
pub(crate) async fn processing(db: &DataPool) -> StoreResult<Vec<BatchRow>> {
    Ok(on_pool!(db, |p| sqlx::query_as(SELECT_PROCESSING)
        .fetch_all(p)
        .await)?)
}
