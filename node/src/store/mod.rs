//! Persistence. The data DB (sessions, webhooks, messages, ...) is SQLite or PostgreSQL behind one
//! `DataPool`; the main DB (API keys, audit log) is always a local SQLite file. All SQL lives in this
//! folder, one file per table group; callers never learn which backend they have.

pub(crate) mod audit;
pub(crate) mod automation;
pub(crate) mod backends;
pub(crate) mod batches;
pub(crate) mod chat_states;
pub(crate) mod contact_names;
pub(crate) mod data_tables;
pub(crate) mod idempotency;
pub(crate) mod keys;
pub(crate) mod messages;
pub(crate) mod outbox;
pub(crate) mod poll_votes;
pub(crate) mod reactions;
pub(crate) mod search;
pub(crate) mod sessions;
pub(crate) mod stats;
pub(crate) mod status_updates;
pub(crate) mod templates;
pub(crate) mod webhooks;

/// The data database, on either backend (shared with the workers crate, which links the same tables).
/// Queries are written once and compiled for both arms by [`with_pool!`]: `$n` placeholders,
/// `ON CONFLICT` and `RETURNING` mean the same on both.
pub use wagate_db::DataPool;

/// Runs `$body` with `$p` bound to the concrete pool of either backend.
macro_rules! with_pool {
    ($pool:expr, $p:ident => $body:expr) => {
        match $pool {
            $crate::store::DataPool::Sqlite($p) => $body,
            $crate::store::DataPool::Postgres($p) => $body,
        }
    };
}
pub(crate) use with_pool;

/// Executes a statement on either backend; yields the number of rows affected.
macro_rules! execute {
    ($pool:expr, $query:expr) => {
        match $pool {
            $crate::store::DataPool::Sqlite(p) => {
                $query.execute(p).await.map(|r| r.rows_affected())
            }
            $crate::store::DataPool::Postgres(p) => {
                $query.execute(p).await.map(|r| r.rows_affected())
            }
        }
    };
}
pub(crate) use execute;

/// An open transaction on the data DB, on either backend. Store functions that must share one
/// transaction (persist an event and its outbox rows) take `&mut DataTx`.
pub enum DataTx {
    /// The transaction, then this process's write turn (`wagate_db::write_turn`): fields drop in
    /// order, so the turn passes on only once the transaction is finished.
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
pub async fn begin(db: &DataPool) -> StoreResult<DataTx> {
    Ok(match db {
        DataPool::Sqlite(p) => {
            let turn = wagate_db::write_turn(db).await;
            DataTx::Sqlite(p.begin_with("BEGIN IMMEDIATE").await?, turn)
        }
        DataPool::Postgres(p) => DataTx::Postgres(p.begin().await?),
    })
}

impl DataTx {
    pub async fn commit(self) -> StoreResult<()> {
        match self {
            DataTx::Sqlite(tx, _turn) => tx.commit().await?,
            DataTx::Postgres(tx) => tx.commit().await?,
        }
        Ok(())
    }
}

/// Executes a statement inside a `DataTx`; yields the number of rows affected.
macro_rules! execute_tx {
    ($tx:expr, $query:expr) => {
        match $tx {
            $crate::store::DataTx::Sqlite(t, _) => {
                $query.execute(&mut **t).await.map(|r| r.rows_affected())
            }
            $crate::store::DataTx::Postgres(t) => {
                $query.execute(&mut **t).await.map(|r| r.rows_affected())
            }
        }
    };
}
pub(crate) use execute_tx;

/// Runs `$body` with `$c` bound to the transaction's connection (`&mut *tx`) on either backend.
macro_rules! with_tx {
    ($tx:expr, $c:ident => $body:expr) => {
        match $tx {
            $crate::store::DataTx::Sqlite(t, _) => {
                let $c = &mut **t;
                $body
            }
            $crate::store::DataTx::Postgres(t) => {
                let $c = &mut **t;
                $body
            }
        }
    };
}
pub(crate) use with_tx;

/// Row counts a multi-row statement is prepared for. A batch of any size is written as a few statements of these
/// sizes (largest first), so a connection caches a handful of statement texts instead of one per batch size.
/// Each statement is a round trip to the connection (on SQLite, to its worker thread), so a batch of n rows
/// costs about log(n) of them instead of n.
const ROW_CHUNKS: [usize; 4] = [64, 16, 4, 1];

/// The multi-row texts of one statement, one per [`ROW_CHUNKS`] size and backend, built once.
pub(crate) struct MultiRow {
    postgres: [String; ROW_CHUNKS.len()],
    /// The same texts with anonymous `?` placeholders: SQLite resolves a `$n` parameter's name by walking a
    /// list of every named parameter, and sqlx asks for the name of each one while binding, so a statement
    /// of a thousand `$n` parameters cost half a million list steps (14% of the node's CPU in a webhook
    /// storm) where `?` costs none.
    sqlite: [String; ROW_CHUNKS.len()],
}

impl MultiRow {
    /// `head` + `rows` tuples + `tail`; `tuple(first)` writes one row's tuple whose placeholders start at
    /// `$first` (`$1`-based, `per_row` of them, each used once and in order, so that SQLite's text can use `?`).
    pub(crate) fn new(
        head: &str,
        per_row: usize,
        tuple: fn(usize) -> String,
        tail: &str,
    ) -> MultiRow {
        let postgres = ROW_CHUNKS.map(|rows| {
            let tuples: Vec<String> = (0..rows).map(|i| tuple(1 + i * per_row)).collect();
            format!("{head} {} {tail}", tuples.join(", "))
        });
        let sqlite = postgres
            .clone()
            .map(|text| anonymous_placeholders(&text).unwrap_or(text));
        MultiRow { postgres, sqlite }
    }

    /// Splits `items` into chunks of the prepared sizes, each with its statement text for `tx`'s backend.
    pub(crate) fn chunks<'a, T>(
        &'static self,
        tx: &DataTx,
        mut items: &'a [T],
    ) -> impl Iterator<Item = (&'static str, &'a [T])> + use<'a, T> {
        let texts = match tx {
            DataTx::Sqlite(..) => &self.sqlite,
            DataTx::Postgres(_) => &self.postgres,
        };
        std::iter::from_fn(move || {
            let (i, size) = ROW_CHUNKS
                .iter()
                .enumerate()
                .find(|(_, size)| **size <= items.len())?;
            let (chunk, rest) = items.split_at(*size);
            items = rest;
            Some((texts[i].as_str(), chunk))
        })
    }
}

/// `sql` with every `$n` replaced by `?`, when its placeholders are `$1, $2, ...` each once and in order
/// (then binding by position means the same); `None` otherwise. Statements here hold no `$` in literals.
fn anonymous_placeholders(sql: &str) -> Option<String> {
    let mut out = String::with_capacity(sql.len());
    let mut expected = 1usize;
    let mut rest = sql;
    while let Some(at) = rest.find('$') {
        out.push_str(&rest[..at]);
        let digits = rest[at + 1..]
            .find(|c: char| !c.is_ascii_digit())
            .unwrap_or(rest.len() - at - 1);
        let number: usize = rest[at + 1..at + 1 + digits].parse().ok()?;
        if number != expected {
            return None;
        }
        expected += 1;
        out.push('?');
        rest = &rest[at + 1 + digits..];
    }
    out.push_str(rest);
    Some(out)
}

/// `($first, $first+1, ..., $first+n-1)`.
pub(crate) fn placeholders(first: usize, n: usize) -> String {
    let list: Vec<String> = (first..first + n).map(|i| format!("${i}")).collect();
    format!("({})", list.join(", "))
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
    #[error("database error: {0}")]
    Db(#[source] sqlx::Error),
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
