//! Health routes, unauthenticated: `/api/health` (version only for a valid key), liveness, and readiness:
//! both databases and, in a cluster, Redis answer a bounded probe, the node is not draining, and (raft) its
//! replica of the main DB has caught up with the cluster since it (re)started.

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use utoipa_axum::{router::OpenApiRouter, routes};
use wagate_proto::dto::common::{ComponentState, Health, Readiness, ReadinessDetails};

use super::auth::Caller;
use crate::app::ApiContext;

pub(crate) fn router() -> OpenApiRouter<ApiContext> {
    OpenApiRouter::new()
        .routes(routes!(get_health))
        .routes(routes!(get_liveness))
        .routes(routes!(get_readiness))
}

fn now_iso() -> String {
    chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

/// GET /api/health
#[utoipa::path(get, path = "/api/health", tag = "health", responses((status = 200, body = Health)))]
async fn get_health(caller: Option<Caller>) -> Json<Health> {
    Json(Health {
        status: "ok".into(),
        timestamp: now_iso(),
        version: caller.map(|_| wagate_proto::VERSION.to_string()),
    })
}

/// GET /api/health/live
#[utoipa::path(get, path = "/api/health/live", tag = "health", responses((status = 200, body = Health)))]
async fn get_liveness() -> Json<Health> {
    Json(Health {
        status: "ok".into(),
        timestamp: now_iso(),
        version: None,
    })
}

fn state(up: bool) -> ComponentState {
    ComponentState {
        status: if up { "up" } else { "down" }.into(),
    }
}

/// Probes what readiness depends on (at most the probes' timeout), and sets `wagate_ready`. A raft replica
/// that has not caught up since it (re)started would authenticate from stale keys: its main database is
/// reported down until it has, unless it finds no leader at all (`KeyService::is_ready`); no wait here,
/// the catch-up runs in the background.
pub(crate) async fn readiness(ctx: &ApiContext) -> (bool, Readiness) {
    let (probe, keys_ready) = tokio::join!(ctx.infra.probe(), ctx.keys.is_ready());
    let main_up = probe.main_up && keys_ready;
    let ok = probe.ready() && keys_ready;
    metrics::gauge!(wagate_workers::telemetry::metrics::READY).set(if ok { 1.0 } else { 0.0 });
    let body = Readiness {
        status: if ok { "ok" } else { "error" }.into(),
        details: ReadinessDetails {
            main_database: state(main_up),
            data_database: state(probe.data_up),
            redis: probe.redis_up.map(state),
        },
        draining: probe.draining,
    };
    (ok, body)
}

/// GET /api/health/ready
#[utoipa::path(get, path = "/api/health/ready", tag = "health",
    responses((status = 200, body = Readiness), (status = 503, body = Readiness)))]
async fn get_readiness(State(ctx): State<ApiContext>) -> (StatusCode, Json<Readiness>) {
    let (ok, body) = readiness(&ctx).await;
    (
        if ok {
            StatusCode::OK
        } else {
            StatusCode::SERVICE_UNAVAILABLE
        },
        Json(body),
    )
}
