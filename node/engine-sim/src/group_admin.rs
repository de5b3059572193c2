//! Group administration on the sim network: membership requests, settings, picture, and the control
//! API's `group_event` (the network acting on a group). Input: `SimEngine` and the control routes; the
//! group records and roster changes themselves are in `groups.rs`.

use super::control::linked_phone;
use super::groups::{Group, MemberRole, event, not_found, result};
use super::network::{SimNetwork, now};
use wagate_engine_api::{
    EngineError, EngineResult, GroupAction, GroupChanges, GroupEvent, GroupSettings,
    GroupSettingsUpdate, MemberAddMode, MembershipRequest, ParticipantResult, PictureChange,
};
use wagate_proto::Jid;

impl SimNetwork {
    pub fn membership_requests(
        &self,
        session: &str,
        id: &Jid,
    ) -> EngineResult<Vec<MembershipRequest>> {
        let mut state = self.lock();
        let me = state.online_phone(session)?;
        Ok(state.admin_group(&me, id)?.requests.clone())
    }

    pub fn answer_requests(
        &self,
        session: &str,
        id: &Jid,
        approve: bool,
        only: Option<&[Jid]>,
    ) -> EngineResult<Vec<ParticipantResult>> {
        let mut state = self.lock();
        let me = state.online_phone(session)?;
        let group = state.admin_group(&me, id)?;
        let targets: Vec<Jid> = match only {
            Some(list) => list.to_vec(),
            None => group
                .requests
                .iter()
                .map(|r| r.participant_id.clone())
                .collect(),
        };
        let mut approved = Vec::new();
        let results: Vec<ParticipantResult> = targets
            .iter()
            .map(|p| {
                let Some(pos) = group.requests.iter().position(|r| r.participant_id == *p) else {
                    return result(p, 404, "no pending request");
                };
                group.requests.remove(pos);
                if approve {
                    group.members.insert(p.clone(), MemberRole::Member);
                    approved.push(p.clone());
                }
                result(p, 200, "")
            })
            .collect();
        let members: Vec<Jid> = group.members.keys().cloned().collect();
        if results.iter().any(|r| r.success) {
            state.group_changed(id);
        }
        if !approved.is_empty() {
            state.announce(&members, event(GroupAction::Join, id, &me, approved, None));
        }
        Ok(results)
    }

    pub fn group_settings(&self, session: &str, id: &Jid) -> EngineResult<GroupSettings> {
        let mut state = self.lock();
        let me = state.online_phone(session)?;
        Ok(state.member_group(&me, id)?.settings)
    }

    /// Applies the fields that differ from the current settings; an update changing nothing is announced
    /// to no one (members would get a `group.update` with empty changes).
    pub fn update_group_settings(
        &self,
        session: &str,
        id: &Jid,
        update: GroupSettingsUpdate,
    ) -> EngineResult<GroupSettings> {
        let mut state = self.lock();
        let me = state.online_phone(session)?;
        let group = state.admin_group(&me, id)?;
        let changes = settings_changes(&group.settings, &update);
        if changes.is_empty() {
            return Ok(group.settings);
        }
        apply_changes(group, &changes, 0);
        let settings = group.settings;
        let members: Vec<Jid> = group.members.keys().cloned().collect();
        state.group_changed(id);
        state.announce(
            &members,
            event(GroupAction::Update, id, &me, Vec::new(), Some(changes)),
        );
        Ok(settings)
    }

    /// Reads, sets (`Some(true)`), or removes (`Some(false)`) the group picture; answers its URL.
    pub fn group_picture(
        &self,
        session: &str,
        id: &Jid,
        set: Option<bool>,
    ) -> EngineResult<Option<String>> {
        let mut state = self.lock();
        let me = state.online_phone(session)?;
        let seq = state.next_seq();
        let group = state.member_group(&me, id)?;
        if set.is_some() && group.settings.locked && !group.is_admin(&me) {
            return Err(EngineError::Rejected(
                "only admins can change the picture".into(),
            ));
        }
        let change = match set {
            Some(true) => Some(PictureChange::Set),
            // Removing a picture the group does not have changes nothing.
            Some(false) => group.picture.is_some().then_some(PictureChange::Removed),
            None => None,
        };
        let Some(change) = change else {
            return Ok(group.picture.clone());
        };
        let changes = GroupChanges {
            picture: Some(change),
            ..Default::default()
        };
        apply_changes(group, &changes, seq);
        let picture = group.picture.clone();
        let members: Vec<Jid> = group.members.keys().cloned().collect();
        state.group_changed(id);
        state.announce(
            &members,
            event(GroupAction::Update, id, &me, Vec::new(), Some(changes)),
        );
        Ok(picture)
    }

    /// Control API: something happens in a group (wire-notes §11 `/group-event`); members' sessions hear it.
    pub fn group_event(
        &self,
        session: &str,
        id: &Jid,
        action: GroupAction,
        participants: &[Jid],
        changes: Option<GroupChanges>,
    ) -> EngineResult<()> {
        let mut state = self.lock();
        linked_phone(&state, session)?;
        let timestamp = now();
        let seq = state.next_seq();
        let group = state.groups.get_mut(id).ok_or_else(|| not_found(id))?;
        let mut audience: Vec<Jid> = group.members.keys().cloned().collect();
        match action {
            // A participant already in the group keeps the role it has.
            GroupAction::Join => {
                for p in participants {
                    group.members.entry(p.clone()).or_insert(MemberRole::Member);
                }
            }
            GroupAction::Leave => group.members.retain(|m, _| !participants.contains(m)),
            GroupAction::Update => apply_changes(group, &changes.clone().unwrap_or_default(), seq),
            GroupAction::JoinRequest => {
                let requests = participants.iter().map(|p| MembershipRequest {
                    participant_id: p.clone(),
                    requested_at: timestamp,
                });
                group.requests.extend(requests);
                audience.retain(|m| group.is_admin(m));
            }
        }
        if action == GroupAction::Join {
            audience = group.members.keys().cloned().collect();
        }
        state.group_changed(id);
        // The network itself acts here (no member of this session's account), so there is no actor.
        let ev = GroupEvent {
            action,
            group_id: id.clone(),
            actor_id: None,
            participant_ids: participants.to_vec(),
            changes,
            timestamp,
        };
        state.announce(&audience, ev);
        Ok(())
    }
}

impl SimNetwork {
    /// `group_event` on a cluster-wide network: reads the group back first and answers once the change
    /// reached the peers (the control route's entry point).
    pub async fn shared_group_event(
        &self,
        session: &str,
        id: &Jid,
        action: GroupAction,
        participants: &[Jid],
        changes: Option<GroupChanges>,
    ) -> EngineResult<()> {
        self.pull_groups().await;
        self.group_event(session, id, action, participants, changes)?;
        self.flush_peers().await;
        Ok(())
    }
}

/// The settings fields of `update` that differ from `current`.
fn settings_changes(current: &GroupSettings, update: &GroupSettingsUpdate) -> GroupChanges {
    GroupChanges {
        announce: update.announce.filter(|v| *v != current.announce),
        locked: update.locked.filter(|v| *v != current.locked),
        ephemeral_seconds: update
            .ephemeral_seconds
            .filter(|v| *v != current.ephemeral_seconds),
        member_add_mode: update
            .admin_add_only
            .filter(|v| *v != current.admin_add_only)
            .map(MemberAddMode::admins_only),
        ..Default::default()
    }
}

/// Applies `changes` to the record; `seq` makes a newly set picture's URL differ from the last one.
pub(super) fn apply_changes(group: &mut Group, changes: &GroupChanges, seq: u64) {
    if let Some(subject) = &changes.subject {
        group.subject = subject.clone();
    }
    if let Some(description) = &changes.description {
        group.description = description.clone();
    }
    let s = &mut group.settings;
    s.announce = changes.announce.unwrap_or(s.announce);
    s.locked = changes.locked.unwrap_or(s.locked);
    s.ephemeral_seconds = changes.ephemeral_seconds.unwrap_or(s.ephemeral_seconds);
    if let Some(mode) = changes.member_add_mode {
        s.admin_add_only = mode == MemberAddMode::Admins;
    }
    match changes.picture {
        Some(PictureChange::Set) => {
            group.picture = Some(format!(
                "https://pps.sim.invalid/g/{}/{seq}.jpg",
                group.id.user()
            ))
        }
        Some(PictureChange::Removed) => group.picture = None,
        None => {}
    }
}
