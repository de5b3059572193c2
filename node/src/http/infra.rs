//! Infrastructure routes: `POST /api/infra/drain` hands this node's sessions to its peers (admin only).

use axum::Json;
use axum::extract::State;
use utoipa_axum::{router::OpenApiRouter, routes};
use wagate_proto::Role;
use wagate_proto::dto::infra::DrainResult;

use super::auth::Caller;
use super::error::{ApiError, ApiResult};
use crate::app::ApiContext;

pub(crate) fn router() -> OpenApiRouter<ApiContext> {
    OpenApiRouter::new().routes(routes!(drain_node))
}

/// POST /api/infra/drain
///
/// Stops this node's engines and releases their leases (the sessions stay meant to run), so peers take
/// them over at their next sweep; the node takes no new sessions afterwards. Only in a cluster.
#[utoipa::path(post, path = "/api/infra/drain", tag = "infra",
    responses((status = 200, body = DrainResult), (status = 409)))]
async fn drain_node(caller: Caller, State(ctx): State<ApiContext>) -> ApiResult<Json<DrainResult>> {
    caller.require(Role::Admin)?;
    let Some(cluster) = &ctx.cluster else {
        return Err(ApiError::conflict(
            "Drain needs a cluster (REDIS_ENABLED=true)",
        ));
    };
    let released = cluster.drain(ctx.sessions.as_ref()).await;
    ctx.audit
        .record("node_drained", &caller.actor(), None, 200, None);
    Ok(Json(DrainResult {
        node_id: cluster.node_id.clone(),
        released,
    }))
}
