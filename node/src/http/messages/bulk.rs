//! Bulk routes: send-bulk (202), batch status, batch cancel. The runner lives in `messaging::bulk`.

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use utoipa_axum::{router::OpenApiRouter, routes};
use wagate_proto::Role;
use wagate_proto::dto::bulk::{BatchCancelled, BatchStatus, BulkAccepted, SendBulkRequest};

use crate::app::ApiContext;
use crate::http::auth::Caller;
use crate::http::error::ApiResult;
use crate::http::extract::{ApiJson, ApiPath, SessionId};
use crate::http::sessions::authorise;

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
    caller: Caller,
    id: SessionId,
    State(ctx): State<ApiContext>,
    ApiJson(body): ApiJson<SendBulkRequest>,
) -> ApiResult<(StatusCode, Json<BulkAccepted>)> {
    authorise(&caller, &id, Role::Operator)?;
    let accepted = ctx.bulk.submit(&id.0, body).await?;
    Ok((StatusCode::ACCEPTED, Json(accepted)))
}

/// GET /api/sessions/{sessionId}/messages/batch/{batchId}
#[utoipa::path(get, path = "/api/sessions/{sessionId}/messages/batch/{batchId}", tag = "messages",
    responses((status = 200, body = BatchStatus), (status = 404)))]
async fn get_batch(
    caller: Caller,
    id: SessionId,
    State(ctx): State<ApiContext>,
    ApiPath(path): ApiPath<BatchPath>,
) -> ApiResult<Json<BatchStatus>> {
    authorise(&caller, &id, Role::Viewer)?;
    Ok(Json(ctx.bulk.status(&id.0, &path.batch_id).await?))
}

/// POST /api/sessions/{sessionId}/messages/batch/{batchId}/cancel
#[utoipa::path(post, path = "/api/sessions/{sessionId}/messages/batch/{batchId}/cancel", tag = "messages",
    responses((status = 200, body = BatchCancelled), (status = 404)))]
async fn cancel_batch(
    caller: Caller,
    id: SessionId,
    State(ctx): State<ApiContext>,
    ApiPath(path): ApiPath<BatchPath>,
) -> ApiResult<Json<BatchCancelled>> {
    authorise(&caller, &id, Role::Operator)?;
    Ok(Json(ctx.bulk.cancel(&id.0, &path.batch_id).await?))
}
