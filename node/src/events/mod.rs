//! The event pipeline: engine event -> normalised `Event` -> persisted with its outbox rows in one
//! transaction -> enqueued after commit -> published to WebSocket subscribers. This module owns the
//! `Event` type and the pipeline handle; it knows nothing of HTTP or engine libraries.
//!
//! # Layout
//! - `normalise`: `EngineEvent` -> `Event` with the wire-notes §5 `data`.
//! - `filter`: webhook/automation filter conditions (validation and evaluation).
//! - `memo`: a per-session memo of rows every event reads (aged out, invalidated on change).
//! - `subscriptions`: the per-session cache of active webhooks.
//! - `pipeline`: `Pipeline` (outbox rows inside the caller's transaction, enqueue and fan-out after commit).
//! - `reconciler`: in-process workers (`ROLE=all`), the outbox sweep and pruning of settled rows.
//! - `hub`: live fan-out to WebSocket sockets and the automation matcher.
//! - `statuses`: persistence of own and received status posts (`status_updates`).

pub(crate) mod filter;
pub(crate) mod hub;
pub(crate) mod ingest;
pub(crate) mod memo;
pub(crate) mod normalise;
mod nul;
pub(crate) mod pipeline;
pub(crate) mod reconciler;
pub(crate) mod statuses;
pub(crate) mod subscriptions;

pub(crate) use pipeline::Pipeline;

use wagate_proto::EventName;

/// One occurrence of an event, as every consumer (webhook, WebSocket, automation) sees it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Event {
    pub name: EventName,
    pub session_id: String,
    /// The wire-notes §5 `data` object.
    pub data: serde_json::Value,
    pub occurred_at_ms: i64,
    /// Stable across every retry of every delivery of this occurrence.
    pub idempotency_key: String,
    /// The W3C `traceparent` of the span the event was made in, when traces are exported: its outbox rows'
    /// delivery jobs carry it to the worker.
    pub trace: Option<String>,
}

impl Event {
    pub(crate) fn new(name: EventName, session_id: &str, data: serde_json::Value) -> Event {
        Event {
            name,
            session_id: session_id.to_string(),
            data,
            occurred_at_ms: crate::store::now_ms(),
            idempotency_key: format!("evt_{}", uuid::Uuid::now_v7()),
            trace: wagate_workers::telemetry::propagation::traceparent_of(&tracing::Span::current()),
        }
    }

    /// ISO 8601 time of the occurrence (the envelope's `timestamp`).
    #[allow(dead_code)] // the webhook envelope (events issue)
    pub(crate) fn timestamp_iso(&self) -> String {
        wagate_proto::iso_ms(self.occurred_at_ms)
    }
}

#[cfg(test)]
mod tests;
