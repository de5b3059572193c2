//! Group routes: list, create, detail, join info and join, subject, description, leave. Roster changes
//! and membership requests are in `participants.rs`; settings, picture and invite codes in `admin.rs`.
//! `join-info` and `join` are static segments and win over `{groupId}`.

use axum::Json;
use axum::extract::{RawQuery, State};
use axum::http::StatusCode;
use utoipa_axum::{router::OpenApiRouter, routes};
use wagate_proto::dto::chats::PageQuery;
use wagate_proto::dto::common::SuccessResult;
use wagate_proto::dto::groups::{
    CreateGroupRequest, GroupDescriptionRequest, GroupDetail, GroupJoinInfo, GroupParticipant,
    GroupSubjectRequest, GroupSummary, JoinGroupRequest, JoinGroupResponse, JoinInfoQuery,
};

use super::engine_call::{Page, bounded, jid};
use super::error::{ApiError, ApiResult};
use super::extract::{ApiJson, ApiPath, ApiQuery};
use crate::app::ApiContext;
use crate::engine::{self, NewGroup};
use crate::http::session_scope::Scoped;
use wagate_proto::jid::ChatKind;

mod admin;
mod participants;

pub(crate) fn router() -> OpenApiRouter<ApiContext> {
    OpenApiRouter::new()
        .routes(routes!(list_groups, create_group))
        .routes(routes!(get_join_info))
        .routes(routes!(join_group))
        .routes(routes!(get_group))
        .routes(routes!(set_group_subject))
        .routes(routes!(set_group_description))
        .routes(routes!(leave_group))
        .merge(participants::router())
        .merge(admin::router())
}

fn summary(g: engine::GroupSummary) -> GroupSummary {
    GroupSummary {
        id: g.id.to_string(),
        name: g.name,
        participants_count: Some(g.participants_count),
        is_admin: Some(g.is_admin),
    }
}

fn detail(g: engine::GroupInfo) -> GroupDetail {
    let participants = g
        .participants
        .into_iter()
        .map(|p| GroupParticipant {
            number: p.id.user().to_string(),
            id: p.id.to_string(),
            name: None,
            is_admin: p.is_admin || p.is_super_admin,
            is_super_admin: p.is_super_admin,
        })
        .collect();
    GroupDetail {
        id: g.id.to_string(),
        name: g.subject,
        description: g.description,
        owner: g.owner.to_string(),
        created_at: g.created_at,
        participants,
    }
}

/// The `{groupId}` of a group path, as a group JID.
pub(super) fn path_group(path: &(String, String)) -> ApiResult<wagate_proto::Jid> {
    let group = jid("groupId", &path.1)?;
    if !group.is_group() {
        return Err(ApiError::bad_request(
            "groupId must be a group id (<id>@g.us)",
        ));
    }
    Ok(group)
}

/// GET /api/sessions/{sessionId}/groups
#[utoipa::path(get, path = "/api/sessions/{sessionId}/groups", tag = "groups", params(PageQuery),
    responses((status = 200, body = [GroupSummary])))]
async fn list_groups(
    session: Scoped,
    State(ctx): State<ApiContext>,
    RawQuery(query): RawQuery,
) -> ApiResult<Json<Vec<GroupSummary>>> {
    let page = Page::parse(query.as_deref(), 1000, 1000)?;
    let engine = session.engine().await?;
    let groups = bounded(&ctx, engine.list_groups()).await?;
    let list = page.apply(groups).into_iter().map(|g| GroupSummary {
        participants_count: None,
        is_admin: None,
        ..summary(g)
    });
    Ok(Json(list.collect()))
}

/// POST /api/sessions/{sessionId}/groups
#[utoipa::path(post, path = "/api/sessions/{sessionId}/groups", tag = "groups",
    request_body = CreateGroupRequest, responses((status = 201, body = GroupSummary)))]
async fn create_group(
    session: Scoped,
    ApiJson(body): ApiJson<CreateGroupRequest>,
) -> ApiResult<(StatusCode, Json<GroupSummary>)> {
    if body.name.trim().is_empty() {
        return Err(ApiError::bad_request("name must not be empty"));
    }
    crate::names::printable("name", &body.name).map_err(ApiError::bad_request)?;
    let participants = people(&body.participants)?;
    let engine = session.engine().await?;
    let participants = without_self(participants, session.record().await?.phone.as_deref())?;
    // Unbounded on purpose: the spec lists group create among the routes that never answer 503.
    let group = engine
        .create_group(NewGroup {
            subject: body.name,
            participants,
        })
        .await
        .map_err(|e| ApiError::from(e).never_unavailable())?;
    Ok((StatusCode::CREATED, Json(summary(group))))
}

/// The parsed `participants` of a roster or create body, each once: a person named twice would otherwise
/// be added (and announced to the members) twice.
pub(super) fn participant_ids(raw: &[String]) -> ApiResult<Vec<wagate_proto::Jid>> {
    let mut ids = super::engine_call::jids("participants", raw)?;
    let mut seen = std::collections::HashSet::new();
    ids.retain(|id| seen.insert(id.clone()));
    Ok(ids)
}

/// Group members are people: a channel, a group or a broadcast list cannot be added to a group.
fn people(raw: &[String]) -> ApiResult<Vec<wagate_proto::Jid>> {
    let ids = participant_ids(raw)?;
    match ids.iter().find(|id| id.kind() != ChatKind::Individual) {
        Some(other) => Err(ApiError::bad_request(format!(
            "participants: '{other}' is not a person's id (expected <number>@c.us or <id>@lid)"
        ))),
        None => Ok(ids),
    }
}

/// The participants less the session's own number (the creator is the owner anyway); none left is a 400:
/// a group is created with at least one other member.
fn without_self(
    ids: Vec<wagate_proto::Jid>,
    own_phone: Option<&str>,
) -> ApiResult<Vec<wagate_proto::Jid>> {
    let own = own_phone.map(crate::sessions::linked_number);
    let others: Vec<_> = ids
        .into_iter()
        .filter(|id| !(id.server() == "c.us" && Some(id.user()) == own))
        .collect();
    if others.is_empty() {
        return Err(ApiError::bad_request(
            "participants must name at least one person other than the session's own number",
        ));
    }
    Ok(others)
}

/// GET /api/sessions/{sessionId}/groups/join-info
#[utoipa::path(get, path = "/api/sessions/{sessionId}/groups/join-info", tag = "groups",
    params(JoinInfoQuery), responses((status = 200, body = GroupJoinInfo)))]
async fn get_join_info(
    session: Scoped,
    State(ctx): State<ApiContext>,
    ApiQuery(query): ApiQuery<JoinInfoQuery>,
) -> ApiResult<Json<GroupJoinInfo>> {
    let given = query.code.or(query.invite_code);
    let code = invite_code(given.as_deref().unwrap_or_default())?;
    let engine = session.engine().await?;
    let info = bounded(&ctx, engine.group_join_info(&code)).await?;
    Ok(Json(GroupJoinInfo {
        id: info.id.to_string(),
        name: info.subject,
        description: info.description,
        owner: info.owner.to_string(),
        created_at: info.created_at,
        participant_count: info.participants.len(),
    }))
}

/// An invite code, given bare or as a `https://chat.whatsapp.com/<code>` link.
fn invite_code(raw: &str) -> ApiResult<String> {
    let code = raw
        .trim()
        .rsplit('/')
        .next()
        .unwrap_or_default()
        .to_string();
    if code.is_empty() || !code.chars().all(|c| c.is_ascii_alphanumeric()) {
        return Err(ApiError::bad_request("invite code is missing or malformed"));
    }
    Ok(code)
}

/// POST /api/sessions/{sessionId}/groups/join
#[utoipa::path(post, path = "/api/sessions/{sessionId}/groups/join", tag = "groups",
    request_body = JoinGroupRequest, responses((status = 200, body = JoinGroupResponse)))]
async fn join_group(
    session: Scoped,
    State(ctx): State<ApiContext>,
    ApiJson(body): ApiJson<JoinGroupRequest>,
) -> ApiResult<Json<JoinGroupResponse>> {
    let code = invite_code(&body.invite_code)?;
    let engine = session.engine().await?;
    let group = bounded(&ctx, engine.join_group(&code)).await?;
    Ok(Json(JoinGroupResponse {
        success: true,
        group_id: group.to_string(),
    }))
}

/// GET /api/sessions/{sessionId}/groups/{groupId}
#[utoipa::path(get, path = "/api/sessions/{sessionId}/groups/{groupId}", tag = "groups",
    responses((status = 200, body = GroupDetail)))]
async fn get_group(
    session: Scoped,
    State(ctx): State<ApiContext>,
    ApiPath(path): ApiPath<(String, String)>,
) -> ApiResult<Json<GroupDetail>> {
    let group = path_group(&path)?;
    let engine = session.engine().await?;
    Ok(Json(detail(
        bounded(&ctx, engine.group_info(&group)).await?,
    )))
}

/// PUT /api/sessions/{sessionId}/groups/{groupId}/subject
#[utoipa::path(put, path = "/api/sessions/{sessionId}/groups/{groupId}/subject", tag = "groups",
    request_body = GroupSubjectRequest, responses((status = 200, body = SuccessResult)))]
async fn set_group_subject(
    session: Scoped,
    State(ctx): State<ApiContext>,
    ApiPath(path): ApiPath<(String, String)>,
    ApiJson(body): ApiJson<GroupSubjectRequest>,
) -> ApiResult<Json<SuccessResult>> {
    let group = path_group(&path)?;
    if body.subject.trim().is_empty() {
        return Err(ApiError::bad_request("subject must not be empty"));
    }
    crate::names::printable("subject", &body.subject).map_err(ApiError::bad_request)?;
    let engine = session.engine().await?;
    bounded(&ctx, engine.set_group_subject(&group, &body.subject)).await?;
    Ok(Json(SuccessResult::ok()))
}

/// PUT /api/sessions/{sessionId}/groups/{groupId}/description
#[utoipa::path(put, path = "/api/sessions/{sessionId}/groups/{groupId}/description", tag = "groups",
    request_body = GroupDescriptionRequest, responses((status = 200, body = SuccessResult)))]
async fn set_group_description(
    session: Scoped,
    State(ctx): State<ApiContext>,
    ApiPath(path): ApiPath<(String, String)>,
    ApiJson(body): ApiJson<GroupDescriptionRequest>,
) -> ApiResult<Json<SuccessResult>> {
    let group = path_group(&path)?;
    let engine = session.engine().await?;
    bounded(
        &ctx,
        engine.set_group_description(&group, &body.description),
    )
    .await?;
    Ok(Json(SuccessResult::ok()))
}

/// POST /api/sessions/{sessionId}/groups/{groupId}/leave
#[utoipa::path(post, path = "/api/sessions/{sessionId}/groups/{groupId}/leave", tag = "groups",
    responses((status = 200, body = SuccessResult)))]
async fn leave_group(
    session: Scoped,
    State(ctx): State<ApiContext>,
    ApiPath(path): ApiPath<(String, String)>,
) -> ApiResult<Json<SuccessResult>> {
    let group = path_group(&path)?;
    let engine = session.engine().await?;
    bounded(&ctx, engine.leave_group(&group)).await?;
    Ok(Json(SuccessResult::ok()))
}
