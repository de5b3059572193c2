//! Group routes: summaries, detail, join info, roster changes and their per-participant results,
//! membership requests, settings and invite codes.

use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct GroupSummary {
    pub id: String,
    pub name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub participants_count: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub is_admin: Option<bool>,
}

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct GroupParticipant {
    pub id: String,
    pub number: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    pub is_admin: bool,
    pub is_super_admin: bool,
}

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct GroupDetail {
    pub id: String,
    pub name: String,
    pub description: String,
    pub owner: String,
    /// Unix seconds.
    pub created_at: i64,
    pub participants: Vec<GroupParticipant>,
}

/// What an invite code shows to a non-member: no roster, only a count.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct GroupJoinInfo {
    pub id: String,
    pub name: String,
    pub description: String,
    pub owner: String,
    pub created_at: i64,
    pub participant_count: usize,
}

#[derive(Debug, Clone, Deserialize, ToSchema)]
pub struct CreateGroupRequest {
    pub name: String,
    pub participants: Vec<String>,
}

#[derive(Debug, Clone, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct JoinInfoQuery {
    /// The invite code (or the whole `https://chat.whatsapp.com/<code>` link).
    pub code: Option<String>,
    /// The same as `code`, named as the join body and the invite-code read name it.
    #[serde(rename = "inviteCode")]
    pub invite_code: Option<String>,
}

#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct JoinGroupRequest {
    pub invite_code: String,
}

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct JoinGroupResponse {
    pub success: bool,
    pub group_id: String,
}

#[derive(Debug, Clone, Deserialize, ToSchema)]
pub struct GroupSubjectRequest {
    pub subject: String,
}

#[derive(Debug, Clone, Deserialize, ToSchema)]
pub struct GroupDescriptionRequest {
    /// An empty string clears the description.
    pub description: String,
}

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct InviteCode {
    pub invite_code: String,
    pub invite_link: String,
}

#[derive(Debug, Clone, Deserialize, ToSchema)]
pub struct ParticipantsRequest {
    pub participants: Vec<String>,
}

/// `participants` omitted acts on every pending request.
#[derive(Debug, Clone, Deserialize, ToSchema)]
pub struct MembershipAnswerRequest {
    pub participants: Option<Vec<String>>,
}

/// The outcome for one participant of a batch.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct ParticipantOutcome {
    pub id: String,
    pub success: bool,
    pub status: u16,
    pub message: String,
}

/// A partly refused batch still answers 200: read `results`.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct ParticipantsResult {
    pub success: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    pub results: Vec<ParticipantOutcome>,
}

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct MembershipRequest {
    pub participant_id: String,
    /// Unix seconds.
    pub requested_at: i64,
}

/// `memberAddMode`: `all` or `admins`.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct GroupSettings {
    pub announce: bool,
    pub locked: bool,
    pub ephemeral_seconds: u32,
    pub member_add_mode: String,
}

#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct UpdateGroupSettingsRequest {
    pub announce: Option<bool>,
    pub locked: Option<bool>,
    pub ephemeral_seconds: Option<u32>,
    pub member_add_mode: Option<String>,
}
