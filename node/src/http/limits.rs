//! Cross-cutting request limits, applied before routing and authentication: a `Content-Encoding` other than
//! identity (415), a declared body over `BODY_SIZE_LIMIT` (413), and the three rate-limit tiers keyed on the
//! client address (429 with `Retry-After` and code `RATE_LIMITED`). Health, docs and metrics are exempt
//! from rate limiting so probes and scrapes never see a 429.

use std::net::{IpAddr, SocketAddr};
use std::num::NonZeroU32;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::{ConnectInfo, Request, State};
use axum::http::request::Parts;
use axum::http::{Extensions, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use governor::clock::{Clock, DefaultClock};
use governor::{DefaultKeyedRateLimiter, Quota, RateLimiter};

use super::error::ApiError;
use crate::app::ApiContext;
use crate::config::RateTier;

/// The one place that decides a request's client address.
pub fn client_ip_from(extensions: &Extensions) -> Option<IpAddr> {
    extensions
        .get::<ConnectInfo<SocketAddr>>()
        .map(|ci| ci.0.ip())
}

pub fn client_ip(parts: &Parts) -> Option<IpAddr> {
    client_ip_from(&parts.extensions)
}

/// The global limit: every tier must admit a request. Limits are per node.
pub struct TieredLimiter {
    tiers: Vec<DefaultKeyedRateLimiter<IpAddr>>,
    clock: DefaultClock,
}

impl TieredLimiter {
    pub fn new(tiers: &[RateTier]) -> TieredLimiter {
        let tiers = tiers
            .iter()
            .filter_map(|t| quota(*t))
            .map(RateLimiter::keyed)
            .collect();
        TieredLimiter {
            tiers,
            clock: DefaultClock::default(),
        }
    }

    /// `Err(wait)` when any tier refuses.
    pub fn check(&self, ip: IpAddr) -> Result<(), Duration> {
        for tier in &self.tiers {
            if let Err(not_until) = tier.check_key(&ip) {
                return Err(not_until.wait_time_from(self.clock.now()));
            }
        }
        Ok(())
    }

    /// Forgets addresses that have been quiet, so the maps do not grow without bound.
    pub fn forget_idle(&self) {
        for tier in &self.tiers {
            tier.retain_recent();
            tier.shrink_to_fit();
        }
    }
}

fn quota(tier: RateTier) -> Option<Quota> {
    let burst = NonZeroU32::new(u32::try_from(tier.limit).unwrap_or(u32::MAX))?;
    let period = Duration::from_millis(tier.ttl_ms) / burst.get();
    Quota::with_period(period.max(Duration::from_nanos(1))).map(|q| q.allow_burst(burst))
}

fn is_exempt(path: &str) -> bool {
    path.starts_with("/api/health") || path == "/api/metrics" || path.starts_with("/api/docs")
}

/// 415 for encoded bodies and 413 for declared oversize bodies, before anything else looks at the request.
pub async fn refuse_unreadable_bodies(
    State(ctx): State<ApiContext>,
    req: Request,
    next: Next,
) -> Response {
    if let Some(encoding) = req.headers().get(header::CONTENT_ENCODING) {
        let identity = encoding
            .to_str()
            .map(|v| v.trim().eq_ignore_ascii_case("identity"))
            .unwrap_or(false);
        if !identity {
            return ApiError::new(
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                "Content-Encoding is not supported; send an identity-encoded body",
            )
            .into_response();
        }
    }
    let declared = req
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|len| len > ctx.config.body_size_limit) {
        return ApiError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            "Request body exceeds BODY_SIZE_LIMIT",
        )
        .into_response();
    }
    next.run(req).await
}

pub async fn rate_limit(State(ctx): State<ApiContext>, req: Request, next: Next) -> Response {
    if !is_exempt(req.uri().path())
        && let Some(ip) = client_ip_from(req.extensions())
        && let Err(wait) = ctx.limiter.check(ip)
    {
        let secs = wait.as_secs() + u64::from(wait.subsec_nanos() > 0);
        return ApiError::too_many_requests("Too Many Requests", secs.max(1))
            .with_code("RATE_LIMITED")
            .into_response();
    }
    next.run(req).await
}

/// Keeps the limiter's memory bounded; runs for the life of the node.
pub async fn run_limiter_upkeep(
    limiter: Arc<TieredLimiter>,
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_short_tier_refuses_the_eleventh_request_in_a_second() {
        let limiter = TieredLimiter::new(&[RateTier {
            ttl_ms: 1000,
            limit: 10,
        }]);
        let ip: IpAddr = [127, 0, 0, 1].into();
        for _ in 0..10 {
            assert!(limiter.check(ip).is_ok());
        }
        assert!(limiter.check(ip).is_err());
        assert!(
            limiter.check([127, 0, 0, 2].into()).is_ok(),
            "limits are per address"
        );
    }
}
