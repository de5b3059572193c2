//! Deliveries the API forces: the test delivery (`event: "test"`, no outbox row, never moves
//! `lastTriggeredAt`) and the redrive of delivery-failure rows. Both go through the workers crate's signing,
//! guard and attempt code. It does not retry: one attempt per call and row.

use serde_json::json;
use wagate_workers::webhook::deliver::{
    AttemptOutcome, Delivery, WireBody, deliver_once, envelope_body, envelope_body_within,
    new_delivery_id,
};

use wagate_workers::webhook::store::failures::{self as failure_store, FailureRow};
use wagate_workers::webhook::store::webhooks as webhook_store;

use super::{WebhookError, WebhookResult, WebhookService};
use crate::store::now_ms;

/// Rows one redrive call attempts; `remaining` tells the caller to call again.
const REDRIVE_BATCH: usize = 100;

/// Which failure rows to redrive; every `Some` narrows.
#[derive(Debug, Clone, Default)]
pub(crate) struct RedriveSelection {
    pub session_id: Option<String>,
    pub webhook_id: Option<String>,
    pub ids: Option<Vec<String>>,
}

/// What a redrive did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct RedriveCounts {
    pub redriven: usize,
    pub delivered: usize,
    pub failed: usize,
    pub remaining: usize,
}

impl WebhookService {
    /// One real, signed delivery of a test envelope; answers the outcome.
    pub(crate) async fn test(&self, session_id: &str, id: &str) -> WebhookResult<AttemptOutcome> {
        let w = self.get(session_id, id).await?;
        let stored = json!({
            "event": "test",
            "timestamp": wagate_proto::iso_ms(now_ms()),
            "sessionId": session_id,
            "idempotencyKey": format!("test_{}", uuid::Uuid::now_v7()),
            "data": { "webhookId": w.id, "message": "wagate test delivery" },
        });
        let idempotency_key = stored["idempotencyKey"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        let delivery_id = new_delivery_id();
        let body = envelope_body(&stored.to_string(), &delivery_id)
            .map_err(|e| WebhookError::Invalid(e.to_string()))?;
        let headers = serde_json::to_string(&w.headers).unwrap_or_default();
        let d = Delivery {
            url: &w.url,
            event: "test",
            idempotency_key: &idempotency_key,
            delivery_id: &delivery_id,
            retry_count: 0,
            secret: w.secret.as_deref(),
            custom_headers: Some(&headers),
            body: &body,
        };
        Ok(deliver_once(&self.client, &d).await)
    }

    /// Delivers selected failure rows again, oldest first; a row that succeeds leaves the log.
    pub(crate) async fn redrive(&self, sel: &RedriveSelection) -> WebhookResult<RedriveCounts> {
        let mut rows = failure_store::for_redrive(
            &self.db,
            sel.session_id.as_deref(),
            sel.webhook_id.as_deref(),
        )
        .await?;
        if let Some(ids) = &sel.ids {
            rows.retain(|r| ids.contains(&r.id));
        }
        let total = rows.len();
        let mut counts = RedriveCounts::default();
        for row in rows.iter().take(REDRIVE_BATCH) {
            counts.redriven += 1;
            match self.redrive_one(row).await? {
                AttemptOutcome::Delivered { .. } => counts.delivered += 1,
                AttemptOutcome::Failed { .. } => counts.failed += 1,
            }
        }
        counts.remaining = total - counts.delivered;
        Ok(counts)
    }

    async fn redrive_one(&self, row: &FailureRow) -> WebhookResult<AttemptOutcome> {
        let Some(w) = webhook_store::find(&self.db, &row.webhook_id).await? else {
            let error = "webhook was deleted".to_owned();
            failure_store::record_failed_redrive(&self.db, &row.id, None, &error).await?;
            return Ok(AttemptOutcome::Failed {
                status_code: None,
                error,
            });
        };
        let delivery_id = new_delivery_id();
        let max = self.settings.max_payload_bytes;
        let outcome = match envelope_body_within(&row.payload, &delivery_id, max) {
            Err(e) => AttemptOutcome::Failed {
                status_code: None,
                error: e.to_string(),
            },
            Ok(WireBody::TooLarge(_)) => AttemptOutcome::Failed {
                status_code: None,
                error: "payload exceeds WEBHOOK_MAX_PAYLOAD_BYTES; not dispatched".to_owned(),
            },
            Ok(WireBody::Fits(body)) => {
                let headers = serde_json::to_string(&w.headers).unwrap_or_default();
                let d = Delivery {
                    url: &w.url,
                    event: &row.event,
                    idempotency_key: &row.idempotency_key,
                    delivery_id: &delivery_id,
                    retry_count: u32::try_from(row.attempts).unwrap_or(0),
                    secret: w.secret.as_deref(),
                    custom_headers: Some(&headers),
                    body: &body,
                };
                deliver_once(&self.client, &d).await
            }
        };
        match &outcome {
            AttemptOutcome::Delivered { .. } => {
                failure_store::delete(&self.db, &row.id).await?;
                webhook_store::touch(&self.db, &w.id, now_ms()).await?;
            }
            AttemptOutcome::Failed { status_code, error } => {
                let code = status_code.map(i32::from);
                failure_store::record_failed_redrive(&self.db, &row.id, code, error).await?;
            }
        }
        Ok(outcome)
    }

    /// The failure log, newest first.
    pub(crate) async fn failures(
        &self,
        session_id: Option<&str>,
        limit: i64,
        offset: i64,
    ) -> WebhookResult<Vec<FailureRow>> {
        Ok(failure_store::list(&self.db, session_id, limit, offset).await?)
    }
}
