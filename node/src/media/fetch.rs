//! Media URL download: http(s) only, through the session's proxy (unless `SESSION_PROXY_URL_FETCH=false`),
//! and with the guard on (`MEDIA_URL_GUARD`, default true) through the outbound-address guard: IP
//! literals are checked up front and on every redirect, names by a resolver that vets and pins the
//! addresses each connection uses. Streams into a `Sink`; never buffers the body.
//!
//! Time limits follow the size the download may reach rather than one flat figure: a connection must
//! open within `CONNECT_TIMEOUT`, the server must keep sending (no read waits longer than
//! `IDLE_TIMEOUT`), and the whole download must finish within `BASE_TIMEOUT` plus the time the cap
//! takes at `MIN_RATE` (50 MB, the default cap: about 4 minutes), so a large file on a slow but steady
//! link arrives while a stalled or trickling server is dropped.

use std::time::Duration;

use futures::StreamExt;
use wagate_workers::webhook::guard::{self, GuardError, GuardedResolver};

use super::sink::Sink;
use super::{MediaError, StoredMedia};

const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
const IDLE_TIMEOUT: Duration = Duration::from_secs(30);
const BASE_TIMEOUT: Duration = Duration::from_secs(60);
/// Bytes per second a download of the full cap must keep up on average.
const MIN_RATE: u64 = 256 * 1024;
const MAX_REDIRECTS: usize = 5;

/// How URLs are fetched; built from the config at boot.
#[derive(Debug, Clone, Copy)]
pub(crate) struct FetchOptions {
    /// `MEDIA_URL_GUARD`: refuse loopback, private, link-local and metadata addresses.
    pub is_guarded: bool,
    /// `SESSION_PROXY_URL_FETCH`: go through the session's proxy when it has one.
    pub use_session_proxy: bool,
}

impl Default for FetchOptions {
    fn default() -> Self {
        FetchOptions {
            is_guarded: true,
            use_session_proxy: true,
        }
    }
}

fn guard_error(err: GuardError) -> MediaError {
    match err {
        GuardError::InvalidUrl(e) => {
            MediaError::BadInput(format!("url is not a valid http(s) URL: {e}"))
        }
        GuardError::Unresolvable(host) => {
            MediaError::Unreachable(format!("host {host} does not resolve"))
        }
        GuardError::Refused { host, ip } => MediaError::Blocked(format!("{host} resolves to {ip}")),
    }
}

/// The form check `download` starts with (http or https with a host), fetching nothing.
pub(super) fn check_url(url: &str) -> Result<(), MediaError> {
    guard::parse_url(url).map(drop).map_err(guard_error)
}

/// The guard's refusal anywhere in a reqwest error's source chain.
fn classify(err: reqwest::Error) -> MediaError {
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(&err);
    while let Some(cause) = source {
        if let Some(guard) = cause.downcast_ref::<GuardError>() {
            return guard_error(guard.clone());
        }
        if cause.to_string().contains("outbound-address guard") {
            return MediaError::Blocked(cause.to_string());
        }
        source = cause.source();
    }
    MediaError::Unreachable(err.to_string())
}

fn client(opts: &FetchOptions, proxy_url: Option<&str>) -> Result<reqwest::Client, MediaError> {
    let guarded = opts.is_guarded;
    let policy = reqwest::redirect::Policy::custom(move |attempt| {
        if attempt.previous().len() >= MAX_REDIRECTS {
            return attempt.error("too many redirects");
        }
        if guarded && let Err(err) = guard::check_literal(attempt.url()) {
            return attempt.error(format!(
                "redirect refused by the outbound-address guard: {err}"
            ));
        }
        attempt.follow()
    });
    let mut builder = reqwest::Client::builder()
        .connect_timeout(CONNECT_TIMEOUT)
        .read_timeout(IDLE_TIMEOUT)
        .redirect(policy);
    if guarded {
        builder = builder.dns_resolver(GuardedResolver);
    }
    builder = match proxy_url.filter(|_| opts.use_session_proxy) {
        Some(proxy) => builder.proxy(
            reqwest::Proxy::all(proxy)
                .map_err(|e| MediaError::BadInput(format!("session proxy: {e}")))?,
        ),
        None => builder.no_proxy(),
    };
    builder
        .build()
        .map_err(|e| MediaError::Unreachable(e.to_string()))
}

pub(super) async fn download(
    opts: &FetchOptions,
    url: &str,
    proxy_url: Option<&str>,
    mut sink: Sink,
) -> Result<StoredMedia, MediaError> {
    let parsed = guard::parse_url(url).map_err(guard_error)?;
    if opts.is_guarded {
        guard::check_literal(&parsed).map_err(guard_error)?;
    }
    let resp = client(opts, proxy_url)?
        .get(parsed)
        .timeout(download_timeout(sink_max(&sink)))
        .send()
        .await
        .map_err(classify)?;
    if !resp.status().is_success() {
        return Err(MediaError::Unreachable(format!(
            "the server answered {}",
            resp.status()
        )));
    }
    if resp
        .content_length()
        .is_some_and(|len| len > sink_max(&sink))
    {
        return Err(MediaError::TooLarge(sink_max(&sink)));
    }
    let content_type = resp
        .headers()
        .get(reqwest::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    let mut body = resp.bytes_stream();
    while let Some(chunk) = body.next().await {
        sink.write(&chunk.map_err(classify)?).await?;
    }
    sink.finish(content_type).await
}

/// A small resource read whole into memory (link-preview pages and images).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Fetched {
    pub bytes: Vec<u8>,
    pub content_type: Option<String>,
    /// The body went on past the cap and was cut there.
    pub truncated: bool,
}

/// Fetches `url` like `download` (guard, proxy, redirects) but keeps at most `max_bytes` in memory and
/// gives up after `budget`: a page's head is enough for its preview tags, so the rest is never read.
pub(super) async fn fetch_small(
    opts: &FetchOptions,
    url: &str,
    proxy_url: Option<&str>,
    max_bytes: usize,
    budget: Duration,
) -> Result<Fetched, MediaError> {
    let fetch = async {
        let parsed = guard::parse_url(url).map_err(guard_error)?;
        if opts.is_guarded {
            guard::check_literal(&parsed).map_err(guard_error)?;
        }
        let resp = client(opts, proxy_url)?
            .get(parsed)
            .send()
            .await
            .map_err(classify)?;
        if !resp.status().is_success() {
            return Err(MediaError::Unreachable(format!(
                "the server answered {}",
                resp.status()
            )));
        }
        let content_type = resp
            .headers()
            .get(reqwest::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string);
        let mut bytes = Vec::new();
        let mut truncated = false;
        let mut body = resp.bytes_stream();
        while let Some(chunk) = body.next().await {
            let chunk = chunk.map_err(classify)?;
            let room = max_bytes - bytes.len();
            if chunk.len() > room {
                bytes.extend_from_slice(&chunk[..room]);
                truncated = true;
                break;
            }
            bytes.extend_from_slice(&chunk);
        }
        Ok(Fetched {
            bytes,
            content_type,
            truncated,
        })
    };
    tokio::time::timeout(budget, fetch)
        .await
        .map_err(|_| MediaError::Unreachable(format!("no answer within {budget:?}")))?
}

/// The whole download's limit for a body of up to `max` bytes.
fn download_timeout(max: u64) -> Duration {
    BASE_TIMEOUT.saturating_add(Duration::from_secs(max / MIN_RATE))
}

fn sink_max(sink: &Sink) -> u64 {
    sink.max()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_download_limit_grows_with_the_cap() {
        assert_eq!(download_timeout(0), BASE_TIMEOUT);
        // The default cap (50 MiB) at the minimum rate: 200 s on top of the base.
        let default_cap = 50 * 1024 * 1024;
        assert_eq!(
            download_timeout(default_cap),
            BASE_TIMEOUT + Duration::from_secs(200)
        );
        assert!(download_timeout(u64::MAX) > download_timeout(default_cap));
    }
}
