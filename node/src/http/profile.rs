//! Profile routes: display name, status text (about) and picture of the session's own account.

use axum::Json;
use axum::extract::State;
use utoipa_axum::{router::OpenApiRouter, routes};
use wagate_proto::dto::calls::{SetProfileNameRequest, SetProfileStatusRequest};
use wagate_proto::dto::common::SuccessResult;
use wagate_proto::dto::status::MediaInput;

use super::engine_call::bounded;
use super::error::{ApiError, ApiResult};
use super::extract::ApiJson;
use super::media_input::load_media;
use super::session_scope::Scoped;
use crate::app::ApiContext;

pub(crate) fn router() -> OpenApiRouter<ApiContext> {
    OpenApiRouter::new()
        .routes(routes!(set_profile_name))
        .routes(routes!(set_profile_status))
        .routes(routes!(set_profile_picture, remove_profile_picture))
}

/// PUT /api/sessions/{sessionId}/profile/name
#[utoipa::path(put, path = "/api/sessions/{sessionId}/profile/name", tag = "profile",
    request_body = SetProfileNameRequest, responses((status = 200, body = SuccessResult)))]
async fn set_profile_name(
    session: Scoped,
    State(ctx): State<ApiContext>,
    ApiJson(body): ApiJson<SetProfileNameRequest>,
) -> ApiResult<Json<SuccessResult>> {
    if body.name.trim().is_empty() {
        return Err(ApiError::bad_request("name must not be empty"));
    }
    crate::names::printable("name", &body.name).map_err(ApiError::bad_request)?;
    let engine = session.engine().await?;
    bounded(&ctx, engine.set_profile_name(&body.name)).await?;
    ctx.sessions
        .record_push_name(session.id(), &body.name)
        .await?;
    Ok(Json(SuccessResult::ok()))
}

/// PUT /api/sessions/{sessionId}/profile/status
#[utoipa::path(put, path = "/api/sessions/{sessionId}/profile/status", tag = "profile",
    request_body = SetProfileStatusRequest, responses((status = 200, body = SuccessResult)))]
async fn set_profile_status(
    session: Scoped,
    State(ctx): State<ApiContext>,
    ApiJson(body): ApiJson<SetProfileStatusRequest>,
) -> ApiResult<Json<SuccessResult>> {
    let engine = session.engine().await?;
    bounded(&ctx, engine.set_profile_status(&body.status)).await?;
    Ok(Json(SuccessResult::ok()))
}

/// PUT /api/sessions/{sessionId}/profile/picture
#[utoipa::path(put, path = "/api/sessions/{sessionId}/profile/picture", tag = "profile",
    request_body = MediaInput, responses((status = 200, body = SuccessResult)))]
async fn set_profile_picture(
    session: Scoped,
    State(ctx): State<ApiContext>,
    ApiJson(body): ApiJson<MediaInput>,
) -> ApiResult<Json<SuccessResult>> {
    let engine = session.engine().await?;
    let (image, _) = load_media(&ctx, session.id(), &body, "image/jpeg").await?;
    bounded(&ctx, engine.set_profile_picture(image)).await?;
    Ok(Json(SuccessResult::ok()))
}

/// DELETE /api/sessions/{sessionId}/profile/picture
#[utoipa::path(delete, path = "/api/sessions/{sessionId}/profile/picture", tag = "profile",
    responses((status = 200, body = SuccessResult)))]
async fn remove_profile_picture(
    session: Scoped,
    State(ctx): State<ApiContext>,
) -> ApiResult<Json<SuccessResult>> {
    let engine = session.engine().await?;
    bounded(&ctx, engine.remove_profile_picture()).await?;
    Ok(Json(SuccessResult::ok()))
}
