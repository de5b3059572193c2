//! Automation rule routes (OPERATOR, wire-notes §3): CRUD under `/api/sessions/{sessionId}/automation-rules`.
//! Handlers parse, authorise and call `AutomationService`.

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use utoipa_axum::{router::OpenApiRouter, routes};
use wagate_proto::dto::automation::{
    AutomationRule, CreateAutomationRuleRequest, UpdateAutomationRuleRequest,
};
use wagate_proto::iso_ms;

use super::error::ApiResult;
use super::extract::{ApiJson, ApiPath};
use super::session_scope::ScopedRawId;
use crate::app::ApiContext;
use crate::store::automation::RuleRecord;

pub(crate) fn router() -> OpenApiRouter<ApiContext> {
    OpenApiRouter::new()
        .routes(routes!(list_rules, create_rule))
        .routes(routes!(get_rule, update_rule, delete_rule))
}

fn record(r: RuleRecord) -> AutomationRule {
    AutomationRule {
        id: r.id,
        session_id: r.session_id,
        name: r.name,
        enabled: r.enabled,
        conditions: r.conditions,
        reply_text: r.reply_text,
        cooldown_seconds: r.cooldown_seconds,
        created_at: iso_ms(r.created_at),
        updated_at: iso_ms(r.updated_at),
    }
}

/// GET /api/sessions/{sessionId}/automation-rules
#[utoipa::path(get, path = "/api/sessions/{sessionId}/automation-rules", tag = "automation",
    params(("sessionId" = String, Path)), responses((status = 200, body = [AutomationRule])))]
async fn list_rules(
    session: ScopedRawId,
    State(ctx): State<ApiContext>,
) -> ApiResult<Json<Vec<AutomationRule>>> {
    let session_id = session.existing().await?;
    let rules = ctx.automation.list(&session_id).await?;
    Ok(Json(rules.into_iter().map(record).collect()))
}

/// POST /api/sessions/{sessionId}/automation-rules
#[utoipa::path(post, path = "/api/sessions/{sessionId}/automation-rules", tag = "automation",
    params(("sessionId" = String, Path)), request_body = CreateAutomationRuleRequest,
    responses((status = 201, body = AutomationRule)))]
async fn create_rule(
    session: ScopedRawId,
    State(ctx): State<ApiContext>,
    ApiJson(body): ApiJson<CreateAutomationRuleRequest>,
) -> ApiResult<(StatusCode, Json<AutomationRule>)> {
    let session_id = session.existing().await?;
    let rule = ctx.automation.create(&session_id, body).await?;
    let meta = serde_json::json!({ "ruleId": rule.id, "name": rule.name });
    ctx.audit.record(
        "automation_rule_created",
        &session.caller.actor(),
        Some(&session_id),
        201,
        Some(meta),
    );
    Ok((StatusCode::CREATED, Json(record(rule))))
}

/// GET /api/sessions/{sessionId}/automation-rules/{ruleId}
#[utoipa::path(get, path = "/api/sessions/{sessionId}/automation-rules/{ruleId}", tag = "automation",
    params(("sessionId" = String, Path), ("ruleId" = String, Path)),
    responses((status = 200, body = AutomationRule)))]
async fn get_rule(
    session: ScopedRawId,
    State(ctx): State<ApiContext>,
    ApiPath((_session_id, id)): ApiPath<(String, String)>,
) -> ApiResult<Json<AutomationRule>> {
    let session_id = session.existing().await?;
    Ok(Json(record(ctx.automation.get(&session_id, &id).await?)))
}

/// PUT /api/sessions/{sessionId}/automation-rules/{ruleId}
#[utoipa::path(put, path = "/api/sessions/{sessionId}/automation-rules/{ruleId}", tag = "automation",
    params(("sessionId" = String, Path), ("ruleId" = String, Path)),
    request_body = UpdateAutomationRuleRequest, responses((status = 200, body = AutomationRule)))]
async fn update_rule(
    session: ScopedRawId,
    State(ctx): State<ApiContext>,
    ApiPath((_session_id, id)): ApiPath<(String, String)>,
    ApiJson(body): ApiJson<UpdateAutomationRuleRequest>,
) -> ApiResult<Json<AutomationRule>> {
    let session_id = session.existing().await?;
    let rule = ctx.automation.update(&session_id, &id, body).await?;
    let meta = serde_json::json!({ "ruleId": rule.id });
    ctx.audit.record(
        "automation_rule_updated",
        &session.caller.actor(),
        Some(&session_id),
        200,
        Some(meta),
    );
    Ok(Json(record(rule)))
}

/// DELETE /api/sessions/{sessionId}/automation-rules/{ruleId}
#[utoipa::path(delete, path = "/api/sessions/{sessionId}/automation-rules/{ruleId}", tag = "automation",
    params(("sessionId" = String, Path), ("ruleId" = String, Path)), responses((status = 204)))]
async fn delete_rule(
    session: ScopedRawId,
    State(ctx): State<ApiContext>,
    ApiPath((_session_id, id)): ApiPath<(String, String)>,
) -> ApiResult<StatusCode> {
    let session_id = session.existing().await?;
    ctx.automation.delete(&session_id, &id).await?;
    let meta = serde_json::json!({ "ruleId": id });
    ctx.audit.record(
        "automation_rule_deleted",
        &session.caller.actor(),
        Some(&session_id),
        204,
        Some(meta),
    );
    Ok(StatusCode::NO_CONTENT)
}
