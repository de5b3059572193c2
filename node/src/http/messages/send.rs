//! Send routes (201 + MessageResponse): text, the five media types, location, contact, poll, template,
//! product (`{id, timestamp}`), reply and forward. Handlers parse, authorise, build a draft and call
//! `MessagingService::send`; every one honours `Idempotency-Key`.

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use serde::Serialize;
use utoipa_axum::{router::OpenApiRouter, routes};
use wagate_proto::Role;
use wagate_proto::dto::common::MessageResponse;
use wagate_proto::dto::messages::{
    ForwardRequest, ProductSendResponse, ReplyRequest, SendContactRequest, SendLocationRequest,
    SendMediaRequest, SendPollRequest, SendProductRequest, SendTemplateRequest, SendTextRequest,
};

use super::idem::Idem;
use crate::app::ApiContext;
use crate::engine::{MediaKind, SentMessage};
use crate::http::auth::Caller;
use crate::http::error::ApiResult;
use crate::http::extract::{ApiJson, SessionId};
use crate::http::sessions::authorise;
use crate::messaging::MessagingResult;
use crate::messaging::draft::{self, Draft};

pub(super) fn router() -> OpenApiRouter<ApiContext> {
    OpenApiRouter::new()
        .routes(routes!(send_text))
        .routes(routes!(send_image))
        .routes(routes!(send_video))
        .routes(routes!(send_audio))
        .routes(routes!(send_document))
        .routes(routes!(send_sticker))
        .routes(routes!(send_location))
        .routes(routes!(send_contact))
        .routes(routes!(send_poll))
        .routes(routes!(send_template))
        .routes(routes!(send_product))
        .routes(routes!(reply))
        .routes(routes!(forward))
}

fn response(sent: SentMessage) -> MessageResponse {
    MessageResponse {
        message_id: sent.id,
        timestamp: sent.timestamp,
    }
}

/// The common body of every draft-based send route.
async fn send_with<T: Serialize>(
    ctx: &ApiContext,
    caller: &Caller,
    id: &SessionId,
    headers: &HeaderMap,
    route: &str,
    body: T,
    build: impl FnOnce(T) -> MessagingResult<Draft>,
) -> ApiResult<Response> {
    authorise(caller, id, Role::Operator)?;
    let idem = match Idem::begin(ctx, &id.0, headers, route, &body).await? {
        Idem::Replay(resp) => return Ok(resp),
        idem => idem,
    };
    let sent = ctx.messaging.send(&id.0, build(body)?).await?;
    idem.respond(ctx, &id.0, StatusCode::CREATED, &response(sent))
        .await
}

/// POST /api/sessions/{sessionId}/messages/send-text
#[utoipa::path(post, path = "/api/sessions/{sessionId}/messages/send-text", tag = "messages",
    request_body = SendTextRequest, responses((status = 201, body = MessageResponse), (status = 400),
    (status = 404), (status = 409), (status = 429)))]
async fn send_text(
    caller: Caller,
    id: SessionId,
    State(ctx): State<ApiContext>,
    headers: HeaderMap,
    ApiJson(body): ApiJson<SendTextRequest>,
) -> ApiResult<Response> {
    send_with(&ctx, &caller, &id, &headers, "send-text", body, draft::text).await
}

macro_rules! media_route {
    ($name:ident, $path:literal, $route:literal, $kind:expr) => {
        #[doc = concat!("POST ", $path)]
        #[utoipa::path(post, path = $path, tag = "messages", request_body = SendMediaRequest,
            responses((status = 201, body = MessageResponse), (status = 400), (status = 404),
            (status = 409), (status = 413), (status = 429)))]
        async fn $name(caller: Caller, id: SessionId, State(ctx): State<ApiContext>, headers: HeaderMap,
            ApiJson(body): ApiJson<SendMediaRequest>) -> ApiResult<Response> {
            send_with(&ctx, &caller, &id, &headers, $route, body, |b| draft::media($kind, b)).await
        }
    };
}

media_route!(
    send_image,
    "/api/sessions/{sessionId}/messages/send-image",
    "send-image",
    MediaKind::Image
);
media_route!(
    send_video,
    "/api/sessions/{sessionId}/messages/send-video",
    "send-video",
    MediaKind::Video
);
media_route!(
    send_audio,
    "/api/sessions/{sessionId}/messages/send-audio",
    "send-audio",
    MediaKind::Audio
);
media_route!(
    send_document,
    "/api/sessions/{sessionId}/messages/send-document",
    "send-document",
    MediaKind::Document
);
media_route!(
    send_sticker,
    "/api/sessions/{sessionId}/messages/send-sticker",
    "send-sticker",
    MediaKind::Sticker
);

/// POST /api/sessions/{sessionId}/messages/send-location
#[utoipa::path(post, path = "/api/sessions/{sessionId}/messages/send-location", tag = "messages",
    request_body = SendLocationRequest, responses((status = 201, body = MessageResponse), (status = 400)))]
async fn send_location(
    caller: Caller,
    id: SessionId,
    State(ctx): State<ApiContext>,
    headers: HeaderMap,
    ApiJson(body): ApiJson<SendLocationRequest>,
) -> ApiResult<Response> {
    send_with(
        &ctx,
        &caller,
        &id,
        &headers,
        "send-location",
        body,
        draft::location,
    )
    .await
}

/// POST /api/sessions/{sessionId}/messages/send-contact
#[utoipa::path(post, path = "/api/sessions/{sessionId}/messages/send-contact", tag = "messages",
    request_body = SendContactRequest, responses((status = 201, body = MessageResponse), (status = 400)))]
async fn send_contact(
    caller: Caller,
    id: SessionId,
    State(ctx): State<ApiContext>,
    headers: HeaderMap,
    ApiJson(body): ApiJson<SendContactRequest>,
) -> ApiResult<Response> {
    send_with(
        &ctx,
        &caller,
        &id,
        &headers,
        "send-contact",
        body,
        draft::contact,
    )
    .await
}

/// POST /api/sessions/{sessionId}/messages/send-poll
#[utoipa::path(post, path = "/api/sessions/{sessionId}/messages/send-poll", tag = "messages",
    request_body = SendPollRequest, responses((status = 201, body = MessageResponse), (status = 400)))]
async fn send_poll(
    caller: Caller,
    id: SessionId,
    State(ctx): State<ApiContext>,
    headers: HeaderMap,
    ApiJson(body): ApiJson<SendPollRequest>,
) -> ApiResult<Response> {
    send_with(&ctx, &caller, &id, &headers, "send-poll", body, draft::poll).await
}

/// POST /api/sessions/{sessionId}/messages/reply
#[utoipa::path(post, path = "/api/sessions/{sessionId}/messages/reply", tag = "messages",
    request_body = ReplyRequest, responses((status = 201, body = MessageResponse), (status = 400), (status = 404)))]
async fn reply(
    caller: Caller,
    id: SessionId,
    State(ctx): State<ApiContext>,
    headers: HeaderMap,
    ApiJson(body): ApiJson<ReplyRequest>,
) -> ApiResult<Response> {
    send_with(&ctx, &caller, &id, &headers, "reply", body, draft::reply).await
}

/// POST /api/sessions/{sessionId}/messages/send-template
#[utoipa::path(post, path = "/api/sessions/{sessionId}/messages/send-template", tag = "messages",
    request_body = SendTemplateRequest, responses((status = 201, body = MessageResponse), (status = 400), (status = 404)))]
async fn send_template(
    caller: Caller,
    id: SessionId,
    State(ctx): State<ApiContext>,
    headers: HeaderMap,
    ApiJson(body): ApiJson<SendTemplateRequest>,
) -> ApiResult<Response> {
    authorise(&caller, &id, Role::Operator)?;
    let idem = match Idem::begin(&ctx, &id.0, &headers, "send-template", &body).await? {
        Idem::Replay(resp) => return Ok(resp),
        idem => idem,
    };
    let draft = ctx.messaging.template_draft(&id.0, body).await?;
    let sent = ctx.messaging.send(&id.0, draft).await?;
    idem.respond(&ctx, &id.0, StatusCode::CREATED, &response(sent))
        .await
}

/// POST /api/sessions/{sessionId}/messages/send-product
#[utoipa::path(post, path = "/api/sessions/{sessionId}/messages/send-product", tag = "messages",
    request_body = SendProductRequest, responses((status = 201, body = ProductSendResponse), (status = 400),
    (status = 404), (status = 501)))]
async fn send_product(
    caller: Caller,
    id: SessionId,
    State(ctx): State<ApiContext>,
    headers: HeaderMap,
    ApiJson(body): ApiJson<SendProductRequest>,
) -> ApiResult<Response> {
    authorise(&caller, &id, Role::Operator)?;
    let idem = match Idem::begin(&ctx, &id.0, &headers, "send-product", &body).await? {
        Idem::Replay(resp) => return Ok(resp),
        idem => idem,
    };
    let sent = ctx.messaging.send(&id.0, draft::product(body)?).await?;
    let body = ProductSendResponse {
        id: sent.id,
        timestamp: sent.timestamp,
    };
    idem.respond(&ctx, &id.0, StatusCode::CREATED, &body).await
}

/// POST /api/sessions/{sessionId}/messages/forward
#[utoipa::path(post, path = "/api/sessions/{sessionId}/messages/forward", tag = "messages",
    request_body = ForwardRequest, responses((status = 201, body = MessageResponse), (status = 400), (status = 404)))]
async fn forward(
    caller: Caller,
    id: SessionId,
    State(ctx): State<ApiContext>,
    headers: HeaderMap,
    ApiJson(body): ApiJson<ForwardRequest>,
) -> ApiResult<Response> {
    authorise(&caller, &id, Role::Operator)?;
    let idem = match Idem::begin(&ctx, &id.0, &headers, "forward", &body).await? {
        Idem::Replay(resp) => return Ok(resp),
        idem => idem,
    };
    let sent = ctx.messaging.forward(&id.0, body).await?;
    idem.respond(&ctx, &id.0, StatusCode::CREATED, &response(sent))
        .await
}
