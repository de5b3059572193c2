//! Template routes (operator): list, create, read, update, delete per session. Rules in
//! `messaging::templates`.

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use utoipa_axum::{router::OpenApiRouter, routes};
use wagate_proto::dto::templates::{CreateTemplateRequest, Template, UpdateTemplateRequest};

use super::error::ApiResult;
use super::extract::{ApiJson, ApiPath};
use super::session_scope::{Scoped, ScopedSession};
use crate::app::ApiContext;

pub(crate) fn router() -> OpenApiRouter<ApiContext> {
    OpenApiRouter::new()
        .routes(routes!(list_templates, create_template))
        .routes(routes!(get_template, update_template, delete_template))
}

#[derive(serde::Deserialize)]
struct TemplatePath {
    id: String,
}

/// GET /api/sessions/{sessionId}/templates
#[utoipa::path(get, path = "/api/sessions/{sessionId}/templates", tag = "templates",
    responses((status = 200, body = [Template])))]
async fn list_templates(
    session: ScopedSession,
    State(ctx): State<ApiContext>,
) -> ApiResult<Json<Vec<Template>>> {
    Ok(Json(ctx.messaging.list_templates(&session.id.0).await?))
}

/// POST /api/sessions/{sessionId}/templates
#[utoipa::path(post, path = "/api/sessions/{sessionId}/templates", tag = "templates",
    request_body = CreateTemplateRequest, responses((status = 201, body = Template), (status = 400), (status = 409)))]
async fn create_template(
    session: Scoped,
    State(ctx): State<ApiContext>,
    ApiJson(body): ApiJson<CreateTemplateRequest>,
) -> ApiResult<(StatusCode, Json<Template>)> {
    Ok((
        StatusCode::CREATED,
        Json(ctx.messaging.create_template(session.id(), body).await?),
    ))
}

/// GET /api/sessions/{sessionId}/templates/{id}
#[utoipa::path(get, path = "/api/sessions/{sessionId}/templates/{id}", tag = "templates",
    responses((status = 200, body = Template), (status = 404)))]
async fn get_template(
    session: ScopedSession,
    State(ctx): State<ApiContext>,
    ApiPath(path): ApiPath<TemplatePath>,
) -> ApiResult<Json<Template>> {
    Ok(Json(
        ctx.messaging.get_template(&session.id.0, &path.id).await?,
    ))
}

/// PUT /api/sessions/{sessionId}/templates/{id}
#[utoipa::path(put, path = "/api/sessions/{sessionId}/templates/{id}", tag = "templates",
    request_body = UpdateTemplateRequest, responses((status = 200, body = Template), (status = 400), (status = 404)))]
async fn update_template(
    session: Scoped,
    State(ctx): State<ApiContext>,
    ApiPath(path): ApiPath<TemplatePath>,
    ApiJson(body): ApiJson<UpdateTemplateRequest>,
) -> ApiResult<Json<Template>> {
    Ok(Json(
        ctx.messaging
            .update_template(session.id(), &path.id, body)
            .await?,
    ))
}

/// DELETE /api/sessions/{sessionId}/templates/{id}
#[utoipa::path(delete, path = "/api/sessions/{sessionId}/templates/{id}", tag = "templates",
    responses((status = 204), (status = 404)))]
async fn delete_template(
    session: ScopedSession,
    State(ctx): State<ApiContext>,
    ApiPath(path): ApiPath<TemplatePath>,
) -> ApiResult<StatusCode> {
    ctx.messaging
        .delete_template(&session.id.0, &path.id)
        .await?;
    Ok(StatusCode::NO_CONTENT)
}
