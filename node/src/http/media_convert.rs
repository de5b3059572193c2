//! Media conversion routes: `GET /api/sessions/{sessionId}/media/convert` (is conversion enabled and the
//! binary runnable) and `POST .../media/convert/voice|video` (`{url}` or `{base64}` in, `{base64, mimetype,
//! bytes}` out). The input is taken in through the media store (outbound-address guard, the session's
//! proxy, `MEDIA_DOWNLOAD_MAX_BYTES`); any refusal of the input is a 400, as the spec lists it.

use axum::Json;
use axum::extract::State;
use base64::Engine as _;
use utoipa_axum::{router::OpenApiRouter, routes};
use wagate_proto::dto::admin::{ConversionAvailability, ConvertRequest, ConvertedMedia};

use super::error::{ApiError, ApiResult};
use super::extract::ApiJson;
use super::session_scope::Scoped;
use crate::app::ApiContext;
use crate::media::MediaError;
use crate::media::convert::Target;

pub(crate) fn router() -> OpenApiRouter<ApiContext> {
    OpenApiRouter::new()
        .routes(routes!(conversion_availability))
        .routes(routes!(convert_voice))
        .routes(routes!(convert_video))
}

/// GET /api/sessions/{sessionId}/media/convert
#[utoipa::path(get, path = "/api/sessions/{sessionId}/media/convert", tag = "media",
    params(("sessionId" = String, Path)),
    responses((status = 200, body = ConversionAvailability)))]
async fn conversion_availability(
    session: Scoped,
    State(ctx): State<ApiContext>,
) -> ApiResult<Json<ConversionAvailability>> {
    session.record().await?;
    Ok(Json(ConversionAvailability {
        available: ctx.converter.check().await.is_ok(),
    }))
}

/// POST /api/sessions/{sessionId}/media/convert/voice
///
/// An OGG/Opus voice note (mono, 48 kHz) that phones play as a voice message.
#[utoipa::path(post, path = "/api/sessions/{sessionId}/media/convert/voice", tag = "media",
    params(("sessionId" = String, Path)), request_body = ConvertRequest,
    responses((status = 200, body = ConvertedMedia), (status = 400), (status = 413), (status = 503)))]
async fn convert_voice(
    session: Scoped,
    State(ctx): State<ApiContext>,
    ApiJson(body): ApiJson<ConvertRequest>,
) -> ApiResult<Json<ConvertedMedia>> {
    convert(&ctx, &session, body, Target::Voice).await
}

/// POST /api/sessions/{sessionId}/media/convert/video
///
/// An MP4 (H.264 baseline + AAC, faststart) that phones play inline.
#[utoipa::path(post, path = "/api/sessions/{sessionId}/media/convert/video", tag = "media",
    params(("sessionId" = String, Path)), request_body = ConvertRequest,
    responses((status = 200, body = ConvertedMedia), (status = 400), (status = 413), (status = 503)))]
async fn convert_video(
    session: Scoped,
    State(ctx): State<ApiContext>,
    ApiJson(body): ApiJson<ConvertRequest>,
) -> ApiResult<Json<ConvertedMedia>> {
    convert(&ctx, &session, body, Target::Video).await
}

async fn convert(
    ctx: &ApiContext,
    session: &Scoped,
    body: ConvertRequest,
    target: Target,
) -> ApiResult<Json<ConvertedMedia>> {
    session.record().await?;
    let id = session.id();
    let input = checked_input(body)?;
    // Refuse before any download when conversion cannot run.
    ctx.converter.check().await?;
    let stored = match input {
        Input::Url(url) => {
            let proxy = ctx.sessions.record(id).await?.proxy_url;
            ctx.media.put_url(id, &url, proxy.as_deref()).await
        }
        Input::Base64(data) => ctx.media.put_base64(id, &data).await,
    }
    .map_err(input_error)?;
    let (bytes, mimetype) = ctx
        .converter
        .convert_to_bytes(&ctx.media, &stored.key, target)
        .await?;
    Ok(Json(ConvertedMedia {
        base64: base64::engine::general_purpose::STANDARD.encode(&bytes),
        mimetype: mimetype.to_string(),
        bytes: bytes.len() as u64,
    }))
}

enum Input {
    Url(String),
    Base64(String),
}

/// The input's shape, checked before conversion's availability: a malformed request is the client's
/// 400 whether or not conversion could run now.
fn checked_input(body: ConvertRequest) -> ApiResult<Input> {
    let url = body.url.filter(|u| !u.trim().is_empty());
    let base64 = body.base64.filter(|b| !b.trim().is_empty());
    match (url, base64) {
        (Some(url), None) => {
            let parsed = reqwest::Url::parse(url.trim());
            let web = parsed.is_ok_and(|u| matches!(u.scheme(), "http" | "https") && u.has_host());
            if !web {
                return Err(ApiError::bad_request("url is not a valid http(s) URL"));
            }
            Ok(Input::Url(url))
        }
        (None, Some(data)) => {
            crate::media::check_base64(&data).map_err(input_error)?;
            Ok(Input::Base64(data))
        }
        _ => Err(ApiError::bad_request(
            "exactly one of url or base64 is required",
        )),
    }
}

/// A conversion input that could not be taken in: blocked, unreachable, oversized or bad is a 400.
fn input_error(err: MediaError) -> ApiError {
    match err {
        MediaError::Io(cause) => ApiError::internal(cause),
        MediaError::Unavailable(_) => err.into(),
        other => ApiError::bad_request(other.to_string()),
    }
}
