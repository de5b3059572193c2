//! The value rules every knob uses: plain decimal integers (no exponent, hex, sign where not allowed, or unit
//! suffix), exact `true`/`false`, byte sizes with an optional kb/mb suffix, ratios, ports, URLs and address
//! lists. Each returns the broken rule as text; `load` puts the variable's name in front of it.

use std::fmt;
use std::net::IpAddr;
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

/// An unsigned plain decimal integer above 0.
pub fn positive(raw: &str) -> Result<u64, String> {
    match integer(raw)? {
        0 => Err("must be a positive integer (0 is refused)".to_owned()),
        n => Ok(n),
    }
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

/// Plain bytes, or a number with a `kb`/`mb` suffix (case-insensitive), above 0.
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
        Some(0) | None => Err(rule()),
        Some(v) => Ok(v),
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

/// An `http://` or `https://` URL.
pub fn http_url(raw: &str) -> Result<String, String> {
    match url::Url::parse(raw) {
        Ok(u) if matches!(u.scheme(), "http" | "https") => Ok(raw.to_owned()),
        _ => Err(format!("must be an http:// or https:// URL (got '{raw}')")),
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
        fn byte_sizes_never_panic_and_scale_by_their_suffix(raw in any::<String>(), n in any::<u64>(), kb in "(kb|KB|Kb)", mb in "(mb|MB|mB)") {
            let _ = byte_size(&raw);
            let expect = |unit: u64| n.checked_mul(unit).filter(|v| *v > 0);
            prop_assert_eq!(byte_size(&n.to_string()).ok(), expect(1));
            prop_assert_eq!(byte_size(&format!("{n}{kb}")).ok(), expect(1024));
            prop_assert_eq!(byte_size(&format!("{n}{mb}")).ok(), expect(1024 * 1024));
        }
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
