//! The node's side of the engine boundary. The boundary itself (the `Engine` trait, `EngineEvent`,
//! `Capabilities`, `Op`, `EngineError`, `EngineContext`, `EngineFactory`) lives in the
//! `wagate-engine-api` crate and is re-exported here, so `sessions/` and the HTTP layer name it as
//! `crate::engine::*`. This module adds the node's implementations of the engine API's store and
//! media interfaces (`node_store`, `node_media`), the node-side parts of the socket engine (`socket/`),
//! and the stand-in for a kind this build lacks (`unavailable`); the sim engine is the `wagate-engine-sim`
//! crate and the browser engine the `wagate-engine-browser` crate (boot builds its factory).

pub(crate) mod node_media;
pub(crate) mod node_store;
pub(crate) mod socket;
pub(crate) mod unavailable;

pub(crate) use wagate_engine_api::*;
