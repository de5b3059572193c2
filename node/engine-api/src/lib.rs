//! The engine boundary, the one crate an engine is written against: the object-safe `Engine` trait,
//! `EngineEvent`, the capability table (`Capabilities`, `Op`), `EngineError`, the entity types the
//! operations speak, the acknowledgement handle events travel with (`ack`), and the `EngineContext` /
//! `EngineFactory` pair the node hands an engine. Engines depend on this crate (plus `wagate-proto` and
//! their own libraries) and never on the node: the compiler keeps them from naming the node's stores,
//! events pipeline or HTTP layer.
//!
//! Writing an engine: implement `Engine` (every method defaults to `NotSupported`, so start with the
//! lifecycle and grow), an `EngineFactory` that builds one per session start, and emit progress through
//! `EngineContext::events`. `conformance` holds the checks every engine must pass.

pub mod ack;
pub mod conformance;
mod context;
mod entities;
mod error;
mod event;
pub mod media;
mod op;
pub mod qr;
pub mod reconnect;
pub mod store;
#[cfg(test)]
mod support_table_tests;
mod types;
mod wire;

pub use ack::{Ack, EventSender, Incoming, event_channel};
pub use context::{EngineContext, EngineFactory, EngineKind};
pub use entities::*;
pub use error::{EngineError, EngineResult};
pub use event::*;
pub use op::{Capabilities, Op};
pub use reconnect::ReconnectPolicy;
pub use types::*;

use async_trait::async_trait;
use wagate_proto::Jid;

macro_rules! unsupported {
    ($op:ident) => {
        Err(EngineError::NotSupported(Op::$op))
    };
}

/// One running session on the network. Every method has a `NotSupported` default, so an engine
/// implements what it can. Lifecycle methods return once the engine acted; progress arrives as events.
#[async_trait]
pub trait Engine: Send + Sync {
    // --- lifecycle ---
    /// Connects: emits `Qr` when unlinked, or `Authenticated` + `Ready` with stored credentials.
    /// `Network` = relaunch failure (retry), `Rejected` = authentication failure (do not retry).
    async fn start(&self) -> EngineResult<()> {
        unsupported!(Start)
    }
    /// Disconnects gracefully, keeping the link.
    async fn stop(&self) -> EngineResult<()> {
        unsupported!(Stop)
    }
    /// Unlinks the device from the account, then disconnects.
    async fn logout(&self) -> EngineResult<()> {
        unsupported!(Logout)
    }
    /// Tears down without talking to the network.
    async fn kill(&self) -> EngineResult<()> {
        unsupported!(Kill)
    }
    /// Issues an 8-character pairing code for `phone` (digits only).
    async fn request_pairing_code(&self, _phone: &str) -> EngineResult<String> {
        unsupported!(RequestPairingCode)
    }

    // --- messaging ---
    async fn send(&self, msg: OutgoingMessage) -> EngineResult<SentMessage> {
        Err(EngineError::NotSupported(send_op(&msg.content)))
    }
    /// An empty `emoji` removes the reaction.
    async fn react(&self, _chat: &Jid, _message_id: &str, _emoji: &str) -> EngineResult<()> {
        unsupported!(React)
    }
    async fn edit(&self, _chat: &Jid, _message_id: &str, _body: &str) -> EngineResult<SentMessage> {
        unsupported!(Edit)
    }
    async fn revoke(
        &self,
        _chat: &Jid,
        _message_id: &str,
        _for_everyone: bool,
    ) -> EngineResult<()> {
        unsupported!(Revoke)
    }
    async fn forward(
        &self,
        _from: &Jid,
        _to: &Jid,
        _message_id: &str,
    ) -> EngineResult<SentMessage> {
        unsupported!(Forward)
    }
    async fn pin(&self, _chat: &Jid, _message_id: &str, _duration_s: u32) -> EngineResult<()> {
        unsupported!(Pin)
    }
    async fn unpin(&self, _chat: &Jid, _message_id: &str) -> EngineResult<()> {
        unsupported!(Unpin)
    }
    /// `options` are option texts; an empty list withdraws the account's vote (WhatsApp's own way:
    /// a vote with nothing selected).
    async fn vote_poll(
        &self,
        _chat: &Jid,
        _poll_id: &str,
        _options: &[String],
    ) -> EngineResult<()> {
        unsupported!(VotePoll)
    }
    /// Empty `message_ids` reads the whole chat.
    async fn mark_read(&self, _chat: &Jid, _message_ids: &[String]) -> EngineResult<()> {
        unsupported!(MarkRead)
    }
    async fn mark_unread(&self, _chat: &Jid) -> EngineResult<()> {
        unsupported!(MarkUnread)
    }
    async fn star(&self, _chat: &Jid, _message_id: &str, _star: bool) -> EngineResult<()> {
        unsupported!(Star)
    }
    /// Answers a business button message with a reply quoting it (`text` is the label shown); the
    /// reply is a message of its own, whose id and time are answered.
    async fn click_button(
        &self,
        _chat: &Jid,
        _message_id: &str,
        _button_id: &str,
        _text: Option<&str>,
    ) -> EngineResult<SentMessage> {
        unsupported!(ClickButton)
    }

    // --- chats ---
    async fn list_chats(&self) -> EngineResult<Vec<ChatSummary>> {
        unsupported!(ListChats)
    }
    async fn archive_chat(&self, _chat: &Jid, _archive: bool) -> EngineResult<()> {
        unsupported!(ArchiveChat)
    }
    async fn pin_chat(&self, _chat: &Jid, _pin: bool) -> EngineResult<()> {
        unsupported!(PinChat)
    }
    /// `Some(0)` mutes indefinitely, `None` unmutes; otherwise epoch milliseconds.
    async fn mute_chat(&self, _chat: &Jid, _until_ms: Option<i64>) -> EngineResult<()> {
        unsupported!(MuteChat)
    }
    async fn set_chat_state(&self, _chat: &Jid, _state: ChatState) -> EngineResult<()> {
        unsupported!(SetChatState)
    }
    async fn clear_chat(&self, _chat: &Jid) -> EngineResult<()> {
        unsupported!(ClearChat)
    }
    async fn delete_chat(&self, _chat: &Jid) -> EngineResult<()> {
        unsupported!(DeleteChat)
    }

    // --- contacts ---
    async fn list_contacts(&self) -> EngineResult<Vec<Contact>> {
        unsupported!(ListContacts)
    }
    async fn get_contact(&self, _id: &Jid) -> EngineResult<Contact> {
        unsupported!(GetContact)
    }
    /// `number` is a bare international number (digits only).
    async fn check_number(&self, _number: &str) -> EngineResult<ContactCheck> {
        unsupported!(CheckNumber)
    }
    async fn profile_picture(&self, _id: &Jid) -> EngineResult<Option<String>> {
        unsupported!(ProfilePicture)
    }
    async fn block(&self, _id: &Jid) -> EngineResult<()> {
        unsupported!(Block)
    }
    async fn unblock(&self, _id: &Jid) -> EngineResult<()> {
        unsupported!(Unblock)
    }
    async fn blocked(&self) -> EngineResult<Vec<Jid>> {
        unsupported!(BlockedList)
    }
    async fn save_contact(&self, _id: &Jid, _first: &str, _last: Option<&str>) -> EngineResult<()> {
        unsupported!(SaveContact)
    }
    async fn delete_contact(&self, _id: &Jid) -> EngineResult<()> {
        unsupported!(DeleteContact)
    }

    // --- groups ---
    async fn list_groups(&self) -> EngineResult<Vec<GroupSummary>> {
        unsupported!(ListGroups)
    }
    async fn create_group(&self, _group: NewGroup) -> EngineResult<GroupSummary> {
        unsupported!(CreateGroup)
    }
    async fn group_info(&self, _group: &Jid) -> EngineResult<GroupInfo> {
        unsupported!(GroupInfo)
    }
    async fn update_participants(
        &self,
        _group: &Jid,
        action: ParticipantAction,
        _participants: &[Jid],
    ) -> EngineResult<Vec<ParticipantResult>> {
        Err(EngineError::NotSupported(participant_op(action)))
    }
    async fn set_group_subject(&self, _group: &Jid, _subject: &str) -> EngineResult<()> {
        unsupported!(SetGroupSubject)
    }
    /// An empty description clears it.
    async fn set_group_description(&self, _group: &Jid, _description: &str) -> EngineResult<()> {
        unsupported!(SetGroupDescription)
    }
    async fn group_invite_code(&self, _group: &Jid) -> EngineResult<String> {
        unsupported!(GroupInviteCode)
    }
    /// Answers the new code.
    async fn revoke_group_invite(&self, _group: &Jid) -> EngineResult<String> {
        unsupported!(RevokeGroupInvite)
    }
    /// Answers the joined group's id.
    async fn join_group(&self, _invite_code: &str) -> EngineResult<Jid> {
        unsupported!(JoinGroup)
    }
    async fn group_join_info(&self, _invite_code: &str) -> EngineResult<GroupInfo> {
        unsupported!(GroupJoinInfo)
    }
    async fn leave_group(&self, _group: &Jid) -> EngineResult<()> {
        unsupported!(LeaveGroup)
    }
    async fn membership_requests(&self, _group: &Jid) -> EngineResult<Vec<MembershipRequest>> {
        unsupported!(MembershipRequests)
    }
    /// `None` acts on every pending request.
    async fn answer_membership_requests(
        &self,
        _group: &Jid,
        approve: bool,
        _participants: Option<&[Jid]>,
    ) -> EngineResult<Vec<ParticipantResult>> {
        let op = if approve {
            Op::ApproveMembership
        } else {
            Op::RejectMembership
        };
        Err(EngineError::NotSupported(op))
    }
    async fn group_settings(&self, _group: &Jid) -> EngineResult<GroupSettings> {
        unsupported!(GroupSettings)
    }
    async fn update_group_settings(
        &self,
        _group: &Jid,
        _update: GroupSettingsUpdate,
    ) -> EngineResult<GroupSettings> {
        unsupported!(UpdateGroupSettings)
    }
    async fn group_picture(&self, _group: &Jid) -> EngineResult<Option<String>> {
        unsupported!(GroupPicture)
    }
    async fn set_group_picture(&self, _group: &Jid, _image: MediaSource) -> EngineResult<()> {
        unsupported!(SetGroupPicture)
    }
    async fn remove_group_picture(&self, _group: &Jid) -> EngineResult<()> {
        unsupported!(RemoveGroupPicture)
    }

    // --- channels ---
    async fn list_channels(&self) -> EngineResult<Vec<Channel>> {
        unsupported!(ListChannels)
    }
    async fn create_channel(
        &self,
        _name: &str,
        _description: Option<&str>,
    ) -> EngineResult<Channel> {
        unsupported!(CreateChannel)
    }
    async fn channel_info(&self, _channel: &Jid) -> EngineResult<Channel> {
        unsupported!(ChannelInfo)
    }
    async fn channel_messages(
        &self,
        _channel: &Jid,
        _limit: u32,
    ) -> EngineResult<Vec<InboundMessage>> {
        unsupported!(ChannelMessages)
    }
    async fn subscribe_channel(&self, _invite_code: &str) -> EngineResult<Channel> {
        unsupported!(SubscribeChannel)
    }
    async fn unsubscribe_channel(&self, _channel: &Jid) -> EngineResult<()> {
        unsupported!(UnsubscribeChannel)
    }
    async fn delete_channel(&self, _channel: &Jid) -> EngineResult<()> {
        unsupported!(DeleteChannel)
    }
    async fn mute_channel(&self, _channel: &Jid, _mute: bool) -> EngineResult<()> {
        unsupported!(MuteChannel)
    }
    async fn demote_channel_admin(&self, _channel: &Jid, _user: &Jid) -> EngineResult<()> {
        unsupported!(DemoteChannelAdmin)
    }
    async fn transfer_channel_owner(&self, _channel: &Jid, _new_owner: &Jid) -> EngineResult<()> {
        unsupported!(TransferChannelOwner)
    }

    // --- labels ---
    async fn list_labels(&self) -> EngineResult<Vec<Label>> {
        unsupported!(ListLabels)
    }
    async fn get_label(&self, _id: &str) -> EngineResult<Label> {
        unsupported!(GetLabel)
    }
    async fn label_chats(&self, _id: &str) -> EngineResult<Vec<ChatSummary>> {
        unsupported!(LabelChats)
    }
    async fn chat_labels(&self, _chat: &Jid) -> EngineResult<Vec<Label>> {
        unsupported!(ChatLabels)
    }
    async fn upsert_label(&self, _label: LabelUpsert) -> EngineResult<Label> {
        unsupported!(UpsertLabel)
    }
    async fn delete_label(&self, _id: &str) -> EngineResult<()> {
        unsupported!(DeleteLabel)
    }
    async fn add_chat_label(&self, _chat: &Jid, _label_id: &str) -> EngineResult<()> {
        unsupported!(AddChatLabel)
    }
    async fn remove_chat_label(&self, _chat: &Jid, _label_id: &str) -> EngineResult<()> {
        unsupported!(RemoveChatLabel)
    }

    // --- status posts ---
    async fn post_status(&self, _post: StatusPost) -> EngineResult<StatusUpdate> {
        unsupported!(PostStatus)
    }
    /// The live status posts the account sees: its own and its contacts'.
    async fn list_statuses(&self) -> EngineResult<Vec<StatusUpdate>> {
        unsupported!(ListStatuses)
    }
    async fn contact_statuses(&self, _contact: &Jid) -> EngineResult<Vec<StatusUpdate>> {
        unsupported!(ContactStatuses)
    }
    async fn delete_status(&self, _status_id: &str) -> EngineResult<()> {
        unsupported!(DeleteStatus)
    }

    // --- calls ---
    async fn reject_call(&self, _call_id: &str) -> EngineResult<()> {
        unsupported!(RejectCall)
    }
    /// `start_time_ms` is epoch milliseconds; answers the link.
    async fn create_call_link(&self, _kind: CallKind, _start_time_ms: i64) -> EngineResult<String> {
        unsupported!(CreateCallLink)
    }

    // --- profile ---
    async fn set_profile_name(&self, _name: &str) -> EngineResult<()> {
        unsupported!(SetProfileName)
    }
    async fn set_profile_status(&self, _status: &str) -> EngineResult<()> {
        unsupported!(SetProfileStatus)
    }
    async fn set_profile_picture(&self, _image: MediaSource) -> EngineResult<()> {
        unsupported!(SetProfilePicture)
    }
    async fn remove_profile_picture(&self) -> EngineResult<()> {
        unsupported!(RemoveProfilePicture)
    }

    // --- catalog ---
    /// `None` when the account has no catalog.
    async fn catalog(&self) -> EngineResult<Option<Catalog>> {
        unsupported!(Catalog)
    }
    /// `page` is 1-based.
    async fn products(&self, _page: u32, _limit: u32) -> EngineResult<ProductPage> {
        unsupported!(ListProducts)
    }
    async fn product(&self, _id: &str) -> EngineResult<Option<Product>> {
        unsupported!(GetProduct)
    }

    // --- presence ---
    async fn set_presence(&self, _available: bool) -> EngineResult<()> {
        unsupported!(SetPresence)
    }
    async fn subscribe_presence(&self, _chat: &Jid) -> EngineResult<()> {
        unsupported!(SubscribePresence)
    }
    async fn presence(&self, _chat: &Jid) -> EngineResult<Option<Vec<PresenceEntry>>> {
        unsupported!(GetPresence)
    }
}

/// The operation a send is refused as.
pub fn send_op(content: &MessageContent) -> Op {
    match content {
        MessageContent::Text { .. } => Op::SendText,
        MessageContent::Media(_) => Op::SendMedia,
        MessageContent::Location(_) => Op::SendLocation,
        MessageContent::Contact(_) => Op::SendContact,
        MessageContent::Poll(_) => Op::SendPoll,
        MessageContent::Product { .. } => Op::SendProduct,
    }
}

/// The operation a roster change is refused as.
pub fn participant_op(action: ParticipantAction) -> Op {
    match action {
        ParticipantAction::Add => Op::AddParticipants,
        ParticipantAction::Remove => Op::RemoveParticipants,
        ParticipantAction::Promote => Op::PromoteParticipants,
        ParticipantAction::Demote => Op::DemoteParticipants,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    struct Nothing;
    impl Engine for Nothing {}

    #[tokio::test]
    async fn defaults_answer_not_supported_with_the_operation_name() {
        let engine: Arc<dyn Engine> = Arc::new(Nothing);
        let err = engine.list_labels().await.err();
        assert_eq!(err, Some(EngineError::NotSupported(Op::ListLabels)));
        let message = err.map(|e| e.to_string()).unwrap_or_default();
        assert_eq!(
            message,
            "Operation not supported by the active engine: getLabels"
        );
    }
}
