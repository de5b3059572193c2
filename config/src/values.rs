//! The value rules every knob uses: plain decimal integers (no exponent, hex, sign where not allowed, or unit
//! suffix) bounded by their kind (counts, milliseconds, bytes, MiB, days), exact `true`/`false`, byte sizes
//! with an optional kb/mb suffix, ratios, ports, URLs (http, Redis, database), listen hosts and address lists.
//! Each returns the broken rule as text; `load` puts the variable's name in front of it.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::str::FromStr;

use ipnet::IpNet;

fn is_plain_digits(s: &str) -> bool {
    !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit())
}

/// An unsigned plain decimal integer.
pub fn integer(raw: &str) -> Result<u64, String> {
    if !is_plain_digits(raw) {
        return Err(format!("must be a plain decimal integer (got '{raw}')"));
    }
    raw.parse()
        .map_err(|_| format!("is out of range (got '{raw}')"))
}

/// The most a count knob takes (things at once, queue places, requests per window, sends per day, failures,
/// log entries): one million. A product of two counts, or a count times a small factor, fits any integer the
/// node uses, and a semaphore holds that many permits.
pub const MAX_COUNT: u64 = 1_000_000;

/// The most requests a rate-limit tier admits per window: one billion, high enough to switch a tier off
/// (load tests do) and exact as a Redis script's number.
pub const MAX_REQUESTS: u64 = 1_000_000_000;

/// The most a byte-size knob takes: 1 TiB. Sums and `+ 1` stay far inside `i64`, the type of ffmpeg's `-fs`
/// and of database columns.
pub const MAX_BYTES: u64 = 1 << 40;

/// The most a MiB knob takes: 1 TiB in MiB, so its byte count is within [`MAX_BYTES`].
pub const MAX_MIB: u64 = MAX_BYTES >> 20;

/// The most a day-count knob takes: ten years.
pub const MAX_DAYS: u64 = 3_650;

/// A plain decimal integer from `min` (0 or 1) to `max`, `unit` naming what it counts in the refusal.
fn bounded(raw: &str, min: u64, max: u64, unit: &str) -> Result<u64, String> {
    if !is_plain_digits(raw) {
        return Err(format!("must be a plain decimal integer (got '{raw}')"));
    }
    match raw.parse::<u64>() {
        Ok(0) if min > 0 => Err("must be a positive integer (0 is refused)".to_owned()),
        Ok(n) if (min..=max).contains(&n) => Ok(n),
        _ => Err(format!(
            "must be between {min} and {max}{unit} (got '{raw}')"
        )),
    }
}

/// A count from 1 to [`MAX_COUNT`].
pub fn count(raw: &str) -> Result<u64, String> {
    bounded(raw, 1, MAX_COUNT, "")
}

/// A count from 0 to [`MAX_COUNT`].
pub fn count_or_zero(raw: &str) -> Result<u64, String> {
    bounded(raw, 0, MAX_COUNT, "")
}

/// Requests per rate-limit window, from 1 to [`MAX_REQUESTS`].
pub fn requests(raw: &str) -> Result<u64, String> {
    bounded(raw, 1, MAX_REQUESTS, "")
}

/// Milliseconds from 1 to [`MAX_TIMEOUT_MS`] (about 24.8 days): in µs, as a Redis `PX`, on a timer or summed
/// with a clock reading it never overflows (and in µs added to the epoch it stays exact in a Redis script's
/// double).
pub fn millis(raw: &str) -> Result<u64, String> {
    bounded(raw, 1, MAX_TIMEOUT_MS, " milliseconds")
}

/// Milliseconds from 0 to [`MAX_TIMEOUT_MS`].
pub fn millis_or_zero(raw: &str) -> Result<u64, String> {
    bounded(raw, 0, MAX_TIMEOUT_MS, " milliseconds")
}

/// Plain bytes from 1 to [`MAX_BYTES`] (no unit suffix).
pub fn bytes(raw: &str) -> Result<u64, String> {
    bounded(raw, 1, MAX_BYTES, " bytes")
}

/// Plain bytes from 0 to [`MAX_BYTES`].
pub fn bytes_or_zero(raw: &str) -> Result<u64, String> {
    bounded(raw, 0, MAX_BYTES, " bytes")
}

/// MiB from 0 to [`MAX_MIB`].
pub fn mebibytes_or_zero(raw: &str) -> Result<u64, String> {
    bounded(raw, 0, MAX_MIB, " MiB")
}

/// Days from 0 to [`MAX_DAYS`].
pub fn days_or_zero(raw: &str) -> Result<u64, String> {
    bounded(raw, 0, MAX_DAYS, " days")
}

/// A plain decimal integer of either sign.
pub fn signed(raw: &str) -> Result<i64, String> {
    let digits = raw.strip_prefix(['-', '+']).unwrap_or(raw);
    if !is_plain_digits(digits) {
        return Err(format!("must be a plain decimal integer (got '{raw}')"));
    }
    raw.parse()
        .map_err(|_| format!("is out of range (got '{raw}')"))
}

/// Exactly `true` or `false`.
pub fn boolean(raw: &str) -> Result<bool, String> {
    match raw {
        "true" => Ok(true),
        "false" => Ok(false),
        other => Err(format!("must be exactly true or false (got '{other}')")),
    }
}

/// A share from 0 to 1 as a plain decimal (`0.25`, `1`; no sign, exponent or percent).
pub fn ratio(raw: &str) -> Result<f64, String> {
    let rule = || format!("must be a decimal number between 0 and 1 (got '{raw}')");
    let (whole, fraction) = raw.split_once('.').unwrap_or((raw, ""));
    let is_decimal = (is_plain_digits(whole) || whole.is_empty())
        && (is_plain_digits(fraction) || fraction.is_empty())
        && !(whole.is_empty() && fraction.is_empty());
    if !is_decimal {
        return Err(rule());
    }
    raw.parse::<f64>()
        .ok()
        .filter(|r| (0.0..=1.0).contains(r))
        .ok_or_else(rule)
}

/// A TCP port, 1 to 65535.
pub fn port(raw: &str) -> Result<u16, String> {
    let rule = || format!("must be a port number between 1 and 65535 (got '{raw}')");
    let n = integer(raw).map_err(|_| rule())?;
    u16::try_from(n).ok().filter(|p| *p > 0).ok_or_else(rule)
}

/// Plain bytes, or a number with a `kb`/`mb` suffix (case-insensitive), from 1 byte to [`MAX_BYTES`].
pub fn byte_size(raw: &str) -> Result<u64, String> {
    let lower = raw.to_ascii_lowercase();
    let (digits, unit) = if let Some(d) = lower.strip_suffix("kb") {
        (d, 1024)
    } else if let Some(d) = lower.strip_suffix("mb") {
        (d, 1024 * 1024)
    } else {
        (lower.as_str(), 1)
    };
    let rule = || format!("must be bytes or a number with a kb/mb suffix (got '{raw}')");
    let digits = digits.trim();
    if !is_plain_digits(digits) {
        return Err(rule());
    }
    let n: u64 = digits.parse().map_err(|_| rule())?;
    match n.checked_mul(unit) {
        Some(0) => Err(rule()),
        Some(v) if v <= MAX_BYTES => Ok(v),
        _ => Err(format!(
            "must be between 1 and {MAX_BYTES} bytes ({}mb) (got '{raw}')",
            MAX_BYTES >> 20
        )),
    }
}

/// The longest timer the browser protocol accepts (a signed 32-bit millisecond count).
pub const MAX_TIMEOUT_MS: u64 = 2_147_483_647;

/// A timeout between 1 and [`MAX_TIMEOUT_MS`].
pub fn bounded_timeout(raw: &str) -> Result<u64, String> {
    let rule = || format!("must be between 1 and {MAX_TIMEOUT_MS}");
    match integer(raw) {
        Ok(n) if (1..=MAX_TIMEOUT_MS).contains(&n) => Ok(n),
        Ok(_) => Err(rule()),
        Err(e) => Err(e),
    }
}

/// A planned-handover wait, 0 to 60000 ms: a request held longer than a minute is better answered (409)
/// than kept waiting.
pub fn handover_wait(raw: &str) -> Result<u64, String> {
    match integer(raw)? {
        n if n <= 60_000 => Ok(n),
        _ => Err("must be between 0 and 60000 (milliseconds)".to_owned()),
    }
}

/// An absolute `http://` or `https://` URL with a host.
pub fn http_url(raw: &str) -> Result<String, String> {
    match url::Url::parse(raw) {
        Ok(u) if matches!(u.scheme(), "http" | "https") && u.has_host() => Ok(raw.to_owned()),
        _ => Err(format!("must be an http:// or https:// URL (got '{raw}')")),
    }
}

/// A listen address: an IP address (v4, v6, v6 in brackets or with a `%zone`) or a syntactically valid host
/// name. Whether a name resolves is only known at bind time; a value no resolver could take (`999.1.1.1`,
/// spaces, `host:port`) is refused here.
pub fn bind_host(raw: &str) -> Result<String, String> {
    let v6 = raw
        .strip_prefix('[')
        .and_then(|r| r.strip_suffix(']'))
        .unwrap_or(raw);
    let is_address = raw.parse::<IpAddr>().is_ok() || is_ipv6_with_zone(v6);
    if is_address || is_host_name(raw) {
        Ok(raw.to_owned())
    } else {
        Err(format!(
            "must be an IP address or a host name (got '{raw}')"
        ))
    }
}

fn is_ipv6_with_zone(raw: &str) -> bool {
    let (address, zone) = raw.split_once('%').unwrap_or((raw, "x"));
    address.parse::<Ipv6Addr>().is_ok()
        && !zone.is_empty()
        && zone
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
}

/// Dot-separated labels of letters, digits, `-` and `_` (container names use it), 1 to 63 each, 253 in all,
/// an optional final dot. The last label is not all digits: such a value is a (here malformed) IPv4 address,
/// which resolvers read in forms as odd as `1.2.3`.
fn is_host_name(raw: &str) -> bool {
    let name = raw.strip_suffix('.').unwrap_or(raw);
    let is_label = |l: &str| {
        (1..=63).contains(&l.len())
            && !l.starts_with('-')
            && !l.ends_with('-')
            && l.bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_'))
    };
    let last_is_numeric = name.rsplit('.').next().is_some_and(is_plain_digits);
    (1..=253).contains(&name.len())
        && name.split('.').all(is_label)
        && !last_is_numeric
        && name.parse::<Ipv4Addr>().is_err()
}

/// What a refusal of a URL that may hold a password shows of it: its scheme, never the rest.
fn scheme_shown(raw: &str) -> String {
    match url::Url::parse(raw) {
        Ok(u) => format!("(got scheme '{}')", u.scheme()),
        Err(_) => "(the value is not a URL)".to_owned(),
    }
}

/// A Redis URL the redis crate this build links opens: `redis://` or `valkey://` with a host that is not a
/// wildcard address and an optional integer database path, or a `unix://`, `redis+unix://` or
/// `valkey+unix://` socket path with an optional integer `db`. The build has no TLS support, so `rediss://`
/// and `valkeys://`, which would fail at connect, are refused here with that reason.
pub fn redis_url(raw: &str) -> Result<String, String> {
    let parsed = url::Url::parse(raw).ok();
    let broken = match parsed.as_ref().map(|u| (u.scheme(), u)) {
        Some(("redis" | "valkey", u)) => redis_tcp_rule(u),
        Some(("unix" | "redis+unix" | "valkey+unix", u)) => redis_socket_rule(u),
        Some(("rediss" | "valkeys", _)) => {
            Some("is a TLS URL, which this build cannot connect with; use redis://".to_owned())
        }
        _ => Some(format!(
            "must be a redis://host[:port][/db] or unix:///path/to/socket URL {}",
            scheme_shown(raw)
        )),
    };
    match broken {
        None => Ok(raw.to_owned()),
        Some(rule) => Err(rule),
    }
}

fn redis_tcp_rule(u: &url::Url) -> Option<String> {
    let db = u.path().trim_matches('/');
    let broken = match u.host_str() {
        None | Some("") => "must name a host (redis://host[:port][/db])",
        Some("0.0.0.0" | "[::]") => "must name a host to connect to, not a wildcard address",
        Some(_) if !db.is_empty() && db.parse::<i64>().is_err() => {
            "must end in a database number, if any (redis://host[:port][/db])"
        }
        Some(_) => return None,
    };
    Some(broken.to_owned())
}

fn redis_socket_rule(u: &url::Url) -> Option<String> {
    let db = u.query_pairs().find(|(k, _)| k == "db").map(|(_, v)| v);
    let broken = if u.to_file_path().is_err() {
        "must give the socket's absolute path (unix:///path/to/socket)"
    } else if db.is_some_and(|db| db.parse::<i64>().is_err()) {
        "must give an integer db, if any (unix:///path/to/socket?db=0)"
    } else {
        return None;
    };
    Some(broken.to_owned())
}

/// `DATABASE_URL` with `DATABASE_TYPE=postgres`: a `postgres://` or `postgresql://` URL.
pub fn postgres_url(raw: &str) -> Result<(), String> {
    match url::Url::parse(raw) {
        Ok(u) if matches!(u.scheme(), "postgres" | "postgresql") => Ok(()),
        _ => Err(format!(
            "must be a postgres:// or postgresql:// URL when DATABASE_TYPE=postgres {}",
            scheme_shown(raw)
        )),
    }
}

/// `DATABASE_URL` with `DATABASE_TYPE=sqlite`: a file path or a `sqlite:` URL; a URL of another kind
/// (`postgres://...`) would be taken for a file name.
pub fn sqlite_location(raw: &str) -> Result<(), String> {
    match url::Url::parse(raw) {
        Ok(u) if raw.contains("://") && u.scheme() != "sqlite" => Err(format!(
            "must be a file path or a sqlite: URL when DATABASE_TYPE=sqlite {}",
            scheme_shown(raw)
        )),
        _ => Ok(()),
    }
}

/// A comma-separated list of addresses and CIDR ranges; an address is a range of one. Empty entries are
/// skipped.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AddressList(pub Vec<IpNet>);

impl FromStr for AddressList {
    type Err = String;

    fn from_str(raw: &str) -> Result<Self, String> {
        raw.split(',')
            .map(str::trim)
            .filter(|entry| !entry.is_empty())
            .map(|entry| {
                entry
                    .parse::<IpNet>()
                    .or_else(|_| entry.parse::<IpAddr>().map(IpNet::from))
                    .map_err(|_| format!("entry '{entry}' is not an IP address or CIDR range"))
            })
            .collect::<Result<Vec<_>, _>>()
            .map(AddressList)
    }
}

/// A comma-separated list of distinct names (surrounding spaces and empty entries dropped).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NameList(pub Vec<String>);

impl FromStr for NameList {
    type Err = String;

    fn from_str(raw: &str) -> Result<Self, String> {
        let mut names: Vec<String> = Vec::new();
        for name in raw.split(',').map(str::trim).filter(|n| !n.is_empty()) {
            if names.iter().any(|n| n == name) {
                return Err(format!("names '{name}' twice"));
            }
            names.push(name.to_owned());
        }
        Ok(NameList(names))
    }
}

impl fmt::Display for NameList {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0.join(","))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn integers_never_panic_and_round_trip(raw in any::<String>(), n in any::<u64>()) {
            let _ = integer(&raw);
            prop_assert_eq!(integer(&n.to_string()).ok(), Some(n));
        }

        #[test]
        fn signed_integers_never_panic_and_round_trip(raw in any::<String>(), n in any::<i64>()) {
            let _ = signed(&raw);
            prop_assert_eq!(signed(&n.to_string()).ok(), Some(n));
        }

        #[test]
        fn exponent_hex_and_units_are_refused(n in 1u64..1_000_000, suffix in "(e3|ms|s|kb|x)") {
            for raw in [format!("{n}{suffix}"), format!("0x{n}"), format!("{n}.5"), format!("-{n}")] {
                prop_assert!(integer(&raw).is_err(), "{}", raw);
            }
        }

        #[test]
        fn only_exact_booleans(raw in any::<String>()) {
            prop_assert_eq!(boolean(&raw).is_ok(), raw == "true" || raw == "false");
        }

        #[test]
        fn byte_sizes_never_panic_and_scale_by_their_suffix(raw in any::<String>(), n in prop_oneof![any::<u64>(), 0..=MAX_BYTES + 1, 0..=MAX_MIB + 1], kb in "(kb|KB|Kb)", mb in "(mb|MB|mB)") {
            let _ = byte_size(&raw);
            let expect = |unit: u64| n.checked_mul(unit).filter(|v| (1..=MAX_BYTES).contains(v));
            prop_assert_eq!(byte_size(&n.to_string()).ok(), expect(1));
            prop_assert_eq!(byte_size(&format!("{n}{kb}")).ok(), expect(1024));
            prop_assert_eq!(byte_size(&format!("{n}{mb}")).ok(), expect(1024 * 1024));
        }

        #[test]
        fn bounded_kinds_take_exactly_their_range(raw in any::<String>(), n in prop_oneof![any::<u64>(), 0..=MAX_BYTES + 1, 0..=MAX_TIMEOUT_MS + 1, 0..=MAX_REQUESTS + 1, 0..=MAX_COUNT + 1]) {
            for (rule, min, max) in KINDS {
                let _ = rule(&raw);
                let want = (min..=max).contains(&n).then_some(n);
                prop_assert_eq!(rule(&n.to_string()).ok(), want);
            }
        }
    }

    type Rule = fn(&str) -> Result<u64, String>;

    const KINDS: [(Rule, u64, u64); 9] = [
        (count, 1, MAX_COUNT),
        (requests, 1, MAX_REQUESTS),
        (count_or_zero, 0, MAX_COUNT),
        (millis, 1, MAX_TIMEOUT_MS),
        (millis_or_zero, 0, MAX_TIMEOUT_MS),
        (bytes, 1, MAX_BYTES),
        (bytes_or_zero, 0, MAX_BYTES),
        (mebibytes_or_zero, 0, MAX_MIB),
        (days_or_zero, 0, MAX_DAYS),
    ];

    /// Past its bound (by one, or beyond u64) a value is refused with the range; 0 where a kind starts at 1
    /// keeps its own rule, and exponent, hex, sign and unit forms stay refused.
    #[test]
    fn bounded_kinds_refuse_with_their_range() {
        for (rule, min, max) in KINDS {
            assert_eq!(rule(&max.to_string()), Ok(max));
            assert_eq!(rule(&format!("00{max}")), Ok(max));
            assert_eq!(rule(&min.to_string()), Ok(min));
            for over in [
                (max + 1).to_string(),
                u64::MAX.to_string(),
                "18446744073709551616".to_owned(),
            ] {
                let err = rule(&over).expect_err(&over);
                assert!(
                    err.starts_with(&format!("must be between {min} and {max}"))
                        && err.ends_with(&format!("(got '{over}')")),
                    "{err}"
                );
            }
            if min == 1 {
                assert_eq!(
                    rule("0"),
                    Err("must be a positive integer (0 is refused)".to_owned())
                );
            }
            for bad in ["1e3", "0x10", "-1", "+1", "10ms", "10mb", "1.5", ""] {
                assert_eq!(
                    rule(bad),
                    Err(format!("must be a plain decimal integer (got '{bad}')")),
                    "{bad}"
                );
            }
        }
        assert_eq!(
            millis("18446744073709552"),
            Err(
                "must be between 1 and 2147483647 milliseconds (got '18446744073709552')"
                    .to_owned()
            )
        );
        assert_eq!(byte_size("1048576mb"), Ok(MAX_BYTES));
        assert_eq!(
            byte_size("1048577mb"),
            Err(
                "must be between 1 and 1099511627776 bytes (1048576mb) (got '1048577mb')"
                    .to_owned()
            )
        );
    }

    #[test]
    fn ports_and_timeouts_have_bounds() {
        assert!(port("0").is_err());
        assert!(port("70000").is_err());
        assert_eq!(port("9100"), Ok(9100));
        assert!(bounded_timeout("0").is_err());
        assert!(bounded_timeout("2147483648").is_err());
        assert_eq!(bounded_timeout("2147483647"), Ok(MAX_TIMEOUT_MS));
    }

    #[test]
    fn ratios_are_plain_decimals_from_0_to_1() {
        for (raw, want) in [
            ("0", 0.0),
            ("1", 1.0),
            ("0.25", 0.25),
            (".5", 0.5),
            ("1.0", 1.0),
        ] {
            assert_eq!(ratio(raw), Ok(want), "{raw}");
        }
        for raw in [
            "", ".", "2", "1.01", "-0.1", "+0.5", "1e-1", "NaN", "inf", "10%", "0,5",
        ] {
            assert!(ratio(raw).is_err(), "{raw}");
        }
    }

    #[test]
    fn bind_hosts_are_addresses_or_host_names() {
        for raw in [
            "0.0.0.0",
            "127.0.0.1",
            "::",
            "::1",
            "[::]",
            "fe80::1%eth0",
            "localhost",
            "localhost.",
            "wagate_api_1",
            "wagate-0.wagate-peers.default.svc.cluster.local",
        ] {
            assert_eq!(bind_host(raw).as_deref(), Ok(raw), "{raw}");
        }
        for raw in [
            "999.1.1.1",
            "1.2.3",
            "123",
            "256.0.0.1",
            "notan ip",
            "127.0.0.1:2785",
            "http://0.0.0.0",
            "-host",
            "host-",
            "a..b",
            ".",
            "[::",
            "fe80::1%",
            &"a".repeat(64),
        ] {
            let err = bind_host(raw).expect_err(raw);
            assert!(err.contains(&format!("(got '{raw}')")), "{err}");
        }
    }

    #[test]
    fn redis_urls_are_what_the_redis_client_opens() {
        for raw in [
            "redis://127.0.0.1:6379",
            "redis://:pw@cache/3",
            "redis://user:pw@[::1]:6380/0",
            "valkey://cache",
            "unix:///run/redis.sock",
            "redis+unix:///run/redis.sock?db=2",
        ] {
            assert_eq!(redis_url(raw).as_deref(), Ok(raw), "{raw}");
        }
        for raw in [
            "notaurl",
            "http://127.0.0.1:6379",
            "redis:cache",
            "redis://",
            "redis://0.0.0.0:6379",
            "redis://[::]:6379",
            "redis://cache/zero",
            "rediss://cache",
            "unix://run/redis.sock",
            "unix:///run/redis.sock?db=x",
        ] {
            assert!(redis_url(raw).is_err(), "{raw}");
        }
        let err = redis_url("http://:hunter2@cache").expect_err("http");
        assert!(!err.contains("hunter2"), "a password is never shown: {err}");
    }

    #[test]
    fn database_urls_match_their_type() {
        for raw in ["postgres://u:p@db:5432/x", "postgresql:///x?host=/run/pg"] {
            assert_eq!(postgres_url(raw), Ok(()), "{raw}");
        }
        for raw in ["mysql://u:hunter2@db/x", "./data/wagate.sqlite", "db:5432"] {
            let err = postgres_url(raw).expect_err(raw);
            assert!(!err.contains("hunter2"), "{err}");
        }
        for raw in [
            "./data/wagate.sqlite",
            "/data/x.sqlite",
            "sqlite::memory:",
            ":memory:",
            "sqlite://data/x.sqlite?mode=rwc",
        ] {
            assert_eq!(sqlite_location(raw), Ok(()), "{raw}");
        }
        for raw in ["postgres://u:p@db/x", "postgresql://db/x", "mysql://db/x"] {
            assert!(sqlite_location(raw).is_err(), "{raw}");
        }
    }

    #[test]
    fn http_urls_have_a_host() {
        assert!(http_url("http://127.0.0.1:2785").is_ok());
        for raw in ["notaurl", "ftp://x", "http://", "https://:443", "node:2785"] {
            assert!(http_url(raw).is_err(), "{raw}");
        }
    }

    #[test]
    fn lists_name_their_bad_entry() {
        let list: AddressList = "10.0.0.0/8, 127.0.0.1,,fd00::/8 ,::1"
            .parse()
            .expect("valid");
        assert_eq!(list.0.len(), 4);
        let err = "10.0.0.1,10.0.0.0/33"
            .parse::<AddressList>()
            .expect_err("bad range");
        assert!(err.contains("'10.0.0.0/33'"), "{err}");
        let names: NameList = "a, b ,c".parse().expect("names");
        assert_eq!(names.0, vec!["a", "b", "c"]);
        assert!("a,b,a".parse::<NameList>().is_err());
    }
}
