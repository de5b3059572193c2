//! Bodies of the infrastructure routes (cluster operations).

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// The answer to a drain: this node released `released` sessions to its peers and takes no new ones.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct DrainResult {
    pub node_id: String,
    pub released: usize,
}
