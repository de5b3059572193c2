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
//! - Once the shutdown future resolves, the listener closes and every connection is told to finish: a
//!   request in the router, or whose response is still being sent, is served to its end (the node's stop
//!   grace bounds it), then the connection closes. A connection with no request in flight (a request head
//!   that is partly there or never comes, an HTTP/2 connection whose peer does not answer the GOAWAY ping,
//!   a connection whose last answer hyper could not hand over) gets [`SHUTDOWN_ALLOWANCE`] to start one or
//!   close, then is dropped; a request body being read that sends nothing for that allowance once the stop
//!   began fails as stalled (408), so a stalled client cannot hold the stop for the whole grace. `serve`
//!   returns when every connection has closed.

use std::convert::Infallible;
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
use tokio::sync::watch;
use tokio::time::{Instant, Sleep};
use tokio_util::sync::{CancellationToken, WaitForCancellationFutureOwned};
use tower::Service;

/// How long a request may take to arrive.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ReadTimeouts {
    /// The whole request head (`HTTP_HEADER_READ_TIMEOUT_MS`).
    pub head: Duration,
    /// The longest wait for the next piece of a body being read (`HTTP_BODY_READ_TIMEOUT_MS`).
    pub body_idle: Duration,
}

/// Once the node stops: how long a connection with no request in flight may take to start one (a head
/// partly there) or close (an HTTP/2 peer answering the GOAWAY ping), and the longest a request body being
/// read may then wait for its next piece.
pub(crate) const SHUTDOWN_ALLOWANCE: Duration = Duration::from_secs(2);

/// Serves `app` on `listener` until `shutdown` resolves, then lets every open connection finish its requests
/// in flight and drops those with none (after [`SHUTDOWN_ALLOWANCE`]). `shutdown` runs on a task of its own,
/// so the node keeps accepting while it works (a cluster node hands its sessions over first).
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
        serve_connection(&builder, &graceful, &stop, stream, peer, &app, timeouts);
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
    stop: &CancellationToken,
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
    let (in_flight, mut requests) = watch::channel(0usize);
    let service = {
        let (app, has_asked, stop) = (app.clone(), has_asked.clone(), stop.clone());
        hyper::service::service_fn(move |req: axum::http::Request<Incoming>| {
            has_asked.store(true, Ordering::Relaxed);
            let serving = InFlight::enter(&in_flight);
            let stop = stop.clone();
            let mut req = req.map(|body| {
                Body::new(StallGuard::new(
                    body,
                    timeouts.body_idle,
                    stop,
                    SHUTDOWN_ALLOWANCE,
                ))
            });
            req.extensions_mut().insert(ConnectInfo(peer));
            let answer = app.clone().call(req);
            async move {
                let response = answer.await?;
                Ok::<_, Infallible>(response.map(|body| Body::new(Answering::new(body, serving))))
            }
        })
    };
    let connection = builder
        .serve_connection_with_upgrades(TokioIo::new(stream), service)
        .into_owned();
    let connection = graceful.watch(connection);
    let stop = stop.clone();
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
            () = idle_through_stop(&stop, &mut requests, SHUTDOWN_ALLOWANCE) => {
                tracing::debug!(%peer, "connection closed at shutdown: no request in flight");
            }
        }
    });
}

/// Counts one request of a connection from the moment it reaches the router until its response body has
/// been sent (or dropped: an aborted request, a closed connection).
struct InFlight(watch::Sender<usize>);

impl InFlight {
    fn enter(count: &watch::Sender<usize>) -> InFlight {
        count.send_modify(|n| *n += 1);
        InFlight(count.clone())
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.send_modify(|n| *n = n.saturating_sub(1));
    }
}

/// Resolves once the node is stopping and the connection has had no request in flight for `allowance`
/// (counted from the stop, or from its last request's end); never before the stop.
async fn idle_through_stop(
    stop: &CancellationToken,
    requests: &mut watch::Receiver<usize>,
    allowance: Duration,
) {
    stop.cancelled().await;
    loop {
        // False when the service, and so the connection, is gone: the other branch has ended.
        if !settles(requests, |n| n == 0).await {
            return std::future::pending().await;
        }
        tokio::select! {
            () = tokio::time::sleep(allowance) => return,
            alive = settles(requests, |n| n > 0) => if !alive {
                return std::future::pending().await;
            },
        }
    }
}

/// Waits until the count of requests in flight meets `test`; false when nobody can change it any more.
async fn settles(requests: &mut watch::Receiver<usize>, test: impl Fn(usize) -> bool) -> bool {
    requests.wait_for(|n| test(*n)).await.is_ok()
}

/// A response body that ends its request's [`InFlight`] count when it has sent its last frame (hyper may drop
/// a body only later, or never poll one that is empty).
struct Answering {
    body: Body,
    serving: Option<InFlight>,
}

impl Answering {
    fn new(body: Body, serving: InFlight) -> Self {
        Answering {
            body,
            serving: Some(serving),
        }
    }
}

impl HttpBody for Answering {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        let this = &mut *self;
        let frame = ready!(Pin::new(&mut this.body).poll_frame(cx));
        if matches!(frame, None | Some(Err(_))) {
            this.serving = None;
        }
        Poll::Ready(frame)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}

/// Resolves when a connection has not delivered its first request head within `limit`; never once it has
/// (hyper's own header timer covers the heads after the first).
async fn first_head_overdue(has_asked: &AtomicBool, limit: Duration) {
    tokio::time::sleep(limit).await;
    if has_asked.load(Ordering::Relaxed) {
        std::future::pending::<()>().await;
    }
}

/// The error of a request body that sent nothing for `HTTP_BODY_READ_TIMEOUT_MS` while it was read, or
/// for [`SHUTDOWN_ALLOWANCE`] once the node was stopping.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct BodyStalled {
    pub waited: Duration,
    pub stopping: bool,
}

impl std::fmt::Display for BodyStalled {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let waited = self.waited.as_millis();
        match self.stopping {
            false => write!(
                f,
                "Request body stalled: nothing arrived for {waited} ms (HTTP_BODY_READ_TIMEOUT_MS)"
            ),
            true => write!(
                f,
                "Request body stalled: nothing arrived for {waited} ms while the node was shutting down"
            ),
        }
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
/// frame. The wait is timed only while someone reads, and restarts after every frame. Once `stop` is
/// cancelled the limit shrinks to `stop_limit` (a wait under way then has `stop_limit` from the stop).
struct StallGuard<B> {
    body: B,
    limit: Duration,
    /// Allocated at the first wait, then reset for each later one.
    deadline: Option<Pin<Box<Sleep>>>,
    is_waiting: bool,
    wait_started: Instant,
    stop: CancellationToken,
    stop_limit: Duration,
    /// Allocated at the first wait while the node runs; dropped once the stop is seen.
    stopping: Option<Pin<Box<WaitForCancellationFutureOwned>>>,
    stop_seen: bool,
}

impl<B> StallGuard<B> {
    fn new(body: B, limit: Duration, stop: CancellationToken, stop_limit: Duration) -> Self {
        StallGuard {
            body,
            limit,
            deadline: None,
            is_waiting: false,
            wait_started: Instant::now(),
            stop,
            stop_limit,
            stopping: None,
            stop_seen: false,
        }
    }

    /// Whether the stop began since the last look (true once); wakes the reader when it does.
    fn notice_stop(&mut self, cx: &mut Context<'_>) -> bool {
        if self.stop_seen {
            return false;
        }
        let stop = &self.stop;
        let stopping = self
            .stopping
            .get_or_insert_with(|| Box::pin(stop.clone().cancelled_owned()));
        if stopping.as_mut().poll(cx).is_pending() {
            return false;
        }
        self.stopping = None;
        self.stop_seen = true;
        true
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
        let now = Instant::now();
        let stop_began = this.notice_stop(cx);
        let limit = match this.stop_seen {
            true => this.limit.min(this.stop_limit),
            false => this.limit,
        };
        let deadline = this
            .deadline
            .get_or_insert_with(|| Box::pin(tokio::time::sleep(limit)));
        if !this.is_waiting {
            this.is_waiting = true;
            this.wait_started = now;
            deadline.as_mut().reset(now + limit);
        } else if stop_began && now + limit < deadline.deadline() {
            deadline.as_mut().reset(now + limit);
        }
        ready!(deadline.as_mut().poll(cx));
        Poll::Ready(Some(Err(Box::new(BodyStalled {
            waited: deadline
                .deadline()
                .saturating_duration_since(this.wait_started),
            stopping: this.stop_seen,
        }))))
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
        trickle_until(chunks, every_ms, then_stall, &CancellationToken::new())
    }

    /// A trickle read with a 100 ms limit, 30 ms once `stop` is cancelled.
    fn trickle_until(
        chunks: usize,
        every_ms: u64,
        then_stall: bool,
        stop: &CancellationToken,
    ) -> Body {
        let body = Trickle {
            chunks,
            every: Duration::from_millis(every_ms),
            then_stall,
            next: None,
        };
        Body::new(StallGuard::new(
            body,
            Duration::from_millis(100),
            stop.clone(),
            Duration::from_millis(30),
        ))
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
                waited: Duration::from_millis(100),
                stopping: false,
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

    #[tokio::test(start_paused = true)]
    async fn a_body_waited_on_when_the_node_stops_fails_after_the_stop_allowance() {
        let stop = CancellationToken::new();
        let read = tokio::spawn(axum::body::to_bytes(
            trickle_until(1, 10, true, &stop),
            usize::MAX,
        ));
        // The wait began at 10 ms; the stop at 50 ms leaves it 30 ms more instead of 100 ms in all.
        tokio::time::sleep(Duration::from_millis(50)).await;
        stop.cancel();
        let err = read.await.expect("join").expect_err("stalled");
        assert_eq!(
            stalled(&err),
            Some(BodyStalled {
                waited: Duration::from_millis(70),
                stopping: true,
            })
        );
        let message = stalled(&err).expect("a stall").to_string();
        assert!(
            message.contains("while the node was shutting down"),
            "{message}"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_body_that_keeps_sending_through_the_stop_is_read_whole() {
        let stop = CancellationToken::new();
        stop.cancel();
        // Pieces 20 ms apart, under the 30 ms the stop leaves a wait.
        let bytes = axum::body::to_bytes(trickle_until(10, 20, false, &stop), usize::MAX)
            .await
            .expect("read whole");
        assert_eq!(bytes.len(), 20);
        // 40 ms apart is cut at the first wait.
        let err = axum::body::to_bytes(trickle_until(10, 40, false, &stop), usize::MAX)
            .await
            .expect_err("stalled");
        assert_eq!(
            stalled(&err),
            Some(BodyStalled {
                waited: Duration::from_millis(30),
                stopping: true,
            })
        );
    }

    /// Whether `idle_through_stop` resolves within `within` (paused clock: exact).
    async fn idles_out(
        stop: &CancellationToken,
        requests: &mut watch::Receiver<usize>,
        within: Duration,
    ) -> bool {
        let allowance = Duration::from_millis(100);
        tokio::time::timeout(within, idle_through_stop(stop, requests, allowance))
            .await
            .is_ok()
    }

    #[tokio::test(start_paused = true)]
    async fn a_connection_without_a_request_in_flight_is_dropped_an_allowance_after_the_stop() {
        let stop = CancellationToken::new();
        let (count, mut requests) = watch::channel(0usize);
        // Never while the node runs.
        assert!(!idles_out(&stop, &mut requests, Duration::from_secs(60)).await);
        stop.cancel();
        assert!(!idles_out(&stop, &mut requests, Duration::from_millis(99)).await);
        assert!(idles_out(&stop, &mut requests, Duration::from_millis(101)).await);
        // A request in flight holds it for as long as it runs, then the allowance counts again.
        let serving = InFlight::enter(&count);
        assert!(!idles_out(&stop, &mut requests, Duration::from_secs(60)).await);
        drop(serving);
        assert!(!idles_out(&stop, &mut requests, Duration::from_millis(99)).await);
        assert!(idles_out(&stop, &mut requests, Duration::from_millis(101)).await);
    }

    #[tokio::test]
    async fn a_response_counts_in_flight_until_its_last_frame() {
        let (count, requests) = watch::channel(0usize);
        let mut answer = Answering::new(Body::from("answer"), InFlight::enter(&count));
        let mut next =
            async || std::future::poll_fn(|cx| Pin::new(&mut answer).poll_frame(cx)).await;
        assert_eq!(*requests.borrow(), 1);
        let data = next().await.expect("a frame").expect("data");
        assert!(data.is_data());
        assert_eq!(*requests.borrow(), 1, "counted until the body has ended");
        assert!(next().await.is_none());
        assert_eq!(*requests.borrow(), 0);
        // A response dropped unsent (the connection closed) ends its count as well.
        let unsent = Answering::new(Body::from("answer"), InFlight::enter(&count));
        assert_eq!(*requests.borrow(), 1);
        drop(unsent);
        assert_eq!(*requests.borrow(), 0);
    }

    #[test]
    fn other_body_errors_are_not_stalls() {
        let err = axum::Error::new(std::io::Error::other("reset"));
        assert_eq!(stalled(&err), None);
    }
}
