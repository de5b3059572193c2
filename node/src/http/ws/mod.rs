//! `GET /api/ws` (wire-notes §6): the upgrade, key presentation (upgrade header or a first `auth` frame
//! within 5 s) and the socket loop: frames in (rate-limited), events out from the pipeline's live feed, and
//! the periodic re-validation of the key. A missing or bad key still upgrades, then gets one UNAUTHORIZED
//! frame and a close; a request that is not an upgrade gets the JSON error body. Subscription rules live in
//! `subscriptions.rs`.

mod frames;
mod subscriptions;

use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::State;
use axum::extract::ws::rejection::WebSocketUpgradeRejection;
use axum::extract::ws::{Message, WebSocket, WebSocketUpgrade};
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use tokio::sync::broadcast::error::RecvError;
use utoipa_axum::{router::OpenApiRouter, routes};
use wagate_proto::dto::ws::{ClientFrame, codes};

use super::auth::presented_key;
use super::client_addr::client_ip_from;
use super::error::ApiError;
use crate::app::ApiContext;
use crate::keys::KeyRefusal;
use crate::store::keys::ApiKey;
use frames::{error_frame, event_frame, reply_frame};
use subscriptions::{KeyCheck, Subscriptions, recheck};

/// A browser presents its key in a first frame within this long.
const AUTH_FRAME_WAIT: Duration = Duration::from_secs(5);
/// Inbound frames a socket may send per second; more answer RATE_LIMITED and are ignored.
const MAX_FRAMES_PER_SECOND: u32 = 20;

pub(crate) fn router() -> OpenApiRouter<ApiContext> {
    OpenApiRouter::new().routes(routes!(open_socket))
}

/// GET /api/ws
#[utoipa::path(get, path = "/api/ws", tag = "websocket",
    responses((status = 101, description = "WebSocket upgrade; frames per wire-notes §6")))]
async fn open_socket(
    State(ctx): State<ApiContext>,
    extensions: axum::http::Extensions,
    headers: HeaderMap,
    upgrade: Result<WebSocketUpgrade, WebSocketUpgradeRejection>,
) -> Response {
    let presented = presented_key(&headers).map(str::to_owned);
    let client = client_ip_from(&extensions);
    let upgrade = match upgrade {
        Ok(upgrade) => upgrade,
        Err(rejection) => return refuse_plain_request(&ctx, presented, client, rejection).await,
    };
    upgrade.on_upgrade(move |socket| async move {
        let mut socket = socket;
        if let Some(key) = authenticate(&ctx, &mut socket, presented, client).await {
            run(ctx, socket, key, client).await;
        }
    })
}

/// A request that cannot become a WebSocket gets the JSON error every other route answers: 401 for a missing
/// or refused key (as on any keyed route), else the reason the upgrade was refused, with its status.
async fn refuse_plain_request(
    ctx: &ApiContext,
    presented: Option<String>,
    client: Option<IpAddr>,
    rejection: WebSocketUpgradeRejection,
) -> Response {
    let error = match presented {
        None => ApiError::from(KeyRefusal::Missing),
        Some(key) => match ctx.keys.verify_fresh(&key, client).await {
            Ok(_) => ApiError::new(rejection.status(), rejection.body_text()),
            Err(refusal) => ApiError::from(refusal),
        },
    };
    error.into_response()
}

/// The key from the header, or from an `auth` frame; on refusal sends UNAUTHORIZED and closes.
async fn authenticate(
    ctx: &ApiContext,
    socket: &mut WebSocket,
    presented: Option<String>,
    ip: Option<IpAddr>,
) -> Option<Arc<ApiKey>> {
    let presented = match presented {
        Some(k) => Some(k),
        None => match tokio::time::timeout(AUTH_FRAME_WAIT, socket.recv()).await {
            Ok(Some(Ok(Message::Text(text)))) => serde_json::from_str::<ClientFrame>(&text)
                .ok()
                .filter(|f| f.kind == "auth")
                .and_then(|f| f.api_key),
            _ => None,
        },
    };
    let refusal = match presented {
        None => "API key is missing".to_owned(),
        Some(k) => match ctx.keys.verify_fresh(&k, ip).await {
            Ok(key) => return Some(key),
            Err(refusal) => refusal.to_string(),
        },
    };
    close_unauthorized(socket, &refusal).await;
    None
}

async fn close_unauthorized(socket: &mut WebSocket, message: &str) {
    let _ = socket
        .send(error_frame(codes::UNAUTHORIZED, message, None))
        .await;
    let _ = socket.send(Message::Close(None)).await;
}

/// A fixed one-second window of inbound frames.
struct FrameBudget {
    window_start: tokio::time::Instant,
    used: u32,
}

impl FrameBudget {
    fn admit(&mut self) -> bool {
        let now = tokio::time::Instant::now();
        if now.duration_since(self.window_start) >= Duration::from_secs(1) {
            self.window_start = now;
            self.used = 0;
        }
        self.used += 1;
        self.used <= MAX_FRAMES_PER_SECOND
    }
}

async fn run(ctx: ApiContext, mut socket: WebSocket, mut key: Arc<ApiKey>, client: Option<IpAddr>) {
    // Events raised on any node of a cluster; the scope and QR rules below apply to them all.
    let mut feed = ctx.pipeline.hub().subscribe_cluster();
    let mut subs = Subscriptions::default();
    let mut budget = FrameBudget {
        window_start: tokio::time::Instant::now(),
        used: 0,
    };
    let every = Duration::from_millis(ctx.config.ws_revalidate_ms);
    let mut revalidate = tokio::time::interval_at(tokio::time::Instant::now() + every, every);
    loop {
        let out = tokio::select! {
            inbound = socket.recv() => match inbound {
                Some(Ok(Message::Text(text))) => {
                    if !budget.admit() {
                        // Refused unread, but its error still names the request it answers (wire-notes §6).
                        let request_id = request_id_of(&text);
                        let message = "Too many frames; slow down";
                        Some(error_frame(codes::RATE_LIMITED, message, request_id))
                    } else {
                        Some(handle_frame(&ctx, &key, &mut subs, &text).await)
                    }
                }
                Some(Ok(Message::Binary(_))) => {
                    Some(error_frame(codes::INVALID_MESSAGE, "Frames must be JSON text", None))
                }
                Some(Ok(_)) => None,
                Some(Err(_)) | None => break,
            },
            event = feed.recv() => match event {
                Ok(event) => subs.wants(&key, &event).then(|| event_frame(&event)),
                Err(RecvError::Lagged(n)) => {
                    tracing::warn!(missed = n, "websocket client fell behind; events skipped");
                    None
                }
                Err(RecvError::Closed) => break,
            },
            _ = revalidate.tick() => match recheck(&ctx.keys, &key, client) {
                KeyCheck::Keep(current) => { key = current; None }
                KeyCheck::Evict(why) => {
                    close_unauthorized(&mut socket, why).await;
                    break;
                }
            },
        };
        if let Some(frame) = out
            && socket.send(frame).await.is_err()
        {
            break;
        }
    }
}

/// The `requestId` of a frame that did not parse as a client frame (or was refused by the frame budget), so
/// its error can still name it.
fn request_id_of(text: &str) -> Option<serde_json::Value> {
    match serde_json::from_str::<serde_json::Value>(text) {
        Ok(serde_json::Value::Object(mut map)) => map.remove("requestId"),
        _ => None,
    }
}

async fn handle_frame(
    ctx: &ApiContext,
    key: &ApiKey,
    subs: &mut Subscriptions,
    text: &str,
) -> Message {
    let Ok(frame) = serde_json::from_str::<ClientFrame>(text) else {
        return error_frame(
            codes::INVALID_MESSAGE,
            "Frame is not a JSON object with a type (and, when given, a sessionId string and an events list)",
            request_id_of(text),
        );
    };
    let request_id = frame.request_id.clone();
    match frame.kind.as_str() {
        "ping" => reply_frame("pong", serde_json::Map::new(), request_id),
        "subscribe" | "unsubscribe" => {
            let is_subscribe = frame.kind == "subscribe";
            match subs.apply(&ctx.sessions, key, &frame, is_subscribe).await {
                Ok(fields) => {
                    let kind = if is_subscribe {
                        "subscribed"
                    } else {
                        "unsubscribed"
                    };
                    reply_frame(kind, fields, request_id)
                }
                Err((code, message)) => error_frame(code, &message, request_id),
            }
        }
        "auth" => error_frame(codes::INVALID_MESSAGE, "Already authenticated", request_id),
        other => error_frame(
            codes::INVALID_MESSAGE,
            &format!("Unknown frame type '{other}'"),
            request_id,
        ),
    }
}
