//! `GET /api/audit` (ADMIN): audit rows, newest first, filtered and paged. A session-restricted key reads
//! only the rows of its sessions: naming another session is 403 (as every route for it is), and without a
//! `sessionId` the rows are filtered to its list.

use axum::Json;
use axum::extract::State;
use utoipa_axum::{router::OpenApiRouter, routes};
use wagate_proto::Role;
use wagate_proto::dto::audit::{AuditEntry, AuditPage, AuditQuery};
use wagate_proto::iso_ms;

use super::auth::{Caller, canonical_session};
use super::error::{ApiError, ApiResult};
use super::extract::ApiQuery;
use crate::app::ApiContext;
use crate::store::audit::AuditFilter;

pub(crate) fn router() -> OpenApiRouter<ApiContext> {
    OpenApiRouter::new().routes(routes!(list_audit))
}

/// GET /api/audit
#[utoipa::path(get, path = "/api/audit", tag = "audit", params(AuditQuery), responses((status = 200, body = AuditPage)))]
async fn list_audit(
    caller: Caller,
    State(ctx): State<ApiContext>,
    ApiQuery(mut q): ApiQuery<AuditQuery>,
) -> ApiResult<Json<AuditPage>> {
    caller.require(Role::Admin)?;
    // Ids are stored in their canonical (lowercase, hyphenated) form.
    q.session_id = q.session_id.as_deref().map(canonical_session);
    if let Some(session_id) = &q.session_id {
        caller.require_session(session_id)?;
    }
    let limit = q.limit.unwrap_or(50);
    if !(1..=200).contains(&limit) {
        return Err(ApiError::bad_request("limit must be between 1 and 200"));
    }
    let offset = q.offset.unwrap_or(0);
    if offset < 0 {
        return Err(ApiError::bad_request("offset must not be negative"));
    }
    let filter = AuditFilter {
        action: q.action,
        session_id: q.session_id,
        api_key_id: q.api_key_id,
        sessions: caller.key.allowed_sessions.clone(),
        limit,
        offset,
    };
    let (rows, total) = ctx.audit.list(&filter).await?;
    let data = rows
        .into_iter()
        .map(|r| AuditEntry {
            id: r.id,
            action: r.action,
            // Rows written before the contract's names were adopted say `warning`.
            severity: if r.severity == "warning" {
                "warn".to_owned()
            } else {
                r.severity
            },
            api_key_id: r.api_key_id,
            api_key_name: r.api_key_name,
            session_id: r.session_id,
            ip_address: r.ip_address,
            method: r.method,
            path: r.path,
            status_code: r.status_code,
            metadata: r.metadata,
            created_at: iso_ms(r.created_at),
        })
        .collect();
    Ok(Json(AuditPage { data, total }))
}
