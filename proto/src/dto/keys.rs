//! API key management and key check bodies (wire-notes §2).

use serde::{Deserialize, Deserializer, Serialize};
use utoipa::ToSchema;

use crate::Role;

/// A key record; never carries the hash. `apiKey` (the plaintext) is present only in the create response.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ApiKeyRecord {
    pub id: String,
    pub name: String,
    pub key_prefix: String,
    pub role: Role,
    pub allowed_sessions: Option<Vec<String>>,
    pub allowed_ips: Option<Vec<String>>,
    pub is_active: bool,
    pub expires_at: Option<String>,
    pub last_used_at: Option<String>,
    pub usage_count: i64,
    pub created_at: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub api_key: Option<String>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct CreateApiKeyRequest {
    pub name: String,
    pub role: Option<Role>,
    pub allowed_sessions: Option<Vec<String>>,
    pub allowed_ips: Option<Vec<String>>,
    /// ISO 8601.
    pub expires_at: Option<String>,
}

/// Key update: a field left out is unchanged; `null` clears a list or the expiry.
#[derive(Debug, Clone, Default, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct UpdateApiKeyRequest {
    pub name: Option<String>,
    pub role: Option<Role>,
    #[serde(default, deserialize_with = "present")]
    #[schema(value_type = Option<Vec<String>>)]
    pub allowed_sessions: Option<Option<Vec<String>>>,
    #[serde(default, deserialize_with = "present")]
    #[schema(value_type = Option<Vec<String>>)]
    pub allowed_ips: Option<Option<Vec<String>>>,
    pub is_active: Option<bool>,
    #[serde(default, deserialize_with = "present")]
    #[schema(value_type = Option<String>)]
    pub expires_at: Option<Option<String>>,
}

/// Distinguishes a key sent as `null` (`Some(None)`) from a key left out (`None`, via `#[serde(default)]`).
pub fn present<'de, D: Deserializer<'de>, T: Deserialize<'de>>(
    d: D,
) -> Result<Option<Option<T>>, D::Error> {
    Option::<T>::deserialize(d).map(Some)
}

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct KeyCheck {
    pub valid: bool,
    pub role: Role,
    pub engine_type: String,
    pub scoped: bool,
}
