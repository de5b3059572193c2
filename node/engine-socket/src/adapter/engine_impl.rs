//! `impl Engine for SocketEngine`: the lifecycle methods (bodies in `lifecycle.rs`) and the operations,
//! each delegating to its module. Operations not listed keep the trait's `NotSupported` default.

use async_trait::async_trait;

use wagate_proto::Jid;

use super::SocketEngine;
use super::ops::{
    calls, catalog, channels, chats, contacts, groups, labels, messaging, presence, profile, send,
    status,
};
use wagate_engine_api::{
    CallKind, Catalog, Channel, ChatState, ChatSummary, Contact, ContactCheck, Engine,
    EngineResult, GroupInfo, GroupSettings, GroupSettingsUpdate, GroupSummary, Label, LabelUpsert,
    MediaSource, MembershipRequest, NewGroup, OutgoingMessage, ParticipantAction,
    ParticipantResult, PresenceEntry, Product, ProductPage, SentMessage, StatusPost, StatusUpdate,
};

#[async_trait]
impl Engine for SocketEngine {
    // --- lifecycle ---
    async fn start(&self) -> EngineResult<()> {
        self.start_client().await
    }
    async fn stop(&self) -> EngineResult<()> {
        self.stop_client().await
    }
    async fn logout(&self) -> EngineResult<()> {
        self.logout_client().await
    }
    async fn kill(&self) -> EngineResult<()> {
        self.kill_client().await
    }
    async fn request_pairing_code(&self, phone: &str) -> EngineResult<String> {
        self.pairing_code(phone).await
    }

    // --- operations (sockops) ---
    async fn send(&self, msg: OutgoingMessage) -> EngineResult<SentMessage> {
        send::send(&*self.client()?, self.store(), self.media(), msg).await
    }
    async fn react(&self, chat: &Jid, message_id: &str, emoji: &str) -> EngineResult<()> {
        messaging::react(&*self.client()?, self.store(), chat, message_id, emoji).await
    }
    async fn edit(&self, chat: &Jid, message_id: &str, body: &str) -> EngineResult<SentMessage> {
        messaging::edit(&*self.client()?, chat, message_id, body).await
    }
    async fn revoke(&self, chat: &Jid, message_id: &str, for_everyone: bool) -> EngineResult<()> {
        let client = self.client()?;
        messaging::revoke(&client, self.store(), chat, message_id, for_everyone).await
    }
    async fn forward(&self, _from: &Jid, to: &Jid, message_id: &str) -> EngineResult<SentMessage> {
        let client = self.client()?;
        messaging::forward(&client, self.store(), self.media(), to, message_id).await
    }
    async fn pin(&self, chat: &Jid, message_id: &str, duration_s: u32) -> EngineResult<()> {
        messaging::pin(&*self.client()?, self.store(), chat, message_id, duration_s).await
    }
    async fn unpin(&self, chat: &Jid, message_id: &str) -> EngineResult<()> {
        messaging::unpin(&*self.client()?, self.store(), chat, message_id).await
    }
    async fn vote_poll(&self, chat: &Jid, poll_id: &str, options: &[String]) -> EngineResult<()> {
        messaging::vote_poll(&*self.client()?, self.store(), chat, poll_id, options).await
    }
    async fn mark_read(&self, chat: &Jid, message_ids: &[String]) -> EngineResult<()> {
        messaging::mark_read(&*self.client()?, self.store(), chat, message_ids).await
    }
    async fn mark_unread(&self, chat: &Jid) -> EngineResult<()> {
        messaging::mark_unread(&*self.client()?, chat).await
    }
    async fn star(&self, chat: &Jid, message_id: &str, star: bool) -> EngineResult<()> {
        messaging::star(&*self.client()?, self.store(), chat, message_id, star).await
    }
    async fn click_button(
        &self,
        chat: &Jid,
        message_id: &str,
        button_id: &str,
        text: Option<&str>,
    ) -> EngineResult<SentMessage> {
        let client = self.client()?;
        messaging::click_button(&client, self.store(), chat, message_id, button_id, text).await
    }

    async fn list_chats(&self) -> EngineResult<Vec<ChatSummary>> {
        self.client()?;
        chats::list(self.store()).await
    }
    async fn archive_chat(&self, chat: &Jid, archive: bool) -> EngineResult<()> {
        chats::archive(&*self.client()?, chat, archive).await
    }
    async fn pin_chat(&self, chat: &Jid, pin: bool) -> EngineResult<()> {
        chats::pin(&*self.client()?, chat, pin).await
    }
    async fn mute_chat(&self, chat: &Jid, until_ms: Option<i64>) -> EngineResult<()> {
        chats::mute(&*self.client()?, chat, until_ms).await
    }
    async fn set_chat_state(&self, chat: &Jid, state: ChatState) -> EngineResult<()> {
        chats::set_state(&*self.client()?, chat, state).await
    }
    async fn clear_chat(&self, chat: &Jid) -> EngineResult<()> {
        chats::clear(&*self.client()?, chat).await
    }
    async fn delete_chat(&self, chat: &Jid) -> EngineResult<()> {
        chats::delete(&*self.client()?, chat).await
    }

    async fn list_contacts(&self) -> EngineResult<Vec<Contact>> {
        contacts::list(&*self.client()?, self.store()).await
    }
    async fn get_contact(&self, id: &Jid) -> EngineResult<Contact> {
        contacts::get(&*self.client()?, self.store(), id).await
    }
    async fn check_number(&self, number: &str) -> EngineResult<ContactCheck> {
        contacts::check(&*self.client()?, number).await
    }
    async fn profile_picture(&self, id: &Jid) -> EngineResult<Option<String>> {
        contacts::picture(&*self.client()?, id).await
    }
    async fn block(&self, id: &Jid) -> EngineResult<()> {
        contacts::block(&*self.client()?, id, true).await
    }
    async fn unblock(&self, id: &Jid) -> EngineResult<()> {
        contacts::block(&*self.client()?, id, false).await
    }
    async fn blocked(&self) -> EngineResult<Vec<Jid>> {
        contacts::blocked(&*self.client()?).await
    }
    async fn save_contact(&self, id: &Jid, first: &str, last: Option<&str>) -> EngineResult<()> {
        contacts::save(&*self.client()?, id, first, last).await
    }
    async fn delete_contact(&self, id: &Jid) -> EngineResult<()> {
        contacts::delete(&*self.client()?, id).await
    }

    async fn list_groups(&self) -> EngineResult<Vec<GroupSummary>> {
        groups::list(&*self.client()?).await
    }
    async fn create_group(&self, group: NewGroup) -> EngineResult<GroupSummary> {
        groups::create(&*self.client()?, group).await
    }
    async fn group_info(&self, group: &Jid) -> EngineResult<GroupInfo> {
        groups::get(&*self.client()?, group).await
    }
    async fn update_participants(
        &self,
        group: &Jid,
        action: ParticipantAction,
        participants: &[Jid],
    ) -> EngineResult<Vec<ParticipantResult>> {
        groups::update_participants(&*self.client()?, group, action, participants).await
    }
    async fn set_group_subject(&self, group: &Jid, subject: &str) -> EngineResult<()> {
        groups::set_subject(&*self.client()?, group, subject).await
    }
    async fn set_group_description(&self, group: &Jid, description: &str) -> EngineResult<()> {
        groups::set_description(&*self.client()?, group, description).await
    }
    async fn group_invite_code(&self, group: &Jid) -> EngineResult<String> {
        groups::invite_code(&*self.client()?, group, false).await
    }
    async fn revoke_group_invite(&self, group: &Jid) -> EngineResult<String> {
        groups::invite_code(&*self.client()?, group, true).await
    }
    async fn join_group(&self, invite_code: &str) -> EngineResult<Jid> {
        groups::join(&*self.client()?, invite_code).await
    }
    async fn group_join_info(&self, invite_code: &str) -> EngineResult<GroupInfo> {
        groups::join_info(&*self.client()?, invite_code).await
    }
    async fn leave_group(&self, group: &Jid) -> EngineResult<()> {
        groups::leave(&*self.client()?, group).await
    }
    async fn membership_requests(&self, group: &Jid) -> EngineResult<Vec<MembershipRequest>> {
        groups::membership_requests(&*self.client()?, group).await
    }
    async fn answer_membership_requests(
        &self,
        group: &Jid,
        approve: bool,
        participants: Option<&[Jid]>,
    ) -> EngineResult<Vec<ParticipantResult>> {
        groups::answer_membership(&*self.client()?, group, approve, participants).await
    }
    async fn group_settings(&self, group: &Jid) -> EngineResult<GroupSettings> {
        groups::settings(&*self.client()?, group).await
    }
    async fn update_group_settings(
        &self,
        group: &Jid,
        update: GroupSettingsUpdate,
    ) -> EngineResult<GroupSettings> {
        groups::update_settings(&*self.client()?, group, update).await
    }
    async fn group_picture(&self, group: &Jid) -> EngineResult<Option<String>> {
        groups::picture(&*self.client()?, group).await
    }
    async fn set_group_picture(&self, group: &Jid, image: MediaSource) -> EngineResult<()> {
        groups::set_picture(&*self.client()?, self.ctx.media.as_ref(), group, image).await
    }
    async fn remove_group_picture(&self, group: &Jid) -> EngineResult<()> {
        groups::remove_picture(&*self.client()?, group).await
    }

    async fn create_channel(&self, name: &str, description: Option<&str>) -> EngineResult<Channel> {
        channels::create(&*self.client()?, name, description).await
    }
    async fn channel_info(&self, channel: &Jid) -> EngineResult<Channel> {
        channels::info(&*self.client()?, channel).await
    }
    async fn subscribe_channel(&self, invite_code: &str) -> EngineResult<Channel> {
        channels::subscribe(&*self.client()?, invite_code).await
    }
    async fn unsubscribe_channel(&self, channel: &Jid) -> EngineResult<()> {
        channels::unsubscribe(&*self.client()?, channel).await
    }
    async fn delete_channel(&self, channel: &Jid) -> EngineResult<()> {
        channels::delete(&*self.client()?, channel).await
    }
    async fn mute_channel(&self, channel: &Jid, mute: bool) -> EngineResult<()> {
        channels::mute(&*self.client()?, channel, mute).await
    }
    async fn demote_channel_admin(&self, channel: &Jid, user: &Jid) -> EngineResult<()> {
        channels::demote_admin(&*self.client()?, channel, user).await
    }
    async fn transfer_channel_owner(&self, channel: &Jid, new_owner: &Jid) -> EngineResult<()> {
        channels::transfer_owner(&*self.client()?, channel, new_owner).await
    }

    async fn upsert_label(&self, label: LabelUpsert) -> EngineResult<Label> {
        labels::upsert(&*self.client()?, label).await
    }
    async fn delete_label(&self, id: &str) -> EngineResult<()> {
        labels::delete(&*self.client()?, id).await
    }
    async fn add_chat_label(&self, chat: &Jid, label_id: &str) -> EngineResult<()> {
        labels::chat_label(&*self.client()?, chat, label_id, true).await
    }
    async fn remove_chat_label(&self, chat: &Jid, label_id: &str) -> EngineResult<()> {
        labels::chat_label(&*self.client()?, chat, label_id, false).await
    }

    async fn post_status(&self, post: StatusPost) -> EngineResult<StatusUpdate> {
        status::post(&*self.client()?, self.ctx.media.as_ref(), post).await
    }
    async fn list_statuses(&self) -> EngineResult<Vec<StatusUpdate>> {
        self.client()?;
        status::live(self.store(), None).await
    }
    async fn contact_statuses(&self, contact: &Jid) -> EngineResult<Vec<StatusUpdate>> {
        self.client()?;
        status::live(self.store(), Some(contact)).await
    }
    async fn delete_status(&self, status_id: &str) -> EngineResult<()> {
        status::delete(&*self.client()?, self.store(), status_id).await
    }

    async fn reject_call(&self, call_id: &str) -> EngineResult<()> {
        calls::reject(&*self.client()?, &self.calls, call_id).await
    }
    async fn create_call_link(&self, kind: CallKind, _start_time_ms: i64) -> EngineResult<String> {
        calls::create_link(&*self.client()?, kind).await
    }

    async fn set_profile_name(&self, name: &str) -> EngineResult<()> {
        profile::set_name(&*self.client()?, name).await
    }
    async fn set_profile_status(&self, status: &str) -> EngineResult<()> {
        profile::set_status(&*self.client()?, status).await
    }
    async fn set_profile_picture(&self, image: MediaSource) -> EngineResult<()> {
        profile::set_picture(&*self.client()?, self.ctx.media.as_ref(), image).await
    }
    async fn remove_profile_picture(&self) -> EngineResult<()> {
        profile::remove_picture(&*self.client()?).await
    }

    async fn catalog(&self) -> EngineResult<Option<Catalog>> {
        catalog::catalog(&*self.client()?).await
    }
    async fn products(&self, page: u32, limit: u32) -> EngineResult<ProductPage> {
        catalog::products(&*self.client()?, page, limit).await
    }
    async fn product(&self, id: &str) -> EngineResult<Option<Product>> {
        catalog::product(&*self.client()?, id).await
    }

    async fn set_presence(&self, available: bool) -> EngineResult<()> {
        presence::set(&*self.client()?, available).await
    }
    async fn subscribe_presence(&self, chat: &Jid) -> EngineResult<()> {
        presence::subscribe(&*self.client()?, chat).await
    }
    /// Answered from the presence events heard so far (the network has no presence query); the
    /// route answers null once the engine is gone, so a stopped client does not matter here.
    async fn presence(&self, chat: &Jid) -> EngineResult<Option<Vec<PresenceEntry>>> {
        Ok(self.presence.read(chat))
    }
}
