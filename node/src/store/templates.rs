//! The `templates` table: per-session message templates, unique by name within a session.

use super::{DataPool, StoreError, StoreResult, execute, now_ms, on_pool};

const INSERT: &str = "INSERT INTO templates (id, session_id, name, body, header, footer, created_at, updated_at) \
     VALUES ($1, $2, $3, $4, $5, $6, $7, $7)";
const UPDATE: &str = "UPDATE templates SET name = $3, body = $4, header = $5, footer = $6, updated_at = $7 \
     WHERE session_id = $1 AND id = $2";
const SELECT_ONE: &str = "SELECT * FROM templates WHERE session_id = $1 AND id = $2";
const SELECT_BY_NAME: &str = "SELECT * FROM templates WHERE session_id = $1 AND name = $2";
const SELECT_ALL: &str = "SELECT * FROM templates WHERE session_id = $1 ORDER BY name";
const DELETE: &str = "DELETE FROM templates WHERE session_id = $1 AND id = $2";

#[derive(Debug, Clone, PartialEq, sqlx::FromRow)]
pub(crate) struct TemplateRow {
    pub id: String,
    pub session_id: String,
    pub name: String,
    pub body: String,
    pub header: Option<String>,
    pub footer: Option<String>,
    pub created_at: i64,
    pub updated_at: i64,
}

fn name_conflict(err: sqlx::Error, name: &str) -> StoreError {
    match StoreError::from(err) {
        StoreError::Conflict { .. } => StoreError::Conflict {
            what: format!("Template '{name}'"),
        },
        other => other,
    }
}

/// `Conflict` for a name the session already uses; `SessionGone` when the session was deleted meanwhile.
pub(crate) async fn insert(db: &DataPool, t: &TemplateRow) -> StoreResult<()> {
    execute!(
        db,
        sqlx::query(INSERT)
            .bind(&t.id)
            .bind(&t.session_id)
            .bind(&t.name)
            .bind(&t.body)
            .bind(&t.header)
            .bind(&t.footer)
            .bind(t.created_at)
    )
    .map_err(|e| name_conflict(e, &t.name).in_session(&t.session_id))?;
    Ok(())
}

pub(crate) async fn update(db: &DataPool, t: &TemplateRow) -> StoreResult<()> {
    let done = execute!(
        db,
        sqlx::query(UPDATE)
            .bind(&t.session_id)
            .bind(&t.id)
            .bind(&t.name)
            .bind(&t.body)
            .bind(&t.header)
            .bind(&t.footer)
            .bind(now_ms())
    )
    .map_err(|e| name_conflict(e, &t.name))?;
    if done == 0 {
        return Err(StoreError::NotFound);
    }
    Ok(())
}

pub(crate) async fn get(
    db: &DataPool,
    session_id: &str,
    id: &str,
) -> StoreResult<Option<TemplateRow>> {
    Ok(on_pool!(db, |p| sqlx::query_as(SELECT_ONE)
        .bind(session_id)
        .bind(id)
        .fetch_optional(p)
        .await)?)
}

pub(crate) async fn find_by_name(
    db: &DataPool,
    session_id: &str,
    name: &str,
) -> StoreResult<Option<TemplateRow>> {
    Ok(on_pool!(db, |p| sqlx::query_as(SELECT_BY_NAME)
        .bind(session_id)
        .bind(name)
        .fetch_optional(p)
        .await)?)
}

pub(crate) async fn list(db: &DataPool, session_id: &str) -> StoreResult<Vec<TemplateRow>> {
    Ok(on_pool!(db, |p| sqlx::query_as(SELECT_ALL)
        .bind(session_id)
        .fetch_all(p)
        .await)?)
}

/// False when no such template existed.
pub(crate) async fn delete(db: &DataPool, session_id: &str, id: &str) -> StoreResult<bool> {
    Ok(execute!(db, sqlx::query(DELETE).bind(session_id).bind(id))? > 0)
}
