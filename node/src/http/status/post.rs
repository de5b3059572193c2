//! The four status posts (text, image, video, voice): body validation (recipients up to 256 JIDs, required
//! non-empty where the engine's capabilities say so, ignored otherwise; fonts), the engine post (never
//! bounded: status posts are among the routes that never answer 503), then the own post is persisted.

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use utoipa_axum::{router::OpenApiRouter, routes};
use wagate_proto::dto::status::{
    MediaInput, SendMediaStatusRequest, SendTextStatusRequest, StatusResult,
};
use wagate_proto::{Jid, iso_ms};

use crate::app::ApiContext;
use crate::engine::{MessageType, StatusContent, StatusPost, StatusUpdate};
use crate::http::engine_call::jid;
use crate::http::error::{ApiError, ApiResult};
use crate::http::extract::ApiJson;
use crate::http::media_input::load_stored_media;
use crate::http::session_scope::Scoped;
use crate::media::StoredMedia;
use crate::messaging::validate;
use crate::messaging::{ResourceMedia, check_media_body};
use crate::store::status_updates;

const MAX_RECIPIENTS: usize = 256;
const FONTS: [u8; 8] = [0, 1, 2, 6, 7, 8, 9, 10];

pub(super) fn router() -> OpenApiRouter<ApiContext> {
    OpenApiRouter::new()
        .routes(routes!(send_text_status))
        .routes(routes!(send_image_status))
        .routes(routes!(send_video_status))
        .routes(routes!(send_voice_status))
}

/// The audience: required non-empty when the engine needs it, ignored when it broadcasts anyway.
fn recipients(ctx: &ApiContext, raw: Option<&[String]>) -> ApiResult<Vec<Jid>> {
    if !ctx.sessions.capabilities().status_recipients_required {
        return Ok(Vec::new());
    }
    let raw = raw.unwrap_or_default();
    if raw.is_empty() {
        return Err(ApiError::bad_request(
            "recipients must be a non-empty array of JIDs",
        ));
    }
    if raw.len() > MAX_RECIPIENTS {
        return Err(ApiError::bad_request(format!(
            "recipients: at most {MAX_RECIPIENTS} JIDs"
        )));
    }
    raw.iter()
        .map(|r| {
            let id = jid("recipients", r)?;
            match id.server() {
                "c.us" | "lid" => Ok(id),
                _ => Err(ApiError::bad_request(format!(
                    "recipients: {r} is not a contact JID"
                ))),
            }
        })
        .collect()
}

fn accepted(update: &StatusUpdate) -> (StatusCode, Json<StatusResult>) {
    let result = StatusResult {
        status_id: update.status_id.clone(),
        timestamp: iso_ms(update.posted_at.saturating_mul(1000)),
        expires_at: iso_ms(update.expires_at.saturating_mul(1000)),
    };
    (StatusCode::CREATED, Json(result))
}

/// Posts and persists; `media` is what to keep for `GET /status/{id}/media`.
async fn publish(
    ctx: &ApiContext,
    session: &str,
    post: StatusPost,
    media: Option<(&str, &StoredMedia)>,
) -> ApiResult<(StatusCode, Json<StatusResult>)> {
    let update = ctx.messaging.post_status(session, post, media).await?;
    Ok(accepted(&update))
}

/// POST /api/sessions/{sessionId}/status/send-text
#[utoipa::path(post, path = "/api/sessions/{sessionId}/status/send-text", tag = "status",
    request_body = SendTextStatusRequest, responses((status = 201, body = StatusResult)))]
async fn send_text_status(
    session: Scoped,
    State(ctx): State<ApiContext>,
    ApiJson(body): ApiJson<SendTextStatusRequest>,
) -> ApiResult<(StatusCode, Json<StatusResult>)> {
    if body.text.trim().is_empty() {
        return Err(ApiError::bad_request("text must not be empty"));
    }
    validate::max_chars("text", &body.text, validate::TEXT_MAX)?;
    if body.font.is_some_and(|f| !FONTS.contains(&f)) {
        return Err(ApiError::bad_request(
            "font must be one of 0, 1, 2, 6, 7, 8, 9, 10",
        ));
    }
    let audience = recipients(&ctx, body.recipients.as_deref())?;
    session.sending_engine().await?;
    let style = (body.background_color.clone(), body.font);
    let content = StatusContent::Text {
        text: body.text,
        background_color: body.background_color,
        font: body.font,
    };
    let post = StatusPost {
        content,
        recipients: audience,
    };
    let (code, result) = publish(&ctx, session.id(), post, None)
        .await
        .map_err(ApiError::never_unavailable)?;
    keep_style(&ctx, session.id(), &result.status_id, style).await;
    Ok((code, result))
}

/// Stores the style a text status was posted with, for `GET /status`. The post has already reached the
/// network, so a failure here is logged and the post still answers 201 (as its row's own persistence).
async fn keep_style(
    ctx: &ApiContext,
    session: &str,
    status_id: &str,
    (background_color, font): (Option<String>, Option<u8>),
) {
    if background_color.is_none() && font.is_none() {
        return;
    }
    let db = ctx.infra.data_db();
    let font = font.map(i64::from);
    let kept =
        status_updates::set_text_style(db, session, status_id, background_color.as_deref(), font);
    if let Err(err) = kept.await {
        tracing::warn!(session_id = session, status_id, error = %err, "text status style not persisted");
    }
}

async fn send_media(
    ctx: ApiContext,
    session: Scoped,
    body: SendMediaStatusRequest,
    kind: MessageType,
) -> ApiResult<(StatusCode, Json<StatusResult>)> {
    let (nested, default_mimetype) = match kind {
        MessageType::Image => (body.image.clone(), "image/jpeg"),
        MessageType::Video => (body.video.clone(), "video/mp4"),
        _ => (body.audio.clone(), "audio/ogg; codecs=opus"),
    };
    let flat = [&body.url, &body.base64]
        .into_iter()
        .any(|v| v.as_deref().is_some_and(|v| !v.trim().is_empty()));
    if nested.is_some() && flat {
        return Err(ApiError::bad_request(
            "exactly one media source: nested (image, video or audio) or flat url/base64, not both",
        ));
    }
    let input = nested.unwrap_or(MediaInput {
        url: body.url.clone(),
        base64: body.base64.clone(),
        mimetype: body.mimetype.clone(),
    });
    let input = check_media_body(input, kind)?;
    if let Some(caption) = &body.caption {
        validate::max_chars("caption", caption, validate::CAPTION_MAX)?;
    }
    let audience = recipients(&ctx, body.recipients.as_deref())?;
    session.sending_engine().await?;
    let ResourceMedia {
        source,
        mimetype,
        stored,
    } = load_stored_media(&ctx, session.id(), &input, default_mimetype).await?;
    let content = StatusContent::Media {
        kind,
        source,
        mimetype: mimetype.clone(),
        caption: body.caption.filter(|c| !c.is_empty()),
    };
    let post = StatusPost {
        content,
        recipients: audience,
    };
    publish(&ctx, session.id(), post, Some((&mimetype, &stored))).await
}

/// POST /api/sessions/{sessionId}/status/send-image
#[utoipa::path(post, path = "/api/sessions/{sessionId}/status/send-image", tag = "status",
    request_body = SendMediaStatusRequest, responses((status = 201, body = StatusResult)))]
async fn send_image_status(
    session: Scoped,
    State(ctx): State<ApiContext>,
    ApiJson(body): ApiJson<SendMediaStatusRequest>,
) -> ApiResult<(StatusCode, Json<StatusResult>)> {
    send_media(ctx, session, body, MessageType::Image)
        .await
        .map_err(ApiError::never_unavailable)
}

/// POST /api/sessions/{sessionId}/status/send-video
#[utoipa::path(post, path = "/api/sessions/{sessionId}/status/send-video", tag = "status",
    request_body = SendMediaStatusRequest, responses((status = 201, body = StatusResult)))]
async fn send_video_status(
    session: Scoped,
    State(ctx): State<ApiContext>,
    ApiJson(body): ApiJson<SendMediaStatusRequest>,
) -> ApiResult<(StatusCode, Json<StatusResult>)> {
    send_media(ctx, session, body, MessageType::Video)
        .await
        .map_err(ApiError::never_unavailable)
}

/// POST /api/sessions/{sessionId}/status/send-voice
#[utoipa::path(post, path = "/api/sessions/{sessionId}/status/send-voice", tag = "status",
    request_body = SendMediaStatusRequest, responses((status = 201, body = StatusResult)))]
async fn send_voice_status(
    session: Scoped,
    State(ctx): State<ApiContext>,
    ApiJson(body): ApiJson<SendMediaStatusRequest>,
) -> ApiResult<(StatusCode, Json<StatusResult>)> {
    send_media(ctx, session, body, MessageType::Voice)
        .await
        .map_err(ApiError::never_unavailable)
}
