//! The outbound-address (SSRF) guard for webhook URLs: which IPs a delivery may reach, a DNS resolver for
//! reqwest that vets and pins the addresses of each connection, and the create/update-time `resolve_check`.
//! Input: webhook URLs and `WEBHOOK_SSRF_PROTECT`. It does not send requests or decide redirect policy.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use reqwest::dns::{Addrs, Name, Resolve, Resolving};
use url::{Host, Url};

/// Why a webhook URL is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GuardError {
    #[error("webhook url is not a valid http(s) URL: {0}")]
    InvalidUrl(String),
    #[error("webhook host {0} does not resolve")]
    Unresolvable(String),
    #[error("webhook host {host} resolves to a refused address {ip}")]
    Refused { host: String, ip: IpAddr },
}

/// Whether a delivery may connect to `ip` while the guard is on. Refuses loopback, private, link-local (and so
/// the 169.254.169.254 metadata address), CGNAT, unspecified, multicast, broadcast and reserved ranges, IPv6
/// ULA/link-local/site-local, and IPv4 addresses embedded in IPv6 (mapped, compatible, NAT64, 6to4).
pub fn is_allowed_ip(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => is_allowed_v4(v4),
        IpAddr::V6(v6) => is_allowed_v6(v6),
    }
}

fn is_allowed_v4(ip: Ipv4Addr) -> bool {
    let [a, b, c, _] = ip.octets();
    let refused = ip.is_unspecified()
        || ip.is_loopback()
        || ip.is_private()
        || ip.is_link_local()
        || ip.is_multicast()
        || ip.is_broadcast()
        || a == 0
        || (a == 100 && (b & 0xc0) == 64) // 100.64.0.0/10 CGNAT
        || (a == 192 && b == 0 && c == 0) // 192.0.0.0/24 IETF protocol assignments
        || (a == 198 && (b & 0xfe) == 18) // 198.18.0.0/15 benchmarking
        || a >= 240; // 240.0.0.0/4 reserved
    !refused
}

fn is_allowed_v6(ip: Ipv6Addr) -> bool {
    if let Some(v4) = embedded_v4(ip) {
        return is_allowed_v4(v4);
    }
    let first = ip.segments()[0];
    let refused = ip.is_unspecified()
        || ip.is_loopback()
        || ip.is_multicast()
        || (first & 0xfe00) == 0xfc00 // fc00::/7 unique local
        || (first & 0xffc0) == 0xfe80 // fe80::/10 link-local
        || (first & 0xffc0) == 0xfec0 // fec0::/10 site-local (deprecated)
        || (first == 0x2001 && ip.segments()[1] == 0x0db8) // documentation
        || (first == 0x2001 && ip.segments()[1] == 0); // Teredo: hides an arbitrary IPv4 peer
    !refused
}

/// The IPv4 address carried inside an IPv6 one, for the forms a resolver or a URL can use to smuggle one.
fn embedded_v4(ip: Ipv6Addr) -> Option<Ipv4Addr> {
    let s = ip.segments();
    let tail = Ipv4Addr::new((s[6] >> 8) as u8, s[6] as u8, (s[7] >> 8) as u8, s[7] as u8);
    if let Some(v4) = ip.to_ipv4_mapped() {
        return Some(v4);
    }
    if s[..6] == [0, 0, 0, 0, 0, 0] && !ip.is_loopback() && !ip.is_unspecified() {
        return Some(tail); // ::a.b.c.d (IPv4-compatible)
    }
    if s[..6] == [0x64, 0xff9b, 0, 0, 0, 0] {
        return Some(tail); // 64:ff9b::/96 NAT64
    }
    if s[0] == 0x2002 {
        return Some(Ipv4Addr::new(
            (s[1] >> 8) as u8,
            s[1] as u8,
            (s[2] >> 8) as u8,
            s[2] as u8,
        ));
    }
    None
}

/// Parses a webhook URL: http or https with a host.
pub fn parse_url(raw: &str) -> Result<Url, GuardError> {
    let url = Url::parse(raw).map_err(|e| GuardError::InvalidUrl(e.to_string()))?;
    if !matches!(url.scheme(), "http" | "https") || url.host().is_none() {
        return Err(GuardError::InvalidUrl(format!(
            "{raw}: scheme must be http or https"
        )));
    }
    Ok(url)
}

/// Refuses a URL whose host is an IP literal the guard forbids. IP literals never reach the resolver, so this
/// check is the only one they get.
pub fn check_literal(url: &Url) -> Result<(), GuardError> {
    let ip = match url.host() {
        Some(Host::Ipv4(v4)) => IpAddr::V4(v4),
        Some(Host::Ipv6(v6)) => IpAddr::V6(v6),
        _ => return Ok(()),
    };
    if is_allowed_ip(ip) {
        Ok(())
    } else {
        Err(GuardError::Refused {
            host: ip.to_string(),
            ip,
        })
    }
}

/// Create/update-time check: the URL parses, its host resolves, and with `is_protected` no resolved address
/// is refused. A host that does not resolve answers 400 at the API.
pub async fn resolve_check(raw: &str, is_protected: bool) -> Result<(), GuardError> {
    let url = parse_url(raw)?;
    if is_protected {
        check_literal(&url)?;
    }
    let host = url
        .host_str()
        .unwrap_or_default()
        .trim_matches(['[', ']'])
        .to_owned();
    let port = url.port_or_known_default().unwrap_or(80);
    let addrs = lookup(&host, port).await?;
    if is_protected {
        vet(&host, &addrs)?;
    }
    Ok(())
}

async fn lookup(host: &str, port: u16) -> Result<Vec<SocketAddr>, GuardError> {
    let addrs: Vec<SocketAddr> = tokio::net::lookup_host((host, port))
        .await
        .map_err(|_| GuardError::Unresolvable(host.to_owned()))?
        .collect();
    if addrs.is_empty() {
        return Err(GuardError::Unresolvable(host.to_owned()));
    }
    Ok(addrs)
}

/// A name that mixes public and refused addresses is refused as a whole: such answers are how rebinding
/// attacks look, and no legitimate receiver needs one.
fn vet(host: &str, addrs: &[SocketAddr]) -> Result<(), GuardError> {
    match addrs.iter().find(|a| !is_allowed_ip(a.ip())) {
        Some(bad) => Err(GuardError::Refused {
            host: host.to_owned(),
            ip: bad.ip(),
        }),
        None => Ok(()),
    }
}

/// The resolver a protected delivery client uses. reqwest connects only to the addresses it returns, so the
/// addresses vetted here are the ones the connection uses: no second lookup can rebind between check and connect.
#[derive(Debug, Clone, Copy, Default)]
pub struct GuardedResolver;

impl Resolve for GuardedResolver {
    fn resolve(&self, name: Name) -> Resolving {
        let host = name.as_str().to_owned();
        Box::pin(async move {
            let addrs = lookup(&host, 0).await?;
            vet(&host, &addrs)?;
            Ok(Box::new(addrs.into_iter()) as Addrs)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn allowed(s: &str) -> bool {
        is_allowed_ip(s.parse().unwrap())
    }

    #[test]
    fn public_addresses_are_allowed() {
        for ip in [
            "93.184.216.34",
            "8.8.8.8",
            "2606:4700:4700::1111",
            "::ffff:8.8.8.8",
        ] {
            assert!(allowed(ip), "{ip}");
        }
    }

    #[test]
    fn internal_addresses_are_refused() {
        let refused = [
            "127.0.0.1",
            "127.1.2.3",
            "10.0.0.1",
            "172.16.5.4",
            "172.31.255.255",
            "192.168.1.1",
            "169.254.169.254",
            "169.254.1.1",
            "100.64.0.1",
            "100.127.255.255",
            "0.0.0.0",
            "0.1.2.3",
            "224.0.0.1",
            "239.255.255.255",
            "255.255.255.255",
            "240.0.0.1",
            "198.18.0.1",
            "192.0.0.8",
            "::",
            "::1",
            "fc00::1",
            "fd12:3456::1",
            "fe80::1",
            "fec0::1",
            "ff02::1",
            "2001:db8::1",
            "::ffff:127.0.0.1",
            "::ffff:169.254.169.254",
            "::ffff:10.0.0.1",
            "::127.0.0.1",
            "64:ff9b::a9fe:a9fe",
            "2002:7f00:1::",
            "2001:0:4136:e378::1",
        ];
        for ip in refused {
            assert!(!allowed(ip), "{ip}");
        }
    }

    #[test]
    fn cgnat_boundaries() {
        assert!(allowed("100.63.255.255"));
        assert!(!allowed("100.64.0.0"));
        assert!(allowed("100.128.0.0"));
    }

    #[test]
    fn ip_literal_urls_are_checked() {
        let bad = parse_url("http://[::ffff:127.0.0.1]:8080/x").unwrap();
        assert!(matches!(
            check_literal(&bad),
            Err(GuardError::Refused { .. })
        ));
        let meta = parse_url("http://169.254.169.254/latest/meta-data").unwrap();
        assert!(check_literal(&meta).is_err());
        assert!(check_literal(&parse_url("https://8.8.8.8/").unwrap()).is_ok());
    }

    #[test]
    fn non_http_schemes_are_invalid() {
        assert!(matches!(
            parse_url("ftp://example.com/"),
            Err(GuardError::InvalidUrl(_))
        ));
        assert!(matches!(
            parse_url("not a url"),
            Err(GuardError::InvalidUrl(_))
        ));
    }

    #[tokio::test]
    async fn resolve_check_refuses_loopback_names_when_protected() {
        let err = resolve_check("http://localhost:9/hook", true)
            .await
            .unwrap_err();
        assert!(matches!(err, GuardError::Refused { .. }), "{err:?}");
        assert!(
            resolve_check("http://localhost:9/hook", false)
                .await
                .is_ok()
        );
    }

    #[tokio::test]
    async fn resolve_check_fails_for_unresolvable_hosts() {
        let err = resolve_check("http://no-such-host.invalid/hook", false)
            .await
            .unwrap_err();
        assert_eq!(err, GuardError::Unresolvable("no-such-host.invalid".into()));
    }
}
