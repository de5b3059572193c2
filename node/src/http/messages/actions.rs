//! Operations on existing messages (200): react, edit (MessageResponse), delete, pin, unpin, poll vote,
//! star, click-button (wire-notes §12) and the chat read receipt `POST /chats/read`. Handlers parse, authorise, call the service.

use axum::Json;
use axum::extract::State;
use utoipa_axum::{router::OpenApiRouter, routes};
use wagate_proto::dto::common::{ClickButtonResponse, MessageResponse, SuccessResult};
use wagate_proto::dto::messages::{
    ClickButtonRequest, DeleteMessageRequest, EditRequest, MessageRefRequest, PinRequest,
    ReactRequest, ReadChatRequest, StarRequest, VotePollRequest,
};

use crate::app::ApiContext;
use crate::http::engine_call::bounded;
use crate::http::error::ApiResult;
use crate::http::extract::ApiJson;
use crate::http::session_scope::Scoped;

pub(super) fn router() -> OpenApiRouter<ApiContext> {
    OpenApiRouter::new()
        .routes(routes!(react_message))
        .routes(routes!(edit_message))
        .routes(routes!(delete_message))
        .routes(routes!(pin_message))
        .routes(routes!(unpin_message))
        .routes(routes!(vote_poll))
        .routes(routes!(star_message))
        .routes(routes!(click_button))
        .routes(routes!(read_chat))
}

type Success = ApiResult<Json<SuccessResult>>;

/// POST /api/sessions/{sessionId}/messages/react
#[utoipa::path(post, path = "/api/sessions/{sessionId}/messages/react", tag = "messages",
    request_body = ReactRequest, responses((status = 200, body = SuccessResult), (status = 400), (status = 409)))]
async fn react_message(
    session: Scoped,
    State(ctx): State<ApiContext>,
    ApiJson(body): ApiJson<ReactRequest>,
) -> Success {
    ctx.messaging.react(session.id(), body).await?;
    Ok(Json(SuccessResult::ok()))
}

/// POST /api/sessions/{sessionId}/messages/edit
#[utoipa::path(post, path = "/api/sessions/{sessionId}/messages/edit", tag = "messages",
    request_body = EditRequest, responses((status = 200, body = MessageResponse), (status = 400), (status = 409)))]
async fn edit_message(
    session: Scoped,
    State(ctx): State<ApiContext>,
    ApiJson(body): ApiJson<EditRequest>,
) -> ApiResult<Json<MessageResponse>> {
    let sent = ctx.messaging.edit(session.id(), body).await?;
    Ok(Json(MessageResponse {
        message_id: sent.id,
        timestamp: sent.timestamp,
    }))
}

/// POST /api/sessions/{sessionId}/messages/delete
#[utoipa::path(post, path = "/api/sessions/{sessionId}/messages/delete", tag = "messages",
    request_body = DeleteMessageRequest, responses((status = 200, body = SuccessResult), (status = 400)))]
async fn delete_message(
    session: Scoped,
    State(ctx): State<ApiContext>,
    ApiJson(body): ApiJson<DeleteMessageRequest>,
) -> Success {
    ctx.messaging.delete(session.id(), body).await?;
    Ok(Json(SuccessResult::ok()))
}

/// POST /api/sessions/{sessionId}/messages/pin
#[utoipa::path(post, path = "/api/sessions/{sessionId}/messages/pin", tag = "messages",
    request_body = PinRequest, responses((status = 200, body = SuccessResult), (status = 400)))]
async fn pin_message(
    session: Scoped,
    State(ctx): State<ApiContext>,
    ApiJson(body): ApiJson<PinRequest>,
) -> Success {
    ctx.messaging.pin(session.id(), body).await?;
    Ok(Json(SuccessResult::ok()))
}

/// POST /api/sessions/{sessionId}/messages/unpin
#[utoipa::path(post, path = "/api/sessions/{sessionId}/messages/unpin", tag = "messages",
    request_body = MessageRefRequest, responses((status = 200, body = SuccessResult), (status = 400)))]
async fn unpin_message(
    session: Scoped,
    State(ctx): State<ApiContext>,
    ApiJson(body): ApiJson<MessageRefRequest>,
) -> Success {
    ctx.messaging.unpin(session.id(), body).await?;
    Ok(Json(SuccessResult::ok()))
}

/// POST /api/sessions/{sessionId}/messages/vote-poll
#[utoipa::path(post, path = "/api/sessions/{sessionId}/messages/vote-poll", tag = "messages",
    request_body = VotePollRequest, responses((status = 200, body = SuccessResult), (status = 400)))]
async fn vote_poll(
    session: Scoped,
    State(ctx): State<ApiContext>,
    ApiJson(body): ApiJson<VotePollRequest>,
) -> Success {
    ctx.messaging.vote_poll(session.id(), body).await?;
    Ok(Json(SuccessResult::ok()))
}

/// POST /api/sessions/{sessionId}/messages/star
#[utoipa::path(post, path = "/api/sessions/{sessionId}/messages/star", tag = "messages",
    request_body = StarRequest, responses((status = 200, body = SuccessResult), (status = 400)))]
async fn star_message(
    session: Scoped,
    State(ctx): State<ApiContext>,
    ApiJson(body): ApiJson<StarRequest>,
) -> Success {
    ctx.messaging.star(session.id(), body).await?;
    Ok(Json(SuccessResult::ok()))
}

/// POST /api/sessions/{sessionId}/messages/click-button
#[utoipa::path(post, path = "/api/sessions/{sessionId}/messages/click-button", tag = "messages",
    request_body = ClickButtonRequest,
    responses((status = 200, body = ClickButtonResponse), (status = 400), (status = 409), (status = 501)))]
async fn click_button(
    session: Scoped,
    State(ctx): State<ApiContext>,
    ApiJson(body): ApiJson<ClickButtonRequest>,
) -> ApiResult<Json<ClickButtonResponse>> {
    let reply = ctx.messaging.click_button(session.id(), body).await?;
    Ok(Json(ClickButtonResponse {
        success: true,
        message_id: reply.id,
        timestamp: reply.timestamp,
    }))
}

/// POST /api/sessions/{sessionId}/chats/read
#[utoipa::path(post, path = "/api/sessions/{sessionId}/chats/read", tag = "chats",
    request_body = ReadChatRequest, responses((status = 200, body = SuccessResult), (status = 400)))]
async fn read_chat(
    session: Scoped,
    State(ctx): State<ApiContext>,
    ApiJson(body): ApiJson<ReadChatRequest>,
) -> Success {
    // The spec lists the chat read among the engine queries that answer 503 after 30 seconds.
    bounded(&ctx, ctx.messaging.read_chat(session.id(), body)).await?;
    Ok(Json(SuccessResult::ok()))
}
