//! Forwarding to the owner node: a session-scoped request (`/api/sessions/{sessionId}[/...]`,
//! `/api/sim/sessions/{sessionId}/...`) whose lease another live node holds is sent there once, marked
//! `X-Wagate-Forwarded: <thisNodeId>`; a marked request is never forwarded again. The id is read as the
//! routes read it (percent-decoded, any case, canonicalised), so every spelling they accept is forwarded. An owner whose listener
//! is gone is looked up again (bounded by `SESSION_HANDOVER_WAIT_MS`) and the request follows the session
//! to its new owner. Every session-scoped
//! response names the node that served it in `X-Wagate-Served-By`. The key and the route's access rule are
//! checked here before a forward (without counting a use) and again by the owner, which counts it.
//! A forward also carries `CLUSTER_SECRET` and the client address this node decided, so the owner applies
//! `allowedIps` and audits against the real client, and does not count the request against the rate
//! limit a second time (`client_addr.rs` believes those headers only with the right secret).

use std::time::Duration;

use axum::body::Body;
use axum::extract::Request;
use axum::http::header::{self, HeaderMap, HeaderName, HeaderValue};
use axum::response::{IntoResponse, Response};
use wagate_proto::headers::{FORWARDED, SERVED_BY};

use super::auth::Caller;
use super::client_addr::{
    CLIENT_ADDRESS_HEADER, CLUSTER_SECRET_HEADER, PeerForwarded, client_ip_from,
};
use super::error::ApiError;
use super::extract::canonical_session_id;
use super::peer_client::PeerError;
use crate::app::ApiContext;
use crate::cluster::Route;
use crate::cluster::lease::LeaseError;

/// Why a forward failed; `http/error.rs` maps each to its status.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ForwardError {
    #[error("The session's owner node could not be reached")]
    NotReached,
    #[error("The session's owner node did not answer in time")]
    TimedOut,
    #[error("The connection to the session's owner node broke")]
    BrokeAfterSend,
    #[error("Request body exceeds BODY_SIZE_LIMIT")]
    BodyTooLarge,
}

/// The session id of a session-scoped path (a UUID segment right after `sessions/`), if any, canonical.
/// The segment is read as the route's `{sessionId}` is (`extract::SessionId`): percent-decoded, then a
/// hyphenated UUID in any case. Every spelling the route accepts (`%2D`, `%30`, capitals) thus names the
/// same lease and is forwarded to the same owner; a spelling the route refuses is answered where it arrives.
fn session_in_path(path: &str) -> Option<String> {
    let rest = path
        .strip_prefix("/api/sessions/")
        .or_else(|| path.strip_prefix("/api/sim/sessions/"))?;
    let segment = rest.split('/').next()?;
    canonical_session_id(&percent_decoded(segment)?)
}

/// A path segment percent-decoded as axum decodes path parameters: each `%XX` becomes its byte, a `%` not
/// followed by two hex digits stays as it is; `None` when the bytes are not UTF-8 (axum's 400).
fn percent_decoded(segment: &str) -> Option<String> {
    fn hex(digit: u8) -> Option<u8> {
        char::from(digit)
            .to_digit(16)
            .and_then(|value| u8::try_from(value).ok())
    }
    let bytes = segment.as_bytes();
    let mut decoded = Vec::with_capacity(bytes.len());
    let mut at = 0;
    while let Some(&byte) = bytes.get(at) {
        let escaped = match (byte, bytes.get(at + 1), bytes.get(at + 2)) {
            (b'%', Some(&high), Some(&low)) => hex(high).zip(hex(low)),
            _ => None,
        };
        match escaped {
            Some((high, low)) => {
                decoded.push(high << 4 | low);
                at += 3;
            }
            None => {
                decoded.push(byte);
                at += 1;
            }
        }
    }
    String::from_utf8(decoded).ok()
}

pub(crate) async fn forward_to_owner(
    ctx: &ApiContext,
    req: Request,
    next: impl AsyncFnOnce(Request) -> Response,
) -> Response {
    let Some(session_id) = session_in_path(req.uri().path()) else {
        return next(req).await;
    };
    let marks = Marks {
        // Believed only from a peer that proved the cluster secret: anyone else could otherwise ask, with no
        // key, which node holds a session's lease (a 409 instead of a 401).
        is_forwarded: req.headers().contains_key(FORWARDED)
            && req.extensions().get::<PeerForwarded>().is_some(),
        is_upgrade: req.headers().contains_key(header::UPGRADE),
    };
    match decide(ctx, &session_id, marks).await {
        // Held until the answer: a planned handover of the session waits for it.
        Decision::Local(_serving) => next(req).await,
        Decision::Refuse => ApiError::from(LeaseError::HeldElsewhere).into_response(),
        Decision::Forward(url) => match check_caller_here(ctx, req).await {
            Ok(req) => {
                let target = Target {
                    session_id: &session_id,
                    marks,
                    url,
                };
                forward_following_owner(ctx, req, target, next).await
            }
            Err(refusal) => refusal.into_response(),
        },
    }
}

/// Whether a path addresses one session (by id or by name), so its answer names the node that served it:
/// `/api/sessions/{idOrName}/...` and the sim's `/api/sim/sessions/{id}/...`, not the list or the stats.
/// The segment is read raw, as the router matches it: `%73tats` is routed as a `{sessionId}`, not as `stats`.
pub(crate) fn is_session_scoped(path: &str) -> bool {
    let Some(rest) = path
        .strip_prefix("/api/sessions/")
        .or_else(|| path.strip_prefix("/api/sim/sessions/"))
    else {
        return false;
    };
    let segment = rest.split('/').next().unwrap_or_default();
    !segment.is_empty() && segment != "stats"
}

/// Adds `X-Wagate-Served-By: <this node>` unless the owner a request was forwarded to already named itself.
pub(crate) fn stamp_served_by(ctx: &ApiContext, response: &mut Response) {
    if !response.headers().contains_key(SERVED_BY)
        && let Ok(value) = HeaderValue::from_str(&ctx.config.node_id)
    {
        response.headers_mut().insert(SERVED_BY, value);
    }
}

/// The caller's key and access rule, checked here too before the request leaves: a revocation made through
/// this node holds at once for sessions other nodes own, and a refused request costs the owner nothing.
async fn check_caller_here(ctx: &ApiContext, req: Request) -> Result<Request, ApiError> {
    let (mut parts, body) = req.into_parts();
    Caller::check_before_forward(&mut parts, ctx).await?;
    Ok(Request::from_parts(parts, body))
}

enum Decision {
    Local(Option<crate::cluster::handover::Serving>),
    /// Already forwarded once, and the lease is held elsewhere.
    Refuse,
    Forward(String),
}

/// What the request says about itself that the decision reads (not the request: its body is not `Sync`).
#[derive(Clone, Copy)]
struct Marks {
    is_forwarded: bool,
    /// WebSocket upgrades are served where they arrive; a forward cannot carry them.
    is_upgrade: bool,
}

async fn decide(ctx: &ApiContext, session_id: &str, marks: Marks) -> Decision {
    if marks.is_upgrade {
        return Decision::Local(None);
    }
    let route = match ctx.infra.route(session_id).await {
        Ok(route) => route,
        Err(err) => {
            tracing::warn!(session_id, error = %err, "lease owner unknown; serving locally");
            return Decision::Local(None);
        }
    };
    match route {
        (Route::Local, serving) => Decision::Local(serving),
        // A draining node owns no session, so the owner it names is a node that serves locally: a request
        // forwarded here just before a handover may go on to the new owner without a loop.
        (Route::Remote { .. }, _) if marks.is_forwarded && !ctx.infra.is_draining() => {
            Decision::Refuse
        }
        (Route::Remote { url, .. }, _) => Decision::Forward(url),
    }
}

/// Sends an empty `POST {path}` about `session_id` to the node holding its lease, as a forward (marked,
/// with the cluster secret) carrying the caller's `X-API-Key`: for actions this node takes on a peer's
/// behalf (the import stopping an orphaned engine). `None` when no other node holds the lease.
pub(crate) async fn post_to_owner(
    ctx: &ApiContext,
    session_id: &str,
    path: &str,
    api_key: Option<&HeaderValue>,
) -> Result<Option<axum::http::StatusCode>, ForwardError> {
    let url = match ctx.infra.route(session_id).await {
        Ok((Route::Remote { url, .. }, _)) => url,
        Ok((Route::Local, _)) => return Ok(None),
        Err(err) => {
            tracing::warn!(session_id, error = %err, "lease owner unknown");
            return Err(ForwardError::NotReached);
        }
    };
    let mut headers = HeaderMap::new();
    if let Some(key) = api_key {
        headers.insert(HeaderName::from_static("x-api-key"), key.clone());
    }
    mark_forwarded(ctx, &mut headers);
    let mut request = Request::post(format!("{url}{path}"))
        .body(Body::empty())
        .map_err(|_| ForwardError::NotReached)?;
    *request.headers_mut() = headers;
    let sent = ctx
        .forwarder
        .send(request)
        .await
        .map_err(ForwardError::from)?;
    Ok(Some(sent.status()))
}

/// Marks a request this node sends to a session's owner: who forwarded it (the owner never forwards it again)
/// and the cluster secret that lets the owner trust the forwarded client address.
fn mark_forwarded(ctx: &ApiContext, headers: &mut HeaderMap) {
    if let Ok(me) = HeaderValue::from_str(&ctx.config.node_id) {
        headers.insert(FORWARDED, me);
    }
    if let Some(secret) = ctx
        .config
        .cluster_secret
        .as_deref()
        .and_then(|s| HeaderValue::from_str(s).ok())
    {
        headers.insert(CLUSTER_SECRET_HEADER, secret);
    }
}

/// Removes the hop-by-hop headers of a message crossing a forward. A body's length is not copied either:
/// the body itself tells the next hop (hyper sets `content-length` from an exact size).
fn drop_hop_by_hop(headers: &mut HeaderMap) {
    const HOP_BY_HOP: [HeaderName; 10] = [
        header::CONNECTION,
        HeaderName::from_static("keep-alive"),
        header::PROXY_AUTHENTICATE,
        header::PROXY_AUTHORIZATION,
        header::TE,
        header::TRAILER,
        header::TRANSFER_ENCODING,
        header::UPGRADE,
        header::HOST,
        header::CONTENT_LENGTH,
    ];
    for name in &HOP_BY_HOP {
        headers.remove(name);
    }
}

/// Where a request is being forwarded, and what the routing decision needs to be asked again.
struct Target<'a> {
    session_id: &'a str,
    marks: Marks,
    url: String,
}

/// How often the owner is looked up again while its listener refuses connections.
const REROUTE_POLL: Duration = Duration::from_millis(50);

/// Forwards to the owner. An owner whose listener refuses connections has just stopped (after handing its
/// sessions over) or died: the owner is looked up again until `SESSION_HANDOVER_WAIT_MS` has passed, and the
/// request follows the session to its new owner, this node included, instead of answering 503.
async fn forward_following_owner(
    ctx: &ApiContext,
    req: Request,
    mut target: Target<'_>,
    next: impl AsyncFnOnce(Request) -> Response,
) -> Response {
    let (parts, body) = req.into_parts();
    let limit = usize::try_from(ctx.config.body_size_limit).unwrap_or(usize::MAX);
    let bytes = match axum::body::to_bytes(body, limit).await {
        Ok(bytes) => bytes,
        Err(err) => match super::serve::stalled(&err) {
            Some(stall) => return ApiError::from(stall).into_response(),
            None => return ApiError::from(ForwardError::BodyTooLarge).into_response(),
        },
    };
    let deadline =
        std::time::Instant::now() + Duration::from_millis(ctx.config.session_handover_wait_ms);
    loop {
        match observed_forward(ctx, &parts, bytes.clone(), &target.url).await {
            Err(ForwardError::NotReached) if std::time::Instant::now() < deadline => {}
            Ok(response) => return response,
            Err(err) => return ApiError::from(err).into_response(),
        }
        tokio::time::sleep(REROUTE_POLL).await;
        match decide(ctx, target.session_id, target.marks).await {
            Decision::Local(serving) => {
                let response = next(Request::from_parts(parts, Body::from(bytes))).await;
                drop(serving);
                return response;
            }
            Decision::Refuse => return ApiError::from(LeaseError::HeldElsewhere).into_response(),
            Decision::Forward(url) => target.url = url,
        }
    }
}

/// A forward in its own span (its context goes to the owner in `traceparent`), counted and timed.
async fn observed_forward(
    ctx: &ApiContext,
    parts: &axum::http::request::Parts,
    bytes: axum::body::Bytes,
    base_url: &str,
) -> Result<Response, ForwardError> {
    use tracing::Instrument;
    use wagate_workers::telemetry::metrics::{FORWARD_DURATION, FORWARDS};
    let span = tracing::info_span!("forward", owner = %base_url);
    let started = std::time::Instant::now();
    let result = forward(ctx, parts, bytes, base_url, &span)
        .instrument(span.clone())
        .await;
    metrics::histogram!(FORWARD_DURATION).record(started.elapsed().as_secs_f64());
    let outcome = if result.is_ok() { "success" } else { "error" };
    metrics::counter!(FORWARDS, "outcome" => outcome).increment(1);
    result
}

async fn forward(
    ctx: &ApiContext,
    parts: &axum::http::request::Parts,
    bytes: axum::body::Bytes,
    base_url: &str,
    span: &tracing::Span,
) -> Result<Response, ForwardError> {
    let path = parts
        .uri
        .path_and_query()
        .map(|p| p.as_str())
        .unwrap_or("/");
    let uri = axum::http::Uri::try_from(format!("{base_url}{path}"))
        .map_err(|_| ForwardError::NotReached)?;
    let mut headers = parts.headers.clone();
    drop_hop_by_hop(&mut headers);
    mark_forwarded(ctx, &mut headers);
    wagate_workers::telemetry::propagation::inject_into_headers(span, &mut headers);
    if let Some(client) =
        client_ip_from(&parts.extensions).and_then(|ip| HeaderValue::from_str(&ip.to_string()).ok())
    {
        headers.insert(CLIENT_ADDRESS_HEADER, client);
    }
    let attempt = |body: axum::body::Bytes| {
        let mut request = Request::new(Body::from(body));
        *request.method_mut() = parts.method.clone();
        *request.uri_mut() = uri.clone();
        *request.headers_mut() = headers.clone();
        ctx.forwarder.send(request)
    };
    // A connection closed under the request usually means the peer shut an idle pooled connection as it
    // went out, but it can also mean the peer took the request and then broke: only a request that may be
    // repeated goes out again, so a send is never made twice (its caller gets the 502 instead).
    let mut answer = match attempt(bytes.clone()).await {
        Err(PeerError::ClosedUnanswered) if parts.method.is_idempotent() => attempt(bytes).await,
        other => other,
    }?;
    drop_hop_by_hop(answer.headers_mut());
    Ok(answer)
}

impl From<PeerError> for ForwardError {
    fn from(err: PeerError) -> Self {
        match err {
            PeerError::NotReached => ForwardError::NotReached,
            PeerError::TimedOut => ForwardError::TimedOut,
            PeerError::ClosedUnanswered | PeerError::Broke => ForwardError::BrokeAfterSend,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ID: &str = "0b6f7c1e-5a3f-4c2e-9d1a-2f0e8b7c6d5a";

    #[test]
    fn session_scoped_paths_are_recognised() {
        let id = ID;
        let found = |path: String| session_in_path(&path);
        assert_eq!(found(format!("/api/sessions/{id}")).as_deref(), Some(id));
        assert_eq!(
            found(format!("/api/sessions/{id}/start")).as_deref(),
            Some(id)
        );
        assert_eq!(
            found(format!("/api/sim/sessions/{id}/scan")).as_deref(),
            Some(id)
        );
        assert_eq!(session_in_path("/api/sessions/stats"), None);
        assert_eq!(session_in_path("/api/sessions"), None);
        assert_eq!(session_in_path("/api/sessions/my-name/start"), None);
    }

    #[test]
    fn every_spelling_the_routes_accept_names_the_canonical_session() {
        for spelling in [
            ID.to_uppercase(),
            ID.replacen('-', "%2D", 1),
            ID.replacen('-', "%2d", 1),
            format!("%30{}", &ID[1..]),
            ID.to_uppercase().replace('-', "%2D"),
            ID.bytes().map(|b| format!("%{b:02X}")).collect(),
        ] {
            for path in [
                format!("/api/sessions/{spelling}"),
                format!("/api/sessions/{spelling}/messages/send-text"),
                format!("/api/sim/sessions/{spelling}/scan"),
            ] {
                assert_eq!(session_in_path(&path).as_deref(), Some(ID), "{path}");
            }
        }
    }

    #[test]
    fn spellings_the_routes_refuse_are_not_forwarded() {
        let simple = ID.replace('-', "");
        for spelling in [
            format!("{{{ID}}}"),
            format!("%7B{ID}%7D"),
            format!("urn:uuid:{ID}"),
            format!("urn%3Auuid%3A{ID}"),
            simple,
            // Decoded once, as axum does: `%252D` is `%2D`, not a hyphen.
            ID.replacen('-', "%252D", 1),
            ID.replacen('-', "%2", 1),
            format!("{ID}%20"),
            format!("{ID}%2Fstart"),
            "%73tats".to_string(),
            "%FF".to_string(),
        ] {
            let path = format!("/api/sessions/{spelling}/start");
            assert_eq!(session_in_path(&path), None, "{path}");
        }
    }

    #[test]
    fn percent_decoding_matches_a_path_parameter() {
        assert_eq!(percent_decoded("a%2Db%2dc").as_deref(), Some("a-b-c"));
        assert_eq!(percent_decoded("100%").as_deref(), Some("100%"));
        assert_eq!(percent_decoded("%zz%4").as_deref(), Some("%zz%4"));
        assert_eq!(percent_decoded("%C3%A9").as_deref(), Some("\u{e9}"));
        assert_eq!(percent_decoded("%C3"), None, "not UTF-8");
    }
}
