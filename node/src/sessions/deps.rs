//! `Deps`: the handles a loaded session needs (data DB, event pipeline and ingest, engine factory, where
//! engine data lives, the node's shutdown token, the leases). Built once at boot and shared by every runtime.

use std::path::PathBuf;
use std::sync::Arc;

use tokio_util::sync::CancellationToken;

use crate::cluster::lease::Leases;
use crate::engine::EngineFactory;
use crate::engine::store::EngineStore;
use crate::events::Pipeline;
use crate::events::ingest::Ingest;
use crate::media::MediaStore;
use crate::store::DataPool;
use crate::store::sessions as session_store;

use super::error::SessionResult;

pub(crate) struct Deps {
    pub db: DataPool,
    pub pipeline: Pipeline,
    pub ingest: Ingest,
    pub factory: Arc<dyn EngineFactory>,
    /// What every engine context carries of the node's data (the engine API's store interface,
    /// implemented by `engine/node_store.rs`); its media is `media` bound to the session
    /// (`engine/node_media.rs`).
    pub engine_store: Arc<dyn EngineStore>,
    /// `DATA_DIR/sessions`: engine auth directories, keyed by session id.
    pub sessions_dir: PathBuf,
    pub shutdown: CancellationToken,
    /// Asked before every fenced write: a lease past its deadline writes nothing, even if the fence would
    /// still let it through.
    pub leases: Arc<dyn Leases>,
    /// Benchmark only (`WAGATE_BENCH_ACK_ON_RECEIPT=true`, not a product setting): acknowledge received
    /// traffic as it arrives, as before acknowledgement after commit, to measure what the ordering costs.
    pub ack_on_receipt: bool,
    /// Session records for the read routes; every session-row write invalidates (`cache.rs`).
    pub records: super::cache::RecordCache,
    /// The media store: engines reach it bound to their session; the session's objects go with it on
    /// delete.
    pub media: MediaStore,
}

impl Deps {
    /// Forgets a session's credentials everywhere they live: the `LinkedAccount` rows the node stores
    /// (`engine_auth`), then whatever the engine kind keeps on its own (the factory's wipe).
    pub(crate) async fn forget_credentials(&self, id: &str) -> SessionResult<()> {
        session_store::delete_engine_auth(&self.db, id).await?;
        self.factory.wipe_credentials(id).await?;
        Ok(())
    }
}
