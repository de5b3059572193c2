//! Call routes: reject a ringing call, create a call link (`403` when the network refuses it).

use axum::Json;
use axum::extract::State;
use utoipa_axum::{router::OpenApiRouter, routes};
use wagate_proto::dto::calls::{CallLink, CallLinkRequest};
use wagate_proto::dto::common::SuccessResult;

use super::engine_call::bounded;
use super::error::{ApiError, ApiResult};
use super::extract::{ApiJson, ApiPath};
use super::session_scope::Scoped;
use crate::app::ApiContext;
use crate::engine::CallKind;

pub(crate) fn router() -> OpenApiRouter<ApiContext> {
    OpenApiRouter::new()
        .routes(routes!(reject_call))
        .routes(routes!(create_call_link))
}

/// POST /api/sessions/{sessionId}/calls/{callId}/reject
#[utoipa::path(post, path = "/api/sessions/{sessionId}/calls/{callId}/reject", tag = "calls",
    responses((status = 200, body = SuccessResult)))]
async fn reject_call(
    session: Scoped,
    State(ctx): State<ApiContext>,
    ApiPath(path): ApiPath<(String, String)>,
) -> ApiResult<Json<SuccessResult>> {
    let engine = session.engine().await?;
    bounded(&ctx, engine.reject_call(&path.1)).await?;
    Ok(Json(SuccessResult::ok()))
}

/// POST /api/sessions/{sessionId}/calls/link
#[utoipa::path(post, path = "/api/sessions/{sessionId}/calls/link", tag = "calls",
    request_body = CallLinkRequest, responses((status = 200, body = CallLink)))]
async fn create_call_link(
    session: Scoped,
    ApiJson(body): ApiJson<CallLinkRequest>,
) -> ApiResult<Json<CallLink>> {
    let kind = match body.kind.as_deref() {
        Some("audio") => CallKind::Audio,
        Some("video") => CallKind::Video,
        _ => return Err(ApiError::bad_request("type must be audio or video")),
    };
    let start_time = body
        .start_millis()
        .filter(|_| !stray_fraction(body.start_time.as_ref()))
        .ok_or_else(|| ApiError::bad_request("startTime must be epoch milliseconds"))?;
    let engine = session.engine().await?;
    // Unbounded on purpose: call-link create is among the routes that never answer 503.
    let link = engine
        .create_call_link(kind, start_time)
        .await
        .map_err(|e| ApiError::from(e).never_unavailable())?;
    Ok(Json(CallLink { link }))
}

/// Epoch milliseconds from a float clock (`time.time() * 1000`) carry a fraction, which is dropped; a
/// fraction on a value that small (`1.5`) is no clock reading in milliseconds and is refused, as a negative
/// one is. Below 10^11 milliseconds is before March 1973.
fn stray_fraction(raw: Option<&serde_json::Number>) -> bool {
    const MILLIS_FROM: f64 = 1.0e11;
    raw.filter(|n| !n.is_i64() && !n.is_u64())
        .and_then(serde_json::Number::as_f64)
        .is_some_and(|f| f.fract() != 0.0 && f < MILLIS_FROM)
}

#[cfg(test)]
mod tests {
    use super::stray_fraction;

    #[test]
    fn a_fraction_is_dropped_from_a_clock_reading_and_refused_on_a_tiny_value() {
        let n = |v: f64| serde_json::Number::from_f64(v);
        assert!(stray_fraction(n(1.5).as_ref()));
        assert!(!stray_fraction(n(1_700_000_000_000.5).as_ref()));
        assert!(!stray_fraction(Some(&serde_json::Number::from(1))));
        assert!(!stray_fraction(None));
    }
}
