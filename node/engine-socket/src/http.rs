//! The library's HTTP client (media upload and download, media-connection refreshes) on reqwest, through the
//! session proxy when it has one. The library reads every status itself (a 401/404 means "refresh the media
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

/// One session's media HTTP client. A client that could not be built (a SOCKS proxy, which reqwest is built
/// without here) fails every exchange with the reason: refusing beats bypassing the proxy.
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
        Some(proxy) if proxy.kind == ProxyKind::Socks5 => {
            return Err(
                "socks5 proxies are not supported for media transfers; use an http(s) proxy".into(),
            );
        }
        Some(proxy) => builder.proxy(reqwest::Proxy::all(&proxy.url).map_err(|e| e.to_string())?),
        None => builder.no_proxy(),
    };
    builder.build().map_err(|e| e.to_string())
}

#[async_trait]
impl HttpClient for ReqwestHttpClient {
    async fn execute(&self, request: HttpRequest) -> anyhow::Result<HttpResponse> {
        let client = self
            .client
            .as_ref()
            .map_err(|reason| anyhow::anyhow!("media HTTP client: {reason}"))?;
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
            .map_err(|reason| anyhow::anyhow!("media HTTP client: {reason}"))?
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
