//! Key management (ADMIN, unscoped keys only) and the key check (any valid key), wire-notes §2.

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use utoipa_axum::{router::OpenApiRouter, routes};
use wagate_proto::Role;
use wagate_proto::dto::keys::{ApiKeyRecord, CreateApiKeyRequest, KeyCheck, UpdateApiKeyRequest};
use wagate_proto::iso_ms;

use super::auth::Caller;
use super::error::{ApiError, ApiResult};
use super::extract::{ApiJson, ApiPath};
use crate::app::ApiContext;
use crate::keys::{KeyChange, NewKey};
use crate::store::keys::ApiKey;

pub(crate) fn router() -> OpenApiRouter<ApiContext> {
    OpenApiRouter::new()
        .routes(routes!(list_keys, create_key))
        .routes(routes!(get_key, update_key, delete_key))
        .routes(routes!(revoke_key))
        .routes(routes!(validate_key))
}

fn record(key: &ApiKey, plaintext: Option<String>) -> ApiKeyRecord {
    ApiKeyRecord {
        id: key.id.clone(),
        name: key.name.clone(),
        key_prefix: key.key_prefix.clone(),
        role: key.role,
        allowed_sessions: key.allowed_sessions.clone(),
        allowed_ips: key.allowed_ips.clone(),
        is_active: key.is_active,
        expires_at: key.expires_at.map(iso_ms),
        last_used_at: key.last_used_at.map(iso_ms),
        usage_count: key.usage_count,
        created_at: iso_ms(key.created_at),
        api_key: plaintext,
    }
}

fn admin(caller: &Caller) -> ApiResult<()> {
    caller.require(Role::Admin)?;
    caller.require_unscoped()
}

/// ISO 8601: a date-time with an offset, or without one (UTC, as Python's `isoformat()` writes a naive
/// time), or a date alone (its start, UTC).
fn parse_expiry(raw: &str) -> ApiResult<i64> {
    if let Ok(at) = chrono::DateTime::parse_from_rfc3339(raw) {
        return Ok(at.timestamp_millis());
    }
    let naive = chrono::NaiveDateTime::parse_from_str(raw, "%Y-%m-%dT%H:%M:%S%.f").or_else(|_| {
        chrono::NaiveDate::parse_from_str(raw, "%Y-%m-%d")
            .map(|d| d.and_time(chrono::NaiveTime::MIN))
    });
    naive
        .map(|t| t.and_utc().timestamp_millis())
        .map_err(|_| ApiError::bad_request("expiresAt must be an ISO 8601 date-time"))
}

/// GET /api/auth/api-keys
#[utoipa::path(get, path = "/api/auth/api-keys", tag = "auth", responses((status = 200, body = [ApiKeyRecord])))]
async fn list_keys(
    caller: Caller,
    State(ctx): State<ApiContext>,
) -> ApiResult<Json<Vec<ApiKeyRecord>>> {
    admin(&caller)?;
    Ok(Json(
        ctx.keys
            .list()
            .await?
            .iter()
            .map(|k| record(k, None))
            .collect(),
    ))
}

/// POST /api/auth/api-keys
#[utoipa::path(post, path = "/api/auth/api-keys", tag = "auth", request_body = CreateApiKeyRequest,
    responses((status = 201, body = ApiKeyRecord)))]
async fn create_key(
    caller: Caller,
    State(ctx): State<ApiContext>,
    ApiJson(body): ApiJson<CreateApiKeyRequest>,
) -> ApiResult<(StatusCode, Json<ApiKeyRecord>)> {
    admin(&caller)?;
    let new = NewKey {
        name: body.name,
        role: body.role,
        allowed_sessions: body.allowed_sessions,
        allowed_ips: body.allowed_ips,
        expires_at: body.expires_at.as_deref().map(parse_expiry).transpose()?,
    };
    let (key, plaintext) = ctx.keys.create(new).await?;
    let meta = serde_json::json!({ "keyId": key.id, "name": key.name, "role": key.role });
    ctx.audit
        .record("api_key_created", &caller.actor(), None, 201, Some(meta));
    Ok((StatusCode::CREATED, Json(record(&key, Some(plaintext)))))
}

/// GET /api/auth/api-keys/{id}
#[utoipa::path(get, path = "/api/auth/api-keys/{id}", tag = "auth", responses((status = 200, body = ApiKeyRecord)))]
async fn get_key(
    caller: Caller,
    State(ctx): State<ApiContext>,
    ApiPath(id): ApiPath<String>,
) -> ApiResult<Json<ApiKeyRecord>> {
    admin(&caller)?;
    Ok(Json(record(&ctx.keys.get(&id).await?, None)))
}

/// PUT /api/auth/api-keys/{id}
#[utoipa::path(put, path = "/api/auth/api-keys/{id}", tag = "auth", request_body = UpdateApiKeyRequest,
    responses((status = 200, body = ApiKeyRecord)))]
async fn update_key(
    caller: Caller,
    State(ctx): State<ApiContext>,
    ApiPath(id): ApiPath<String>,
    ApiJson(body): ApiJson<UpdateApiKeyRequest>,
) -> ApiResult<Json<ApiKeyRecord>> {
    admin(&caller)?;
    let change = KeyChange {
        name: body.name,
        role: body.role,
        allowed_sessions: body.allowed_sessions,
        allowed_ips: body.allowed_ips,
        is_active: body.is_active,
        expires_at: body
            .expires_at
            .map(|e| e.as_deref().map(parse_expiry).transpose())
            .transpose()?,
    };
    let key = ctx.keys.update(&id, change, caller.ip).await?;
    ctx.audit.record(
        "api_key_updated",
        &caller.actor(),
        None,
        200,
        Some(serde_json::json!({ "keyId": id })),
    );
    Ok(Json(record(&key, None)))
}

/// DELETE /api/auth/api-keys/{id}
#[utoipa::path(delete, path = "/api/auth/api-keys/{id}", tag = "auth", responses((status = 204)))]
async fn delete_key(
    caller: Caller,
    State(ctx): State<ApiContext>,
    ApiPath(id): ApiPath<String>,
) -> ApiResult<StatusCode> {
    admin(&caller)?;
    ctx.keys.delete(&id, caller.ip).await?;
    ctx.audit.record(
        "api_key_deleted",
        &caller.actor(),
        None,
        204,
        Some(serde_json::json!({ "keyId": id })),
    );
    Ok(StatusCode::NO_CONTENT)
}

/// POST /api/auth/api-keys/{id}/revoke
#[utoipa::path(post, path = "/api/auth/api-keys/{id}/revoke", tag = "auth", responses((status = 200, body = ApiKeyRecord)))]
async fn revoke_key(
    caller: Caller,
    State(ctx): State<ApiContext>,
    ApiPath(id): ApiPath<String>,
) -> ApiResult<Json<ApiKeyRecord>> {
    admin(&caller)?;
    let revoked = ctx.keys.revoke(&id, caller.ip).await?;
    // A repeat revoke changes nothing, so it leaves no second audit row; it answers the same record.
    if revoked.is_new {
        ctx.audit.record(
            "api_key_revoked",
            &caller.actor(),
            None,
            200,
            Some(serde_json::json!({ "keyId": id })),
        );
    }
    Ok(Json(record(&revoked.key, None)))
}

/// POST /api/auth/validate
#[utoipa::path(post, path = "/api/auth/validate", tag = "auth", responses((status = 200, body = KeyCheck)))]
async fn validate_key(caller: Caller, State(ctx): State<ApiContext>) -> Json<KeyCheck> {
    Json(KeyCheck {
        valid: true,
        role: caller.role(),
        engine_type: ctx.config.engine_type.as_str().to_string(),
        scoped: caller.is_scoped(),
    })
}

#[cfg(test)]
mod tests {
    use super::parse_expiry;

    #[test]
    fn expiry_takes_the_iso_8601_forms_clients_write() {
        let midnight = 1_893_456_000_000; // 2030-01-01T00:00:00Z
        assert_eq!(parse_expiry("2030-01-01T00:00:00Z").ok(), Some(midnight));
        assert_eq!(
            parse_expiry("2030-01-01T01:00:00+01:00").ok(),
            Some(midnight)
        );
        assert_eq!(parse_expiry("2030-01-01T00:00:00").ok(), Some(midnight));
        assert_eq!(parse_expiry("2030-01-01T00:00:00.000").ok(), Some(midnight));
        assert_eq!(parse_expiry("2030-01-01").ok(), Some(midnight));
        assert!(parse_expiry("next year").is_err());
    }
}
