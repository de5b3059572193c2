//! SQL of the `webhooks` table: the resource's rows (written by the node's webhook service, which owns their
//! rules), the active-webhook read behind the node's per-session subscription cache, the delivery targets the
//! workers read for each attempt, `last_triggered_at`, and the counts behind the stats routes. JSON columns
//! (`events`, `headers`, `filters`) are TEXT. It decides nothing about validation or delivery.

use std::collections::HashMap;

use wagate_db::{DataPool, DataTx, execute, on_pool, on_tx};
use wagate_proto::dto::webhooks::WebhookFilters;

use super::StoreError;
use wagate_db::table_spec::{TableSpec, flag, int, int_or, json, json_or, text};

/// `webhooks` as the spec's data export shows it (`webhooks`); `secret` and `headers` are left out on purpose
/// (an export must not carry a webhook's signing secret).
pub const WEBHOOKS_EXPORT: TableSpec = TableSpec {
    key: "webhooks",
    name: "webhooks",
    columns: &[
        text("id"),
        text("session_id"),
        text("url"),
        json_or("events", "[\"*\"]"),
        flag("active", "true"),
        json("filters"),
        int_or("retry_count", "3"),
        int("last_triggered_at"),
        int("created_at"),
        int("updated_at"),
    ],
    order_by: "id",
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
/// A 2xx moves `last_triggered_at`; the state machine runs it inside its settling transactions.
pub(super) const TOUCH: &str = "UPDATE webhooks SET last_triggered_at = $2 WHERE id = $1";
const TARGETS_OF: (&str, &str) = over_ids!(
    "SELECT id, url, secret, headers, active, retry_count FROM webhooks WHERE",
    ""
);
const COUNT_BY_ACTIVE: &str = "SELECT active, COUNT(*) AS n FROM webhooks GROUP BY active";
const COUNT_BY_SESSION_ACTIVE: &str =
    "SELECT session_id, active, COUNT(*) AS n FROM webhooks GROUP BY session_id, active";

/// A webhook row, secrets included: only the node's HTTP layer strips them.
#[derive(Debug, Clone, PartialEq)]
pub struct WebhookRecord {
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
    fn try_from(r: Row) -> Result<WebhookRecord, StoreError> {
        Ok(WebhookRecord {
            events: serde_json::from_str(&r.events)?,
            headers: serde_json::from_str(&r.headers)?,
            filters: r.filters.as_deref().map(serde_json::from_str).transpose()?,
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

fn records(rows: Vec<Row>) -> Result<Vec<WebhookRecord>, StoreError> {
    rows.into_iter().map(WebhookRecord::try_from).collect()
}

struct Columns {
    events: String,
    headers: String,
    filters: Option<String>,
}

fn columns(w: &WebhookRecord) -> Result<Columns, StoreError> {
    Ok(Columns {
        events: serde_json::to_string(&w.events)?,
        headers: serde_json::to_string(&w.headers)?,
        filters: w.filters.as_ref().map(serde_json::to_string).transpose()?,
    })
}

pub async fn insert(pool: &DataPool, w: &WebhookRecord) -> Result<(), StoreError> {
    let c = columns(w)?;
    execute!(
        pool,
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

/// Writes every editable column of an existing webhook; [`StoreError::NotFound`] when there is none.
pub async fn update(pool: &DataPool, w: &WebhookRecord) -> Result<(), StoreError> {
    let c = columns(w)?;
    let done = execute!(
        pool,
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

/// A webhook of a session; [`StoreError::NotFound`] when there is none.
pub async fn get(pool: &DataPool, session_id: &str, id: &str) -> Result<WebhookRecord, StoreError> {
    let row: Option<Row> = on_pool!(pool, |p| sqlx::query_as(SELECT_ONE)
        .bind(id)
        .bind(session_id)
        .fetch_optional(p)
        .await)?;
    row.ok_or(StoreError::NotFound)?.try_into()
}

/// A webhook by id alone (redrive reads the target of a failure row).
pub async fn find(pool: &DataPool, id: &str) -> Result<Option<WebhookRecord>, StoreError> {
    let row: Option<Row> = on_pool!(pool, |p| sqlx::query_as(SELECT_BY_ID)
        .bind(id)
        .fetch_optional(p)
        .await)?;
    row.map(WebhookRecord::try_from).transpose()
}

pub async fn list_for_session(
    pool: &DataPool,
    session_id: &str,
) -> Result<Vec<WebhookRecord>, StoreError> {
    let rows: Vec<Row> = on_pool!(pool, |p| sqlx::query_as(SELECT_SESSION)
        .bind(session_id)
        .fetch_all(p)
        .await)?;
    records(rows)
}

/// The active webhooks of a session, read on the connection of an open transaction (the node's event path
/// reads them there, so a cache miss never needs a second connection while the transaction holds the write
/// lock).
pub async fn list_active_for_session_in(
    tx: &mut DataTx,
    session_id: &str,
) -> Result<Vec<WebhookRecord>, StoreError> {
    let rows: Vec<Row> = on_tx!(tx, |c| sqlx::query_as(SELECT_ACTIVE_SESSION)
        .bind(session_id)
        .fetch_all(c)
        .await)?;
    records(rows)
}

/// Every webhook, oldest first (the all-sessions list filters and pages it by the caller's scope).
pub async fn list_all(pool: &DataPool) -> Result<Vec<WebhookRecord>, StoreError> {
    let rows: Vec<Row> = on_pool!(pool, |p| sqlx::query_as(SELECT_ALL).fetch_all(p).await)?;
    records(rows)
}

/// Deletes a webhook of a session; [`StoreError::NotFound`] when there is none.
pub async fn delete(pool: &DataPool, session_id: &str, id: &str) -> Result<(), StoreError> {
    let done = execute!(pool, sqlx::query(DELETE).bind(id).bind(session_id))?;
    if done == 0 {
        return Err(StoreError::NotFound);
    }
    Ok(())
}

/// A real 2xx outside the state machine (the node's redrive) moves `last_triggered_at`.
pub async fn touch(pool: &DataPool, id: &str, at_ms: i64) -> Result<(), StoreError> {
    execute!(pool, sqlx::query(TOUCH).bind(id).bind(at_ms))?;
    Ok(())
}

/// Where and how to deliver, read from `webhooks` for each attempt so edits apply to the next retry.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct WebhookTarget {
    pub url: String,
    pub secret: Option<String>,
    pub headers: String,
    pub active: bool,
    pub retry_count: i32,
}

#[derive(sqlx::FromRow)]
struct TargetRow {
    id: String,
    #[sqlx(flatten)]
    target: WebhookTarget,
}

/// The delivery targets of `webhook_ids`, by webhook id; a deleted webhook is absent.
pub async fn load_targets(
    pool: &DataPool,
    webhook_ids: &[String],
) -> Result<HashMap<String, WebhookTarget>, StoreError> {
    let rows = with_ids!(pool, TARGETS_OF, webhook_ids, |q| sqlx::query_as::<
        _,
        TargetRow,
    >(q.2)
    .bind(q.1)
    .fetch_all(q.0)
    .await)?;
    Ok(rows.into_iter().map(|r| (r.id, r.target)).collect())
}

/// `(active, count)` over every webhook.
pub async fn count_by_active(pool: &DataPool) -> Result<Vec<(bool, i64)>, StoreError> {
    Ok(on_pool!(pool, |p| sqlx::query_as(COUNT_BY_ACTIVE)
        .fetch_all(p)
        .await)?)
}

/// `(session id, active, count)`: the counts per session, for callers that see only some sessions.
pub async fn count_by_session_active(
    pool: &DataPool,
) -> Result<Vec<(String, bool, i64)>, StoreError> {
    Ok(on_pool!(pool, |p| sqlx::query_as(COUNT_BY_SESSION_ACTIVE)
        .fetch_all(p)
        .await)?)
}
