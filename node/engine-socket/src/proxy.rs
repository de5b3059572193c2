//! The session proxy as the socket engine uses it: parsing the session's `proxyUrl` and opening a TCP stream
//! to a target host through it (HTTP CONNECT over plain TCP or TLS, SOCKS5 with optional user/password).
//! The WebSocket transport dials through this; the media HTTP client hands the same URL to reqwest.

use std::fmt;
use std::pin::Pin;
use std::task::{Context, Poll};

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio::net::TcpStream;
use tokio_websockets::MaybeTlsStream;
use url::Url;

/// Longest CONNECT response head we read before giving up (a proxy's answer is a few hundred bytes).
const MAX_CONNECT_RESPONSE: usize = 8 * 1024;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProxyKind {
    /// `http://`: CONNECT over plain TCP.
    Http,
    /// `https://`: CONNECT over TLS to the proxy.
    Https,
    /// `socks5://` (the proxy resolves names too: we always send the host name) and `socks5h://`.
    Socks5,
}

/// A validated session proxy.
#[derive(Clone, PartialEq, Eq)]
pub struct ProxyConfig {
    pub kind: ProxyKind,
    pub host: String,
    pub port: u16,
    pub credentials: Option<(String, String)>,
    /// The URL as given, for the HTTP client.
    pub url: String,
}

impl fmt::Debug for ProxyConfig {
    // Never print credentials.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ProxyConfig")
            .field("kind", &self.kind)
            .field("host", &self.host)
            .field("port", &self.port)
            .field("credentials", &self.credentials.is_some())
            .finish()
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ProxyError {
    #[error("proxy URL is not valid: {0}")]
    BadUrl(String),
    #[error("the socket engine does not support {0} proxies (use http, https or socks5)")]
    Unsupported(String),
    #[error("proxy connection failed: {0}")]
    Io(#[from] std::io::Error),
    #[error("proxy TLS failed: {0}")]
    Tls(String),
    #[error("proxy refused the tunnel: {0}")]
    Refused(String),
}

impl ProxyConfig {
    pub fn parse(raw: &str) -> Result<ProxyConfig, ProxyError> {
        let url = Url::parse(raw).map_err(|e| ProxyError::BadUrl(e.to_string()))?;
        let kind = match url.scheme() {
            "http" => ProxyKind::Http,
            "https" => ProxyKind::Https,
            "socks5" | "socks5h" => ProxyKind::Socks5,
            other => return Err(ProxyError::Unsupported(other.to_string())),
        };
        let host = url
            .host_str()
            .filter(|h| !h.is_empty())
            .ok_or_else(|| ProxyError::BadUrl("no host".into()))?
            .trim_start_matches('[')
            .trim_end_matches(']')
            .to_string();
        let port = url.port().unwrap_or(match kind {
            ProxyKind::Http => 80,
            ProxyKind::Https => 443,
            ProxyKind::Socks5 => 1080,
        });
        let credentials = (!url.username().is_empty()).then(|| {
            let decode = |s: &str| percent_decode(s).unwrap_or_else(|| s.to_string());
            (
                decode(url.username()),
                decode(url.password().unwrap_or_default()),
            )
        });
        Ok(ProxyConfig {
            kind,
            host,
            port,
            credentials,
            url: raw.to_string(),
        })
    }

    /// Opens a tunnel to `target_host:target_port` through this proxy.
    pub async fn dial(
        &self,
        target_host: &str,
        target_port: u16,
    ) -> Result<ProxyStream, ProxyError> {
        let tcp = TcpStream::connect((self.host.as_str(), self.port)).await?;
        match self.kind {
            ProxyKind::Http => {
                let mut stream = MaybeTlsStream::Plain(tcp);
                self.connect_tunnel(&mut stream, target_host, target_port)
                    .await?;
                Ok(ProxyStream(stream))
            }
            ProxyKind::Https => {
                let connector = whatsapp_rust::transport::default_tls_connector();
                let mut stream = connector
                    .wrap(&self.host, tcp)
                    .await
                    .map_err(|e| ProxyError::Tls(e.to_string()))?;
                self.connect_tunnel(&mut stream, target_host, target_port)
                    .await?;
                Ok(ProxyStream(stream))
            }
            ProxyKind::Socks5 => {
                let mut tcp = tcp;
                self.socks5(&mut tcp, target_host, target_port).await?;
                Ok(ProxyStream(MaybeTlsStream::Plain(tcp)))
            }
        }
    }

    async fn connect_tunnel<S: AsyncRead + AsyncWrite + Unpin>(
        &self,
        stream: &mut S,
        host: &str,
        port: u16,
    ) -> Result<(), ProxyError> {
        let authority = if host.contains(':') {
            format!("[{host}]:{port}")
        } else {
            format!("{host}:{port}")
        };
        let mut request = format!("CONNECT {authority} HTTP/1.1\r\nHost: {authority}\r\n");
        if let Some((user, password)) = &self.credentials {
            request.push_str(&format!(
                "Proxy-Authorization: Basic {}\r\n",
                STANDARD.encode(format!("{user}:{password}"))
            ));
        }
        request.push_str("\r\n");
        stream.write_all(request.as_bytes()).await?;
        stream.flush().await?;
        // Read byte by byte up to the end of the head: anything after it belongs to the tunnel.
        let mut head = Vec::with_capacity(256);
        while !head.ends_with(b"\r\n\r\n") {
            if head.len() >= MAX_CONNECT_RESPONSE {
                return Err(ProxyError::Refused("response head too long".into()));
            }
            let byte = stream.read_u8().await?;
            head.push(byte);
        }
        let text = String::from_utf8_lossy(&head);
        let status_line = text.lines().next().unwrap_or_default().to_string();
        let code = status_line.split_whitespace().nth(1).unwrap_or_default();
        if code.starts_with('2') {
            Ok(())
        } else {
            Err(ProxyError::Refused(status_line))
        }
    }

    /// RFC 1928 (+ RFC 1929 user/password): always a domain-name request, so names resolve at the proxy.
    async fn socks5(
        &self,
        stream: &mut TcpStream,
        host: &str,
        port: u16,
    ) -> Result<(), ProxyError> {
        let methods: &[u8] = if self.credentials.is_some() {
            &[0x05, 0x02, 0x00, 0x02]
        } else {
            &[0x05, 0x01, 0x00]
        };
        stream.write_all(methods).await?;
        let mut choice = [0u8; 2];
        stream.read_exact(&mut choice).await?;
        match (choice[1], &self.credentials) {
            (0x00, _) => {}
            (0x02, Some((user, password))) => {
                let (user, password) = (user.as_bytes(), password.as_bytes());
                let too_long = || ProxyError::BadUrl("socks5 credentials over 255 bytes".into());
                let mut auth = vec![0x01, u8::try_from(user.len()).map_err(|_| too_long())?];
                auth.extend_from_slice(user);
                auth.push(u8::try_from(password.len()).map_err(|_| too_long())?);
                auth.extend_from_slice(password);
                stream.write_all(&auth).await?;
                let mut status = [0u8; 2];
                stream.read_exact(&mut status).await?;
                if status[1] != 0 {
                    return Err(ProxyError::Refused("socks5 authentication failed".into()));
                }
            }
            _ => {
                return Err(ProxyError::Refused(
                    "socks5: no acceptable auth method".into(),
                ));
            }
        }
        let name = host.as_bytes();
        let len = u8::try_from(name.len())
            .map_err(|_| ProxyError::BadUrl("host name over 255 bytes".into()))?;
        let mut request = vec![0x05, 0x01, 0x00, 0x03, len];
        request.extend_from_slice(name);
        request.extend_from_slice(&port.to_be_bytes());
        stream.write_all(&request).await?;
        let mut reply = [0u8; 4];
        stream.read_exact(&mut reply).await?;
        if reply[1] != 0 {
            return Err(ProxyError::Refused(format!(
                "socks5 reply code {}",
                reply[1]
            )));
        }
        // Skip the bound address the proxy reports.
        let skip = match reply[3] {
            0x01 => 4,
            0x04 => 16,
            0x03 => usize::from(stream.read_u8().await?),
            other => return Err(ProxyError::Refused(format!("socks5 address type {other}"))),
        };
        let mut rest = vec![0u8; skip + 2];
        stream.read_exact(&mut rest).await?;
        Ok(())
    }
}

/// A tunnel through the proxy (TLS to the proxy for `https://`); the target's own TLS goes on top.
pub struct ProxyStream(MaybeTlsStream<TcpStream>);

impl AsyncRead for ProxyStream {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.0).poll_read(cx, buf)
    }
}

impl AsyncWrite for ProxyStream {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.0).poll_write(cx, buf)
    }
    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.0).poll_flush(cx)
    }
    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.0).poll_shutdown(cx)
    }
}

fn percent_decode(s: &str) -> Option<String> {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = s.get(i + 1..i + 3)?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}
