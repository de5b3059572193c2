//! Bulk routes: send-bulk (202), batch status, batch cancel. The runner lives in `messaging::bulk`.

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use utoipa_axum::{router::OpenApiRouter, routes};
use wagate_proto::dto::bulk::{BatchCancelled, BatchStatus, BulkAccepted, SendBulkRequest};

use crate::app::ApiContext;
use crate::http::error::ApiResult;
use crate::http::extract::{ApiJson, ApiPath};
use crate::http::session_scope::Scoped;

pub(super) fn router() -> OpenApiRouter<ApiContext> {
    OpenApiRouter::new()
        .routes(routes!(send_bulk))
        .routes(routes!(get_batch))
        .routes(routes!(cancel_batch))
}

#[derive(serde::Deserialize)]
struct BatchPath {
    #[serde(rename = "batchId")]
    batch_id: String,
}

/// POST /api/sessions/{sessionId}/messages/send-bulk
#[utoipa::path(post, path = "/api/sessions/{sessionId}/messages/send-bulk", tag = "messages",
    request_body = SendBulkRequest, responses((status = 202, body = BulkAccepted), (status = 400), (status = 413)))]
async fn send_bulk(
    session: Scoped,
    State(ctx): State<ApiContext>,
    ApiJson(body): ApiJson<SendBulkRequest>,
) -> ApiResult<(StatusCode, Json<BulkAccepted>)> {
    let accepted = ctx.bulk.submit(session.id(), body).await?;
    Ok((StatusCode::ACCEPTED, Json(accepted)))
}

/// GET /api/sessions/{sessionId}/messages/batch/{batchId}
#[utoipa::path(get, path = "/api/sessions/{sessionId}/messages/batch/{batchId}", tag = "messages",
    responses((status = 200, body = BatchStatus), (status = 404)))]
async fn get_batch(
    session: Scoped,
    State(ctx): State<ApiContext>,
    ApiPath(path): ApiPath<BatchPath>,
) -> ApiResult<Json<BatchStatus>> {
    Ok(Json(ctx.bulk.status(session.id(), &path.batch_id).await?))
}

/// POST /api/sessions/{sessionId}/messages/batch/{batchId}/cancel
#[utoipa::path(post, path = "/api/sessions/{sessionId}/messages/batch/{batchId}/cancel", tag = "messages",
    responses((status = 200, body = BatchCancelled), (status = 400, description = "the batch already finished"), (status = 404)))]
async fn cancel_batch(
    session: Scoped,
    State(ctx): State<ApiContext>,
    ApiPath(path): ApiPath<BatchPath>,
) -> ApiResult<Json<BatchCancelled>> {
    Ok(Json(ctx.bulk.cancel(session.id(), &path.batch_id).await?))
}
