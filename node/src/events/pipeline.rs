//! `Pipeline`: where every event goes. `publish_in` writes the event's outbox rows inside the caller's
//! transaction (so the event and whatever it reports commit together) and returns their ids
//! (`OutboxIds`); the caller hands those to `after_commit` once it committed, which enqueues the
//! deliveries and publishes to live subscribers. `publish` does both for events with nothing else to persist.
//! Delivering is the workers' job; a row whose enqueue is lost is found by the outbox reconciler.
//! `settle` is the one rule for the network's acknowledgement of received traffic (`engine::Ack`): taken once
//! its event committed, refused (redelivered) when the write failed for a reason that may pass, and taken
//! anyway (logged, counted) when the event itself cannot be persisted, so one bad event never blocks a stream.

use std::sync::Arc;

use serde::Serialize;
use tokio::sync::broadcast;
use wagate_workers::telemetry::propagation;
use wagate_workers::webhook::store::outbox::{self as outbox_store, NewOutboxRow};
use wagate_workers::{Enqueuer, QueueClient};

use super::Event;
use super::filter;
use super::hub::Hub;
use super::subscriptions::SubscriptionCache;
use crate::engine::Ack;
use crate::store::{DataPool, DataTx, StoreError, StoreResult, now_ms, to_json};

#[derive(Clone)]
pub(crate) struct Pipeline {
    db: DataPool,
    /// Takes committed outbox ids onto the queue. `None` in unit tests: rows then wait for the reconciler.
    enqueuer: Option<Enqueuer>,
    hub: Hub,
    subscriptions: Arc<SubscriptionCache>,
}

/// The outbox rows one transaction wrote, per event that got any: the ids and the `traceparent` their
/// delivery jobs carry. `publish_in` returns them; the transaction's owner hands them to `after_commit`
/// once it committed (a rolled-back transaction just drops them: its rows never existed).
#[derive(Debug, Default)]
#[must_use = "outbox ids are enqueued only when handed to after_commit"]
pub(crate) struct OutboxIds(Vec<(Vec<String>, Option<String>)>);

/// The trace context an event's delivery jobs carry: a span for the outbox write, in the event's trace.
fn outbox_trace(event: &Event, rows: usize) -> Option<String> {
    let parent = event.trace.as_deref()?;
    let span = tracing::info_span!("outbox_write", event = event.name.as_str(), rows);
    propagation::adopt_traceparent(&span, Some(parent));
    propagation::traceparent_of(&span)
}

/// The stored envelope: every wire field but `deliveryId`, which the worker inserts (wire-notes §5 order).
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct StoredEnvelope<'a> {
    event: &'a str,
    timestamp: String,
    session_id: &'a str,
    idempotency_key: &'a str,
    data: &'a serde_json::Value,
}

impl Pipeline {
    pub(crate) fn new(db: DataPool) -> Pipeline {
        Pipeline {
            subscriptions: Arc::new(SubscriptionCache::new()),
            db,
            enqueuer: None,
            hub: Hub::default(),
        }
    }

    /// Enqueue deliveries on `queue` after each commit (through one [`Enqueuer`] task that batches them).
    pub(crate) fn with_queue(mut self, queue: QueueClient) -> Pipeline {
        self.enqueuer = Some(Enqueuer::spawn(queue));
        self
    }

    /// The webhook cache; the webhook service invalidates it on every change.
    pub(crate) fn subscriptions(&self) -> &SubscriptionCache {
        &self.subscriptions
    }

    /// Writes the outbox rows of `events` for every subscribed, active webhook whose filters pass, all of them
    /// in a few multi-row statements.
    pub(crate) async fn publish_in(
        &self,
        tx: &mut DataTx,
        events: &[Event],
    ) -> StoreResult<OutboxIds> {
        // Per event with at least one row: the event, its envelope, and (outbox id, webhook id) per row.
        let mut planned: Vec<Planned<'_>> = Vec::new();
        for event in events {
            crate::hooks::hooks().webhook_before(event);
            let subs = self
                .subscriptions
                .for_session_in(tx, &event.session_id)
                .await?;
            let mut targets = Vec::new();
            for sub in subs.iter().filter(|s| s.wants(event.name)) {
                if let Err(why) = filter::evaluate(&sub.conditions, &event.data) {
                    tracing::debug!(
                        webhook_id = %sub.webhook_id, event = event.name.as_str(), field = ?why.field,
                        missing = why.is_missing, available = ?filter::available_fields(&event.data),
                        "webhook_filter_suppressed"
                    );
                    continue;
                }
                targets.push((uuid::Uuid::now_v7().to_string(), sub.webhook_id.clone()));
            }
            if !targets.is_empty() {
                planned.push((event, stored_envelope(event)?, targets));
            }
        }
        if planned.is_empty() {
            return Ok(OutboxIds::default());
        }
        let now = now_ms();
        let rows: Vec<NewOutboxRow<'_>> = planned
            .iter()
            .flat_map(|(event, payload, targets)| {
                targets.iter().map(move |(id, webhook_id)| NewOutboxRow {
                    id,
                    webhook_id,
                    session_id: &event.session_id,
                    event: event.name.as_str(),
                    idempotency_key: &event.idempotency_key,
                    payload,
                    now_ms: now,
                })
            })
            .collect();
        outbox_store::insert_many_in(tx, &rows, self.enqueuer.is_some()).await?;
        let written = planned
            .into_iter()
            .map(|(event, _, targets)| {
                let trace = outbox_trace(event, targets.len());
                (targets.into_iter().map(|(id, _)| id).collect(), trace)
            })
            .collect();
        Ok(OutboxIds(written))
    }

    /// After the transaction committed: hand the deliveries to the enqueuer (it never waits) and publish to
    /// live subscribers.
    pub(crate) async fn after_commit(&self, events: Vec<Event>, outbox: OutboxIds) {
        let rows = outbox.0.into_iter();
        if let Some(enqueuer) = &self.enqueuer {
            if wagate_workers::telemetry::tracing_enabled() {
                for (ids, trace) in rows {
                    enqueuer.submit_traced(ids, trace);
                }
            } else {
                enqueuer.submit(rows.flat_map(|(ids, _)| ids).collect());
            }
        }
        for event in events {
            self.hub.publish(Arc::new(event));
        }
    }

    /// Persists and publishes one event that carries nothing else to persist.
    pub(crate) async fn publish(&self, event: Event) -> StoreResult<()> {
        let mut tx = crate::store::begin(&self.db).await?;
        let outbox = self
            .publish_in(&mut tx, std::slice::from_ref(&event))
            .await?;
        tx.commit().await?;
        self.after_commit(vec![event], outbox).await;
        Ok(())
    }

    /// Publishes an event nobody else keeps (the network will not send its traffic again, or this node
    /// made it): a write that fails only for the moment is tried again, with growing pauses, for up to
    /// `KEEP_RETRYING`, before it counts as not persisted.
    pub(crate) async fn publish_kept(&self, event: Event) -> StoreResult<()> {
        let deadline = tokio::time::Instant::now() + KEEP_RETRYING;
        let mut pause = FIRST_RETRY_PAUSE;
        loop {
            match self.publish(event.clone()).await {
                Err(e) if !is_permanent(&e) && tokio::time::Instant::now() < deadline => {
                    tracing::warn!(session_id = %event.session_id, event = event.name.as_str(), error = %e, "event not persisted yet; retrying");
                    tokio::time::sleep(pause).await;
                    pause = (pause * 2).min(MAX_RETRY_PAUSE);
                }
                result => return result,
            }
        }
    }

    /// A live feed of every event published on this node (automation, tests).
    pub(crate) fn subscribe(&self) -> broadcast::Receiver<Arc<Event>> {
        self.hub.subscribe()
    }

    /// The live fan-out (cluster-wide feed for WebSockets, the Redis link at boot).
    pub(crate) fn hub(&self) -> &Hub {
        &self.hub
    }

    /// Prunes settled outbox rows.
    pub(crate) async fn housekeep(&self, keep_settled_ms: i64) -> StoreResult<u64> {
        Ok(outbox_store::prune_settled(&self.db, now_ms() - keep_settled_ms).await?)
    }
}

/// How long an event the network will not send again (its traffic acknowledged on receipt) is retried
/// through a database outage before it counts as not persisted, and the pauses between tries.
pub(crate) const KEEP_RETRYING: std::time::Duration = std::time::Duration::from_secs(120);
pub(crate) const FIRST_RETRY_PAUSE: std::time::Duration = std::time::Duration::from_millis(100);
pub(crate) const MAX_RETRY_PAUSE: std::time::Duration = std::time::Duration::from_secs(5);

/// Counts events acknowledged to the network although they could not be persisted.
pub(crate) const PERSIST_FAILED_METRIC: &str = "wagate_events_persist_failed_total";

/// Settles the network's acknowledgement of the traffic behind an event once its write is over: completed
/// after a commit; on a failure that may pass (the database unreachable, busy, shutting down) dropped, so the
/// network redelivers it; on a failure of the event itself (bad data, a constraint) logged, counted in
/// `wagate_events_persist_failed_total` and completed, because a redelivery would fail the same way forever.
pub(crate) fn settle(ack: Ack, session_id: &str, result: &StoreResult<()>) {
    match result {
        Ok(()) => ack.complete(),
        Err(err) if is_permanent(err) => {
            tracing::error!(session_id, error = %err, "event could not be persisted; acknowledged so it cannot block the stream");
            metrics::counter!(PERSIST_FAILED_METRIC).increment(1);
            ack.complete();
        }
        Err(err) => {
            tracing::warn!(session_id, error = %err, redelivered = ack.is_owed(), "event not persisted; left to the network to redeliver");
            drop(ack);
        }
    }
}

/// Whether a failed write would fail again with the same event (its data), rather than with the moment.
pub(crate) fn is_permanent(err: &StoreError) -> bool {
    match err {
        StoreError::NotFound
        | StoreError::Conflict { .. }
        | StoreError::Corrupt(_)
        | StoreError::SessionGone(_) => true,
        StoreError::StaleLease => false,
        StoreError::Db(sqlx::Error::Database(db)) => {
            !matches!(db.kind(), sqlx::error::ErrorKind::Other)
        }
        StoreError::Db(
            sqlx::Error::ColumnDecode { .. }
            | sqlx::Error::Decode(_)
            | sqlx::Error::Encode(_)
            | sqlx::Error::TypeNotFound { .. }
            | sqlx::Error::ColumnNotFound(_)
            | sqlx::Error::ColumnIndexOutOfBounds { .. },
        ) => true,
        StoreError::Db(_) => false,
    }
}

/// An event with outbox rows to write: the event, its stored envelope, `(outbox id, webhook id)` per row.
type Planned<'a> = (&'a Event, String, Vec<(String, String)>);

fn stored_envelope(event: &Event) -> StoreResult<String> {
    to_json(&StoredEnvelope {
        event: event.name.as_str(),
        timestamp: event.timestamp_iso(),
        session_id: &event.session_id,
        idempotency_key: &event.idempotency_key,
        data: &event.data,
    })
}
