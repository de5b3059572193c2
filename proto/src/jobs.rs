//! Queue job payloads shared by the node (producer) and the workers (consumer).

use serde::{Deserialize, Serialize};

/// One webhook delivery attempt for one outbox row. The worker reads the row for the payload, so the job stays
/// small and a lost job is recovered by the node's outbox reconciler.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WebhookDeliveryJob {
    pub outbox_id: String,
}

/// An event received by the signed integration ingress, processed off the request path.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct IngressJob {
    pub ingress_event_id: String,
}

pub const WEBHOOK_QUEUE: &str = "webhook-queue";
pub const INGRESS_QUEUE: &str = "ingress-queue";
