//! Call routes: reject a ringing call, create a call link (`403` when the network refuses it).

use axum::Json;
use axum::extract::State;
use utoipa_axum::{router::OpenApiRouter, routes};
use wagate_proto::dto::calls::{CallLink, CallLinkRequest};
use wagate_proto::dto::common::SuccessResult;

use super::engine_call::bounded;
use super::error::{ApiError, ApiResult};
use super::extract::{ApiJson, ApiPath};
use super::session_scope::Scoped;
use crate::app::ApiContext;
use crate::engine::CallKind;

pub(crate) fn router() -> OpenApiRouter<ApiContext> {
    OpenApiRouter::new()
        .routes(routes!(reject_call))
        .routes(routes!(create_call_link))
}

/// POST /api/sessions/{sessionId}/calls/{callId}/reject
#[utoipa::path(post, path = "/api/sessions/{sessionId}/calls/{callId}/reject", tag = "calls",
    responses((status = 200, body = SuccessResult)))]
async fn reject_call(
    session: Scoped,
    State(ctx): State<ApiContext>,
    ApiPath(path): ApiPath<(String, String)>,
) -> ApiResult<Json<SuccessResult>> {
    let engine = session.engine().await?;
    bounded(&ctx, engine.reject_call(&path.1)).await?;
    Ok(Json(SuccessResult::ok()))
}

/// POST /api/sessions/{sessionId}/calls/link
#[utoipa::path(post, path = "/api/sessions/{sessionId}/calls/link", tag = "calls",
    request_body = CallLinkRequest, responses((status = 200, body = CallLink)))]
async fn create_call_link(
    session: Scoped,
    ApiJson(body): ApiJson<CallLinkRequest>,
) -> ApiResult<Json<CallLink>> {
    let kind = match body.kind.as_deref() {
        Some("audio") => CallKind::Audio,
        Some("video") => CallKind::Video,
        _ => return Err(ApiError::bad_request("type must be audio or video")),
    };
    let start_time = body
        .start_millis()
        .ok_or_else(|| ApiError::bad_request("startTime must be epoch milliseconds"))?;
    let engine = session.engine().await?;
    // Unbounded on purpose: call-link create is among the routes that never answer 503.
    let link = engine
        .create_call_link(kind, start_time)
        .await
        .map_err(|e| ApiError::from(e).never_unavailable())?;
    Ok(Json(CallLink { link }))
}
