//! Every API request's own steps, in order, as one middleware: keep-alive draining, the client's address,
//! observation (span, metrics, access log), the panic guard, a queue worker's refusal (`role_gate.rs`),
//! 415/413, the rate limit, forwarding to the session's owner, and holding the response until its audit
//! rows are on disk. One layer rather than one
//! per step: axum clones a route's whole layer stack for each request, and each `from_fn` layer clones and
//! boxes what is below it again: seven stacked layers cost 25-40% of a session read's throughput in
//! reference counts and allocations alone (see docs "Measured", session 19).

use std::panic::AssertUnwindSafe;

use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use futures::FutureExt;

use super::error::ApiError;
use super::{client_addr, forward, keep_alive, limits, observe, role_gate};
use crate::app::ApiContext;

pub(crate) async fn edge(State(ctx): State<ApiContext>, req: Request, next: Next) -> Response {
    let ctx = &ctx;
    keep_alive::drain_unread_bodies(req, async |mut req| {
        client_addr::identify_client(ctx, &mut req);
        observe::observe(ctx, req, async |req| {
            AssertUnwindSafe(admitted(ctx, req, next))
                .catch_unwind()
                .await
                .unwrap_or_else(|_| ApiError::internal("handler panicked").into_response())
        })
        .await
    })
    .await
}

/// What runs under the panic guard. Every answer to a session-scoped path names the node that served it,
/// refusals included.
async fn admitted(ctx: &ApiContext, req: Request, next: Next) -> Response {
    let session_scoped = forward::is_session_scoped(req.uri().path());
    let mut response = checked(ctx, req, next).await;
    if session_scoped {
        forward::stamp_served_by(ctx, &mut response);
    }
    response
}

/// The checks that can refuse a request, then its handler.
async fn checked(ctx: &ApiContext, req: Request, next: Next) -> Response {
    if let Some(refusal) = role_gate::refuse_off_role(ctx, req.uri().path()) {
        return refusal;
    }
    if let Some(refusal) = limits::refuse_unreadable_bodies(ctx, &req) {
        return refusal;
    }
    limits::rate_limit(ctx, req, async |req| {
        forward::forward_to_owner(ctx, req, async |req| {
            crate::audit::with_durable_audit(next.run(req)).await
        })
        .await
    })
    .await
}
