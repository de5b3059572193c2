//! The raft log and vote of this node, in a small SQLite file of their own (`DATA_DIR/raft.sqlite`, synchronous
//! writes): one row per entry as JSON, and a name/value table for the vote and the last purged log id. The
//! same file holds the audit spool (`spool.rs`). Writes are serialised by openraft; readers share the pool.

// openraft's storage traits fix `StorageError` (224 bytes) as the error type of every call.
#![allow(clippy::result_large_err)]

use std::fmt::Debug;
use std::ops::{Bound, RangeBounds};
use std::path::Path;
use std::str::FromStr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use openraft::storage::{LogFlushed, RaftLogStorage};
use openraft::{
    AnyError, LogId, LogState, RaftLogId, RaftLogReader, StorageError, StorageIOError, Vote,
};
use sqlx::SqlitePool;
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqliteSynchronous};

use super::{Entry, NodeId, TypeConfig};

const SCHEMA: [&str; 3] = [
    "CREATE TABLE IF NOT EXISTS raft_log (idx INTEGER PRIMARY KEY, entry TEXT NOT NULL)",
    "CREATE TABLE IF NOT EXISTS raft_meta (name TEXT PRIMARY KEY, value TEXT NOT NULL)",
    "CREATE TABLE IF NOT EXISTS audit_spool (seq INTEGER PRIMARY KEY AUTOINCREMENT, row TEXT NOT NULL)",
];

/// Opens (creating) the raft file. `synchronous=FULL`: a vote or an entry acknowledged is on disk.
pub(crate) async fn open(path: &Path) -> Result<SqlitePool, sqlx::Error> {
    let options = SqliteConnectOptions::from_str(&format!("sqlite://{}", path.display()))?
        .create_if_missing(true)
        .journal_mode(SqliteJournalMode::Wal)
        .synchronous(SqliteSynchronous::Full)
        .busy_timeout(std::time::Duration::from_secs(10));
    let pool = wagate_db::pool_options()
        .max_connections(4)
        .connect_with(options)
        .await?;
    for statement in SCHEMA {
        sqlx::query(statement).execute(&pool).await?;
    }
    Ok(pool)
}

fn io_err(e: impl std::error::Error + 'static) -> AnyError {
    AnyError::new(&e)
}

fn read_err(e: impl std::error::Error + 'static) -> StorageError<NodeId> {
    StorageIOError::read_logs(io_err(e)).into()
}

fn write_err(e: impl std::error::Error + 'static) -> StorageError<NodeId> {
    StorageIOError::write_logs(io_err(e)).into()
}

#[derive(Clone)]
pub(crate) struct LogStore {
    pool: SqlitePool,
    /// The commit index as openraft last reported it (status and metrics only; not persisted, since the
    /// state machine persists what it applied).
    committed: Arc<AtomicU64>,
}

impl LogStore {
    pub(crate) fn new(pool: SqlitePool, committed: Arc<AtomicU64>) -> LogStore {
        LogStore { pool, committed }
    }

    async fn meta<T: serde::de::DeserializeOwned>(
        &self,
        name: &str,
    ) -> Result<Option<T>, StorageError<NodeId>> {
        let value: Option<String> =
            sqlx::query_scalar("SELECT value FROM raft_meta WHERE name = $1")
                .bind(name)
                .fetch_optional(&self.pool)
                .await
                .map_err(read_err)?;
        value
            .map(|v| serde_json::from_str(&v).map_err(read_err))
            .transpose()
    }

    async fn set_meta<T: serde::Serialize>(
        &self,
        name: &str,
        value: &T,
    ) -> Result<(), StorageError<NodeId>> {
        let text = serde_json::to_string(value).map_err(write_err)?;
        sqlx::query(
            "INSERT INTO raft_meta (name, value) VALUES ($1, $2) \
             ON CONFLICT (name) DO UPDATE SET value = excluded.value",
        )
        .bind(name)
        .bind(text)
        .execute(&self.pool)
        .await
        .map_err(write_err)?;
        Ok(())
    }
}

fn bounds(range: &impl RangeBounds<u64>) -> (i64, i64) {
    let to_i64 = |v: u64| i64::try_from(v).unwrap_or(i64::MAX);
    let start = match range.start_bound() {
        Bound::Included(s) => to_i64(*s),
        Bound::Excluded(s) => to_i64(*s).saturating_add(1),
        Bound::Unbounded => 0,
    };
    let end = match range.end_bound() {
        Bound::Included(e) => to_i64(*e).saturating_add(1),
        Bound::Excluded(e) => to_i64(*e),
        Bound::Unbounded => i64::MAX,
    };
    (start, end)
}

impl RaftLogReader<TypeConfig> for LogStore {
    async fn try_get_log_entries<RB: RangeBounds<u64> + Clone + Debug + Send>(
        &mut self,
        range: RB,
    ) -> Result<Vec<Entry>, StorageError<NodeId>> {
        let (start, end) = bounds(&range);
        let rows: Vec<String> = sqlx::query_scalar(
            "SELECT entry FROM raft_log WHERE idx >= $1 AND idx < $2 ORDER BY idx",
        )
        .bind(start)
        .bind(end)
        .fetch_all(&self.pool)
        .await
        .map_err(read_err)?;
        rows.iter()
            .map(|text| serde_json::from_str(text).map_err(read_err))
            .collect()
    }
}

impl RaftLogStorage<TypeConfig> for LogStore {
    type LogReader = LogStore;

    async fn get_log_state(&mut self) -> Result<LogState<TypeConfig>, StorageError<NodeId>> {
        let last_purged_log_id: Option<LogId<NodeId>> = self.meta("purged").await?;
        let last: Option<String> =
            sqlx::query_scalar("SELECT entry FROM raft_log ORDER BY idx DESC LIMIT 1")
                .fetch_optional(&self.pool)
                .await
                .map_err(read_err)?;
        let last_log_id = match last {
            Some(text) => {
                let entry: Entry = serde_json::from_str(&text).map_err(read_err)?;
                Some(*entry.get_log_id())
            }
            None => last_purged_log_id,
        };
        Ok(LogState {
            last_purged_log_id,
            last_log_id,
        })
    }

    async fn get_log_reader(&mut self) -> LogStore {
        self.clone()
    }

    async fn save_vote(&mut self, vote: &Vote<NodeId>) -> Result<(), StorageError<NodeId>> {
        self.set_meta("vote", vote)
            .await
            .map_err(|e| StorageIOError::write_vote(io_err(e)).into())
    }

    async fn read_vote(&mut self) -> Result<Option<Vote<NodeId>>, StorageError<NodeId>> {
        self.meta("vote").await
    }

    async fn save_committed(
        &mut self,
        committed: Option<LogId<NodeId>>,
    ) -> Result<(), StorageError<NodeId>> {
        if let Some(log_id) = committed {
            self.committed.store(log_id.index, Ordering::Relaxed);
        }
        Ok(())
    }

    async fn append<I>(
        &mut self,
        entries: I,
        callback: LogFlushed<TypeConfig>,
    ) -> Result<(), StorageError<NodeId>>
    where
        I: IntoIterator<Item = Entry> + Send,
        I::IntoIter: Send,
    {
        let mut tx = self.pool.begin().await.map_err(write_err)?;
        for entry in entries {
            let index = i64::try_from(entry.get_log_id().index).unwrap_or(i64::MAX);
            let text = serde_json::to_string(&entry).map_err(write_err)?;
            sqlx::query(
                "INSERT INTO raft_log (idx, entry) VALUES ($1, $2) \
                 ON CONFLICT (idx) DO UPDATE SET entry = excluded.entry",
            )
            .bind(index)
            .bind(text)
            .execute(&mut *tx)
            .await
            .map_err(write_err)?;
        }
        tx.commit().await.map_err(write_err)?;
        callback.log_io_completed(Ok(()));
        Ok(())
    }

    async fn truncate(&mut self, log_id: LogId<NodeId>) -> Result<(), StorageError<NodeId>> {
        sqlx::query("DELETE FROM raft_log WHERE idx >= $1")
            .bind(i64::try_from(log_id.index).unwrap_or(i64::MAX))
            .execute(&self.pool)
            .await
            .map_err(write_err)?;
        Ok(())
    }

    async fn purge(&mut self, log_id: LogId<NodeId>) -> Result<(), StorageError<NodeId>> {
        // The purged id first: a crash between the two leaves entries the state says are gone, never a hole.
        self.set_meta("purged", &log_id).await?;
        sqlx::query("DELETE FROM raft_log WHERE idx <= $1")
            .bind(i64::try_from(log_id.index).unwrap_or(i64::MAX))
            .execute(&self.pool)
            .await
            .map_err(write_err)?;
        Ok(())
    }
}
