//! `GET /api/infra/status` (admin): this node (id, role, engine, leases, draining), its live peers, and the
//! queues' counts as the spec defines them (`pending` = waiting + active + delayed; zeros when the delivery
//! state cannot be read), and with `MAIN_DB_REPLICATION=raft` its replica of the main DB (role, term, leader,
//! commit and applied indexes, each member's lag).

use axum::Json;
use axum::extract::State;
use utoipa_axum::{router::OpenApiRouter, routes};
use wagate_proto::Role;
use wagate_proto::dto::infra_status::{InfraStatus, QueueCounts, QueueStatus};
use wagate_workers::JobCounts;
use wagate_workers::queue_view::QueueName;

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

/// GET /api/infra/status
#[utoipa::path(get, path = "/api/infra/status", tag = "infra",
    responses((status = 200, body = InfraStatus), (status = 401), (status = 403)))]
async fn get_infra_status(
    caller: Caller,
    State(ctx): State<ApiContext>,
) -> ApiResult<Json<InfraStatus>> {
    caller.require(Role::Admin)?;
    let infra = &ctx.infra;
    let (webhooks, ingress, peers) = tokio::join!(
        infra.queue_counts(QueueName::Webhook),
        infra.queue_counts(QueueName::Ingress),
        infra.peers()
    );
    let reachable = webhooks.is_ok() && ingress.is_ok();
    // A session-restricted admin counts only its own sessions.
    let (sessions_loaded, leases_held) = if caller.is_scoped() {
        let mut loaded = ctx.sessions.loaded_ids();
        loaded.retain(|id| caller.may_access(id));
        (loaded.len(), infra.leases_held_among(&loaded))
    } else {
        (ctx.sessions.loaded_count(), infra.leases_held())
    };
    Ok(Json(InfraStatus {
        node_id: ctx.config.node_id.clone(),
        role: ctx.config.role.as_str().to_owned(),
        engine: ctx.config.engine_type.as_str().to_owned(),
        version: wagate_proto::VERSION.to_owned(),
        cluster: infra.is_clustered(),
        draining: infra.is_draining(),
        leases_held,
        sessions_loaded,
        peers,
        queue: QueueStatus {
            backend: infra.queue_backend().to_owned(),
            reachable,
            webhooks: webhooks.map(|c| spec_counts(&c)).unwrap_or_default(),
            ingress: ingress.map(|c| spec_counts(&c)).unwrap_or_default(),
        },
        raft: infra.raft_status(),
    }))
}
