//! Reads from the message store: the session's message list (cursor or offset paging, filters, inline
//! media switch; a reply shows the message it quotes), a chat's history, a message's reactions and its media
//! bytes. A chat or sender id a read names is checked and normalised as a send's `chatId` is
//! (`validate::jid`): `@s.whatsapp.net` reads as the `@c.us` the store keeps, and an id that is no JID is a
//! 400, not an empty page.

use std::collections::{BTreeMap, HashMap};

use bytes::Bytes;

use wagate_proto::dto::messages::{
    ListMessagesQuery, Message, QuotedMessage, ReactionGroup, ReactionSender,
};
use wagate_proto::iso_ms;

use super::MessagingService;
use super::error::{MessagingResult, bad, message_not_found};
use super::record::MediaMeta;
use super::validate as v;
use crate::store::messages::{self as message_store, MessageRow, PageQuery, VersionedRow};
use crate::store::{StoreError, from_json, reactions};

pub(crate) const DEFAULT_LIMIT: i64 = 50;

fn blank_to_none(raw: Option<String>) -> Option<String> {
    raw.filter(|v| !v.trim().is_empty())
}

fn number(
    field: &str,
    raw: Option<&str>,
    min: i64,
    max: i64,
    default: i64,
) -> MessagingResult<i64> {
    let Some(raw) = raw else { return Ok(default) };
    raw.parse::<i64>()
        .ok()
        .filter(|n| (min..=max).contains(n) && raw.bytes().all(|b| b.is_ascii_digit()))
        .ok_or_else(|| {
            bad(format!(
                "{field} must be an integer between {min} and {max}"
            ))
        })
}

impl MessagingService {
    /// The session's message list as its JSON array: a whole page kept since the session's last write is served
    /// as it is, and rows the page cache holds at their current version are not read again (`page_cache.rs`).
    pub(crate) async fn list_json(
        &self,
        session_id: &str,
        q: ListMessagesQuery,
    ) -> MessagingResult<Bytes> {
        let (page, inline) = self.page_query(session_id, q).await?;
        let whole = self.page_cache.whole_page(session_id, &page, inline);
        if let Some(kept) = whole.as_ref().and_then(|w| self.page_cache.get_page(w)) {
            return Ok(kept);
        }
        let keys = message_store::page_keys(&self.db, session_id, &page).await?;
        let mut parts = self.page_cache.get_many(&keys);
        let missing: Vec<&str> = keys
            .iter()
            .zip(&parts)
            .filter(|(_, part)| part.is_none())
            .map(|(key, _)| key.id.as_str())
            .collect();
        if !missing.is_empty() {
            let mut built = self.build_rows(session_id, &missing, inline).await?;
            for (key, part) in keys.iter().zip(parts.iter_mut()) {
                if part.is_none() {
                    // Absent when the row was deleted since its key was read.
                    *part = built.remove(key.id.as_str());
                }
            }
        }
        let parts: Vec<Bytes> = parts.into_iter().flatten().collect();
        let json = crate::json::json_array(&parts);
        if let Some(whole) = whole.filter(|_| keys.iter().all(|k| k.plain)) {
            self.page_cache.put_page(whole, json.clone());
        }
        Ok(json)
    }

    /// Reads the rows of `ids` and builds each one's JSON, keeping those without media.
    async fn build_rows(
        &self,
        session_id: &str,
        ids: &[&str],
        inline: bool,
    ) -> MessagingResult<HashMap<String, Bytes>> {
        let rows = message_store::versioned_rows(&self.db, session_id, ids).await?;
        let mut built = HashMap::with_capacity(rows.len());
        for VersionedRow {
            version,
            row,
            quoted_version,
            quoted_body,
        } in rows
        {
            let plain = row.media.is_none();
            let id = row.id.clone();
            let message = self.to_message(row, quoted_body, inline).await?;
            let json = Bytes::from(serde_json::to_vec(&message).map_err(StoreError::from)?);
            if plain {
                // Kept under the quoted row's version too: the JSON shows that row's body.
                self.page_cache
                    .put(id.clone(), version, quoted_version, json.clone());
            }
            built.insert(id, json);
        }
        Ok(built)
    }

    /// What a list request asks for, checked: the page and whether media comes inline.
    async fn page_query(
        &self,
        session_id: &str,
        q: ListMessagesQuery,
    ) -> MessagingResult<(PageQuery, bool)> {
        self.check_session(session_id).await?;
        let limit = number(
            "limit",
            blank_to_none(q.limit).as_deref(),
            1,
            1000,
            DEFAULT_LIMIT,
        )?;
        let offset = number("offset", blank_to_none(q.offset).as_deref(), 0, i64::MAX, 0)?;
        let inline = match blank_to_none(q.inline_media).as_deref() {
            None | Some("true") | Some("1") => true,
            Some("false") | Some("0") => false,
            Some(_) => return Err(bad("inlineMedia must be true or false")),
        };
        let direction = blank_to_none(q.direction);
        if direction
            .as_deref()
            .is_some_and(|d| d != "incoming" && d != "outgoing")
        {
            return Err(bad("direction must be incoming or outgoing"));
        }
        let after = match blank_to_none(q.after) {
            Some(cursor) => {
                let row = message_store::find(&self.db, session_id, &cursor).await?;
                let row = row.ok_or_else(|| {
                    bad(format!("after names no message in this session: {cursor}"))
                })?;
                Some((row.created_at, row.id))
            }
            None => None,
        };
        let page = PageQuery {
            chat_id: v::jid_filter("chatId", q.chat_id.as_deref())?,
            from: v::jid_filter("from", q.from.as_deref())?,
            direction,
            kind: blank_to_none(q.kind),
            offset: if after.is_some() { 0 } else { offset },
            after,
            limit,
        };
        Ok((page, inline))
    }

    /// A chat's history: its page of `GET /messages` rows, each with `fromMe` and the chat's `kind`.
    pub(crate) async fn history_json(
        &self,
        session_id: &str,
        chat_id: &str,
        limit: Option<String>,
        include_media: Option<String>,
    ) -> MessagingResult<Bytes> {
        let chat = v::jid("chatId", Some(chat_id))?;
        let page = self
            .list_json(
                session_id,
                ListMessagesQuery {
                    chat_id: Some(chat.to_string()),
                    limit,
                    inline_media: include_media,
                    ..Default::default()
                },
            )
            .await?;
        let mut rows: Vec<serde_json::Map<String, serde_json::Value>> =
            serde_json::from_slice(&page).map_err(StoreError::from)?;
        let kind = chat.kind().as_str();
        for row in &mut rows {
            let outgoing = row.get("direction").and_then(|d| d.as_str()) == Some("outgoing");
            row.insert("fromMe".into(), outgoing.into());
            row.insert("kind".into(), kind.into());
        }
        Ok(Bytes::from(
            serde_json::to_vec(&rows).map_err(StoreError::from)?,
        ))
    }

    /// The API shape of a stored row; `quoted_body` is the current body of the message it quotes (read with
    /// the row, `None` when that message is not stored here or was deleted for everyone).
    async fn to_message(
        &self,
        r: MessageRow,
        quoted_body: Option<String>,
        inline: bool,
    ) -> MessagingResult<Message> {
        let media = match r.media.as_deref() {
            Some(text) => Some(
                self.recorder
                    .media_json(&from_json::<MediaMeta>(text)?, inline)
                    .await,
            ),
            None => None,
        };
        // A message deleted for everyone shows nothing of what it was, its reply included.
        let quoted_message = match r.quoted_id {
            Some(id) if !r.revoked => Some(QuotedMessage {
                id,
                body: quoted_body,
            }),
            _ => None,
        };
        Ok(Message {
            quoted_message,
            mentioned_ids: r.mentioned_ids.as_deref().map(from_json).transpose()?,
            id: r.id,
            session_id: r.session_id,
            wa_message_id: r.wa_message_id,
            chat_id: r.chat_id,
            from: r.from_jid,
            to: r.to_jid,
            chat_name: r.chat_name,
            author: r.author,
            body: r.body.unwrap_or_default(),
            kind: r.kind,
            direction: r.direction,
            status: r.status,
            timestamp: r.timestamp,
            has_media: r.has_media,
            media,
            is_group: r.is_group,
            created_at: iso_ms(r.created_at),
        })
    }

    /// Reactions on a stored message of `chat_id`, grouped by emoji.
    pub(crate) async fn reactions(
        &self,
        session_id: &str,
        chat_id: &str,
        message_id: &str,
    ) -> MessagingResult<Vec<ReactionGroup>> {
        self.check_session(session_id).await?;
        let row = self.stored_in_chat(session_id, chat_id, message_id).await?;
        let mut groups: BTreeMap<String, Vec<ReactionSender>> = BTreeMap::new();
        for r in reactions::list(&self.db, session_id, &row.wa_message_id).await? {
            groups
                .entry(r.emoji.clone())
                .or_default()
                .push(ReactionSender {
                    sender_id: r.sender_id,
                    emoji: r.emoji,
                    timestamp: r.timestamp,
                });
        }
        Ok(groups
            .into_iter()
            .map(|(emoji, senders)| ReactionGroup { emoji, senders })
            .collect())
    }

    /// A stored message of `chat_id`: 400 when `chat_id` is no JID, 404 when there is no such message, or
    /// it belongs to another chat.
    async fn stored_in_chat(
        &self,
        session_id: &str,
        chat_id: &str,
        message_id: &str,
    ) -> MessagingResult<MessageRow> {
        let chat = v::jid("chatId", Some(chat_id))?;
        self.find_in_chat(session_id, &chat.to_string(), message_id)
            .await?
            .ok_or_else(|| message_not_found(message_id))
    }

    /// The media of a stored message as a stream, with its mimetype; 404 when it has none or its object
    /// is missing (logged), 503 when the store cannot be reached.
    pub(crate) async fn media_stream(
        &self,
        session_id: &str,
        chat_id: &str,
        message_id: &str,
    ) -> MessagingResult<(String, crate::media::MediaStream)> {
        self.check_session(session_id).await?;
        let row = self.stored_in_chat(session_id, chat_id, message_id).await?;
        let none =
            || super::error::MessagingError::NotFound(format!("Message {message_id} has no media"));
        let meta: MediaMeta = from_json(row.media.as_deref().ok_or_else(none)?)?;
        let Some(stream) = self.recorder.media().stream(&meta.key).await? else {
            tracing::warn!(session_id, key = %meta.key, "media object missing");
            return Err(none());
        };
        Ok((meta.mimetype, stream))
    }
}
