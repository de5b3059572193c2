//! Session proxy URLs: validation and the masked view reads show (never the URL or credentials).

use url::Url;
use wagate_proto::dto::sessions::SessionProxy;

use super::error::{SessionError, SessionResult};

const SCHEMES: [&str; 5] = ["http", "https", "socks4", "socks5", "socks5h"];

pub(crate) fn parse(raw: &str) -> SessionResult<Url> {
    let bad = || {
        SessionError::BadInput(format!(
            "proxyUrl must be a URL with scheme {} and a host",
            SCHEMES.join(", ")
        ))
    };
    let url = Url::parse(raw).map_err(|_| bad())?;
    if !SCHEMES.contains(&url.scheme()) || url.host_str().is_none_or(str::is_empty) {
        return Err(bad());
    }
    Ok(url)
}

pub(crate) fn view(raw: Option<&str>) -> SessionProxy {
    let Some(url) = raw.and_then(|r| Url::parse(r).ok()) else {
        return SessionProxy {
            enabled: false,
            proxy_type: None,
            proxy_host: None,
            has_credentials: false,
        };
    };
    let host = url
        .host_str()
        .map(|h| match url.port_or_known_default().or(socks_port(&url)) {
            Some(port) => format!("{h}:{port}"),
            None => h.to_string(),
        });
    SessionProxy {
        enabled: true,
        proxy_type: Some(url.scheme().to_string()),
        proxy_host: host,
        has_credentials: !url.username().is_empty() || url.password().is_some(),
    }
}

/// The port SOCKS proxies listen on unless told otherwise (the `url` crate knows none for these schemes),
/// so `proxyHost` is always `host:port`.
fn socks_port(url: &Url) -> Option<u16> {
    url.scheme().starts_with("socks").then_some(1080)
}

/// SOCKS4 sends the user name as the connect user id and drops the password: credentials cannot work.
pub(crate) fn is_unauthenticatable(raw: &str) -> bool {
    Url::parse(raw).is_ok_and(|u| {
        u.scheme() == "socks4" && (!u.username().is_empty() || u.password().is_some())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_view_hides_url_and_credentials() {
        let v = view(Some("socks5://user:secret@proxy.example:1080"));
        assert_eq!(v.proxy_type.as_deref(), Some("socks5"));
        assert_eq!(v.proxy_host.as_deref(), Some("proxy.example:1080"));
        assert!(v.has_credentials && v.enabled);
        assert!(!view(None).enabled);
        assert_eq!(
            view(Some("socks5h://proxy.example")).proxy_host.as_deref(),
            Some("proxy.example:1080")
        );
        assert_eq!(
            view(Some("http://proxy.example")).proxy_host.as_deref(),
            Some("proxy.example:80")
        );
    }

    #[test]
    fn socks4_with_credentials_is_unauthenticatable() {
        assert!(is_unauthenticatable("socks4://u:p@h:1080"));
        assert!(!is_unauthenticatable("socks4://h:1080"));
        assert!(parse("ftp://h").is_err() && parse("not a url").is_err());
    }
}
