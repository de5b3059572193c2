//! Forward: a stored message re-sent to another chat, recorded as a new outgoing message of the
//! original's type (the media file is shared through its content address).

use wagate_proto::dto::messages::ForwardRequest;

use super::MessagingService;
use super::error::{MessagingResult, message_not_found};
use super::record::MediaMeta;
use super::send::{own_jid, same_chat};
use super::validate as v;
use crate::engine::{InboundMessage, MessageType, SentMessage};
use crate::store::from_json;

impl MessagingService {
    pub(crate) async fn forward(
        &self,
        session_id: &str,
        b: ForwardRequest,
    ) -> MessagingResult<SentMessage> {
        let from = v::jid("fromChatId", b.from_chat_id.as_deref())?;
        let to = v::jid("toChatId", b.to_chat_id.as_deref())?;
        let id = v::required("messageId", b.message_id.as_deref())?;
        let record = self.sessions.record(session_id).await?;
        let engine = self.sessions.ready_engine(session_id)?;
        let original = self.find_message(session_id, id).await?;
        // A message deleted for everyone is gone from its chat: nothing is left to forward.
        if original.revoked || !same_chat(&original.chat_id, &from.to_string()) {
            return Err(message_not_found(id));
        }
        self.pace(session_id, &to).await?;
        let result = engine.forward(&from, &to, &original.wa_message_id).await;
        self.pace_outcome(session_id, result.as_ref().err());
        let sent = result?;
        let kind: MessageType = serde_json::from_value(serde_json::json!(original.kind))
            .unwrap_or(MessageType::Unknown);
        let me = own_jid(record.phone.as_deref());
        let msg = InboundMessage {
            id: sent.id.clone(),
            chat_id: to.clone(),
            from: me.unwrap_or_else(|| to.clone()),
            to,
            author: None,
            from_me: true,
            kind,
            body: original.body.clone().unwrap_or_default(),
            timestamp: sent.timestamp,
            media: None,
            quoted: None,
            mentioned_ids: Vec::new(),
            location: None,
            poll: None,
        };
        let meta: Option<MediaMeta> = original.media.as_deref().map(from_json).transpose()?;
        self.recorder.record_sent(session_id, &msg, meta).await?;
        Ok(sent)
    }
}
