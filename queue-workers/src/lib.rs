//! wagate queue workers: webhook delivery and ingress processing over apalis queues (SQLite or Redis), with the
//! data DB on SQLite or PostgreSQL. Linked by the node for `ROLE=all`, and run alone as `wagate-worker`.
//!
//! # Layout
//! - `config`: environment parsing and validation for `wagate-worker`.
//! - `db`: the `wagate-db` crate re-exported (`DataPool`, `DataTx`, the dialect macros, data-DB migrations).
//! - `queue`: `QueueClient` and the queue backends (apalis-sqlite file, apalis-redis).
//! - `workers`: `spawn_workers`, the apalis worker loops for both queues.
//! - `wake`: when a worker looks for jobs (pushes, due times, polls).
//! - `webhook`: signing, the SSRF guard, one delivery attempt, the outbox state machine, the reconciler, and
//!   the SQL of the three webhook tables (`webhook::store`), which the node calls too.
//! - `ingress`: the ingress job's store step.
//! - `queue_view`: counts, listings, retry and remove of both queues as operators see them (read from our
//!   tables, which own every job's state).
//! - `telemetry`: metrics recorder and families, logs and trace export, trace propagation, the scrape gate.
//!
//! # Contract with the node's pipeline
//! The node writes one `webhook_outbox_events` row per matching webhook inside its event transaction
//! (`webhook::store::outbox::insert_many_in`): `status = 'pending'` (`queued` when it pushes the job itself),
//! `next_attempt_at = created_at = updated_at = now`, and `payload` = the envelope JSON without `deliveryId`
//! (`{event, timestamp, sessionId, idempotencyKey, data}`). After the commit it calls
//! [`enqueue_outbox`]; at boot and periodically it runs [`reconcile_outbox`] (or [`spawn_reconciler`]).
//! The worker generates the delivery id on first dispatch and keeps it across retries (column `delivery_id`).

pub mod allocator;
pub mod config;
/// `DataPool` and its dialect macro live in `wagate-db`; re-exported under the old path for the workers' code.
pub use wagate_db as db;
pub use wagate_db::on_pool;
pub mod ingress;
pub mod queue;
pub mod queue_view;
pub mod telemetry;
mod wake;
pub mod webhook;
pub mod workers;

pub use db::{DataPool, DatabaseKind};
pub use queue::{JobCounts, QueueBackend, QueueClient, QueueConfig, QueueError};
pub use wake::Pushers;
pub use webhook::WebhookSettings;
pub use webhook::guard::{GuardError, resolve_check};
pub use webhook::reconcile::{
    Enqueuer, PastClaims, enqueue_outbox, reconcile_outbox, release_claims_of_past_life,
    spawn_reconciler,
};
pub use workers::spawn_workers;
