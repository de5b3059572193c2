//! Queue job payloads shared by the node (producer) and the workers (consumer).

use std::collections::BTreeMap;

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
    /// W3C `traceparent` per outbox id, for rows whose event was traced (only when the node exports
    /// traces): each delivery attempt joins its event's trace.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub traces: BTreeMap<String, String>,
}

impl WebhookDeliveryJob {
    pub fn new(outbox_ids: Vec<String>) -> WebhookDeliveryJob {
        WebhookDeliveryJob {
            outbox_ids,
            outbox_id: None,
            traces: BTreeMap::new(),
        }
    }

    pub fn with_traces(mut self, traces: BTreeMap<String, String>) -> WebhookDeliveryJob {
        self.traces = traces;
        self
    }

    /// Every row the job names, whichever form it was pushed in.
    pub fn into_ids(self) -> Vec<String> {
        self.into_parts().0
    }

    /// The rows and their trace contexts.
    pub fn into_parts(self) -> (Vec<String>, BTreeMap<String, String>) {
        let mut ids = self.outbox_ids;
        ids.extend(self.outbox_id);
        (ids, self.traces)
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
        let traced = WebhookDeliveryJob::new(vec!["a".into()]).with_traces(BTreeMap::from([(
            "a".to_owned(),
            "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01".to_owned(),
        )]));
        let back: WebhookDeliveryJob =
            serde_json::from_str(&serde_json::to_string(&traced).unwrap()).unwrap();
        assert_eq!(back, traced);
    }
}
