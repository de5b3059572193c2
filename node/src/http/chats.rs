//! Chat routes: the chat list and the chat write actions (unread, archive, pin, mute, typing, clear,
//! delete). Reads and writes go through the engine; `/chats/read` belongs to the messaging routes. A clear
//! or delete the engine accepted also deletes the gateway's stored copy of the chat's messages.

use axum::Json;
use axum::extract::{RawQuery, State};
use utoipa_axum::{router::OpenApiRouter, routes};
use wagate_proto::dto::chats::{
    ArchiveChatRequest, ChatIdRequest, ChatSummary, ChatTypingRequest, MuteChatRequest, PageQuery,
    PinChatRequest,
};
use wagate_proto::dto::common::SuccessResult;

use super::engine_call::{Page, bounded, jid};
use super::error::{ApiError, ApiResult};
use super::extract::{ApiJson, ApiPath};
use super::session_scope::Scoped;
use crate::app::ApiContext;
use crate::engine::ChatState;
use crate::store::chat_history::{self, Forget};

pub(crate) fn router() -> OpenApiRouter<ApiContext> {
    OpenApiRouter::new()
        .routes(routes!(list_chats))
        .routes(routes!(mark_chat_unread))
        .routes(routes!(archive_chat))
        .routes(routes!(pin_chat))
        .routes(routes!(mute_chat))
        .routes(routes!(set_chat_typing))
        .routes(routes!(clear_chat))
        .routes(routes!(delete_chat))
}

/// GET /api/sessions/{sessionId}/chats
#[utoipa::path(get, path = "/api/sessions/{sessionId}/chats", tag = "chats", params(PageQuery),
    responses((status = 200, body = [ChatSummary])))]
async fn list_chats(
    session: Scoped,
    State(ctx): State<ApiContext>,
    RawQuery(query): RawQuery,
) -> ApiResult<Json<Vec<ChatSummary>>> {
    let page = Page::parse(query.as_deref(), 1000, 1000)?;
    let engine = session.engine().await?;
    let chats = bounded(&ctx, engine.list_chats()).await?;
    Ok(Json(
        page.apply(chats).into_iter().map(Into::into).collect(),
    ))
}

/// POST /api/sessions/{sessionId}/chats/unread
#[utoipa::path(post, path = "/api/sessions/{sessionId}/chats/unread", tag = "chats",
    request_body = ChatIdRequest, responses((status = 200, body = SuccessResult)))]
async fn mark_chat_unread(
    session: Scoped,
    State(ctx): State<ApiContext>,
    ApiJson(body): ApiJson<ChatIdRequest>,
) -> ApiResult<Json<SuccessResult>> {
    let chat = jid("chatId", &body.chat_id)?;
    let engine = session.engine().await?;
    bounded(&ctx, engine.mark_unread(&chat)).await?;
    Ok(Json(SuccessResult::ok()))
}

/// POST /api/sessions/{sessionId}/chats/archive
#[utoipa::path(post, path = "/api/sessions/{sessionId}/chats/archive", tag = "chats",
    request_body = ArchiveChatRequest, responses((status = 200, body = SuccessResult)))]
async fn archive_chat(
    session: Scoped,
    State(ctx): State<ApiContext>,
    ApiJson(body): ApiJson<ArchiveChatRequest>,
) -> ApiResult<Json<SuccessResult>> {
    let chat = jid("chatId", &body.chat_id)?;
    let engine = session.engine().await?;
    bounded(&ctx, engine.archive_chat(&chat, body.archive)).await?;
    Ok(Json(SuccessResult::ok()))
}

/// POST /api/sessions/{sessionId}/chats/pin
#[utoipa::path(post, path = "/api/sessions/{sessionId}/chats/pin", tag = "chats",
    request_body = PinChatRequest, responses((status = 200, body = SuccessResult)))]
async fn pin_chat(
    session: Scoped,
    State(ctx): State<ApiContext>,
    ApiJson(body): ApiJson<PinChatRequest>,
) -> ApiResult<Json<SuccessResult>> {
    let chat = jid("chatId", &body.chat_id)?;
    let engine = session.engine().await?;
    bounded(&ctx, engine.pin_chat(&chat, body.pin)).await?;
    Ok(Json(SuccessResult::ok()))
}

/// POST /api/sessions/{sessionId}/chats/mute
#[utoipa::path(post, path = "/api/sessions/{sessionId}/chats/mute", tag = "chats",
    request_body = MuteChatRequest, responses((status = 200, body = SuccessResult)))]
async fn mute_chat(
    session: Scoped,
    State(ctx): State<ApiContext>,
    ApiJson(body): ApiJson<MuteChatRequest>,
) -> ApiResult<Json<SuccessResult>> {
    let chat = jid("chatId", &body.chat_id)?;
    let until = body.mute_until.ok_or_else(|| {
        ApiError::bad_request(
            "muteUntil is required (epoch milliseconds, 0 = indefinitely, or null)",
        )
    })?;
    if until.is_some_and(|ms| ms < 0) {
        return Err(ApiError::bad_request("muteUntil must not be negative"));
    }
    let engine = session.engine().await?;
    bounded(&ctx, engine.mute_chat(&chat, until)).await?;
    Ok(Json(SuccessResult::ok()))
}

/// POST /api/sessions/{sessionId}/chats/typing
#[utoipa::path(post, path = "/api/sessions/{sessionId}/chats/typing", tag = "chats",
    request_body = ChatTypingRequest, responses((status = 200, body = SuccessResult)))]
async fn set_chat_typing(
    session: Scoped,
    State(ctx): State<ApiContext>,
    ApiJson(body): ApiJson<ChatTypingRequest>,
) -> ApiResult<Json<SuccessResult>> {
    let chat = jid("chatId", &body.chat_id)?;
    let state = match body.state.as_str() {
        "typing" => ChatState::Typing,
        "recording" => ChatState::Recording,
        "paused" => ChatState::Paused,
        _ => {
            return Err(ApiError::bad_request(
                "state must be typing, recording or paused",
            ));
        }
    };
    let engine = session.engine().await?;
    bounded(&ctx, engine.set_chat_state(&chat, state)).await?;
    Ok(Json(SuccessResult::ok()))
}

/// DELETE /api/sessions/{sessionId}/chats/{chatId}/messages
#[utoipa::path(delete, path = "/api/sessions/{sessionId}/chats/{chatId}/messages", tag = "chats",
    responses((status = 200, body = SuccessResult)))]
async fn clear_chat(
    session: Scoped,
    State(ctx): State<ApiContext>,
    ApiPath(path): ApiPath<(String, String)>,
) -> ApiResult<Json<SuccessResult>> {
    let chat = jid("chatId", &path.1)?;
    let engine = session.engine().await?;
    bounded(&ctx, engine.clear_chat(&chat)).await?;
    forget_stored(&ctx, session.id(), &chat, Forget::History).await?;
    Ok(Json(SuccessResult::ok()))
}

/// POST /api/sessions/{sessionId}/chats/delete
#[utoipa::path(post, path = "/api/sessions/{sessionId}/chats/delete", tag = "chats",
    request_body = ChatIdRequest, responses((status = 200, body = SuccessResult)))]
async fn delete_chat(
    session: Scoped,
    State(ctx): State<ApiContext>,
    ApiJson(body): ApiJson<ChatIdRequest>,
) -> ApiResult<Json<SuccessResult>> {
    let chat = jid("chatId", &body.chat_id)?;
    let engine = session.engine().await?;
    bounded(&ctx, engine.delete_chat(&chat)).await?;
    forget_stored(&ctx, session.id(), &chat, Forget::Chat).await?;
    Ok(Json(SuccessResult::ok()))
}

/// Once the network has cleared or deleted the chat, the gateway's own copy of its messages goes too
/// (OpenWA's clients promise it): rows, search entries, reactions and votes; never shared media objects.
/// Only after the engine succeeded: a refused clear keeps the history.
async fn forget_stored(
    ctx: &ApiContext,
    session_id: &str,
    chat: &wagate_proto::Jid,
    what: Forget,
) -> ApiResult<()> {
    let db = ctx.infra.data_db();
    let chat_id = chat.to_string();
    let rows = chat_history::forget(db, session_id, &chat_id, what)
        .await
        .map_err(|err| {
            ApiError::internal(format!(
                "chat {chat_id} changed on the network, its stored messages were not deleted: {err}"
            ))
        })?;
    tracing::debug!(session_id, chat_id, rows, "stored chat history deleted");
    Ok(())
}
