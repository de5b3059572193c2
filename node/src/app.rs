//! `ApiContext`, the services every handler may use, and the wiring that builds it from the config.
//! Each service gets only the handles it needs, in its constructor; the databases, the queues, the cluster
//! and the raft replica are held by `NodeInfra`, not handed to handlers.

use std::sync::Arc;

use crate::audit::AuditLog;
use crate::automation::AutomationService;
use crate::config::Config;
use crate::events::Pipeline;
use crate::http::limits::Limiter;
use crate::keys::KeyService;
use crate::messaging::MessagingService;
use crate::messaging::bulk::BulkRunner;
use crate::sessions::SessionService;
use crate::webhooks::WebhookService;
use wagate_engine_sim::SimNetwork;

/// Cloned for every request by each layer and extractor that takes the state, so it is one `Arc`.
#[derive(Clone)]
pub struct ApiContext(Arc<ContextParts>);

impl ApiContext {
    pub fn new(parts: ContextParts) -> ApiContext {
        ApiContext(Arc::new(parts))
    }
}

impl std::ops::Deref for ApiContext {
    type Target = ContextParts;

    fn deref(&self) -> &ContextParts {
        &self.0
    }
}

pub struct ContextParts {
    /// Data export/import and media archives (admin routes).
    pub(crate) admin: Arc<crate::admin::DataAdmin>,
    /// ffmpeg conversions (the convert routes and converting sends).
    pub(crate) converter: crate::media::convert::Converter,
    pub config: Arc<Config>,
    pub keys: Arc<KeyService>,
    pub audit: AuditLog,
    /// The global rate limit: in-process, or in Redis for a cluster.
    pub limiter: Arc<Limiter>,
    /// Present when this process installed the Prometheus recorder.
    pub metrics: Option<wagate_workers::telemetry::Recorder>,
    /// Both databases, the job queues, the cluster membership and the raft replica: probes, the infra
    /// status and the queue dashboard go through it.
    pub(crate) infra: Arc<crate::infra::NodeInfra>,
    pub(crate) webhooks: Arc<WebhookService>,
    pub(crate) automation: Arc<AutomationService>,
    pub(crate) sessions: Arc<SessionService>,
    /// Cross-session aggregates (`/api/stats/overview`).
    pub(crate) stats: crate::stats::StatsService,
    /// Every event goes through it: outbox rows, enqueue, live fan-out.
    pub(crate) pipeline: Pipeline,
    pub(crate) messaging: Arc<MessagingService>,
    /// The media backend (`STORAGE_TYPE`): every media read and write goes through it.
    pub(crate) media: crate::media::MediaStore,
    pub(crate) bulk: Arc<BulkRunner>,
    /// The simulated network, when `ENGINE_TYPE=sim` (its control API is mounted only then).
    pub(crate) sim: Option<SimNetwork>,
    /// The client session-scoped requests are forwarded to their owner node with.
    pub(crate) forwarder: crate::http::peer_client::PeerClient,
}
