//! The node's side of the engine boundary. The boundary itself (the `Engine` trait, `EngineEvent`,
//! `Capabilities`, `Op`, `EngineError`, `EngineContext`, `EngineFactory`) lives in the
//! `wagate-engine-api` crate and is re-exported here, so `sessions/` and the HTTP layer name it as
//! `crate::engine::*`. This module adds the node's implementations of the engine API's store and
//! media interfaces (`node_store`, `node_media`) and the stand-in for a kind this build lacks
//! (`unavailable`). The engines are crates of their own written against `wagate-engine-api` alone
//! (`wagate-engine-sim`, `wagate-engine-socket`, `wagate-engine-browser`); boot builds the chosen one's
//! factory.

pub(crate) mod node_media;
pub(crate) mod node_store;
pub(crate) mod unavailable;

pub(crate) use wagate_engine_api::*;
