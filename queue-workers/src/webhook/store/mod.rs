//! The one home of the SQL of the three webhook tables, shared by the node and the workers: `webhooks`
//! ([`webhooks`]: the resource's rows, delivery targets, `last_triggered_at`), `webhook_outbox_events`
//! ([`outbox`]: the node's writes and the delivery state machine) and `webhook_delivery_failures`
//! ([`failures`]: the failure log and its redrive). Input: a [`DataPool`](crate::DataPool) or an open
//! `wagate_db::DataTx`. Stores only: the rules (validation, matching events to webhooks, when to retry) are
//! the services' (the node's `webhooks` and `events` modules, this crate's `retry` and `reconcile`).

use std::fmt::Display;

/// A database failure in a webhook-table store.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("outbox database error: {0}")]
    Db(#[from] sqlx::Error),
    /// The row a call names (a webhook by id and session) does not exist.
    #[error("not found")]
    NotFound,
    /// A JSON column did not decode.
    #[error("stored data is corrupt: {0}")]
    Corrupt(String),
    #[error("unknown outbox status {0:?}")]
    UnknownStatus(String),
    #[error("the outbox writer has stopped")]
    WriterStopped,
}

impl From<serde_json::Error> for StoreError {
    fn from(err: serde_json::Error) -> Self {
        corrupt(err)
    }
}

fn corrupt(err: impl Display) -> StoreError {
    StoreError::Corrupt(err.to_string())
}

// Statements over a set of rows. The id set is one parameter (a JSON array on SQLite, a `text[]` on
// PostgreSQL), so each statement has one text whatever the batch size and is prepared once per connection.

/// A statement over a set of ids: `(SQLite text, PostgreSQL text)`, the set spliced in where `$1` goes.
macro_rules! over_ids {
    ($head:literal, $tail:literal) => {
        (
            concat!($head, " id IN (SELECT value FROM json_each($1)) ", $tail),
            concat!($head, " id = ANY($1) ", $tail),
        )
    };
}

fn json_ids(ids: &[String]) -> String {
    serde_json::to_string(ids).unwrap_or_else(|_| "[]".to_owned())
}

/// Runs `$build(sql)` with the id set bound first, on whichever backend `$pool` is; `$run` finishes the query.
macro_rules! with_ids {
    ($pool:expr, $sql:expr, $ids:expr, |$q:ident| $run:expr) => {
        match $pool {
            $crate::DataPool::Sqlite(p) => {
                let $q = (p, super::json_ids($ids), $sql.0);
                $run
            }
            $crate::DataPool::Postgres(p) => {
                let $q = (p, $ids.to_vec(), $sql.1);
                $run
            }
        }
    };
}

pub mod failures;
pub mod outbox;
pub mod webhooks;
