//! `GET /api/infra/status` (admin): this node (id, role, engine, leases, draining), its live peers, and the
//! queues' counts as the spec defines them (`pending` = waiting + active + delayed; zeros when the delivery
//! state cannot be read), and with `MAIN_DB_REPLICATION=raft` its replica of the main DB (role, term, leader,
//! commit and applied indexes, each member's lag).

use axum::Json;
use axum::extract::State;
use utoipa_axum::{router::OpenApiRouter, routes};
use wagate_proto::Role;
use wagate_proto::dto::infra_status::{InfraStatus, PeerStatus, QueueCounts, QueueStatus};
use wagate_workers::queue_view::{self, QueueName};
use wagate_workers::{JobCounts, QueueBackend};

use super::auth::Caller;
use super::error::ApiResult;
use crate::app::ApiContext;
use crate::cluster::SessionHost;

pub(crate) fn router() -> OpenApiRouter<ApiContext> {
    OpenApiRouter::new().routes(routes!(get_infra_status))
}

fn spec_counts(c: &JobCounts) -> QueueCounts {
    QueueCounts {
        pending: c.pending(),
        completed: c.completed,
        failed: c.failed,
    }
}

/// Leases this node holds: the Redis leases in a cluster; embedded, every loaded session holds its own.
pub(crate) fn leases_held(ctx: &ApiContext) -> usize {
    match &ctx.cluster {
        Some(cluster) => cluster.leases.held_count(),
        None => ctx.sessions.loaded_count(),
    }
}

/// GET /api/infra/status
#[utoipa::path(get, path = "/api/infra/status", tag = "infra",
    responses((status = 200, body = InfraStatus), (status = 401), (status = 403)))]
async fn get_infra_status(
    caller: Caller,
    State(ctx): State<ApiContext>,
) -> ApiResult<Json<InfraStatus>> {
    caller.require(Role::Admin)?;
    let (webhooks, ingress) = tokio::join!(
        queue_view::counts(&ctx.data_db, QueueName::Webhook),
        queue_view::counts(&ctx.data_db, QueueName::Ingress)
    );
    let reachable = webhooks.is_ok() && ingress.is_ok();
    let peers = match &ctx.cluster {
        Some(cluster) => match cluster.registry.live_nodes().await {
            Ok(nodes) => nodes
                .into_iter()
                .filter(|n| n.node_id != cluster.node_id)
                .map(|n| PeerStatus {
                    node_id: n.node_id,
                    url: n.url,
                    sessions: n.sessions,
                    draining: n.is_draining,
                    heartbeat_at: n.heartbeat_at,
                })
                .collect(),
            Err(err) => {
                tracing::warn!(error = %err, "live peers not read for the infra status");
                Vec::new()
            }
        },
        None => Vec::new(),
    };
    let backend = match ctx.queue.config().backend {
        QueueBackend::Sqlite { .. } => "sqlite",
        QueueBackend::Redis { .. } => "redis",
    };
    Ok(Json(InfraStatus {
        node_id: ctx.config.node_id.clone(),
        role: ctx.config.role.as_str().to_owned(),
        engine: ctx.config.engine_type.as_str().to_owned(),
        version: wagate_proto::VERSION.to_owned(),
        cluster: ctx.cluster.is_some(),
        draining: ctx.cluster.as_ref().is_some_and(|c| c.is_draining()),
        leases_held: leases_held(&ctx),
        sessions_loaded: ctx.sessions.loaded_count(),
        peers,
        queue: QueueStatus {
            backend: backend.to_owned(),
            reachable,
            webhooks: webhooks.map(|c| spec_counts(&c)).unwrap_or_default(),
            ingress: ingress.map(|c| spec_counts(&c)).unwrap_or_default(),
        },
        raft: ctx.raft.as_ref().map(|node| node.status()),
    }))
}
