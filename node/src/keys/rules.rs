//! The rules of key records: validation of new keys and changes (name length, allowedSessions entries,
//! allowedIps, expiry), and what counts as a usable admin key. Pure functions; no I/O.

use std::collections::HashSet;
use std::net::IpAddr;

use ipnet::IpNet;
use wagate_proto::Role;

use super::{KeyError, hash_key};
use crate::store::keys::ApiKey;
use crate::store::now_ms;

/// A key to issue, as the caller asked for it.
#[derive(Debug, Clone, Default)]
pub struct NewKey {
    pub name: String,
    pub role: Option<Role>,
    pub allowed_sessions: Option<Vec<String>>,
    pub allowed_ips: Option<Vec<String>>,
    pub expires_at: Option<i64>,
}

/// A change to a key; `None` leaves a field as it is. `Some(None)` clears a list or an expiry.
#[derive(Debug, Clone, Default)]
pub struct KeyChange {
    pub name: Option<String>,
    pub role: Option<Role>,
    pub allowed_sessions: Option<Option<Vec<String>>>,
    pub allowed_ips: Option<Option<Vec<String>>>,
    pub is_active: Option<bool>,
    pub expires_at: Option<Option<i64>>,
}

impl NewKey {
    pub(crate) fn master() -> NewKey {
        NewKey {
            name: "master".to_string(),
            role: Some(Role::Admin),
            ..NewKey::default()
        }
    }

    pub(crate) fn into_key(self, plaintext: &str) -> Result<ApiKey, KeyError> {
        let now = now_ms();
        check_name(&self.name)?;
        check_expiry(self.expires_at, now)?;
        let allowed_sessions = self.allowed_sessions.map(canonical_sessions);
        if let Some(sessions) = &allowed_sessions {
            check_allowed_sessions(sessions)?;
        }
        if let Some(ips) = &self.allowed_ips {
            check_allowed_ips(ips)?;
        }
        Ok(ApiKey {
            id: uuid::Uuid::new_v4().to_string(),
            name: self.name,
            key_hash: hash_key(plaintext),
            key_prefix: plaintext.chars().take(8).collect(),
            role: self.role.unwrap_or(Role::Operator),
            allowed_sessions,
            allowed_ips: self.allowed_ips,
            is_active: true,
            expires_at: self.expires_at,
            last_used_at: None,
            usage_count: 0,
            created_at: now,
            updated_at: now,
        })
    }
}

impl KeyChange {
    /// The checks that need the submitter's clock (so they stay out of the deterministic [`apply`]).
    pub(crate) fn check_at(&self, now: i64) -> Result<(), KeyError> {
        check_expiry(self.expires_at.flatten(), now)
    }

    pub(crate) fn apply(self, key: &mut ApiKey) -> Result<(), KeyError> {
        if let Some(name) = self.name {
            check_name(&name)?;
            key.name = name;
        }
        if let Some(role) = self.role {
            key.role = role;
        }
        if let Some(sessions) = self.allowed_sessions {
            let sessions = sessions.map(canonical_sessions);
            if let Some(list) = &sessions {
                check_allowed_sessions(list)?;
            }
            key.allowed_sessions = sessions;
        }
        if let Some(ips) = self.allowed_ips {
            if let Some(list) = &ips {
                check_allowed_ips(list)?;
            }
            key.allowed_ips = ips;
        }
        if let Some(active) = self.is_active {
            key.is_active = active;
        }
        if let Some(expires_at) = self.expires_at {
            key.expires_at = expires_at;
        }
        Ok(())
    }
}

fn check_name(name: &str) -> Result<(), KeyError> {
    let len = name.trim().chars().count();
    if !(3..=100).contains(&len) {
        return Err(KeyError::Invalid(
            "name must be between 3 and 100 characters".into(),
        ));
    }
    crate::names::printable("name", name).map_err(KeyError::Invalid)
}

/// A key that is expired when issued is a mistake (a wrong year, a local time read as UTC), never intended.
fn check_expiry(expires_at: Option<i64>, now: i64) -> Result<(), KeyError> {
    match expires_at {
        Some(at) if at <= now => Err(KeyError::Invalid("expiresAt must be in the future".into())),
        _ => Ok(()),
    }
}

/// Session ids as requests name them once parsed (lowercase hyphenated UUIDs), so a key listing an id in
/// capitals or braces still reaches that session; other entries stay as given (and are refused).
fn canonical_sessions(sessions: Vec<String>) -> Vec<String> {
    sessions
        .into_iter()
        .map(|entry| match uuid::Uuid::parse_str(&entry) {
            Ok(id) => id.to_string(),
            Err(_) => entry,
        })
        .collect()
}

/// The spec refuses entries that are empty, whitespace-padded, comma-bearing or duplicated; wire-notes §11
/// says they are session ids, so a session name (which would never match a request) is refused too.
pub(crate) fn check_allowed_sessions(sessions: &[String]) -> Result<(), KeyError> {
    let mut seen = HashSet::new();
    for entry in sessions {
        let problem = if entry.is_empty() {
            Some("must not contain empty entries")
        } else if entry.trim() != entry {
            Some("entries must not have leading or trailing whitespace")
        } else if entry.contains(',') {
            Some("entries must not contain commas")
        } else if !seen.insert(entry.as_str()) {
            Some("must not contain duplicate entries")
        } else if uuid::Uuid::parse_str(entry).is_err() {
            Some("entries must be session ids (UUIDs)")
        } else {
            None
        };
        if let Some(problem) = problem {
            return Err(KeyError::Invalid(format!("allowedSessions {problem}")));
        }
    }
    Ok(())
}

fn check_allowed_ips(ips: &[String]) -> Result<(), KeyError> {
    for ip in ips {
        if ip.parse::<IpAddr>().is_err() && ip.parse::<IpNet>().is_err() {
            return Err(KeyError::Invalid(format!(
                "allowedIps entry '{ip}' is not an IP address or CIDR range"
            )));
        }
    }
    Ok(())
}

/// Whether `client` matches one of the allowed addresses or ranges. IPv4-mapped IPv6 clients match IPv4 rules.
pub(crate) fn ip_allowed(allowed: &[String], client: Option<IpAddr>) -> bool {
    let Some(client) = client else { return false };
    let client = match client {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map(IpAddr::V4).unwrap_or(client),
        v4 => v4,
    };
    allowed.iter().any(|rule| {
        rule.parse::<IpAddr>()
            .map(|ip| ip == client)
            .unwrap_or(false)
            || rule
                .parse::<IpNet>()
                .map(|net| net.contains(&client))
                .unwrap_or(false)
    })
}

/// An admin key someone can still use to manage keys: active, unexpired, not restricted to sessions, and
/// not bound to an address list that matches nothing. Every field that can lock a key out is here, so the
/// last-admin guard cannot be bypassed through one it forgot.
fn is_usable_admin(key: &ApiKey, now: i64) -> bool {
    key.role == Role::Admin
        && key.is_active
        && key.allowed_sessions.is_none()
        && key.allowed_ips.as_ref().is_none_or(|ips| !ips.is_empty())
        && key.expires_at.is_none_or(|at| at > now)
}

/// [`is_usable_admin`], usable from `caller` (the address a change was asked from) when it is known, and
/// without an expiry: a change that leaves only admins that expire would lock everyone out later.
pub(crate) fn is_usable_admin_from(key: &ApiKey, now: i64, caller: Option<IpAddr>) -> bool {
    is_usable_admin(key, now)
        && key.expires_at.is_none()
        && caller.is_none_or(|ip| super::address_allowed(key, Some(ip)))
}

/// Whether a key works from anywhere as an admin, as the master key must after boot.
pub(crate) fn is_unrestricted_admin(key: &ApiKey, now: i64) -> bool {
    is_usable_admin(key, now) && key.allowed_ips.is_none()
}

/// Makes `key` an unrestricted admin (the boot-time recovery of the master key).
pub(crate) fn restore_unrestricted_admin(key: &mut ApiKey) {
    key.role = Role::Admin;
    key.is_active = true;
    key.allowed_sessions = None;
    key.allowed_ips = None;
    key.expires_at = None;
}
