//! The `idempotency_keys` table: the first answer to a single send per `(session, Idempotency-Key)`, kept
//! for replay. Expiry is the caller's rule (it passes the oldest time still valid).

use super::{DataPool, StoreResult, execute, on_pool};

const SELECT: &str = "SELECT request_hash, status_code, response FROM idempotency_keys \
     WHERE session_id = $1 AND key = $2 AND created_at >= $3";
const DELETE_EXPIRED: &str =
    "DELETE FROM idempotency_keys WHERE session_id = $1 AND key = $2 AND created_at < $3";
const INSERT: &str = "INSERT INTO idempotency_keys (session_id, key, request_hash, status_code, response, created_at) \
     VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (session_id, key) DO NOTHING";

/// A stored first answer.
#[derive(Debug, Clone, PartialEq, sqlx::FromRow)]
pub(crate) struct StoredReply {
    pub request_hash: String,
    pub status_code: i32,
    pub response: String,
}

pub(crate) async fn get(
    db: &DataPool,
    session_id: &str,
    key: &str,
    valid_since_ms: i64,
) -> StoreResult<Option<StoredReply>> {
    Ok(on_pool!(db, |p| sqlx::query_as(SELECT)
        .bind(session_id)
        .bind(key)
        .bind(valid_since_ms)
        .fetch_optional(p)
        .await)?)
}

/// Stores the first answer (an expired entry under the same key is replaced; a concurrent first wins).
pub(crate) async fn put(
    db: &DataPool,
    session_id: &str,
    key: &str,
    reply: &StoredReply,
    now_ms: i64,
    valid_since_ms: i64,
) -> StoreResult<()> {
    execute!(
        db,
        sqlx::query(DELETE_EXPIRED)
            .bind(session_id)
            .bind(key)
            .bind(valid_since_ms)
    )?;
    execute!(
        db,
        sqlx::query(INSERT)
            .bind(session_id)
            .bind(key)
            .bind(&reply.request_hash)
            .bind(reply.status_code)
            .bind(&reply.response)
            .bind(now_ms)
    )?;
    Ok(())
}
