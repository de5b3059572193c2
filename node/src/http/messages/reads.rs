//! Message reads (viewer): the session's message list, a chat's history, a message's reactions and its
//! media bytes. All come from the message store; the service checks and normalises the chat ids they name.

use axum::Json;
use axum::extract::State;
use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use utoipa_axum::{router::OpenApiRouter, routes};
use wagate_proto::dto::messages::{ListMessagesQuery, Message, ReactionGroup};

use crate::app::ApiContext;
use crate::http::error::ApiResult;
use crate::http::extract::{ApiPath, ApiQuery};
use crate::http::media_output::content_type_of;
use crate::http::session_scope::Scoped;

pub(super) fn router() -> OpenApiRouter<ApiContext> {
    OpenApiRouter::new()
        .routes(routes!(list_messages))
        .routes(routes!(chat_history))
        .routes(routes!(message_reactions))
        .routes(routes!(message_media))
}

/// GET /api/sessions/{sessionId}/messages
#[utoipa::path(get, path = "/api/sessions/{sessionId}/messages", tag = "messages", params(ListMessagesQuery),
    responses((status = 200, body = [Message]), (status = 400, description = "bad paging, unknown cursor, or a chatId/from that is no JID")))]
async fn list_messages(
    session: Scoped,
    State(ctx): State<ApiContext>,
    ApiQuery(query): ApiQuery<ListMessagesQuery>,
) -> ApiResult<Response> {
    Ok(json_body(
        ctx.messaging.list_json(session.id(), query).await?,
    ))
}

/// A JSON body built elsewhere (message lists come as bytes, mostly from memory: `messaging/page_cache.rs`).
fn json_body(json: Bytes) -> Response {
    (
        [(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        )],
        json,
    )
        .into_response()
}

#[derive(serde::Deserialize)]
struct ChatPath {
    #[serde(rename = "chatId")]
    chat_id: String,
}

#[derive(serde::Deserialize)]
struct MessagePath {
    #[serde(rename = "chatId")]
    chat_id: String,
    #[serde(rename = "messageId")]
    message_id: String,
}

#[derive(serde::Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
struct HistoryQuery {
    /// Messages to read: 1-1000, default 50.
    #[param(value_type = Option<u32>, minimum = 1, maximum = 1000)]
    limit: Option<String>,
    /// false drops inline base64 and keeps `{omitted: true, sizeBytes}`.
    #[serde(rename = "includeMedia")]
    #[param(value_type = Option<bool>)]
    include_media: Option<String>,
}

/// GET /api/sessions/{sessionId}/messages/{chatId}/history: the chat's stored messages, newest first, each
/// as `GET /messages` shows it plus `fromMe` and the chat's `kind` (as OpenWA's clients read history).
#[utoipa::path(get, path = "/api/sessions/{sessionId}/messages/{chatId}/history", tag = "messages",
    params(HistoryQuery), responses((status = 200, body = [Message]),
        (status = 400, description = "bad limit, or a chatId that is no JID")))]
async fn chat_history(
    session: Scoped,
    State(ctx): State<ApiContext>,
    ApiPath(path): ApiPath<ChatPath>,
    ApiQuery(q): ApiQuery<HistoryQuery>,
) -> ApiResult<Response> {
    Ok(json_body(
        ctx.messaging
            .history_json(session.id(), &path.chat_id, q.limit, q.include_media)
            .await?,
    ))
}

/// GET /api/sessions/{sessionId}/messages/{chatId}/{messageId}/reactions
#[utoipa::path(get, path = "/api/sessions/{sessionId}/messages/{chatId}/{messageId}/reactions", tag = "messages",
    responses((status = 200, body = [ReactionGroup]), (status = 400, description = "a chatId that is no JID"),
        (status = 404)))]
async fn message_reactions(
    session: Scoped,
    State(ctx): State<ApiContext>,
    ApiPath(path): ApiPath<MessagePath>,
) -> ApiResult<Json<Vec<ReactionGroup>>> {
    Ok(Json(
        ctx.messaging
            .reactions(session.id(), &path.chat_id, &path.message_id)
            .await?,
    ))
}

/// GET /api/sessions/{sessionId}/messages/{chatId}/{messageId}/media
#[utoipa::path(get, path = "/api/sessions/{sessionId}/messages/{chatId}/{messageId}/media", tag = "messages",
    responses((status = 200, description = "The raw media bytes, with their stored content type",
        content_type = "application/octet-stream", body = Vec<u8>),
        (status = 400, description = "a chatId that is no JID"), (status = 404, description = "No media")))]
async fn message_media(
    session: Scoped,
    State(ctx): State<ApiContext>,
    ApiPath(path): ApiPath<MessagePath>,
) -> ApiResult<Response> {
    let (mimetype, stream) = ctx
        .messaging
        .media_stream(session.id(), &path.chat_id, &path.message_id)
        .await?;
    let mut resp = axum::body::Body::from_stream(stream.body).into_response();
    resp.headers_mut()
        .insert(header::CONTENT_TYPE, content_type_of(&mimetype));
    resp.headers_mut()
        .insert(header::CONTENT_LENGTH, HeaderValue::from(stream.size));
    Ok(resp)
}
