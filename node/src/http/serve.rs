//! The node's HTTP server: accepts connections and serves the router on them with hyper-util's connection
//! builder (HTTP/1, HTTP/2 by prior knowledge, upgrades for the WebSocket), because `axum::serve` sets no
//! timer and so applies no read timeout at all: a client that opened a connection and sent half a request
//! head, or declared a body and stopped sending it, held a file descriptor for ever, and some thousands of
//! them exhausted the process's descriptors (accept failed, SQLite could not open its files).
//!
//! - A request head must arrive whole within `HTTP_HEADER_READ_TIMEOUT_MS`, or the connection is closed:
//!   hyper's HTTP/1 header read timeout (which also ends a keep-alive connection idle that long), plus a
//!   watch on each connection's first request, which also covers the bytes the builder reads to tell
//!   HTTP/1 from HTTP/2 before hyper's timer starts.
//! - A request body that sends nothing for `HTTP_BODY_READ_TIMEOUT_MS` while it is read fails with
//!   [`BodyStalled`], which the body readers answer as 408 (`ApiError::from`). The wait restarts with every
//!   frame, so a slow upload that keeps sending is not cut, and nothing runs while nobody reads the body.
//! - Responses are never timed (a data export download, a media stream), and an upgraded connection (the
//!   WebSocket at `/api/ws`) leaves hyper, so none of this reaches it.
//! - Each connection sets `TCP_NODELAY` and puts the peer address in every request as
//!   `ConnectInfo<SocketAddr>`, as axum's connect-info service did (`client_addr.rs` reads it).
//! - Once the shutdown future resolves, the listener closes and every connection finishes its request in
//!   flight and closes; `serve` returns when all have.

use std::error::Error as StdError;
use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll, ready};
use std::time::Duration;

use axum::Router;
use axum::body::{Body, Bytes, HttpBody};
use axum::extract::ConnectInfo;
use http_body::{Frame, SizeHint};
use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use hyper_util::server::graceful::GracefulShutdown;
use tokio::net::{TcpListener, TcpStream};
use tokio::time::{Instant, Sleep};
use tokio_util::sync::CancellationToken;
use tower::Service;

/// How long a request may take to arrive.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ReadTimeouts {
    /// The whole request head (`HTTP_HEADER_READ_TIMEOUT_MS`).
    pub head: Duration,
    /// The longest wait for the next piece of a body being read (`HTTP_BODY_READ_TIMEOUT_MS`).
    pub body_idle: Duration,
}

/// Serves `app` on `listener` until `shutdown` resolves, then lets every open connection finish its request
/// in flight. `shutdown` runs on a task of its own, so the node keeps accepting while it works (a cluster
/// node hands its sessions over first).
pub(crate) async fn serve(
    listener: TcpListener,
    app: Router,
    timeouts: ReadTimeouts,
    shutdown: impl Future<Output = ()> + Send + 'static,
) {
    let stop = CancellationToken::new();
    tokio::spawn({
        let stop = stop.clone();
        async move {
            shutdown.await;
            stop.cancel();
        }
    });
    let mut builder = auto::Builder::new(TokioExecutor::new());
    builder
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(timeouts.head);
    let graceful = GracefulShutdown::new();
    loop {
        let (stream, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(err) => {
                    pause_after_accept_error(err, &stop).await;
                    continue;
                }
            },
            () = stop.cancelled() => break,
        };
        serve_connection(&builder, &graceful, stream, peer, &app, timeouts);
    }
    drop(listener);
    graceful.shutdown().await;
}

/// Like hyper's and axum's accept loops: a refused or reset connection is nothing to wait for; anything
/// else (`EMFILE`: out of file descriptors) is logged and accepting pauses a second, as the descriptors
/// only come back when connections close.
async fn pause_after_accept_error(err: std::io::Error, stop: &CancellationToken) {
    use std::io::ErrorKind;
    if matches!(
        err.kind(),
        ErrorKind::ConnectionRefused | ErrorKind::ConnectionAborted | ErrorKind::ConnectionReset
    ) {
        return;
    }
    tracing::error!(error = %err, "accept error");
    tokio::select! {
        () = tokio::time::sleep(Duration::from_secs(1)) => {}
        () = stop.cancelled() => {}
    }
}

fn serve_connection(
    builder: &auto::Builder<TokioExecutor>,
    graceful: &GracefulShutdown,
    stream: TcpStream,
    peer: SocketAddr,
    app: &Router,
    timeouts: ReadTimeouts,
) {
    // Without TCP_NODELAY a WebSocket's small event frames wait behind the client's delayed ACK (Nagle): the
    // live feed stalled 40 ms at a time at 1,000 events/s.
    if let Err(err) = stream.set_nodelay(true) {
        tracing::debug!(error = %err, "TCP_NODELAY not set on an accepted connection");
    }
    let has_asked = Arc::new(AtomicBool::new(false));
    let service = {
        let (app, has_asked) = (app.clone(), has_asked.clone());
        hyper::service::service_fn(move |req: axum::http::Request<Incoming>| {
            has_asked.store(true, Ordering::Relaxed);
            let mut req = req.map(|body| Body::new(StallGuard::new(body, timeouts.body_idle)));
            req.extensions_mut().insert(ConnectInfo(peer));
            app.clone().call(req)
        })
    };
    let connection = builder
        .serve_connection_with_upgrades(TokioIo::new(stream), service)
        .into_owned();
    let connection = graceful.watch(connection);
    tokio::spawn(async move {
        tokio::select! {
            served = connection => {
                if let Err(err) = served {
                    tracing::debug!(error = %err, %peer, "connection ended with an error");
                }
            }
            () = first_head_overdue(&has_asked, timeouts.head) => {
                tracing::debug!(%peer, "connection closed: no request head within HTTP_HEADER_READ_TIMEOUT_MS");
            }
        }
    });
}

/// Resolves when a connection has not delivered its first request head within `limit`; never once it has
/// (hyper's own header timer covers the heads after the first).
async fn first_head_overdue(has_asked: &AtomicBool, limit: Duration) {
    tokio::time::sleep(limit).await;
    if has_asked.load(Ordering::Relaxed) {
        std::future::pending::<()>().await;
    }
}

/// The error of a request body that sent nothing for `HTTP_BODY_READ_TIMEOUT_MS` while it was read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct BodyStalled {
    pub waited: Duration,
}

impl std::fmt::Display for BodyStalled {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "Request body stalled: nothing arrived for {} ms (HTTP_BODY_READ_TIMEOUT_MS)",
            self.waited.as_millis()
        )
    }
}

impl StdError for BodyStalled {}

/// The stall behind a body read error, wherever it sits in the chain of wrapped errors (axum's `Body`,
/// the body limit and the extractors' rejections each wrap it once more).
pub(crate) fn stalled(err: &(dyn StdError + 'static)) -> Option<BodyStalled> {
    let mut current = Some(err);
    while let Some(err) = current {
        if let Some(stall) = err.downcast_ref::<BodyStalled>() {
            return Some(*stall);
        }
        current = err.source();
    }
    None
}

/// A request body that fails with [`BodyStalled`] when a read waits longer than its limit for the next
/// frame. The wait is timed only while someone reads, and restarts after every frame.
struct StallGuard<B> {
    body: B,
    limit: Duration,
    /// Allocated at the first wait, then reset for each later one.
    deadline: Option<Pin<Box<Sleep>>>,
    is_waiting: bool,
}

impl<B> StallGuard<B> {
    fn new(body: B, limit: Duration) -> Self {
        StallGuard {
            body,
            limit,
            deadline: None,
            is_waiting: false,
        }
    }
}

impl<B> HttpBody for StallGuard<B>
where
    B: HttpBody<Data = Bytes> + Unpin,
    B::Error: Into<axum::BoxError>,
{
    type Data = Bytes;
    type Error = axum::BoxError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, axum::BoxError>>> {
        let this = &mut *self;
        if let Poll::Ready(frame) = Pin::new(&mut this.body).poll_frame(cx) {
            this.is_waiting = false;
            return Poll::Ready(frame.map(|frame| frame.map_err(Into::into)));
        }
        let limit = this.limit;
        let deadline = this
            .deadline
            .get_or_insert_with(|| Box::pin(tokio::time::sleep(limit)));
        if !this.is_waiting {
            this.is_waiting = true;
            deadline.as_mut().reset(Instant::now() + limit);
        }
        ready!(deadline.as_mut().poll(cx));
        Poll::Ready(Some(Err(Box::new(BodyStalled { waited: limit }))))
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A body that sends `chunks` pieces `every` apart, then (`then_stall`) stops without ending.
    struct Trickle {
        chunks: usize,
        every: Duration,
        then_stall: bool,
        next: Option<Pin<Box<Sleep>>>,
    }

    impl HttpBody for Trickle {
        type Data = Bytes;
        type Error = std::convert::Infallible;

        fn poll_frame(
            mut self: Pin<&mut Self>,
            cx: &mut Context<'_>,
        ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
            if self.chunks == 0 {
                return match self.then_stall {
                    true => Poll::Pending,
                    false => Poll::Ready(None),
                };
            }
            let every = self.every;
            let next = self
                .next
                .get_or_insert_with(|| Box::pin(tokio::time::sleep(every)));
            ready!(next.as_mut().poll(cx));
            self.next = None;
            self.chunks -= 1;
            Poll::Ready(Some(Ok(Frame::data(Bytes::from_static(b"ab")))))
        }
    }

    fn trickle(chunks: usize, every_ms: u64, then_stall: bool) -> Body {
        let body = Trickle {
            chunks,
            every: Duration::from_millis(every_ms),
            then_stall,
            next: None,
        };
        Body::new(StallGuard::new(body, Duration::from_millis(100)))
    }

    #[tokio::test(start_paused = true)]
    async fn a_body_that_keeps_sending_is_read_whole_however_long_it_takes() {
        // 20 pieces 90 ms apart: 1.8 s in all, each wait under the 100 ms limit.
        let bytes = axum::body::to_bytes(trickle(20, 90, false), usize::MAX)
            .await
            .expect("read whole");
        assert_eq!(bytes.len(), 40);
    }

    #[tokio::test(start_paused = true)]
    async fn a_body_that_stops_sending_fails_with_a_stall_found_through_the_wrappers() {
        let err = axum::body::to_bytes(trickle(3, 50, true), usize::MAX)
            .await
            .expect_err("stalled");
        assert_eq!(
            stalled(&err),
            Some(BodyStalled {
                waited: Duration::from_millis(100)
            })
        );
        // As the JSON extractor sees it: through the body limit and axum's rejection.
        use axum::extract::FromRequest;
        let req = axum::http::Request::new(trickle(1, 10, true));
        let rejection = Bytes::from_request(req, &()).await.expect_err("stalled");
        assert!(stalled(&rejection).is_some(), "{rejection:?}");
    }

    #[tokio::test(start_paused = true)]
    async fn a_body_nobody_reads_is_not_timed() {
        let mut body = trickle(1, 10, false);
        tokio::time::sleep(Duration::from_secs(5)).await;
        let bytes = axum::body::to_bytes(std::mem::take(&mut body), usize::MAX)
            .await
            .expect("read whole");
        assert_eq!(bytes.len(), 2);
    }

    #[test]
    fn other_body_errors_are_not_stalls() {
        let err = axum::Error::new(std::io::Error::other("reset"));
        assert_eq!(stalled(&err), None);
    }
}
