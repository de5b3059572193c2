//! The library's HTTP client (the client-version fetch before each connect, media upload and download,
//! media-connection refreshes) on reqwest, through the session proxy when it has one (http, https or
//! socks5: reqwest's `socks` feature, hyper-util's SOCKS5 connector, so no crate of its own). The library reads every status itself (a 401/404 means "refresh the media
//! connection"), so a completed exchange is `Ok` whatever its status, per its `HttpClient` contract.
//! Downloads stream: the library decrypts on a blocking thread from a `Read`, which here pulls the
//! response body chunk by chunk from the async client, so a large file is never held whole in memory.

use std::time::Duration;

use async_trait::async_trait;
use whatsapp_rust::http::{HttpClient, HttpRequest, HttpResponse};
use whatsapp_rust::wacore::net::StreamingHttpResponse;

use crate::proxy::{ProxyConfig, ProxyKind};

/// Media transfers can be large; this bounds a stalled exchange, not a slow one.
const READ_TIMEOUT: Duration = Duration::from_secs(60);
const CONNECT_TIMEOUT: Duration = Duration::from_secs(20);

/// One session's HTTP client. A client that could not be built (a proxy URL reqwest refuses) fails every
/// exchange with the reason: refusing beats bypassing the proxy.
#[derive(Clone)]
pub struct ReqwestHttpClient {
    client: Result<reqwest::Client, String>,
}

impl ReqwestHttpClient {
    /// A client that goes through `proxy` (never around it) when the session has one.
    pub fn new(proxy: Option<&ProxyConfig>) -> Self {
        Self {
            client: build(proxy),
        }
    }
}

fn build(proxy: Option<&ProxyConfig>) -> Result<reqwest::Client, String> {
    let builder = reqwest::Client::builder()
        .connect_timeout(CONNECT_TIMEOUT)
        .read_timeout(READ_TIMEOUT);
    let builder = match proxy {
        Some(proxy) => {
            let url = reqwest_proxy_url(proxy);
            builder.proxy(reqwest::Proxy::all(url.as_str()).map_err(|e| e.to_string())?)
        }
        None => builder.no_proxy(),
    };
    builder.build().map_err(|e| e.to_string())
}

/// The proxy URL as reqwest takes it. A `socks5://` proxy resolves host names for us, as the WebSocket
/// transport has it do (it always sends the name): reqwest spells that `socks5h://` (its `socks5://`
/// resolves locally, which an offline or split-DNS host cannot).
fn reqwest_proxy_url(proxy: &ProxyConfig) -> String {
    match proxy.kind {
        ProxyKind::Socks5 => match proxy.url.split_once("://") {
            Some((_, rest)) => format!("socks5h://{rest}"),
            None => proxy.url.clone(),
        },
        ProxyKind::Http | ProxyKind::Https => proxy.url.clone(),
    }
}

#[async_trait]
impl HttpClient for ReqwestHttpClient {
    async fn execute(&self, request: HttpRequest) -> anyhow::Result<HttpResponse> {
        let client = self
            .client
            .as_ref()
            .map_err(|reason| anyhow::anyhow!("HTTP client: {reason}"))?;
        let method = reqwest::Method::from_bytes(request.method.as_bytes())?;
        let mut builder = client.request(method, &request.url);
        for (name, value) in &request.headers {
            builder = builder.header(name, value);
        }
        if let Some(body) = request.body {
            builder = builder.body(body.to_vec());
        }
        let response = builder.send().await?;
        let status_code = response.status().as_u16();
        let body = response.bytes().await?.to_vec();
        Ok(HttpResponse { status_code, body })
    }

    fn supports_streaming(&self) -> bool {
        self.client.is_ok()
    }

    /// Called by the library on a blocking thread of our runtime, so the runtime's handle is there to
    /// drive the async request from it.
    fn execute_streaming(&self, request: HttpRequest) -> anyhow::Result<StreamingHttpResponse> {
        let client = self
            .client
            .as_ref()
            .map_err(|reason| anyhow::anyhow!("HTTP client: {reason}"))?
            .clone();
        let handle = tokio::runtime::Handle::try_current()
            .map_err(|e| anyhow::anyhow!("media download outside the runtime: {e}"))?;
        let method = reqwest::Method::from_bytes(request.method.as_bytes())?;
        let mut builder = client.request(method, &request.url);
        for (name, value) in &request.headers {
            builder = builder.header(name, value);
        }
        let response = handle.block_on(builder.send())?;
        Ok(StreamingHttpResponse {
            status_code: response.status().as_u16(),
            body: Box::new(BodyReader {
                handle,
                response,
                pending: bytes::Bytes::new(),
            }),
        })
    }
}

/// A response body read synchronously, one network chunk at a time.
struct BodyReader {
    handle: tokio::runtime::Handle,
    response: reqwest::Response,
    /// What is left of the last chunk.
    pending: bytes::Bytes,
}

impl std::io::Read for BodyReader {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        while self.pending.is_empty() {
            match self.handle.block_on(self.response.chunk()) {
                Ok(Some(chunk)) => self.pending = chunk,
                Ok(None) => return Ok(0),
                Err(e) => return Err(std::io::Error::other(e)),
            }
        }
        let n = buf.len().min(self.pending.len());
        buf[..n].copy_from_slice(&self.pending.split_to(n));
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_socks5_proxy_builds_a_client_that_resolves_through_the_proxy() {
        // reqwest is built without a default crypto provider (the node's boot installs ring the same way).
        let _ = rustls::crypto::ring::default_provider().install_default();
        let proxy = ProxyConfig::parse("socks5://user:p%40ss@127.0.0.1:1080").expect("proxy");
        assert_eq!(
            reqwest_proxy_url(&proxy),
            "socks5h://user:p%40ss@127.0.0.1:1080"
        );
        assert!(
            build(Some(&proxy)).is_ok(),
            "{:?}",
            build(Some(&proxy)).err()
        );
        let proxy = ProxyConfig::parse("socks5h://127.0.0.1:1080").expect("proxy");
        assert_eq!(reqwest_proxy_url(&proxy), "socks5h://127.0.0.1:1080");
        let proxy = ProxyConfig::parse("http://127.0.0.1:3128").expect("proxy");
        assert_eq!(reqwest_proxy_url(&proxy), "http://127.0.0.1:3128");
    }
}
