//! wagate API node: REST and WebSocket API, session engines, the event pipeline, and cluster duties.
//!
//! # Layout
//! - `config`: the node's configuration (knobs defined in `wagate-config`), defaults and boot refusals.
//! - `app`: `ApiContext`, the shared handles of every handler.
//! - `admin/`: data export/import and media archives.
//! - `http/`: one router per resource, the error type, auth extractor and request limits.
//! - `keys/`: API key issue, check (cached) and change rules.
//! - `audit`: the audit log service.
//! - `automation`: automation rules (CRUD, matching, the `AutomationSender` hook).
//! - `webhooks`: the webhook service (rules, test delivery, failure-log redrive).
//! - `stats`: the stats service (cross-session aggregates).
//! - `engine/`: the `Engine` trait and the engines (`sim` today).
//! - `events/`: normalised events, the outbox pipeline and live fan-out.
//! - `messaging/`: sends, message operations, the message store's write path, templates, bulk, pacing.
//! - `media/`: the media store (`STORAGE_TYPE`: `DATA_DIR/media` or an S3 bucket; keys
//!   `{sessionId}/{sha256}`), guarded URL fetches, ffmpeg conversion.
//! - `sessions/`: the transition table, reconnect backoff, and the supervisor of running engines.
//! - `cluster/`: session leases (local and Redis, fenced), node registry, heartbeat, takeover sweep.
//! - `store/`: all SQL; data DB on SQLite or PostgreSQL, main DB on SQLite.
//! - `boot`: start-up and shutdown of a node.

pub(crate) mod admin;
pub mod app;
pub mod audit;
pub(crate) mod automation;
mod boot;
pub(crate) mod cluster;
pub mod config;
pub(crate) mod engine;
pub(crate) mod events;
mod footprint;
pub(crate) mod hooks;
pub mod http;
pub(crate) mod infra;
pub(crate) mod json;
pub mod keys;
pub mod maindb;
pub(crate) mod media;
pub(crate) mod messaging;
pub(crate) mod names;
#[cfg(test)]
mod props;
pub mod raft;
pub(crate) mod sessions;
pub(crate) mod stats;
pub mod store;
pub(crate) mod webhooks;

pub use boot::run;
