//! The socket engine's WebSocket transport factory: the library's own transport (tokio-websockets under
//! `from_websocket`), but dialled by us so the endpoint URL is configurable (`SOCKET_WS_URL`, offline tests)
//! and the session proxy applies, and observed so the engine can count connect attempts and failures (the
//! library retries silently: it emits no event for a connection that never got past the handshake).

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;
use tokio_websockets::{ClientBuilder, Connector};
use whatsapp_rust::async_channel;
use whatsapp_rust::transport::{Transport, TransportEvent, TransportFactory, from_websocket};

use crate::proxy::ProxyConfig;

/// The endpoint the library dials by default (WhatsApp Web's chat socket).
pub const DEFAULT_WS_URL: &str = whatsapp_rust::wacore::net::WHATSAPP_WEB_WS_URL;
/// The `Origin` WhatsApp expects on the upgrade; it names the endpoint we stand in for, whatever we dial.
const ORIGIN: &str = whatsapp_rust::wacore::net::WHATSAPP_WEB_ORIGIN;
/// A dial (TCP, proxy tunnel, TLS, upgrade) that takes longer than this counts as a failed attempt, so a
/// black-holed endpoint is retried instead of hanging one attempt for the OS's TCP timeout.
const DIAL_TIMEOUT: Duration = Duration::from_secs(20);
/// Same capacity as the library's transport channel.
const EVENT_CAPACITY: usize = 64;

/// What the engine learns from the transport. Called synchronously from the dialling task: keep it cheap.
pub trait TransportObserver: Send + Sync {
    /// The client starts a connection attempt (the first one, or a retry).
    fn attempt(&self);
    /// The attempt failed before a WebSocket was open.
    fn dial_failed(&self, reason: &str);
    /// An open WebSocket ended (server close, read error, end of stream, or our own disconnect).
    fn closed(&self, reason: &str);
}

/// A validated `ws://` or `wss://` endpoint.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Endpoint {
    url: String,
    uri: http::Uri,
    host: String,
    port: u16,
    tls: bool,
}

impl Endpoint {
    /// Parses an endpoint URL (`SOCKET_WS_URL`); the error says what is wrong with it.
    pub fn parse(raw: &str) -> Result<Endpoint, String> {
        let uri: http::Uri = raw.parse().map_err(|e| format!("not a URL: {e}"))?;
        let tls = match uri.scheme_str() {
            Some("wss") => true,
            Some("ws") => false,
            _ => return Err("the scheme must be ws or wss".into()),
        };
        let host = uri
            .host()
            .filter(|h| !h.is_empty())
            .ok_or("the URL has no host")?
            .trim_start_matches('[')
            .trim_end_matches(']')
            .to_string();
        let port = uri.port_u16().unwrap_or(if tls { 443 } else { 80 });
        Ok(Endpoint {
            url: raw.to_string(),
            uri,
            host,
            port,
            tls,
        })
    }

    pub fn url(&self) -> &str {
        &self.url
    }
}

impl Default for Endpoint {
    fn default() -> Self {
        // The library's constant always parses; the fallback only keeps this free of a panic path.
        Endpoint::parse(DEFAULT_WS_URL).unwrap_or(Endpoint {
            url: DEFAULT_WS_URL.to_string(),
            uri: http::Uri::from_static("wss://web.whatsapp.com/ws/chat"),
            host: "web.whatsapp.com".into(),
            port: 443,
            tls: true,
        })
    }
}

trait Io: AsyncRead + AsyncWrite + Unpin + Send + 'static {}
impl<T: AsyncRead + AsyncWrite + Unpin + Send + 'static> Io for T {}

/// One session's transport factory: the endpoint, the session proxy, and the engine's observer.
pub struct SocketTransportFactory {
    endpoint: Endpoint,
    proxy: Option<ProxyConfig>,
    observer: Option<Arc<dyn TransportObserver>>,
}

impl SocketTransportFactory {
    pub fn new(endpoint: Endpoint, proxy: Option<ProxyConfig>) -> Self {
        Self {
            endpoint,
            proxy,
            observer: None,
        }
    }

    pub fn with_observer(mut self, observer: Arc<dyn TransportObserver>) -> Self {
        self.observer = Some(observer);
        self
    }

    async fn dial(&self) -> anyhow::Result<tokio_websockets::WebSocketStream<impl Io>> {
        let ep = &self.endpoint;
        let stream: Box<dyn Io> = match &self.proxy {
            Some(proxy) => Box::new(proxy.dial(&ep.host, ep.port).await?),
            None => Box::new(TcpStream::connect((ep.host.as_str(), ep.port)).await?),
        };
        let connector = if ep.tls {
            whatsapp_rust::transport::default_tls_connector()
        } else {
            Connector::Plain
        };
        let stream = connector.wrap(&ep.host, stream).await?;
        let origin = http::HeaderValue::from_static(ORIGIN);
        let (ws, _) = ClientBuilder::from_uri(ep.uri.clone())
            .add_header(http::header::ORIGIN, origin)?
            .connect_on(stream)
            .await?;
        Ok(ws)
    }
}

#[async_trait]
impl TransportFactory for SocketTransportFactory {
    async fn create_transport(
        &self,
    ) -> Result<(Arc<dyn Transport>, async_channel::Receiver<TransportEvent>), anyhow::Error> {
        if let Some(observer) = &self.observer {
            observer.attempt();
        }
        let ws = match tokio::time::timeout(DIAL_TIMEOUT, self.dial()).await {
            Ok(Ok(ws)) => ws,
            Ok(Err(error)) => return Err(self.failed(format!("{error:#}"))),
            Err(_) => return Err(self.failed(format!("no answer within {DIAL_TIMEOUT:?}"))),
        };
        let (transport, events) = from_websocket(ws);
        let Some(observer) = self.observer.clone() else {
            return Ok((transport, events));
        };
        // Relay the events so the observer sees why the socket ended; the relay ends with the socket.
        let (tx, rx) = async_channel::bounded(EVENT_CAPACITY);
        tokio::spawn(async move {
            while let Ok(event) = events.recv().await {
                if let TransportEvent::Disconnected(reason) = &event {
                    observer.closed(&reason.to_string());
                }
                if tx.send(event).await.is_err() {
                    break;
                }
            }
        });
        Ok((transport, rx))
    }
}

impl SocketTransportFactory {
    fn failed(&self, reason: String) -> anyhow::Error {
        let reason = format!("cannot reach {}: {reason}", self.endpoint.url);
        if let Some(observer) = &self.observer {
            observer.dial_failed(&reason);
        }
        anyhow::anyhow!(reason)
    }
}
