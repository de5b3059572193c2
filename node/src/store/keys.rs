//! The `api_keys` table of the main DB. Keys are stored as SHA-256 hashes; the plaintext never lands here.

use serde::{Deserialize, Serialize};
use sqlx::SqliteExecutor;
use wagate_proto::Role;

use super::{StoreError, StoreResult, from_json, to_json};

const SELECT_ALL: &str = "SELECT * FROM api_keys ORDER BY created_at, id";
const SELECT_ONE: &str = "SELECT * FROM api_keys WHERE id = $1";
const INSERT: &str = "INSERT INTO api_keys (id, name, key_hash, key_prefix, role, allowed_sessions, \
     allowed_ips, is_active, expires_at, usage_count, created_at, updated_at) \
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, 0, $10, $10)";
const UPDATE: &str = "UPDATE api_keys SET name = $2, role = $3, allowed_sessions = $4, allowed_ips = $5, \
     is_active = $6, expires_at = $7, updated_at = $8 WHERE id = $1";
const RESTORE: &str = "INSERT INTO api_keys (id, name, key_hash, key_prefix, role, allowed_sessions, \
     allowed_ips, is_active, expires_at, last_used_at, usage_count, created_at, updated_at) \
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)";
const DELETE: &str = "DELETE FROM api_keys WHERE id = $1";
const ADD_USAGE: &str =
    "UPDATE api_keys SET usage_count = usage_count + $2, last_used_at = $3 WHERE id = $1";

/// An API key as the gateway knows it (never the plaintext). Serialisable: raft log entries and snapshots carry it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ApiKey {
    pub id: String,
    pub name: String,
    pub key_hash: String,
    pub key_prefix: String,
    pub role: Role,
    /// `None` means every session; `Some` lists session ids.
    pub allowed_sessions: Option<Vec<String>>,
    pub allowed_ips: Option<Vec<String>>,
    pub is_active: bool,
    pub expires_at: Option<i64>,
    pub last_used_at: Option<i64>,
    pub usage_count: i64,
    pub created_at: i64,
    pub updated_at: i64,
}

#[derive(sqlx::FromRow)]
struct ApiKeyRow {
    id: String,
    name: String,
    key_hash: String,
    key_prefix: String,
    role: String,
    allowed_sessions: Option<String>,
    allowed_ips: Option<String>,
    is_active: bool,
    expires_at: Option<i64>,
    last_used_at: Option<i64>,
    usage_count: i64,
    created_at: i64,
    updated_at: i64,
}

impl TryFrom<ApiKeyRow> for ApiKey {
    type Error = StoreError;
    fn try_from(r: ApiKeyRow) -> StoreResult<ApiKey> {
        Ok(ApiKey {
            role: r
                .role
                .parse()
                .map_err(|_| StoreError::Corrupt(format!("role '{}'", r.role)))?,
            allowed_sessions: r.allowed_sessions.as_deref().map(from_json).transpose()?,
            allowed_ips: r.allowed_ips.as_deref().map(from_json).transpose()?,
            id: r.id,
            name: r.name,
            key_hash: r.key_hash,
            key_prefix: r.key_prefix,
            is_active: r.is_active,
            expires_at: r.expires_at,
            last_used_at: r.last_used_at,
            usage_count: r.usage_count,
            created_at: r.created_at,
            updated_at: r.updated_at,
        })
    }
}

pub(crate) async fn list_keys<'c>(pool: impl SqliteExecutor<'c>) -> StoreResult<Vec<ApiKey>> {
    let rows: Vec<ApiKeyRow> = sqlx::query_as(SELECT_ALL).fetch_all(pool).await?;
    rows.into_iter().map(ApiKey::try_from).collect()
}

pub(crate) async fn get_key<'c>(pool: impl SqliteExecutor<'c>, id: &str) -> StoreResult<ApiKey> {
    let row: ApiKeyRow = sqlx::query_as(SELECT_ONE).bind(id).fetch_one(pool).await?;
    row.try_into()
}

pub(crate) async fn insert_key<'c>(pool: impl SqliteExecutor<'c>, key: &ApiKey) -> StoreResult<()> {
    sqlx::query(INSERT)
        .bind(&key.id)
        .bind(&key.name)
        .bind(&key.key_hash)
        .bind(&key.key_prefix)
        .bind(key.role.as_str())
        .bind(key.allowed_sessions.as_ref().map(to_json).transpose()?)
        .bind(key.allowed_ips.as_ref().map(to_json).transpose()?)
        .bind(key.is_active)
        .bind(key.expires_at)
        .bind(key.created_at)
        .execute(pool)
        .await?;
    Ok(())
}

pub(crate) async fn update_key<'c>(pool: impl SqliteExecutor<'c>, key: &ApiKey) -> StoreResult<()> {
    let done = sqlx::query(UPDATE)
        .bind(&key.id)
        .bind(&key.name)
        .bind(key.role.as_str())
        .bind(key.allowed_sessions.as_ref().map(to_json).transpose()?)
        .bind(key.allowed_ips.as_ref().map(to_json).transpose()?)
        .bind(key.is_active)
        .bind(key.expires_at)
        .bind(key.updated_at)
        .execute(pool)
        .await?;
    if done.rows_affected() == 0 {
        return Err(StoreError::NotFound);
    }
    Ok(())
}

pub(crate) async fn delete_key<'c>(pool: impl SqliteExecutor<'c>, id: &str) -> StoreResult<()> {
    let done = sqlx::query(DELETE).bind(id).execute(pool).await?;
    if done.rows_affected() == 0 {
        return Err(StoreError::NotFound);
    }
    Ok(())
}

/// Adds usage counted in memory since the last flush (keeps the request path free of writes).
pub(crate) async fn add_usage<'c>(
    pool: impl SqliteExecutor<'c>,
    id: &str,
    count: i64,
    last_used_at: i64,
) -> StoreResult<()> {
    sqlx::query(ADD_USAGE)
        .bind(id)
        .bind(count)
        .bind(last_used_at)
        .execute(pool)
        .await?;
    Ok(())
}

/// Writes a key exactly as given (usage and timestamps included): snapshot install.
pub(crate) async fn restore_key<'c>(db: impl SqliteExecutor<'c>, key: &ApiKey) -> StoreResult<()> {
    sqlx::query(RESTORE)
        .bind(&key.id)
        .bind(&key.name)
        .bind(&key.key_hash)
        .bind(&key.key_prefix)
        .bind(key.role.as_str())
        .bind(key.allowed_sessions.as_ref().map(to_json).transpose()?)
        .bind(key.allowed_ips.as_ref().map(to_json).transpose()?)
        .bind(key.is_active)
        .bind(key.expires_at)
        .bind(key.last_used_at)
        .bind(key.usage_count)
        .bind(key.created_at)
        .bind(key.updated_at)
        .execute(db)
        .await?;
    Ok(())
}

pub(crate) async fn delete_all<'c>(db: impl SqliteExecutor<'c>) -> StoreResult<()> {
    sqlx::query("DELETE FROM api_keys").execute(db).await?;
    Ok(())
}
