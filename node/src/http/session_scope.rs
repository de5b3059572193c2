//! The one answer to "this session exists and this key may use it", for every session-scoped route.
//!
//! [`Scoped`] is the extractor. Building it extracts `Caller` (401, then the route's role and the key's
//! scope: 403) and the path's `{sessionId}` as a UUID (400), so it takes the place those two extractors had
//! and every status before the body keeps its order. Existence (404) and readiness (409) are asked of it with
//! [`Scoped::record`] and [`Scoped::engine`], where the handler has checked its own input: the spec answers
//! 400 for a bad body or field before 404 for an unknown session, and 404 before 409. [`ScopedSession`] is
//! the same extractor resolving the record at once, for routes with no input to check first.
//! [`ScopedRawId`] serves the routes whose `{sessionId}` is validated after the body (webhooks, automation
//! rules), with their own 400 message for an id that is not a UUID.

use std::sync::Arc;

use axum::extract::{FromRequestParts, RawPathParams};
use axum::http::request::Parts;

use super::auth::Caller;
use super::error::{ApiError, ApiResult};
use super::extract::{SessionId, canonical_session_id};
use crate::app::ApiContext;
use crate::engine::Engine;
use crate::store::sessions::SessionRecord;

/// A session the caller's key may use; whether it exists is asked of it.
pub(crate) struct Scoped {
    pub caller: Caller,
    pub id: SessionId,
    ctx: ApiContext,
}

impl FromRequestParts<ApiContext> for Scoped {
    type Rejection = ApiError;

    async fn from_request_parts(
        parts: &mut Parts,
        ctx: &ApiContext,
    ) -> Result<Self, Self::Rejection> {
        let caller = Caller::from_request_parts(parts, ctx).await?;
        let id = SessionId::from_request_parts(parts, ctx).await?;
        Ok(Scoped {
            caller,
            id,
            ctx: ctx.clone(),
        })
    }
}

impl Scoped {
    /// The session id, canonical (lowercase hyphenated UUID).
    pub(crate) fn id(&self) -> &str {
        &self.id.0
    }

    /// The stored session (404 unknown).
    pub(crate) async fn record(&self) -> ApiResult<SessionRecord> {
        record(&self.ctx, &self.caller, self.id()).await
    }

    /// The session's connected engine: 404 for an unknown session first, then 409 while it is not
    /// connected. Sends go through `MessagingService`, which also refuses `action_required`.
    pub(crate) async fn engine(&self) -> ApiResult<Arc<dyn Engine>> {
        record(&self.ctx, &self.caller, self.id()).await?;
        Ok(self.ctx.sessions.connected_engine(self.id())?)
    }

    /// The engine for a send: as [`Scoped::engine`], but `action_required` answers 409 too.
    pub(crate) async fn sending_engine(&self) -> ApiResult<Arc<dyn Engine>> {
        record(&self.ctx, &self.caller, self.id()).await?;
        Ok(self.ctx.sessions.ready_engine(self.id())?)
    }
}

/// Scope (403; `Caller` refused other sessions already, so this is the second line), then existence (404).
async fn record(ctx: &ApiContext, caller: &Caller, id: &str) -> ApiResult<SessionRecord> {
    caller.require_session(id)?;
    let record = ctx.sessions.cached_record(id).await?;
    Ok(record.record.clone())
}

/// A [`Scoped`] session checked to exist at extraction, with the record it was checked with.
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
        let scoped = Scoped::from_request_parts(parts, ctx).await?;
        let record = scoped.record().await?;
        Ok(ScopedSession {
            id: scoped.id,
            record,
        })
    }
}

/// A session-scoped route whose `{sessionId}` is read as given and checked by [`ScopedRawId::existing`]
/// after the body: a non-UUID id answers "Invalid session id" there, not the engine-lookup 400 of
/// [`SessionId`].
pub(crate) struct ScopedRawId {
    pub caller: Caller,
    raw: String,
    ctx: ApiContext,
}

impl FromRequestParts<ApiContext> for ScopedRawId {
    type Rejection = ApiError;

    async fn from_request_parts(
        parts: &mut Parts,
        ctx: &ApiContext,
    ) -> Result<Self, Self::Rejection> {
        let caller = Caller::from_request_parts(parts, ctx).await?;
        let params = RawPathParams::from_request_parts(parts, ctx)
            .await
            .map_err(|e| {
                ApiError::bad_request(format!("Invalid path parameter: {}", e.body_text()))
            })?;
        let raw = params
            .iter()
            .find(|(name, _)| *name == "sessionId")
            .map(|(_, value)| value.to_owned())
            .unwrap_or_default();
        Ok(ScopedRawId {
            caller,
            raw,
            ctx: ctx.clone(),
        })
    }
}

impl ScopedRawId {
    /// The id must be a UUID (400), the key may use it and it exists (404); answers it in canonical form.
    pub(crate) async fn existing(&self) -> ApiResult<String> {
        // Only the hyphenated form, as every other session route takes it (`canonical_session_id`).
        let id = canonical_session_id(&self.raw).ok_or_else(|| {
            ApiError::bad_request(format!(
                "Invalid session id '{}': expected a UUID",
                self.raw
            ))
        })?;
        record(&self.ctx, &self.caller, &id).await?;
        Ok(id)
    }
}
