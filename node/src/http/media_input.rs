//! Media given to a picture or status route as `{url|base64, mimetype?}`: base64 is decoded here, a URL is
//! checked against the outbound-address guard and fetched with the size cap. Both count against
//! `MEDIA_DOWNLOAD_MAX_BYTES` (413 above it). Returns the engine's `MediaSource`; sends nothing.

use axum::http::StatusCode;
use base64::Engine as _;
use wagate_proto::dto::status::MediaInput;

use super::error::{ApiError, ApiResult};
use crate::app::ApiContext;
use crate::engine::MediaSource;

/// The bytes and mimetype of `input`; `default_mimetype` when none was given or served.
pub(crate) async fn load_media(
    ctx: &ApiContext,
    input: &MediaInput,
    default_mimetype: &str,
) -> ApiResult<(MediaSource, String)> {
    let cap = usize::try_from(ctx.config.media_download_max_bytes).unwrap_or(usize::MAX);
    let given = input.mimetype.clone().filter(|m| !m.trim().is_empty());
    let (bytes, served) = match (&input.base64, &input.url) {
        (Some(b64), _) if !b64.is_empty() => (decode_base64(b64)?, None),
        (_, Some(url)) if !url.is_empty() => fetch(url, cap).await?,
        _ => return Err(ApiError::bad_request("media needs url or base64")),
    };
    if bytes.len() > cap {
        return Err(too_large());
    }
    let mimetype = given
        .or(served)
        .unwrap_or_else(|| default_mimetype.to_string());
    Ok((MediaSource::Bytes(bytes), mimetype))
}

/// Accepts a bare base64 string or a `data:<mime>;base64,` URL.
fn decode_base64(raw: &str) -> ApiResult<Vec<u8>> {
    let data = raw.split_once("base64,").map_or(raw, |(_, rest)| rest);
    base64::engine::general_purpose::STANDARD
        .decode(data.trim())
        .map_err(|_| ApiError::bad_request("base64 is not valid base64"))
}

fn too_large() -> ApiError {
    ApiError::new(
        StatusCode::PAYLOAD_TOO_LARGE,
        "Media exceeds MEDIA_DOWNLOAD_MAX_BYTES",
    )
}

async fn fetch(url: &str, cap: usize) -> ApiResult<(Vec<u8>, Option<String>)> {
    wagate_workers::webhook::guard::resolve_check(url, true)
        .await
        .map_err(|e| ApiError::bad_request(format!("url: {e}")))?;
    let unreachable =
        |e: reqwest::Error| ApiError::bad_request(format!("url could not be fetched: {e}"));
    let mut response = reqwest::get(url).await.map_err(unreachable)?;
    if !response.status().is_success() {
        return Err(ApiError::bad_request(format!(
            "url answered {}",
            response.status()
        )));
    }
    let served = response
        .headers()
        .get(reqwest::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    let mut bytes = Vec::new();
    while let Some(chunk) = response.chunk().await.map_err(unreachable)? {
        bytes.extend_from_slice(&chunk);
        if bytes.len() > cap {
            return Err(too_large());
        }
    }
    Ok((bytes, served))
}
