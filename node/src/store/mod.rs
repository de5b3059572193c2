//! Persistence. The data DB (sessions, webhooks, messages, ...) is SQLite or PostgreSQL behind one
//! `DataPool`; the main DB (API keys, audit log) is always a local SQLite file. The node's SQL lives in this
//! folder, one file per table group; callers never learn which backend they have. The webhook tables
//! (`webhooks`, `webhook_outbox_events`, `webhook_delivery_failures`) are the workers crate's
//! (`wagate_workers::webhook::store`), and the engines' own tables are their crates'.

pub(crate) mod audit;
pub(crate) mod automation;
pub(crate) mod backends;
pub(crate) mod batches;
pub(crate) mod chat_history;
pub(crate) mod chat_states;
pub(crate) mod contact_names;
pub(crate) mod data_tables;
pub(crate) mod idempotency;
pub(crate) mod keys;
pub(crate) mod message_writes;
pub(crate) mod messages;
pub(crate) mod poll_votes;
pub(crate) mod reactions;
pub(crate) mod search;
pub(crate) mod sessions;
pub(crate) mod stats;
pub(crate) mod status_updates;
pub(crate) mod templates;

/// The data database and its dialect toolkit, from `wagate-db` (shared with the workers and the engines).
/// Queries are written once and compiled for both arms by `on_pool!` / `on_tx!`: `$n` placeholders,
/// `ON CONFLICT` and `RETURNING` mean the same on both.
pub use wagate_db::{DataPool, DataTx};
pub(crate) use wagate_db::{MultiRow, execute, execute_tx, on_pool, on_tx, placeholders};

/// Opens a transaction on the data DB (`wagate_db::begin`: on SQLite, the write turn and `BEGIN IMMEDIATE`).
pub async fn begin(db: &DataPool) -> StoreResult<DataTx> {
    Ok(wagate_db::begin(db).await?)
}

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("not found")]
    NotFound,
    #[error("{what} already exists")]
    Conflict { what: String },
    /// A fenced write matched no row: another node holds a newer lease on the session.
    #[error("stale lease")]
    StaleLease,
    #[error("stored data is corrupt: {0}")]
    Corrupt(String),
    /// A row written for this session failed its foreign key to `sessions`: the session was deleted
    /// between the caller's check and the write ([`StoreError::in_session`]). Answers as an unknown session.
    #[error("Session {0} not found")]
    SessionGone(String),
    #[error("database error: {0}")]
    Db(#[source] sqlx::Error),
}

impl StoreError {
    /// For a write of rows whose one foreign key is their `session_id` (every session-scoped table): a
    /// foreign-key violation means the session row is gone (a delete raced the write), so the error becomes
    /// [`StoreError::SessionGone`], the unknown session's 404, rather than a database failure.
    pub(crate) fn in_session(self, session_id: &str) -> StoreError {
        match self {
            StoreError::Db(sqlx::Error::Database(db)) if db.is_foreign_key_violation() => {
                StoreError::SessionGone(session_id.to_owned())
            }
            other => other,
        }
    }
}

impl From<sqlx::Error> for StoreError {
    fn from(err: sqlx::Error) -> Self {
        match &err {
            sqlx::Error::RowNotFound => StoreError::NotFound,
            sqlx::Error::Database(db) if db.is_unique_violation() => StoreError::Conflict {
                what: db.constraint().unwrap_or("row").to_string(),
            },
            _ => StoreError::Db(err),
        }
    }
}

/// The webhook tables' stores (`wagate_workers::webhook::store`) answer in their own error; the node's callers
/// see the same variants as for any other table.
impl From<wagate_workers::webhook::store::StoreError> for StoreError {
    fn from(err: wagate_workers::webhook::store::StoreError) -> Self {
        use wagate_workers::webhook::store::StoreError as Webhook;
        match err {
            Webhook::Db(e) => StoreError::from(e),
            Webhook::NotFound => StoreError::NotFound,
            Webhook::Corrupt(what) => StoreError::Corrupt(what),
            Webhook::UnknownStatus(status) => {
                StoreError::Corrupt(format!("unknown outbox status {status:?}"))
            }
            // Only the workers' outbox writer answers this; the node's callers never meet it.
            Webhook::WriterStopped => StoreError::Db(sqlx::Error::PoolClosed),
        }
    }
}

impl From<serde_json::Error> for StoreError {
    fn from(err: serde_json::Error) -> Self {
        StoreError::Corrupt(err.to_string())
    }
}

pub(crate) type StoreResult<T> = Result<T, StoreError>;

/// Current time as epoch milliseconds, the unit of every stored timestamp.
pub(crate) fn now_ms() -> i64 {
    chrono::Utc::now().timestamp_millis()
}

/// Encodes a value for a JSON TEXT column.
pub(crate) fn to_json<T: serde::Serialize>(value: &T) -> StoreResult<String> {
    Ok(serde_json::to_string(value)?)
}

/// Decodes a JSON TEXT column.
pub(crate) fn from_json<T: serde::de::DeserializeOwned>(text: &str) -> StoreResult<T> {
    Ok(serde_json::from_str(text)?)
}

#[cfg(test)]
mod tests;
