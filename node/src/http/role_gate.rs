//! What a queue worker (`ROLE=worker`) answers over HTTP: the health routes and the metrics scrape as any
//! node, and 503 for every other `/api` route. It hosts no session and runs no engine, so whatever it
//! could answer would be wrong or half done. 503 rather than 404 or 421: a load balancer or proxy that
//! reached it by mistake reads 503 as "this backend cannot serve now" and retries elsewhere (or marks it
//! down), and a client sees a plain retriable refusal naming the fix.

use axum::response::{IntoResponse, Response};

use super::error::ApiError;
use crate::app::ApiContext;

/// The routes a worker serves like any node: probes and the scrape its Deployment is watched by.
const SERVED_BY_WORKERS: [&str; 4] = [
    "/api/health",
    "/api/health/live",
    "/api/health/ready",
    "/api/metrics",
];

const REFUSAL: &str =
    "This node runs ROLE=worker and serves no API; send API requests to an api node";

/// The 503 for an API request that reached a node hosting no sessions; `None` lets it through.
pub(crate) fn refuse_off_role(ctx: &ApiContext, path: &str) -> Option<Response> {
    if crate::cluster::hosts_sessions(&ctx.config) || !is_refused_on_worker(path) {
        return None;
    }
    Some(ApiError::unavailable(REFUSAL).into_response())
}

/// Every `/api` path but the health routes and the metrics scrape.
fn is_refused_on_worker(path: &str) -> bool {
    let is_api = path == "/api" || path.starts_with("/api/");
    is_api && !SERVED_BY_WORKERS.contains(&path)
}

#[cfg(test)]
mod tests {
    use super::is_refused_on_worker;

    #[test]
    fn a_worker_serves_probes_and_metrics_and_refuses_the_rest_of_the_api() {
        for served in [
            "/api/health",
            "/api/health/live",
            "/api/health/ready",
            "/api/metrics",
        ] {
            assert!(!is_refused_on_worker(served), "{served}");
        }
        for refused in [
            "/api",
            "/api/sessions",
            "/api/sessions/abc/messages",
            "/api/ws",
            "/api/docs",
            "/api/infra/status",
            "/api/healthz",
        ] {
            assert!(is_refused_on_worker(refused), "{refused}");
        }
        assert!(!is_refused_on_worker("/"), "not an API path: 404 as usual");
    }
}
