//! The send path: ready engine (409 first), quoted message resolved in the store (404), media
//! materialised through the media store (413/400), the `message:sending` hook, pacing (429), the engine
//! send, then the outgoing message and `message.sent` recorded in one transaction.

use wagate_proto::Jid;

use super::MessagingService;
use super::draft::{Draft, DraftContent, MediaDraft, MediaInput};
use super::error::{MessagingResult, message_not_found};
use super::record::MediaMeta;
use crate::engine::{
    InboundMessage, MediaKind, MediaMessage, MediaSource, MessageContent, OutgoingMessage,
    QuotedRef, SentMessage,
};
use crate::store::messages::{self as message_store, MessageRow};

/// The session's own JID, from its stored phone.
pub(crate) fn own_jid(phone: Option<&str>) -> Option<Jid> {
    let phone = phone?;
    Jid::parse(phone).or_else(|_| Jid::from_phone(phone)).ok()
}

impl MessagingService {
    /// Sends a validated draft and records it.
    pub(crate) async fn send(
        &self,
        session_id: &str,
        draft: Draft,
    ) -> MessagingResult<SentMessage> {
        let engine = match self.sessions.ready_engine(session_id) {
            Ok(engine) => engine,
            Err(err) => {
                self.sessions.record(session_id).await?; // 404 for an unknown session comes first
                return Err(err.into());
            }
        };
        // Only a URL fetch needs the stored proxy; otherwise the loaded state has the phone (a read per send
        // was a fifth of the statements a send costs).
        let loaded_phone = match &draft.content {
            DraftContent::Media(media) if matches!(media.input, MediaInput::Url(_)) => None,
            _ => self.sessions.loaded_phone(session_id),
        };
        let (phone, proxy_url) = match loaded_phone {
            Some(phone) => (phone, None),
            None => {
                let record = self.sessions.record(session_id).await?;
                (record.phone, record.proxy_url)
            }
        };
        let quoted = match draft.quoted_id.as_deref() {
            Some(id) => {
                let row = self.find_message(session_id, id).await?;
                // A message deleted for everyone is gone from the chat, and a message of another chat was
                // never in it: neither is there to quote.
                if row.revoked || !same_chat(&row.chat_id, &draft.to.to_string()) {
                    return Err(message_not_found(id));
                }
                Some(row)
            }
            None => None,
        };
        let (content, meta) = self
            .materialise(session_id, draft.content, proxy_url.as_deref())
            .await?;
        let msg = OutgoingMessage {
            to: draft.to,
            content,
            quoted_id: quoted.as_ref().map(|q| q.wa_message_id.clone()),
            mentions: draft.mentions,
        };
        crate::hooks::hooks().message_sending(session_id, &msg);
        self.pace(session_id, &msg.to).await?;
        let result = tracing::Instrument::instrument(
            engine.send(msg.clone()),
            tracing::info_span!("engine_call", op = "send"),
        )
        .await;
        self.pace_outcome(session_id, result.as_ref().err());
        let counted = if result.is_ok() {
            wagate_workers::telemetry::metrics::MESSAGES_SENT
        } else {
            wagate_workers::telemetry::metrics::MESSAGES_FAILED
        };
        metrics::counter!(counted, "type" => msg.content.message_type().as_str()).increment(1);
        let sent = result?;
        let me = own_jid(phone.as_deref());
        let inbound = sent_as_inbound(&msg, &sent, me, quoted.as_ref());
        self.recorder
            .record_sent(session_id, &inbound, meta)
            .await?;
        Ok(sent)
    }

    /// A stored message by row id or network id; 404 `Message <id> not found` otherwise.
    pub(crate) async fn find_message(
        &self,
        session_id: &str,
        id: &str,
    ) -> MessagingResult<MessageRow> {
        message_store::find(&self.db, session_id, id)
            .await?
            .ok_or_else(|| message_not_found(id))
    }

    /// The stored row of `id` if there is one; 404 when that row belongs to another chat than `chat`.
    pub(crate) async fn find_in_chat(
        &self,
        session_id: &str,
        chat: &str,
        id: &str,
    ) -> MessagingResult<Option<MessageRow>> {
        match message_store::find(&self.db, session_id, id).await? {
            Some(row) if !same_chat(&row.chat_id, chat) => Err(message_not_found(id)),
            found => Ok(found),
        }
    }

    async fn materialise(
        &self,
        session_id: &str,
        content: DraftContent,
        proxy_url: Option<&str>,
    ) -> MessagingResult<(MessageContent, Option<MediaMeta>)> {
        let draft: MediaDraft = match content {
            DraftContent::Ready(content) => return Ok((content, None)),
            DraftContent::Media(draft) => draft,
        };
        let media = self.recorder.media();
        let stored = match draft.input {
            MediaInput::Base64(data) => media.put_base64(session_id, &data).await?,
            MediaInput::Url(url) => media.put_url(session_id, &url, proxy_url).await?,
        };
        let mut mimetype = draft
            .mimetype
            .or_else(|| stored.content_type.clone())
            .unwrap_or_else(|| match draft.kind {
                MediaKind::Audio | MediaKind::Voice => {
                    super::draft::DEFAULT_AUDIO_MIMETYPE.to_string()
                }
                _ => "application/octet-stream".to_string(),
            });
        // A voice note plays only as Opus: anything else (as declared or, for a URL, as served) is converted.
        let convert = match draft.kind {
            MediaKind::Voice if !crate::media::convert::is_opus(&mimetype) => {
                Some(crate::media::convert::Target::Voice)
            }
            _ => draft.convert,
        };
        let stored = match (convert, &self.converter) {
            (Some(target), Some(converter)) => {
                let converted = converter
                    .convert_object(media, session_id, &stored.key, target)
                    .await?;
                mimetype = converted.mimetype.to_string();
                converted.stored
            }
            (Some(_), None) => return Err(crate::media::convert::ConvertError::Disabled.into()),
            (None, _) => stored,
        };
        let meta = MediaMeta::new(&stored, mimetype.clone(), draft.filename.clone());
        let message = MediaMessage {
            kind: draft.kind,
            source: MediaSource::Stored {
                key: stored.key.clone(),
            },
            mimetype,
            filename: draft.filename,
            caption: draft.caption,
        };
        Ok((MessageContent::Media(message), Some(meta)))
    }
}

/// Whether two chat ids name the same chat (`@s.whatsapp.net` and `@c.us` alike).
pub(crate) fn same_chat(a: &str, b: &str) -> bool {
    match (Jid::parse(a), Jid::parse(b)) {
        (Ok(a), Ok(b)) => a == b,
        _ => a.trim() == b.trim(),
    }
}

/// The sent message as the store and `message.sent` describe it.
pub(crate) fn sent_as_inbound(
    msg: &OutgoingMessage,
    sent: &SentMessage,
    me: Option<Jid>,
    quoted: Option<&MessageRow>,
) -> InboundMessage {
    let (location, poll) = match &msg.content {
        MessageContent::Location(loc) => (Some(loc.clone()), None),
        MessageContent::Poll(poll) => (None, Some(poll.clone())),
        _ => (None, None),
    };
    InboundMessage {
        id: sent.id.clone(),
        chat_id: msg.to.clone(),
        from: me.unwrap_or_else(|| msg.to.clone()),
        to: msg.to.clone(),
        author: None,
        from_me: true,
        kind: msg.content.message_type(),
        body: msg.content.body_text(),
        timestamp: sent.timestamp,
        media: None,
        quoted: quoted.map(|q| QuotedRef {
            id: q.wa_message_id.clone(),
            body: q.body.clone().unwrap_or_default(),
        }),
        mentioned_ids: msg.mentions.clone(),
        location,
        poll,
    }
}
