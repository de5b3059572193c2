//! Session lifecycle routes: start, stop, logout, force-kill, QR and pairing code. Each answers the
//! Session after its transition (wire-notes §12).

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use utoipa_axum::{router::OpenApiRouter, routes};
use wagate_proto::Role;
use wagate_proto::dto::sessions::{PairingCodeRequest, PairingCodeResponse, QrResponse, Session};

use super::authorise;
use crate::app::ApiContext;
use crate::http::auth::Caller;
use crate::http::error::ApiResult;
use crate::http::extract::{ApiJson, SessionId};

pub(super) fn router() -> OpenApiRouter<ApiContext> {
    OpenApiRouter::new()
        .routes(routes!(start_session))
        .routes(routes!(stop_session))
        .routes(routes!(logout_session))
        .routes(routes!(force_kill_session))
        .routes(routes!(get_qr))
        .routes(routes!(request_pairing_code))
}

/// POST /api/sessions/{sessionId}/start
#[utoipa::path(post, path = "/api/sessions/{sessionId}/start", tag = "sessions",
    responses((status = 200, body = Session), (status = 409), (status = 504)))]
async fn start_session(
    caller: Caller,
    id: SessionId,
    State(ctx): State<ApiContext>,
) -> ApiResult<Json<Session>> {
    authorise(&caller, &id, Role::Operator)?;
    let result = ctx.sessions.start(&id.0).await;
    let status = result.as_ref().map(|_| 200).unwrap_or(500);
    ctx.audit.record(
        "session_started",
        &caller.actor(),
        Some(&id.0),
        status,
        None,
    );
    Ok(Json(result?.into()))
}

/// POST /api/sessions/{sessionId}/stop
#[utoipa::path(post, path = "/api/sessions/{sessionId}/stop", tag = "sessions",
    responses((status = 200, body = Session), (status = 502)))]
async fn stop_session(
    caller: Caller,
    id: SessionId,
    State(ctx): State<ApiContext>,
) -> ApiResult<Json<Session>> {
    authorise(&caller, &id, Role::Operator)?;
    let view = ctx.sessions.stop(&id.0).await?;
    ctx.audit
        .record("session_stopped", &caller.actor(), Some(&id.0), 200, None);
    Ok(Json(view.into()))
}

/// POST /api/sessions/{sessionId}/logout
#[utoipa::path(post, path = "/api/sessions/{sessionId}/logout", tag = "sessions",
    responses((status = 200, body = Session), (status = 502)))]
async fn logout_session(
    caller: Caller,
    id: SessionId,
    State(ctx): State<ApiContext>,
) -> ApiResult<Json<Session>> {
    authorise(&caller, &id, Role::Operator)?;
    // A logout that did not complete writes no success audit row (spec).
    let view = ctx.sessions.logout(&id.0).await?;
    ctx.audit.record(
        "session_logged_out",
        &caller.actor(),
        Some(&id.0),
        200,
        None,
    );
    Ok(Json(view.into()))
}

/// POST /api/sessions/{sessionId}/force-kill
#[utoipa::path(post, path = "/api/sessions/{sessionId}/force-kill", tag = "sessions",
    responses((status = 200, body = Session)))]
async fn force_kill_session(
    caller: Caller,
    id: SessionId,
    State(ctx): State<ApiContext>,
) -> ApiResult<Json<Session>> {
    authorise(&caller, &id, Role::Operator)?;
    let view = ctx.sessions.force_kill(&id.0).await?;
    ctx.audit.record(
        "session_force_killed",
        &caller.actor(),
        Some(&id.0),
        200,
        None,
    );
    Ok(Json(view.into()))
}

/// GET /api/sessions/{sessionId}/qr
#[utoipa::path(get, path = "/api/sessions/{sessionId}/qr", tag = "sessions",
    responses((status = 200, body = QrResponse), (status = 400, description = "no QR cached")))]
async fn get_qr(
    caller: Caller,
    id: SessionId,
    State(ctx): State<ApiContext>,
) -> ApiResult<Json<QrResponse>> {
    authorise(&caller, &id, Role::Operator)?;
    let (qr_code, status) = ctx.sessions.qr(&id.0).await?;
    Ok(Json(QrResponse { qr_code, status }))
}

/// POST /api/sessions/{sessionId}/pairing-code
#[utoipa::path(post, path = "/api/sessions/{sessionId}/pairing-code", tag = "sessions",
    request_body = PairingCodeRequest, responses((status = 201, body = PairingCodeResponse), (status = 409)))]
async fn request_pairing_code(
    caller: Caller,
    id: SessionId,
    State(ctx): State<ApiContext>,
    ApiJson(body): ApiJson<PairingCodeRequest>,
) -> ApiResult<(StatusCode, Json<PairingCodeResponse>)> {
    authorise(&caller, &id, Role::Operator)?;
    let phone = body.phone_number.unwrap_or_default();
    let (pairing_code, status) = ctx.sessions.pairing_code(&id.0, &phone).await?;
    let body = PairingCodeResponse {
        pairing_code,
        status,
    };
    Ok((StatusCode::CREATED, Json(body)))
}
