//! Session settings routes: config (three-state update with the spec's bounds), proxy (masked view; a
//! session-restricted key may not change it), own presence and presence reads/subscriptions.

use axum::Json;
use axum::extract::State;
use serde_json::Value;
use utoipa_axum::{router::OpenApiRouter, routes};
use wagate_proto::Jid;
use wagate_proto::dto::common::SuccessResult;
use wagate_proto::dto::sessions::{
    Presence, PresenceParticipant, PresenceSubscribeRequest, SessionConfig, SessionProxy,
    SetPresenceRequest, UpdateProxyRequest, UpdateSessionConfigRequest,
};

use crate::app::ApiContext;
use crate::http::error::{ApiError, ApiResult};
use crate::http::extract::{ApiJson, ApiPath};
use crate::http::session_scope::{Scoped, ScopedSession};
use crate::sessions::ConfigChange;
use crate::sessions::proxy;

pub(super) fn router() -> OpenApiRouter<ApiContext> {
    OpenApiRouter::new()
        .routes(routes!(get_config, update_config))
        .routes(routes!(get_proxy, update_proxy))
        .routes(routes!(set_presence))
        .routes(routes!(subscribe_presence))
        .routes(routes!(get_presence))
}

fn integer_in(field: &str, value: &Value, min: u64, max: u64) -> ApiResult<u64> {
    value
        .as_u64()
        .filter(|n| (min..=max).contains(n))
        .ok_or_else(|| {
            ApiError::bad_request(format!(
                "{field} must be an integer between {min} and {max}, or null"
            ))
        })
}

/// Validates a three-state config body against the spec's bounds.
pub(crate) fn parse_config_change(body: &UpdateSessionConfigRequest) -> ApiResult<ConfigChange> {
    let auto_reject_calls = body
        .auto_reject_calls
        .as_ref()
        .map(|v| match v {
            None => Ok(None),
            Some(Value::Bool(b)) => Ok(Some(*b)),
            Some(_) => Err(ApiError::bad_request(
                "autoRejectCalls must be a boolean or null",
            )),
        })
        .transpose()?;
    let max_reconnect_attempts = body
        .max_reconnect_attempts
        .as_ref()
        .map(|v| {
            v.as_ref()
                .map(|v| integer_in("maxReconnectAttempts", v, 0, 20).map(|n| n as u32))
                .transpose()
        })
        .transpose()?;
    let reconnect_base_delay = body
        .reconnect_base_delay
        .as_ref()
        .map(|v| {
            v.as_ref()
                .map(|v| integer_in("reconnectBaseDelay", v, 1000, 300_000))
                .transpose()
        })
        .transpose()?;
    Ok(ConfigChange {
        auto_reject_calls,
        max_reconnect_attempts,
        reconnect_base_delay,
    })
}

/// GET /api/sessions/{sessionId}/config
#[utoipa::path(get, path = "/api/sessions/{sessionId}/config", tag = "sessions", responses((status = 200, body = SessionConfig)))]
async fn get_config(session: ScopedSession) -> ApiResult<Json<SessionConfig>> {
    Ok(Json(session.record.config))
}

/// PATCH /api/sessions/{sessionId}/config
#[utoipa::path(patch, path = "/api/sessions/{sessionId}/config", tag = "sessions",
    request_body = UpdateSessionConfigRequest, responses((status = 200, body = SessionConfig)))]
async fn update_config(
    session: Scoped,
    State(ctx): State<ApiContext>,
    ApiJson(body): ApiJson<UpdateSessionConfigRequest>,
) -> ApiResult<Json<SessionConfig>> {
    let change = parse_config_change(&body)?;
    let config = ctx.sessions.update_config(session.id(), &change).await?;
    ctx.audit.record(
        "session_config_updated",
        &session.caller.actor(),
        Some(session.id()),
        200,
        None,
    );
    Ok(Json(config))
}

/// GET /api/sessions/{sessionId}/proxy
#[utoipa::path(get, path = "/api/sessions/{sessionId}/proxy", tag = "sessions", responses((status = 200, body = SessionProxy)))]
async fn get_proxy(session: ScopedSession) -> ApiResult<Json<SessionProxy>> {
    Ok(Json(proxy::view(session.record.proxy_url.as_deref())))
}

/// PATCH /api/sessions/{sessionId}/proxy
#[utoipa::path(patch, path = "/api/sessions/{sessionId}/proxy", tag = "sessions",
    request_body = UpdateProxyRequest, responses((status = 200, body = SessionProxy)))]
async fn update_proxy(
    session: Scoped,
    State(ctx): State<ApiContext>,
    ApiJson(body): ApiJson<UpdateProxyRequest>,
) -> ApiResult<Json<SessionProxy>> {
    let url = body
        .proxy_url
        .ok_or_else(|| ApiError::bad_request("proxyUrl is required (a URL, or null to clear)"))?;
    let stored = ctx
        .sessions
        .update_proxy(session.id(), url.as_deref())
        .await?;
    ctx.audit.record(
        "session_proxy_updated",
        &session.caller.actor(),
        Some(session.id()),
        200,
        None,
    );
    Ok(Json(proxy::view(stored.as_deref())))
}

/// PUT /api/sessions/{sessionId}/presence
#[utoipa::path(put, path = "/api/sessions/{sessionId}/presence", tag = "sessions",
    request_body = SetPresenceRequest, responses((status = 200, body = SuccessResult)))]
async fn set_presence(
    session: Scoped,
    ApiJson(body): ApiJson<SetPresenceRequest>,
) -> ApiResult<Json<SuccessResult>> {
    let available = body
        .available
        .ok_or_else(|| ApiError::bad_request("available must be a boolean"))?;
    session.engine().await?.set_presence(available).await?;
    Ok(Json(SuccessResult::ok()))
}

/// POST /api/sessions/{sessionId}/presence/subscribe
#[utoipa::path(post, path = "/api/sessions/{sessionId}/presence/subscribe", tag = "sessions",
    request_body = PresenceSubscribeRequest, responses((status = 200, body = SuccessResult)))]
async fn subscribe_presence(
    session: Scoped,
    ApiJson(body): ApiJson<PresenceSubscribeRequest>,
) -> ApiResult<Json<SuccessResult>> {
    let chat = Jid::parse(body.chat_id.as_deref().unwrap_or_default())
        .map_err(|e| ApiError::bad_request(format!("chatId: {e}")))?;
    session.engine().await?.subscribe_presence(&chat).await?;
    Ok(Json(SuccessResult::ok()))
}

/// GET /api/sessions/{sessionId}/presence/{chatId}: the chat's last reported presence, with `observedAt`
/// when the gateway received it; null while none was reported or with no running engine.
#[utoipa::path(get, path = "/api/sessions/{sessionId}/presence/{chatId}", tag = "sessions",
    responses((status = 200, body = Option<Presence>)))]
async fn get_presence(
    session: Scoped,
    State(ctx): State<ApiContext>,
    ApiPath(path): ApiPath<(String, String)>,
) -> ApiResult<Json<Option<Presence>>> {
    let chat = Jid::parse(&path.1).map_err(|e| ApiError::bad_request(format!("chatId: {e}")))?;
    session.record().await?;
    let Some(observed) = ctx.sessions.presence(session.id(), &chat).await? else {
        return Ok(Json(None));
    };
    let participants = observed
        .participants
        .into_iter()
        .map(|p| PresenceParticipant {
            id: p.id.to_string(),
            state: p.state.as_str().to_string(),
            last_seen: p.last_seen,
        })
        .collect();
    Ok(Json(Some(Presence {
        chat_id: chat.to_string(),
        participants,
        observed_at: wagate_proto::iso_ms(observed.observed_at_ms),
    })))
}
