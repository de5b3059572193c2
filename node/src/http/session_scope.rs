//! The one answer to "this session exists and this key may use it", for every session-scoped route: the
//! path's `{sessionId}` is a UUID (400), the key covers the session (403; its role and scope were applied
//! to the route by the `Caller` extractor already), and the session exists (404, through the session
//! service). [`ScopedSession`] is the extractor; [`check`] is the same answer for code that has the id
//! already (`engine_call::ready_engine`, which then asks for the ready engine: 409).

use axum::extract::FromRequestParts;
use axum::http::request::Parts;

use super::auth::Caller;
use super::error::{ApiError, ApiResult};
use super::extract::SessionId;
use crate::app::ApiContext;
use crate::store::sessions::SessionRecord;

/// A session the caller may use, checked to exist; carries the record it was checked with.
pub(crate) struct ScopedSession {
    pub id: SessionId,
    pub record: SessionRecord,
}

impl FromRequestParts<ApiContext> for ScopedSession {
    type Rejection = ApiError;

    async fn from_request_parts(
        parts: &mut Parts,
        ctx: &ApiContext,
    ) -> Result<Self, Self::Rejection> {
        let caller = Caller::from_request_parts(parts, ctx).await?;
        let id = SessionId::from_request_parts(parts, ctx).await?;
        let record = check(ctx, &caller, &id.0).await?;
        Ok(ScopedSession { id, record })
    }
}

/// Scope (403), then existence (404): the check every session-scoped path goes through.
pub(crate) async fn check(ctx: &ApiContext, caller: &Caller, id: &str) -> ApiResult<SessionRecord> {
    caller.require_session(id)?;
    let record = ctx.sessions.cached_record(id).await?;
    Ok(record.record.clone())
}

/// For routes whose session id is read as a plain string: the id must be a UUID (400), then [`check`];
/// answers the id in canonical form.
pub(crate) async fn existing_session(
    ctx: &ApiContext,
    caller: &Caller,
    raw_id: &str,
) -> ApiResult<String> {
    let id = uuid::Uuid::parse_str(raw_id)
        .map_err(|_| {
            ApiError::bad_request(format!("Invalid session id '{raw_id}': expected a UUID"))
        })?
        .to_string();
    check(ctx, caller, &id).await?;
    Ok(id)
}
