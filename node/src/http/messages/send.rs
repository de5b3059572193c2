//! Send routes (201 + MessageResponse): text, the five media types, location, contact, poll, template,
//! product (`{id, timestamp}`), reply and forward. Handlers parse, authorise, build a draft and call
//! `MessagingService::send`; every one honours `Idempotency-Key`.

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use serde::Serialize;
use utoipa_axum::{router::OpenApiRouter, routes};
use wagate_proto::dto::common::MessageResponse;
use wagate_proto::dto::messages::{
    ForwardRequest, ProductSendResponse, ReplyRequest, SendContactRequest, SendLocationRequest,
    SendMediaRequest, SendPollRequest, SendProductRequest, SendTemplateRequest, SendTextRequest,
};

use super::idem::Idem;
use crate::app::ApiContext;
use crate::engine::{MediaKind, SentMessage};
use crate::http::error::{ApiError, ApiResult};
use crate::http::extract::ApiJson;
use crate::http::session_scope::Scoped;
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
    session: &Scoped,
    headers: &HeaderMap,
    route: &str,
    body: T,
    build: impl FnOnce(T) -> MessagingResult<Draft>,
) -> ApiResult<Response> {
    let idem = match Idem::begin(ctx, session.id(), headers, route, &body).await? {
        Idem::Replay(resp) => return Ok(resp),
        idem => idem,
    };
    let sent = ctx.messaging.send(session.id(), build(body)?).await?;
    idem.respond(ctx, session.id(), StatusCode::CREATED, &response(sent))
        .await
}

/// POST /api/sessions/{sessionId}/messages/send-text
#[utoipa::path(post, path = "/api/sessions/{sessionId}/messages/send-text", tag = "messages",
    request_body = SendTextRequest, responses((status = 201, body = MessageResponse), (status = 400),
    (status = 404), (status = 409), (status = 429)))]
async fn send_text(
    session: Scoped,
    State(ctx): State<ApiContext>,
    headers: HeaderMap,
    ApiJson(body): ApiJson<SendTextRequest>,
) -> ApiResult<Response> {
    send_with(&ctx, &session, &headers, "send-text", body, draft::text).await
}

macro_rules! media_route {
    ($name:ident, $path:literal, $route:literal, $kind:expr) => {
        #[doc = concat!("POST ", $path)]
        #[utoipa::path(post, path = $path, tag = "messages", request_body = SendMediaRequest,
            responses((status = 201, body = MessageResponse), (status = 400), (status = 404),
            (status = 409), (status = 413), (status = 429)))]
        async fn $name(session: Scoped, State(ctx): State<ApiContext>, headers: HeaderMap,
            ApiJson(body): ApiJson<SendMediaRequest>) -> ApiResult<Response> {
            // The media send path never answers 503 (the spec): it may already have reached the network.
            send_with(&ctx, &session, &headers, $route, body, |b| draft::media($kind, b))
                .await
                .map_err(ApiError::never_unavailable)
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
    session: Scoped,
    State(ctx): State<ApiContext>,
    headers: HeaderMap,
    ApiJson(body): ApiJson<SendLocationRequest>,
) -> ApiResult<Response> {
    send_with(
        &ctx,
        &session,
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
    session: Scoped,
    State(ctx): State<ApiContext>,
    headers: HeaderMap,
    ApiJson(body): ApiJson<SendContactRequest>,
) -> ApiResult<Response> {
    send_with(
        &ctx,
        &session,
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
    session: Scoped,
    State(ctx): State<ApiContext>,
    headers: HeaderMap,
    ApiJson(body): ApiJson<SendPollRequest>,
) -> ApiResult<Response> {
    send_with(&ctx, &session, &headers, "send-poll", body, draft::poll).await
}

/// POST /api/sessions/{sessionId}/messages/reply
#[utoipa::path(post, path = "/api/sessions/{sessionId}/messages/reply", tag = "messages",
    request_body = ReplyRequest, responses((status = 201, body = MessageResponse), (status = 400), (status = 404)))]
async fn reply(
    session: Scoped,
    State(ctx): State<ApiContext>,
    headers: HeaderMap,
    ApiJson(body): ApiJson<ReplyRequest>,
) -> ApiResult<Response> {
    send_with(&ctx, &session, &headers, "reply", body, draft::reply).await
}

/// POST /api/sessions/{sessionId}/messages/send-template
#[utoipa::path(post, path = "/api/sessions/{sessionId}/messages/send-template", tag = "messages",
    request_body = SendTemplateRequest, responses((status = 201, body = MessageResponse), (status = 400), (status = 404)))]
async fn send_template(
    session: Scoped,
    State(ctx): State<ApiContext>,
    headers: HeaderMap,
    ApiJson(body): ApiJson<SendTemplateRequest>,
) -> ApiResult<Response> {
    let idem = match Idem::begin(&ctx, session.id(), &headers, "send-template", &body).await? {
        Idem::Replay(resp) => return Ok(resp),
        idem => idem,
    };
    let draft = ctx.messaging.template_draft(session.id(), body).await?;
    let sent = ctx.messaging.send(session.id(), draft).await?;
    idem.respond(&ctx, session.id(), StatusCode::CREATED, &response(sent))
        .await
}

/// POST /api/sessions/{sessionId}/messages/send-product
#[utoipa::path(post, path = "/api/sessions/{sessionId}/messages/send-product", tag = "messages",
    request_body = SendProductRequest, responses((status = 201, body = ProductSendResponse), (status = 400),
    (status = 404), (status = 501)))]
async fn send_product(
    session: Scoped,
    State(ctx): State<ApiContext>,
    headers: HeaderMap,
    ApiJson(body): ApiJson<SendProductRequest>,
) -> ApiResult<Response> {
    let idem = match Idem::begin(&ctx, session.id(), &headers, "send-product", &body).await? {
        Idem::Replay(resp) => return Ok(resp),
        idem => idem,
    };
    let sent = ctx
        .messaging
        .send(session.id(), draft::product(body)?)
        .await?;
    let body = ProductSendResponse {
        id: sent.id,
        timestamp: sent.timestamp,
    };
    idem.respond(&ctx, session.id(), StatusCode::CREATED, &body)
        .await
}

/// POST /api/sessions/{sessionId}/messages/forward
#[utoipa::path(post, path = "/api/sessions/{sessionId}/messages/forward", tag = "messages",
    request_body = ForwardRequest, responses((status = 201, body = MessageResponse), (status = 400), (status = 404)))]
async fn forward(
    session: Scoped,
    State(ctx): State<ApiContext>,
    headers: HeaderMap,
    ApiJson(body): ApiJson<ForwardRequest>,
) -> ApiResult<Response> {
    let idem = match Idem::begin(&ctx, session.id(), &headers, "forward", &body).await? {
        Idem::Replay(resp) => return Ok(resp),
        idem => idem,
    };
    let sent = ctx.messaging.forward(session.id(), body).await?;
    idem.respond(&ctx, session.id(), StatusCode::CREATED, &response(sent))
        .await
}
