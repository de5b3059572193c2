//! Call and profile routes: call-link creation and the profile writes.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// `type`: audio or video; `startTime`: epoch milliseconds. Both required.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct CallLinkRequest {
    #[serde(rename = "type")]
    pub kind: Option<String>,
    /// Any JSON number: clients written in languages without integers send `1.7e12` or a fraction.
    #[schema(value_type = Option<i64>)]
    pub start_time: Option<serde_json::Number>,
}

impl CallLinkRequest {
    /// `startTime` as whole epoch milliseconds (a fraction of a millisecond dropped); `None` when it is
    /// missing, negative or beyond what an `i64` holds.
    pub fn start_millis(&self) -> Option<i64> {
        let n = self.start_time.as_ref()?;
        let millis = match n.as_i64() {
            Some(whole) => whole,
            None => {
                let f = n.as_f64().filter(|f| f.is_finite() && *f < 9.0e18)?;
                f.trunc() as i64
            }
        };
        (millis >= 0).then_some(millis)
    }
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
