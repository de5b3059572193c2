//! The `audit_logs` table of the main DB: append, filtered listing, and retention pruning.

use serde::{Deserialize, Serialize};
use sqlx::{QueryBuilder, Sqlite, SqliteExecutor, SqlitePool};

use super::{StoreResult, from_json, to_json};

const INSERT: &str = "INSERT INTO audit_logs (id, action, severity, api_key_id, api_key_name, session_id, \
     ip_address, method, path, status_code, metadata, created_at) \
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12) ON CONFLICT (id) DO NOTHING";
const PRUNE: &str = "DELETE FROM audit_logs WHERE created_at < $1";

/// One audit row. Serialisable: with raft, rows travel in log entries and snapshots. Appending a row whose id
/// is already stored is a no-op, so a batch replayed after a crash adds nothing twice.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct AuditRow {
    pub id: String,
    pub action: String,
    pub severity: String,
    pub api_key_id: Option<String>,
    pub api_key_name: Option<String>,
    pub session_id: Option<String>,
    pub ip_address: Option<String>,
    pub method: Option<String>,
    pub path: Option<String>,
    pub status_code: Option<i64>,
    pub metadata: Option<serde_json::Value>,
    pub created_at: i64,
}

#[derive(sqlx::FromRow)]
struct Row {
    id: String,
    action: String,
    severity: String,
    api_key_id: Option<String>,
    api_key_name: Option<String>,
    session_id: Option<String>,
    ip_address: Option<String>,
    method: Option<String>,
    path: Option<String>,
    status_code: Option<i64>,
    metadata: Option<String>,
    created_at: i64,
}

/// Filters of `GET /api/audit`.
#[derive(Debug, Clone, Default)]
pub struct AuditFilter {
    pub action: Option<String>,
    pub session_id: Option<String>,
    pub api_key_id: Option<String>,
    /// Only rows of these sessions (a session-restricted caller); `None` = no restriction.
    pub sessions: Option<Vec<String>>,
    pub limit: i64,
    pub offset: i64,
}

pub(crate) async fn insert<'c>(pool: impl SqliteExecutor<'c>, row: &AuditRow) -> StoreResult<()> {
    sqlx::query(INSERT)
        .bind(&row.id)
        .bind(&row.action)
        .bind(&row.severity)
        .bind(&row.api_key_id)
        .bind(&row.api_key_name)
        .bind(&row.session_id)
        .bind(&row.ip_address)
        .bind(&row.method)
        .bind(&row.path)
        .bind(row.status_code)
        .bind(row.metadata.as_ref().map(to_json).transpose()?)
        .bind(row.created_at)
        .execute(pool)
        .await?;
    Ok(())
}

fn push_filters(q: &mut QueryBuilder<Sqlite>, filter: &AuditFilter) {
    q.push(" WHERE 1 = 1");
    if let Some(action) = &filter.action {
        q.push(" AND action = ").push_bind(action.clone());
    }
    if let Some(session_id) = &filter.session_id {
        q.push(" AND session_id = ").push_bind(session_id.clone());
    }
    if let Some(key_id) = &filter.api_key_id {
        q.push(" AND api_key_id = ").push_bind(key_id.clone());
    }
    if let Some(sessions) = &filter.sessions {
        if sessions.is_empty() {
            q.push(" AND 1 = 0");
        } else {
            q.push(" AND session_id IN (");
            let mut list = q.separated(", ");
            for id in sessions {
                list.push_bind(id.clone());
            }
            list.push_unseparated(")");
        }
    }
}

/// Newest first, with the total count of matching rows.
pub(crate) async fn list(
    pool: &SqlitePool,
    filter: &AuditFilter,
) -> StoreResult<(Vec<AuditRow>, i64)> {
    let mut count = QueryBuilder::<Sqlite>::new("SELECT COUNT(*) FROM audit_logs");
    push_filters(&mut count, filter);
    let total: i64 = count.build_query_scalar().fetch_one(pool).await?;
    let mut select = QueryBuilder::<Sqlite>::new("SELECT * FROM audit_logs");
    push_filters(&mut select, filter);
    select
        .push(" ORDER BY created_at DESC, id DESC LIMIT ")
        .push_bind(filter.limit);
    select.push(" OFFSET ").push_bind(filter.offset);
    let rows: Vec<Row> = select.build_query_as().fetch_all(pool).await?;
    let rows = rows
        .into_iter()
        .map(from_row)
        .collect::<StoreResult<Vec<_>>>()?;
    Ok((rows, total))
}

fn from_row(r: Row) -> StoreResult<AuditRow> {
    Ok(AuditRow {
        metadata: r.metadata.as_deref().map(from_json).transpose()?,
        id: r.id,
        action: r.action,
        severity: r.severity,
        api_key_id: r.api_key_id,
        api_key_name: r.api_key_name,
        session_id: r.session_id,
        ip_address: r.ip_address,
        method: r.method,
        path: r.path,
        status_code: r.status_code,
        created_at: r.created_at,
    })
}

/// Deletes rows older than `cutoff_ms`; returns how many went.
pub(crate) async fn prune<'c>(pool: impl SqliteExecutor<'c>, cutoff_ms: i64) -> StoreResult<u64> {
    Ok(sqlx::query(PRUNE)
        .bind(cutoff_ms)
        .execute(pool)
        .await?
        .rows_affected())
}

/// Every row, oldest first (snapshots).
pub(crate) async fn all<'c>(db: impl SqliteExecutor<'c>) -> StoreResult<Vec<AuditRow>> {
    let rows: Vec<Row> = sqlx::query_as("SELECT * FROM audit_logs ORDER BY created_at, id")
        .fetch_all(db)
        .await?;
    rows.into_iter().map(from_row).collect()
}

pub(crate) async fn delete_all<'c>(db: impl SqliteExecutor<'c>) -> StoreResult<()> {
    sqlx::query("DELETE FROM audit_logs").execute(db).await?;
    Ok(())
}
