//! Administration of data: the data export and import (`export.rs`, `import.rs`) over the sixteen tables of
//! `store::data_tables`, and media archives (`storage.rs`) through the `MediaObjects` interface. Handlers in
//! `http/infra.rs` parse and authorise; the rules (budget, credential stripping, orphans, the one
//! transaction, archive paths and expiry) live here.

mod export;
mod import;
pub(crate) mod storage;

use std::path::PathBuf;
use std::sync::Arc;

use crate::automation::AutomationService;
use crate::events::Pipeline;
use crate::media::{MediaObjects, MediaStore};
use crate::sessions::SessionService;
use crate::store::{DataPool, StoreError};

pub(crate) use import::ImportRequest;

/// Why an administrative action failed; `http/error.rs` maps each to its status.
#[derive(Debug, thiserror::Error)]
pub(crate) enum AdminError {
    #[error("{0}")]
    BadRequest(String),
    #[error("{0}")]
    Conflict(String),
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("{0}")]
    Internal(String),
}

pub(crate) type AdminResult<T> = Result<T, AdminError>;

pub(crate) struct DataAdmin {
    db: DataPool,
    media: MediaStore,
    objects: Arc<dyn MediaObjects>,
    sessions: Arc<SessionService>,
    pipeline: Pipeline,
    automation: Arc<AutomationService>,
    inline_budget: u64,
    data_dir: PathBuf,
    export_ttl_ms: u64,
}

impl DataAdmin {
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn new(
        db: DataPool,
        media: MediaStore,
        sessions: Arc<SessionService>,
        pipeline: Pipeline,
        automation: Arc<AutomationService>,
        inline_budget: u64,
        data_dir: PathBuf,
        export_ttl_ms: u64,
    ) -> DataAdmin {
        DataAdmin {
            db,
            objects: Arc::new(media.clone()),
            media,
            sessions,
            pipeline,
            automation,
            inline_budget,
            data_dir,
            export_ttl_ms,
        }
    }
}
