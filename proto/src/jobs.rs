//! Queue job payloads shared by the node (producer) and the workers (consumer).

use serde::{Deserialize, Serialize};

/// One delivery attempt for each of a batch of outbox rows (one job carries many rows, so the queue costs one
/// round trip per batch, not per delivery). The worker reads the rows for the payloads, so the job stays small
/// and a lost job is recovered by the node's outbox reconciler.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WebhookDeliveryJob {
    #[serde(default)]
    pub outbox_ids: Vec<String>,
    /// The single row of a job pushed before jobs carried batches; read, never written.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outbox_id: Option<String>,
}

impl WebhookDeliveryJob {
    pub fn new(outbox_ids: Vec<String>) -> WebhookDeliveryJob {
        WebhookDeliveryJob {
            outbox_ids,
            outbox_id: None,
        }
    }

    /// Every row the job names, whichever form it was pushed in.
    pub fn into_ids(self) -> Vec<String> {
        let mut ids = self.outbox_ids;
        ids.extend(self.outbox_id);
        ids
    }
}

/// An event received by the signed integration ingress, processed off the request path.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct IngressJob {
    pub ingress_event_id: String,
}

pub const WEBHOOK_QUEUE: &str = "webhook-queue";
pub const INGRESS_QUEUE: &str = "ingress-queue";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_delivery_job_carries_a_batch_and_reads_the_single_row_form() {
        let job = WebhookDeliveryJob::new(vec!["a".into(), "b".into()]);
        let text = serde_json::to_string(&job).unwrap();
        assert_eq!(text, r#"{"outboxIds":["a","b"]}"#);
        let old: WebhookDeliveryJob = serde_json::from_str(r#"{"outboxId":"o1"}"#).unwrap();
        assert_eq!(old.into_ids(), ["o1"]);
    }
}
