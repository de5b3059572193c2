//! The one place that decides who the client of a request is. `identify_client`, an early layer, stores the
//! answer as the `ClientAddr` extension; the rate limiter, the `allowedIps` check, audit rows and the
//! WebSocket all read that extension and nothing else.
//!
//! - A direct peer outside `TRUSTED_PROXIES` is the client; its `X-Forwarded-For` / `Forwarded` headers are
//!   ignored, so nobody escapes a limit or an `allowedIps` rule by sending them.
//! - Behind trusted proxies the client is the right-most address of the chain that is not itself trusted.
//!   `X-Forwarded-For` wins over `Forwarded` when both are present: the common ingress controllers append to
//!   `X-Forwarded-For`, and a client could otherwise plant a `Forwarded` header they pass through untouched.
//! - A request forwarded by a cluster peer that proves itself with `CLUSTER_SECRET` carries the client
//!   address the receiving node decided; it is marked `PeerForwarded` (already counted there).

use std::net::{IpAddr, SocketAddr};

use axum::extract::{ConnectInfo, Request};
use axum::http::HeaderMap;
use axum::http::request::Parts;
use ipnet::IpNet;
use subtle::ConstantTimeEq;

use crate::app::ApiContext;

/// What a forwarding node presents so the owner believes it (the value of `CLUSTER_SECRET`).
pub(crate) const CLUSTER_SECRET_HEADER: &str = "x-wagate-cluster-secret";
/// The client address the forwarding node decided; read only alongside a valid cluster secret.
pub(crate) const CLIENT_ADDRESS_HEADER: &str = "x-wagate-client-address";

/// The client address of a request, as decided by `client_address`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClientAddr(pub IpAddr);

/// Marks a request a cluster peer forwarded and proved with `CLUSTER_SECRET`: the node that received it from
/// the client has already counted it against the client's limit.
#[derive(Debug, Clone, Copy)]
pub struct PeerForwarded;

/// The client address from a request's extensions (absent only when no socket address is known).
pub fn client_ip_from(extensions: &axum::http::Extensions) -> Option<IpAddr> {
    extensions.get::<ClientAddr>().map(|addr| addr.0)
}

pub fn client_ip(parts: &Parts) -> Option<IpAddr> {
    client_ip_from(&parts.extensions)
}

/// Sets `ClientAddr` (and `PeerForwarded`) and strips the cluster headers so nothing later reads them.
pub(crate) fn identify_client(ctx: &ApiContext, req: &mut Request) {
    let peer = req
        .extensions()
        .get::<ConnectInfo<SocketAddr>>()
        .map(|ci| ci.0.ip());
    if let Some(peer) = peer {
        let mut client = client_address(peer, req.headers(), &ctx.config.trusted_proxies);
        if is_cluster_peer(req.headers(), ctx.config.cluster_secret.as_deref()) {
            if let Some(decided) = header_addr(req.headers(), CLIENT_ADDRESS_HEADER) {
                client = decided;
            }
            req.extensions_mut().insert(PeerForwarded);
        }
        req.extensions_mut().insert(ClientAddr(client));
    }
    let headers = req.headers_mut();
    headers.remove(CLUSTER_SECRET_HEADER);
    headers.remove(CLIENT_ADDRESS_HEADER);
}

/// Constant-time check of the presented cluster secret; false when this node has none.
fn is_cluster_peer(headers: &HeaderMap, secret: Option<&str>) -> bool {
    let (Some(secret), Some(presented)) = (secret, headers.get(CLUSTER_SECRET_HEADER)) else {
        return false;
    };
    bool::from(presented.as_bytes().ct_eq(secret.as_bytes()))
}

fn header_addr(headers: &HeaderMap, name: &str) -> Option<IpAddr> {
    let value = headers.get(name)?.to_str().ok()?;
    value
        .trim()
        .parse::<IpAddr>()
        .ok()
        .map(|ip| ip.to_canonical())
}

fn is_trusted(ip: IpAddr, trusted: &[IpNet]) -> bool {
    trusted.iter().any(|net| net.contains(&ip))
}

/// The client address: the peer unless it is a trusted proxy, else the right-most address of the
/// forwarded chain that is not trusted. An entry that cannot be read stops the walk at the trusted hop that
/// wrote it, so an obfuscated or garbled chain never lends a request someone else's address.
pub fn client_address(peer: IpAddr, headers: &HeaderMap, trusted: &[IpNet]) -> IpAddr {
    let mut current = peer.to_canonical();
    if !is_trusted(current, trusted) {
        return current;
    }
    for entry in forwarded_chain(headers).iter().rev() {
        let Some(hop) = parse_node(entry) else {
            return current;
        };
        if !is_trusted(hop, trusted) {
            return hop;
        }
        current = hop;
    }
    current
}

/// The chain of addresses, left (client side) to right, from every `X-Forwarded-For` header in order or,
/// when there is none, from the `for=` parameters of every `Forwarded` header.
fn forwarded_chain(headers: &HeaderMap) -> Vec<String> {
    let xff: Vec<String> = headers
        .get_all("x-forwarded-for")
        .iter()
        .flat_map(|value| list_items(value.to_str().unwrap_or("\u{0}")))
        .collect();
    if !xff.is_empty() {
        return xff;
    }
    headers
        .get_all("forwarded")
        .iter()
        .flat_map(|value| list_items(value.to_str().unwrap_or("\u{0}")))
        .map(|element| {
            element
                .split(';')
                .find_map(|pair| {
                    let (name, value) = pair.split_once('=')?;
                    name.trim()
                        .eq_ignore_ascii_case("for")
                        .then(|| value.trim().to_string())
                })
                // An element without `for=` still is a hop we cannot read.
                .unwrap_or_default()
        })
        .collect()
}

fn list_items(value: &str) -> Vec<String> {
    value
        .split(',')
        .map(|item| item.trim().to_string())
        .collect()
}

/// One hop: `1.2.3.4`, `1.2.3.4:80`, `2001:db8::1`, `"[2001:db8::1]:443"`; anything else (`unknown`,
/// `_hidden`, garbage) is unreadable.
fn parse_node(entry: &str) -> Option<IpAddr> {
    let entry = entry.trim().trim_matches('"');
    if let Some(rest) = entry.strip_prefix('[') {
        let (host, _) = rest.split_once(']')?;
        return host.parse::<IpAddr>().ok().map(|ip| ip.to_canonical());
    }
    if let Ok(ip) = entry.parse::<IpAddr>() {
        return Some(ip.to_canonical());
    }
    let (host, port) = entry.rsplit_once(':')?;
    port.parse::<u16>().ok()?;
    host.parse::<std::net::Ipv4Addr>().ok().map(IpAddr::V4)
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    fn nets(list: &[&str]) -> Vec<IpNet> {
        list.iter().map(|n| n.parse().expect("net")).collect()
    }

    fn ip(s: &str) -> IpAddr {
        s.parse().expect("ip")
    }

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.append(*name, HeaderValue::from_str(value).expect("value"));
        }
        map
    }

    #[test]
    fn an_untrusted_peer_is_the_client_whatever_it_claims() {
        let h = headers(&[
            ("x-forwarded-for", "203.0.113.9"),
            ("forwarded", "for=198.51.100.1"),
        ]);
        assert_eq!(
            client_address(ip("192.0.2.7"), &h, &nets(&["10.0.0.0/8"])),
            ip("192.0.2.7")
        );
        assert_eq!(client_address(ip("192.0.2.7"), &h, &[]), ip("192.0.2.7"));
    }

    #[test]
    fn behind_trusted_proxies_the_right_most_untrusted_hop_is_the_client() {
        let trusted = nets(&["10.0.0.0/8", "127.0.0.1/32"]);
        let h = headers(&[("x-forwarded-for", "6.6.6.6, 203.0.113.9, 10.1.1.1")]);
        assert_eq!(
            client_address(ip("127.0.0.1"), &h, &trusted),
            ip("203.0.113.9"),
            "the spoofed left-most entry is not believed"
        );
        let split = headers(&[
            ("x-forwarded-for", "6.6.6.6"),
            ("x-forwarded-for", "203.0.113.9:4711"),
        ]);
        assert_eq!(
            client_address(ip("10.0.0.5"), &split, &trusted),
            ip("203.0.113.9")
        );
        let all_trusted = headers(&[("x-forwarded-for", "10.2.2.2, 10.1.1.1")]);
        assert_eq!(
            client_address(ip("127.0.0.1"), &all_trusted, &trusted),
            ip("10.2.2.2")
        );
        assert_eq!(
            client_address(ip("127.0.0.1"), &HeaderMap::new(), &trusted),
            ip("127.0.0.1")
        );
    }

    #[test]
    fn the_forwarded_header_is_read_when_there_is_no_x_forwarded_for() {
        let trusted = nets(&["127.0.0.1/32"]);
        let h = headers(&[(
            "forwarded",
            "for=192.0.2.60;proto=http, for=\"[2001:db8:cafe::17]:4711\"",
        )]);
        assert_eq!(
            client_address(ip("127.0.0.1"), &h, &trusted),
            ip("2001:db8:cafe::17")
        );
        let both = headers(&[
            ("forwarded", "for=198.51.100.1"),
            ("x-forwarded-for", "203.0.113.9"),
        ]);
        assert_eq!(
            client_address(ip("127.0.0.1"), &both, &trusted),
            ip("203.0.113.9")
        );
    }

    #[test]
    fn an_unreadable_hop_stops_at_the_trusted_proxy_that_wrote_it() {
        let trusted = nets(&["127.0.0.1/32", "10.0.0.0/8"]);
        let h = headers(&[("x-forwarded-for", "203.0.113.9, unknown, 10.1.1.1")]);
        assert_eq!(
            client_address(ip("127.0.0.1"), &h, &trusted),
            ip("10.1.1.1")
        );
        let hidden = headers(&[("forwarded", "for=_hidden")]);
        assert_eq!(
            client_address(ip("127.0.0.1"), &hidden, &trusted),
            ip("127.0.0.1")
        );
    }

    #[test]
    fn mapped_ipv4_peers_match_ipv4_ranges() {
        let trusted = nets(&["127.0.0.1/32"]);
        let h = headers(&[("x-forwarded-for", "::ffff:203.0.113.9")]);
        assert_eq!(
            client_address(ip("::ffff:127.0.0.1"), &h, &trusted),
            ip("203.0.113.9")
        );
    }

    #[test]
    fn only_the_exact_cluster_secret_proves_a_peer() {
        let h = headers(&[(CLUSTER_SECRET_HEADER, "s3cret-s3cret-s3cret")]);
        assert!(is_cluster_peer(&h, Some("s3cret-s3cret-s3cret")));
        assert!(!is_cluster_peer(&h, Some("s3cret-s3cret-s3creT")));
        assert!(!is_cluster_peer(&h, Some("s3cret")));
        assert!(!is_cluster_peer(&h, None));
        assert!(!is_cluster_peer(&HeaderMap::new(), Some("s3cret")));
    }
}
