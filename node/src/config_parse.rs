//! Strict parsers for environment values: plain decimal integers only (no exponent, hex, sign where not
//! allowed, or unit suffix), exact `true`/`false` booleans, and byte sizes with an optional kb/mb suffix.

use crate::config::{ConfigError, refuse};

type Lookup = Box<dyn Fn(&str) -> Option<String>>;

/// An environment lookup in which an empty value reads as unset.
pub(crate) struct Env {
    lookup: Lookup,
}

impl Env {
    pub(crate) fn new(lookup: impl Fn(&str) -> Option<String> + 'static) -> Env {
        Env {
            lookup: Box::new(lookup),
        }
    }

    pub(crate) fn get(&self, var: &str) -> Option<String> {
        (self.lookup)(var).filter(|v| !v.trim().is_empty())
    }

    pub(crate) fn string(&self, var: &str, default: &str) -> String {
        self.get(var).unwrap_or_else(|| default.to_string())
    }
}

fn is_plain_digits(s: &str) -> bool {
    !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit())
}

pub(crate) fn parse_u64(env: &Env, var: &'static str, default: u64) -> Result<u64, ConfigError> {
    let Some(raw) = env.get(var) else {
        return Ok(default);
    };
    let value = raw.trim();
    if !is_plain_digits(value) {
        return Err(refuse(
            var,
            format!("must be a plain decimal integer (got '{raw}')"),
        ));
    }
    value
        .parse()
        .map_err(|_| refuse(var, format!("is out of range (got '{raw}')")))
}

pub(crate) fn parse_i64(env: &Env, var: &'static str, default: i64) -> Result<i64, ConfigError> {
    let Some(raw) = env.get(var) else {
        return Ok(default);
    };
    let value = raw.trim();
    let digits = value.strip_prefix(['-', '+']).unwrap_or(value);
    if !is_plain_digits(digits) {
        return Err(refuse(
            var,
            format!("must be a plain decimal integer (got '{raw}')"),
        ));
    }
    value
        .parse()
        .map_err(|_| refuse(var, format!("is out of range (got '{raw}')")))
}

pub(crate) fn parse_bool(env: &Env, var: &'static str, default: bool) -> Result<bool, ConfigError> {
    match env.get(var).as_deref() {
        None => Ok(default),
        Some("true") => Ok(true),
        Some("false") => Ok(false),
        Some(other) => Err(refuse(
            var,
            format!("must be exactly true or false (got '{other}')"),
        )),
    }
}

/// Plain bytes, or a number with a `kb`/`mb` suffix (case-insensitive), as `BODY_SIZE_LIMIT` allows.
pub(crate) fn parse_byte_size(
    env: &Env,
    var: &'static str,
    default: u64,
) -> Result<u64, ConfigError> {
    let Some(raw) = env.get(var) else {
        return Ok(default);
    };
    let lower = raw.trim().to_ascii_lowercase();
    let (digits, unit) = if let Some(d) = lower.strip_suffix("kb") {
        (d, 1024)
    } else if let Some(d) = lower.strip_suffix("mb") {
        (d, 1024 * 1024)
    } else {
        (lower.as_str(), 1)
    };
    let rule = || {
        refuse(
            var,
            format!("must be bytes or a number with a kb/mb suffix (got '{raw}')"),
        )
    };
    if !is_plain_digits(digits.trim()) {
        return Err(rule());
    }
    let n: u64 = digits.trim().parse().map_err(|_| rule())?;
    match n.checked_mul(unit) {
        Some(0) | None => Err(rule()),
        Some(v) => Ok(v),
    }
}
