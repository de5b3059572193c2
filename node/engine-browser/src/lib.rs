//! wagate's browser engine: one Debian Chromium per session, driven over the DevTools protocol
//! (`chromiumoxide`), with WhatsApp Web reached through one versioned JS facade (`js/bridge.js`) over the
//! pinned `@wppconnect/wa-js` bundle. Written against `wagate-engine-api` alone: the node builds a
//! [`BrowserFactory`] from a [`Launcher`] at boot and reaches the engine only through the engine API's
//! traits, and the engine reaches the node only through the `EngineContext` it is handed.
//!
//! `adapter/` is the engine API's `Engine` over a [`BrowserSession`] (events, operations, error mapping);
//! below it the crate knows nothing of the engine API: it takes a [`BrowserConfig`], hands out
//! [`BrowserEvent`]s on a channel and answers calls with [`BrowserError`]s. `launch` starts Chromium
//! (flags, concurrency limit), `procs` reads and kills the process tree, `profile` archives and restores
//! the profile (the credential), `bridge` holds the facade and decodes what the page pushes, `session`
//! runs one session's page (injection, reload grace, crash recovery, memory ceiling).

mod adapter;
mod bridge;
mod config;
mod error;
mod launch;
pub mod procs;
pub mod profile;
mod session;

pub use adapter::BrowserFactory;
pub use bridge::{BRIDGE_JS, BRIDGE_VERSION, Me};
pub use config::{
    BrowserConfig, ConfigError, DEFAULT_BUNDLE_PATH, DEFAULT_URL, DESKTOP_USER_AGENT,
    INSTALLED_BUNDLE_PATH, NAVIGATION_REINJECT_GRACE_MS, default_bundle_path,
    default_chromium_path,
};
pub use error::BrowserError;
pub use launch::Launcher;
pub use procs::Memory;
pub use session::{BrowserEvent, BrowserSession, SessionOptions};
