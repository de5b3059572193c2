//! Sessions: the spec's transition table (`state`), reconnect timing (`backoff`), and the supervisor of
//! the sessions loaded on this node (`service`, `lifecycle`, `runtime`, `effects`, `restore`,
//! `takeover` for the cluster), and the presence each loaded session was told of (`presence`).
//! Handlers call `SessionService`; nothing here knows HTTP.

pub(crate) mod backoff;
pub(crate) mod cache;
pub(crate) mod deps;
pub(crate) mod drain;
pub(crate) mod effects;
pub(crate) mod error;
pub(crate) mod event_hooks;
pub(crate) mod lifecycle;
pub(crate) mod presence;
pub(crate) mod proxy;
pub(crate) mod restore;
pub(crate) mod run_state;
pub(crate) mod runtime;
pub(crate) mod service;
pub(crate) mod state;
pub(crate) mod takeover;

pub(crate) use error::SessionError;
pub(crate) use service::{ConfigChange, SessionService, SessionView};

/// The linked number as the spec shows it (`4915100000001`), from the stored JID: the session record and
/// the `session.authenticated` event name it the same way.
pub(crate) fn linked_number(phone: &str) -> &str {
    phone.split('@').next().unwrap_or(phone)
}
