//! The `socket` engine, written against the engine API crate alone: each session is a WhatsApp Web
//! multi-device client (`whatsapp-rust`) with its auth state in the engine's own tables of the data DB
//! (`crate::store`); the node's data reaches it only through `EngineContext` (`store`, `media`, `events`).
//! This module owns the factory and
//! the engine struct; `lifecycle.rs` builds, connects and tears the client down, `link.rs` turns the
//! library's connection events into the session's lifecycle events, `events.rs` maps everything else
//! (`receive.rs` finishes what needs I/O: `media.rs` downloads, `votes.rs` poll votes, `history.rs` history
//! sync), and `engine_impl.rs` is the `Engine` impl (lifecycle here, operations delegated to `ops/`).

mod engine_impl;
mod events;
mod gate;
mod history;
mod lifecycle;
mod link;
mod media;
pub(crate) mod ops;
mod receive;
#[cfg(test)]
mod receive_tests;
#[cfg(test)]
mod testkit;
#[cfg(test)]
mod tests;
mod votes;

use std::sync::Arc;

use parking_lot::Mutex as SyncMutex;
use tokio::sync::Mutex;
use wagate_db::DataPool;
use wagate_engine_api::{
    Capabilities, Engine, EngineContext, EngineError, EngineFactory, EngineKind, EngineResult,
};

use crate::transport::Endpoint;
use crate::whatsapp_rust::Client;

use lifecycle::Running;
use link::LinkTracker;

/// The socket engine's settings (env knobs, validated at boot).
#[derive(Debug, Clone, Default)]
pub struct SocketConfig {
    /// `SOCKET_WS_URL`: the WebSocket endpoint the client dials (default: WhatsApp Web's).
    pub endpoint: Endpoint,
}

/// Builds socket engines. Holds the data DB, where the engine's own tables (auth state, message
/// secrets) live, and the config; the node's data and media come with each engine's context.
pub struct SocketFactory {
    pool: DataPool,
    config: Arc<SocketConfig>,
}

impl SocketFactory {
    pub fn new(pool: DataPool, config: SocketConfig) -> Self {
        Self {
            pool,
            config: Arc::new(config),
        }
    }
}

/// Forgets a session's socket auth state (its tables and SQL belong to `crate::store`).
async fn wipe_auth_state(pool: &DataPool, session_id: &str) -> EngineResult<()> {
    crate::store::delete_session_state(pool, session_id)
        .await
        .map_err(|err| EngineError::Network(format!("data store: {err:#}")))
}

#[async_trait::async_trait]
impl EngineFactory for SocketFactory {
    fn create(&self, ctx: EngineContext) -> Arc<dyn Engine> {
        Arc::new(SocketEngine::new(
            ctx,
            self.pool.clone(),
            self.config.clone(),
        ))
    }

    fn capabilities(&self) -> &Capabilities {
        &Capabilities::SOCKET
    }

    fn kind(&self) -> EngineKind {
        EngineKind::Socket
    }

    async fn wipe_credentials(&self, session_id: &str) -> EngineResult<()> {
        wipe_auth_state(&self.pool, session_id).await
    }
}

/// One session's socket engine. A fresh instance per launch (the supervisor's rule); it runs at most one
/// client, between `start` and `stop`/`logout`/`kill`.
pub(crate) struct SocketEngine {
    ctx: EngineContext,
    pool: DataPool,
    config: Arc<SocketConfig>,
    /// The live client, for operations (a sync lock: only held to clone the Arc).
    client: SyncMutex<Option<Arc<Client>>>,
    /// The running client's handle; lifecycle calls serialise on it.
    running: Mutex<Option<Running>>,
    link: Arc<LinkTracker>,
    /// Incoming call offers, so a call can be rejected by id (filled by the event mapping).
    calls: Arc<ops::calls::RecentCalls>,
    /// The last presence heard per chat, for presence reads (filled by the event mapping).
    presence: Arc<ops::presence::PresenceBook>,
}

impl SocketEngine {
    fn new(ctx: EngineContext, pool: DataPool, config: Arc<SocketConfig>) -> Self {
        let link = Arc::new(LinkTracker::new(ctx.session_id.clone(), ctx.events.clone()));
        Self {
            ctx,
            pool,
            config,
            client: SyncMutex::new(None),
            running: Mutex::new(None),
            link,
            calls: Arc::new(ops::calls::RecentCalls::default()),
            presence: Arc::new(ops::presence::PresenceBook::default()),
        }
    }

    /// The connected, logged-in client; `NotReady` (409) while the session is not connected.
    pub(super) fn client(&self) -> EngineResult<Arc<Client>> {
        let client = self.client.lock().clone().ok_or(EngineError::NotReady)?;
        if client.is_connected() && client.is_logged_in() {
            Ok(client)
        } else {
            Err(EngineError::NotReady)
        }
    }

    pub(super) fn session_id(&self) -> &str {
        &self.ctx.session_id
    }

    /// The media store with this session's proxy, for operations that read stored media or fetch URLs.
    pub(super) fn media(&self) -> ops::Media<'_> {
        ops::Media {
            store: self.ctx.media.as_ref(),
            proxy_url: self.ctx.proxy_url.as_deref(),
        }
    }

    /// This session's rows in the data DB, for the operations.
    pub(super) fn store(&self) -> ops::Store<'_> {
        ops::Store {
            db: self.ctx.store.as_ref(),
            session_id: &self.ctx.session_id,
        }
    }
}
