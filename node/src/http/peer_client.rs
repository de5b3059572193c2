//! The HTTP/1 client a node reaches its peers with: forwards to a session's owner and actions taken on a
//! peer's behalf. Peers are addressed by the plain `http://host:port` URL they announce, so this is hyper's
//! pooled client over TCP with nothing a general client adds per request (URL parsing with IDNA, redirect
//! and proxy policies, body adapters): on a node forwarding reads, that work was a visible share of its CPU.

use std::time::Duration;

use axum::body::Body;
use axum::http::{Request, Response};
use hyper::body::Incoming;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::{TokioExecutor, TokioTimer};

/// How long a pooled connection to a peer may sit unused; the peer's own keep-alive limit is longer.
const POOL_IDLE: Duration = Duration::from_secs(90);

/// Why a request to a peer got no answer.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum PeerError {
    /// No connection could be made: the peer never saw the request.
    NotReached,
    /// No answer within the budget after the request was sent.
    TimedOut,
    /// The connection closed before any answer: most often a pooled connection the peer had closed (a
    /// graceful stop closes idle ones) as the request went out on it, but the peer may also have read the
    /// request and broken before answering, so only an idempotent request is sent again.
    ClosedUnanswered,
    /// The exchange broke after the request was sent.
    Broke,
}

/// The pooled client and the answer budget (`SESSION_PROXY_TIMEOUT_MS`), which also bounds each wait for
/// the next piece of a streamed answer.
#[derive(Clone)]
pub(crate) struct PeerClient {
    client: Client<HttpConnector, Body>,
    budget: Duration,
}

impl PeerClient {
    pub(crate) fn new(timeout_ms: u64) -> Self {
        let budget = Duration::from_millis(timeout_ms);
        let mut connector = HttpConnector::new();
        // Without it a small answer waits on the peer for Nagle's delayed ACK.
        connector.set_nodelay(true);
        connector.set_connect_timeout(Some(budget.min(Duration::from_secs(5))));
        let client = Client::builder(TokioExecutor::new())
            .pool_idle_timeout(POOL_IDLE)
            .pool_timer(TokioTimer::new())
            .build(connector);
        Self { client, budget }
    }

    /// Sends `request` (an absolute `http://` URI) and answers the peer's response, its body streamed.
    pub(crate) async fn send(&self, request: Request<Body>) -> Result<Response<Body>, PeerError> {
        let answer = tokio::time::timeout(self.budget, self.client.request(request))
            .await
            .map_err(|_elapsed| PeerError::TimedOut)?
            .map_err(|err| classify(&err))?;
        let budget = self.budget;
        Ok(answer
            .map(|body: Incoming| Body::new(tower_http::timeout::TimeoutBody::new(budget, body))))
    }
}

fn classify(err: &hyper_util::client::legacy::Error) -> PeerError {
    if err.is_connect() {
        PeerError::NotReached
    } else if closed_unanswered(err) {
        PeerError::ClosedUnanswered
    } else {
        PeerError::Broke
    }
}

/// Whether the connection was closed under a request the peer had not started to answer: hyper reports
/// the closed connection as an incomplete message, or the socket as reset or its pipe broken.
fn closed_unanswered(err: &(dyn std::error::Error + 'static)) -> bool {
    let mut source = err.source();
    while let Some(cause) = source {
        if let Some(hyper_err) = cause.downcast_ref::<hyper::Error>()
            && hyper_err.is_incomplete_message()
        {
            return true;
        }
        if let Some(io) = cause.downcast_ref::<std::io::Error>()
            && matches!(
                io.kind(),
                std::io::ErrorKind::ConnectionReset | std::io::ErrorKind::BrokenPipe
            )
        {
            return true;
        }
        source = cause.source();
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::StatusCode;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::TcpListener;

    fn get(url: &str) -> Request<Body> {
        Request::get(url)
            .body(Body::empty())
            .unwrap_or_else(|err| panic!("request: {err}"))
    }

    #[tokio::test]
    async fn a_closed_port_is_not_reached() {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr");
        drop(listener);
        let sent = PeerClient::new(2_000)
            .send(get(&format!("http://{addr}/x")))
            .await;
        assert_eq!(sent.err(), Some(PeerError::NotReached));
    }

    #[tokio::test]
    async fn a_peer_that_reads_and_never_answers_times_out() {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr");
        let held = tokio::spawn(async move {
            let (mut socket, _) = listener.accept().await.expect("accept");
            let mut buf = [0u8; 1024];
            let _ = socket.read(&mut buf).await;
            tokio::time::sleep(Duration::from_secs(5)).await;
        });
        let sent = PeerClient::new(200)
            .send(get(&format!("http://{addr}/x")))
            .await;
        assert_eq!(sent.err(), Some(PeerError::TimedOut));
        held.abort();
    }

    #[tokio::test]
    async fn a_connection_closed_unread_is_told_apart_from_an_answer() {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr");
        tokio::spawn(async move {
            // The first connection is closed without a reply; the second gets an answer.
            let (first, _) = listener.accept().await.expect("accept");
            drop(first);
            let (mut second, _) = listener.accept().await.expect("accept");
            let mut buf = [0u8; 1024];
            let _ = second.read(&mut buf).await;
            let reply = b"HTTP/1.1 201 Created\r\ncontent-length: 2\r\n\r\nok";
            second.write_all(reply).await.expect("reply");
        });
        let client = PeerClient::new(2_000);
        let first = client.send(get(&format!("http://{addr}/x"))).await;
        assert_eq!(first.err(), Some(PeerError::ClosedUnanswered));
        let second = client
            .send(get(&format!("http://{addr}/x")))
            .await
            .expect("answered");
        assert_eq!(second.status(), StatusCode::CREATED);
        let body = axum::body::to_bytes(second.into_body(), 1024)
            .await
            .expect("body");
        assert_eq!(&body[..], b"ok");
    }
}
