//! Session lifecycle routes: start, stop, logout, force-kill, QR and pairing code. Each answers the
//! Session after its transition (wire-notes §12).

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use utoipa_axum::{router::OpenApiRouter, routes};
use wagate_proto::dto::sessions::{PairingCodeRequest, PairingCodeResponse, QrResponse, Session};

use crate::app::ApiContext;
use crate::http::error::{ApiError, ApiResult};
use crate::http::extract::ApiJson;
use crate::http::session_scope::Scoped;
use crate::sessions::SessionError;

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
async fn start_session(session: Scoped, State(ctx): State<ApiContext>) -> ApiResult<Json<Session>> {
    let result = ctx.sessions.start(session.id()).await;
    // A start whose run a concurrent stop ended started nothing: the stop's row tells what happened.
    let interrupted = matches!(result, Err(SessionError::StartInterrupted));
    let result = result.map_err(ApiError::from);
    if !interrupted {
        // The row names the status the caller got, a refusal's or a timeout's as well.
        let status = result.as_ref().map_or_else(|e| e.status.as_u16(), |_| 200);
        ctx.audit.record(
            "session_started",
            &session.caller.actor(),
            Some(session.id()),
            status,
            None,
        );
    }
    Ok(Json(result?.into()))
}

/// POST /api/sessions/{sessionId}/stop
#[utoipa::path(post, path = "/api/sessions/{sessionId}/stop", tag = "sessions",
    responses((status = 200, body = Session), (status = 502)))]
async fn stop_session(session: Scoped, State(ctx): State<ApiContext>) -> ApiResult<Json<Session>> {
    let view = ctx.sessions.stop(session.id()).await?;
    ctx.audit.record(
        "session_stopped",
        &session.caller.actor(),
        Some(session.id()),
        200,
        None,
    );
    Ok(Json(view.into()))
}

/// POST /api/sessions/{sessionId}/logout
#[utoipa::path(post, path = "/api/sessions/{sessionId}/logout", tag = "sessions",
    responses((status = 200, body = Session), (status = 502)))]
async fn logout_session(
    session: Scoped,
    State(ctx): State<ApiContext>,
) -> ApiResult<Json<Session>> {
    // A logout that did not complete writes no success audit row (spec).
    let view = ctx.sessions.logout(session.id()).await?;
    ctx.audit.record(
        "session_logged_out",
        &session.caller.actor(),
        Some(session.id()),
        200,
        None,
    );
    Ok(Json(view.into()))
}

/// POST /api/sessions/{sessionId}/force-kill
#[utoipa::path(post, path = "/api/sessions/{sessionId}/force-kill", tag = "sessions",
    responses((status = 200, body = Session), (status = 400, description = "no running engine to kill")))]
async fn force_kill_session(
    session: Scoped,
    State(ctx): State<ApiContext>,
) -> ApiResult<Json<Session>> {
    let view = ctx.sessions.force_kill(session.id()).await?;
    ctx.audit.record(
        "session_force_killed",
        &session.caller.actor(),
        Some(session.id()),
        200,
        None,
    );
    Ok(Json(view.into()))
}

/// GET /api/sessions/{sessionId}/qr
#[utoipa::path(get, path = "/api/sessions/{sessionId}/qr", tag = "sessions",
    responses((status = 200, body = QrResponse), (status = 400, description = "no QR cached")))]
async fn get_qr(session: Scoped, State(ctx): State<ApiContext>) -> ApiResult<Json<QrResponse>> {
    let (qr_code, status) = ctx.sessions.qr(session.id()).await?;
    Ok(Json(QrResponse { qr_code, status }))
}

/// POST /api/sessions/{sessionId}/pairing-code
#[utoipa::path(post, path = "/api/sessions/{sessionId}/pairing-code", tag = "sessions",
    request_body = PairingCodeRequest, responses((status = 201, body = PairingCodeResponse), (status = 409)))]
async fn request_pairing_code(
    session: Scoped,
    State(ctx): State<ApiContext>,
    ApiJson(body): ApiJson<PairingCodeRequest>,
) -> ApiResult<(StatusCode, Json<PairingCodeResponse>)> {
    let phone = body.phone_number.unwrap_or_default();
    let (pairing_code, status) = ctx.sessions.pairing_code(session.id(), &phone).await?;
    let body = PairingCodeResponse {
        pairing_code,
        status,
    };
    Ok((StatusCode::CREATED, Json(body)))
}
