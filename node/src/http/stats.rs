//! `GET /api/stats/overview` (ADMIN): cross-session aggregates (sessions by status, stored messages by
//! direction, webhooks) from the stats service. A session-restricted key counts only its sessions.

use std::collections::BTreeMap;

use axum::Json;
use axum::extract::State;
use utoipa_axum::{router::OpenApiRouter, routes};
use wagate_proto::Role;
use wagate_proto::dto::common::{MessageCounts, SessionCounts, StatsOverview, WebhookCounts};

use super::auth::Caller;
use super::error::ApiResult;
use crate::app::ApiContext;

pub(crate) fn router() -> OpenApiRouter<ApiContext> {
    OpenApiRouter::new().routes(routes!(stats_overview))
}

/// GET /api/stats/overview
#[utoipa::path(get, path = "/api/stats/overview", tag = "statistics", responses((status = 200, body = StatsOverview)))]
async fn stats_overview(
    caller: Caller,
    State(ctx): State<ApiContext>,
) -> ApiResult<Json<StatsOverview>> {
    caller.require(Role::Admin)?;
    let mine = |id: &str| caller.may_access(id);
    let counts = ctx
        .stats
        .overview(caller.is_scoped().then_some(mine))
        .await?;
    let (by_status, directions, webhooks) = (
        counts.sessions_by_status,
        counts.messages_by_direction,
        counts.webhooks_by_active,
    );
    let by_status: BTreeMap<String, i64> = by_status.into_iter().collect();
    let directions: BTreeMap<String, i64> = directions.into_iter().collect();
    Ok(Json(StatsOverview {
        sessions: SessionCounts {
            total: by_status.values().sum(),
            ready: by_status.get("ready").copied().unwrap_or(0),
            by_status,
        },
        messages: MessageCounts {
            total: directions.values().sum(),
            incoming: directions.get("incoming").copied().unwrap_or(0),
            outgoing: directions.get("outgoing").copied().unwrap_or(0),
        },
        webhooks: WebhookCounts {
            total: webhooks.iter().map(|(_, n)| n).sum(),
            active: webhooks.iter().filter(|(a, _)| *a).map(|(_, n)| n).sum(),
        },
        timestamp: chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
    }))
}
