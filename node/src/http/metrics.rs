//! `GET /api/metrics`: Prometheus text, gated by `Authorization: Bearer <METRICS_TOKEN>` rather than an API
//! key (404 while no token is configured, 401 on a wrong one; compared in constant time). Gauges that are
//! states rather than events (sessions, leases, readiness, outbox and queue depth) are sampled here, at scrape
//! time, so nothing polls between scrapes.

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use utoipa_axum::{router::OpenApiRouter, routes};
use wagate_proto::SessionStatus;
use wagate_workers::telemetry::metrics::{LEASES_HELD, SESSIONS};
use wagate_workers::telemetry::scrape::{self, Gate};

use super::error::ApiError;
use crate::app::ApiContext;

pub(crate) fn router() -> OpenApiRouter<ApiContext> {
    OpenApiRouter::new().routes(routes!(scrape))
}

/// GET /api/metrics
#[utoipa::path(get, path = "/api/metrics", tag = "metrics",
    responses((status = 200, description = "Prometheus text", content_type = "text/plain"), (status = 401), (status = 404)))]
async fn scrape(State(ctx): State<ApiContext>, headers: HeaderMap) -> Response {
    let Some(recorder) = &ctx.metrics else {
        return ApiError::not_found("Cannot GET /api/metrics").into_response();
    };
    match scrape::check(ctx.config.metrics_token.as_deref(), &headers) {
        Gate::NoToken => ApiError::not_found("Cannot GET /api/metrics").into_response(),
        Gate::Refused => scrape::error_body(StatusCode::UNAUTHORIZED, "Invalid metrics token"),
        Gate::Open => {
            sample_gauges(&ctx).await;
            scrape::text_response(recorder.render())
        }
    }
}

async fn sample_gauges(ctx: &ApiContext) {
    let (_, (), ()) = tokio::join!(
        super::health::readiness(ctx),
        ctx.infra.sample_depth_gauges(),
        sample_sessions(ctx)
    );
    metrics::gauge!(LEASES_HELD).set(ctx.infra.leases_held() as f64);
}

/// `wagate_sessions{status,engine}`: embedded, every stored session; in a cluster, the sessions loaded on
/// this node (the data DB is shared, and every node reporting all of them would count each one N times).
async fn sample_sessions(ctx: &ApiContext) {
    let engine = ctx.sessions.engine_kind().as_str();
    let counts: Vec<(String, i64)> = if ctx.infra.is_clustered() {
        let mut by_status: Vec<(String, i64)> = Vec::new();
        for status in ctx.sessions.loaded_statuses() {
            let name = status.as_str();
            match by_status.iter_mut().find(|(s, _)| s == name) {
                Some((_, n)) => *n += 1,
                None => by_status.push((name.to_owned(), 1)),
            }
        }
        by_status
    } else {
        match ctx.sessions.count_by_status().await {
            Ok(counts) => counts,
            Err(err) => {
                tracing::debug!(error = %err, "session counts not sampled");
                return;
            }
        }
    };
    for status in SessionStatus::ALL {
        let name = status.as_str();
        let n = counts
            .iter()
            .find(|(s, _)| s == name)
            .map_or(0, |(_, n)| *n);
        metrics::gauge!(SESSIONS, "status" => name, "engine" => engine).set(n as f64);
    }
}
