//! The audit log service: records who changed what (keys, sessions, webhooks, data), lists rows for
//! `GET /api/audit`, and prunes rows older than `AUDIT_RETENTION_DAYS`. With raft, rows go to the durable
//! local spool and reach every replica through the log; pruning is a replicated command the leader issues,
//! so every replica prunes the same rows. A handler records without waiting, but the response of the request
//! waits for the row's write ([`with_durable_audit`], run around every handler by `http/edge.rs`), so a crash after a response never loses its row.

use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use sqlx::SqlitePool;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::maindb::MainCommand;
use crate::raft::MainRaft;
use crate::store::audit::{self as audit_store, AuditFilter, AuditRow};
use crate::store::{StoreResult, now_ms};

/// Who did it and from where; filled by the HTTP layer from the authenticated caller.
#[derive(Debug, Clone, Default)]
pub struct AuditActor {
    pub api_key_id: Option<String>,
    pub api_key_name: Option<String>,
    pub ip_address: Option<String>,
    pub method: Option<String>,
    pub path: Option<String>,
}

#[derive(Clone)]
pub struct AuditLog {
    pool: SqlitePool,
    raft: Option<Arc<MainRaft>>,
}

const DAY_MS: i64 = 24 * 60 * 60 * 1000;

/// The audit writes started while one request is handled.
#[derive(Clone, Default)]
struct Pending(Arc<Mutex<Vec<JoinHandle<()>>>>);

tokio::task_local! {
    static PENDING: Pending;
}

/// Runs `work` and then waits until every audit row it recorded is durably written (in the raft spool, or in
/// the main DB without raft). Rows recorded outside such a scope (after a streamed body, by a background
/// task) are still written, without anyone waiting for them.
pub async fn with_durable_audit<T>(work: impl Future<Output = T>) -> T {
    let pending = Pending::default();
    let out = PENDING.scope(pending.clone(), work).await;
    // A write that failed was logged where it failed; the request's outcome stands.
    let handles = std::mem::take(&mut *pending.0.lock());
    for handle in handles {
        let _ = handle.await;
    }
    out
}

impl AuditLog {
    pub fn new(pool: SqlitePool) -> AuditLog {
        AuditLog { pool, raft: None }
    }

    /// Rows replicated through `raft` (spooled locally first); `pool` is this node's replica, read locally.
    pub fn replicated(pool: SqlitePool, raft: Arc<MainRaft>) -> AuditLog {
        AuditLog {
            pool,
            raft: Some(raft),
        }
    }

    /// Appends a row without making the caller wait (the request's response waits, see
    /// [`with_durable_audit`]); a failed write is logged, never surfaced.
    pub fn record(
        &self,
        action: &str,
        actor: &AuditActor,
        session_id: Option<&str>,
        status_code: u16,
        metadata: Option<serde_json::Value>,
    ) {
        let row = AuditRow {
            id: uuid::Uuid::now_v7().to_string(),
            action: action.to_string(),
            severity: severity_of(status_code).to_string(),
            api_key_id: actor.api_key_id.clone(),
            api_key_name: actor.api_key_name.clone(),
            session_id: session_id.map(str::to_string),
            ip_address: actor.ip_address.clone(),
            method: actor.method.clone(),
            path: actor.path.clone(),
            status_code: Some(i64::from(status_code)),
            metadata,
            created_at: now_ms(),
        };
        // Spawned, so the write completes even when the request is dropped half-way.
        let write = match &self.raft {
            Some(raft) => {
                let raft = raft.clone();
                tokio::spawn(async move {
                    if let Err(err) = raft.spool.push(&row).await {
                        tracing::warn!(action = %row.action, error = %err, "audit row not spooled");
                    }
                })
            }
            None => {
                let pool = self.pool.clone();
                tokio::spawn(async move {
                    if let Err(err) = audit_store::insert(&pool, &row).await {
                        tracing::warn!(action = %row.action, error = %err, "audit row not written");
                    }
                })
            }
        };
        let _ = PENDING.try_with(|pending| pending.0.lock().push(write));
    }

    pub async fn list(&self, filter: &AuditFilter) -> StoreResult<(Vec<AuditRow>, i64)> {
        audit_store::list(&self.pool, filter).await
    }

    /// Prunes once an hour while `retention_days` is positive; 0 or negative disables pruning.
    pub async fn run_pruning(self, retention_days: i64, shutdown: CancellationToken) {
        if retention_days <= 0 {
            return;
        }
        let mut tick = tokio::time::interval(Duration::from_secs(3600));
        loop {
            tokio::select! {
                _ = shutdown.cancelled() => return,
                _ = tick.tick() => {
                    let cutoff = now_ms().saturating_sub(retention_days.saturating_mul(DAY_MS));
                    if let Some(raft) = &self.raft {
                        if raft.is_leader()
                            && let Err(err) = raft.write(MainCommand::PruneAudit { before: cutoff }).await
                        {
                            tracing::warn!(error = %err, "audit pruning not committed");
                        }
                        continue;
                    }
                    match audit_store::prune(&self.pool, cutoff).await {
                        Ok(n) if n > 0 => tracing::info!(rows = n, "pruned audit rows"),
                        Ok(_) => {}
                        Err(err) => tracing::warn!(error = %err, "audit pruning failed"),
                    }
                }
            }
        }
    }
}

/// The contract's severities (`info`, `warn`, `error`) by the answer's status.
fn severity_of(status_code: u16) -> &'static str {
    match status_code {
        500.. => "error",
        400.. => "warn",
        _ => "info",
    }
}

#[cfg(test)]
mod tests {
    use super::severity_of;

    #[test]
    fn severities_are_the_contracts_names() {
        assert_eq!(severity_of(201), "info");
        assert_eq!(severity_of(409), "warn");
        assert_eq!(severity_of(504), "error");
    }
}
