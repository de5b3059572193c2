//! Keeps pooled keep-alive connections usable when a request is answered before its body was read (a 401 for
//! a missing or wrong key, 413, 415, 429, any refusal before the body extractor). hyper reads only what is
//! already buffered of an unread body and otherwise closes the connection right after the response, without
//! saying so, and the client's next pooled request on it fails. So this outermost layer, after the response
//! is built, reads and discards what is left of a small body (up to `DRAIN_LIMIT` bytes within
//! `DRAIN_WAIT`); when the body is larger, declared larger, or does not arrive in time, the response says
//! `Connection: close` and the client opens a new connection for its next request.

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::{Body, Bytes, HttpBody};
use axum::extract::Request;
use axum::http::{HeaderValue, Version, header};
use axum::response::Response;
use futures::StreamExt;
use http_body::{Frame, SizeHint};
use parking_lot::Mutex;

/// The most an unread body is read to keep its connection.
const DRAIN_LIMIT: u64 = 64 * 1024;
/// How long the rest of an unread body may take to arrive.
const DRAIN_WAIT: Duration = Duration::from_secs(2);

/// The request body, shared between the handler (through `TrackedBody`) and this layer.
struct Slot {
    body: Option<Body>,
    is_finished: bool,
}

struct TrackedBody(Arc<Mutex<Slot>>);

impl HttpBody for TrackedBody {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        let mut slot = self.0.lock();
        let Some(body) = slot.body.as_mut() else {
            return Poll::Ready(None);
        };
        let polled = Pin::new(body).poll_frame(cx);
        if matches!(polled, Poll::Ready(None)) {
            slot.is_finished = true;
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        let slot = self.0.lock();
        slot.is_finished || slot.body.as_ref().is_none_or(HttpBody::is_end_stream)
    }

    fn size_hint(&self) -> SizeHint {
        self.0
            .lock()
            .body
            .as_ref()
            .map(HttpBody::size_hint)
            .unwrap_or_default()
    }
}

pub(crate) async fn drain_unread_bodies(
    req: Request,
    next: impl AsyncFnOnce(Request) -> Response,
) -> Response {
    // HTTP/2 ends a stream, not the connection, and forbids `Connection`; bodiless requests need nothing.
    if req.body().is_end_stream() || req.version() >= Version::HTTP_2 {
        return next(req).await;
    }
    let declared = req
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok());
    let (parts, body) = req.into_parts();
    let slot = Arc::new(Mutex::new(Slot {
        body: Some(body),
        is_finished: false,
    }));
    let tracked = Body::new(TrackedBody(slot.clone()));
    let mut response = next(Request::from_parts(parts, tracked)).await;
    let rest = {
        let mut slot = slot.lock();
        if slot.is_finished {
            None
        } else {
            slot.body.take()
        }
    };
    if let Some(body) = rest
        && !body.is_end_stream()
        && !drain(body, declared).await
    {
        response
            .headers_mut()
            .insert(header::CONNECTION, HeaderValue::from_static("close"));
    }
    response
}

/// True when the rest of the body was read to its end within the limits.
async fn drain(body: Body, declared: Option<u64>) -> bool {
    if declared.is_some_and(|len| len > DRAIN_LIMIT) {
        return false;
    }
    let read_to_end = async {
        let mut stream = body.into_data_stream();
        let mut seen: u64 = 0;
        while let Some(chunk) = stream.next().await {
            let Ok(chunk) = chunk else { return false };
            seen = seen.saturating_add(chunk.len() as u64);
            if seen > DRAIN_LIMIT {
                return false;
            }
        }
        true
    };
    tokio::time::timeout(DRAIN_WAIT, read_to_end)
        .await
        .unwrap_or(false)
}
