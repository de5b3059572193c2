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
use super::media_input::load_stored_media;
use super::session_scope::Scoped;
use crate::app::ApiContext;
use crate::engine::MediaSource;
use crate::messaging::{check_picture_body, picture_type};

/// WhatsApp's limits (OpenWA's `SetProfileNameDto` / `SetProfileStatusDto` maxLength).
const NAME_MAX: usize = 25;
const ABOUT_MAX: usize = 139;

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
    if body.name.chars().count() > NAME_MAX {
        return Err(ApiError::bad_request(format!(
            "name must be at most {NAME_MAX} characters (WhatsApp's display-name limit)"
        )));
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
    if body.status.chars().count() > ABOUT_MAX {
        return Err(ApiError::bad_request(format!(
            "status must be at most {ABOUT_MAX} characters (WhatsApp's about limit)"
        )));
    }
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
    let body = picture_body(body)?;
    let engine = session.engine().await?;
    let image = load_picture(&ctx, session.id(), &body).await?;
    bounded(&ctx, engine.set_profile_picture(image)).await?;
    Ok(Json(SuccessResult::ok()))
}

/// A picture body: the media-body rules of a send (`messaging::check_picture_body`: exactly one of url or
/// base64, raw base64, a mimetype with base64, base64 bytes that show an image), and a declared type that
/// is an image. Checked before anything is downloaded; answers the body to load.
pub(crate) fn picture_body(body: MediaInput) -> ApiResult<MediaInput> {
    let declared = body.mimetype.as_deref().map(str::trim);
    if let Some(declared) = declared.filter(|m| !m.is_empty() && !is_image(m)) {
        return Err(not_an_image(declared));
    }
    check_picture_body(&body)?;
    Ok(body)
}

/// The picture's content, once the type it was served with is an image too (a URL answering `text/plain`
/// is refused; an untyped or `application/octet-stream` answer is left to the declared type) and a
/// fetched content's bytes show an image (base64 was typed before it was stored).
pub(crate) async fn load_picture(
    ctx: &ApiContext,
    session_id: &str,
    body: &MediaInput,
) -> ApiResult<MediaSource> {
    let media = load_stored_media(ctx, session_id, body, "image/jpeg").await?;
    let served = media.stored.content_type.as_deref().map(str::trim);
    let untyped = |t: &&str| t.is_empty() || t.starts_with("application/octet-stream");
    if let Some(served) = served.filter(|t| !untyped(t) && !is_image(t)) {
        return Err(not_an_image(served));
    }
    let fetched = body.base64.as_deref().is_none_or(|b| b.trim().is_empty());
    if fetched {
        picture_type(ctx.messaging.stored_type(&media.stored.key).await?)?;
    }
    Ok(media.source)
}

fn is_image(mimetype: &str) -> bool {
    mimetype.to_ascii_lowercase().starts_with("image/")
}

fn not_an_image(mimetype: &str) -> ApiError {
    ApiError::bad_request(format!(
        "the picture must be an image (image/*), not {mimetype}"
    ))
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
