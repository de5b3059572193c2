//! Session routes: the resource itself (create, list, read, delete, stats) here; lifecycle in
//! `lifecycle.rs`; config, proxy and presence in `settings.rs`. Handlers parse, authorise, call
//! `SessionService`, and audit what changed.

use axum::Json;
use axum::body::Bytes;
use axum::extract::{RawQuery, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use utoipa_axum::{router::OpenApiRouter, routes};
use wagate_proto::dto::sessions::{
    CreateSessionRequest, ListSessionsQuery, MemoryUsage, Restriction, Session, SessionStats,
};
use wagate_proto::iso_ms;
use wagate_proto::{Role, SessionStatus};

use super::auth::Caller;
use super::error::{ApiError, ApiResult};
use super::extract::{ApiJson, query_pairs};
use super::session_scope::Scoped;
use crate::app::ApiContext;
use crate::sessions::SessionView;
use crate::sessions::cache::CachedRecord;

mod lifecycle;
mod settings;

pub(crate) use settings::parse_config_change;

pub(crate) fn router() -> OpenApiRouter<ApiContext> {
    OpenApiRouter::new()
        .routes(routes!(list_sessions, create_session))
        .routes(routes!(session_stats))
        .routes(routes!(get_session, delete_session))
        .merge(lifecycle::router())
        .merge(settings::router())
}

impl From<SessionView> for Session {
    fn from(view: SessionView) -> Session {
        let r = view.record;
        Session {
            id: r.id,
            name: r.name,
            status: r.status,
            phone: r
                .phone
                .as_deref()
                .map(|p| crate::sessions::linked_number(p).to_owned()),
            push_name: r.push_name,
            last_error: r.last_error.filter(|_| shows_last_error(r.status)),
            engine_loaded: view.engine_loaded,
            connected_at: r.connected_at.map(iso_ms),
            last_active: r.last_active.map(iso_ms),
            restriction: r.restriction.and_then(restriction),
            created_at: iso_ms(r.created_at),
            updated_at: iso_ms(r.updated_at),
        }
    }
}

/// The stored restriction with its `code` always a string: a row written before the code was kept reads
/// the kind upper-cased, as a new restriction without an engine token does.
fn restriction(stored: serde_json::Value) -> Option<Restriction> {
    let mut restriction: Restriction = serde_json::from_value(stored).ok()?;
    let code = restriction.code.take();
    restriction.code = Some(crate::sessions::effects::restriction_code(
        code,
        &restriction.kind,
    ));
    Some(restriction)
}

/// The spec shows `lastError` on `failed` and `action_required`, and on `initializing` while retries back
/// off; a reason kept from an earlier status (a restored or swept session now `disconnected`) is not shown.
fn shows_last_error(status: SessionStatus) -> bool {
    matches!(
        status,
        SessionStatus::Failed | SessionStatus::ActionRequired | SessionStatus::Initializing
    )
}

struct ListParams {
    limit: i64,
    offset: i64,
    name: Option<String>,
}

fn whole_number(field: &str, raw: &str, min: i64, max: i64) -> ApiResult<i64> {
    raw.parse::<i64>()
        .ok()
        .filter(|n| (min..=max).contains(n) && raw.bytes().all(|b| b.is_ascii_digit()))
        .ok_or_else(|| {
            ApiError::bad_request(format!(
                "{field} must be an integer between {min} and {max}"
            ))
        })
}

fn parse_list(query: Option<&str>) -> ApiResult<ListParams> {
    let pairs = query_pairs(query);
    let mut params = ListParams {
        limit: 1000,
        offset: 0,
        name: None,
    };
    let names: Vec<&String> = pairs
        .iter()
        .filter(|(k, _)| k == "name")
        .map(|(_, v)| v)
        .collect();
    match names.as_slice() {
        [] => {}
        [name] if !name.is_empty() => params.name = Some((*name).clone()),
        [_] => return Err(ApiError::bad_request("name must not be empty")),
        _ => return Err(ApiError::bad_request("name must be given at most once")),
    }
    for (key, value) in &pairs {
        match key.as_str() {
            "limit" => params.limit = whole_number("limit", value, 1, 1000)?,
            "offset" => params.offset = whole_number("offset", value, 0, i64::MAX)?,
            _ => {}
        }
    }
    Ok(params)
}

/// GET /api/sessions
#[utoipa::path(get, path = "/api/sessions", tag = "sessions", params(ListSessionsQuery),
    responses((status = 200, body = [Session])))]
async fn list_sessions(
    caller: Caller,
    State(ctx): State<ApiContext>,
    RawQuery(query): RawQuery,
) -> ApiResult<Response> {
    caller.require(Role::Viewer)?;
    let p = parse_list(query.as_deref())?;
    if !caller.is_scoped() && p.name.is_none() {
        let (page, loaded) = ctx.sessions.list_page(p.limit, p.offset).await?;
        let body = page.json(&loaded, || {
            list_body(
                page.rows
                    .iter()
                    .map(AsRef::as_ref)
                    .zip(loaded.iter().copied()),
            )
        })?;
        return Ok(json_response(body));
    }
    let sessions: Vec<_> = if caller.is_scoped() {
        let all = ctx.sessions.list(i64::MAX, 0, p.name.as_deref()).await?;
        let visible = all
            .into_iter()
            .filter(|(cached, _)| caller.may_access(&cached.record.id));
        visible
            .skip(p.offset as usize)
            .take(p.limit as usize)
            .collect()
    } else {
        ctx.sessions
            .list(p.limit, p.offset, p.name.as_deref())
            .await?
    };
    let body = list_body(
        sessions
            .iter()
            .map(|(cached, loaded)| (cached.as_ref(), *loaded)),
    )?;
    Ok(json_response(body))
}

/// The list's JSON array from each row's body.
fn list_body<'a>(rows: impl Iterator<Item = (&'a CachedRecord, bool)>) -> ApiResult<Bytes> {
    let parts = rows
        .map(|(cached, engine_loaded)| session_json(cached, engine_loaded))
        .collect::<ApiResult<Vec<_>>>()?;
    Ok(crate::json::json_array(&parts))
}

fn json_response(body: Bytes) -> Response {
    ([(header::CONTENT_TYPE, "application/json")], body).into_response()
}

/// A session's body, built once per row version (and engine state), then reused until the row's next
/// write (`sessions/cache.rs`).
fn session_json(cached: &CachedRecord, engine_loaded: bool) -> ApiResult<Bytes> {
    let body = cached.json(engine_loaded, |record| {
        let view = SessionView {
            record: record.clone(),
            engine_loaded,
        };
        serde_json::to_vec(&Session::from(view)).map(Bytes::from)
    });
    body.map_err(|err| ApiError::internal(format!("session not serialised: {err}")))
}

/// POST /api/sessions
#[utoipa::path(post, path = "/api/sessions", tag = "sessions", request_body = CreateSessionRequest,
    responses((status = 201, body = Session), (status = 409, description = "name taken")))]
async fn create_session(
    caller: Caller,
    State(ctx): State<ApiContext>,
    ApiJson(body): ApiJson<CreateSessionRequest>,
) -> ApiResult<(StatusCode, Json<Session>)> {
    caller.require(Role::Operator)?;
    // The spec refuses the proxy update to session-restricted keys; a proxy set at creation is the same.
    if caller.is_scoped() && body.proxy_url.as_deref().is_some_and(|url| !url.is_empty()) {
        return Err(ApiError::forbidden(
            "A session-restricted key may not set a session proxy",
        ));
    }
    let name = match &body.name {
        Some(serde_json::Value::String(name)) => name.clone(),
        _ => {
            return Err(ApiError::bad_request(
                "name must be a string of 3-50 letters, digits and hyphens",
            ));
        }
    };
    let change = body
        .config
        .as_ref()
        .map(parse_config_change)
        .transpose()?
        .unwrap_or_default();
    let view = ctx
        .sessions
        .create(&name, &change, body.proxy_url.as_deref())
        .await?;
    let meta = serde_json::json!({ "name": name });
    ctx.audit.record(
        "session_created",
        &caller.actor(),
        Some(&view.record.id),
        201,
        Some(meta),
    );
    Ok((StatusCode::CREATED, Json(view.into())))
}

/// GET /api/sessions/{sessionId}
#[utoipa::path(get, path = "/api/sessions/{sessionId}", tag = "sessions", responses((status = 200, body = Session)))]
async fn get_session(session: Scoped, State(ctx): State<ApiContext>) -> ApiResult<Response> {
    let (cached, engine_loaded) = ctx.sessions.get_cached(session.id()).await?;
    let body = session_json(&cached, engine_loaded)?;
    Ok(([(header::CONTENT_TYPE, "application/json")], body).into_response())
}

/// DELETE /api/sessions/{sessionId}
#[utoipa::path(delete, path = "/api/sessions/{sessionId}", tag = "sessions", responses((status = 204)))]
async fn delete_session(session: Scoped, State(ctx): State<ApiContext>) -> ApiResult<StatusCode> {
    ctx.sessions.delete(session.id()).await?;
    ctx.audit.record(
        "session_deleted",
        &session.caller.actor(),
        Some(session.id()),
        204,
        None,
    );
    Ok(StatusCode::NO_CONTENT)
}

/// Resident memory in whole megabytes (rounded).
fn rss_mb() -> u64 {
    let pages = std::fs::read_to_string("/proc/self/statm")
        .ok()
        .and_then(|s| {
            s.split_whitespace()
                .nth(1)
                .and_then(|v| v.parse::<u64>().ok())
        })
        .unwrap_or(0);
    (pages * 4096 + 512 * 1024) / (1024 * 1024)
}

/// GET /api/sessions/stats/overview
#[utoipa::path(get, path = "/api/sessions/stats/overview", tag = "sessions", responses((status = 200, body = SessionStats)))]
async fn session_stats(
    caller: Caller,
    State(ctx): State<ApiContext>,
) -> ApiResult<Json<SessionStats>> {
    caller.require(Role::Viewer)?;
    let mine = |id: &str| caller.may_access(id);
    let counts = ctx
        .stats
        .sessions_by_status(caller.is_scoped().then_some(mine))
        .await?;
    let by_status: std::collections::BTreeMap<String, i64> = counts.into_iter().collect();
    let count = |s: &str| by_status.get(s).copied().unwrap_or(0);
    let active = [
        "initializing",
        "qr_ready",
        "authenticating",
        "ready",
        "action_required",
    ]
    .iter()
    .map(|s| count(s))
    .sum();
    let rss = rss_mb();
    Ok(Json(SessionStats {
        total: by_status.values().sum(),
        active,
        ready: count("ready"),
        disconnected: count("disconnected"),
        by_status,
        memory_usage: MemoryUsage {
            heap_used: rss,
            heap_total: rss,
            rss,
        },
    }))
}
