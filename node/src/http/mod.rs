//! The HTTP surface: `router()` merges one router per resource, adds the OpenAPI document and its UI, and
//! wraps everything in the request id layers (a caller's `X-Request-Id` is kept only when it is a short
//! plain token, otherwise replaced by a fresh one), the body limit and `edge.rs`, the one middleware that runs
//! each request's cross-cutting steps (keep-alive guard, client address, observation, panic guard, a queue
//! worker's 503, 415/413, rate limit, forwarding to the owner node, the audit hold).

use axum::Router;
use axum::extract::DefaultBodyLimit;
use axum::http::Uri;
use axum::middleware::from_fn_with_state;
use axum::response::{IntoResponse, Response};
use tower_http::request_id::{
    MakeRequestId, PropagateRequestIdLayer, RequestId, SetRequestIdLayer,
};
use utoipa::OpenApi;
use utoipa_axum::router::OpenApiRouter;

use crate::app::ApiContext;

pub(crate) mod access;
pub(crate) mod audit;
pub(crate) mod auth;
pub(crate) mod automation_rules;
pub(crate) mod calls;
pub(crate) mod catalog;
pub(crate) mod channels;
pub(crate) mod chats;
pub(crate) mod client_addr;
pub(crate) mod contacts;
pub(crate) mod docs;
pub(crate) mod edge;
pub(crate) mod engine_call;
pub(crate) mod error;
pub(crate) mod extract;
pub(crate) mod forward;
pub(crate) mod groups;
pub(crate) mod health;
pub(crate) mod infra;
pub(crate) mod infra_status;
pub(crate) mod keep_alive;
pub(crate) mod keys;
pub(crate) mod labels;
pub(crate) mod limits;
pub(crate) mod media_convert;
pub(crate) mod media_input;
pub(crate) mod media_output;
pub(crate) mod messages;
pub(crate) mod metrics;
pub(crate) mod observe;
pub(crate) mod openapi;
pub(crate) mod peer_client;
pub(crate) mod profile;
pub(crate) mod queue_dashboard;
pub(crate) mod role_gate;
pub(crate) mod search;
pub(crate) mod serve;
pub(crate) mod session_scope;
pub(crate) mod sessions;
pub(crate) mod settings;
pub(crate) mod sim;
pub(crate) mod stats;
pub(crate) mod status;
pub(crate) mod templates;
pub(crate) mod webhook_failures;
pub(crate) mod webhooks;
pub(crate) mod ws;

use error::ApiError;

#[derive(OpenApi)]
#[openapi(info(
    title = "wagate",
    description = "Self-hosted WhatsApp HTTP gateway. Every route but the three \
        health routes needs an API key in `X-API-Key`; each operation names the role it needs."
))]
struct ApiDoc;

/// Every resource's routes with their OpenAPI operations; the sim control API only on the sim engine.
fn api_routes(with_sim: bool) -> OpenApiRouter<ApiContext> {
    let routes = OpenApiRouter::with_openapi(ApiDoc::openapi())
        .merge(health::router())
        .merge(settings::router())
        .merge(stats::router())
        .merge(metrics::router())
        .merge(keys::router())
        .merge(audit::router())
        .merge(infra::router())
        .merge(infra_status::router())
        .merge(queue_dashboard::router())
        .merge(sessions::router())
        .merge(chats::router())
        .merge(contacts::router())
        .merge(groups::router())
        .merge(channels::router())
        .merge(labels::router())
        .merge(catalog::router())
        .merge(status::router())
        .merge(calls::router())
        .merge(profile::router())
        .merge(search::router())
        .merge(messages::router())
        .merge(media_convert::router())
        .merge(templates::router())
        .merge(webhooks::router())
        .merge(webhook_failures::router())
        .merge(automation_rules::router())
        .merge(ws::router());
    if with_sim {
        routes.merge(sim::router())
    } else {
        routes
    }
}

/// The OpenAPI document as served at `/api/docs/openapi.json` (with the sim control API).
pub fn openapi() -> serde_json::Value {
    openapi::finish(&api_routes(true).into_openapi())
}

pub(crate) fn router(ctx: ApiContext) -> Router {
    let body_limit = usize::try_from(ctx.config.body_size_limit).unwrap_or(usize::MAX);
    // Raft traffic between nodes: its own secret check, no API key, no rate limit, no forwarding.
    let secret = ctx.config.cluster_secret.clone().unwrap_or_default();
    let internal = ctx
        .infra
        .raft_routes(secret, body_limit.max(64 * 1024 * 1024));
    let api = api_router(ctx, body_limit);
    match internal {
        Some(internal) => internal.merge(api),
        None => api,
    }
}

fn api_router(ctx: ApiContext, body_limit: usize) -> Router {
    let (api, openapi) = api_routes(ctx.sim.is_some()).split_for_parts();
    api.merge(docs::router(openapi::finish(&openapi)))
        .fallback(unknown_route)
        .method_not_allowed_fallback(unknown_route)
        .layer(from_fn_with_state(ctx.clone(), edge::edge))
        .layer(DefaultBodyLimit::max(body_limit))
        .layer(PropagateRequestIdLayer::x_request_id())
        .layer(SetRequestIdLayer::x_request_id(RandomRequestId))
        .layer(tower::util::MapRequestLayer::new(
            drop_unusable_request_id::<axum::body::Body>,
        ))
        .with_state(ctx)
}

/// The longest incoming `X-Request-Id` kept (a UUID is 36 characters, a `traceparent` 55).
const MAX_REQUEST_ID_LEN: usize = 128;

/// Whether a caller's `X-Request-Id` is kept: 1 to [`MAX_REQUEST_ID_LEN`] characters from `A-Z a-z 0-9 . _ : -`
/// (UUIDs, `traceparent`-like and most tracing ids). Anything else could carry spaces, quotes or `key=value`
/// pairs into the log lines that name it, or make every answer and log line as long as the header.
fn usable_request_id(value: &[u8]) -> bool {
    !value.is_empty()
        && value.len() <= MAX_REQUEST_ID_LEN
        && value
            .iter()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b':' | b'-'))
}

/// Removes an `X-Request-Id` the node will not repeat (see [`usable_request_id`]), and any second one, so
/// `SetRequestIdLayer` gives the request a fresh id, which the answer then carries.
fn drop_unusable_request_id<B>(mut req: axum::http::Request<B>) -> axum::http::Request<B> {
    let headers = req.headers_mut();
    let mut given = headers.get_all("x-request-id").iter();
    let keep = match (given.next(), given.next()) {
        (Some(first), None) => usable_request_id(first.as_bytes()),
        (None, _) => true,
        (Some(_), Some(_)) => false,
    };
    if !keep {
        headers.remove("x-request-id");
    }
    req
}

/// A random (v4) UUID per request from the thread's generator: `MakeRequestUuid` asked the kernel for
/// 16 random bytes on every request (a `getrandom` system call each).
#[derive(Clone, Copy)]
struct RandomRequestId;

impl MakeRequestId for RandomRequestId {
    fn make_request_id<B>(&mut self, _: &axum::http::Request<B>) -> Option<RequestId> {
        let id = uuid::Builder::from_random_bytes(rand::random()).into_uuid();
        let mut text = uuid::Uuid::encode_buffer();
        axum::http::HeaderValue::from_str(id.hyphenated().encode_lower(&mut text))
            .ok()
            .map(RequestId::new)
    }
}

async fn unknown_route(method: axum::http::Method, uri: Uri) -> Response {
    ApiError::not_found(format!("Cannot {method} {}", uri.path())).into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with_ids(ids: &[&[u8]]) -> axum::http::Request<()> {
        let mut req = axum::http::Request::new(());
        for id in ids {
            let value = axum::http::HeaderValue::from_bytes(id).unwrap();
            req.headers_mut().append("x-request-id", value);
        }
        req
    }

    fn kept(ids: &[&[u8]]) -> Option<String> {
        let req = drop_unusable_request_id(with_ids(ids));
        let id = req.headers().get("x-request-id")?;
        Some(id.to_str().unwrap().to_owned())
    }

    #[test]
    fn short_token_ids_are_kept_and_everything_else_is_dropped() {
        let uuid = "0b6a4b4e-4c5e-4d55-9f0b-3c1c2a0f8e11";
        assert_eq!(kept(&[uuid.as_bytes()]).as_deref(), Some(uuid));
        let traceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
        assert_eq!(
            kept(&[traceparent.as_bytes()]).as_deref(),
            Some(traceparent)
        );
        assert_eq!(kept(&[b"svc.req_42:a"]).as_deref(), Some("svc.req_42:a"));
        assert_eq!(kept(&[]), None);
        for bad in [
            &b"abc status=500 route=/api/admin key_id=forged"[..],
            b"abc\tstatus=500",
            b"\"quoted\"",
            b"a=b",
            b"caf\xc3\xa9",
            b"",
        ] {
            assert_eq!(kept(&[bad]), None, "{}", String::from_utf8_lossy(bad));
        }
        let long = "a".repeat(MAX_REQUEST_ID_LEN + 1);
        assert_eq!(kept(&[long.as_bytes()]), None);
        let longest = "a".repeat(MAX_REQUEST_ID_LEN);
        assert_eq!(kept(&[longest.as_bytes()]), Some(longest));
        assert_eq!(
            kept(&[b"one", b"two"]),
            None,
            "two ids: neither is repeated"
        );
    }
}
