//! Label routes: list, read, upsert (PUT with `{name?, color 0-19}`), delete, the chats of a label, and
//! a chat's labels (read, add, remove). `chat` is a static segment and wins over `{labelId}`.

use axum::Json;
use axum::extract::{RawQuery, State};
use utoipa_axum::{router::OpenApiRouter, routes};
use wagate_proto::dto::chats::{ChatSummary, PageQuery};
use wagate_proto::dto::common::SuccessResult;
use wagate_proto::dto::labels::{AddChatLabelRequest, Label, LabelUpserted, UpsertLabelRequest};

use super::engine_call::{Page, bounded, jid};
use super::error::{ApiError, ApiResult};
use super::extract::{ApiJson, ApiPath};
use super::session_scope::Scoped;
use crate::app::ApiContext;
use crate::engine::{self, LabelUpsert};

/// WhatsApp Business keeps label names short; longer ones are refused rather than cut.
const NAME_MAX: usize = 100;
/// A label id is a token (WhatsApp's are numeric strings): it names the label in paths and app state.
const ID_MAX: usize = 64;

/// The network's 20 label colours, by palette index.
const PALETTE: [&str; 20] = [
    "#FF9485", "#64C4FF", "#FFD429", "#DFAEF0", "#99B6C1", "#55CCB3", "#FF9DFF", "#D3A91D",
    "#6D7CCE", "#D7E752", "#00D0E2", "#FFC5C7", "#93CEAC", "#F74848", "#00A0F2", "#83E422",
    "#FFAF04", "#B5EBFF", "#9BA6FF", "#9368CF",
];

pub(crate) fn router() -> OpenApiRouter<ApiContext> {
    OpenApiRouter::new()
        .routes(routes!(list_labels))
        .routes(routes!(get_label, upsert_label, delete_label))
        .routes(routes!(list_label_chats))
        .routes(routes!(list_chat_labels, add_chat_label))
        .routes(routes!(remove_chat_label))
}

fn label(l: engine::Label) -> Label {
    let index = usize::from(l.color).min(PALETTE.len() - 1);
    Label {
        id: l.id,
        name: l.name,
        hex_color: PALETTE[index].to_string(),
    }
}

/// GET /api/sessions/{sessionId}/labels
#[utoipa::path(get, path = "/api/sessions/{sessionId}/labels", tag = "labels",
    responses((status = 200, body = [Label])))]
async fn list_labels(
    session: Scoped,
    State(ctx): State<ApiContext>,
) -> ApiResult<Json<Vec<Label>>> {
    let engine = session.engine().await?;
    let labels = bounded(&ctx, engine.list_labels()).await?;
    Ok(Json(labels.into_iter().map(label).collect()))
}

/// GET /api/sessions/{sessionId}/labels/{labelId}
#[utoipa::path(get, path = "/api/sessions/{sessionId}/labels/{labelId}", tag = "labels",
    responses((status = 200, body = Label)))]
async fn get_label(
    session: Scoped,
    State(ctx): State<ApiContext>,
    ApiPath(path): ApiPath<(String, String)>,
) -> ApiResult<Json<Label>> {
    let engine = session.engine().await?;
    Ok(Json(label(bounded(&ctx, engine.get_label(&path.1)).await?)))
}

/// PUT /api/sessions/{sessionId}/labels/{labelId}
#[utoipa::path(put, path = "/api/sessions/{sessionId}/labels/{labelId}", tag = "labels",
    request_body = UpsertLabelRequest, responses((status = 200, body = LabelUpserted)))]
async fn upsert_label(
    session: Scoped,
    State(ctx): State<ApiContext>,
    ApiPath(path): ApiPath<(String, String)>,
    ApiJson(body): ApiJson<UpsertLabelRequest>,
) -> ApiResult<Json<LabelUpserted>> {
    label_id(&path.1)?;
    let color = body
        .color
        .map(|c| u8::try_from(c).ok().filter(|c| *c <= 19))
        .map(|c| c.ok_or_else(|| ApiError::bad_request("color must be an integer 0-19")))
        .transpose()?;
    if let Some(name) = &body.name {
        label_name(name)?;
    }
    let upsert = LabelUpsert {
        id: Some(path.1),
        name: body.name,
        color,
    };
    let engine = session.engine().await?;
    let Label {
        id,
        name,
        hex_color,
    } = label(bounded(&ctx, engine.upsert_label(upsert)).await?);
    Ok(Json(LabelUpserted {
        success: true,
        id,
        name,
        hex_color,
    }))
}

/// An upserted label's id: 1-64 of `[A-Za-z0-9_-]` (no blank, no '/', no surrounding whitespace).
fn label_id(id: &str) -> ApiResult<()> {
    let token = |b: u8| b.is_ascii_alphanumeric() || b == b'_' || b == b'-';
    if id.is_empty() || id.len() > ID_MAX || !id.bytes().all(token) {
        return Err(ApiError::bad_request(format!(
            "labelId must be 1-{ID_MAX} letters, digits, '_' or '-', got '{id}'"
        )));
    }
    Ok(())
}

/// A label name: an upsert may leave it out (keep it), but a label is never renamed to nothing.
fn label_name(name: &str) -> ApiResult<()> {
    if name.trim().is_empty() {
        return Err(ApiError::bad_request("name must not be empty"));
    }
    if name.chars().count() > NAME_MAX {
        return Err(ApiError::bad_request(format!(
            "name must be at most {NAME_MAX} characters"
        )));
    }
    crate::names::printable("name", name).map_err(ApiError::bad_request)
}

/// DELETE /api/sessions/{sessionId}/labels/{labelId}
#[utoipa::path(delete, path = "/api/sessions/{sessionId}/labels/{labelId}", tag = "labels",
    responses((status = 200, body = SuccessResult)))]
async fn delete_label(
    session: Scoped,
    State(ctx): State<ApiContext>,
    ApiPath(path): ApiPath<(String, String)>,
) -> ApiResult<Json<SuccessResult>> {
    let engine = session.engine().await?;
    bounded(&ctx, engine.delete_label(&path.1)).await?;
    Ok(Json(SuccessResult::ok()))
}

/// GET /api/sessions/{sessionId}/labels/{labelId}/chats
#[utoipa::path(get, path = "/api/sessions/{sessionId}/labels/{labelId}/chats", tag = "labels",
    params(PageQuery), responses((status = 200, body = [ChatSummary])))]
async fn list_label_chats(
    session: Scoped,
    State(ctx): State<ApiContext>,
    ApiPath(path): ApiPath<(String, String)>,
    RawQuery(query): RawQuery,
) -> ApiResult<Json<Vec<ChatSummary>>> {
    let page = Page::parse(query.as_deref(), 1000, 1000)?;
    let engine = session.engine().await?;
    let chats = bounded(&ctx, engine.label_chats(&path.1)).await?;
    Ok(Json(
        page.apply(chats).into_iter().map(Into::into).collect(),
    ))
}

/// GET /api/sessions/{sessionId}/labels/chat/{chatId}
#[utoipa::path(get, path = "/api/sessions/{sessionId}/labels/chat/{chatId}", tag = "labels",
    responses((status = 200, body = [Label])))]
async fn list_chat_labels(
    session: Scoped,
    State(ctx): State<ApiContext>,
    ApiPath(path): ApiPath<(String, String)>,
) -> ApiResult<Json<Vec<Label>>> {
    let chat = jid("chatId", &path.1)?;
    let engine = session.engine().await?;
    let labels = bounded(&ctx, engine.chat_labels(&chat)).await?;
    Ok(Json(labels.into_iter().map(label).collect()))
}

/// POST /api/sessions/{sessionId}/labels/chat/{chatId}
#[utoipa::path(post, path = "/api/sessions/{sessionId}/labels/chat/{chatId}", tag = "labels",
    request_body = AddChatLabelRequest, responses((status = 200, body = SuccessResult)))]
async fn add_chat_label(
    session: Scoped,
    State(ctx): State<ApiContext>,
    ApiPath(path): ApiPath<(String, String)>,
    ApiJson(body): ApiJson<AddChatLabelRequest>,
) -> ApiResult<Json<SuccessResult>> {
    let chat = jid("chatId", &path.1)?;
    let engine = session.engine().await?;
    bounded(&ctx, engine.add_chat_label(&chat, &body.label_id)).await?;
    Ok(Json(SuccessResult::ok()))
}

/// DELETE /api/sessions/{sessionId}/labels/chat/{chatId}/{labelId}
#[utoipa::path(delete, path = "/api/sessions/{sessionId}/labels/chat/{chatId}/{labelId}", tag = "labels",
    responses((status = 200, body = SuccessResult)))]
async fn remove_chat_label(
    session: Scoped,
    State(ctx): State<ApiContext>,
    ApiPath(path): ApiPath<(String, String, String)>,
) -> ApiResult<Json<SuccessResult>> {
    let chat = jid("chatId", &path.1)?;
    let engine = session.engine().await?;
    bounded(&ctx, engine.remove_chat_label(&chat, &path.2)).await?;
    Ok(Json(SuccessResult::ok()))
}
