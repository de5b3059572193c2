//! Message templates: `{name, body, header?, footer?}` with `{{var}}` placeholders.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::keys::present;

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Template {
    pub id: String,
    pub session_id: String,
    pub name: String,
    pub body: String,
    pub header: Option<String>,
    pub footer: Option<String>,
    pub created_at: String,
    pub updated_at: String,
}

/// Create body.
#[derive(Debug, Clone, Default, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct CreateTemplateRequest {
    pub name: Option<String>,
    pub body: Option<String>,
    pub header: Option<String>,
    pub footer: Option<String>,
}

/// Update body: key omitted = unchanged; `null` name or body is refused; `null` header/footer clears.
#[derive(Debug, Clone, Default, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct UpdateTemplateRequest {
    #[serde(default, deserialize_with = "present")]
    #[schema(value_type = Option<String>)]
    pub name: Option<Option<String>>,
    #[serde(default, deserialize_with = "present")]
    #[schema(value_type = Option<String>)]
    pub body: Option<Option<String>>,
    #[serde(default, deserialize_with = "present")]
    #[schema(value_type = Option<String>)]
    pub header: Option<Option<String>>,
    #[serde(default, deserialize_with = "present")]
    #[schema(value_type = Option<String>)]
    pub footer: Option<Option<String>>,
}
