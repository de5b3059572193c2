//! Channel (newsletter) routes: list, create, lookup, messages, subscribe, unsubscribe, delete, mute,
//! admin demote and owner transfer. `subscribe` is a static segment and wins over `{channelId}`.

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use utoipa_axum::{router::OpenApiRouter, routes};
use wagate_proto::Jid;
use wagate_proto::dto::channels::{
    Channel, ChannelMessage, ChannelMessagesQuery, CreateChannelRequest, DemoteChannelAdminRequest,
    MuteChannelRequest, SubscribeChannelRequest, TransferChannelOwnerRequest,
};
use wagate_proto::dto::common::SuccessResult;

use super::engine_call::{bounded, jid};
use super::error::{ApiError, ApiResult};
use super::extract::{ApiJson, ApiPath, ApiQuery};
use super::session_scope::Scoped;
use crate::app::ApiContext;

pub(crate) fn router() -> OpenApiRouter<ApiContext> {
    OpenApiRouter::new()
        .routes(routes!(list_channels, create_channel))
        .routes(routes!(subscribe_channel))
        .routes(routes!(get_channel, unsubscribe_channel))
        .routes(routes!(list_channel_messages))
        .routes(routes!(delete_channel))
        .routes(routes!(mute_channel))
        .routes(routes!(demote_channel_admin))
        .routes(routes!(transfer_channel_owner))
}

fn path_channel(path: &(String, String)) -> ApiResult<Jid> {
    let channel = jid("channelId", &path.1)?;
    if channel.server() != "newsletter" {
        return Err(ApiError::bad_request(
            "channelId must be a channel id (<id>@newsletter)",
        ));
    }
    Ok(channel)
}

/// GET /api/sessions/{sessionId}/channels
#[utoipa::path(get, path = "/api/sessions/{sessionId}/channels", tag = "channels",
    responses((status = 200, body = [Channel])))]
async fn list_channels(
    session: Scoped,
    State(ctx): State<ApiContext>,
) -> ApiResult<Json<Vec<Channel>>> {
    let engine = session.engine().await?;
    let channels = bounded(&ctx, engine.list_channels()).await?;
    Ok(Json(channels.into_iter().map(Into::into).collect()))
}

/// POST /api/sessions/{sessionId}/channels
#[utoipa::path(post, path = "/api/sessions/{sessionId}/channels", tag = "channels",
    request_body = CreateChannelRequest, responses((status = 201, body = Channel)))]
async fn create_channel(
    session: Scoped,
    ApiJson(body): ApiJson<CreateChannelRequest>,
) -> ApiResult<(StatusCode, Json<Channel>)> {
    if body.name.trim().is_empty() {
        return Err(ApiError::bad_request("name must not be empty"));
    }
    crate::names::printable("name", &body.name).map_err(ApiError::bad_request)?;
    let engine = session.engine().await?;
    // Unbounded on purpose: channel create is among the routes that never answer 503.
    let channel = engine
        .create_channel(&body.name, body.description.as_deref())
        .await
        .map_err(|e| ApiError::from(e).never_unavailable())?;
    Ok((StatusCode::CREATED, Json(channel.into())))
}

/// POST /api/sessions/{sessionId}/channels/subscribe
#[utoipa::path(post, path = "/api/sessions/{sessionId}/channels/subscribe", tag = "channels",
    request_body = SubscribeChannelRequest, responses((status = 201, body = Channel)))]
async fn subscribe_channel(
    session: Scoped,
    State(ctx): State<ApiContext>,
    ApiJson(body): ApiJson<SubscribeChannelRequest>,
) -> ApiResult<(StatusCode, Json<Channel>)> {
    let code = body
        .invite_code
        .trim()
        .rsplit('/')
        .next()
        .unwrap_or_default()
        .to_string();
    if code.is_empty() {
        return Err(ApiError::bad_request("inviteCode must not be empty"));
    }
    let engine = session.engine().await?;
    let channel = bounded(&ctx, engine.subscribe_channel(&code)).await?;
    Ok((StatusCode::CREATED, Json(channel.into())))
}

/// GET /api/sessions/{sessionId}/channels/{channelId}
#[utoipa::path(get, path = "/api/sessions/{sessionId}/channels/{channelId}", tag = "channels",
    responses((status = 200, body = Channel)))]
async fn get_channel(
    session: Scoped,
    State(ctx): State<ApiContext>,
    ApiPath(path): ApiPath<(String, String)>,
) -> ApiResult<Json<Channel>> {
    let channel = path_channel(&path)?;
    let engine = session.engine().await?;
    Ok(Json(
        bounded(&ctx, engine.channel_info(&channel)).await?.into(),
    ))
}

/// DELETE /api/sessions/{sessionId}/channels/{channelId} (unsubscribe)
#[utoipa::path(delete, path = "/api/sessions/{sessionId}/channels/{channelId}", tag = "channels",
    responses((status = 200, body = SuccessResult)))]
async fn unsubscribe_channel(
    session: Scoped,
    State(ctx): State<ApiContext>,
    ApiPath(path): ApiPath<(String, String)>,
) -> ApiResult<Json<SuccessResult>> {
    let channel = path_channel(&path)?;
    let engine = session.engine().await?;
    bounded(&ctx, engine.unsubscribe_channel(&channel)).await?;
    Ok(Json(SuccessResult::ok()))
}

/// GET /api/sessions/{sessionId}/channels/{channelId}/messages
#[utoipa::path(get, path = "/api/sessions/{sessionId}/channels/{channelId}/messages", tag = "channels",
    params(ChannelMessagesQuery), responses((status = 200, body = [ChannelMessage])))]
async fn list_channel_messages(
    session: Scoped,
    State(ctx): State<ApiContext>,
    ApiPath(path): ApiPath<(String, String)>,
    ApiQuery(query): ApiQuery<ChannelMessagesQuery>,
) -> ApiResult<Json<Vec<ChannelMessage>>> {
    let channel = path_channel(&path)?;
    let limit = query.limit.unwrap_or(50);
    if !(1..=100).contains(&limit) {
        return Err(ApiError::bad_request(
            "limit must be an integer between 1 and 100",
        ));
    }
    let engine = session.engine().await?;
    let messages = bounded(&ctx, engine.channel_messages(&channel, limit)).await?;
    let list = messages.into_iter().map(|m| ChannelMessage {
        has_media: m.media.is_some() || m.kind.has_media(),
        id: m.id,
        body: m.body,
        timestamp: m.timestamp,
    });
    Ok(Json(list.collect()))
}

/// POST /api/sessions/{sessionId}/channels/{channelId}/delete
#[utoipa::path(post, path = "/api/sessions/{sessionId}/channels/{channelId}/delete", tag = "channels",
    responses((status = 200, body = SuccessResult)))]
async fn delete_channel(
    session: Scoped,
    State(ctx): State<ApiContext>,
    ApiPath(path): ApiPath<(String, String)>,
) -> ApiResult<Json<SuccessResult>> {
    let channel = path_channel(&path)?;
    let engine = session.engine().await?;
    bounded(&ctx, engine.delete_channel(&channel)).await?;
    Ok(Json(SuccessResult::ok()))
}

/// POST /api/sessions/{sessionId}/channels/{channelId}/mute
#[utoipa::path(post, path = "/api/sessions/{sessionId}/channels/{channelId}/mute", tag = "channels",
    request_body = MuteChannelRequest, responses((status = 200, body = SuccessResult)))]
async fn mute_channel(
    session: Scoped,
    State(ctx): State<ApiContext>,
    ApiPath(path): ApiPath<(String, String)>,
    ApiJson(body): ApiJson<MuteChannelRequest>,
) -> ApiResult<Json<SuccessResult>> {
    let channel = path_channel(&path)?;
    let engine = session.engine().await?;
    bounded(&ctx, engine.mute_channel(&channel, body.mute)).await?;
    Ok(Json(SuccessResult::ok()))
}

/// POST /api/sessions/{sessionId}/channels/{channelId}/admins/demote
#[utoipa::path(post, path = "/api/sessions/{sessionId}/channels/{channelId}/admins/demote", tag = "channels",
    request_body = DemoteChannelAdminRequest, responses((status = 200, body = SuccessResult)))]
async fn demote_channel_admin(
    session: Scoped,
    State(ctx): State<ApiContext>,
    ApiPath(path): ApiPath<(String, String)>,
    ApiJson(body): ApiJson<DemoteChannelAdminRequest>,
) -> ApiResult<Json<SuccessResult>> {
    let channel = path_channel(&path)?;
    let user = jid("userId", &body.user_id)?;
    let engine = session.engine().await?;
    bounded(&ctx, engine.demote_channel_admin(&channel, &user)).await?;
    Ok(Json(SuccessResult::ok()))
}

/// POST /api/sessions/{sessionId}/channels/{channelId}/owner/transfer (irreversible)
#[utoipa::path(post, path = "/api/sessions/{sessionId}/channels/{channelId}/owner/transfer", tag = "channels",
    request_body = TransferChannelOwnerRequest, responses((status = 200, body = SuccessResult)))]
async fn transfer_channel_owner(
    session: Scoped,
    State(ctx): State<ApiContext>,
    ApiPath(path): ApiPath<(String, String)>,
    ApiJson(body): ApiJson<TransferChannelOwnerRequest>,
) -> ApiResult<Json<SuccessResult>> {
    let channel = path_channel(&path)?;
    let owner = jid("newOwnerId", &body.new_owner_id)?;
    let engine = session.engine().await?;
    bounded(&ctx, engine.transfer_channel_owner(&channel, &owner)).await?;
    Ok(Json(SuccessResult::ok()))
}
