//! Cross-cutting request limits, applied before routing and authentication: a `Content-Encoding` other than
//! identity (415), a declared body over `BODY_SIZE_LIMIT` (413), and the three rate-limit tiers keyed on the
//! client address that `client_addr.rs` decided (429 with `Retry-After` and code `RATE_LIMITED`; admitted
//! requests carry `RateLimit-Limit` / `-Remaining` / `-Reset` for the tightest tier). Health, docs and
//! metrics are exempt so probes and scrapes never see a 429. A request a cluster peer forwarded (proven by
//! `CLUSTER_SECRET`) was counted where it arrived and is not counted again. The rule is in `limits/window.rs`;
//! the cluster-wide Redis limiter in `limits/shared.rs`.

mod shared;
mod window;

use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::Request;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};

pub use shared::SharedWindows;
pub use window::{Decision, LocalWindows, Quota};

use super::client_addr::{PeerForwarded, client_ip_from};
use super::error::ApiError;
use crate::app::ApiContext;
use crate::config::RateTier;

/// The metric label of each tier, by position (`RATE_LIMIT_SHORT_*`, `_MEDIUM_*`, `_LONG_*`).
const TIER_LABELS: [&str; 3] = ["second", "minute", "hour"];

/// The global limit: in-process in the embedded mode, in Redis for a cluster.
pub enum Limiter {
    Local(LocalWindows),
    Shared(SharedWindows),
}

impl Limiter {
    pub fn local(tiers: &[RateTier]) -> Limiter {
        Limiter::Local(LocalWindows::new(tiers))
    }

    pub async fn check(&self, ip: IpAddr) -> Decision {
        match self {
            Limiter::Local(local) => local.check(ip),
            Limiter::Shared(shared) => shared.check(ip).await,
        }
    }

    /// Forgets addresses that have been quiet, so the in-process maps do not grow without bound.
    pub fn forget_idle(&self) {
        match self {
            Limiter::Local(local) => local.forget_idle(),
            Limiter::Shared(shared) => shared.forget_idle(),
        }
    }
}

fn is_exempt(path: &str) -> bool {
    path.starts_with("/api/health") || path == "/api/metrics" || path.starts_with("/api/docs")
}

/// 415 for encoded bodies and 413 for declared oversize bodies, before anything else looks at the request.
pub fn refuse_unreadable_bodies(ctx: &ApiContext, req: &Request) -> Option<Response> {
    // Every line counts: a second `Content-Encoding` line would otherwise slip an encoding past the first.
    for encoding in req.headers().get_all(header::CONTENT_ENCODING) {
        let identity = encoding
            .to_str()
            .map(|v| v.trim().eq_ignore_ascii_case("identity"))
            .unwrap_or(false);
        if !identity {
            return Some(
                ApiError::new(
                    StatusCode::UNSUPPORTED_MEDIA_TYPE,
                    "Content-Encoding is not supported; send an identity-encoded body",
                )
                .into_response(),
            );
        }
    }
    let declared = req
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|len| len > ctx.config.body_size_limit) {
        return Some(
            ApiError::new(
                StatusCode::PAYLOAD_TOO_LARGE,
                "Request body exceeds BODY_SIZE_LIMIT",
            )
            .into_response(),
        );
    }
    None
}

pub async fn rate_limit(
    ctx: &ApiContext,
    req: Request,
    next: impl AsyncFnOnce(Request) -> Response,
) -> Response {
    if is_exempt(req.uri().path()) || req.extensions().get::<PeerForwarded>().is_some() {
        return next(req).await;
    }
    let Some(ip) = client_ip_from(req.extensions()) else {
        return next(req).await;
    };
    match ctx.limiter.check(ip).await {
        Decision::Admitted(quota) => {
            let mut response = next(req).await;
            set_quota_headers(response.headers_mut(), quota);
            response
        }
        Decision::Refused {
            tier,
            limit,
            retry_after_secs,
        } => {
            let label = TIER_LABELS.get(tier).copied().unwrap_or("second");
            metrics::counter!("wagate_rate_limited_total", "tier" => label).increment(1);
            let mut response = ApiError::too_many_requests("Too Many Requests", retry_after_secs)
                .with_code("RATE_LIMITED")
                .into_response();
            let quota = Quota {
                limit,
                remaining: 0,
                reset_secs: retry_after_secs,
            };
            set_quota_headers(response.headers_mut(), quota);
            response
        }
    }
}

fn set_quota_headers(headers: &mut HeaderMap, quota: Quota) {
    for (name, value) in [
        ("ratelimit-limit", quota.limit),
        ("ratelimit-remaining", quota.remaining),
        ("ratelimit-reset", quota.reset_secs),
    ] {
        headers.insert(name, HeaderValue::from(value));
    }
}

/// Keeps the limiter's memory bounded; runs for the life of the node.
pub async fn run_limiter_upkeep(
    limiter: Arc<Limiter>,
    shutdown: tokio_util::sync::CancellationToken,
) {
    let mut tick = tokio::time::interval(Duration::from_secs(60));
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = tick.tick() => limiter.forget_idle(),
        }
    }
}
