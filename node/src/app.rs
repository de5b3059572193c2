//! `ApiContext`, the handles every handler may use, and the wiring that builds it from the config.
//! Each service gets only the handles it needs, in its constructor.

use std::sync::Arc;

use metrics_exporter_prometheus::PrometheusHandle;
use sqlx::SqlitePool;

use crate::audit::AuditLog;
use crate::config::Config;
use crate::engine::sim::SimNetwork;
use crate::events::Pipeline;
use crate::http::limits::TieredLimiter;
use crate::keys::KeyService;
use crate::messaging::MessagingService;
use crate::messaging::bulk::BulkRunner;
use crate::sessions::SessionService;
use crate::store::DataPool;

#[derive(Clone)]
pub struct ApiContext {
    pub config: Arc<Config>,
    pub keys: Arc<KeyService>,
    pub audit: AuditLog,
    pub main_db: SqlitePool,
    pub data_db: DataPool,
    pub limiter: Arc<TieredLimiter>,
    /// Present when this process installed the Prometheus recorder.
    pub metrics: Option<PrometheusHandle>,
    pub(crate) sessions: Arc<SessionService>,
    #[allow(dead_code)] // read by the WebSocket fan-out (events issue)
    pub(crate) pipeline: Pipeline,
    pub(crate) messaging: Arc<MessagingService>,
    pub(crate) bulk: Arc<BulkRunner>,
    /// The simulated network, when `ENGINE_TYPE=sim` (its control API is mounted only then).
    pub(crate) sim: Option<SimNetwork>,
}
