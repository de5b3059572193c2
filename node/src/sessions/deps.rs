//! `Deps`: the handles a loaded session needs (data DB, event pipeline and ingest, engine factory, where
//! engine data lives, the node's shutdown token, the leases). Built once at boot and shared by every runtime.

use std::path::PathBuf;
use std::sync::Arc;

use tokio_util::sync::CancellationToken;

use crate::cluster::lease::Leases;
use crate::engine::EngineFactory;
use crate::events::Pipeline;
use crate::events::ingest::Ingest;
use crate::media::MediaStore;
use crate::store::DataPool;

pub(crate) struct Deps {
    pub db: DataPool,
    pub pipeline: Pipeline,
    pub ingest: Ingest,
    pub factory: Arc<dyn EngineFactory>,
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
    /// The session's media objects go with it on delete.
    pub media: MediaStore,
}
