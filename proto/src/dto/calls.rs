//! Call and profile routes: call-link creation and the profile writes.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// `type`: audio or video; `startTime`: epoch milliseconds. Both required.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct CallLinkRequest {
    #[serde(rename = "type")]
    pub kind: Option<String>,
    pub start_time: Option<i64>,
}

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct CallLink {
    pub link: String,
}

#[derive(Debug, Clone, Deserialize, ToSchema)]
pub struct SetProfileNameRequest {
    pub name: String,
}

#[derive(Debug, Clone, Deserialize, ToSchema)]
pub struct SetProfileStatusRequest {
    pub status: String,
}
