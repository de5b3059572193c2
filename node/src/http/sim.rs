//! The sim engine's control API (wire-notes §10), ADMIN only and mounted only with `ENGINE_TYPE=sim`:
//! it plays the phone and the other accounts of the simulated network.

use std::time::Duration;

use axum::Json;
use axum::extract::State;
use base64::Engine as _;
use utoipa_axum::{router::OpenApiRouter, routes};
use wagate_proto::dto::common::SuccessResult;
use wagate_proto::dto::sim::*;
use wagate_proto::{Jid, Role};

use super::auth::Caller;
use super::error::{ApiError, ApiResult};
use super::extract::{ApiJson, ApiQuery, SessionId};
use crate::app::ApiContext;
use crate::engine::{
    AckStatus, CallPhase, GroupAction, GroupChanges, MessageType, ReceivedMedia, StoredFile,
};
use wagate_engine_sim::SimNetwork;
use wagate_engine_sim::control::InboundSpec;

pub(crate) fn router() -> OpenApiRouter<ApiContext> {
    OpenApiRouter::new()
        .routes(routes!(sim_scan))
        .routes(routes!(sim_inbound))
        .routes(routes!(sim_ack))
        .routes(routes!(sim_react))
        .routes(routes!(sim_revoke))
        .routes(routes!(sim_edit))
        .routes(routes!(sim_drop))
        .routes(routes!(sim_unlink))
        .routes(routes!(sim_restrict))
        .routes(routes!(sim_call))
        .routes(routes!(sim_group_event))
        .routes(routes!(sim_outbox))
        .routes(routes!(sim_faults))
        .routes(routes!(sim_devices))
}

fn network(caller: &Caller, ctx: &ApiContext) -> ApiResult<SimNetwork> {
    caller.require(Role::Admin)?;
    ctx.sim
        .clone()
        .ok_or_else(|| ApiError::not_found("The sim control API needs ENGINE_TYPE=sim"))
}

/// `network` for a session-scoped route: a session id the gateway does not have is 404 with the regular
/// session routes' error, whatever the network remembers of it; an existing session keeps the network's
/// own answer (409 when it is not linked or online).
async fn session_network(
    caller: &Caller,
    ctx: &ApiContext,
    id: &SessionId,
) -> ApiResult<SimNetwork> {
    let net = network(caller, ctx)?;
    ctx.sessions.cached_record(&id.0).await?;
    Ok(net)
}

fn jid(field: &str, raw: Option<&str>) -> ApiResult<Jid> {
    let raw = raw.ok_or_else(|| ApiError::bad_request(format!("{field} is required")))?;
    Jid::parse(raw)
        .or_else(|_| Jid::from_phone(raw))
        .map_err(|e| ApiError::bad_request(format!("{field}: {e}")))
}

fn required<'a>(field: &str, raw: &'a Option<String>) -> ApiResult<&'a str> {
    raw.as_deref()
        .filter(|s| !s.is_empty())
        .ok_or_else(|| ApiError::bad_request(format!("{field} is required")))
}

fn enum_value<T: serde::de::DeserializeOwned>(field: &str, raw: &str) -> ApiResult<T> {
    serde_json::from_value(serde_json::Value::String(raw.to_string()))
        .map_err(|_| ApiError::bad_request(format!("{field} '{raw}' is not a known value")))
}

fn ok() -> Json<SuccessResult> {
    Json(SuccessResult::ok())
}

/// POST /api/sim/sessions/{sessionId}/scan
#[utoipa::path(post, path = "/api/sim/sessions/{sessionId}/scan", tag = "sim", request_body = SimScanRequest,
    responses((status = 200, body = SuccessResult)))]
async fn sim_scan(
    caller: Caller,
    id: SessionId,
    State(ctx): State<ApiContext>,
    ApiJson(b): ApiJson<SimScanRequest>,
) -> ApiResult<Json<SuccessResult>> {
    let net = session_network(&caller, &ctx, &id).await?;
    net.scan(
        &id.0,
        &jid("phone", b.phone.as_deref())?,
        b.push_name.as_deref(),
    )?;
    // Traffic sent to the phone once the scan is answered reaches the session, wherever it is sent from.
    net.flush_peers().await;
    Ok(ok())
}

/// The media of a simulated inbound message: base64 (`data` or `base64`), or a URL downloaded into the
/// session's media store.
async fn media(
    ctx: &ApiContext,
    session_id: &str,
    raw: Option<SimMedia>,
) -> ApiResult<Option<ReceivedMedia>> {
    let Some(m) = raw else { return Ok(None) };
    let given = |v: &Option<String>| v.as_deref().is_some_and(|s| !s.trim().is_empty());
    let (data, stored, served) = match (given(&m.data), given(&m.url)) {
        (true, false) => {
            let data = base64::engine::general_purpose::STANDARD
                .decode(m.data.unwrap_or_default().trim())
                .map_err(|_| ApiError::bad_request("media.data must be base64"))?;
            (data, None, None)
        }
        (false, true) => {
            let url = m.url.unwrap_or_default();
            let media = ctx.media.put_url(session_id, url.trim(), None).await?;
            let stored = StoredFile {
                key: media.key,
                size: media.size,
            };
            (Vec::new(), Some(Box::new(stored)), media.content_type)
        }
        _ => {
            return Err(ApiError::bad_request(
                "media needs exactly one of data (base64) or url",
            ));
        }
    };
    let mimetype = m
        .mimetype
        .filter(|t| !t.trim().is_empty())
        .or(served)
        .unwrap_or_else(|| "application/octet-stream".into());
    Ok(Some(ReceivedMedia {
        mimetype,
        filename: m.filename,
        data,
        stored,
    }))
}

/// POST /api/sim/sessions/{sessionId}/inbound
#[utoipa::path(post, path = "/api/sim/sessions/{sessionId}/inbound", tag = "sim", request_body = SimInboundRequest,
    responses((status = 200, body = SimMessageId)))]
async fn sim_inbound(
    caller: Caller,
    id: SessionId,
    State(ctx): State<ApiContext>,
    ApiJson(b): ApiJson<SimInboundRequest>,
) -> ApiResult<Json<SimMessageId>> {
    let net = session_network(&caller, &ctx, &id).await?;
    let spec = InboundSpec {
        from: jid("from", b.from.as_deref())?,
        chat_id: b
            .chat_id
            .as_deref()
            .map(|c| jid("chatId", Some(c)))
            .transpose()?,
        kind: enum_value::<MessageType>("type", required("type", &b.kind)?)?,
        body: b.body,
        media: media(&ctx, &id.0, b.media).await?,
        quoted_id: b.quoted_message_id,
        mentioned_ids: b
            .mentioned_ids
            .iter()
            .map(|m| jid("mentionedIds", Some(m)))
            .collect::<ApiResult<_>>()?,
    };
    if let Some(quoted) = &spec.quoted_id {
        net.pull_message(quoted).await;
    }
    Ok(Json(SimMessageId {
        message_id: net.inbound_anywhere(&id.0, spec).await?,
    }))
}

/// POST /api/sim/sessions/{sessionId}/ack
#[utoipa::path(post, path = "/api/sim/sessions/{sessionId}/ack", tag = "sim", request_body = SimAckRequest,
    responses((status = 200, body = SuccessResult)))]
async fn sim_ack(
    caller: Caller,
    id: SessionId,
    State(ctx): State<ApiContext>,
    ApiJson(b): ApiJson<SimAckRequest>,
) -> ApiResult<Json<SuccessResult>> {
    let net = session_network(&caller, &ctx, &id).await?;
    let status = enum_value::<AckStatus>("status", required("status", &b.status)?)?;
    let message_id = required("messageId", &b.message_id)?;
    net.pull_message(message_id).await;
    net.ack(&id.0, message_id, status)?;
    Ok(ok())
}

/// POST /api/sim/sessions/{sessionId}/react
#[utoipa::path(post, path = "/api/sim/sessions/{sessionId}/react", tag = "sim", request_body = SimReactRequest,
    responses((status = 200, body = SuccessResult)))]
async fn sim_react(
    caller: Caller,
    id: SessionId,
    State(ctx): State<ApiContext>,
    ApiJson(b): ApiJson<SimReactRequest>,
) -> ApiResult<Json<SuccessResult>> {
    let net = session_network(&caller, &ctx, &id).await?;
    let from = jid("from", b.from.as_deref())?;
    let message_id = required("messageId", &b.message_id)?;
    net.pull_message(message_id).await;
    net.react(&id.0, message_id, b.emoji.as_deref().unwrap_or(""), &from)?;
    Ok(ok())
}

/// POST /api/sim/sessions/{sessionId}/revoke
#[utoipa::path(post, path = "/api/sim/sessions/{sessionId}/revoke", tag = "sim", request_body = SimMessageRequest,
    responses((status = 200, body = SuccessResult)))]
async fn sim_revoke(
    caller: Caller,
    id: SessionId,
    State(ctx): State<ApiContext>,
    ApiJson(b): ApiJson<SimMessageRequest>,
) -> ApiResult<Json<SuccessResult>> {
    let net = session_network(&caller, &ctx, &id).await?;
    let message_id = required("messageId", &b.message_id)?;
    net.pull_message(message_id).await;
    net.revoke(&id.0, message_id)?;
    Ok(ok())
}

/// POST /api/sim/sessions/{sessionId}/edit
#[utoipa::path(post, path = "/api/sim/sessions/{sessionId}/edit", tag = "sim", request_body = SimMessageRequest,
    responses((status = 200, body = SuccessResult)))]
async fn sim_edit(
    caller: Caller,
    id: SessionId,
    State(ctx): State<ApiContext>,
    ApiJson(b): ApiJson<SimMessageRequest>,
) -> ApiResult<Json<SuccessResult>> {
    let net = session_network(&caller, &ctx, &id).await?;
    let message_id = required("messageId", &b.message_id)?;
    net.pull_message(message_id).await;
    net.edit(&id.0, message_id, b.body.as_deref().unwrap_or(""))?;
    Ok(ok())
}

/// POST /api/sim/sessions/{sessionId}/drop
#[utoipa::path(post, path = "/api/sim/sessions/{sessionId}/drop", tag = "sim", responses((status = 200, body = SuccessResult)))]
async fn sim_drop(
    caller: Caller,
    id: SessionId,
    State(ctx): State<ApiContext>,
) -> ApiResult<Json<SuccessResult>> {
    session_network(&caller, &ctx, &id)
        .await?
        .drop_link(&id.0)?;
    Ok(ok())
}

/// POST /api/sim/sessions/{sessionId}/unlink
#[utoipa::path(post, path = "/api/sim/sessions/{sessionId}/unlink", tag = "sim", responses((status = 200, body = SuccessResult)))]
async fn sim_unlink(
    caller: Caller,
    id: SessionId,
    State(ctx): State<ApiContext>,
) -> ApiResult<Json<SuccessResult>> {
    session_network(&caller, &ctx, &id)
        .await?
        .unlink_anywhere(&id.0)
        .await?;
    Ok(ok())
}

/// POST /api/sim/sessions/{sessionId}/restrict
#[utoipa::path(post, path = "/api/sim/sessions/{sessionId}/restrict", tag = "sim", request_body = SimRestrictRequest,
    responses((status = 200, body = SuccessResult)))]
async fn sim_restrict(
    caller: Caller,
    id: SessionId,
    State(ctx): State<ApiContext>,
    ApiJson(b): ApiJson<serde_json::Value>,
) -> ApiResult<Json<SuccessResult>> {
    let net = session_network(&caller, &ctx, &id).await?;
    let restriction = Restriction::parse(&b)?;
    net.restrict(
        &id.0,
        &restriction.kind,
        restriction.active,
        restriction.expires_at,
    )?;
    Ok(ok())
}

/// `/restrict`'s body (wire-notes §11): `kind` and `active` are required, as nothing says which
/// restriction a bare call would mean. Read field by field so a refusal names its field.
struct Restriction {
    kind: String,
    active: bool,
    /// Epoch seconds.
    expires_at: Option<i64>,
}

impl Restriction {
    fn parse(body: &serde_json::Value) -> ApiResult<Self> {
        use serde_json::Value;
        let kind = match body.get("kind") {
            None | Some(Value::Null) => return Err(ApiError::bad_request("kind is required")),
            Some(Value::String(kind)) if kind.trim().is_empty() => {
                return Err(ApiError::bad_request("kind is required"));
            }
            Some(Value::String(kind)) => kind.clone(),
            Some(_) => return Err(ApiError::bad_request("kind must be a string")),
        };
        let active = match body.get("active") {
            None | Some(Value::Null) => return Err(ApiError::bad_request("active is required")),
            Some(Value::Bool(active)) => *active,
            Some(_) => return Err(ApiError::bad_request("active must be a boolean")),
        };
        let expires_at = match body.get("expiresAt") {
            None | Some(Value::Null) => None,
            Some(raw) => Some(expiry(raw)?),
        };
        Ok(Self {
            kind,
            active,
            expires_at,
        })
    }
}

/// `expiresAt` in epoch seconds.
fn expiry(raw: &serde_json::Value) -> ApiResult<i64> {
    serde_json::from_value::<SimInstant>(raw.clone())
        .ok()
        .and_then(|at| at.to_millis())
        .map(|ms| ms.div_euclid(1000))
        .ok_or_else(|| {
            ApiError::bad_request(
                "expiresAt must be epoch seconds or milliseconds, or an ISO 8601 string",
            )
        })
}

/// POST /api/sim/sessions/{sessionId}/call
#[utoipa::path(post, path = "/api/sim/sessions/{sessionId}/call", tag = "sim", request_body = SimCallRequest,
    responses((status = 200, body = SimCallResponse)))]
async fn sim_call(
    caller: Caller,
    id: SessionId,
    State(ctx): State<ApiContext>,
    ApiJson(b): ApiJson<SimCallRequest>,
) -> ApiResult<Json<SimCallResponse>> {
    let net = session_network(&caller, &ctx, &id).await?;
    let is_video = b
        .is_video
        .ok_or_else(|| ApiError::bad_request("isVideo is required"))?;
    let outcome = b
        .outcome
        .as_deref()
        .map(|o| enum_value::<CallPhase>("outcome", o))
        .transpose()?;
    let call_id = net.call(&id.0, &jid("from", b.from.as_deref())?, is_video, outcome)?;
    // The ringing call's record reaches the peers first, so the callee can reject it on any node.
    net.flush_peers().await;
    Ok(Json(SimCallResponse { call_id }))
}

/// POST /api/sim/sessions/{sessionId}/group-event
#[utoipa::path(post, path = "/api/sim/sessions/{sessionId}/group-event", tag = "sim", request_body = SimGroupEventRequest,
    responses((status = 200, body = SuccessResult)))]
async fn sim_group_event(
    caller: Caller,
    id: SessionId,
    State(ctx): State<ApiContext>,
    ApiJson(b): ApiJson<SimGroupEventRequest>,
) -> ApiResult<Json<SuccessResult>> {
    let net = session_network(&caller, &ctx, &id).await?;
    let group = jid("groupId", b.group_id.as_deref())?;
    let action = enum_value::<GroupAction>("action", required("action", &b.action)?)?;
    let participants: Vec<Jid> = b
        .participant_ids
        .iter()
        .map(|p| jid("participantIds", Some(p)))
        .collect::<ApiResult<_>>()?;
    let changes: Option<GroupChanges> = b
        .changes
        .map(serde_json::from_value)
        .transpose()
        .map_err(|e| ApiError::bad_request(format!("changes: {e}")))?;
    net.shared_group_event(&id.0, &group, action, &participants, changes)
        .await?;
    Ok(ok())
}

/// GET /api/sim/sessions/{sessionId}/outbox
#[utoipa::path(get, path = "/api/sim/sessions/{sessionId}/outbox", tag = "sim", responses((status = 200, body = [SimOutboxEntry])))]
async fn sim_outbox(
    caller: Caller,
    id: SessionId,
    State(ctx): State<ApiContext>,
) -> ApiResult<Json<Vec<SimOutboxEntry>>> {
    let entries = session_network(&caller, &ctx, &id)
        .await?
        .outbox(&id.0)
        .await;
    Ok(Json(
        entries
            .into_iter()
            .map(|e| SimOutboxEntry {
                message_id: e.message_id,
                to: e.to.to_string(),
                kind: serde_json::to_value(e.kind)
                    .ok()
                    .and_then(|v| v.as_str().map(str::to_string))
                    .unwrap_or_default(),
                body: e.body,
                timestamp: e.timestamp,
            })
            .collect(),
    ))
}

/// POST /api/sim/sessions/{sessionId}/faults
#[utoipa::path(post, path = "/api/sim/sessions/{sessionId}/faults", tag = "sim", request_body = SimFaultsRequest,
    responses((status = 200, body = SuccessResult)))]
async fn sim_faults(
    caller: Caller,
    id: SessionId,
    State(ctx): State<ApiContext>,
    ApiJson(b): ApiJson<SimFaultsRequest>,
) -> ApiResult<Json<SuccessResult>> {
    let net = session_network(&caller, &ctx, &id).await?;
    if let Some(count) = b.fail_next_starts {
        net.fail_next_starts(&id.0, count);
    }
    if let Some(ms) = b.query_delay_ms {
        net.set_query_delay((ms > 0).then(|| Duration::from_millis(ms)));
    }
    Ok(ok())
}

/// GET /api/sim/devices: the network's view of connected devices (cluster-wide with Redis). Not
/// session-scoped, so any node answers it from the shared view; a session-restricted key sees only its
/// sessions' devices.
#[utoipa::path(get, path = "/api/sim/devices", tag = "sim", params(SimDevicesQuery),
    responses((status = 200, body = [SimConnectedDevice])))]
async fn sim_devices(
    caller: Caller,
    State(ctx): State<ApiContext>,
    ApiQuery(q): ApiQuery<SimDevicesQuery>,
) -> ApiResult<Json<Vec<SimConnectedDevice>>> {
    let net = network(&caller, &ctx)?;
    let phone = match q.phone.as_deref() {
        Some(raw) => Some(jid("phone", Some(raw))?),
        None => None,
    };
    let devices = net
        .connected_devices(phone.as_ref(), &ctx.config.node_id)
        .await
        .map_err(|e| ApiError::unavailable(e.to_string()))?;
    Ok(Json(
        devices
            .into_iter()
            .filter(|d| caller.may_access(&d.session_id))
            .map(|d| SimConnectedDevice {
                phone: d.phone.to_string(),
                session_id: d.session_id,
                node_id: d.node_id,
                connected_at: d.connected_at,
                is_node_live: d.is_node_live,
            })
            .collect(),
    ))
}
