//! Status (story) routes: the four posts are in `post.rs`; here the live lists (own, a contact's),
//! delete (idempotent for the session's own posts), and the media of a status this session posted. The
//! path parameter is `{id}` throughout (a contact id for the list, a status id for delete and media) so
//! the router sees one shape.

use std::collections::HashMap;

use axum::Json;
use axum::body::Body;
use axum::extract::State;
use axum::http::header;
use axum::response::Response;
use utoipa_axum::{router::OpenApiRouter, routes};
use wagate_proto::dto::common::SuccessResult;
use wagate_proto::dto::status::{StatusContact, StatusList, StatusRecord};
use wagate_proto::iso_ms;

use crate::app::ApiContext;
use crate::engine::{EngineError, StatusUpdate};
use crate::http::engine_call::{bounded, jid};
use crate::http::error::{ApiError, ApiResult};
use crate::http::extract::ApiPath;
use crate::http::media_output::content_type_of;
use crate::http::session_scope::{Scoped, ScopedSession};
use crate::store::{now_ms, status_updates};

mod post;

pub(crate) fn router() -> OpenApiRouter<ApiContext> {
    OpenApiRouter::new()
        .routes(routes!(list_statuses))
        .routes(routes!(list_contact_statuses, delete_status))
        .routes(routes!(get_status_media))
        .merge(post::router())
}

fn record(s: StatusUpdate) -> StatusRecord {
    StatusRecord {
        id: s.status_id,
        contact: StatusContact {
            id: s.contact.to_string(),
        },
        kind: serde_json::to_value(s.kind)
            .ok()
            .and_then(|v| v.as_str().map(str::to_string))
            .unwrap_or_else(|| "unknown".into()),
        caption: s.caption,
        has_media: s.has_media,
        timestamp: iso_ms(s.posted_at.saturating_mul(1000)),
        expires_at: iso_ms(s.expires_at.saturating_mul(1000)),
        background_color: None,
        font: None,
    }
}

/// The records of `statuses`, with the style the session's own text posts were made with (the engines
/// do not report it back; the gateway stored it at post time).
async fn records(
    ctx: &ApiContext,
    session: &str,
    statuses: Vec<StatusUpdate>,
) -> ApiResult<Vec<StatusRecord>> {
    let styles: HashMap<String, (Option<String>, Option<i64>)> =
        status_updates::text_styles(ctx.infra.data_db(), session)
            .await?
            .into_iter()
            .map(|(id, color, font)| (id, (color, font)))
            .collect();
    Ok(statuses
        .into_iter()
        .map(|s| {
            let style = styles.get(&s.status_id).cloned();
            let mut r = record(s);
            if let Some((color, font)) = style {
                r.background_color = color;
                r.font = font.and_then(|f| u8::try_from(f).ok());
            }
            r
        })
        .collect())
}

/// GET /api/sessions/{sessionId}/status
#[utoipa::path(get, path = "/api/sessions/{sessionId}/status", tag = "status",
    responses((status = 200, body = StatusList)))]
async fn list_statuses(
    session: Scoped,
    State(ctx): State<ApiContext>,
) -> ApiResult<Json<StatusList>> {
    let engine = session.engine().await?;
    let statuses = bounded(&ctx, engine.list_statuses()).await?;
    Ok(Json(StatusList {
        statuses: records(&ctx, session.id(), statuses).await?,
    }))
}

/// GET /api/sessions/{sessionId}/status/{id} (`id` = contact id)
#[utoipa::path(get, path = "/api/sessions/{sessionId}/status/{id}", tag = "status",
    responses((status = 200, body = StatusList)))]
async fn list_contact_statuses(
    session: Scoped,
    State(ctx): State<ApiContext>,
    ApiPath(path): ApiPath<(String, String)>,
) -> ApiResult<Json<StatusList>> {
    let contact = jid("contactId", &path.1)?;
    let engine = session.engine().await?;
    let statuses = bounded(&ctx, engine.contact_statuses(&contact)).await?;
    Ok(Json(StatusList {
        statuses: records(&ctx, session.id(), statuses).await?,
    }))
}

/// DELETE /api/sessions/{sessionId}/status/{id} (`id` = status id)
#[utoipa::path(delete, path = "/api/sessions/{sessionId}/status/{id}", tag = "status",
    responses((status = 200, body = SuccessResult)))]
async fn delete_status(
    session: Scoped,
    State(ctx): State<ApiContext>,
    ApiPath(path): ApiPath<(String, String)>,
) -> ApiResult<Json<SuccessResult>> {
    let status_id = &path.1;
    let engine = session.engine().await?;
    // Delete converges (spec): a post of this session that is already gone (deleted before, or expired)
    // answers the same success without asking the network again. An id the session never posted (or a
    // contact's post) is still the engine's answer, 404: it was not deleted and deleting it cannot succeed.
    let own_until = ctx
        .messaging
        .own_status_expiry(session.id(), status_id)
        .await?;
    if own_until.is_some_and(|until| until <= now_ms()) {
        return Ok(Json(SuccessResult::ok()));
    }
    match bounded(&ctx, engine.delete_status(status_id)).await {
        Ok(()) => {}
        // The engine no longer has a post this session made: a retry of a delete that landed but answered
        // 503, or two deletes at once.
        Err(EngineError::NotFound(_)) if own_until.is_some() => {}
        Err(err) => return Err(err.into()),
    }
    ctx.messaging.forget_status(session.id(), status_id).await?;
    Ok(Json(SuccessResult::ok()))
}

/// GET /api/sessions/{sessionId}/status/{id}/media (raw bytes; 404 when none)
#[utoipa::path(get, path = "/api/sessions/{sessionId}/status/{id}/media", tag = "status",
    responses((status = 200, content_type = "application/octet-stream", body = Vec<u8>)))]
async fn get_status_media(
    session: ScopedSession,
    State(ctx): State<ApiContext>,
    ApiPath(path): ApiPath<(String, String)>,
) -> ApiResult<Response> {
    let (mimetype, stream) = ctx
        .messaging
        .status_media(&session.id.0, &path.1)
        .await?
        .ok_or_else(|| ApiError::not_found(format!("Status {} has no stored media", path.1)))?;
    Response::builder()
        .header(header::CONTENT_TYPE, content_type_of(&mimetype))
        .header(header::CONTENT_LENGTH, stream.size)
        .body(Body::from_stream(stream.body))
        .map_err(ApiError::internal)
}
