//! The `automation_rules` table: CRUD and the enabled-rules read behind the automation matcher's cache.
//! `conditions` is a JSON TEXT list of webhook filter conditions.

use wagate_proto::dto::webhooks::FilterCondition;

use super::{DataPool, StoreError, StoreResult, execute, from_json, on_pool, to_json};

const INSERT: &str = "INSERT INTO automation_rules (id, session_id, name, enabled, conditions, reply_text, \
     cooldown_seconds, created_at, updated_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)";
const UPDATE: &str = "UPDATE automation_rules SET name = $3, enabled = $4, conditions = $5, reply_text = $6, \
     cooldown_seconds = $7, updated_at = $8 WHERE id = $1 AND session_id = $2";
const SELECT_ONE: &str = "SELECT * FROM automation_rules WHERE id = $1 AND session_id = $2";
const SELECT_SESSION: &str =
    "SELECT * FROM automation_rules WHERE session_id = $1 ORDER BY created_at, id";
const DELETE: &str = "DELETE FROM automation_rules WHERE id = $1 AND session_id = $2";

#[derive(Debug, Clone, PartialEq)]
pub(crate) struct RuleRecord {
    pub id: String,
    pub session_id: String,
    pub name: String,
    pub enabled: bool,
    pub conditions: Vec<FilterCondition>,
    pub reply_text: String,
    pub cooldown_seconds: i64,
    pub created_at: i64,
    pub updated_at: i64,
}

#[derive(sqlx::FromRow)]
struct Row {
    id: String,
    session_id: String,
    name: String,
    enabled: bool,
    conditions: String,
    reply_text: String,
    cooldown_seconds: i32,
    created_at: i64,
    updated_at: i64,
}

impl TryFrom<Row> for RuleRecord {
    type Error = StoreError;
    fn try_from(r: Row) -> StoreResult<RuleRecord> {
        Ok(RuleRecord {
            conditions: from_json(&r.conditions)?,
            id: r.id,
            session_id: r.session_id,
            name: r.name,
            enabled: r.enabled,
            reply_text: r.reply_text,
            cooldown_seconds: i64::from(r.cooldown_seconds),
            created_at: r.created_at,
            updated_at: r.updated_at,
        })
    }
}

fn cooldown(r: &RuleRecord) -> i32 {
    i32::try_from(r.cooldown_seconds).unwrap_or(i32::MAX)
}

/// `SessionGone` when the session was deleted meanwhile.
pub(crate) async fn insert(db: &DataPool, r: &RuleRecord) -> StoreResult<()> {
    let conditions = to_json(&r.conditions)?;
    execute!(
        db,
        sqlx::query(INSERT)
            .bind(&r.id)
            .bind(&r.session_id)
            .bind(&r.name)
            .bind(r.enabled)
            .bind(&conditions)
            .bind(&r.reply_text)
            .bind(cooldown(r))
            .bind(r.created_at)
            .bind(r.updated_at)
    )
    .map_err(|e| StoreError::from(e).in_session(&r.session_id))?;
    Ok(())
}

pub(crate) async fn update(db: &DataPool, r: &RuleRecord) -> StoreResult<()> {
    let conditions = to_json(&r.conditions)?;
    let done = execute!(
        db,
        sqlx::query(UPDATE)
            .bind(&r.id)
            .bind(&r.session_id)
            .bind(&r.name)
            .bind(r.enabled)
            .bind(&conditions)
            .bind(&r.reply_text)
            .bind(cooldown(r))
            .bind(r.updated_at)
    )?;
    if done == 0 {
        return Err(StoreError::NotFound);
    }
    Ok(())
}

pub(crate) async fn get(db: &DataPool, session_id: &str, id: &str) -> StoreResult<RuleRecord> {
    let row: Row = on_pool!(db, |p| sqlx::query_as(SELECT_ONE)
        .bind(id)
        .bind(session_id)
        .fetch_one(p)
        .await)?;
    row.try_into()
}

pub(crate) async fn list_for_session(
    db: &DataPool,
    session_id: &str,
) -> StoreResult<Vec<RuleRecord>> {
    let rows: Vec<Row> = on_pool!(db, |p| sqlx::query_as(SELECT_SESSION)
        .bind(session_id)
        .fetch_all(p)
        .await)?;
    rows.into_iter().map(RuleRecord::try_from).collect()
}

pub(crate) async fn delete(db: &DataPool, session_id: &str, id: &str) -> StoreResult<()> {
    let done = execute!(db, sqlx::query(DELETE).bind(id).bind(session_id))?;
    if done == 0 {
        return Err(StoreError::NotFound);
    }
    Ok(())
}
