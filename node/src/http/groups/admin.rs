//! Group administration routes: settings (read and partial update, which must name at least one known
//! setting), picture (read, set, remove) and the invite code (read needs OPERATOR: a VIEWER gets 403;
//! revoke answers the new code).

use axum::Json;
use axum::extract::State;
use utoipa_axum::{router::OpenApiRouter, routes};
use wagate_proto::dto::common::SuccessResult;
use wagate_proto::dto::contacts::PictureUrl;
use wagate_proto::dto::groups::{GroupSettings, InviteCode, UpdateGroupSettingsRequest};
use wagate_proto::dto::status::MediaInput;

use super::path_group;
use crate::app::ApiContext;
use crate::engine::{self, GroupSettingsUpdate};
use crate::http::engine_call::bounded;
use crate::http::error::{ApiError, ApiResult};
use crate::http::extract::{ApiJson, ApiPath};
use crate::http::profile::{load_picture, picture_body};
use crate::http::session_scope::Scoped;

/// The disappearing-message timers WhatsApp offers (off, 24 hours, 7 days, 90 days).
const EPHEMERAL_TIMERS: [u32; 4] = [0, 86_400, 604_800, 7_776_000];

pub(super) fn router() -> OpenApiRouter<ApiContext> {
    OpenApiRouter::new()
        .routes(routes!(get_group_settings, update_group_settings))
        .routes(routes!(
            get_group_picture,
            set_group_picture,
            remove_group_picture
        ))
        .routes(routes!(get_invite_code))
        .routes(routes!(revoke_invite_code))
}

fn settings(s: engine::GroupSettings) -> GroupSettings {
    GroupSettings {
        announce: s.announce,
        locked: s.locked,
        ephemeral_seconds: s.ephemeral_seconds,
        member_add_mode: if s.admin_add_only { "admins" } else { "all" }.to_string(),
    }
}

fn invite(code: String) -> InviteCode {
    InviteCode {
        invite_link: format!("https://chat.whatsapp.com/{code}"),
        invite_code: code,
    }
}

/// GET /api/sessions/{sessionId}/groups/{groupId}/settings
#[utoipa::path(get, path = "/api/sessions/{sessionId}/groups/{groupId}/settings", tag = "groups",
    responses((status = 200, body = GroupSettings)))]
async fn get_group_settings(
    session: Scoped,
    State(ctx): State<ApiContext>,
    ApiPath(path): ApiPath<(String, String)>,
) -> ApiResult<Json<GroupSettings>> {
    let group = path_group(&path)?;
    let engine = session.engine().await?;
    Ok(Json(settings(
        bounded(&ctx, engine.group_settings(&group)).await?,
    )))
}

/// PUT /api/sessions/{sessionId}/groups/{groupId}/settings
#[utoipa::path(put, path = "/api/sessions/{sessionId}/groups/{groupId}/settings", tag = "groups",
    request_body = UpdateGroupSettingsRequest, responses((status = 200, body = SuccessResult)))]
async fn update_group_settings(
    session: Scoped,
    State(ctx): State<ApiContext>,
    ApiPath(path): ApiPath<(String, String)>,
    ApiJson(body): ApiJson<UpdateGroupSettingsRequest>,
) -> ApiResult<Json<SuccessResult>> {
    let group = path_group(&path)?;
    let admin_add_only = match body.member_add_mode.as_deref() {
        None => None,
        Some("admins") => Some(true),
        Some("all") => Some(false),
        Some(_) => return Err(ApiError::bad_request("memberAddMode must be all or admins")),
    };
    if body
        .ephemeral_seconds
        .is_some_and(|s| !EPHEMERAL_TIMERS.contains(&s))
    {
        return Err(ApiError::bad_request(
            "ephemeralSeconds must be one of 0 (off), 86400, 604800 or 7776000",
        ));
    }
    let update = GroupSettingsUpdate {
        announce: body.announce,
        locked: body.locked,
        ephemeral_seconds: body.ephemeral_seconds,
        admin_add_only,
    };
    // Unknown fields are ignored as on every route, so `{}` or only unknown ones would change nothing.
    if update == GroupSettingsUpdate::default() {
        return Err(ApiError::bad_request(
            "a settings update needs at least one of announce, locked, ephemeralSeconds or memberAddMode",
        ));
    }
    let engine = session.engine().await?;
    bounded(&ctx, engine.update_group_settings(&group, update)).await?;
    Ok(Json(SuccessResult::ok()))
}

/// GET /api/sessions/{sessionId}/groups/{groupId}/picture
#[utoipa::path(get, path = "/api/sessions/{sessionId}/groups/{groupId}/picture", tag = "groups",
    responses((status = 200, body = PictureUrl)))]
async fn get_group_picture(
    session: Scoped,
    State(ctx): State<ApiContext>,
    ApiPath(path): ApiPath<(String, String)>,
) -> ApiResult<Json<PictureUrl>> {
    let group = path_group(&path)?;
    let engine = session.engine().await?;
    let url = bounded(&ctx, engine.group_picture(&group)).await?;
    Ok(Json(PictureUrl { url }))
}

/// PUT /api/sessions/{sessionId}/groups/{groupId}/picture
#[utoipa::path(put, path = "/api/sessions/{sessionId}/groups/{groupId}/picture", tag = "groups",
    request_body = MediaInput, responses((status = 200, body = SuccessResult)))]
async fn set_group_picture(
    session: Scoped,
    State(ctx): State<ApiContext>,
    ApiPath(path): ApiPath<(String, String)>,
    ApiJson(body): ApiJson<MediaInput>,
) -> ApiResult<Json<SuccessResult>> {
    let group = path_group(&path)?;
    let body = picture_body(body)?;
    let engine = session.engine().await?;
    let image = load_picture(&ctx, session.id(), &body).await?;
    bounded(&ctx, engine.set_group_picture(&group, image)).await?;
    Ok(Json(SuccessResult::ok()))
}

/// DELETE /api/sessions/{sessionId}/groups/{groupId}/picture
#[utoipa::path(delete, path = "/api/sessions/{sessionId}/groups/{groupId}/picture", tag = "groups",
    responses((status = 200, body = SuccessResult)))]
async fn remove_group_picture(
    session: Scoped,
    State(ctx): State<ApiContext>,
    ApiPath(path): ApiPath<(String, String)>,
) -> ApiResult<Json<SuccessResult>> {
    let group = path_group(&path)?;
    let engine = session.engine().await?;
    bounded(&ctx, engine.remove_group_picture(&group)).await?;
    Ok(Json(SuccessResult::ok()))
}

/// GET /api/sessions/{sessionId}/groups/{groupId}/invite-code (OPERATOR)
#[utoipa::path(get, path = "/api/sessions/{sessionId}/groups/{groupId}/invite-code", tag = "groups",
    responses((status = 200, body = InviteCode)))]
async fn get_invite_code(
    session: Scoped,
    State(ctx): State<ApiContext>,
    ApiPath(path): ApiPath<(String, String)>,
) -> ApiResult<Json<InviteCode>> {
    let group = path_group(&path)?;
    let engine = session.engine().await?;
    Ok(Json(invite(
        bounded(&ctx, engine.group_invite_code(&group)).await?,
    )))
}

/// POST /api/sessions/{sessionId}/groups/{groupId}/invite-code/revoke
#[utoipa::path(post, path = "/api/sessions/{sessionId}/groups/{groupId}/invite-code/revoke", tag = "groups",
    responses((status = 200, body = InviteCode)))]
async fn revoke_invite_code(
    session: Scoped,
    State(ctx): State<ApiContext>,
    ApiPath(path): ApiPath<(String, String)>,
) -> ApiResult<Json<InviteCode>> {
    let group = path_group(&path)?;
    let engine = session.engine().await?;
    Ok(Json(invite(
        bounded(&ctx, engine.revoke_group_invite(&group)).await?,
    )))
}
