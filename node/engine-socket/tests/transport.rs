//! The transport factory against loopback servers: a direct WebSocket, one through an HTTP CONNECT proxy
//! (with Basic credentials), one through SOCKS5, and a refused endpoint reported to the observer; and the
//! library's HTTP client through the same SOCKS5 proxy.

// tungstenite fixes the handshake callback's error type (a full HTTP response); nothing to shrink.
#![allow(clippy::result_large_err)]

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

use futures::{SinkExt, StreamExt};
use parking_lot::Mutex;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio_tungstenite::tungstenite::Message;
use wagate_engine_socket::http::ReqwestHttpClient;
use wagate_engine_socket::proxy::ProxyConfig;
use wagate_engine_socket::transport::{Endpoint, SocketTransportFactory, TransportObserver};
use wagate_engine_socket::whatsapp_rust::http::{HttpClient, HttpRequest};
use wagate_engine_socket::whatsapp_rust::transport::{TransportEvent, TransportFactory};

/// A WebSocket server that greets every client with one binary frame, then echoes.
async fn ws_server() -> (u16, Arc<Mutex<Vec<String>>>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let origins = Arc::new(Mutex::new(Vec::new()));
    let seen = origins.clone();
    tokio::spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            let seen = seen.clone();
            tokio::spawn(async move {
                let callback =
                    |req: &tokio_tungstenite::tungstenite::handshake::server::Request, resp| {
                        let origin = req
                            .headers()
                            .get("origin")
                            .and_then(|v| v.to_str().ok())
                            .unwrap_or_default()
                            .to_string();
                        seen.lock().push(origin);
                        Ok(resp)
                    };
                let Ok(mut ws) = tokio_tungstenite::accept_hdr_async(tcp, callback).await else {
                    return;
                };
                let _ = ws.send(Message::Binary(vec![1, 2, 3].into())).await;
                while let Some(Ok(msg)) = ws.next().await {
                    if msg.is_binary() && ws.send(msg).await.is_err() {
                        break;
                    }
                }
            });
        }
    });
    (port, origins)
}

/// A CONNECT proxy that records each request head, then relays bytes both ways.
async fn connect_proxy() -> (u16, Arc<Mutex<Vec<String>>>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let heads = Arc::new(Mutex::new(Vec::new()));
    let seen = heads.clone();
    tokio::spawn(async move {
        while let Ok((mut client, _)) = listener.accept().await {
            let seen = seen.clone();
            tokio::spawn(async move {
                let mut head = Vec::new();
                while !head.ends_with(b"\r\n\r\n") {
                    match client.read_u8().await {
                        Ok(b) => head.push(b),
                        Err(_) => return,
                    }
                }
                let text = String::from_utf8_lossy(&head).to_string();
                let target = text
                    .split_whitespace()
                    .nth(1)
                    .unwrap_or_default()
                    .to_string();
                seen.lock().push(text);
                let Ok(mut upstream) = TcpStream::connect(target).await else {
                    let _ = client.write_all(b"HTTP/1.1 502 Bad Gateway\r\n\r\n").await;
                    return;
                };
                let _ = client
                    .write_all(b"HTTP/1.1 200 Connection established\r\n\r\n")
                    .await;
                let _ = tokio::io::copy_bidirectional(&mut client, &mut upstream).await;
            });
        }
    });
    (port, heads)
}

/// A SOCKS5 proxy without authentication that records the requested host and port.
async fn socks5_proxy() -> (u16, Arc<Mutex<Vec<String>>>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let targets = Arc::new(Mutex::new(Vec::new()));
    let seen = targets.clone();
    tokio::spawn(async move {
        while let Ok((mut client, _)) = listener.accept().await {
            let seen = seen.clone();
            tokio::spawn(async move {
                let mut greeting = [0u8; 2];
                client.read_exact(&mut greeting).await.unwrap();
                let mut methods = vec![0u8; usize::from(greeting[1])];
                client.read_exact(&mut methods).await.unwrap();
                client.write_all(&[0x05, 0x00]).await.unwrap();
                let mut request = [0u8; 5];
                client.read_exact(&mut request).await.unwrap();
                assert_eq!(request[3], 0x03, "a domain-name request");
                let mut name = vec![0u8; usize::from(request[4])];
                client.read_exact(&mut name).await.unwrap();
                let port = client.read_u16().await.unwrap();
                let host = String::from_utf8(name).unwrap();
                seen.lock().push(format!("{host}:{port}"));
                let mut upstream = TcpStream::connect((host.as_str(), port)).await.unwrap();
                client
                    .write_all(&[0x05, 0x00, 0x00, 0x01, 127, 0, 0, 1, 0, 0])
                    .await
                    .unwrap();
                let _ = tokio::io::copy_bidirectional(&mut client, &mut upstream).await;
            });
        }
    });
    (port, targets)
}

#[derive(Default)]
struct Counts {
    attempts: AtomicU32,
    failures: Mutex<Vec<String>>,
    closed: Mutex<Vec<String>>,
}

impl TransportObserver for Counts {
    fn attempt(&self) {
        self.attempts.fetch_add(1, Ordering::SeqCst);
    }
    fn dial_failed(&self, reason: &str) {
        self.failures.lock().push(reason.to_string());
    }
    fn closed(&self, reason: &str) {
        self.closed.lock().push(reason.to_string());
    }
}

/// Opens a transport and checks the greeting frame arrives after `Connected`.
async fn open_and_read(factory: SocketTransportFactory) {
    let (transport, events) = factory.create_transport().await.expect("transport");
    assert!(matches!(events.recv().await, Ok(TransportEvent::Connected)));
    match events.recv().await {
        Ok(TransportEvent::DataReceived(data)) => assert_eq!(&data[..], &[1, 2, 3]),
        other => panic!("expected the greeting, got {other:?}"),
    }
    transport.send(vec![9, 9].into()).await.expect("send");
    match events.recv().await {
        Ok(TransportEvent::DataReceived(data)) => assert_eq!(&data[..], &[9, 9]),
        other => panic!("expected the echo, got {other:?}"),
    }
    transport.disconnect().await;
}

#[tokio::test]
async fn dials_the_configured_endpoint_with_the_web_origin() {
    let (ws_port, origins) = ws_server().await;
    let endpoint = Endpoint::parse(&format!("ws://127.0.0.1:{ws_port}/ws/chat")).unwrap();
    let counts = Arc::new(Counts::default());
    open_and_read(SocketTransportFactory::new(endpoint, None).with_observer(counts.clone())).await;
    assert_eq!(counts.attempts.load(Ordering::SeqCst), 1);
    assert_eq!(origins.lock().as_slice(), ["https://web.whatsapp.com"]);
}

#[tokio::test]
async fn tunnels_through_an_http_connect_proxy_with_credentials() {
    let (ws_port, _) = ws_server().await;
    let (proxy_port, heads) = connect_proxy().await;
    let endpoint = Endpoint::parse(&format!("ws://127.0.0.1:{ws_port}/ws/chat")).unwrap();
    let proxy = ProxyConfig::parse(&format!("http://user:p%40ss@127.0.0.1:{proxy_port}")).unwrap();
    open_and_read(SocketTransportFactory::new(endpoint, Some(proxy))).await;
    let heads = heads.lock().clone();
    assert_eq!(heads.len(), 1, "one tunnel");
    assert!(
        heads[0].starts_with(&format!("CONNECT 127.0.0.1:{ws_port} HTTP/1.1\r\n")),
        "{}",
        heads[0]
    );
    // base64("user:p@ss")
    assert!(
        heads[0].contains("Proxy-Authorization: Basic dXNlcjpwQHNz\r\n"),
        "{}",
        heads[0]
    );
}

#[tokio::test]
async fn tunnels_through_a_socks5_proxy() {
    let (ws_port, _) = ws_server().await;
    let (proxy_port, targets) = socks5_proxy().await;
    let endpoint = Endpoint::parse(&format!("ws://localhost:{ws_port}/ws/chat")).unwrap();
    let proxy = ProxyConfig::parse(&format!("socks5://127.0.0.1:{proxy_port}")).unwrap();
    open_and_read(SocketTransportFactory::new(endpoint, Some(proxy))).await;
    assert_eq!(targets.lock().as_slice(), [format!("localhost:{ws_port}")]);
}

/// The library's HTTP client (the client-version fetch before every connect, media) goes through a socks5
/// session proxy too, the proxy resolving the name, instead of refusing it before anything is sent.
#[tokio::test]
async fn the_http_client_goes_through_a_socks5_proxy() {
    // reqwest is built without a default crypto provider (the node's boot installs ring the same way).
    let _ = rustls::crypto::ring::default_provider().install_default();
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let http_port = listener.local_addr().unwrap().port();
    tokio::spawn(async move {
        while let Ok((mut tcp, _)) = listener.accept().await {
            tokio::spawn(async move {
                let mut head = Vec::new();
                while !head.ends_with(b"\r\n\r\n") {
                    match tcp.read_u8().await {
                        Ok(b) => head.push(b),
                        Err(_) => return,
                    }
                }
                let _ = tcp
                    .write_all(
                        b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok",
                    )
                    .await;
            });
        }
    });
    let (proxy_port, targets) = socks5_proxy().await;
    let proxy = ProxyConfig::parse(&format!("socks5://127.0.0.1:{proxy_port}")).unwrap();
    let client = ReqwestHttpClient::new(Some(&proxy));
    let response = client
        .execute(HttpRequest::get(format!(
            "http://localhost:{http_port}/sw.js"
        )))
        .await
        .expect("through the proxy");
    assert_eq!(response.status_code, 200);
    assert_eq!(response.body, b"ok");
    assert_eq!(
        targets.lock().as_slice(),
        [format!("localhost:{http_port}")]
    );
}

#[tokio::test]
async fn a_refused_endpoint_is_reported_to_the_observer() {
    let port = {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        listener.local_addr().unwrap().port()
    };
    let endpoint = Endpoint::parse(&format!("ws://127.0.0.1:{port}/ws/chat")).unwrap();
    let counts = Arc::new(Counts::default());
    let factory = SocketTransportFactory::new(endpoint, None).with_observer(counts.clone());
    assert!(factory.create_transport().await.is_err());
    assert!(factory.create_transport().await.is_err());
    assert_eq!(counts.attempts.load(Ordering::SeqCst), 2);
    let failures = counts.failures.lock().clone();
    assert_eq!(failures.len(), 2);
    assert!(
        failures[0].contains(&format!("cannot reach ws://127.0.0.1:{port}/ws/chat")),
        "{failures:?}"
    );
}

#[tokio::test]
async fn a_proxy_that_refuses_the_tunnel_fails_the_dial() {
    let (proxy_port, _) = connect_proxy().await;
    // The proxy cannot reach this closed port and answers 502.
    let closed = {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        listener.local_addr().unwrap().port()
    };
    let endpoint = Endpoint::parse(&format!("ws://127.0.0.1:{closed}/ws/chat")).unwrap();
    let proxy = ProxyConfig::parse(&format!("http://127.0.0.1:{proxy_port}")).unwrap();
    let counts = Arc::new(Counts::default());
    let factory = SocketTransportFactory::new(endpoint, Some(proxy)).with_observer(counts.clone());
    let error = factory.create_transport().await.err().expect("refused");
    assert!(error.to_string().contains("502"), "{error}");
    assert_eq!(counts.failures.lock().len(), 1);
}

#[test]
fn endpoint_and_proxy_urls_are_validated() {
    assert!(Endpoint::parse("wss://web.whatsapp.com/ws/chat").is_ok());
    assert!(Endpoint::parse("https://web.whatsapp.com/ws/chat").is_err());
    assert!(Endpoint::parse("ws:///nohost").is_err());
    assert!(ProxyConfig::parse("socks4://127.0.0.1:1080").is_err());
    let proxy = ProxyConfig::parse("http://u:secret@proxy.example:3128").unwrap();
    assert!(
        !format!("{proxy:?}").contains("secret"),
        "credentials never printed"
    );
    assert_eq!(proxy.port, 3128);
}
