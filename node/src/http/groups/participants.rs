//! Group roster routes: add, remove, promote, demote (each a `ParticipantsResult`, 200 even when some
//! participants were refused), and membership requests (list, approve, reject).

use axum::Json;
use axum::extract::State;
use utoipa_axum::{router::OpenApiRouter, routes};
use wagate_proto::dto::groups::{
    MembershipAnswerRequest, MembershipRequest, ParticipantOutcome, ParticipantsRequest,
    ParticipantsResult,
};

use super::{participant_ids, path_group};
use crate::app::ApiContext;
use crate::engine::{ParticipantAction, ParticipantResult};
use crate::http::engine_call::bounded;
use crate::http::error::ApiResult;
use crate::http::extract::{ApiJson, ApiPath};
use crate::http::session_scope::Scoped;

pub(super) fn router() -> OpenApiRouter<ApiContext> {
    OpenApiRouter::new()
        .routes(routes!(add_participants, remove_participants))
        .routes(routes!(promote_participants))
        .routes(routes!(demote_participants))
        .routes(routes!(list_membership_requests))
        .routes(routes!(approve_membership_requests))
        .routes(routes!(reject_membership_requests))
}

fn result(outcomes: Vec<ParticipantResult>) -> ParticipantsResult {
    let refused = outcomes.iter().filter(|o| !o.success).count();
    let results: Vec<ParticipantOutcome> = outcomes
        .into_iter()
        .map(|o| ParticipantOutcome {
            id: o.id.to_string(),
            success: o.success,
            status: o.status,
            message: o.message,
        })
        .collect();
    ParticipantsResult {
        success: refused == 0,
        message: (refused > 0).then(|| format!("{refused} of {} refused", results.len())),
        results,
    }
}

async fn roster(
    ctx: ApiContext,
    session: Scoped,
    path: (String, String),
    body: ParticipantsRequest,
    action: ParticipantAction,
) -> ApiResult<Json<ParticipantsResult>> {
    let group = path_group(&path)?;
    let participants = participant_ids(&body.participants)?;
    let engine = session.engine().await?;
    let change = engine.update_participants(&group, action, &participants);
    Ok(Json(result(bounded(&ctx, change).await?)))
}

/// POST /api/sessions/{sessionId}/groups/{groupId}/participants
#[utoipa::path(post, path = "/api/sessions/{sessionId}/groups/{groupId}/participants", tag = "groups",
    request_body = ParticipantsRequest, responses((status = 200, body = ParticipantsResult)))]
async fn add_participants(
    session: Scoped,
    State(ctx): State<ApiContext>,
    ApiPath(path): ApiPath<(String, String)>,
    ApiJson(body): ApiJson<ParticipantsRequest>,
) -> ApiResult<Json<ParticipantsResult>> {
    roster(ctx, session, path, body, ParticipantAction::Add).await
}

/// DELETE /api/sessions/{sessionId}/groups/{groupId}/participants (JSON body)
#[utoipa::path(delete, path = "/api/sessions/{sessionId}/groups/{groupId}/participants", tag = "groups",
    request_body = ParticipantsRequest, responses((status = 200, body = ParticipantsResult)))]
async fn remove_participants(
    session: Scoped,
    State(ctx): State<ApiContext>,
    ApiPath(path): ApiPath<(String, String)>,
    ApiJson(body): ApiJson<ParticipantsRequest>,
) -> ApiResult<Json<ParticipantsResult>> {
    roster(ctx, session, path, body, ParticipantAction::Remove).await
}

/// POST /api/sessions/{sessionId}/groups/{groupId}/participants/promote
#[utoipa::path(post, path = "/api/sessions/{sessionId}/groups/{groupId}/participants/promote", tag = "groups",
    request_body = ParticipantsRequest, responses((status = 200, body = ParticipantsResult)))]
async fn promote_participants(
    session: Scoped,
    State(ctx): State<ApiContext>,
    ApiPath(path): ApiPath<(String, String)>,
    ApiJson(body): ApiJson<ParticipantsRequest>,
) -> ApiResult<Json<ParticipantsResult>> {
    roster(ctx, session, path, body, ParticipantAction::Promote).await
}

/// POST /api/sessions/{sessionId}/groups/{groupId}/participants/demote
#[utoipa::path(post, path = "/api/sessions/{sessionId}/groups/{groupId}/participants/demote", tag = "groups",
    request_body = ParticipantsRequest, responses((status = 200, body = ParticipantsResult)))]
async fn demote_participants(
    session: Scoped,
    State(ctx): State<ApiContext>,
    ApiPath(path): ApiPath<(String, String)>,
    ApiJson(body): ApiJson<ParticipantsRequest>,
) -> ApiResult<Json<ParticipantsResult>> {
    roster(ctx, session, path, body, ParticipantAction::Demote).await
}

/// GET /api/sessions/{sessionId}/groups/{groupId}/membership-requests
#[utoipa::path(get, path = "/api/sessions/{sessionId}/groups/{groupId}/membership-requests", tag = "groups",
    responses((status = 200, body = [MembershipRequest])))]
async fn list_membership_requests(
    session: Scoped,
    State(ctx): State<ApiContext>,
    ApiPath(path): ApiPath<(String, String)>,
) -> ApiResult<Json<Vec<MembershipRequest>>> {
    let group = path_group(&path)?;
    let engine = session.engine().await?;
    let requests = bounded(&ctx, engine.membership_requests(&group)).await?;
    let list = requests.into_iter().map(|r| MembershipRequest {
        participant_id: r.participant_id.to_string(),
        requested_at: r.requested_at,
    });
    Ok(Json(list.collect()))
}

async fn answer(
    ctx: ApiContext,
    session: Scoped,
    path: (String, String),
    body: MembershipAnswerRequest,
    approve: bool,
) -> ApiResult<Json<ParticipantsResult>> {
    let group = path_group(&path)?;
    let chosen = body
        .participants
        .as_deref()
        .map(participant_ids)
        .transpose()?;
    let engine = session.engine().await?;
    let change = engine.answer_membership_requests(&group, approve, chosen.as_deref());
    Ok(Json(result(bounded(&ctx, change).await?)))
}

/// POST /api/sessions/{sessionId}/groups/{groupId}/membership-requests/approve
#[utoipa::path(post, path = "/api/sessions/{sessionId}/groups/{groupId}/membership-requests/approve", tag = "groups",
    request_body = MembershipAnswerRequest, responses((status = 200, body = ParticipantsResult)))]
async fn approve_membership_requests(
    session: Scoped,
    State(ctx): State<ApiContext>,
    ApiPath(path): ApiPath<(String, String)>,
    ApiJson(body): ApiJson<MembershipAnswerRequest>,
) -> ApiResult<Json<ParticipantsResult>> {
    answer(ctx, session, path, body, true).await
}

/// POST /api/sessions/{sessionId}/groups/{groupId}/membership-requests/reject
#[utoipa::path(post, path = "/api/sessions/{sessionId}/groups/{groupId}/membership-requests/reject", tag = "groups",
    request_body = MembershipAnswerRequest, responses((status = 200, body = ParticipantsResult)))]
async fn reject_membership_requests(
    session: Scoped,
    State(ctx): State<ApiContext>,
    ApiPath(path): ApiPath<(String, String)>,
    ApiJson(body): ApiJson<MembershipAnswerRequest>,
) -> ApiResult<Json<ParticipantsResult>> {
    answer(ctx, session, path, body, false).await
}
