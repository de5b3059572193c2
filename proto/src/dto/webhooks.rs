//! Webhook resource bodies (spec "Webhook", wire-notes §3, §4, §12): the record, create/update requests,
//! filter conditions (shared with automation rules), the test result, delivery failures and redrive.

use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use super::keys::present;

/// A message attribute a filter condition looks at (wire-notes §4).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub enum FilterField {
    Sender,
    Recipient,
    ChatId,
    Body,
    Type,
    IsGroup,
    Kind,
    FromMe,
    HasMedia,
    Mentions,
}

impl FilterField {
    /// The key of the event's `data` object the field reads.
    pub fn data_key(self) -> &'static str {
        match self {
            FilterField::Sender => "from",
            FilterField::Recipient => "to",
            FilterField::ChatId => "chatId",
            FilterField::Body => "body",
            FilterField::Type => "type",
            FilterField::IsGroup => "isGroup",
            FilterField::Kind => "kind",
            FilterField::FromMe => "fromMe",
            FilterField::HasMedia => "hasMedia",
            FilterField::Mentions => "mentionedIds",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub enum FilterOperator {
    Is,
    IsNot,
    Contains,
    Equals,
}

/// A condition's operand: one string, a list (any may match), or a boolean.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(untagged)]
pub enum FilterValue {
    Bool(bool),
    Text(String),
    List(Vec<String>),
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct FilterCondition {
    pub field: FilterField,
    pub operator: FilterOperator,
    pub value: FilterValue,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub case_sensitive: Option<bool>,
}

/// All conditions must hold for a delivery. Unknown keys are refused: a misspelt `conditions` would
/// otherwise leave a webhook that receives every event.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct WebhookFilters {
    pub conditions: Vec<FilterCondition>,
}

/// The one accepted form of `filters`: an object. Serde's derived struct decoding would also take a JSON
/// array positionally (`[[...]]` read as `{conditions: [...]}`), which the contract does not allow.
impl<'de> Deserialize<'de> for WebhookFilters {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(rename_all = "camelCase", deny_unknown_fields)]
        struct FiltersObject {
            #[serde(default)]
            conditions: Vec<FilterCondition>,
        }
        let object =
            serde_json::Map::<String, serde_json::Value>::deserialize(d).map_err(|_| {
                serde::de::Error::custom("filters must be an object {conditions: [...]}")
            })?;
        let parsed: FiltersObject = serde_json::from_value(serde_json::Value::Object(object))
            .map_err(serde::de::Error::custom)?;
        Ok(Self {
            conditions: parsed.conditions,
        })
    }
}

/// A webhook as reads show it: `secret` and `headers` are write-only and never appear.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Webhook {
    pub id: String,
    pub session_id: String,
    pub url: String,
    pub events: Vec<String>,
    pub active: bool,
    /// Always an object: `{"conditions": []}` (no conditions) when the webhook filters nothing.
    pub filters: WebhookFilters,
    pub retry_count: i32,
    pub last_triggered_at: Option<String>,
    pub created_at: String,
    pub updated_at: String,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct CreateWebhookRequest {
    pub url: String,
    /// Event names, or `["*"]` (the default) for every event.
    pub events: Option<Vec<String>>,
    /// At least 16 characters.
    pub secret: Option<String>,
    /// Extra headers sent with every delivery; reserved names are dropped.
    #[schema(value_type = Option<Object>)]
    pub headers: Option<serde_json::Map<String, serde_json::Value>>,
    pub active: Option<bool>,
    pub filters: Option<WebhookFilters>,
    /// 0-10, default 3: retries after the first attempt.
    pub retry_count: Option<i64>,
}

/// A field left out is unchanged; `secret: ""` clears the secret, `filters: null` (or `{}`) and `headers: null`
/// clear.
#[derive(Debug, Clone, Default, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct UpdateWebhookRequest {
    pub url: Option<String>,
    pub events: Option<Vec<String>>,
    pub secret: Option<String>,
    #[serde(default, deserialize_with = "present")]
    #[schema(value_type = Option<Object>)]
    pub headers: Option<Option<serde_json::Map<String, serde_json::Value>>>,
    pub active: Option<bool>,
    #[serde(default, deserialize_with = "present")]
    #[schema(value_type = Option<WebhookFilters>)]
    pub filters: Option<Option<WebhookFilters>>,
    pub retry_count: Option<i64>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, ToSchema, IntoParams)]
#[serde(rename_all = "camelCase")]
#[into_params(parameter_in = Query)]
pub struct WebhookListQuery {
    /// Page size: 1-1000, default 100.
    #[param(minimum = 1, maximum = 1000)]
    pub limit: Option<i64>,
    /// Webhooks to skip, default 0.
    #[param(minimum = 0)]
    pub offset: Option<i64>,
}

/// `POST .../webhooks/{webhookId}/test`.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct WebhookTestResult {
    pub success: bool,
    /// The receiver's HTTP status; null when no response arrived.
    pub status_code: Option<u16>,
}

/// A delivery that exhausted its retries (wire-notes §12); `attempts` 0 = never dispatched.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct DeliveryFailure {
    pub id: String,
    pub webhook_id: String,
    pub session_id: String,
    pub event: String,
    pub url: String,
    pub idempotency_key: String,
    pub delivery_id: String,
    pub attempts: i32,
    pub last_status_code: Option<i32>,
    pub last_error: Option<String>,
    pub created_at: String,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, ToSchema, IntoParams)]
#[serde(rename_all = "camelCase")]
#[into_params(parameter_in = Query)]
pub struct DeliveryFailureQuery {
    /// Only this session's failures.
    pub session_id: Option<String>,
    /// Page size: 1-1000, default 1000.
    #[param(minimum = 1, maximum = 1000)]
    pub limit: Option<i64>,
    /// Rows to skip, default 0.
    #[param(minimum = 0)]
    pub offset: Option<i64>,
}

/// Which failure rows to deliver again; every given field narrows the selection.
#[derive(Debug, Clone, Default, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct RedriveRequest {
    pub session_id: Option<String>,
    pub webhook_id: Option<String>,
    pub ids: Option<Vec<String>>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct RedriveResult {
    /// Rows attempted.
    pub redriven: usize,
    /// Rows delivered (and removed from the log).
    pub delivered: usize,
    pub failed: usize,
    /// Rows of the selection still in the log.
    pub remaining: usize,
}
