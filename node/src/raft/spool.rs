//! The audit spool: with raft, an audit row is first written to this node's `raft.sqlite` (durable, no
//! network), then a drain task appends spooled rows to the replicated log in batches and deletes them once
//! committed. Without a quorum rows simply wait; a row appended twice (a crash between commit and delete) is
//! stored once, since rows are keyed by their id. Pushes are group-committed: one writer task takes every
//! row waiting and writes them in one transaction (one fsync), then answers each pusher.

use std::sync::Arc;
use std::time::Duration;

use sqlx::SqlitePool;
use tokio::sync::{Notify, mpsc, oneshot};
use tokio_util::sync::CancellationToken;

use super::MainRaft;
use crate::maindb::MainCommand;
use crate::store::audit::AuditRow;

const BATCH: i64 = 256;
/// Rows one spool transaction takes at most.
const GROUP: usize = 512;

type Ack = oneshot::Sender<Result<(), String>>;

#[derive(Clone)]
pub(crate) struct Spool {
    pool: SqlitePool,
    wake: Arc<Notify>,
    rows: mpsc::UnboundedSender<(String, Ack)>,
}

impl Spool {
    /// Starts the spool's writer (it ends when the last handle is dropped).
    pub(crate) fn new(pool: SqlitePool) -> Spool {
        let (rows, queue) = mpsc::unbounded_channel();
        let wake = Arc::new(Notify::new());
        tokio::spawn(write_groups(pool.clone(), wake.clone(), queue));
        Spool { pool, wake, rows }
    }

    /// Returns once the row is on disk (`synchronous=FULL`) in this node's spool.
    pub(crate) async fn push(&self, row: &AuditRow) -> Result<(), String> {
        let text = serde_json::to_string(row).map_err(|e| e.to_string())?;
        let (ack, done) = oneshot::channel();
        self.rows
            .send((text, ack))
            .map_err(|_| "the audit spool is closed".to_string())?;
        done.await
            .unwrap_or_else(|_| Err("the audit spool writer stopped".to_string()))
    }

    /// Rows waiting for a quorum.
    pub(crate) async fn pending(&self) -> Result<i64, sqlx::Error> {
        sqlx::query_scalar("SELECT COUNT(*) FROM audit_spool")
            .fetch_one(&self.pool)
            .await
    }

    async fn next_batch(&self) -> Result<(i64, Vec<AuditRow>), sqlx::Error> {
        let rows: Vec<(i64, String)> =
            sqlx::query_as("SELECT seq, row FROM audit_spool ORDER BY seq LIMIT $1")
                .bind(BATCH)
                .fetch_all(&self.pool)
                .await?;
        let last = rows.last().map(|(seq, _)| *seq).unwrap_or(0);
        let rows = rows
            .iter()
            .filter_map(|(_, text)| serde_json::from_str(text).ok())
            .collect();
        Ok((last, rows))
    }

    async fn drop_through(&self, seq: i64) -> Result<(), sqlx::Error> {
        sqlx::query("DELETE FROM audit_spool WHERE seq <= $1")
            .bind(seq)
            .execute(&self.pool)
            .await?;
        Ok(())
    }
}

/// Writes the rows waiting in one transaction per group and answers their pushers.
async fn write_groups(
    pool: SqlitePool,
    wake: Arc<Notify>,
    mut queue: mpsc::UnboundedReceiver<(String, Ack)>,
) {
    let mut group = Vec::with_capacity(GROUP);
    while queue.recv_many(&mut group, GROUP).await > 0 {
        let result = insert_group(&pool, &group).await.map_err(|e| {
            tracing::warn!(rows = group.len(), error = %e, "audit rows not spooled");
            e.to_string()
        });
        for (_, ack) in group.drain(..) {
            let _ = ack.send(result.clone());
        }
        wake.notify_one();
    }
}

async fn insert_group(pool: &SqlitePool, group: &[(String, Ack)]) -> Result<(), sqlx::Error> {
    let mut tx = pool.begin().await?;
    for (text, _) in group {
        sqlx::query("INSERT INTO audit_spool (row) VALUES ($1)")
            .bind(text)
            .execute(&mut *tx)
            .await?;
    }
    tx.commit().await
}

/// Drains the spool into the log until shutdown; what is left then waits on disk for the next start.
pub(crate) async fn drain(raft: Arc<MainRaft>, shutdown: CancellationToken) {
    let spool = raft.spool.clone();
    loop {
        let (last, rows) = match spool.next_batch().await {
            Ok(batch) => batch,
            Err(err) => {
                tracing::warn!(error = %err, "audit spool unreadable");
                (0, Vec::new())
            }
        };
        if last == 0 {
            tokio::select! {
                _ = shutdown.cancelled() => return,
                _ = spool.wake.notified() => continue,
                _ = tokio::time::sleep(Duration::from_secs(1)) => continue,
            }
        }
        let appended = if rows.is_empty() {
            true
        } else {
            let count = rows.len();
            match raft.write(MainCommand::AppendAudit { rows }).await {
                Ok(_) => {
                    metrics::counter!("wagate_raft_audit_rows_appended_total")
                        .increment(count as u64);
                    true
                }
                Err(err) => {
                    tracing::debug!(error = %err, "audit rows stay spooled until a quorum is back");
                    false
                }
            }
        };
        if appended {
            if let Err(err) = spool.drop_through(last).await {
                tracing::warn!(error = %err, "audit spool not trimmed");
            }
        } else {
            tokio::select! {
                _ = shutdown.cancelled() => return,
                _ = tokio::time::sleep(Duration::from_millis(500)) => {}
            }
        }
    }
}
