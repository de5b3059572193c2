//! The `sim` engine: a thin `Engine` impl over the in-process simulated network (wire-notes §10).
//! `network.rs` holds the shared state; one file per feature mutates it; `control.rs` plays the phone and
//! the other accounts. Per the socket column, label reads, channel lists and channel messages stay
//! `NotSupported` (the trait defaults).

mod actions;
mod channels;
mod contacts;
/// The control API's inputs (`InboundSpec`); the control methods themselves are on `SimNetwork`.
pub(crate) mod control;
mod extras;
mod group_admin;
mod groups;
mod lifecycle;
mod messaging;
/// `SimNetwork`, `SimConfig` and `OutboxEntry`.
pub(crate) mod network;
/// The seam to the rest of a cluster-wide sim network.
pub(crate) mod peers;
/// `RedisPeers`: the cluster-wide sim network over Redis.
pub(crate) mod peers_redis;
#[cfg(test)]
mod tests;

pub(crate) use network::SimNetwork;

use crate::engine::*;
use async_trait::async_trait;
use std::sync::Arc;
use wagate_proto::Jid;

/// Builds sim engines on one shared network. Created at boot when `ENGINE_TYPE=sim`.
pub(crate) struct SimFactory {
    net: SimNetwork,
}

impl SimFactory {
    pub(crate) fn new(net: SimNetwork) -> Self {
        Self { net }
    }
}

impl EngineFactory for SimFactory {
    fn create(&self, ctx: EngineContext) -> Arc<dyn Engine> {
        Arc::new(SimEngine {
            net: self.net.clone(),
            ctx,
        })
    }

    fn capabilities(&self) -> &Capabilities {
        &Capabilities::SOCKET
    }

    fn kind(&self) -> EngineKind {
        EngineKind::Sim
    }
}

/// One session's engine on the sim network.
pub(crate) struct SimEngine {
    net: SimNetwork,
    ctx: EngineContext,
}

impl SimEngine {
    fn id(&self) -> &str {
        &self.ctx.session_id
    }

    /// Queries wait out the injected delay first (the 503 budget tests); writes that the spec says never
    /// answer 503 (sends, group/channel create, status posts, call links) do not.
    async fn query(&self) -> &str {
        self.net.query_gate().await;
        self.id()
    }
}

#[async_trait]
impl Engine for SimEngine {
    async fn start(&self) -> EngineResult<()> {
        self.net
            .start_device(self.id(), self.ctx.events.clone(), self.ctx.linked.as_ref())
    }
    // Stop, logout and kill return once a cluster-wide network's shared view has dropped the device, so
    // a node that lost a lease is off the view before it announces itself live again.
    async fn stop(&self) -> EngineResult<()> {
        self.net.stop_device(self.id());
        self.net.flush_peers().await;
        Ok(())
    }
    async fn logout(&self) -> EngineResult<()> {
        // The unlink is a network round trip: it honours the injected query delay (teardown tests).
        self.net.query_gate().await;
        self.net.logout_device(self.id());
        self.net.flush_peers().await;
        Ok(())
    }
    async fn kill(&self) -> EngineResult<()> {
        self.net.stop_device(self.id());
        self.net.flush_peers().await;
        Ok(())
    }
    async fn request_pairing_code(&self, phone: &str) -> EngineResult<String> {
        self.net.pairing_code(self.id(), phone)
    }

    async fn send(&self, msg: OutgoingMessage) -> EngineResult<SentMessage> {
        self.net.send(self.id(), msg).await
    }
    async fn react(&self, chat: &Jid, message_id: &str, emoji: &str) -> EngineResult<()> {
        self.net
            .react_own(self.query().await, chat, message_id, emoji)
    }
    async fn edit(&self, chat: &Jid, message_id: &str, body: &str) -> EngineResult<SentMessage> {
        self.net
            .edit_own(self.query().await, chat, message_id, body)
    }
    async fn revoke(&self, chat: &Jid, message_id: &str, for_everyone: bool) -> EngineResult<()> {
        self.net
            .revoke_own(self.query().await, chat, message_id, for_everyone)
    }
    async fn forward(&self, _from: &Jid, to: &Jid, message_id: &str) -> EngineResult<SentMessage> {
        self.net.forward(self.id(), to, message_id).await
    }
    async fn pin(&self, _chat: &Jid, message_id: &str, _duration_s: u32) -> EngineResult<()> {
        self.net.set_pinned(self.query().await, message_id, true)
    }
    async fn unpin(&self, _chat: &Jid, message_id: &str) -> EngineResult<()> {
        self.net.set_pinned(self.query().await, message_id, false)
    }
    async fn vote_poll(&self, _chat: &Jid, poll_id: &str, options: &[String]) -> EngineResult<()> {
        self.net.vote_poll(self.query().await, poll_id, options)
    }
    async fn mark_read(&self, chat: &Jid, message_ids: &[String]) -> EngineResult<()> {
        self.net.mark_read(self.query().await, chat, message_ids)
    }
    async fn mark_unread(&self, chat: &Jid) -> EngineResult<()> {
        self.net.mark_unread(self.query().await, chat)
    }
    async fn star(&self, _chat: &Jid, message_id: &str, star: bool) -> EngineResult<()> {
        self.net.star(self.query().await, message_id, star)
    }
    async fn click_button(
        &self,
        _chat: &Jid,
        message_id: &str,
        _button_id: &str,
        _text: Option<&str>,
    ) -> EngineResult<()> {
        self.net.click_button(self.query().await, message_id)
    }

    async fn list_chats(&self) -> EngineResult<Vec<ChatSummary>> {
        self.net.list_chats(self.query().await)
    }
    async fn archive_chat(&self, chat: &Jid, archive: bool) -> EngineResult<()> {
        self.net
            .update_chat(self.query().await, chat, |c| c.archived = archive)
    }
    async fn pin_chat(&self, chat: &Jid, pin: bool) -> EngineResult<()> {
        self.net
            .update_chat(self.query().await, chat, |c| c.pinned = pin)
    }
    async fn mute_chat(&self, chat: &Jid, until_ms: Option<i64>) -> EngineResult<()> {
        self.net
            .update_chat(self.query().await, chat, |c| c.muted_until = until_ms)
    }
    async fn set_chat_state(&self, chat: &Jid, state: ChatState) -> EngineResult<()> {
        self.net.set_chat_state(self.query().await, chat, state)
    }
    async fn clear_chat(&self, chat: &Jid) -> EngineResult<()> {
        let clear = |c: &mut network::ChatRec| {
            c.last_body = None;
            c.unread = 0;
        };
        self.net.update_chat(self.query().await, chat, clear)
    }
    async fn delete_chat(&self, chat: &Jid) -> EngineResult<()> {
        self.net.delete_chat(self.query().await, chat)
    }

    async fn list_contacts(&self) -> EngineResult<Vec<Contact>> {
        let session = self.query().await;
        let me = self.net.online_phone(session)?;
        let elsewhere = self.net.remote_contacts(&me).await;
        self.net.list_contacts(session, &elsewhere)
    }
    async fn get_contact(&self, id: &Jid) -> EngineResult<Contact> {
        let session = self.query().await;
        match self.net.get_contact(session, id, false) {
            Err(EngineError::NotFound(_)) if self.net.exists_anywhere(id).await => {
                self.net.get_contact(session, id, true)
            }
            other => other,
        }
    }
    async fn check_number(&self, number: &str) -> EngineResult<ContactCheck> {
        let mut check = self.net.check_number(self.query().await, number)?;
        if !check.exists {
            check.exists = self.net.exists_anywhere(&check.whatsapp_id).await;
        }
        Ok(check)
    }
    async fn profile_picture(&self, id: &Jid) -> EngineResult<Option<String>> {
        self.net.profile_picture(self.query().await, id)
    }
    async fn block(&self, id: &Jid) -> EngineResult<()> {
        self.net.set_blocked(self.query().await, id, true)
    }
    async fn unblock(&self, id: &Jid) -> EngineResult<()> {
        self.net.set_blocked(self.query().await, id, false)
    }
    async fn blocked(&self) -> EngineResult<Vec<Jid>> {
        self.net.blocked(self.query().await)
    }
    async fn save_contact(&self, id: &Jid, first: &str, last: Option<&str>) -> EngineResult<()> {
        let name = last.map_or_else(|| first.to_string(), |last| format!("{first} {last}"));
        self.net.save_contact(self.query().await, id, Some(name))
    }
    async fn delete_contact(&self, id: &Jid) -> EngineResult<()> {
        self.net.save_contact(self.query().await, id, None)
    }

    async fn list_groups(&self) -> EngineResult<Vec<GroupSummary>> {
        self.net.list_groups(self.query().await)
    }
    async fn create_group(&self, group: NewGroup) -> EngineResult<GroupSummary> {
        self.net.create_group(self.id(), group)
    }
    async fn group_info(&self, group: &Jid) -> EngineResult<GroupInfo> {
        self.net.group_info(self.query().await, group)
    }
    async fn update_participants(
        &self,
        group: &Jid,
        action: ParticipantAction,
        participants: &[Jid],
    ) -> EngineResult<Vec<ParticipantResult>> {
        self.net
            .update_participants(self.query().await, group, action, participants)
    }
    async fn set_group_subject(&self, group: &Jid, subject: &str) -> EngineResult<()> {
        let changes = GroupChanges {
            subject: Some(subject.to_string()),
            ..Default::default()
        };
        self.net.change_group(self.query().await, group, changes)
    }
    async fn set_group_description(&self, group: &Jid, description: &str) -> EngineResult<()> {
        let changes = GroupChanges {
            description: Some(description.to_string()),
            ..Default::default()
        };
        self.net.change_group(self.query().await, group, changes)
    }
    async fn group_invite_code(&self, group: &Jid) -> EngineResult<String> {
        self.net.group_invite_code(self.query().await, group, false)
    }
    async fn revoke_group_invite(&self, group: &Jid) -> EngineResult<String> {
        self.net.group_invite_code(self.query().await, group, true)
    }
    async fn join_group(&self, invite_code: &str) -> EngineResult<Jid> {
        self.net.join_group(self.query().await, invite_code)
    }
    async fn group_join_info(&self, invite_code: &str) -> EngineResult<GroupInfo> {
        self.net.group_join_info(self.query().await, invite_code)
    }
    async fn leave_group(&self, group: &Jid) -> EngineResult<()> {
        self.net.leave_group(self.query().await, group)
    }
    async fn membership_requests(&self, group: &Jid) -> EngineResult<Vec<MembershipRequest>> {
        self.net.membership_requests(self.query().await, group)
    }
    async fn answer_membership_requests(
        &self,
        group: &Jid,
        approve: bool,
        participants: Option<&[Jid]>,
    ) -> EngineResult<Vec<ParticipantResult>> {
        self.net
            .answer_requests(self.query().await, group, approve, participants)
    }
    async fn group_settings(&self, group: &Jid) -> EngineResult<GroupSettings> {
        self.net.group_settings(self.query().await, group)
    }
    async fn update_group_settings(
        &self,
        group: &Jid,
        update: GroupSettingsUpdate,
    ) -> EngineResult<GroupSettings> {
        self.net
            .update_group_settings(self.query().await, group, update)
    }
    async fn group_picture(&self, group: &Jid) -> EngineResult<Option<String>> {
        self.net.group_picture(self.query().await, group, None)
    }
    async fn set_group_picture(&self, group: &Jid, image: MediaSource) -> EngineResult<()> {
        image
            .load()
            .await
            .map_err(|e| EngineError::BadInput(e.to_string()))?;
        self.net
            .group_picture(self.query().await, group, Some(true))
            .map(|_| ())
    }
    async fn remove_group_picture(&self, group: &Jid) -> EngineResult<()> {
        self.net
            .group_picture(self.query().await, group, Some(false))
            .map(|_| ())
    }

    async fn create_channel(&self, name: &str, description: Option<&str>) -> EngineResult<Channel> {
        self.net.create_channel(self.id(), name, description)
    }
    async fn channel_info(&self, channel: &Jid) -> EngineResult<Channel> {
        self.net.channel_info(self.query().await, channel)
    }
    async fn subscribe_channel(&self, invite_code: &str) -> EngineResult<Channel> {
        self.net.subscribe_channel(self.query().await, invite_code)
    }
    async fn unsubscribe_channel(&self, channel: &Jid) -> EngineResult<()> {
        self.net.unsubscribe_channel(self.query().await, channel)
    }
    async fn delete_channel(&self, channel: &Jid) -> EngineResult<()> {
        self.net.delete_channel(self.query().await, channel)
    }
    async fn mute_channel(&self, channel: &Jid, mute: bool) -> EngineResult<()> {
        self.net.mute_channel(self.query().await, channel, mute)
    }
    async fn demote_channel_admin(&self, channel: &Jid, user: &Jid) -> EngineResult<()> {
        self.net
            .demote_channel_admin(self.query().await, channel, user)
    }
    async fn transfer_channel_owner(&self, channel: &Jid, new_owner: &Jid) -> EngineResult<()> {
        self.net
            .transfer_channel_owner(self.query().await, channel, new_owner)
    }

    async fn upsert_label(&self, label: LabelUpsert) -> EngineResult<Label> {
        self.net.upsert_label(self.query().await, label)
    }
    async fn delete_label(&self, id: &str) -> EngineResult<()> {
        self.net.delete_label(self.query().await, id)
    }
    async fn add_chat_label(&self, chat: &Jid, label_id: &str) -> EngineResult<()> {
        self.net.tag_chat(self.query().await, chat, label_id, true)
    }
    async fn remove_chat_label(&self, chat: &Jid, label_id: &str) -> EngineResult<()> {
        self.net.tag_chat(self.query().await, chat, label_id, false)
    }

    async fn post_status(&self, post: StatusPost) -> EngineResult<StatusUpdate> {
        self.net.post_status(self.id(), post).await
    }
    async fn list_statuses(&self) -> EngineResult<Vec<StatusUpdate>> {
        self.net.statuses(self.query().await, None)
    }
    async fn contact_statuses(&self, contact: &Jid) -> EngineResult<Vec<StatusUpdate>> {
        self.net.statuses(self.query().await, Some(contact))
    }
    async fn delete_status(&self, status_id: &str) -> EngineResult<()> {
        self.net.delete_status(self.query().await, status_id)
    }

    async fn reject_call(&self, call_id: &str) -> EngineResult<()> {
        self.net.reject_call(self.query().await, call_id)
    }
    async fn create_call_link(&self, kind: CallKind, start_time_ms: i64) -> EngineResult<String> {
        self.net.create_call_link(self.id(), kind, start_time_ms)
    }

    async fn set_profile_name(&self, name: &str) -> EngineResult<()> {
        let name = name.to_string();
        self.net
            .update_profile(self.query().await, |a, _| a.push_name = Some(name))
    }
    async fn set_profile_status(&self, status: &str) -> EngineResult<()> {
        let status = status.to_string();
        self.net
            .update_profile(self.query().await, |a, _| a.status_text = status)
    }
    async fn set_profile_picture(&self, image: MediaSource) -> EngineResult<()> {
        image
            .load()
            .await
            .map_err(|e| EngineError::BadInput(e.to_string()))?;
        let url = |seq| Some(format!("https://pps.sim.invalid/u/{}/{seq}.jpg", self.id()));
        self.net
            .update_profile(self.query().await, |a, seq| a.picture = url(seq))
    }
    async fn remove_profile_picture(&self) -> EngineResult<()> {
        self.net
            .update_profile(self.query().await, |a, _| a.picture = None)
    }

    async fn catalog(&self) -> EngineResult<Option<Catalog>> {
        self.net.catalog(self.query().await)
    }
    async fn products(&self, page: u32, limit: u32) -> EngineResult<ProductPage> {
        self.net.products(self.query().await, page, limit)
    }
    async fn product(&self, id: &str) -> EngineResult<Option<Product>> {
        self.net.product(self.query().await, id)
    }

    async fn set_presence(&self, available: bool) -> EngineResult<()> {
        self.net.set_presence(self.query().await, available)
    }
    async fn subscribe_presence(&self, chat: &Jid) -> EngineResult<()> {
        self.net.subscribe_presence(self.query().await, chat)
    }
    async fn presence(&self, chat: &Jid) -> EngineResult<Option<Vec<PresenceEntry>>> {
        self.net.presence(self.query().await, chat)
    }
}
