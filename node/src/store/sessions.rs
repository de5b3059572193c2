//! The `sessions` and `engine_auth` tables. An engine's own state is its factory's to wipe (the session
//! service calls `EngineFactory::wipe_credentials`); deleting a session row cascades to whatever an engine
//! keyed by it. Runtime status writes are fenced by the session's lease generation: a write that matches
//! no row means another node owns the session (`StaleLease`).

use wagate_proto::SessionStatus;
use wagate_proto::dto::sessions::SessionConfig;

use super::{DataPool, StoreError, StoreResult, execute, from_json, now_ms, on_pool, to_json};

const INSERT: &str = "INSERT INTO sessions (id, name, status, config, proxy_url, created_at, updated_at) \
     VALUES ($1, $2, 'created', $3, $4, $5, $5)";
const SELECT_ONE: &str = "SELECT * FROM sessions WHERE id = $1";
const SELECT_PAGE: &str = "SELECT * FROM sessions ORDER BY created_at, id LIMIT $1 OFFSET $2";
const SELECT_BY_NAME: &str = "SELECT * FROM sessions WHERE name = $1";
/// Sessions the takeover sweep looks at: meant to run and linked (one never linked stays `disconnected`),
/// or left in a status only a running engine keeps (`qr_ready` only without a phone: with one the status
/// is kept and nothing needs doing). `sessions/takeover.rs` `needs_takeover` is the same rule.
const SELECT_TAKEOVER_CANDIDATES: &str = "SELECT id FROM sessions WHERE (desired_running AND phone IS NOT NULL) \
     OR status IN ('ready', 'initializing', 'authenticating', 'action_required') \
     OR (status = 'qr_ready' AND phone IS NULL) ORDER BY updated_at, id";
const DELETE: &str = "DELETE FROM sessions WHERE id = $1";
const UPDATE_CONFIG: &str = "UPDATE sessions SET config = $2, updated_at = $3 WHERE id = $1";
const UPDATE_PROXY: &str = "UPDATE sessions SET proxy_url = $2, updated_at = $3 WHERE id = $1";
const CLAIM: &str = "UPDATE sessions SET lease_generation = $2, owner_node = $3 WHERE id = $1 AND lease_generation < $2";
const SAVE_RUNTIME: &str = "UPDATE sessions SET status = $3, phone = $4, push_name = $5, last_error = $6, \
     restriction = $7, desired_running = $8, has_credentials = $9, connected_at = $10, last_active = $11, \
     updated_at = $12 WHERE id = $1 AND lease_generation = $2";
const COUNT_BY_STATUS: &str = "SELECT status, COUNT(*) AS n FROM sessions GROUP BY status";
const UPSERT_AUTH: &str = "INSERT INTO engine_auth (session_id, engine, data, updated_at) VALUES ($1, $2, $3, $4) \
     ON CONFLICT (session_id, engine) DO UPDATE SET data = excluded.data, updated_at = excluded.updated_at";
const SELECT_AUTH: &str = "SELECT data FROM engine_auth WHERE session_id = $1 AND engine = $2";
const DELETE_AUTH: &str = "DELETE FROM engine_auth WHERE session_id = $1";

/// A session row as the service sees it.
#[derive(Debug, Clone, PartialEq)]
pub struct SessionRecord {
    pub id: String,
    pub name: String,
    pub status: SessionStatus,
    pub phone: Option<String>,
    pub push_name: Option<String>,
    pub last_error: Option<String>,
    pub config: SessionConfig,
    pub proxy_url: Option<String>,
    pub restriction: Option<serde_json::Value>,
    pub desired_running: bool,
    pub has_credentials: bool,
    pub lease_generation: i64,
    pub owner_node: Option<String>,
    pub connected_at: Option<i64>,
    pub last_active: Option<i64>,
    pub created_at: i64,
    pub updated_at: i64,
}

/// The part of a session that its running engine changes; written whole, fenced.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct RuntimeState {
    pub status: Option<SessionStatus>,
    pub phone: Option<String>,
    pub push_name: Option<String>,
    pub last_error: Option<String>,
    pub restriction: Option<serde_json::Value>,
    pub desired_running: bool,
    pub has_credentials: bool,
    pub connected_at: Option<i64>,
    pub last_active: Option<i64>,
}

#[derive(sqlx::FromRow)]
struct Row {
    id: String,
    name: String,
    status: String,
    phone: Option<String>,
    push_name: Option<String>,
    last_error: Option<String>,
    config: String,
    proxy_url: Option<String>,
    restriction: Option<String>,
    desired_running: bool,
    has_credentials: bool,
    lease_generation: i64,
    owner_node: Option<String>,
    connected_at: Option<i64>,
    last_active: Option<i64>,
    created_at: i64,
    updated_at: i64,
}

impl TryFrom<Row> for SessionRecord {
    type Error = StoreError;
    fn try_from(r: Row) -> StoreResult<SessionRecord> {
        Ok(SessionRecord {
            status: r
                .status
                .parse()
                .map_err(|_| StoreError::Corrupt(format!("status '{}'", r.status)))?,
            config: from_json(&r.config)?,
            restriction: r.restriction.as_deref().map(from_json).transpose()?,
            id: r.id,
            name: r.name,
            phone: r.phone,
            push_name: r.push_name,
            last_error: r.last_error,
            proxy_url: r.proxy_url,
            desired_running: r.desired_running,
            has_credentials: r.has_credentials,
            lease_generation: r.lease_generation,
            owner_node: r.owner_node,
            connected_at: r.connected_at,
            last_active: r.last_active,
            created_at: r.created_at,
            updated_at: r.updated_at,
        })
    }
}

fn records(rows: Vec<Row>) -> StoreResult<Vec<SessionRecord>> {
    rows.into_iter().map(SessionRecord::try_from).collect()
}

pub(crate) async fn insert(
    db: &DataPool,
    id: &str,
    name: &str,
    config: &SessionConfig,
    proxy_url: Option<&str>,
) -> StoreResult<SessionRecord> {
    let config = to_json(config)?;
    let now = now_ms();
    let result = execute!(
        db,
        sqlx::query(INSERT)
            .bind(id)
            .bind(name)
            .bind(&config)
            .bind(proxy_url)
            .bind(now)
    );
    match result.map_err(StoreError::from) {
        Err(StoreError::Conflict { .. }) => Err(StoreError::Conflict {
            what: format!("Session '{name}'"),
        }),
        Err(other) => Err(other),
        Ok(_) => get(db, id).await,
    }
}

pub(crate) async fn get(db: &DataPool, id: &str) -> StoreResult<SessionRecord> {
    let row: Row = on_pool!(db, |p| sqlx::query_as(SELECT_ONE)
        .bind(id)
        .fetch_one(p)
        .await)?;
    row.try_into()
}

pub(crate) async fn list(
    db: &DataPool,
    limit: i64,
    offset: i64,
) -> StoreResult<Vec<SessionRecord>> {
    let rows = on_pool!(db, |p| sqlx::query_as(SELECT_PAGE)
        .bind(limit)
        .bind(offset)
        .fetch_all(p)
        .await)?;
    records(rows)
}

pub(crate) async fn find_by_name(db: &DataPool, name: &str) -> StoreResult<Option<SessionRecord>> {
    let row: Option<Row> = on_pool!(db, |p| sqlx::query_as(SELECT_BY_NAME)
        .bind(name)
        .fetch_optional(p)
        .await)?;
    row.map(SessionRecord::try_from).transpose()
}

/// Ids of the sessions the takeover sweep considers (see `SELECT_TAKEOVER_CANDIDATES`).
pub(crate) async fn list_takeover_candidates(db: &DataPool) -> StoreResult<Vec<String>> {
    let ids: Vec<(String,)> = on_pool!(db, |p| sqlx::query_as(SELECT_TAKEOVER_CANDIDATES)
        .fetch_all(p)
        .await)?;
    Ok(ids.into_iter().map(|(id,)| id).collect())
}

pub(crate) async fn delete(db: &DataPool, id: &str) -> StoreResult<()> {
    let done = execute!(db, sqlx::query(DELETE).bind(id));
    // Its messages went with it (`ON DELETE CASCADE`).
    super::message_writes::changed([id]);
    if done? == 0 {
        return Err(StoreError::NotFound);
    }
    Ok(())
}

pub(crate) async fn update_config(
    db: &DataPool,
    id: &str,
    config: &SessionConfig,
) -> StoreResult<()> {
    let config = to_json(config)?;
    execute!(
        db,
        sqlx::query(UPDATE_CONFIG)
            .bind(id)
            .bind(&config)
            .bind(now_ms())
    )?;
    Ok(())
}

pub(crate) async fn update_proxy(
    db: &DataPool,
    id: &str,
    proxy_url: Option<&str>,
) -> StoreResult<()> {
    execute!(
        db,
        sqlx::query(UPDATE_PROXY)
            .bind(id)
            .bind(proxy_url)
            .bind(now_ms())
    )?;
    Ok(())
}

/// Records a newer lease generation; `StaleLease` when the row already carries a newer one. The leases call
/// it through `cluster::lease::claim`, which bumps the row's cached version.
pub(crate) async fn claim(db: &DataPool, id: &str, generation: i64, node: &str) -> StoreResult<()> {
    let done = execute!(db, sqlx::query(CLAIM).bind(id).bind(generation).bind(node))?;
    if done == 0 {
        return Err(StoreError::StaleLease);
    }
    Ok(())
}

/// Writes the runtime state, only while `generation` is still the session's lease generation.
pub(crate) async fn save_runtime(
    db: &DataPool,
    id: &str,
    generation: i64,
    state: &RuntimeState,
) -> StoreResult<()> {
    let restriction = state.restriction.as_ref().map(to_json).transpose()?;
    let status = state.status.unwrap_or(SessionStatus::Created).as_str();
    let done = execute!(
        db,
        sqlx::query(SAVE_RUNTIME)
            .bind(id)
            .bind(generation)
            .bind(status)
            .bind(&state.phone)
            .bind(&state.push_name)
            .bind(&state.last_error)
            .bind(&restriction)
            .bind(state.desired_running)
            .bind(state.has_credentials)
            .bind(state.connected_at)
            .bind(state.last_active)
            .bind(now_ms())
    )?;
    if done == 0 {
        return Err(StoreError::StaleLease);
    }
    Ok(())
}

pub(crate) async fn count_by_status(db: &DataPool) -> StoreResult<Vec<(String, i64)>> {
    Ok(on_pool!(db, |p| sqlx::query_as(COUNT_BY_STATUS)
        .fetch_all(p)
        .await)?)
}

pub(crate) async fn save_engine_auth(
    db: &DataPool,
    id: &str,
    engine: &str,
    data: &str,
) -> StoreResult<()> {
    execute!(
        db,
        sqlx::query(UPSERT_AUTH)
            .bind(id)
            .bind(engine)
            .bind(data)
            .bind(now_ms())
    )?;
    Ok(())
}

pub(crate) async fn load_engine_auth(
    db: &DataPool,
    id: &str,
    engine: &str,
) -> StoreResult<Option<String>> {
    Ok(on_pool!(db, |p| sqlx::query_scalar(SELECT_AUTH)
        .bind(id)
        .bind(engine)
        .fetch_optional(p)
        .await)?)
}

/// Forgets the credentials the node stored for the session (logout, delete). What an engine keeps on its
/// own is wiped by its factory (`EngineFactory::wipe_credentials`, called next by the session service).
pub(crate) async fn delete_engine_auth(db: &DataPool, id: &str) -> StoreResult<()> {
    execute!(db, sqlx::query(DELETE_AUTH).bind(id))?;
    Ok(())
}
