//! Webhook routes (wire-notes §3): per-session CRUD, the all-sessions list and the test delivery. Handlers
//! parse, authorise and call `WebhookService`; `secret` and `headers` never leave through here.

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use utoipa_axum::{router::OpenApiRouter, routes};
use wagate_proto::dto::webhooks::{
    CreateWebhookRequest, UpdateWebhookRequest, Webhook, WebhookListQuery, WebhookTestResult,
};
use wagate_proto::{Role, iso_ms};
use wagate_workers::webhook::deliver::AttemptOutcome;

use super::auth::Caller;
use super::error::ApiResult;
use super::extract::{ApiJson, ApiPath, ApiQuery};
use super::session_scope::ScopedRawId;
use crate::app::ApiContext;
use crate::webhooks::WebhookRecord;

pub(crate) fn router() -> OpenApiRouter<ApiContext> {
    OpenApiRouter::new()
        .routes(routes!(list_webhooks, create_webhook))
        .routes(routes!(get_webhook, update_webhook, delete_webhook))
        .routes(routes!(test_webhook))
        .routes(routes!(list_all_webhooks))
}

pub(crate) fn record(w: &WebhookRecord) -> Webhook {
    Webhook {
        id: w.id.clone(),
        session_id: w.session_id.clone(),
        url: w.url.clone(),
        events: w.events.clone(),
        active: w.active,
        // A webhook without conditions reads as the empty filter (spec: `filters` is an object), not null;
        // the stored `None` still means every event is delivered.
        filters: w.filters.clone().unwrap_or_default(),
        retry_count: w.retry_count,
        last_triggered_at: w.last_triggered_at.map(iso_ms),
        created_at: iso_ms(w.created_at),
        updated_at: iso_ms(w.updated_at),
    }
}

/// POST /api/sessions/{sessionId}/webhooks
#[utoipa::path(post, path = "/api/sessions/{sessionId}/webhooks", tag = "webhooks",
    params(("sessionId" = String, Path)), request_body = CreateWebhookRequest,
    responses((status = 201, body = Webhook)))]
async fn create_webhook(
    session: ScopedRawId,
    State(ctx): State<ApiContext>,
    ApiJson(body): ApiJson<CreateWebhookRequest>,
) -> ApiResult<(StatusCode, Json<Webhook>)> {
    let session_id = session.existing().await?;
    let w = ctx.webhooks.create(&session_id, body).await?;
    let meta = serde_json::json!({ "webhookId": w.id, "url": w.url, "events": w.events });
    ctx.audit.record(
        "webhook_created",
        &session.caller.actor(),
        Some(&session_id),
        201,
        Some(meta),
    );
    Ok((StatusCode::CREATED, Json(record(&w))))
}

/// GET /api/sessions/{sessionId}/webhooks
#[utoipa::path(get, path = "/api/sessions/{sessionId}/webhooks", tag = "webhooks",
    params(("sessionId" = String, Path)), responses((status = 200, body = [Webhook])))]
async fn list_webhooks(
    session: ScopedRawId,
    State(ctx): State<ApiContext>,
) -> ApiResult<Json<Vec<Webhook>>> {
    let session_id = session.existing().await?;
    let list = ctx.webhooks.list(&session_id).await?;
    Ok(Json(list.iter().map(record).collect()))
}

/// GET /api/sessions/{sessionId}/webhooks/{webhookId}
#[utoipa::path(get, path = "/api/sessions/{sessionId}/webhooks/{webhookId}", tag = "webhooks",
    params(("sessionId" = String, Path), ("webhookId" = String, Path)),
    responses((status = 200, body = Webhook)))]
async fn get_webhook(
    session: ScopedRawId,
    State(ctx): State<ApiContext>,
    ApiPath((_session_id, id)): ApiPath<(String, String)>,
) -> ApiResult<Json<Webhook>> {
    let session_id = session.existing().await?;
    Ok(Json(record(&ctx.webhooks.get(&session_id, &id).await?)))
}

/// PUT /api/sessions/{sessionId}/webhooks/{webhookId}
#[utoipa::path(put, path = "/api/sessions/{sessionId}/webhooks/{webhookId}", tag = "webhooks",
    params(("sessionId" = String, Path), ("webhookId" = String, Path)),
    request_body = UpdateWebhookRequest, responses((status = 200, body = Webhook)))]
async fn update_webhook(
    session: ScopedRawId,
    State(ctx): State<ApiContext>,
    ApiPath((_session_id, id)): ApiPath<(String, String)>,
    ApiJson(body): ApiJson<UpdateWebhookRequest>,
) -> ApiResult<Json<Webhook>> {
    let session_id = session.existing().await?;
    let w = ctx.webhooks.update(&session_id, &id, body).await?;
    let meta = serde_json::json!({ "webhookId": w.id });
    ctx.audit.record(
        "webhook_updated",
        &session.caller.actor(),
        Some(&session_id),
        200,
        Some(meta),
    );
    Ok(Json(record(&w)))
}

/// DELETE /api/sessions/{sessionId}/webhooks/{webhookId}
#[utoipa::path(delete, path = "/api/sessions/{sessionId}/webhooks/{webhookId}", tag = "webhooks",
    params(("sessionId" = String, Path), ("webhookId" = String, Path)),
    responses((status = 204)))]
async fn delete_webhook(
    session: ScopedRawId,
    State(ctx): State<ApiContext>,
    ApiPath((_session_id, id)): ApiPath<(String, String)>,
) -> ApiResult<StatusCode> {
    let session_id = session.existing().await?;
    ctx.webhooks.delete(&session_id, &id).await?;
    let meta = serde_json::json!({ "webhookId": id });
    ctx.audit.record(
        "webhook_deleted",
        &session.caller.actor(),
        Some(&session_id),
        204,
        Some(meta),
    );
    Ok(StatusCode::NO_CONTENT)
}

/// POST /api/sessions/{sessionId}/webhooks/{webhookId}/test
#[utoipa::path(post, path = "/api/sessions/{sessionId}/webhooks/{webhookId}/test", tag = "webhooks",
    params(("sessionId" = String, Path), ("webhookId" = String, Path)),
    responses((status = 200, body = WebhookTestResult)))]
async fn test_webhook(
    session: ScopedRawId,
    State(ctx): State<ApiContext>,
    ApiPath((_session_id, id)): ApiPath<(String, String)>,
) -> ApiResult<Json<WebhookTestResult>> {
    let session_id = session.existing().await?;
    let outcome = ctx.webhooks.test(&session_id, &id).await?;
    Ok(Json(WebhookTestResult {
        success: matches!(outcome, AttemptOutcome::Delivered { .. }),
        status_code: outcome.status_code(),
    }))
}

/// GET /api/webhooks
#[utoipa::path(get, path = "/api/webhooks", tag = "webhooks", params(WebhookListQuery),
    responses((status = 200, body = [Webhook])))]
async fn list_all_webhooks(
    caller: Caller,
    State(ctx): State<ApiContext>,
    ApiQuery(q): ApiQuery<WebhookListQuery>,
) -> ApiResult<Json<Vec<Webhook>>> {
    caller.require(Role::Operator)?;
    let (limit, offset) = super::webhook_failures::page(q.limit, q.offset, 100, 1000)?;
    let list = ctx
        .webhooks
        .list_all(caller.key.allowed_sessions.as_deref(), limit, offset)
        .await?;
    Ok(Json(list.iter().map(record).collect()))
}
