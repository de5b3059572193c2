//! The delivery-failure log (ADMIN): `GET /api/webhooks/delivery-failures` and its redrive. A
//! session-restricted admin key only sees, and only redrives, its own sessions' rows.

use axum::Json;
use axum::extract::State;
use utoipa_axum::{router::OpenApiRouter, routes};
use wagate_proto::dto::webhooks::{
    DeliveryFailure, DeliveryFailureQuery, RedriveRequest, RedriveResult,
};
use wagate_proto::{Role, iso_ms};

use super::auth::{Caller, canonical_session};
use super::error::{ApiError, ApiResult};
use super::extract::{ApiJson, ApiQuery};
use crate::app::ApiContext;
use crate::webhooks::{FailureRow, RedriveSelection};

pub(crate) fn router() -> OpenApiRouter<ApiContext> {
    OpenApiRouter::new()
        .routes(routes!(list_delivery_failures))
        .routes(routes!(redrive_delivery_failures))
}

/// `limit`/`offset` with bounds; `limit` 1..=max (default `default`), `offset` >= 0.
pub(crate) fn page(
    limit: Option<i64>,
    offset: Option<i64>,
    default: usize,
    max: usize,
) -> ApiResult<(usize, usize)> {
    let limit = match limit {
        None => default,
        Some(n) if n >= 1 && usize::try_from(n).is_ok_and(|n| n <= max) => n as usize,
        Some(_) => {
            return Err(ApiError::bad_request(format!(
                "limit must be between 1 and {max}"
            )));
        }
    };
    let offset = match offset {
        None => 0,
        Some(n) => {
            usize::try_from(n).map_err(|_| ApiError::bad_request("offset must be 0 or more"))?
        }
    };
    Ok((limit, offset))
}

fn failure(r: FailureRow) -> DeliveryFailure {
    DeliveryFailure {
        id: r.id,
        webhook_id: r.webhook_id,
        session_id: r.session_id,
        event: r.event,
        url: r.url,
        idempotency_key: r.idempotency_key,
        delivery_id: r.delivery_id,
        attempts: r.attempts,
        last_status_code: r.last_status_code,
        last_error: r.last_error,
        created_at: iso_ms(r.created_at),
    }
}

/// GET /api/webhooks/delivery-failures
#[utoipa::path(get, path = "/api/webhooks/delivery-failures", tag = "webhooks",
    params(DeliveryFailureQuery), responses((status = 200, body = [DeliveryFailure])))]
async fn list_delivery_failures(
    caller: Caller,
    State(ctx): State<ApiContext>,
    ApiQuery(mut q): ApiQuery<DeliveryFailureQuery>,
) -> ApiResult<Json<Vec<DeliveryFailure>>> {
    caller.require(Role::Admin)?;
    q.session_id = q.session_id.as_deref().map(canonical_session);
    if let Some(id) = &q.session_id {
        caller.require_session(id)?;
    }
    // The reference contract: 1-1000, default 1000.
    let (limit, offset) = page(q.limit, q.offset, 1000, 1000)?;
    let (limit, offset) = (limit as i64, offset as i64);
    let rows = if caller.is_scoped() && q.session_id.is_none() {
        // A scoped key's rows are a subset: read the whole log, then page what it may see.
        let all = ctx.webhooks.failures(None, i64::MAX, 0).await?;
        all.into_iter()
            .filter(|r| caller.may_access(&r.session_id))
            .skip(offset as usize)
            .take(limit as usize)
            .collect()
    } else {
        ctx.webhooks
            .failures(q.session_id.as_deref(), limit, offset)
            .await?
    };
    Ok(Json(rows.into_iter().map(failure).collect()))
}

/// POST /api/webhooks/delivery-failures/redrive
#[utoipa::path(post, path = "/api/webhooks/delivery-failures/redrive", tag = "webhooks",
    request_body = RedriveRequest, responses((status = 200, body = RedriveResult)))]
async fn redrive_delivery_failures(
    caller: Caller,
    State(ctx): State<ApiContext>,
    ApiJson(mut body): ApiJson<RedriveRequest>,
) -> ApiResult<Json<RedriveResult>> {
    caller.require(Role::Admin)?;
    body.session_id = body.session_id.as_deref().map(canonical_session);
    match &body.session_id {
        Some(id) => caller.require_session(id)?,
        None => caller.require_unscoped()?,
    }
    let sel = RedriveSelection {
        session_id: body.session_id,
        webhook_id: body.webhook_id,
        ids: body.ids,
    };
    let c = ctx.webhooks.redrive(&sel).await?;
    ctx.audit.record(
        "webhook_failures_redriven",
        &caller.actor(),
        sel.session_id.as_deref(),
        200,
        Some(serde_json::json!({ "redriven": c.redriven, "delivered": c.delivered })),
    );
    Ok(Json(RedriveResult {
        redriven: c.redriven,
        delivered: c.delivered,
        failed: c.failed,
        remaining: c.remaining,
    }))
}
