//! Automation rule bodies (wire-notes §3): a rule replies `replyText` to the first inbound message that meets
//! its conditions (the webhook filter condition shape), at most once per `cooldownSeconds` per chat.

use serde::{Deserialize, Deserializer, Serialize};
use utoipa::ToSchema;

use super::webhooks::{FilterCondition, WebhookFilters};

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct AutomationRule {
    pub id: String,
    pub session_id: String,
    pub name: String,
    pub enabled: bool,
    pub conditions: Vec<FilterCondition>,
    pub reply_text: String,
    pub cooldown_seconds: i64,
    pub created_at: String,
    pub updated_at: String,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct CreateAutomationRuleRequest {
    pub name: String,
    pub enabled: Option<bool>,
    /// A list of conditions, or a webhook `filters` object `{conditions: [...]}`.
    #[serde(default, deserialize_with = "conditions")]
    pub conditions: Option<Vec<FilterCondition>>,
    pub reply_text: String,
    pub cooldown_seconds: Option<i64>,
}

/// A field left out is unchanged.
#[derive(Debug, Clone, Default, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct UpdateAutomationRuleRequest {
    pub name: Option<String>,
    pub enabled: Option<bool>,
    #[serde(default, deserialize_with = "conditions")]
    pub conditions: Option<Vec<FilterCondition>>,
    pub reply_text: Option<String>,
    pub cooldown_seconds: Option<i64>,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum ConditionsForm {
    List(Vec<FilterCondition>),
    Filters(WebhookFilters),
}

/// Accepts `[...]`, `{conditions: [...]}` or `null`.
fn conditions<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Vec<FilterCondition>>, D::Error> {
    Ok(
        Option::<ConditionsForm>::deserialize(d)?.map(|form| match form {
            ConditionsForm::List(list) => list,
            ConditionsForm::Filters(f) => f.conditions,
        }),
    )
}
