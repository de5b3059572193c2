//! Backend plumbing only: connecting, pragmas, pool sizes, running migrations, liveness probes, and the
//! read-only companion pool of an SQLite data DB (`read_pool`).
//! Migrations are embedded in the binary: `migrations/sqlite`, `migrations/postgres`, `migrations/main`.

use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::sync::LazyLock;
use std::time::Duration;

use dashmap::DashMap;

use sqlx::migrate::Migrator;
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqliteSynchronous};
use sqlx::{Executor, SqlitePool};

use super::{DataPool, StoreError, StoreResult, on_pool};

fn migrate_error(err: wagate_db::DbError) -> StoreError {
    StoreError::Corrupt(format!("data database migration failed: {err}"))
}

static MAIN_MIGRATIONS: Migrator = sqlx::migrate!("../migrations/main");

const PROBE_TIMEOUT: Duration = Duration::from_secs(2);

/// Reads through a memory map instead of `read()` copies: a pooled connection drops its page cache whenever
/// another connection has written, and re-read every page it needed through a copy. Address space only; the
/// pages are the OS's file cache, shared and evictable.
const MMAP_BYTES: &str = "268435456";

async fn open_sqlite(path: &str, max_connections: u32) -> Result<SqlitePool, sqlx::Error> {
    let options = SqliteConnectOptions::from_str(path)?
        .create_if_missing(true)
        .journal_mode(SqliteJournalMode::Wal)
        .synchronous(SqliteSynchronous::Normal)
        .foreign_keys(true)
        .busy_timeout(Duration::from_secs(10))
        .pragma("mmap_size", MMAP_BYTES);
    wagate_db::pool_options()
        .max_connections(max_connections)
        // A pooled SQLite connection is a file handle on its own thread; the default check before each
        // acquire is a round trip to that thread, one more per statement or transaction, for a failure a
        // local file does not have.
        .test_before_acquire(false)
        .connect_with(options)
        .await
}

/// Connections of the read-only pool of an SQLite data DB (opened on first use, one thread each).
const READ_CONNECTIONS: u32 = 4;

/// The read-only pools of the SQLite data DBs this process opened, by file. List reads (message pages)
/// take their connection here, so they never wait for a connection behind the writers of the main pool:
/// group commits, event transactions and their busy waits hold those for as long as the write lock takes.
/// Kept beside the pool rather than in it because `DataPool` is shared with the workers crate, which has no
/// use for it (as its write gate, `wagate_workers::db::write_turn`, is process-wide too).
static READ_POOLS: LazyLock<DashMap<PathBuf, SqlitePool>> = LazyLock::new(DashMap::new);

/// Opens the data DB and applies its migrations.
pub async fn connect_data_sqlite(path: &Path) -> StoreResult<DataPool> {
    let pool = open_sqlite(&path.display().to_string(), 8).await?;
    let db = DataPool::Sqlite(pool);
    db.migrate().await.map_err(migrate_error)?;
    // An in-memory database is private to its connection: a second pool would see another database.
    let text = path.display().to_string();
    if !text.contains(":memory:") && !text.contains("mode=memory") {
        let options = SqliteConnectOptions::from_str(&text)?
            .synchronous(SqliteSynchronous::Normal)
            .busy_timeout(Duration::from_secs(10))
            .pragma("mmap_size", MMAP_BYTES)
            // Refuses any write: a statement that would write here is a bug, not a slow write.
            .pragma("query_only", "true");
        let readers = wagate_db::pool_options()
            .max_connections(READ_CONNECTIONS)
            .min_connections(0)
            .test_before_acquire(false)
            .connect_lazy_with(options);
        if let DataPool::Sqlite(writers) = &db {
            READ_POOLS.insert(
                writers.connect_options().get_filename().to_path_buf(),
                readers,
            );
        }
    }
    Ok(db)
}

/// The pool list reads use: on SQLite the read-only pool of the same file (when there is one), else `db`.
pub(crate) fn read_pool(db: &DataPool) -> DataPool {
    match db {
        DataPool::Sqlite(writers) => READ_POOLS
            .get(writers.connect_options().get_filename())
            .map(|readers| DataPool::Sqlite(readers.clone()))
            .unwrap_or_else(|| db.clone()),
        DataPool::Postgres(_) => db.clone(),
    }
}

/// Opens the data DB on PostgreSQL and applies its migrations. Sessions are pinned to UTC.
pub async fn connect_data_postgres(url: &str) -> StoreResult<DataPool> {
    let pool = wagate_db::pool_options::<sqlx::Postgres>()
        .max_connections(16)
        .acquire_timeout(Duration::from_secs(10))
        .after_connect(|conn, _| {
            Box::pin(async move {
                conn.execute("SET TIME ZONE 'UTC'").await?;
                Ok(())
            })
        })
        .connect(url)
        .await?;
    let db = DataPool::Postgres(pool);
    db.migrate().await.map_err(migrate_error)?;
    Ok(db)
}

/// Opens the main DB (always SQLite) and applies its migrations.
pub async fn connect_main(path: &Path) -> StoreResult<SqlitePool> {
    let pool = open_sqlite(&path.display().to_string(), 4).await?;
    MAIN_MIGRATIONS
        .run(&pool)
        .await
        .map_err(sqlx::Error::from)?;
    Ok(pool)
}

/// A bounded `SELECT 1`: true when the database answered in time.
pub async fn probe_data(pool: &DataPool) -> bool {
    let probe = async { on_pool!(pool, |p| sqlx::query("SELECT 1").execute(p).await.is_ok()) };
    tokio::time::timeout(PROBE_TIMEOUT, probe)
        .await
        .unwrap_or(false)
}

pub async fn probe_main(pool: &SqlitePool) -> bool {
    let probe = async { sqlx::query("SELECT 1").execute(pool).await.is_ok() };
    tokio::time::timeout(PROBE_TIMEOUT, probe)
        .await
        .unwrap_or(false)
}
