//! The session part of session-scoped routes: the path's `{sessionId}` must be a UUID (400), the caller's
//! key must cover it (403), and the session must exist (404 `Session <id> not found`).

use super::auth::Caller;
use super::error::{ApiError, ApiResult};
use crate::app::ApiContext;
use crate::store::{StoreError, sessions as session_store};

/// Checks all three, in that order; answers the session id in canonical form.
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
    caller.require_session(&id)?;
    match session_store::get(&ctx.data_db, &id).await {
        Ok(_) => Ok(id),
        Err(StoreError::NotFound) => Err(ApiError::not_found(format!("Session {id} not found"))),
        Err(other) => Err(other.into()),
    }
}
