//! Every group route through the library's `Groups` API (`w:g2` IQs): list, create, info, roster
//! changes, subject/description, invite code (read, revoke, join, join info), leave, membership
//! requests, settings and picture.

use crate::whatsapp_rust::Jid as WaJid;
use crate::whatsapp_rust::features::{
    GroupCreateOptions, GroupDescription, GroupMetadata, GroupParticipantOptions, GroupSubject,
    MemberAddMode, ParticipantChangeResponse, PreviousDescription,
};
use wagate_proto::Jid;

use super::{Client, contacts, fail, wa, was, wire};
use wagate_engine_api::media::EngineMedia;
use wagate_engine_api::{
    EngineError, EngineResult, GroupInfo, GroupParticipant, GroupSettings, GroupSettingsUpdate,
    GroupSummary, MediaSource, MembershipRequest, NewGroup, ParticipantAction, ParticipantResult,
};

fn me(client: &Client) -> Option<WaJid> {
    client.pn().map(|j| j.to_non_ad())
}

fn is_me(client: &Client, jid: &WaJid) -> bool {
    let lid = client.lid().map(|l| l.to_non_ad());
    me(client).as_ref().is_some_and(|m| m.user == jid.user)
        || lid.is_some_and(|l| l.user == jid.user)
}

fn summary(client: &Client, meta: &GroupMetadata) -> Option<GroupSummary> {
    Some(GroupSummary {
        id: wire(&meta.id)?,
        name: meta.subject.clone(),
        participants_count: meta.participants.len(),
        is_admin: meta.participants.iter().any(|p| {
            p.is_admin()
                && (is_me(client, &p.jid)
                    || p.phone_number.as_ref().is_some_and(|pn| is_me(client, pn)))
        }),
    })
}

fn info(meta: &GroupMetadata) -> EngineResult<GroupInfo> {
    let id = wire(&meta.id)
        .ok_or_else(|| EngineError::Network(format!("unexpected group id {}", meta.id)))?;
    let owner = meta
        .creator_pn
        .as_ref()
        .or(meta.creator.as_ref())
        .and_then(wire)
        .unwrap_or_else(|| id.clone());
    Ok(GroupInfo {
        subject: meta.subject.clone(),
        description: meta.description.clone().unwrap_or_default(),
        owner,
        created_at: meta.creation_time.map(|t| t as i64).unwrap_or(0),
        participants: meta
            .participants
            .iter()
            .filter_map(|p| {
                let jid = p.phone_number.as_ref().unwrap_or(&p.jid);
                Some(GroupParticipant {
                    id: wire(jid)?,
                    is_admin: p.is_admin(),
                    is_super_admin: p.is_super_admin(),
                })
            })
            .collect(),
        id,
    })
}

pub(crate) async fn list(client: &Client) -> EngineResult<Vec<GroupSummary>> {
    let groups = client.groups().get_participating().await.map_err(fail)?;
    let mut list: Vec<_> = groups.values().filter_map(|m| summary(client, m)).collect();
    list.sort_by(|a, b| a.id.cmp(&b.id));
    Ok(list)
}

pub(crate) async fn create(client: &Client, group: NewGroup) -> EngineResult<GroupSummary> {
    let subject =
        GroupSubject::new(&group.subject).map_err(|e| EngineError::BadInput(e.to_string()))?;
    let participants = was(&group.participants)?
        .into_iter()
        .map(|jid| GroupParticipantOptions::builder().jid(jid).build())
        .collect();
    let options = GroupCreateOptions::builder()
        .subject(subject.as_str())
        .participants(participants)
        .build();
    let created = client.groups().create_group(options).await.map_err(fail)?;
    summary(client, &created.metadata)
        .ok_or_else(|| EngineError::Network("the network answered an unexpected group id".into()))
}

pub(crate) async fn get(client: &Client, group: &Jid) -> EngineResult<GroupInfo> {
    let meta = client
        .groups()
        .get_metadata(&wa(group)?)
        .await
        .map_err(fail)?;
    info(&meta)
}

pub(crate) async fn update_participants(
    client: &Client,
    group: &Jid,
    action: ParticipantAction,
    participants: &[Jid],
) -> EngineResult<Vec<ParticipantResult>> {
    let jid = wa(group)?;
    let list = was(participants)?;
    let groups = client.groups();
    let answer = match action {
        ParticipantAction::Add => groups.add_participants(jid, &list).await,
        ParticipantAction::Remove => groups.remove_participants(jid, &list).await,
        ParticipantAction::Promote => groups.promote_participants(jid, &list).await,
        ParticipantAction::Demote => groups.demote_participants(jid, &list).await,
    }
    .map_err(fail)?;
    Ok(results(participants, answer))
}

/// One result per requested participant, in request order; the server names each by its JID (or
/// its phone number when it answers with a LID).
fn results(requested: &[Jid], answer: Vec<ParticipantChangeResponse>) -> Vec<ParticipantResult> {
    requested
        .iter()
        .map(|id| {
            let hit = answer.iter().find(|r| {
                r.jid.user == id.user()
                    || r.phone_number.as_ref().is_some_and(|p| p.user == id.user())
            });
            participant_result(id, hit)
        })
        .collect()
}

pub(crate) fn participant_result(
    id: &Jid,
    hit: Option<&ParticipantChangeResponse>,
) -> ParticipantResult {
    let code = hit
        .and_then(|r| r.error.as_deref().or(r.status.as_deref()))
        .and_then(|c| c.parse::<u16>().ok());
    let status = match hit {
        None => 404,
        Some(r) if r.is_ok() => code.unwrap_or(200),
        Some(_) => code.unwrap_or(400),
    };
    let success = (200..300).contains(&status);
    let message = match status {
        200..=299 => "OK",
        403 => "Not authorised",
        404 => "Not found in the answer",
        408 => "Recently left the group",
        409 => "Already in the group",
        _ => "Refused",
    };
    ParticipantResult {
        id: id.clone(),
        success,
        status,
        message: message.to_string(),
    }
}

pub(crate) async fn set_subject(client: &Client, group: &Jid, subject: &str) -> EngineResult<()> {
    let subject = GroupSubject::new(subject).map_err(|e| EngineError::BadInput(e.to_string()))?;
    client
        .groups()
        .set_subject(wa(group)?, subject)
        .await
        .map_err(fail)
}

/// An empty description clears it. The previous description id is read from the server first.
pub(crate) async fn set_description(
    client: &Client,
    group: &Jid,
    description: &str,
) -> EngineResult<()> {
    let description = if description.is_empty() {
        None
    } else {
        Some(GroupDescription::new(description).map_err(|e| EngineError::BadInput(e.to_string()))?)
    };
    client
        .groups()
        .set_description(wa(group)?, description, PreviousDescription::Resolve)
        .await
        .map_err(fail)
}

/// The invite code (the last path segment of the invite link).
fn code_of(link: &str) -> String {
    link.rsplit('/').next().unwrap_or(link).to_string()
}

pub(crate) async fn invite_code(client: &Client, group: &Jid, reset: bool) -> EngineResult<String> {
    let link = client
        .groups()
        .get_invite_link(wa(group)?, reset)
        .await
        .map_err(fail)?;
    Ok(code_of(&link))
}

pub(crate) async fn join(client: &Client, code: &str) -> EngineResult<Jid> {
    let joined = client
        .groups()
        .join_with_invite_code(code)
        .await
        .map_err(fail)?;
    wire(joined.group_jid())
        .ok_or_else(|| EngineError::Network("the network answered an unexpected group id".into()))
}

pub(crate) async fn join_info(client: &Client, code: &str) -> EngineResult<GroupInfo> {
    let meta = client.groups().get_invite_info(code).await.map_err(fail)?;
    info(&meta)
}

pub(crate) async fn leave(client: &Client, group: &Jid) -> EngineResult<()> {
    client.groups().leave(wa(group)?).await.map_err(fail)
}

pub(crate) async fn membership_requests(
    client: &Client,
    group: &Jid,
) -> EngineResult<Vec<MembershipRequest>> {
    let list = client
        .groups()
        .get_membership_requests(wa(group)?)
        .await
        .map_err(fail)?;
    Ok(list
        .iter()
        .filter_map(|r| {
            Some(MembershipRequest {
                participant_id: wire(&r.jid)?,
                requested_at: r.request_time.map(|t| t as i64).unwrap_or(0),
            })
        })
        .collect())
}

/// `None` answers every pending request.
pub(crate) async fn answer_membership(
    client: &Client,
    group: &Jid,
    approve: bool,
    participants: Option<&[Jid]>,
) -> EngineResult<Vec<ParticipantResult>> {
    let requested = match participants {
        Some(list) => list.to_vec(),
        None => membership_requests(client, group)
            .await?
            .into_iter()
            .map(|r| r.participant_id)
            .collect(),
    };
    if requested.is_empty() {
        return Ok(Vec::new());
    }
    let jid = wa(group)?;
    let list = was(&requested)?;
    let groups = client.groups();
    let answer = if approve {
        groups.approve_membership_requests(jid, &list).await
    } else {
        groups.reject_membership_requests(jid, &list).await
    }
    .map_err(fail)?;
    Ok(results(&requested, answer))
}

pub(crate) async fn settings(client: &Client, group: &Jid) -> EngineResult<GroupSettings> {
    let meta = client
        .groups()
        .get_metadata(&wa(group)?)
        .await
        .map_err(fail)?;
    Ok(settings_of(&meta))
}

pub(crate) fn settings_of(meta: &GroupMetadata) -> GroupSettings {
    GroupSettings {
        announce: meta.is_announcement,
        locked: meta.is_locked,
        ephemeral_seconds: meta
            .ephemeral
            .as_ref()
            .and_then(|e| e.expiration)
            .unwrap_or(0),
        admin_add_only: meta.member_add_mode == Some(MemberAddMode::AdminAdd),
    }
}

/// Applies each named field (one IQ each), then answers the settings as the server now has them.
pub(crate) async fn update_settings(
    client: &Client,
    group: &Jid,
    update: GroupSettingsUpdate,
) -> EngineResult<GroupSettings> {
    let jid = wa(group)?;
    let groups = client.groups();
    if let Some(announce) = update.announce {
        groups
            .set_announce(jid.clone(), announce)
            .await
            .map_err(fail)?;
    }
    if let Some(locked) = update.locked {
        groups.set_locked(jid.clone(), locked).await.map_err(fail)?;
    }
    if let Some(seconds) = update.ephemeral_seconds {
        groups
            .set_ephemeral(jid.clone(), seconds)
            .await
            .map_err(fail)?;
    }
    if let Some(admin_only) = update.admin_add_only {
        let mode = if admin_only {
            MemberAddMode::AdminAdd
        } else {
            MemberAddMode::AllMemberAdd
        };
        groups
            .set_member_add_mode(jid.clone(), mode)
            .await
            .map_err(fail)?;
    }
    settings(client, group).await
}

pub(crate) async fn picture(client: &Client, group: &Jid) -> EngineResult<Option<String>> {
    contacts::picture(client, group).await
}

pub(crate) async fn set_picture(
    client: &Client,
    media: &dyn EngineMedia,
    group: &Jid,
    image: MediaSource,
) -> EngineResult<()> {
    let bytes = image.load(media).await?;
    client
        .groups()
        .set_profile_picture(wa(group)?, bytes)
        .await
        .map_err(fail)?;
    Ok(())
}

pub(crate) async fn remove_picture(client: &Client, group: &Jid) -> EngineResult<()> {
    client
        .groups()
        .remove_profile_picture(wa(group)?)
        .await
        .map_err(fail)?;
    Ok(())
}
