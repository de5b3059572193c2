//! `GET /api/metrics`: Prometheus text, gated by `Authorization: Bearer <METRICS_TOKEN>` rather than an API
//! key; 404 while no token is configured, 401 on a wrong one.

use axum::extract::State;
use axum::http::{HeaderMap, header};
use axum::response::{IntoResponse, Response};

use utoipa_axum::{router::OpenApiRouter, routes};

use super::error::ApiError;
use crate::app::ApiContext;

pub(crate) fn router() -> OpenApiRouter<ApiContext> {
    OpenApiRouter::new().routes(routes!(scrape))
}

/// GET /api/metrics
#[utoipa::path(get, path = "/api/metrics", tag = "metrics",
    responses((status = 200, description = "Prometheus text", content_type = "text/plain"), (status = 401), (status = 404)))]
async fn scrape(State(ctx): State<ApiContext>, headers: HeaderMap) -> Response {
    let (Some(token), Some(handle)) = (&ctx.config.metrics_token, &ctx.metrics) else {
        return ApiError::not_found("Cannot GET /api/metrics").into_response();
    };
    let bearer = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split_once(' '))
        .filter(|(scheme, _)| scheme.eq_ignore_ascii_case("bearer"))
        .map(|(_, t)| t.trim());
    if bearer != Some(token.as_str()) {
        return ApiError::unauthorized("Invalid metrics token").into_response();
    }
    (
        [(header::CONTENT_TYPE, "text/plain; version=0.0.4")],
        handle.render(),
    )
        .into_response()
}
