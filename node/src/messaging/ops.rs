//! Operations on existing messages: react, edit, delete, pin, unpin, poll vote, star, click-button, and the chat read
//! receipt. Each validates its body, takes the ready engine (409 first), resolves the message through the
//! store when it is there (row id or network id), acts, and updates the store where the network will not
//! tell us (own reactions, edits, deletes, stars). Own reactions, edits and revokes for everyone also raise
//! their events, as a send raises `message.sent`: the network reports only what others do.

use wagate_proto::Jid;
use wagate_proto::dto::messages::{
    ClickButtonRequest, DeleteMessageRequest, EditRequest, MessageRefRequest, PinRequest,
    ReactRequest, ReadChatRequest, StarRequest, VotePollRequest,
};

use super::MessagingService;
use super::commit::Change;
use super::error::{MessagingResult, bad};
use super::send::own_jid;
use super::validate as v;
use crate::engine::{Engine, EngineEvent, SentMessage};
use crate::store::messages::{self as message_store, MessageRow};

/// The target of an operation: chat, network id of the message, its stored row when there is one, and
/// the ready engine.
struct Target {
    chat: Jid,
    wa_id: String,
    row: Option<MessageRow>,
    engine: std::sync::Arc<dyn Engine>,
}

impl MessagingService {
    /// [`Self::target`] of a message still in its chat: one deleted for everyone can no longer be reacted
    /// to, edited, pinned, starred, voted on or clicked (404, as a quote of it is).
    async fn live_target(
        &self,
        session_id: &str,
        chat: Option<&str>,
        id_field: &str,
        id: Option<&str>,
    ) -> MessagingResult<Target> {
        let target = self.target(session_id, chat, id_field, id).await?;
        match &target.row {
            Some(row) if row.revoked => {
                Err(super::error::message_not_found(id.unwrap_or_default()))
            }
            _ => Ok(target),
        }
    }

    async fn target(
        &self,
        session_id: &str,
        chat: Option<&str>,
        id_field: &str,
        id: Option<&str>,
    ) -> MessagingResult<Target> {
        let chat = v::jid("chatId", chat)?;
        let id = v::required(id_field, id)?.to_string();
        self.check_session(session_id).await?;
        let engine = self.sessions.ready_engine(session_id)?;
        // Without a stored row the message may still exist on the network (socket engine): the id is
        // passed on as given.
        let row = self
            .find_in_chat(session_id, &chat.to_string(), &id)
            .await?;
        let wa_id = row.as_ref().map_or(id, |r| r.wa_message_id.clone());
        Ok(Target {
            chat,
            wa_id,
            row,
            engine,
        })
    }

    pub(crate) async fn react(&self, session_id: &str, b: ReactRequest) -> MessagingResult<()> {
        let emoji = b
            .emoji
            .ok_or_else(|| bad("emoji is required (an empty string removes the reaction)"))?;
        v::max_chars("emoji", &emoji, v::EMOJI_MAX)?;
        let t = self
            .live_target(
                session_id,
                b.chat_id.as_deref(),
                "messageId",
                b.message_id.as_deref(),
            )
            .await?;
        t.engine.react(&t.chat, &t.wa_id, &emoji).await?;
        // A reaction row names its sender: without the session's own JID there is nothing to record.
        if let Some(me) = self.own_jid(session_id).await? {
            let action = EngineEvent::Reaction {
                message_id: t.wa_id,
                chat_id: t.chat,
                reaction: emoji,
                sender_id: me,
            };
            self.recorder.record_own_action(session_id, &action).await?;
        }
        Ok(())
    }

    pub(crate) async fn edit(
        &self,
        session_id: &str,
        b: EditRequest,
    ) -> MessagingResult<SentMessage> {
        let body = v::text("body", b.body.as_deref())?;
        let t = self
            .live_target(
                session_id,
                b.chat_id.as_deref(),
                "messageId",
                b.message_id.as_deref(),
            )
            .await?;
        if let Some(row) = &t.row {
            editable(&row.kind, &body)?;
        }
        let sent = t.engine.edit(&t.chat, &t.wa_id, &body).await?;
        let own = |me: Jid| EngineEvent::Edited {
            message_id: t.wa_id.clone(),
            chat_id: t.chat.clone(),
            body: body.clone(),
            from: me,
            from_me: true,
            timestamp: sent.timestamp,
        };
        let change = Change::Edit {
            session_id: session_id.to_string(),
            message_id: t.wa_id.clone(),
            body: body.clone(),
        };
        self.record_own(session_id, own, change).await?;
        Ok(sent)
    }

    pub(crate) async fn delete(
        &self,
        session_id: &str,
        b: DeleteMessageRequest,
    ) -> MessagingResult<()> {
        let t = self
            .target(
                session_id,
                b.chat_id.as_deref(),
                "messageId",
                b.message_id.as_deref(),
            )
            .await?;
        let for_everyone = b.for_everyone.unwrap_or(true);
        // Deleted for everyone already (by us or the sender): nothing is left to revoke or to announce.
        if for_everyone && t.row.as_ref().is_some_and(|r| r.revoked) {
            return Ok(());
        }
        t.engine.revoke(&t.chat, &t.wa_id, for_everyone).await?;
        if !for_everyone {
            return Ok(());
        }
        let own = |me: Jid| EngineEvent::Revoked {
            id: revoke_id(),
            revoked_id: t.wa_id.clone(),
            chat_id: t.chat.clone(),
            from: me,
            to: t.chat.clone(),
            timestamp: chrono::Utc::now().timestamp(),
        };
        let change = Change::Revoke {
            session_id: session_id.to_string(),
            message_id: t.wa_id.clone(),
        };
        self.record_own(session_id, own, change).await
    }

    /// Records an edit or revoke the session made, with its event when the session's own JID is known.
    async fn record_own(
        &self,
        session_id: &str,
        own: impl FnOnce(Jid) -> EngineEvent,
        change: Change,
    ) -> MessagingResult<()> {
        match self.own_jid(session_id).await? {
            Some(me) => {
                self.recorder
                    .record_own_action(session_id, &own(me))
                    .await?
            }
            None => self.recorder.record_own_change(change).await?,
        }
        Ok(())
    }

    async fn own_jid(&self, session_id: &str) -> MessagingResult<Option<Jid>> {
        Ok(own_jid(
            self.sessions.record(session_id).await?.phone.as_deref(),
        ))
    }

    pub(crate) async fn pin(&self, session_id: &str, b: PinRequest) -> MessagingResult<()> {
        let duration = b.duration_seconds.unwrap_or(v::PIN_DURATIONS[0]);
        if !v::PIN_DURATIONS.contains(&duration) {
            return Err(bad("durationSeconds must be 86400, 604800 or 2592000"));
        }
        let t = self
            .live_target(
                session_id,
                b.chat_id.as_deref(),
                "messageId",
                b.message_id.as_deref(),
            )
            .await?;
        Ok(t.engine.pin(&t.chat, &t.wa_id, duration).await?)
    }

    pub(crate) async fn unpin(
        &self,
        session_id: &str,
        b: MessageRefRequest,
    ) -> MessagingResult<()> {
        let t = self
            .live_target(
                session_id,
                b.chat_id.as_deref(),
                "messageId",
                b.message_id.as_deref(),
            )
            .await?;
        Ok(t.engine.unpin(&t.chat, &t.wa_id).await?)
    }

    pub(crate) async fn vote_poll(
        &self,
        session_id: &str,
        b: VotePollRequest,
    ) -> MessagingResult<()> {
        let options = v::vote_options(b.options.as_deref())?;
        let t = self
            .live_target(
                session_id,
                b.chat_id.as_deref(),
                "pollMessageId",
                b.poll_message_id.as_deref(),
            )
            .await?;
        Ok(t.engine.vote_poll(&t.chat, &t.wa_id, &options).await?)
    }

    pub(crate) async fn star(&self, session_id: &str, b: StarRequest) -> MessagingResult<()> {
        let star = b
            .star
            .ok_or_else(|| bad("star is required (true or false)"))?;
        let t = self
            .live_target(
                session_id,
                b.chat_id.as_deref(),
                "messageId",
                b.message_id.as_deref(),
            )
            .await?;
        t.engine.star(&t.chat, &t.wa_id, star).await?;
        message_store::set_starred(&self.db, session_id, &t.wa_id, star).await?;
        Ok(())
    }

    pub(crate) async fn click_button(
        &self,
        session_id: &str,
        b: ClickButtonRequest,
    ) -> MessagingResult<SentMessage> {
        let button = v::required("buttonId", b.button_id.as_deref())?.to_string();
        let t = self
            .live_target(
                session_id,
                b.chat_id.as_deref(),
                "messageId",
                b.message_id.as_deref(),
            )
            .await?;
        Ok(t.engine
            .click_button(&t.chat, &t.wa_id, &button, b.text.as_deref())
            .await?)
    }

    pub(crate) async fn read_chat(
        &self,
        session_id: &str,
        b: ReadChatRequest,
    ) -> MessagingResult<()> {
        let chat = v::jid("chatId", b.chat_id.as_deref())?;
        let ids = v::read_ids(b.message_ids)?;
        self.check_session(session_id).await?;
        let engine = self.sessions.ready_engine(session_id)?;
        Ok(engine.mark_read(&chat, &ids).await?)
    }
}

/// WhatsApp edits only the text of a text message and the caption of an image, video or document.
/// (`unknown` rows are engine messages the store could not type; the network decides for them.)
fn editable(kind: &str, body: &str) -> MessagingResult<()> {
    match kind {
        "image" | "video" | "document" if body.chars().count() > v::CAPTION_MAX => {
            Err(bad(format!(
                "body must be at most {} characters: it replaces the caption of the {kind} message",
                v::CAPTION_MAX
            )))
        }
        "text" | "unknown" | "image" | "video" | "document" => Ok(()),
        other => Err(bad(format!(
            "Messages of type {other} cannot be edited: WhatsApp edits only text and captions"
        ))),
    }
}

/// The id of the revoke itself (the engines do not report the protocol message's): a fresh one in the
/// form WhatsApp Web gives its message ids.
fn revoke_id() -> String {
    format!("3EB0{}", &uuid::Uuid::new_v4().simple().to_string()[..16]).to_uppercase()
}
