//! The dialect dispatch beyond a bare pool: statements executed on a [`DataPool`] or inside a [`DataTx`], an
//! open transaction on either backend. Store functions that must share one transaction (an event's row and its
//! outbox rows) take `&mut DataTx`; the macros compile one body for both backends.

use crate::{DataPool, write_turn};

/// An open transaction on the data DB, on either backend.
pub enum DataTx {
    /// The transaction, then this process's write turn ([`write_turn`]): fields drop in order, so the turn
    /// passes on only once the transaction is finished.
    Sqlite(
        sqlx::Transaction<'static, sqlx::Sqlite>,
        Option<tokio::sync::SemaphorePermit<'static>>,
    ),
    Postgres(sqlx::Transaction<'static, sqlx::Postgres>),
}

/// Opens a transaction on the data DB. On SQLite it takes the write lock up front (`BEGIN IMMEDIATE`):
/// a deferred transaction that first reads (FTS5 reads its shadow tables when a statement touching
/// `messages` is prepared) and then writes cannot wait for a concurrent writer in WAL mode and fails at
/// once with `database is locked`; an immediate one waits out the busy timeout instead. Before that it waits
/// for this process's write turn, so concurrent event transactions queue in order without holding pooled
/// connections (a writer inside its transaction may still need one for a read).
pub async fn begin(db: &DataPool) -> Result<DataTx, sqlx::Error> {
    Ok(match db {
        DataPool::Sqlite(p) => {
            let turn = write_turn(db).await;
            DataTx::Sqlite(p.begin_with("BEGIN IMMEDIATE").await?, turn)
        }
        DataPool::Postgres(p) => DataTx::Postgres(p.begin().await?),
    })
}

impl DataTx {
    pub async fn commit(self) -> Result<(), sqlx::Error> {
        match self {
            DataTx::Sqlite(tx, _turn) => tx.commit().await,
            DataTx::Postgres(tx) => tx.commit().await,
        }
    }

    /// Undoes the transaction (dropping it would too, but this waits until the database has).
    pub async fn rollback(self) -> Result<(), sqlx::Error> {
        match self {
            DataTx::Sqlite(tx, _turn) => tx.rollback().await,
            DataTx::Postgres(tx) => tx.rollback().await,
        }
    }
}

/// Executes a statement on a [`DataPool`]; yields the number of rows affected.
#[macro_export]
macro_rules! execute {
    ($pool:expr, $query:expr) => {
        match $pool {
            $crate::DataPool::Sqlite(p) => $query.execute(p).await.map(|r| r.rows_affected()),
            $crate::DataPool::Postgres(p) => $query.execute(p).await.map(|r| r.rows_affected()),
        }
    };
}

/// Runs `$body` with `$c` bound to the transaction's connection (`&mut *tx`) on either backend.
#[macro_export]
macro_rules! on_tx {
    ($tx:expr, |$c:ident| $body:expr) => {
        match $tx {
            $crate::DataTx::Sqlite(t, _) => {
                let $c = &mut **t;
                $body
            }
            $crate::DataTx::Postgres(t) => {
                let $c = &mut **t;
                $body
            }
        }
    };
}

/// Executes a statement inside a [`DataTx`]; yields the number of rows affected.
#[macro_export]
macro_rules! execute_tx {
    ($tx:expr, $query:expr) => {
        $crate::on_tx!($tx, |c| $query.execute(c).await.map(|r| r.rows_affected()))
    };
}
