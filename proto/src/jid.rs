//! WhatsApp ids (JIDs): `<number>@c.us`, `<group>@g.us`, `<id>@newsletter`, `<id>@lid`, `status@broadcast`.
//! Parsed once at the boundary; inside the gateway a `Jid` is known to be well formed.

use serde::{Deserialize, Serialize};
use std::fmt;

/// What kind of chat a JID names (the webhook filter's `kind`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ChatKind {
    Individual,
    Group,
    Channel,
    Status,
    Broadcast,
    Unknown,
}

impl ChatKind {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Individual => "individual",
            Self::Group => "group",
            Self::Channel => "channel",
            Self::Status => "status",
            Self::Broadcast => "broadcast",
            Self::Unknown => "unknown",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct Jid {
    user: String,
    server: String,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum JidError {
    #[error(
        "'{0}' is not a valid WhatsApp id (expected <number>@c.us, <id>@g.us or <id>@newsletter)"
    )]
    Invalid(String),
}

const SERVERS: [&str; 6] = [
    "c.us",
    "g.us",
    "newsletter",
    "lid",
    "broadcast",
    "s.whatsapp.net",
];

impl Jid {
    /// Parses a full JID. `@s.whatsapp.net` is normalised to `@c.us`.
    pub fn parse(raw: &str) -> Result<Jid, JidError> {
        let invalid = || JidError::Invalid(raw.to_string());
        let (user, server) = raw.trim().split_once('@').ok_or_else(invalid)?;
        if user.is_empty() || !SERVERS.contains(&server) {
            return Err(invalid());
        }
        let valid_user = match server {
            "c.us" | "s.whatsapp.net" | "lid" => user.chars().all(|c| c.is_ascii_digit()),
            "g.us" => user.chars().all(|c| c.is_ascii_digit() || c == '-'),
            "broadcast" => user == "status" || user.chars().all(|c| c.is_ascii_digit()),
            _ => user.chars().all(|c| c.is_ascii_alphanumeric()),
        };
        if !valid_user || user.len() > 64 {
            return Err(invalid());
        }
        let server = if server == "s.whatsapp.net" {
            "c.us"
        } else {
            server
        };
        Ok(Jid {
            user: user.to_string(),
            server: server.to_string(),
        })
    }

    /// The individual JID for a bare international number (digits only, 6-15 of them).
    pub fn from_phone(number: &str) -> Result<Jid, JidError> {
        let digits = number.trim().trim_start_matches('+');
        if (6..=15).contains(&digits.len()) && digits.chars().all(|c| c.is_ascii_digit()) {
            Ok(Jid {
                user: digits.to_string(),
                server: "c.us".to_string(),
            })
        } else {
            Err(JidError::Invalid(number.to_string()))
        }
    }

    pub fn user(&self) -> &str {
        &self.user
    }

    pub fn server(&self) -> &str {
        &self.server
    }

    pub fn kind(&self) -> ChatKind {
        match self.server.as_str() {
            "c.us" | "lid" => ChatKind::Individual,
            "g.us" => ChatKind::Group,
            "newsletter" => ChatKind::Channel,
            "broadcast" if self.user == "status" => ChatKind::Status,
            "broadcast" => ChatKind::Broadcast,
            _ => ChatKind::Unknown,
        }
    }

    pub fn is_group(&self) -> bool {
        self.kind() == ChatKind::Group
    }
}

impl fmt::Display for Jid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}@{}", self.user, self.server)
    }
}

impl TryFrom<String> for Jid {
    type Error = JidError;
    fn try_from(value: String) -> Result<Self, Self::Error> {
        Jid::parse(&value)
    }
}

impl From<Jid> for String {
    fn from(value: Jid) -> Self {
        value.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_four_kinds() {
        assert_eq!(
            Jid::parse("4915112345678@c.us").map(|j| j.kind()),
            Ok(ChatKind::Individual)
        );
        assert_eq!(
            Jid::parse("120363-1234@g.us").map(|j| j.kind()),
            Ok(ChatKind::Group)
        );
        assert_eq!(
            Jid::parse("abc123@newsletter").map(|j| j.kind()),
            Ok(ChatKind::Channel)
        );
        assert_eq!(
            Jid::parse("status@broadcast").map(|j| j.kind()),
            Ok(ChatKind::Status)
        );
    }

    #[test]
    fn normalises_whatsapp_net_and_refuses_garbage() {
        assert_eq!(
            Jid::parse("123456@s.whatsapp.net").map(|j| j.to_string()),
            Ok("123456@c.us".into())
        );
        for bad in ["", "123", "abc@c.us", "12@example.com", "@c.us"] {
            assert!(Jid::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn bare_numbers_become_individual_jids() {
        assert_eq!(
            Jid::from_phone("+4915112345678").map(|j| j.to_string()),
            Ok("4915112345678@c.us".into())
        );
        assert!(Jid::from_phone("12ab").is_err());
    }
}
