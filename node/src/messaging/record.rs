//! `Recorder`: the message store's write path. An inbound message (or ack, revoke, edit, reaction) is
//! persisted and its event's outbox rows written in ONE transaction, then published after commit; a
//! message already stored (same `(session, waMessageId)`) produces no second event. Sends record the
//! outgoing message and `message.sent` the same way; a received status post (`status.received`) and the
//! session's own posts go through the same writer. Input: `events::ingest`, the send path and
//! `messaging/statuses.rs`.

use base64::Engine as _;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::commit::{Change, GroupCommit, Write};
use crate::engine::{Ack, AckStatus, EngineEvent, HistoryBatch, InboundMessage, PollVote};
use crate::events::normalise::{INLINE_MEDIA_MAX_BYTES, normalise};
use crate::events::pipeline::{PERSIST_FAILED_METRIC, settle};
use crate::events::statuses;
use crate::events::{Event, Pipeline};
use crate::media::{MediaStore, StoredMedia};
use crate::store::chat_states::{self, ChatFacts};
use crate::store::contact_names;
use crate::store::messages::MessageRow;
use crate::store::poll_votes::{self, PollVoteRow};
use crate::store::reactions::ReactionRow;
use crate::store::status_updates::NewStatus;
use crate::store::{DataPool, StoreResult, now_ms, to_json};

/// What the `media` column holds: the file's content address and how to present it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct MediaMeta {
    pub key: String,
    pub mimetype: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub filename: Option<String>,
    pub size_bytes: u64,
}

impl MediaMeta {
    pub(crate) fn new(
        stored: &StoredMedia,
        mimetype: String,
        filename: Option<String>,
    ) -> MediaMeta {
        MediaMeta {
            key: stored.key.clone(),
            mimetype,
            filename,
            size_bytes: stored.size,
        }
    }
}

#[derive(Clone)]
pub(crate) struct Recorder {
    /// For the history and poll-vote tables, which raise no event and so skip the group commit.
    db: DataPool,
    pipeline: Pipeline,
    media: MediaStore,
    writer: GroupCommit,
}

/// Rank of a status in the forward-only order the store enforces.
fn rank(status: AckStatus) -> i64 {
    match status {
        AckStatus::Pending => 0,
        AckStatus::Sent => 1,
        AckStatus::Delivered => 2,
        AckStatus::Read => 3,
        AckStatus::Failed => 4,
    }
}

impl Recorder {
    pub(crate) fn new(db: DataPool, pipeline: Pipeline, media: MediaStore) -> Recorder {
        Recorder {
            writer: GroupCommit::spawn(db.clone(), pipeline.clone()),
            db,
            pipeline,
            media,
        }
    }

    /// Waits (at most `budget`) until the event writes queued so far are committed (a stopping process).
    pub(crate) async fn flush(&self, budget: std::time::Duration) {
        self.writer.flush(budget).await;
    }

    pub(crate) fn media(&self) -> &MediaStore {
        &self.media
    }

    /// Whether `event` is one the message store records (the rest go straight to the pipeline).
    pub(crate) fn records(event: &EngineEvent) -> bool {
        matches!(
            event,
            EngineEvent::Message(_)
                | EngineEvent::Ack { .. }
                | EngineEvent::Revoked { .. }
                | EngineEvent::Edited { .. }
                | EngineEvent::Reaction { .. }
                | EngineEvent::History(_)
                | EngineEvent::PollVote(_)
                | EngineEvent::Status(_)
        )
    }

    /// Persists a message-related engine event and publishes it, in one transaction (shared with whatever
    /// other writes are waiting: see `commit.rs`). Returns once the write is queued behind the session's
    /// earlier ones; `ack` (the network's acknowledgement of the traffic) is settled after the commit by the
    /// writer, or here when the event fails before it reaches the writer (`events::pipeline::settle`).
    pub(crate) async fn record_event(&self, session_id: &str, event: &EngineEvent, ack: Ack) {
        match event {
            EngineEvent::History(batch) => {
                return self.record_history(session_id, batch, ack).await;
            }
            EngineEvent::PollVote(vote) => {
                let result = self.record_poll_vote(session_id, vote).await;
                return settle(ack, session_id, &result);
            }
            _ => {}
        }
        let Some(normalised) = normalise(session_id, event) else {
            // Nothing of it is kept: there is nothing to lose either.
            return ack.complete();
        };
        let change = match event {
            EngineEvent::Message(msg) => {
                if !msg.from_me {
                    crate::hooks::hooks().message_received(session_id, msg);
                    metrics::counter!(
                        wagate_workers::telemetry::metrics::MESSAGES_RECEIVED,
                        "type" => msg.kind.as_str()
                    )
                    .increment(1);
                }
                match self.inbound_row(session_id, msg).await {
                    Ok(row) => Change::Insert(Box::new(row)),
                    Err(err) => return settle(ack, session_id, &Err(err)),
                }
            }
            EngineEvent::Status(update) => {
                let stored = statuses::store_received_media(&self.media, session_id, update).await;
                let row = statuses::received_row(session_id, update, stored.as_ref());
                Change::StatusPost(Box::new(row))
            }
            other => match plain_change(session_id, other) {
                Some(change) => change,
                None => {
                    let result = self.pipeline.publish(normalised).await;
                    return settle(ack, session_id, &result);
                }
            },
        };
        let write = Write {
            change,
            event: Some(normalised),
        };
        if let Err(err) = self.writer.submit(write, ack).await {
            tracing::warn!(session_id, error = %err, "message event not queued; left to the network to redeliver");
        }
    }

    /// Records what the session itself did to a message through the API (an edit, a revoke for everyone,
    /// a reaction) and publishes its event, as `record_sent` does for a send: the network reports only
    /// what other accounts, or this account's other devices, do.
    pub(crate) async fn record_own_action(
        &self,
        session_id: &str,
        action: &EngineEvent,
    ) -> StoreResult<()> {
        let Some(change) = plain_change(session_id, action) else {
            return Ok(());
        };
        let event = normalise(session_id, action);
        self.writer.commit(Write { change, event }).await
    }

    /// Records a message this service sent and publishes `message.sent`.
    pub(crate) async fn record_sent(
        &self,
        session_id: &str,
        msg: &InboundMessage,
        media: Option<MediaMeta>,
    ) -> StoreResult<()> {
        let mut data = crate::events::normalise::message_data(msg);
        if let (Some(meta), Some(obj)) = (&media, data.as_object_mut()) {
            obj.insert("hasMedia".into(), json!(true));
            obj.insert("media".into(), self.media_json(meta, true).await);
        }
        let event = Event::new(wagate_proto::EventName::MessageSent, session_id, data);
        let row = message_row(session_id, msg, media.as_ref(), AckStatus::Pending)?;
        self.writer
            .commit(Write {
                change: Change::Insert(Box::new(row)),
                event: Some(event),
            })
            .await
    }

    /// Records a status post the session made (no event: the route answers it).
    pub(crate) async fn record_own_status(&self, row: NewStatus) -> StoreResult<()> {
        self.writer
            .commit(Write {
                change: Change::StatusPost(Box::new(row)),
                event: None,
            })
            .await
    }

    /// Records this account's own reaction (the network does not echo it back).
    /// Records a change of the session's own without an event (its own JID is not known yet).
    pub(crate) async fn record_own_change(&self, change: Change) -> StoreResult<()> {
        self.writer
            .commit(Write {
                change,
                event: None,
            })
            .await
    }

    /// Stores a history chunk: what it says about chats and push names, then its messages once per network
    /// id (no events: the spec's `message.received` is for inbound traffic, not for the archive a newly
    /// linked device is handed). `ack` rides with the last message write, so it is settled after that commit.
    async fn record_history(&self, session_id: &str, batch: &HistoryBatch, ack: Ack) {
        if let Err(err) = self.record_history_facts(session_id, batch).await {
            return settle(ack, session_id, &Err(err));
        }
        let mut ack = Some(ack);
        let last = batch.messages.len().saturating_sub(1);
        for (i, (msg, status)) in batch.messages.iter().enumerate() {
            let row = match message_row(session_id, msg, None, *status) {
                Ok(row) => row,
                Err(err) => {
                    // One unreadable message must not hold back the chunk's others.
                    tracing::warn!(session_id, error = %err, "history message not stored");
                    metrics::counter!(PERSIST_FAILED_METRIC).increment(1);
                    continue;
                }
            };
            let write = Write {
                change: Change::Insert(Box::new(row)),
                event: None,
            };
            let carried = if i == last { ack.take() } else { None };
            if let Err(err) = self
                .writer
                .submit(write, carried.unwrap_or_else(Ack::none))
                .await
            {
                tracing::warn!(session_id, error = %err, "history not queued; left to the network to redeliver");
                return;
            }
        }
        if let Some(ack) = ack {
            ack.complete();
        }
    }

    async fn record_history_facts(
        &self,
        session_id: &str,
        batch: &HistoryBatch,
    ) -> StoreResult<()> {
        let db = &self.db;
        let chats: Vec<ChatFacts> = batch
            .chats
            .iter()
            .map(|c| ChatFacts {
                chat_id: c.id.to_string(),
                name: c.name.clone(),
                is_group: c.id.is_group(),
                archived: c.archived,
                pinned: c.pinned,
                muted: c.muted,
                mute_expiration: c.mute_expiration,
                unread_count: c.unread_count.map(i64::from),
                last_message_at: c.last_message_at,
            })
            .collect();
        chat_states::upsert(db, session_id, &chats).await?;
        let names: Vec<(String, String)> = batch
            .push_names
            .iter()
            .map(|(jid, name)| (jid.to_string(), name.clone()))
            .collect();
        contact_names::upsert(db, session_id, &names).await
    }

    /// Keeps each voter's current selection on the poll. The spec names no event for a vote, so none is
    /// raised; the vote is logged for operators.
    async fn record_poll_vote(&self, session_id: &str, vote: &PollVote) -> StoreResult<()> {
        tracing::debug!(session_id, poll_id = %vote.poll_id, voter = %vote.voter, options = ?vote.options, "poll vote");
        let row = PollVoteRow {
            poll_message_id: vote.poll_id.clone(),
            chat_id: vote.chat_id.to_string(),
            voter: vote.voter.to_string(),
            options: vote.options.clone(),
            timestamp: vote.timestamp,
        };
        poll_votes::apply(&self.db, session_id, &row).await
    }

    async fn inbound_row(&self, session_id: &str, msg: &InboundMessage) -> StoreResult<MessageRow> {
        let meta = match &msg.media {
            Some(media) => {
                let file = media.stored.as_deref();
                let kept = self
                    .media
                    .keep_received(
                        session_id,
                        file.map(|f| (f.key.as_str(), f.size)),
                        &media.data,
                    )
                    .await;
                let meta = |stored: &StoredMedia| {
                    MediaMeta::new(stored, media.mimetype.clone(), media.filename.clone())
                };
                match (kept, file) {
                    (Ok(Some(stored)), _) => Some(meta(&stored)),
                    // The object passed on by key went before this session copied it: the row keeps
                    // its key, so the message reads as the omitted marker (logged) like any missing one.
                    (Ok(None), Some(file)) => {
                        tracing::warn!(session_id, key = %file.key, "received media object missing; kept as omitted");
                        Some(meta(&StoredMedia {
                            key: file.key.clone(),
                            size: file.size,
                            content_type: None,
                        }))
                    }
                    (Ok(None), None) => None,
                    (Err(err), _) => {
                        tracing::warn!(session_id, error = %err, "inbound media not stored");
                        None
                    }
                }
            }
            None => None,
        };
        let status = if msg.from_me {
            AckStatus::Sent
        } else {
            AckStatus::Delivered
        };
        message_row(session_id, msg, meta.as_ref(), status)
    }

    /// The row's media as the API shows it: inline base64 when asked and small enough, else the marker.
    pub(crate) async fn media_json(&self, meta: &MediaMeta, inline: bool) -> Value {
        let mut out = json!({ "mimetype": meta.mimetype, "sizeBytes": meta.size_bytes });
        if let Some(filename) = &meta.filename {
            out["filename"] = json!(filename);
        }
        let data = if inline && meta.size_bytes as usize <= INLINE_MEDIA_MAX_BYTES {
            match self.media.get(&meta.key).await {
                Ok(Some(bytes)) => Some(bytes),
                Ok(None) => {
                    tracing::warn!(key = %meta.key, "media object missing; shown as omitted");
                    None
                }
                Err(err) => {
                    tracing::warn!(key = %meta.key, error = %err, "media object unreadable; shown as omitted");
                    None
                }
            }
        } else {
            None
        };
        if let Some(obj) = out.as_object_mut() {
            match data {
                Some(bytes) => obj.insert(
                    "data".into(),
                    json!(base64::engine::general_purpose::STANDARD.encode(bytes)),
                ),
                None => obj.insert("omitted".into(), json!(true)),
            };
        }
        out
    }
}

/// The store change an ack, revoke, edit or reaction makes; `None` for every other event.
pub(crate) fn plain_change(session_id: &str, event: &EngineEvent) -> Option<Change> {
    let change = match event {
        EngineEvent::Ack {
            message_id, status, ..
        } => Change::Status {
            session_id: session_id.to_string(),
            message_id: message_id.clone(),
            status: *status,
            rank: rank(*status),
        },
        EngineEvent::Revoked { revoked_id, .. } => Change::Revoke {
            session_id: session_id.to_string(),
            message_id: revoked_id.clone(),
        },
        EngineEvent::Edited {
            message_id, body, ..
        } => Change::Edit {
            session_id: session_id.to_string(),
            message_id: message_id.clone(),
            body: body.clone(),
        },
        EngineEvent::Reaction {
            message_id,
            chat_id,
            reaction,
            sender_id,
        } => Change::Reaction(reaction_row(
            session_id,
            message_id,
            chat_id.to_string(),
            sender_id.to_string(),
            reaction,
        )),
        _ => return None,
    };
    Some(change)
}

pub(crate) fn reaction_row(
    session_id: &str,
    message_id: &str,
    chat_id: String,
    sender_id: String,
    emoji: &str,
) -> ReactionRow {
    ReactionRow {
        session_id: session_id.to_string(),
        wa_message_id: message_id.to_string(),
        chat_id,
        sender_id,
        emoji: emoji.to_string(),
        timestamp: now_ms() / 1000,
    }
}

fn message_row(
    session_id: &str,
    msg: &InboundMessage,
    media: Option<&MediaMeta>,
    status: AckStatus,
) -> StoreResult<MessageRow> {
    let mut extra = serde_json::Map::new();
    if let Some(loc) = &msg.location {
        extra.insert("location".into(), serde_json::to_value(loc)?);
    }
    if let Some(poll) = &msg.poll {
        extra.insert("poll".into(), serde_json::to_value(poll)?);
    }
    Ok(MessageRow {
        id: uuid::Uuid::now_v7().to_string(),
        session_id: session_id.to_string(),
        wa_message_id: msg.id.clone(),
        chat_id: msg.chat_id.to_string(),
        from_jid: msg.from.to_string(),
        to_jid: msg.to.to_string(),
        chat_name: None,
        author: msg.author.as_ref().map(ToString::to_string),
        body: Some(msg.body.clone()),
        kind: serde_json::to_value(msg.kind)?
            .as_str()
            .unwrap_or("unknown")
            .to_string(),
        direction: if msg.from_me { "outgoing" } else { "incoming" }.to_string(),
        status: status.as_str().to_string(),
        timestamp: msg.timestamp,
        has_media: media.is_some() || msg.kind.has_media(),
        media: media.map(to_json).transpose()?,
        mentioned_ids: (!msg.mentioned_ids.is_empty())
            .then(|| to_json(&msg.mentioned_ids))
            .transpose()?,
        is_group: msg.chat_id.is_group(),
        quoted_id: msg.quoted.as_ref().map(|q| q.id.clone()),
        extra: (!extra.is_empty()).then(|| Value::Object(extra).to_string()),
        starred: false,
        revoked: false,
        created_at: now_ms(),
    })
}
