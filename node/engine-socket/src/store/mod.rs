//! The socket engine's auth state in the data DB: [`SqlBackend`] implements every store trait of
//! whatsapp-rust's `Backend` (Signal keys and sessions, app-state sync, protocol bookkeeping, message
//! secrets, the device record) over our `DataPool` (SQLite or PostgreSQL), one row set per session id, so
//! any node can take a session over. It owns the `socket_*` tables (`migrations/*/0040_socket_store.sql`)
//! and all their SQL; [`delete_session_state`] removes everything of one session (spec rule 8).
//!
//! Semantics follow the crate's `InMemoryBackend` (the reference the conformance battery in `tests.rs`
//! compares against): upserts replace, batches apply in order inside one transaction, merges and expiry
//! rules are the in-memory ones. Every write is committed when the call returns, so there is nothing to
//! flush on a graceful stop; the library's own flush (its device saver) simply lands here.

mod app_sync;
mod codec;
mod device;
mod msg_secret;
mod protocol;
mod signal;
#[cfg(test)]
mod tests;

pub use protocol::LID_MAPPINGS_EXPORT;

use std::sync::Arc;

use anyhow::Context;
use wagate_db::DataPool;
use whatsapp_rust::wacore::store::error::StoreError;

/// The socket engine's storage backend for one session. `Arc<SqlBackend>` coerces to the library's
/// `Arc<dyn Backend>`. Cloning is cheap (a pool handle and a shared session id).
#[derive(Debug, Clone)]
pub struct SqlBackend {
    pool: DataPool,
    session_id: Arc<str>,
}

impl SqlBackend {
    /// A backend for `session_id`. The session row must exist: every table references `sessions(id)`.
    pub fn new(pool: DataPool, session_id: impl Into<String>) -> Self {
        SqlBackend {
            pool,
            session_id: Arc::from(session_id.into()),
        }
    }

    /// The session this backend reads and writes.
    pub fn session_id(&self) -> &str {
        &self.session_id
    }

    /// Wraps a database failure in the library's error type, naming the operation and the session.
    fn db_err(&self, op: &'static str, source: sqlx::Error) -> StoreError {
        let connection = matches!(
            source,
            sqlx::Error::PoolTimedOut
                | sqlx::Error::PoolClosed
                | sqlx::Error::Io(_)
                | sqlx::Error::Tls(_)
        );
        let err = Box::new(SqlStoreError {
            op,
            session_id: self.session_id.clone(),
            source,
        });
        if connection {
            StoreError::Connection(err)
        } else {
            StoreError::Database(err)
        }
    }

    /// A stored value that does not decode (wrong length, bad JSON): the row is corrupt.
    fn corrupt(&self, op: &'static str, what: impl std::fmt::Display) -> StoreError {
        StoreError::Validation(format!(
            "socket store {op} (session {}): {what}",
            self.session_id
        ))
    }
}

/// A failed statement of the socket store, with the operation and session it belonged to.
#[derive(Debug, thiserror::Error)]
#[error("socket store {op} (session {session_id}): {source}")]
pub struct SqlStoreError {
    op: &'static str,
    session_id: Arc<str>,
    #[source]
    source: sqlx::Error,
}

/// Every table of the socket store; all are keyed by `session_id` first.
pub const SOCKET_TABLES: [&str; 19] = [
    "socket_device",
    "socket_meta",
    "socket_identities",
    "socket_signal_sessions",
    "socket_prekeys",
    "socket_signed_prekeys",
    "socket_sender_keys",
    "socket_sync_keys",
    "socket_app_state_versions",
    "socket_mutation_macs",
    "socket_sender_key_devices",
    "socket_lid_mappings",
    "socket_base_keys",
    "socket_device_lists",
    "socket_group_metadata",
    "socket_tc_tokens",
    "socket_sent_messages",
    "socket_pending_inbound",
    "socket_msg_secrets",
];

/// One `DELETE ... WHERE session_id = $1` per table, written out so every statement is static SQL.
const DELETE_SESSION_STATE: [&str; 19] = [
    "DELETE FROM socket_device WHERE session_id = $1",
    "DELETE FROM socket_meta WHERE session_id = $1",
    "DELETE FROM socket_identities WHERE session_id = $1",
    "DELETE FROM socket_signal_sessions WHERE session_id = $1",
    "DELETE FROM socket_prekeys WHERE session_id = $1",
    "DELETE FROM socket_signed_prekeys WHERE session_id = $1",
    "DELETE FROM socket_sender_keys WHERE session_id = $1",
    "DELETE FROM socket_sync_keys WHERE session_id = $1",
    "DELETE FROM socket_app_state_versions WHERE session_id = $1",
    "DELETE FROM socket_mutation_macs WHERE session_id = $1",
    "DELETE FROM socket_sender_key_devices WHERE session_id = $1",
    "DELETE FROM socket_lid_mappings WHERE session_id = $1",
    "DELETE FROM socket_base_keys WHERE session_id = $1",
    "DELETE FROM socket_device_lists WHERE session_id = $1",
    "DELETE FROM socket_group_metadata WHERE session_id = $1",
    "DELETE FROM socket_tc_tokens WHERE session_id = $1",
    "DELETE FROM socket_sent_messages WHERE session_id = $1",
    "DELETE FROM socket_pending_inbound WHERE session_id = $1",
    "DELETE FROM socket_msg_secrets WHERE session_id = $1",
];

/// Removes every row of the socket store that belongs to `session_id`, in one transaction (logout and
/// session delete). The session row itself is the caller's; deleting it would cascade here too.
/// Call it once the session's client has stopped: a client still running could write again.
pub async fn delete_session_state(pool: &DataPool, session_id: &str) -> anyhow::Result<()> {
    let _turn = wagate_db::write_turn(pool).await;
    let result: Result<(), sqlx::Error> = match pool {
        DataPool::Sqlite(p) => {
            let mut tx = p.begin_with("BEGIN IMMEDIATE").await?;
            for sql in DELETE_SESSION_STATE {
                sqlx::query(sql).bind(session_id).execute(&mut *tx).await?;
            }
            tx.commit().await
        }
        DataPool::Postgres(p) => {
            let mut tx = p.begin().await?;
            for sql in DELETE_SESSION_STATE {
                sqlx::query(sql).bind(session_id).execute(&mut *tx).await?;
            }
            tx.commit().await
        }
    };
    result.with_context(|| format!("deleting the socket store of session {session_id}"))
}

const HAS_LINKED_DEVICE: &str =
    "SELECT EXISTS (SELECT 1 FROM socket_device WHERE session_id = $1 AND linked)";

/// Whether the session holds linked credentials: a stored device that completed pairing (it has a phone
/// JID). A device row created for a QR attempt that never paired does not count.
pub async fn has_device(pool: &DataPool, session_id: &str) -> anyhow::Result<bool> {
    let found: Result<bool, sqlx::Error> = wagate_db::on_pool!(pool, |p| {
        sqlx::query_scalar(HAS_LINKED_DEVICE)
            .bind(session_id)
            .fetch_one(p)
            .await
    });
    found.with_context(|| format!("checking the socket credentials of session {session_id}"))
}

/// Runs `$body` (an expression yielding `Result<_, sqlx::Error>`, written against the transaction
/// `$tx`) in one transaction and commits it; any error rolls back and becomes the library's error with
/// `$op` as context. SQLite takes the write lock up front (`BEGIN IMMEDIATE`) so a transaction that
/// reads before it writes waits for a concurrent writer instead of failing with `database is locked`.
macro_rules! in_tx {
    ($self:expr, $op:expr, |$tx:ident| $body:expr) => {{
        // The process-wide SQLite write turn every other writer takes: without it this writer would spin in
        // SQLite's busy handler holding a pooled connection while a gated writer holds the lock.
        let _turn = wagate_db::write_turn(&$self.pool).await;
        let result = match &$self.pool {
            wagate_db::DataPool::Sqlite(p) => {
                match p.begin_with("BEGIN IMMEDIATE").await {
                    Ok(mut $tx) => match async { $body }.await {
                        Ok(value) => $tx.commit().await.map(|()| value),
                        Err(err) => Err(err),
                    },
                    Err(err) => Err(err),
                }
            }
            wagate_db::DataPool::Postgres(p) => match p.begin().await {
                Ok(mut $tx) => match async { $body }.await {
                    Ok(value) => $tx.commit().await.map(|()| value),
                    Err(err) => Err(err),
                },
                Err(err) => Err(err),
            },
        };
        result.map_err(|e| $self.db_err($op, e))
    }};
}
pub(crate) use in_tx;

/// Runs `$body` against the bare pool `$p` (one statement) and maps the error like [`in_tx!`].
macro_rules! on_db {
    ($self:expr, $op:expr, |$p:ident| $body:expr) => {{
        let result = wagate_db::on_pool!(&$self.pool, |$p| $body);
        result.map_err(|e| $self.db_err($op, e))
    }};
}
pub(crate) use on_db;

/// A `u32` key the library hands us, as the `BIGINT` we store.
fn id_to_db(id: u32) -> i64 {
    i64::from(id)
}

/// A stored `BIGINT` key back to the library's `u32`.
fn id_from_db(backend: &SqlBackend, op: &'static str, id: i64) -> Result<u32, StoreError> {
    u32::try_from(id).map_err(|_| backend.corrupt(op, format!("id {id} out of range")))
}
