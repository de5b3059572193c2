//! The `sim` engine: a thin `Engine` impl over the in-process simulated network (wire-notes §10), written
//! against `wagate-engine-api` alone (the node's control routes drive it through `SimNetwork`).
//! `network.rs` holds the shared state; one file per feature mutates it; `control.rs` plays the phone and
//! the other accounts. Per the socket column, label reads, channel lists and channel messages stay
//! `NotSupported` (the trait defaults).

mod accounts;
mod actions;
mod channels;
mod contacts;
/// The control API's inputs (`InboundSpec`); the control methods themselves are on `SimNetwork`.
pub mod control;
mod extras;
mod group_admin;
mod groups;
/// Traffic kept for a device until it acknowledges it.
pub mod held;
mod lifecycle;
mod messaging;
/// `SimNetwork`, `SimConfig` and `OutboxEntry`.
pub mod network;
/// The seam to the rest of a cluster-wide sim network.
pub mod peers;
/// `RedisPeers`: the cluster-wide sim network over Redis.
pub mod peers_redis;
mod recall;
mod shared;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_chats;
#[cfg(test)]
mod tests_cluster;
#[cfg(test)]
mod tests_held;
#[cfg(test)]
mod tests_media;
#[cfg(test)]
mod tests_revoked;

pub use network::SimNetwork;

use async_trait::async_trait;
use std::sync::Arc;
use wagate_engine_api::*;
use wagate_proto::Jid;

/// Builds sim engines on one shared network. Created at boot when `ENGINE_TYPE=sim`.
pub struct SimFactory {
    net: SimNetwork,
}

impl SimFactory {
    pub fn new(net: SimNetwork) -> Self {
        Self { net }
    }
}

#[async_trait]
impl EngineFactory for SimFactory {
    fn create(&self, ctx: EngineContext) -> Arc<dyn Engine> {
        Arc::new(SimEngine {
            net: self.net.clone(),
            ctx,
            presence_subscribed: std::sync::Mutex::default(),
        })
    }

    fn capabilities(&self) -> &Capabilities {
        &Capabilities::SOCKET
    }

    fn kind(&self) -> EngineKind {
        EngineKind::Sim
    }

    /// The network remembers a device's link across stops (a phone keeps its linked devices): forget it.
    async fn wipe_credentials(&self, session_id: &str) -> EngineResult<()> {
        self.net.forget_link(session_id);
        // A check of the phone through any node answers from the directory as it is after the wipe.
        self.net.flush_peers().await;
        Ok(())
    }
}

/// One session's engine on the sim network.
pub struct SimEngine {
    net: SimNetwork,
    ctx: EngineContext,
    /// Chats this engine run subscribed to the presence of: WhatsApp tells a device of a contact's
    /// presence only after it asked, and a subscription ends with the connection.
    presence_subscribed: std::sync::Mutex<std::collections::HashSet<Jid>>,
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

    /// Answers once the writes of a change reached the peers (cluster mode), so the next request, on any
    /// node, sees it (`shared.rs`).
    async fn shared<T>(&self, result: EngineResult<T>) -> EngineResult<T> {
        if result.is_ok() {
            self.net.flush_peers().await;
        }
        result
    }

    /// `query()` after reading the groups back (cluster mode).
    async fn group_query(&self) -> &str {
        self.net.pull_groups().await;
        self.query().await
    }

    /// `query()` after reading the channels back (cluster mode).
    async fn channel_query(&self) -> &str {
        self.net.pull_channels().await;
        self.query().await
    }

    /// `query()` after reading a message first seen elsewhere back (cluster mode), or, when the network
    /// forgot it, from the session's store (`recall.rs`).
    async fn message_query(&self, message_id: &str) -> &str {
        self.recall(message_id).await;
        self.query().await
    }

    /// The network ids of `ids` as the API names messages (row id or network id, as the socket engine
    /// takes them): a stored row answers with its network id, anything else is passed on as given.
    async fn network_ids(&self, ids: &[String]) -> EngineResult<Vec<String>> {
        let mut out = Vec::with_capacity(ids.len());
        for id in ids {
            let row = self.ctx.store.message(self.id(), id).await?;
            out.push(row.map_or_else(|| id.clone(), |r| r.wa_message_id));
        }
        Ok(out)
    }

    async fn recall(&self, message_id: &str) {
        self.net
            .recall(self.id(), self.ctx.store.as_ref(), message_id)
            .await;
    }
}

#[async_trait]
impl Engine for SimEngine {
    async fn start(&self) -> EngineResult<()> {
        let linked = self.ctx.linked.as_ref();
        self.net.pull_account_of(self.id(), linked).await;
        self.net.pull_revoked(self.id(), linked).await;
        self.net
            .start_device(self.id(), self.ctx.events.clone(), linked)
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
        if let Some(quoted) = &msg.quoted_id {
            self.recall(quoted).await;
        }
        self.net.send(self.id(), self.ctx.media.as_ref(), msg).await
    }
    async fn react(&self, chat: &Jid, message_id: &str, emoji: &str) -> EngineResult<()> {
        self.net.pull_chat(chat).await;
        self.net.react_own(
            self.message_query(message_id).await,
            chat,
            message_id,
            emoji,
        )
    }
    async fn edit(&self, chat: &Jid, message_id: &str, body: &str) -> EngineResult<SentMessage> {
        self.net.pull_chat(chat).await;
        let session = self.message_query(message_id).await;
        let edited = self.net.edit_own(session, chat, message_id, body);
        self.shared(edited).await
    }
    async fn revoke(&self, chat: &Jid, message_id: &str, for_everyone: bool) -> EngineResult<()> {
        self.net.pull_chat(chat).await;
        let session = self.message_query(message_id).await;
        let revoked = self.net.revoke_own(session, chat, message_id, for_everyone);
        self.shared(revoked).await
    }
    async fn forward(&self, _from: &Jid, to: &Jid, message_id: &str) -> EngineResult<SentMessage> {
        self.recall(message_id).await;
        self.net.forward(self.id(), to, message_id).await
    }
    async fn pin(&self, _chat: &Jid, message_id: &str, _duration_s: u32) -> EngineResult<()> {
        self.net
            .set_pinned(self.message_query(message_id).await, message_id, true)
    }
    async fn unpin(&self, _chat: &Jid, message_id: &str) -> EngineResult<()> {
        self.net
            .set_pinned(self.message_query(message_id).await, message_id, false)
    }
    async fn vote_poll(&self, _chat: &Jid, poll_id: &str, options: &[String]) -> EngineResult<()> {
        self.net
            .vote_poll(self.message_query(poll_id).await, poll_id, options)
    }
    async fn mark_read(&self, chat: &Jid, message_ids: &[String]) -> EngineResult<()> {
        let message_ids = self.network_ids(message_ids).await?;
        let session = self.query().await;
        self.net.pull_unread(session, chat, &message_ids).await;
        let read = self.net.mark_read(session, chat, &message_ids);
        self.shared(read).await
    }
    async fn mark_unread(&self, chat: &Jid) -> EngineResult<()> {
        let marked = self.net.mark_unread(self.query().await, chat);
        self.shared(marked).await
    }
    async fn star(&self, _chat: &Jid, message_id: &str, star: bool) -> EngineResult<()> {
        let session = self.message_query(message_id).await;
        let starred = self.net.star(session, message_id, star);
        self.shared(starred).await
    }
    async fn click_button(
        &self,
        chat: &Jid,
        message_id: &str,
        button_id: &str,
        text: Option<&str>,
    ) -> EngineResult<SentMessage> {
        self.net
            .click_button(self.message_query(message_id).await, message_id)?;
        // The network carries the answer as a text reply quoting the button message.
        let reply = OutgoingMessage {
            to: chat.clone(),
            content: MessageContent::Text {
                body: text.unwrap_or(button_id).to_string(),
                link_preview: false,
                custom_preview: None,
            },
            quoted_id: Some(message_id.to_string()),
            mentions: Vec::new(),
        };
        self.net
            .send(self.id(), self.ctx.media.as_ref(), reply)
            .await
    }

    async fn list_chats(&self) -> EngineResult<Vec<ChatSummary>> {
        self.net.list_chats(self.query().await)
    }
    async fn archive_chat(&self, chat: &Jid, archive: bool) -> EngineResult<()> {
        let archived = |c: &mut network::ChatRec| c.archived = archive;
        let changed = self.net.update_chat(self.query().await, chat, archived);
        self.shared(changed).await
    }
    async fn pin_chat(&self, chat: &Jid, pin: bool) -> EngineResult<()> {
        let pinned = |c: &mut network::ChatRec| c.pinned = pin;
        let changed = self.net.update_chat(self.query().await, chat, pinned);
        self.shared(changed).await
    }
    async fn mute_chat(&self, chat: &Jid, until_ms: Option<i64>) -> EngineResult<()> {
        let muted = |c: &mut network::ChatRec| c.muted_until = until_ms;
        let changed = self.net.update_chat(self.query().await, chat, muted);
        self.shared(changed).await
    }
    async fn set_chat_state(&self, chat: &Jid, state: ChatState) -> EngineResult<()> {
        self.net.set_chat_state(self.query().await, chat, state)
    }
    async fn clear_chat(&self, chat: &Jid) -> EngineResult<()> {
        let cleared = self.net.clear_chat(self.query().await, chat);
        self.shared(cleared).await
    }
    async fn delete_chat(&self, chat: &Jid) -> EngineResult<()> {
        let deleted = self.net.delete_chat(self.query().await, chat);
        self.shared(deleted).await
    }

    async fn list_contacts(&self) -> EngineResult<Vec<Contact>> {
        let session = self.query().await;
        let me = self.net.online_phone(session)?;
        let elsewhere = self.net.remote_contacts(&me).await;
        self.net.pull_blocks(std::slice::from_ref(&me)).await;
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
        // In a cluster what this process remembers of the phone can be stale: the directory decides.
        check.exists = self.net.exists_anywhere(&check.whatsapp_id).await;
        Ok(check)
    }
    async fn profile_picture(&self, id: &Jid) -> EngineResult<Option<String>> {
        self.net.profile_picture(self.query().await, id)
    }
    async fn block(&self, id: &Jid) -> EngineResult<()> {
        let blocked = self.net.set_blocked(self.query().await, id, true);
        self.shared(blocked).await
    }
    async fn unblock(&self, id: &Jid) -> EngineResult<()> {
        let unblocked = self.net.set_blocked(self.query().await, id, false);
        self.shared(unblocked).await
    }
    async fn blocked(&self) -> EngineResult<Vec<Jid>> {
        let session = self.query().await;
        let me = self.net.online_phone(session)?;
        self.net.pull_blocks(std::slice::from_ref(&me)).await;
        self.net.blocked(session)
    }
    async fn save_contact(&self, id: &Jid, first: &str, last: Option<&str>) -> EngineResult<()> {
        let name = last.map_or_else(|| first.to_string(), |last| format!("{first} {last}"));
        let saved = self.net.save_contact(self.query().await, id, Some(name));
        self.shared(saved).await
    }
    async fn delete_contact(&self, id: &Jid) -> EngineResult<()> {
        let deleted = self.net.save_contact(self.query().await, id, None);
        self.shared(deleted).await
    }

    async fn list_groups(&self) -> EngineResult<Vec<GroupSummary>> {
        self.net.list_groups(self.group_query().await)
    }
    async fn create_group(&self, group: NewGroup) -> EngineResult<GroupSummary> {
        self.net.pull_accounts(&group.participants).await;
        let created = self.net.create_group(self.id(), group);
        self.shared(created).await
    }
    async fn group_info(&self, group: &Jid) -> EngineResult<GroupInfo> {
        self.net.group_info(self.group_query().await, group)
    }
    async fn update_participants(
        &self,
        group: &Jid,
        action: ParticipantAction,
        participants: &[Jid],
    ) -> EngineResult<Vec<ParticipantResult>> {
        self.net.pull_accounts(participants).await;
        let session = self.group_query().await;
        let results = self
            .net
            .update_participants(session, group, action, participants);
        self.shared(results).await
    }
    async fn set_group_subject(&self, group: &Jid, subject: &str) -> EngineResult<()> {
        let changes = GroupChanges {
            subject: Some(subject.to_string()),
            ..Default::default()
        };
        let changed = self
            .net
            .change_group(self.group_query().await, group, changes);
        self.shared(changed).await
    }
    async fn set_group_description(&self, group: &Jid, description: &str) -> EngineResult<()> {
        let changes = GroupChanges {
            description: Some(description.to_string()),
            ..Default::default()
        };
        let changed = self
            .net
            .change_group(self.group_query().await, group, changes);
        self.shared(changed).await
    }
    async fn group_invite_code(&self, group: &Jid) -> EngineResult<String> {
        self.net
            .group_invite_code(self.group_query().await, group, false)
    }
    async fn revoke_group_invite(&self, group: &Jid) -> EngineResult<String> {
        let code = self
            .net
            .group_invite_code(self.group_query().await, group, true);
        self.shared(code).await
    }
    async fn join_group(&self, invite_code: &str) -> EngineResult<Jid> {
        let joined = self.net.join_group(self.group_query().await, invite_code);
        self.shared(joined).await
    }
    async fn group_join_info(&self, invite_code: &str) -> EngineResult<GroupInfo> {
        self.net
            .group_join_info(self.group_query().await, invite_code)
    }
    async fn leave_group(&self, group: &Jid) -> EngineResult<()> {
        let left = self.net.leave_group(self.group_query().await, group);
        self.shared(left).await
    }
    async fn membership_requests(&self, group: &Jid) -> EngineResult<Vec<MembershipRequest>> {
        self.net
            .membership_requests(self.group_query().await, group)
    }
    async fn answer_membership_requests(
        &self,
        group: &Jid,
        approve: bool,
        participants: Option<&[Jid]>,
    ) -> EngineResult<Vec<ParticipantResult>> {
        let session = self.group_query().await;
        let results = self
            .net
            .answer_requests(session, group, approve, participants);
        self.shared(results).await
    }
    async fn group_settings(&self, group: &Jid) -> EngineResult<GroupSettings> {
        self.net.group_settings(self.group_query().await, group)
    }
    async fn update_group_settings(
        &self,
        group: &Jid,
        update: GroupSettingsUpdate,
    ) -> EngineResult<GroupSettings> {
        let session = self.group_query().await;
        let settings = self.net.update_group_settings(session, group, update);
        self.shared(settings).await
    }
    async fn group_picture(&self, group: &Jid) -> EngineResult<Option<String>> {
        self.net
            .group_picture(self.group_query().await, group, None)
    }
    async fn set_group_picture(&self, group: &Jid, image: MediaSource) -> EngineResult<()> {
        // Only checked: the sim shows a picture URL, never the image.
        image.size(self.ctx.media.as_ref()).await?;
        let set = self
            .net
            .group_picture(self.group_query().await, group, Some(true))
            .map(|_| ());
        self.shared(set).await
    }
    async fn remove_group_picture(&self, group: &Jid) -> EngineResult<()> {
        let removed = self
            .net
            .group_picture(self.group_query().await, group, Some(false))
            .map(|_| ());
        self.shared(removed).await
    }

    async fn create_channel(&self, name: &str, description: Option<&str>) -> EngineResult<Channel> {
        let created = self.net.create_channel(self.id(), name, description);
        self.shared(created).await
    }
    async fn channel_info(&self, channel: &Jid) -> EngineResult<Channel> {
        self.net.channel_info(self.channel_query().await, channel)
    }
    async fn subscribe_channel(&self, invite_code: &str) -> EngineResult<Channel> {
        let session = self.channel_query().await;
        let subscribed = self.net.subscribe_channel(session, invite_code);
        self.shared(subscribed).await
    }
    async fn unsubscribe_channel(&self, channel: &Jid) -> EngineResult<()> {
        let session = self.channel_query().await;
        let unsubscribed = self.net.unsubscribe_channel(session, channel);
        self.shared(unsubscribed).await
    }
    async fn delete_channel(&self, channel: &Jid) -> EngineResult<()> {
        let deleted = self.net.delete_channel(self.channel_query().await, channel);
        self.shared(deleted).await
    }
    async fn mute_channel(&self, channel: &Jid, mute: bool) -> EngineResult<()> {
        let muted = self
            .net
            .mute_channel(self.channel_query().await, channel, mute);
        self.shared(muted).await
    }
    async fn demote_channel_admin(&self, channel: &Jid, user: &Jid) -> EngineResult<()> {
        let session = self.channel_query().await;
        let demoted = self.net.demote_channel_admin(session, channel, user);
        self.shared(demoted).await
    }
    async fn transfer_channel_owner(&self, channel: &Jid, new_owner: &Jid) -> EngineResult<()> {
        self.net
            .pull_accounts(std::slice::from_ref(new_owner))
            .await;
        let session = self.channel_query().await;
        let moved = self.net.transfer_channel_owner(session, channel, new_owner);
        self.shared(moved).await
    }

    async fn upsert_label(&self, label: LabelUpsert) -> EngineResult<Label> {
        let upserted = self.net.upsert_label(self.query().await, label);
        self.shared(upserted).await
    }
    async fn delete_label(&self, id: &str) -> EngineResult<()> {
        let deleted = self.net.delete_label(self.query().await, id);
        self.shared(deleted).await
    }
    async fn add_chat_label(&self, chat: &Jid, label_id: &str) -> EngineResult<()> {
        let tagged = self.net.tag_chat(self.query().await, chat, label_id, true);
        self.shared(tagged).await
    }
    async fn remove_chat_label(&self, chat: &Jid, label_id: &str) -> EngineResult<()> {
        let untagged = self.net.tag_chat(self.query().await, chat, label_id, false);
        self.shared(untagged).await
    }

    async fn post_status(&self, post: StatusPost) -> EngineResult<StatusUpdate> {
        let posted = self
            .net
            .post_status(self.id(), self.ctx.media.as_ref(), post)
            .await;
        self.shared(posted).await
    }
    async fn list_statuses(&self) -> EngineResult<Vec<StatusUpdate>> {
        self.net.pull_statuses().await;
        self.net.statuses(self.query().await, None)
    }
    async fn contact_statuses(&self, contact: &Jid) -> EngineResult<Vec<StatusUpdate>> {
        self.net.pull_statuses().await;
        self.net.statuses(self.query().await, Some(contact))
    }
    async fn delete_status(&self, status_id: &str) -> EngineResult<()> {
        self.net.pull_statuses().await;
        let deleted = self.net.delete_status(self.query().await, status_id);
        self.shared(deleted).await
    }

    async fn reject_call(&self, call_id: &str) -> EngineResult<()> {
        self.net.pull_call(call_id).await;
        let rejected = self.net.reject_call(self.query().await, call_id);
        self.shared(rejected).await
    }
    async fn create_call_link(&self, kind: CallKind, start_time_ms: i64) -> EngineResult<String> {
        self.net.create_call_link(self.id(), kind, start_time_ms)
    }

    async fn set_profile_name(&self, name: &str) -> EngineResult<()> {
        let name = name.to_string();
        let set = |a: &mut network::Account, _| a.push_name = Some(name);
        let changed = self.net.update_profile(self.query().await, set);
        self.shared(changed).await
    }
    async fn set_profile_status(&self, status: &str) -> EngineResult<()> {
        let status = status.to_string();
        let set = |a: &mut network::Account, _| a.status_text = status;
        let changed = self.net.update_profile(self.query().await, set);
        self.shared(changed).await
    }
    async fn set_profile_picture(&self, image: MediaSource) -> EngineResult<()> {
        // Only checked: the sim shows a picture URL, never the image.
        image.size(self.ctx.media.as_ref()).await?;
        let url = |seq| Some(format!("https://pps.sim.invalid/u/{}/{seq}.jpg", self.id()));
        let set = |a: &mut network::Account, seq| a.picture = url(seq);
        let changed = self.net.update_profile(self.query().await, set);
        self.shared(changed).await
    }
    async fn remove_profile_picture(&self) -> EngineResult<()> {
        let set = |a: &mut network::Account, _| a.picture = None;
        let changed = self.net.update_profile(self.query().await, set);
        self.shared(changed).await
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
        let set = self.net.set_presence(self.query().await, available);
        self.shared(set).await
    }
    async fn subscribe_presence(&self, chat: &Jid) -> EngineResult<()> {
        let target = std::slice::from_ref(chat);
        self.net.pull_accounts(target).await;
        self.net.pull_presence(target).await;
        let subscribed = self.net.subscribe_presence(self.query().await, chat);
        if subscribed.is_ok()
            && let Ok(mut chats) = self.presence_subscribed.lock()
        {
            chats.insert(chat.clone());
        }
        self.shared(subscribed).await
    }
    async fn presence(&self, chat: &Jid) -> EngineResult<Option<Vec<PresenceEntry>>> {
        // A chat's presence is known only once subscribed to (null: never asked), a group's as a contact's.
        let asked = self
            .presence_subscribed
            .lock()
            .is_ok_and(|chats| chats.contains(chat));
        if !asked {
            self.net.presence(self.query().await, chat)?;
            return Ok(None);
        }
        self.net.pull_chat(chat).await;
        let mut phones = self.net.group_members(chat);
        if phones.is_empty() {
            phones.push(chat.clone());
        }
        self.net.pull_accounts(&phones).await;
        self.net.pull_presence(&phones).await;
        self.net.presence(self.query().await, chat)
    }
}
