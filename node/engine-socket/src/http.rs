//! The library's HTTP client (media upload and download, media-connection refreshes) on reqwest, through the
//! session proxy when it has one. The library reads every status itself (a 401/404 means "refresh the media
//! connection"), so a completed exchange is `Ok` whatever its status, per its `HttpClient` contract.

use std::time::Duration;

use async_trait::async_trait;
use whatsapp_rust::http::{HttpClient, HttpRequest, HttpResponse};

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
}
