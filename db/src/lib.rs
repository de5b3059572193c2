//! The data-database handle shared by the node, the workers and the engines: one enum over the SQLite and
//! PostgreSQL pools, the dialect dispatch that runs one body against either (`on_pool!`, `execute!`, and for
//! an open [`DataTx`] `on_tx!`, `execute_tx!`), multi-row statement texts ([`MultiRow`]), the SQLite write
//! turn, the data export's table descriptions (`table_spec`), and the data-DB migrations. Input: a URL from configuration (or a pool the node already opened). It
//! holds no SQL of its own beyond the migrations: each table's statements live in the one crate that owns the
//! table.

mod multirow;
pub mod table_spec;
mod tx;

pub use multirow::{MultiRow, placeholders};
pub use tx::{DataTx, begin};

use std::str::FromStr;

use sqlx::migrate::Migrator;
use sqlx::pool::PoolOptions;
use sqlx::postgres::PgPool;
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePool};

static SQLITE_MIGRATOR: Migrator = sqlx::migrate!("../migrations/sqlite");
static POSTGRES_MIGRATOR: Migrator = sqlx::migrate!("../migrations/postgres");

/// What every pool of the workspace starts from: no idle timeout and no maximum lifetime, so sqlx spawns no
/// reaper task. sqlx 0.9.0's reaper sizes its sweep from the idle count, which a release racing an acquire
/// can wrap to `usize::MAX` for an instant (sqlx issue 3645); the sweep then never yields and holds a runtime
/// worker at 100% CPU for good (seen here: a delivery test hung for 20 minutes). Connections now stay open
/// until their pool closes; a pool never holds more than its maximum, and a broken PostgreSQL connection is
/// still found by the check before each acquire.
pub fn pool_options<DB: sqlx::Database>() -> PoolOptions<DB> {
    PoolOptions::new().idle_timeout(None).max_lifetime(None)
}

/// Closes the idle connections of each SQLite pool but one, for a process that has gone quiet. Without a
/// reaper (above) every connection a burst opened stays open, and each is a thread with its own copy of the
/// parsed schema, lookaside buffer and page cache: an idle node kept eight.
/// One connection per pool stays, so a periodic duty does not reopen one each time (and an in-memory
/// database keeps its contents). Answers how many were closed.
pub async fn close_spare_connections(pools: &[SqlitePool]) -> usize {
    let mut closed = 0;
    for pool in pools.iter().filter(|pool| !pool.is_closed()) {
        while pool.num_idle() > 1 {
            let Some(connection) = pool.try_acquire() else {
                break;
            };
            // A connection that fails to close cleanly is gone all the same.
            let _ = connection.close().await;
            closed += 1;
        }
    }
    closed
}

/// A failure opening or migrating the data database.
#[derive(Debug, thiserror::Error)]
pub enum DbError {
    #[error("cannot open the data database: {0}")]
    Connect(sqlx::Error),
    #[error("cannot migrate the data database: {0}")]
    Migrate(#[from] sqlx::migrate::MigrateError),
}

/// Which database holds the data tables (`DATABASE_TYPE`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DatabaseKind {
    Sqlite,
    Postgres,
}

/// The data database. Created by the binary at boot (or handed over by the node) and cloned into every store
/// call; both variants are cheap `Arc` clones. SQL text is shared where the dialects agree (`$1` placeholders,
/// `RETURNING`), and [`on_pool!`] runs one body against whichever pool is inside.
#[derive(Debug, Clone)]
pub enum DataPool {
    Sqlite(SqlitePool),
    Postgres(PgPool),
}

/// Runs `$body` with `$p` bound to the concrete pool of a [`DataPool`]; the body is compiled once per backend,
/// so runtime `sqlx::query(..)` calls type-check against both.
#[macro_export]
macro_rules! on_pool {
    ($pool:expr, |$p:ident| $body:expr) => {
        match $pool {
            $crate::DataPool::Sqlite($p) => $body,
            $crate::DataPool::Postgres($p) => $body,
        }
    };
}

impl DataPool {
    /// Opens the data database. For SQLite `url` is a file path (created when missing) or a `sqlite:` URL.
    pub async fn connect(kind: DatabaseKind, url: &str) -> Result<DataPool, DbError> {
        match kind {
            DatabaseKind::Sqlite => {
                let opts = SqliteConnectOptions::from_str(url)
                    .or_else(|_| SqliteConnectOptions::from_str(&format!("sqlite://{url}")))
                    .map_err(DbError::Connect)?
                    .create_if_missing(true)
                    .journal_mode(SqliteJournalMode::Wal)
                    .busy_timeout(std::time::Duration::from_secs(5))
                    .foreign_keys(true);
                let pool = pool_options()
                    .max_connections(8)
                    .test_before_acquire(false) // a local file: no liveness round trip per acquire
                    .connect_with(opts)
                    .await
                    .map_err(DbError::Connect)?;
                Ok(DataPool::Sqlite(pool))
            }
            DatabaseKind::Postgres => {
                let pool = pool_options()
                    .max_connections(16)
                    .connect(url)
                    .await
                    .map_err(DbError::Connect)?;
                Ok(DataPool::Postgres(pool))
            }
        }
    }

    /// Applies the data-DB migrations embedded from `migrations/sqlite` or `migrations/postgres`.
    pub async fn migrate(&self) -> Result<(), DbError> {
        match self {
            DataPool::Sqlite(p) => SQLITE_MIGRATOR.run(p).await?,
            DataPool::Postgres(p) => POSTGRES_MIGRATOR.run(p).await?,
        }
        Ok(())
    }

    pub fn kind(&self) -> DatabaseKind {
        match self {
            DataPool::Sqlite(_) => DatabaseKind::Sqlite,
            DataPool::Postgres(_) => DatabaseKind::Postgres,
        }
    }
}

/// One writer at a time on an SQLite data DB within this process. SQLite itself admits one writer; a second
/// one spins in its busy handler (sleeps of 1, 2, 5, 10 ms ...) while holding a pooled connection, which both
/// adds latency and, when every pooled connection is spinning, starves the writer that holds the lock of a
/// connection it needs: a stall until the busy timeout. Waiting here instead costs no connection and is FIFO.
/// The node's event transactions and the workers' outbox writes take it; PostgreSQL never does.
static SQLITE_WRITE_GATE: tokio::sync::Semaphore = tokio::sync::Semaphore::const_new(1);

/// The turn to write on an SQLite data DB (see [`SQLITE_WRITE_GATE`]); `None` for PostgreSQL. Hold it until
/// the write (or its transaction) has finished.
pub async fn write_turn(pool: &DataPool) -> Option<tokio::sync::SemaphorePermit<'static>> {
    match pool {
        // The gate is never closed, so acquiring cannot fail; were it closed, writes would go ungated.
        DataPool::Sqlite(_) => SQLITE_WRITE_GATE.acquire().await.ok(),
        DataPool::Postgres(_) => None,
    }
}

/// Milliseconds since the Unix epoch, the unit of every timestamp column.
pub fn now_ms() -> i64 {
    chrono::Utc::now().timestamp_millis()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The SQLite this workspace builds carries the options `.cargo/config.toml` sets (a build that lost
    /// them re-plans every statement with a bound LIMIT on each run).
    #[tokio::test]
    async fn the_bundled_sqlite_has_the_workspace_compile_options() {
        let pool = DataPool::connect(DatabaseKind::Sqlite, "sqlite::memory:")
            .await
            .expect("in-memory SQLite");
        let DataPool::Sqlite(pool) = pool else {
            unreachable!("asked for SQLite");
        };
        let options: Vec<String> = sqlx::query_scalar("PRAGMA compile_options")
            .fetch_all(&pool)
            .await
            .expect("compile options");
        for wanted in ["ENABLE_QPSG", "DEFAULT_MEMSTATUS=0"] {
            assert!(
                options.iter().any(|o| o == wanted),
                "{wanted} missing from {options:?}"
            );
        }
    }

    /// Neither knob that makes sqlx spawn its reaper is set on a data pool (see [`pool_options`]).
    #[tokio::test]
    async fn data_pools_run_no_reaper() {
        let pool = DataPool::connect(DatabaseKind::Sqlite, "sqlite::memory:")
            .await
            .expect("in-memory SQLite");
        let DataPool::Sqlite(pool) = pool else {
            unreachable!("asked for SQLite");
        };
        assert_eq!(pool.options().get_idle_timeout(), None);
        assert_eq!(pool.options().get_max_lifetime(), None);
        assert_eq!(pool.options().get_min_connections(), 0);
    }

    #[tokio::test]
    async fn spare_connections_close_down_to_one_and_the_data_stays() {
        let dir = std::env::temp_dir().join(format!("wagate-spare-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("temp dir");
        let url = format!("sqlite://{}", dir.join("spare.sqlite").display());
        let pool = DataPool::connect(DatabaseKind::Sqlite, &url)
            .await
            .expect("file SQLite");
        let DataPool::Sqlite(pool) = pool else {
            unreachable!("asked for SQLite");
        };
        sqlx::query("CREATE TABLE kept (x INTEGER); INSERT INTO kept VALUES (7)")
            .execute(&pool)
            .await
            .expect("a table");
        let held = hold_connections(&pool, 3).await;
        drop(held);
        // A dropped connection goes back to the pool from a task of its own.
        for _ in 0..200 {
            if pool.num_idle() == 3 {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
        assert_eq!(pool.num_idle(), 3);
        assert_eq!(
            close_spare_connections(std::slice::from_ref(&pool)).await,
            2
        );
        assert_eq!((pool.size(), pool.num_idle()), (1, 1));
        let kept: i64 = sqlx::query_scalar("SELECT x FROM kept")
            .fetch_one(&pool)
            .await
            .expect("still readable");
        assert_eq!(kept, 7);
        pool.close().await;
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// `n` connections of `pool` held at once.
    async fn hold_connections(
        pool: &SqlitePool,
        n: usize,
    ) -> Vec<sqlx::pool::PoolConnection<sqlx::Sqlite>> {
        let mut held = Vec::new();
        for _ in 0..n {
            held.push(pool.acquire().await.expect("a connection"));
        }
        held
    }
}
