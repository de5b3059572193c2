//! Infrastructure routes (admin only): `POST /api/infra/drain` hands this node's sessions to its peers
//! (through the session service);
//! the data export and import (`/api/infra/export-data`, `import-data`) and the media archives
//! (`/api/infra/storage/...`) call `admin::DataAdmin` and leave an audit row.

use axum::Json;
use axum::body::Body;
use axum::extract::State;
use axum::http::header;
use axum::response::{IntoResponse, Response};
use utoipa_axum::{router::OpenApiRouter, routes};
use wagate_proto::Role;
use wagate_proto::dto::admin::{
    ImportResult, StorageExportResult, StorageFileCount, StorageImportRequest, StorageImportResult,
};
use wagate_proto::dto::infra::DrainResult;

use super::auth::Caller;
use super::error::{ApiError, ApiResult};
use super::extract::ApiJson;
use crate::admin::ImportRequest;
use crate::app::ApiContext;

pub(crate) fn router() -> OpenApiRouter<ApiContext> {
    OpenApiRouter::new()
        .routes(routes!(drain_node))
        .routes(routes!(export_data))
        .routes(routes!(import_data))
        .routes(routes!(storage_file_count))
        .routes(routes!(storage_export))
        .routes(routes!(storage_import))
}

/// POST /api/infra/drain
///
/// Stops this node's engines and releases their leases (the sessions stay meant to run), so peers take
/// them over at their next sweep; the node takes no new sessions afterwards. Only in a cluster.
#[utoipa::path(post, path = "/api/infra/drain", tag = "infra",
    responses((status = 200, body = DrainResult), (status = 409)))]
async fn drain_node(caller: Caller, State(ctx): State<ApiContext>) -> ApiResult<Json<DrainResult>> {
    caller.require(Role::Admin)?;
    let drained = ctx.sessions.drain().await?;
    ctx.audit
        .record("node_drained", &caller.actor(), None, 200, None);
    Ok(Json(DrainResult {
        node_id: drained.node_id,
        released: drained.released,
    }))
}

/// GET /api/infra/export-data
///
/// The sixteen data tables as one JSON document `{exportedAt, dataDbType, tables, counts, skippedTables,
/// omittedInlineMedia}`, streamed while it is read.
#[utoipa::path(get, path = "/api/infra/export-data", tag = "infra",
    responses((status = 200, description = "The export document", content_type = "application/json", body = Object)))]
async fn export_data(caller: Caller, State(ctx): State<ApiContext>) -> ApiResult<Response> {
    caller.require(Role::Admin)?;
    let audit = ctx.audit.clone();
    let actor = caller.actor();
    let stream = ctx
        .admin
        .export(move |done| {
            let status = if done.complete { 200 } else { 500 };
            let metadata = serde_json::json!({
                "counts": done.counts,
                "skippedTables": done.skipped_tables,
                "omittedInlineMedia": {
                    "messages": done.omitted_messages,
                    "messageBatches": done.omitted_batches,
                },
                "complete": done.complete,
            });
            audit.record("data_exported", &actor, None, status, Some(metadata));
        })
        .await?;
    Ok((
        [(header::CONTENT_TYPE, "application/json")],
        Body::from_stream(stream),
    )
        .into_response())
}

/// POST /api/infra/import-data
///
/// Replaces the data tables with the body's `tables` in one transaction.
#[utoipa::path(post, path = "/api/infra/import-data", tag = "infra",
    request_body = Object,
    responses((status = 200, body = ImportResult), (status = 400), (status = 409), (status = 413)))]
async fn import_data(
    caller: Caller,
    State(ctx): State<ApiContext>,
    headers: axum::http::HeaderMap,
    body: Body,
) -> ApiResult<Json<ImportResult>> {
    caller.require(Role::Admin)?;
    let limit = ctx.config.body_size_limit;
    let body = parse_streamed(body, limit).await?;
    let req = ImportRequest::parse(body).map_err(ApiError::bad_request)?;
    let remote = PeerStop {
        ctx: ctx.clone(),
        api_key: headers.get("x-api-key").cloned(),
    };
    let result = ctx.admin.import(req, &remote).await.map_err(ApiError::from);
    // The audit row records the status the client is answered with (a rolled-back import is a 200).
    let (status, metadata) = match &result {
        Ok(r) => (
            200,
            serde_json::json!({
                "imported": r.imported,
                "counts": r.counts,
                "restartRequired": r.restart_required,
                "orphanedEngines": r.orphaned_engines,
                "stoppedOrphanEngines": r.stopped_orphan_engines,
            }),
        ),
        Err(err) => (
            err.status.as_u16(),
            serde_json::json!({ "imported": false, "error": err.message }),
        ),
    };
    ctx.audit.record(
        "data_imported",
        &caller.actor(),
        None,
        status,
        Some(metadata),
    );
    Ok(Json(result?))
}

/// The body parsed as JSON while it arrives (on a blocking thread fed chunk by chunk), so the raw bytes
/// are never held whole beside the parsed document; over `limit` bytes is 413, malformed JSON 400.
async fn parse_streamed(body: Body, limit: u64) -> ApiResult<serde_json::Value> {
    use futures::StreamExt;
    let (sender, receiver) = tokio::sync::mpsc::channel::<axum::body::Bytes>(8);
    let parser = tokio::task::spawn_blocking(move || {
        let reader = std::io::BufReader::new(ChannelReader {
            receiver,
            pending: axum::body::Bytes::new(),
        });
        serde_json::from_reader::<_, serde_json::Value>(reader)
    });
    let mut chunks = body.into_data_stream();
    let mut received = 0u64;
    let mut outcome = Ok(());
    while let Some(chunk) = chunks.next().await {
        let chunk = match chunk {
            Ok(chunk) => chunk,
            Err(err) => {
                outcome = Err(match crate::http::serve::stalled(&err) {
                    Some(stall) => stall.into(),
                    None => {
                        ApiError::bad_request(format!("Could not read the request body: {err}"))
                    }
                });
                break;
            }
        };
        received += chunk.len() as u64;
        if received > limit {
            outcome = Err(ApiError::new(
                axum::http::StatusCode::PAYLOAD_TOO_LARGE,
                "Request body exceeds BODY_SIZE_LIMIT",
            ));
            break;
        }
        if sender.send(chunk).await.is_err() {
            break; // the parser stopped early (malformed); its error is below
        }
    }
    drop(sender);
    let parsed = parser.await.map_err(ApiError::internal)?;
    outcome?;
    parsed.map_err(|err| ApiError::bad_request(format!("Invalid request body: {err}")))
}

/// A blocking reader over body chunks arriving on a channel.
struct ChannelReader {
    receiver: tokio::sync::mpsc::Receiver<axum::body::Bytes>,
    pending: axum::body::Bytes,
}

impl std::io::Read for ChannelReader {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        while self.pending.is_empty() {
            match self.receiver.blocking_recv() {
                Some(chunk) => self.pending = chunk,
                None => return Ok(0),
            }
        }
        let n = buf.len().min(self.pending.len());
        buf[..n].copy_from_slice(&self.pending.split_to(n));
        Ok(n)
    }
}

/// Stops an orphaned engine on the peer that runs it, with the importing admin's key.
struct PeerStop {
    ctx: ApiContext,
    api_key: Option<axum::http::HeaderValue>,
}

#[async_trait::async_trait]
impl crate::admin::RemoteStop for PeerStop {
    async fn stop(&self, session_id: &str) -> Result<(), String> {
        let path = format!("/api/sessions/{session_id}/stop");
        match super::forward::post_to_owner(&self.ctx, session_id, &path, self.api_key.as_ref())
            .await
        {
            Ok(Some(status)) if status.is_success() => Ok(()),
            Ok(Some(status)) => Err(format!("the owner node answered {status}")),
            // Nobody holds the lease any more: the engine is gone already.
            Ok(None) => Ok(()),
            Err(err) => Err(err.to_string()),
        }
    }
}

/// GET /api/infra/storage/files/count
#[utoipa::path(get, path = "/api/infra/storage/files/count", tag = "infra",
    responses((status = 200, body = StorageFileCount)))]
async fn storage_file_count(
    caller: Caller,
    State(ctx): State<ApiContext>,
) -> ApiResult<Json<StorageFileCount>> {
    caller.require(Role::Admin)?;
    Ok(Json(ctx.admin.storage_count().await?))
}

/// GET /api/infra/storage/export
///
/// Writes every media file into a `.tar.gz` under `data/exports` (deleted after `STORAGE_EXPORT_TTL_MS`).
#[utoipa::path(get, path = "/api/infra/storage/export", tag = "infra",
    responses((status = 200, body = StorageExportResult)))]
async fn storage_export(
    caller: Caller,
    State(ctx): State<ApiContext>,
) -> ApiResult<Json<StorageExportResult>> {
    caller.require(Role::Admin)?;
    let result = ctx.admin.storage_export().await;
    let (status, metadata) = match &result {
        Ok((r, count)) => (
            200,
            serde_json::json!({ "download": r.download, "count": count }),
        ),
        Err(err) => (500, serde_json::json!({ "error": err.to_string() })),
    };
    ctx.audit.record(
        "storage_exported",
        &caller.actor(),
        None,
        status,
        Some(metadata),
    );
    Ok(Json(result?.0))
}

/// POST /api/infra/storage/import
///
/// Imports the media files of an archive that lies inside `data/`.
#[utoipa::path(post, path = "/api/infra/storage/import", tag = "infra",
    request_body = StorageImportRequest,
    responses((status = 200, body = StorageImportResult), (status = 400)))]
async fn storage_import(
    caller: Caller,
    State(ctx): State<ApiContext>,
    ApiJson(body): ApiJson<StorageImportRequest>,
) -> ApiResult<Json<StorageImportResult>> {
    caller.require(Role::Admin)?;
    let path = body.file_path.unwrap_or_default();
    let result = ctx.admin.storage_import(&path).await;
    let (status, metadata) = match &result {
        Ok(r) => (
            200,
            serde_json::json!({ "filePath": path, "count": r.count }),
        ),
        Err(err) => (
            400,
            serde_json::json!({ "filePath": path, "error": err.to_string() }),
        ),
    };
    ctx.audit.record(
        "storage_imported",
        &caller.actor(),
        None,
        status,
        Some(metadata),
    );
    Ok(Json(result?))
}
