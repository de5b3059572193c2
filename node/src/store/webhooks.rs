//! The `webhooks` table: CRUD for the webhook resource and the active-webhook read behind the pipeline's
//! per-session cache. JSON columns (`events`, `headers`, `filters`) are TEXT. It decides nothing about
//! validation or delivery.

use wagate_proto::dto::webhooks::WebhookFilters;

use super::{
    DataPool, DataTx, StoreError, StoreResult, execute, from_json, to_json, with_pool, with_tx,
};

const INSERT: &str = "INSERT INTO webhooks (id, session_id, url, events, secret, headers, active, filters, \
     retry_count, last_triggered_at, created_at, updated_at) \
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)";
const UPDATE: &str = "UPDATE webhooks SET url = $3, events = $4, secret = $5, headers = $6, active = $7, \
     filters = $8, retry_count = $9, updated_at = $10 WHERE id = $1 AND session_id = $2";
const SELECT_ONE: &str = "SELECT * FROM webhooks WHERE id = $1 AND session_id = $2";
const SELECT_BY_ID: &str = "SELECT * FROM webhooks WHERE id = $1";
const SELECT_SESSION: &str = "SELECT * FROM webhooks WHERE session_id = $1 ORDER BY created_at, id";
const SELECT_ACTIVE_SESSION: &str =
    "SELECT * FROM webhooks WHERE session_id = $1 AND active ORDER BY created_at, id";
const SELECT_ALL: &str = "SELECT * FROM webhooks ORDER BY created_at, id";
const DELETE: &str = "DELETE FROM webhooks WHERE id = $1 AND session_id = $2";
const TOUCH: &str = "UPDATE webhooks SET last_triggered_at = $2 WHERE id = $1";

/// A webhook row, secrets included: only the HTTP layer strips them.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct WebhookRecord {
    pub id: String,
    pub session_id: String,
    pub url: String,
    pub events: Vec<String>,
    pub secret: Option<String>,
    pub headers: serde_json::Map<String, serde_json::Value>,
    pub active: bool,
    pub filters: Option<WebhookFilters>,
    pub retry_count: i32,
    pub last_triggered_at: Option<i64>,
    pub created_at: i64,
    pub updated_at: i64,
}

#[derive(sqlx::FromRow)]
struct Row {
    id: String,
    session_id: String,
    url: String,
    events: String,
    secret: Option<String>,
    headers: String,
    active: bool,
    filters: Option<String>,
    retry_count: i32,
    last_triggered_at: Option<i64>,
    created_at: i64,
    updated_at: i64,
}

impl TryFrom<Row> for WebhookRecord {
    type Error = StoreError;
    fn try_from(r: Row) -> StoreResult<WebhookRecord> {
        Ok(WebhookRecord {
            events: from_json(&r.events)?,
            headers: from_json(&r.headers)?,
            filters: r.filters.as_deref().map(from_json).transpose()?,
            id: r.id,
            session_id: r.session_id,
            url: r.url,
            secret: r.secret,
            active: r.active,
            retry_count: r.retry_count,
            last_triggered_at: r.last_triggered_at,
            created_at: r.created_at,
            updated_at: r.updated_at,
        })
    }
}

fn records(rows: Vec<Row>) -> StoreResult<Vec<WebhookRecord>> {
    rows.into_iter().map(WebhookRecord::try_from).collect()
}

struct Columns {
    events: String,
    headers: String,
    filters: Option<String>,
}

fn columns(w: &WebhookRecord) -> StoreResult<Columns> {
    Ok(Columns {
        events: to_json(&w.events)?,
        headers: to_json(&w.headers)?,
        filters: w.filters.as_ref().map(to_json).transpose()?,
    })
}

pub(crate) async fn insert(db: &DataPool, w: &WebhookRecord) -> StoreResult<()> {
    let c = columns(w)?;
    execute!(
        db,
        sqlx::query(INSERT)
            .bind(&w.id)
            .bind(&w.session_id)
            .bind(&w.url)
            .bind(&c.events)
            .bind(&w.secret)
            .bind(&c.headers)
            .bind(w.active)
            .bind(&c.filters)
            .bind(w.retry_count)
            .bind(w.last_triggered_at)
            .bind(w.created_at)
            .bind(w.updated_at)
    )?;
    Ok(())
}

/// Writes every editable column of an existing webhook.
pub(crate) async fn update(db: &DataPool, w: &WebhookRecord) -> StoreResult<()> {
    let c = columns(w)?;
    let done = execute!(
        db,
        sqlx::query(UPDATE)
            .bind(&w.id)
            .bind(&w.session_id)
            .bind(&w.url)
            .bind(&c.events)
            .bind(&w.secret)
            .bind(&c.headers)
            .bind(w.active)
            .bind(&c.filters)
            .bind(w.retry_count)
            .bind(w.updated_at)
    )?;
    if done == 0 {
        return Err(StoreError::NotFound);
    }
    Ok(())
}

pub(crate) async fn get(db: &DataPool, session_id: &str, id: &str) -> StoreResult<WebhookRecord> {
    let row: Row = with_pool!(db, p => sqlx::query_as(SELECT_ONE).bind(id).bind(session_id).fetch_one(p).await)?;
    row.try_into()
}

/// A webhook by id alone (redrive reads the target of a failure row).
pub(crate) async fn find(db: &DataPool, id: &str) -> StoreResult<Option<WebhookRecord>> {
    let row: Option<Row> =
        with_pool!(db, p => sqlx::query_as(SELECT_BY_ID).bind(id).fetch_optional(p).await)?;
    row.map(WebhookRecord::try_from).transpose()
}

pub(crate) async fn list_for_session(
    db: &DataPool,
    session_id: &str,
) -> StoreResult<Vec<WebhookRecord>> {
    let rows =
        with_pool!(db, p => sqlx::query_as(SELECT_SESSION).bind(session_id).fetch_all(p).await)?;
    records(rows)
}

/// The active webhooks of a session, read on the connection of an open transaction (the event path reads
/// them there, so a cache miss never needs a second connection while the transaction holds the write lock).
pub(crate) async fn list_active_for_session_in(
    tx: &mut DataTx,
    session_id: &str,
) -> StoreResult<Vec<WebhookRecord>> {
    let rows = with_tx!(tx, c => sqlx::query_as(SELECT_ACTIVE_SESSION).bind(session_id).fetch_all(c).await)?;
    records(rows)
}

/// Every webhook, oldest first (the all-sessions list filters and pages it by the caller's scope).
pub(crate) async fn list_all(db: &DataPool) -> StoreResult<Vec<WebhookRecord>> {
    let rows = with_pool!(db, p => sqlx::query_as(SELECT_ALL).fetch_all(p).await)?;
    records(rows)
}

pub(crate) async fn delete(db: &DataPool, session_id: &str, id: &str) -> StoreResult<()> {
    let done = execute!(db, sqlx::query(DELETE).bind(id).bind(session_id))?;
    if done == 0 {
        return Err(StoreError::NotFound);
    }
    Ok(())
}

/// A real 2xx outside the worker (redrive) moves `last_triggered_at`.
pub(crate) async fn touch(db: &DataPool, id: &str, at_ms: i64) -> StoreResult<()> {
    execute!(db, sqlx::query(TOUCH).bind(id).bind(at_ms))?;
    Ok(())
}
