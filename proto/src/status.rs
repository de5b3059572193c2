//! Wire enums with the spec's exact lowercase spelling: session status and key roles.

use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;
use utoipa::ToSchema;

/// A session's lifecycle status (the spec's "States and transitions").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum SessionStatus {
    Created,
    Initializing,
    QrReady,
    Authenticating,
    Ready,
    Disconnected,
    ActionRequired,
    Failed,
}

impl SessionStatus {
    pub const ALL: [SessionStatus; 8] = [
        Self::Created,
        Self::Initializing,
        Self::QrReady,
        Self::Authenticating,
        Self::Ready,
        Self::Disconnected,
        Self::ActionRequired,
        Self::Failed,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Created => "created",
            Self::Initializing => "initializing",
            Self::QrReady => "qr_ready",
            Self::Authenticating => "authenticating",
            Self::Ready => "ready",
            Self::Disconnected => "disconnected",
            Self::ActionRequired => "action_required",
            Self::Failed => "failed",
        }
    }
}

impl fmt::Display for SessionStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for SessionStatus {
    type Err = UnknownValue;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::ALL
            .into_iter()
            .find(|v| v.as_str() == s)
            .ok_or_else(|| UnknownValue(s.to_string()))
    }
}

/// An API key's role. Ordered: a higher role may do everything a lower one may.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, ToSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    Viewer,
    Operator,
    Admin,
}

impl Role {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Viewer => "viewer",
            Self::Operator => "operator",
            Self::Admin => "admin",
        }
    }
}

impl FromStr for Role {
    type Err = UnknownValue;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "viewer" => Ok(Self::Viewer),
            "operator" => Ok(Self::Operator),
            "admin" => Ok(Self::Admin),
            other => Err(UnknownValue(other.to_string())),
        }
    }
}

/// A stored or received string that names no known enum value.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown value '{0}'")]
pub struct UnknownValue(pub String);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_round_trips_through_its_wire_name() {
        for s in SessionStatus::ALL {
            assert_eq!(s.as_str().parse::<SessionStatus>(), Ok(s));
            assert_eq!(
                serde_json::to_value(s).ok(),
                Some(serde_json::json!(s.as_str()))
            );
        }
    }

    #[test]
    fn roles_are_ordered_viewer_operator_admin() {
        assert!(Role::Viewer < Role::Operator && Role::Operator < Role::Admin);
    }
}
