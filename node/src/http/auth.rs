//! Authentication and authorisation at the edge: the `Caller` extractor (key from `X-API-Key` or
//! `Authorization: Bearer`, checked against the key cache, then the route's access rule from `access.rs` and
//! the key's session scope on `{sessionId}` routes), and the role and scope checks handlers add for rules
//! that depend on the input. Every handler extracts `Caller` first, so 401 and 403 come before any 400.

use std::net::IpAddr;
use std::sync::Arc;

use axum::extract::{FromRequestParts, MatchedPath, OptionalFromRequestParts, RawPathParams};
use axum::http::request::Parts;
use axum::http::{HeaderMap, Method, header};
use wagate_proto::Role;

use super::access::access_for;
use super::client_addr::client_ip;
use super::error::ApiError;
use super::extract::query_pairs;
use crate::app::ApiContext;
use crate::audit::AuditActor;
use crate::keys::KeyRefusal;
use crate::store::keys::ApiKey;

/// The authenticated caller of a request.
#[derive(Debug, Clone)]
pub struct Caller {
    pub key: Arc<ApiKey>,
    pub ip: Option<IpAddr>,
    pub method: Method,
    pub path: String,
}

/// A session id as keys list it (lowercase hyphenated UUID); anything else as given.
pub(crate) fn canonical_session(raw: &str) -> String {
    uuid::Uuid::parse_str(raw)
        .map(|id| id.to_string())
        .unwrap_or_else(|_| raw.to_string())
}

/// The key presented with a request, `X-API-Key` winning over `Authorization: Bearer`.
pub fn presented_key(headers: &HeaderMap) -> Option<&str> {
    if let Some(key) = headers.get("x-api-key").and_then(|v| v.to_str().ok()) {
        return Some(key);
    }
    let auth = headers.get(header::AUTHORIZATION)?.to_str().ok()?;
    let (scheme, token) = auth.split_once(' ')?;
    scheme
        .eq_ignore_ascii_case("bearer")
        .then_some(token.trim())
}

impl FromRequestParts<ApiContext> for Caller {
    type Rejection = ApiError;

    async fn from_request_parts(
        parts: &mut Parts,
        ctx: &ApiContext,
    ) -> Result<Self, Self::Rejection> {
        let presented = presented_key(&parts.headers).ok_or(KeyRefusal::Missing)?;
        let ip = client_ip(parts);
        let key = ctx.keys.verify_fresh(presented, ip).await?;
        Caller::for_key(key, ip, parts, ctx).await
    }
}

impl Caller {
    /// The same checks as the extractor without counting a use of the key: what a node checks before it
    /// forwards a request to the session's owner, which checks again and counts it. A key revoked through
    /// this node is then refused here at once, whatever the owner's replica has applied yet.
    pub(crate) async fn check_before_forward(
        parts: &mut Parts,
        ctx: &ApiContext,
    ) -> Result<(), ApiError> {
        let presented = presented_key(&parts.headers).ok_or(KeyRefusal::Missing)?;
        let ip = client_ip(parts);
        let key = ctx.keys.admit_fresh(presented, ip).await?;
        Caller::for_key(key, ip, parts, ctx).await.map(drop)
    }

    async fn for_key(
        key: Arc<ApiKey>,
        ip: Option<IpAddr>,
        parts: &mut Parts,
        ctx: &ApiContext,
    ) -> Result<Caller, ApiError> {
        if let Some(slot) = parts.extensions.get::<super::observe::CallerSlot>() {
            slot.set(&key.id, key.role);
        }
        let caller = Caller {
            key,
            ip,
            method: parts.method.clone(),
            path: parts.uri.path().to_string(),
        };
        caller.check_route(parts, ctx).await?;
        Ok(caller)
    }
}

impl OptionalFromRequestParts<ApiContext> for Caller {
    type Rejection = std::convert::Infallible;

    async fn from_request_parts(
        parts: &mut Parts,
        ctx: &ApiContext,
    ) -> Result<Option<Self>, Self::Rejection> {
        Ok(
            <Caller as FromRequestParts<ApiContext>>::from_request_parts(parts, ctx)
                .await
                .ok(),
        )
    }
}

impl Caller {
    /// The matched route's access rule, then the key's session scope on a `{sessionId}` route and on a
    /// `sessionId` query filter (audit, search, delivery failures). A value that is not a UUID cannot name a
    /// session the key covers, so a scoped key gets 403 for it.
    async fn check_route(&self, parts: &mut Parts, ctx: &ApiContext) -> Result<(), ApiError> {
        let Some(template) = parts.extensions.get::<MatchedPath>().cloned() else {
            return Ok(());
        };
        let access = access_for(&parts.method, template.as_str());
        self.require(access.role)?;
        if access.unscoped_only {
            self.require_unscoped()?;
        }
        if self.is_scoped() && template.as_str().contains("{sessionId}") {
            let params = RawPathParams::from_request_parts(parts, ctx)
                .await
                .map_err(|e| {
                    ApiError::bad_request(format!("Invalid path parameter: {}", e.body_text()))
                })?;
            let raw = params
                .iter()
                .find(|(name, _)| *name == "sessionId")
                .map(|(_, value)| value)
                .unwrap_or_default();
            self.require_session(&canonical_session(raw))?;
        }
        if self.is_scoped() {
            for (name, value) in query_pairs(parts.uri.query()) {
                if name == "sessionId" && !value.is_empty() {
                    self.require_session(&canonical_session(&value))?;
                }
            }
        }
        Ok(())
    }

    pub fn role(&self) -> Role {
        self.key.role
    }

    /// 403 unless the key's role is at least `needed`.
    pub fn require(&self, needed: Role) -> Result<(), ApiError> {
        if self.key.role >= needed {
            Ok(())
        } else {
            Err(ApiError::forbidden(format!(
                "Insufficient role: this operation requires {}",
                needed.as_str()
            )))
        }
    }

    pub fn is_scoped(&self) -> bool {
        self.key.allowed_sessions.is_some()
    }

    pub fn may_access(&self, session_id: &str) -> bool {
        self.key
            .allowed_sessions
            .as_ref()
            .is_none_or(|list| list.iter().any(|s| s == session_id))
    }

    /// 403 unless the key may act on `session_id`.
    pub fn require_session(&self, session_id: &str) -> Result<(), ApiError> {
        if self.may_access(session_id) {
            Ok(())
        } else {
            Err(ApiError::forbidden(
                "This API key is not allowed to access this session",
            ))
        }
    }

    /// 403 for keys restricted to some sessions (key management, proxy update).
    pub fn require_unscoped(&self) -> Result<(), ApiError> {
        if self.is_scoped() {
            Err(ApiError::forbidden(
                "This operation is not available to session-restricted API keys",
            ))
        } else {
            Ok(())
        }
    }

    pub fn actor(&self) -> AuditActor {
        AuditActor {
            api_key_id: Some(self.key.id.clone()),
            api_key_name: Some(self.key.name.clone()),
            ip_address: self.ip.map(|ip| ip.to_string()),
            method: Some(self.method.to_string()),
            path: Some(self.path.clone()),
        }
    }
}
