//! `impl Engine for BrowserEngine`: each operation is one facade call plus the mapping of its answer
//! (`page.rs`). Operations the browser column refuses keep the trait's `NotSupported` default (501): group
//! create, channel owner transfer and admin demote, label edits, subscribe by invite, catalog and
//! send-product, call rejection, and media to a channel. Error mapping: reload -> retryable 409, dead page
//! -> 503 on the bounded routes and 500 on the unbounded ones (group/channel create, media sends, status
//! posts, call-link create, which also run without the 30-second call budget), launch failures ->
//! `Network` (the supervisor retries with backoff).

use async_trait::async_trait;
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use serde_json::{Value, json};
use wagate_engine_api::{
    CallKind, Channel, ChatState, ChatSummary, Contact, ContactCheck, Engine, EngineError,
    EngineResult, GroupInfo, GroupSettings, GroupSettingsUpdate, GroupSummary, InboundMessage,
    Label, MediaKind, MediaSource, MembershipRequest, MessageContent, MessageType, Op,
    OutgoingMessage, ParticipantAction, ParticipantResult, PresenceEntry, SentMessage,
    StatusContent, StatusPost, StatusUpdate, participant_op, send_op,
};
use wagate_proto::Jid;
use wagate_proto::jid::ChatKind;

use super::BrowserEngine;
use super::page::{self, PageContact, Sent, decode};
use crate::BrowserError;

/// A lifecycle failure: a browser that cannot launch is a relaunch failure (retried with backoff).
pub(super) fn lifecycle_error(err: BrowserError) -> EngineError {
    match err {
        BrowserError::Launch(m) | BrowserError::Protocol(m) => EngineError::Network(m),
        other => call_error(other, Op::Start),
    }
}

/// Maps a call failure; `op` names the operation for the facade's own "unsupported".
fn call_error(err: BrowserError, op: Op) -> EngineError {
    let message = err.to_string();
    match err {
        BrowserError::NotReady => EngineError::NotReady,
        BrowserError::Reloading => EngineError::Busy(message),
        BrowserError::PageDead | BrowserError::Launch(_) | BrowserError::Protocol(_) => {
            EngineError::Network(message)
        }
        BrowserError::Timeout => EngineError::Timeout,
        BrowserError::Page { code, message } => match code.as_str() {
            "not_found" => EngineError::NotFound(message),
            "bad_input" => EngineError::BadInput(message),
            "rejected" => EngineError::Rejected(message),
            "unsupported" => EngineError::NotSupported(op),
            _ => EngineError::Network(message),
        },
    }
}

impl BrowserEngine {
    async fn call(&self, op: Op, name: &str, args: &[Value]) -> EngineResult<Value> {
        self.session()
            .call(name, args)
            .await
            .map_err(|e| call_error(e, op))
    }

    /// A call the spec leaves unbounded: no 30-second budget, and a dead page (or a call the protocol
    /// gave up on) is a 500, never a 503, so a client does not replay a write that may have landed.
    async fn call_unbounded(&self, op: Op, name: &str, args: &[Value]) -> EngineResult<Value> {
        self.session()
            .call_unbounded(name, args)
            .await
            .map_err(|e| match e {
                BrowserError::PageDead | BrowserError::Timeout | BrowserError::Protocol(_) => {
                    EngineError::Internal(e.to_string())
                }
                other => call_error(other, op),
            })
    }

    /// A call whose answer is `true` (the facade's "done").
    async fn act(&self, op: Op, name: &str, args: &[Value]) -> EngineResult<()> {
        self.call(op, name, args).await.map(|_| ())
    }

    async fn call_sent(&self, op: Op, name: &str, args: &[Value]) -> EngineResult<SentMessage> {
        sent(self.call(op, name, args).await?)
    }

    /// The linked account's id (status posts are its own).
    fn me(&self) -> EngineResult<Jid> {
        self.account
            .lock()
            .as_ref()
            .map(|a| a.phone.clone())
            .ok_or(EngineError::NotReady)
    }

    /// Media bytes as the data URL the page takes.
    async fn data_url(&self, source: &MediaSource, mimetype: &str) -> EngineResult<String> {
        let bytes = source
            .load(self.ctx.media.as_ref())
            .await
            .map_err(|e| EngineError::BadInput(format!("media not readable: {e}")))?;
        Ok(format!("data:{mimetype};base64,{}", STANDARD.encode(bytes)))
    }

    /// A picture (profile or group) as a data URL, its type read from the bytes: WhatsApp takes JPEG and PNG.
    async fn picture_url(&self, source: &MediaSource) -> EngineResult<String> {
        let bytes = source
            .load(self.ctx.media.as_ref())
            .await
            .map_err(|e| EngineError::BadInput(format!("image not readable: {e}")))?;
        let mimetype = if bytes.starts_with(&[0x89, b'P', b'N', b'G']) {
            "image/png"
        } else if bytes.starts_with(&[0xFF, 0xD8, 0xFF]) {
            "image/jpeg"
        } else {
            return Err(EngineError::BadInput(
                "the picture must be a JPEG or PNG image".into(),
            ));
        };
        Ok(format!("data:{mimetype};base64,{}", STANDARD.encode(bytes)))
    }
}

fn sent(value: Value) -> EngineResult<SentMessage> {
    let sent: Sent = decode(value)?;
    Ok(SentMessage {
        id: sent.id,
        timestamp: sent.timestamp,
    })
}

fn ids(list: &[Jid]) -> Vec<String> {
    list.iter().map(ToString::to_string).collect()
}

fn media_type(kind: MediaKind) -> &'static str {
    match kind {
        MediaKind::Image => "image",
        MediaKind::Video => "video",
        MediaKind::Audio | MediaKind::Voice => "audio",
        MediaKind::Document => "document",
        MediaKind::Sticker => "sticker",
    }
}

#[async_trait]
impl Engine for BrowserEngine {
    async fn start(&self) -> EngineResult<()> {
        self.start_browser().await
    }
    async fn stop(&self) -> EngineResult<()> {
        self.stop_browser(true).await
    }
    async fn kill(&self) -> EngineResult<()> {
        self.stop_browser(false).await
    }
    async fn logout(&self) -> EngineResult<()> {
        let unlinked = self.session().logout().await;
        // The profile is the credential: once unlinked (or abandoned) it is worthless.
        if let Err(err) = crate::profile::delete(self.session().profile_dir()) {
            tracing::warn!(error = %err, "browser profile not deleted");
        }
        match unlinked {
            Ok(()) | Err(BrowserError::NotReady) => Ok(()),
            Err(err) => Err(lifecycle_error(err)),
        }
    }
    async fn request_pairing_code(&self, phone: &str) -> EngineResult<String> {
        let code = self
            .call(Op::RequestPairingCode, "pairingCode", &[json!(phone)])
            .await?;
        let code: String = decode(code)?;
        let _ = self
            .ctx
            .events
            .send(wagate_engine_api::EngineEvent::PairingCode { code: code.clone() });
        Ok(code)
    }

    async fn send(&self, msg: OutgoingMessage) -> EngineResult<SentMessage> {
        let to = json!(msg.to.to_string());
        let op = send_op(&msg.content);
        match msg.content {
            MessageContent::Text {
                body, link_preview, ..
            } => {
                let mentions = ids(&msg.mentions);
                let opts = json!({"linkPreview": link_preview, "quotedId": msg.quoted_id, "mentions": mentions});
                self.call_sent(op, "sendText", &[to, json!(body), opts])
                    .await
            }
            MessageContent::Media(media) => {
                // The browser column: media to a channel is 501 (text still works).
                if msg.to.kind() == ChatKind::Channel {
                    return Err(EngineError::NotSupported(op));
                }
                let url = self.data_url(&media.source, &media.mimetype).await?;
                let opts = json!({
                    "type": media_type(media.kind),
                    "filename": media.filename,
                    "caption": media.caption,
                    "mimetype": media.mimetype,
                    "isPtt": media.kind == MediaKind::Voice,
                    "quotedId": msg.quoted_id,
                });
                // The media send path is unbounded (an upload may take long; never a 503).
                sent(
                    self.call_unbounded(op, "sendFile", &[to, json!(url), opts])
                        .await?,
                )
            }
            MessageContent::Location(loc) => {
                let args = [
                    to,
                    json!(loc.latitude),
                    json!(loc.longitude),
                    json!(loc.description),
                ];
                self.call_sent(op, "sendLocation", &args).await
            }
            MessageContent::Poll(poll) => {
                let selectable = if poll.allow_multiple {
                    poll.options.len()
                } else {
                    1
                };
                let args = [to, json!(poll.name), json!(poll.options), json!(selectable)];
                self.call_sent(op, "sendPoll", &args).await
            }
            MessageContent::Contact(card) => {
                let id = format!("{}@c.us", card.number.trim_start_matches('+'));
                self.call_sent(op, "sendContact", &[to, json!(id), json!(card.name)])
                    .await
            }
            MessageContent::Product { .. } => Err(EngineError::NotSupported(op)),
        }
    }
    async fn react(&self, _chat: &Jid, message_id: &str, emoji: &str) -> EngineResult<()> {
        self.act(Op::React, "react", &[json!(message_id), json!(emoji)])
            .await
    }
    async fn edit(&self, _chat: &Jid, message_id: &str, body: &str) -> EngineResult<SentMessage> {
        self.call_sent(Op::Edit, "edit", &[json!(message_id), json!(body)])
            .await
    }
    async fn revoke(&self, chat: &Jid, message_id: &str, for_everyone: bool) -> EngineResult<()> {
        let args = [
            json!(chat.to_string()),
            json!(message_id),
            json!(for_everyone),
        ];
        self.act(Op::Revoke, "revoke", &args).await
    }
    async fn forward(&self, _from: &Jid, to: &Jid, message_id: &str) -> EngineResult<SentMessage> {
        let args = [json!(to.to_string()), json!(message_id)];
        self.call_sent(Op::Forward, "forward", &args).await
    }
    async fn pin(&self, _chat: &Jid, message_id: &str, duration_s: u32) -> EngineResult<()> {
        self.act(Op::Pin, "pin", &[json!(message_id), json!(duration_s)])
            .await
    }
    async fn unpin(&self, _chat: &Jid, message_id: &str) -> EngineResult<()> {
        self.act(Op::Unpin, "unpin", &[json!(message_id)]).await
    }
    async fn vote_poll(&self, _chat: &Jid, poll_id: &str, options: &[String]) -> EngineResult<()> {
        self.act(Op::VotePoll, "votePoll", &[json!(poll_id), json!(options)])
            .await
    }
    /// Chat-level receipt: the browser engine ignores `message_ids` (the spec's table).
    async fn mark_read(&self, chat: &Jid, _message_ids: &[String]) -> EngineResult<()> {
        self.act(Op::MarkRead, "markRead", &[json!(chat.to_string())])
            .await
    }
    async fn mark_unread(&self, chat: &Jid) -> EngineResult<()> {
        self.act(Op::MarkUnread, "markUnread", &[json!(chat.to_string())])
            .await
    }
    async fn star(&self, _chat: &Jid, message_id: &str, star: bool) -> EngineResult<()> {
        self.act(Op::Star, "star", &[json!(message_id), json!(star)])
            .await
    }
    // --- chats ---
    async fn list_chats(&self) -> EngineResult<Vec<ChatSummary>> {
        page::chats(self.call(Op::ListChats, "chats", &[]).await?)
    }
    async fn archive_chat(&self, chat: &Jid, archive: bool) -> EngineResult<()> {
        let args = [json!(chat.to_string()), json!(archive)];
        self.act(Op::ArchiveChat, "archiveChat", &args).await
    }
    async fn pin_chat(&self, chat: &Jid, pin: bool) -> EngineResult<()> {
        let args = [json!(chat.to_string()), json!(pin)];
        self.act(Op::PinChat, "pinChat", &args).await
    }
    async fn mute_chat(&self, chat: &Jid, until_ms: Option<i64>) -> EngineResult<()> {
        let args = [json!(chat.to_string()), json!(until_ms)];
        self.act(Op::MuteChat, "muteChat", &args).await
    }
    async fn set_chat_state(&self, chat: &Jid, state: ChatState) -> EngineResult<()> {
        let state = match state {
            ChatState::Typing => "typing",
            ChatState::Recording => "recording",
            ChatState::Paused => "paused",
        };
        let args = [json!(chat.to_string()), json!(state)];
        self.act(Op::SetChatState, "chatState", &args).await
    }
    async fn clear_chat(&self, chat: &Jid) -> EngineResult<()> {
        self.act(Op::ClearChat, "clearChat", &[json!(chat.to_string())])
            .await
    }
    async fn delete_chat(&self, chat: &Jid) -> EngineResult<()> {
        self.act(Op::DeleteChat, "deleteChat", &[json!(chat.to_string())])
            .await
    }

    // --- contacts ---
    async fn list_contacts(&self) -> EngineResult<Vec<Contact>> {
        let contacts: Vec<PageContact> =
            decode(self.call(Op::ListContacts, "contacts", &[]).await?)?;
        Ok(contacts
            .into_iter()
            .filter_map(PageContact::into_contact)
            .collect())
    }
    async fn get_contact(&self, id: &Jid) -> EngineResult<Contact> {
        let contact: PageContact = decode(
            self.call(Op::GetContact, "contact", &[json!(id.to_string())])
                .await?,
        )?;
        contact
            .into_contact()
            .ok_or_else(|| EngineError::NotFound("Contact not found".into()))
    }
    async fn check_number(&self, number: &str) -> EngineResult<ContactCheck> {
        let answer = self
            .call(Op::CheckNumber, "checkNumber", &[json!(number)])
            .await?;
        let exists = answer["exists"].as_bool().unwrap_or(false);
        let whatsapp_id = answer["id"]
            .as_str()
            .and_then(|id| Jid::parse(id).ok())
            .or_else(|| Jid::from_phone(number).ok())
            .ok_or_else(|| EngineError::BadInput(format!("'{number}' is not a phone number")))?;
        Ok(ContactCheck {
            number: number.to_string(),
            exists,
            whatsapp_id,
        })
    }
    async fn profile_picture(&self, id: &Jid) -> EngineResult<Option<String>> {
        let url = self
            .call(
                Op::ProfilePicture,
                "profilePicture",
                &[json!(id.to_string())],
            )
            .await?;
        decode(url)
    }
    async fn block(&self, id: &Jid) -> EngineResult<()> {
        self.act(Op::Block, "block", &[json!(id.to_string())]).await
    }
    async fn unblock(&self, id: &Jid) -> EngineResult<()> {
        self.act(Op::Unblock, "unblock", &[json!(id.to_string())])
            .await
    }
    async fn blocked(&self) -> EngineResult<Vec<Jid>> {
        page::jids(self.call(Op::BlockedList, "blocked", &[]).await?)
    }
    async fn save_contact(&self, id: &Jid, first: &str, last: Option<&str>) -> EngineResult<()> {
        let args = [json!(id.to_string()), json!(first), json!(last)];
        self.act(Op::SaveContact, "saveContact", &args).await
    }
    async fn delete_contact(&self, id: &Jid) -> EngineResult<()> {
        self.act(Op::DeleteContact, "deleteContact", &[json!(id.to_string())])
            .await
    }

    // --- groups (create stays 501 on this engine) ---
    async fn list_groups(&self) -> EngineResult<Vec<GroupSummary>> {
        page::groups(self.call(Op::ListGroups, "groups", &[]).await?)
    }
    async fn group_info(&self, group: &Jid) -> EngineResult<GroupInfo> {
        page::group_info(
            self.call(Op::GroupInfo, "group", &[json!(group.to_string())])
                .await?,
        )
    }
    async fn update_participants(
        &self,
        group: &Jid,
        action: ParticipantAction,
        participants: &[Jid],
    ) -> EngineResult<Vec<ParticipantResult>> {
        let name = match action {
            ParticipantAction::Add => "add",
            ParticipantAction::Remove => "remove",
            ParticipantAction::Promote => "promote",
            ParticipantAction::Demote => "demote",
        };
        let args = [
            json!(group.to_string()),
            json!(name),
            json!(ids(participants)),
        ];
        page::participant_results(
            self.call(participant_op(action), "participants", &args)
                .await?,
        )
    }
    async fn set_group_subject(&self, group: &Jid, subject: &str) -> EngineResult<()> {
        let args = [json!(group.to_string()), json!(subject)];
        self.act(Op::SetGroupSubject, "groupSubject", &args).await
    }
    async fn set_group_description(&self, group: &Jid, description: &str) -> EngineResult<()> {
        let args = [json!(group.to_string()), json!(description)];
        self.act(Op::SetGroupDescription, "groupDescription", &args)
            .await
    }
    async fn group_invite_code(&self, group: &Jid) -> EngineResult<String> {
        let code = self
            .call(
                Op::GroupInviteCode,
                "inviteCode",
                &[json!(group.to_string())],
            )
            .await?;
        decode(code)
    }
    async fn revoke_group_invite(&self, group: &Jid) -> EngineResult<String> {
        let code = self
            .call(
                Op::RevokeGroupInvite,
                "revokeInvite",
                &[json!(group.to_string())],
            )
            .await?;
        decode(code)
    }
    async fn join_group(&self, invite_code: &str) -> EngineResult<Jid> {
        let id: String = decode(
            self.call(Op::JoinGroup, "join", &[json!(invite_code)])
                .await?,
        )?;
        Jid::parse(&id).map_err(|e| EngineError::Network(format!("unexpected bridge answer: {e}")))
    }
    async fn group_join_info(&self, invite_code: &str) -> EngineResult<GroupInfo> {
        page::group_info(
            self.call(Op::GroupJoinInfo, "joinInfo", &[json!(invite_code)])
                .await?,
        )
    }
    async fn leave_group(&self, group: &Jid) -> EngineResult<()> {
        self.act(Op::LeaveGroup, "leave", &[json!(group.to_string())])
            .await
    }
    async fn membership_requests(&self, group: &Jid) -> EngineResult<Vec<MembershipRequest>> {
        page::membership_requests(
            self.call(
                Op::MembershipRequests,
                "membershipRequests",
                &[json!(group.to_string())],
            )
            .await?,
        )
    }
    async fn answer_membership_requests(
        &self,
        group: &Jid,
        approve: bool,
        participants: Option<&[Jid]>,
    ) -> EngineResult<Vec<ParticipantResult>> {
        let op = if approve {
            Op::ApproveMembership
        } else {
            Op::RejectMembership
        };
        let args = [
            json!(group.to_string()),
            json!(approve),
            json!(participants.map(ids)),
        ];
        page::participant_results(self.call(op, "answerMembership", &args).await?)
    }
    async fn group_settings(&self, group: &Jid) -> EngineResult<GroupSettings> {
        page::group_settings(
            self.call(
                Op::GroupSettings,
                "groupSettings",
                &[json!(group.to_string())],
            )
            .await?,
        )
    }
    async fn update_group_settings(
        &self,
        group: &Jid,
        update: GroupSettingsUpdate,
    ) -> EngineResult<GroupSettings> {
        let changes = json!({
            "announce": update.announce,
            "locked": update.locked,
            "ephemeralSeconds": update.ephemeral_seconds,
            "adminAddOnly": update.admin_add_only,
        });
        let args = [json!(group.to_string()), changes];
        page::group_settings(
            self.call(Op::UpdateGroupSettings, "updateGroupSettings", &args)
                .await?,
        )
    }
    async fn group_picture(&self, group: &Jid) -> EngineResult<Option<String>> {
        let url = self
            .call(
                Op::GroupPicture,
                "groupPicture",
                &[json!(group.to_string())],
            )
            .await?;
        decode(url)
    }
    async fn set_group_picture(&self, group: &Jid, image: MediaSource) -> EngineResult<()> {
        let args = [
            json!(group.to_string()),
            json!(self.picture_url(&image).await?),
        ];
        self.act(Op::SetGroupPicture, "setGroupPicture", &args)
            .await
    }
    async fn remove_group_picture(&self, group: &Jid) -> EngineResult<()> {
        let args = [json!(group.to_string())];
        self.act(Op::RemoveGroupPicture, "removeGroupPicture", &args)
            .await
    }

    // --- channels (owner transfer, admin demote and subscribe by invite stay 501) ---
    async fn list_channels(&self) -> EngineResult<Vec<Channel>> {
        page::channels(self.call(Op::ListChannels, "channels", &[]).await?)
    }
    async fn create_channel(&self, name: &str, description: Option<&str>) -> EngineResult<Channel> {
        let args = [json!(name), json!(description)];
        page::channel(
            self.call_unbounded(Op::CreateChannel, "createChannel", &args)
                .await?,
        )
    }
    async fn channel_info(&self, channel: &Jid) -> EngineResult<Channel> {
        page::channel(
            self.call(Op::ChannelInfo, "channel", &[json!(channel.to_string())])
                .await?,
        )
    }
    async fn channel_messages(
        &self,
        channel: &Jid,
        limit: u32,
    ) -> EngineResult<Vec<InboundMessage>> {
        let args = [json!(channel.to_string()), json!(limit)];
        let posts = self
            .call(Op::ChannelMessages, "channelMessages", &args)
            .await?;
        page::channel_messages(channel, posts)
    }
    async fn unsubscribe_channel(&self, channel: &Jid) -> EngineResult<()> {
        let args = [json!(channel.to_string())];
        self.act(Op::UnsubscribeChannel, "unfollowChannel", &args)
            .await
    }
    async fn delete_channel(&self, channel: &Jid) -> EngineResult<()> {
        let args = [json!(channel.to_string())];
        self.act(Op::DeleteChannel, "deleteChannel", &args).await
    }
    async fn mute_channel(&self, channel: &Jid, mute: bool) -> EngineResult<()> {
        let args = [json!(channel.to_string()), json!(mute)];
        self.act(Op::MuteChannel, "muteChannel", &args).await
    }

    // --- labels: reads only (edits stay 501) ---
    async fn list_labels(&self) -> EngineResult<Vec<Label>> {
        page::labels(self.call(Op::ListLabels, "labels", &[]).await?)
    }
    async fn get_label(&self, id: &str) -> EngineResult<Label> {
        page::one_label(self.call(Op::GetLabel, "label", &[json!(id)]).await?)
    }
    async fn label_chats(&self, id: &str) -> EngineResult<Vec<ChatSummary>> {
        page::chats(
            self.call(Op::LabelChats, "labelChats", &[json!(id)])
                .await?,
        )
    }
    async fn chat_labels(&self, chat: &Jid) -> EngineResult<Vec<Label>> {
        page::labels(
            self.call(Op::ChatLabels, "chatLabels", &[json!(chat.to_string())])
                .await?,
        )
    }

    // --- status posts: `recipients` ignored (the account's status-privacy audience sees them) ---
    async fn post_status(&self, post: StatusPost) -> EngineResult<StatusUpdate> {
        let me = self.me()?;
        let (kind, answer, caption) = match post.content {
            StatusContent::Text {
                text,
                background_color,
                font,
            } => {
                let opts = json!({"backgroundColor": background_color, "font": font});
                let args = [json!("text"), json!(text), opts];
                let answer = self
                    .call_unbounded(Op::PostStatus, "postStatus", &args)
                    .await?;
                (MessageType::Text, answer, Some(text))
            }
            StatusContent::Media {
                kind,
                source,
                mimetype,
                caption,
            } => {
                let page_kind = match kind {
                    MessageType::Image => "image",
                    MessageType::Video => "video",
                    MessageType::Audio | MessageType::Voice => "audio",
                    other => {
                        return Err(EngineError::BadInput(format!(
                            "a status post cannot be of type {}",
                            other.as_str()
                        )));
                    }
                };
                let url = self.data_url(&source, &mimetype).await?;
                let args = [json!(page_kind), json!(url), json!({"caption": caption})];
                let answer = self
                    .call_unbounded(Op::PostStatus, "postStatus", &args)
                    .await?;
                (kind, answer, caption)
            }
        };
        page::posted_status(answer, &me, kind, caption)
    }
    async fn list_statuses(&self) -> EngineResult<Vec<StatusUpdate>> {
        let me = self.me()?;
        page::statuses(self.call(Op::ListStatuses, "myStatuses", &[]).await?, &me)
    }
    async fn contact_statuses(&self, contact: &Jid) -> EngineResult<Vec<StatusUpdate>> {
        let args = [json!(contact.to_string())];
        page::statuses(
            self.call(Op::ContactStatuses, "contactStatuses", &args)
                .await?,
            contact,
        )
    }
    async fn delete_status(&self, status_id: &str) -> EngineResult<()> {
        self.act(Op::DeleteStatus, "deleteStatus", &[json!(status_id)])
            .await
    }

    // --- calls: no call detection (no events, rejection 501); call links work ---
    async fn create_call_link(&self, kind: CallKind, start_time_ms: i64) -> EngineResult<String> {
        let kind = match kind {
            CallKind::Audio => "audio",
            CallKind::Video => "video",
        };
        let args = [json!(kind), json!(start_time_ms)];
        decode(
            self.call_unbounded(Op::CreateCallLink, "callLink", &args)
                .await?,
        )
    }

    // --- profile ---
    async fn set_profile_name(&self, name: &str) -> EngineResult<()> {
        self.act(Op::SetProfileName, "setProfileName", &[json!(name)])
            .await
    }
    async fn set_profile_status(&self, status: &str) -> EngineResult<()> {
        self.act(Op::SetProfileStatus, "setProfileStatus", &[json!(status)])
            .await
    }
    async fn set_profile_picture(&self, image: MediaSource) -> EngineResult<()> {
        let args = [json!(self.picture_url(&image).await?)];
        self.act(Op::SetProfilePicture, "setProfilePicture", &args)
            .await
    }
    async fn remove_profile_picture(&self) -> EngineResult<()> {
        self.act(Op::RemoveProfilePicture, "removeProfilePicture", &[])
            .await
    }

    // --- presence: commands work; presence.update is never emitted on this engine ---
    async fn set_presence(&self, available: bool) -> EngineResult<()> {
        self.act(Op::SetPresence, "setPresence", &[json!(available)])
            .await
    }
    async fn subscribe_presence(&self, chat: &Jid) -> EngineResult<()> {
        let args = [json!(chat.to_string())];
        self.act(Op::SubscribePresence, "subscribePresence", &args)
            .await
    }
    /// What the page heard since subscribing; `None` when nothing yet.
    async fn presence(&self, chat: &Jid) -> EngineResult<Option<Vec<PresenceEntry>>> {
        page::presence(
            self.call(Op::GetPresence, "presence", &[json!(chat.to_string())])
                .await?,
        )
    }
}
