//! Groups on the sim network: create, roster changes with per-participant results, metadata, invite
//! codes and joining. Every change reaches the members' sessions as a `Group` event. Input: `SimEngine`.
//! Join requests, settings, picture and the control API's `group_event` are in `group_admin.rs`.

use super::group_admin::apply_changes;
use super::network::{NetState, SimNetwork, now};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use wagate_engine_api::{
    EngineError, EngineEvent, EngineResult, GroupAction, GroupChanges, GroupEvent, GroupInfo,
    GroupParticipant, GroupSettings, GroupSummary, MembershipRequest, NewGroup, ParticipantAction,
    ParticipantResult,
};
use wagate_proto::Jid;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub(super) enum MemberRole {
    Member,
    Admin,
    SuperAdmin,
}

/// A group as the network keeps it; in a cluster also its shared record (`shared.rs`).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(super) struct Group {
    pub id: Jid,
    pub subject: String,
    pub description: String,
    pub owner: Jid,
    pub created_at: i64,
    pub members: BTreeMap<Jid, MemberRole>,
    pub invite_code: String,
    pub requests: Vec<MembershipRequest>,
    pub settings: GroupSettings,
    pub picture: Option<String>,
    /// Bumped on every change, so a node never replaces its copy with an older one.
    #[serde(default)]
    pub rev: u64,
}

impl Group {
    pub(super) fn is_admin(&self, who: &Jid) -> bool {
        matches!(
            self.members.get(who),
            Some(MemberRole::Admin | MemberRole::SuperAdmin)
        )
    }

    fn info(&self) -> GroupInfo {
        GroupInfo {
            id: self.id.clone(),
            subject: self.subject.clone(),
            description: self.description.clone(),
            owner: self.owner.clone(),
            created_at: self.created_at,
            participants: self
                .members
                .iter()
                .map(|(id, role)| GroupParticipant {
                    id: id.clone(),
                    is_admin: *role != MemberRole::Member,
                    is_super_admin: *role == MemberRole::SuperAdmin,
                })
                .collect(),
        }
    }

    fn summary(&self, viewer: &Jid) -> GroupSummary {
        GroupSummary {
            id: self.id.clone(),
            name: self.subject.clone(),
            participants_count: self.members.len(),
            is_admin: self.is_admin(viewer),
        }
    }
}

pub(super) fn not_found(group: &Jid) -> EngineError {
    EngineError::NotFound(format!("Group {group} not found"))
}

pub(super) fn result(id: &Jid, status: u16, message: &str) -> ParticipantResult {
    ParticipantResult {
        id: id.clone(),
        success: status == 200,
        status,
        message: message.to_string(),
    }
}

impl NetState {
    pub(super) fn member_group(&mut self, me: &Jid, id: &Jid) -> EngineResult<&mut Group> {
        let group = self.groups.get_mut(id).ok_or_else(|| not_found(id))?;
        if !group.members.contains_key(me) {
            return Err(EngineError::Rejected(
                "not a participant of this group".into(),
            ));
        }
        Ok(group)
    }

    pub(super) fn admin_group(&mut self, me: &Jid, id: &Jid) -> EngineResult<&mut Group> {
        let group = self.member_group(me, id)?;
        if !group.is_admin(me) {
            return Err(EngineError::Rejected("admin rights are required".into()));
        }
        Ok(group)
    }

    /// The group `me` may change the roster of: adding needs admin rights only when the group's
    /// member add mode is admins-only; removing, promoting and demoting always need them.
    fn roster_group(
        &mut self,
        me: &Jid,
        id: &Jid,
        action: ParticipantAction,
    ) -> EngineResult<&mut Group> {
        let group = self.member_group(me, id)?;
        let open_add = action == ParticipantAction::Add && !group.settings.admin_add_only;
        if !open_add && !group.is_admin(me) {
            return Err(EngineError::Rejected("admin rights are required".into()));
        }
        Ok(group)
    }

    /// Sends a group event to every session of the given phones.
    pub(super) fn announce(&mut self, phones: &[Jid], event: GroupEvent) {
        let event = EngineEvent::Group(event);
        for phone in phones {
            self.deliver_to_phone(phone, &event);
        }
    }

    fn invite_code(&mut self) -> String {
        let seq = self.next_seq();
        format!("SIMINV{}{seq:010}", self.id_salt())
    }
}

pub(super) fn event(
    action: GroupAction,
    group: &Jid,
    actor: &Jid,
    ids: Vec<Jid>,
    changes: Option<GroupChanges>,
) -> GroupEvent {
    GroupEvent {
        action,
        group_id: group.clone(),
        actor_id: Some(actor.clone()),
        participant_ids: ids,
        changes,
        timestamp: now(),
    }
}

impl SimNetwork {
    pub fn list_groups(&self, session: &str) -> EngineResult<Vec<GroupSummary>> {
        let state = self.lock();
        let me = state.online_phone(session)?;
        Ok(state
            .groups
            .values()
            .filter(|g| g.members.contains_key(&me))
            .map(|g| g.summary(&me))
            .collect())
    }

    /// Creates a group owned by the session; participants not on the network are left out.
    pub fn create_group(&self, session: &str, new: NewGroup) -> EngineResult<GroupSummary> {
        let mut state = self.lock();
        let me = state.online_phone(session)?;
        let seq = state.next_seq();
        let id = Jid::parse(&format!("120363{}{seq:012}@g.us", state.id_salt()))
            .map_err(|e| EngineError::Network(e.to_string()))?;
        let mut members = BTreeMap::from([(me.clone(), MemberRole::SuperAdmin)]);
        let mut added: Vec<Jid> = Vec::new();
        for p in &new.participants {
            // A participant named twice is added, and announced, once.
            if state.exists(p) && *p != me && !added.contains(p) {
                added.push(p.clone());
            }
        }
        members.extend(added.iter().map(|p| (p.clone(), MemberRole::Member)));
        let group = Group {
            id: id.clone(),
            subject: new.subject,
            description: String::new(),
            owner: me.clone(),
            created_at: now(),
            members,
            invite_code: state.invite_code(),
            requests: Vec::new(),
            // Adding members stays an admin's right until an admin opens it (`memberAddMode: "all"`), so a
            // member's add is refused as it always was here.
            settings: GroupSettings {
                admin_add_only: true,
                ..GroupSettings::default()
            },
            picture: None,
            rev: 0,
        };
        let summary = group.summary(&me);
        state.groups.insert(id.clone(), group);
        state.group_changed(&id);
        state.announce(
            &added,
            event(GroupAction::Join, &id, &me, added.clone(), None),
        );
        Ok(summary)
    }

    pub fn group_info(&self, session: &str, id: &Jid) -> EngineResult<GroupInfo> {
        let mut state = self.lock();
        let me = state.online_phone(session)?;
        Ok(state.member_group(&me, id)?.info())
    }

    pub fn update_participants(
        &self,
        session: &str,
        id: &Jid,
        action: ParticipantAction,
        participants: &[Jid],
    ) -> EngineResult<Vec<ParticipantResult>> {
        let mut state = self.lock();
        let me = state.online_phone(session)?;
        let exists: Vec<bool> = participants.iter().map(|p| state.exists(p)).collect();
        let group = state.roster_group(&me, id, action)?;
        let mut changed = Vec::new();
        let results = participants
            .iter()
            .zip(exists)
            .map(|(p, exists)| {
                let outcome = apply_roster(group, action, p, exists);
                if outcome.success {
                    changed.push(p.clone());
                }
                outcome
            })
            .collect();
        let members: Vec<Jid> = group.members.keys().cloned().collect();
        if !changed.is_empty() {
            state.group_changed(id);
            let (kind, changes) = match action {
                ParticipantAction::Add => (GroupAction::Join, None),
                ParticipantAction::Remove => (GroupAction::Leave, None),
                ParticipantAction::Promote => (
                    GroupAction::Update,
                    Some(GroupChanges {
                        admin: Some(true),
                        ..Default::default()
                    }),
                ),
                ParticipantAction::Demote => (
                    GroupAction::Update,
                    Some(GroupChanges {
                        admin: Some(false),
                        ..Default::default()
                    }),
                ),
            };
            let mut audience = members;
            if action == ParticipantAction::Remove {
                audience.extend(changed.iter().cloned());
            }
            state.announce(&audience, event(kind, id, &me, changed, changes));
        }
        Ok(results)
    }

    /// Applies metadata changes as `session` (admin rights needed when the group is locked).
    pub fn change_group(&self, session: &str, id: &Jid, changes: GroupChanges) -> EngineResult<()> {
        let mut state = self.lock();
        let me = state.online_phone(session)?;
        let seq = state.next_seq();
        let group = state.member_group(&me, id)?;
        if group.settings.locked && !group.is_admin(&me) {
            return Err(EngineError::Rejected(
                "only admins can edit this group's info".into(),
            ));
        }
        apply_changes(group, &changes, seq);
        let members: Vec<Jid> = group.members.keys().cloned().collect();
        state.group_changed(id);
        state.announce(
            &members,
            event(GroupAction::Update, id, &me, Vec::new(), Some(changes)),
        );
        Ok(())
    }

    pub fn group_invite_code(&self, session: &str, id: &Jid, revoke: bool) -> EngineResult<String> {
        let mut state = self.lock();
        let me = state.online_phone(session)?;
        let fresh = state.invite_code();
        let group = state.admin_group(&me, id)?;
        if revoke {
            group.invite_code = fresh;
        }
        let code = group.invite_code.clone();
        if revoke {
            state.group_changed(id);
        }
        Ok(code)
    }

    pub fn group_join_info(&self, session: &str, code: &str) -> EngineResult<GroupInfo> {
        let state = self.lock();
        state.online_phone(session)?;
        let group = state.groups.values().find(|g| g.invite_code == code);
        group
            .map(Group::info)
            .ok_or_else(|| EngineError::NotFound("Invite code not found".into()))
    }

    pub fn join_group(&self, session: &str, code: &str) -> EngineResult<Jid> {
        let mut state = self.lock();
        let me = state.online_phone(session)?;
        let group = state.groups.values_mut().find(|g| g.invite_code == code);
        let group = group.ok_or_else(|| EngineError::NotFound("Invite code not found".into()))?;
        let id = group.id.clone();
        if group
            .members
            .insert(me.clone(), MemberRole::Member)
            .is_none()
        {
            let members: Vec<Jid> = group.members.keys().cloned().collect();
            state.group_changed(&id);
            state.announce(
                &members,
                event(GroupAction::Join, &id, &me, vec![me.clone()], None),
            );
        }
        Ok(id)
    }

    pub fn leave_group(&self, session: &str, id: &Jid) -> EngineResult<()> {
        let mut state = self.lock();
        let me = state.online_phone(session)?;
        let group = state.member_group(&me, id)?;
        let audience: Vec<Jid> = group.members.keys().cloned().collect();
        group.members.remove(&me);
        state.group_changed(id);
        state.announce(
            &audience,
            event(GroupAction::Leave, id, &me, vec![me.clone()], None),
        );
        Ok(())
    }
}

fn apply_roster(
    group: &mut Group,
    action: ParticipantAction,
    who: &Jid,
    exists: bool,
) -> ParticipantResult {
    let role = group.members.get(who).copied();
    match (action, role) {
        (ParticipantAction::Add, Some(_)) => result(who, 409, "already a participant"),
        (ParticipantAction::Add, None) if !exists => result(who, 404, "not on WhatsApp"),
        (ParticipantAction::Add, None) => {
            group.members.insert(who.clone(), MemberRole::Member);
            result(who, 200, "")
        }
        (_, None) => result(who, 404, "not a participant"),
        (_, Some(MemberRole::SuperAdmin)) => result(who, 403, "the group owner cannot be changed"),
        (ParticipantAction::Remove, Some(_)) => {
            group.members.remove(who);
            result(who, 200, "")
        }
        (ParticipantAction::Promote, Some(_)) => {
            group.members.insert(who.clone(), MemberRole::Admin);
            result(who, 200, "")
        }
        (ParticipantAction::Demote, Some(_)) => {
            group.members.insert(who.clone(), MemberRole::Member);
            result(who, 200, "")
        }
    }
}
