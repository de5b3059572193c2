//! The node's implementation of the engine API's store interface (`EngineStore`) over its own tables:
//! what an engine may read and write of the node's data, answered by the store modules (which own the
//! SQL). Engines get it as `EngineContext::store`; nothing here is engine-specific.

use std::collections::BTreeMap;

use async_trait::async_trait;
use wagate_engine_api::store::{EngineStore, StoreFailure, StoreResult, StoredMessage};
use wagate_proto::Jid;

use super::{ChatSummary, EngineKind, LinkedAccount, MessageType, StatusUpdate};
use crate::store::chat_states::{self, ChatStateRow};
use crate::store::status_updates::{self, StatusDirection};
use crate::store::{DataPool, StoreError, contact_names, messages, sessions};

/// The data DB as engines see it.
#[derive(Debug, Clone)]
pub(crate) struct NodeStore {
    db: DataPool,
}

impl NodeStore {
    pub(crate) fn new(db: DataPool) -> NodeStore {
        NodeStore { db }
    }
}

fn failed(err: StoreError) -> StoreFailure {
    StoreFailure(err.to_string())
}

#[async_trait]
impl EngineStore for NodeStore {
    async fn chats(&self, session_id: &str) -> StoreResult<Vec<ChatSummary>> {
        let rows = messages::chats(&self.db, session_id)
            .await
            .map_err(failed)?;
        let states = chat_states::list(&self.db, session_id)
            .await
            .map_err(failed)?;
        let mut chats: Vec<ChatSummary> = rows.into_iter().filter_map(summary).collect();
        merge_states(&mut chats, states);
        Ok(chats)
    }

    async fn contact_names(&self, session_id: &str) -> StoreResult<Vec<(String, Option<String>)>> {
        let rows = messages::direct_chats(&self.db, session_id)
            .await
            .map_err(failed)?;
        let names = contact_names::list(&self.db, session_id)
            .await
            .map_err(failed)?;
        // Push names name the chats' accounts and add the accounts named without a chat.
        let mut merged: BTreeMap<String, Option<String>> = rows.into_iter().collect();
        for (jid, push_name) in names {
            merged.insert(jid, Some(push_name));
        }
        Ok(merged.into_iter().collect())
    }

    async fn save_push_names(
        &self,
        session_id: &str,
        names: &[(String, String)],
    ) -> StoreResult<()> {
        contact_names::upsert(&self.db, session_id, names)
            .await
            .map_err(failed)
    }

    async fn message(&self, session_id: &str, id: &str) -> StoreResult<Option<StoredMessage>> {
        let row = messages::find(&self.db, session_id, id)
            .await
            .map_err(failed)?;
        Ok(row.map(stored_message))
    }

    async fn live_statuses(
        &self,
        session_id: &str,
        contact: Option<&Jid>,
        now_ms: i64,
    ) -> StoreResult<Vec<StatusUpdate>> {
        // One contact's posts are those received from it; without one, everything the account sees.
        let direction = contact.map(|_| StatusDirection::Incoming);
        let contact = contact.map(|c| c.to_string());
        let rows =
            status_updates::live(&self.db, session_id, direction, now_ms, contact.as_deref())
                .await
                .map_err(failed)?;
        Ok(rows
            .into_iter()
            .filter_map(|(id, contact, kind, caption, has_media, posted, expires)| {
                Some(StatusUpdate {
                    status_id: id,
                    contact: Jid::parse(&contact).ok()?,
                    kind: serde_json::from_value(serde_json::json!(kind))
                        .unwrap_or(MessageType::Unknown),
                    caption,
                    has_media,
                    posted_at: posted / 1000,
                    expires_at: expires / 1000,
                    media: None,
                })
            })
            .collect())
    }

    async fn status_recipients(
        &self,
        session_id: &str,
        status_id: &str,
    ) -> StoreResult<Option<Vec<Jid>>> {
        let row = status_updates::recipients(&self.db, session_id, status_id)
            .await
            .map_err(failed)?;
        Ok(row.map(|recipients| {
            recipients
                .as_deref()
                .and_then(|r| serde_json::from_str(r).ok())
                .unwrap_or_default()
        }))
    }

    async fn save_credentials(
        &self,
        session_id: &str,
        kind: EngineKind,
        account: &LinkedAccount,
    ) -> StoreResult<()> {
        let text = crate::store::to_json(account).map_err(failed)?;
        sessions::save_engine_auth(&self.db, session_id, kind.as_str(), &text)
            .await
            .map_err(failed)
    }
}

fn stored_message(row: messages::MessageRow) -> StoredMessage {
    StoredMessage {
        from_me: row.direction == "outgoing",
        wa_message_id: row.wa_message_id,
        chat_id: row.chat_id,
        from_jid: row.from_jid,
        author: row.author,
        kind: row.kind,
        body: row.body,
        timestamp: row.timestamp,
        media: row.media,
        extra: row.extra,
    }
}

fn summary((chat, name, ts, unread, last): messages::ChatRow) -> Option<ChatSummary> {
    let id = Jid::parse(&chat).ok()?;
    Some(ChatSummary {
        name: name.unwrap_or_else(|| id.user().to_string()),
        id,
        archived: false,
        pinned: false,
        muted: false,
        mute_expiration: 0,
        unread_count: u32::try_from(unread).unwrap_or(0),
        timestamp: ts,
        last_message: last,
    })
}

/// Lays what history sync said about each chat (name, flags, time) over the message-derived list, and
/// adds the chats history named without any stored message. Newest first, as before.
fn merge_states(chats: &mut Vec<ChatSummary>, states: Vec<ChatStateRow>) {
    for state in states {
        let Ok(id) = Jid::parse(&state.chat_id) else {
            continue;
        };
        let at = state.last_message_at.unwrap_or(0);
        match chats.iter_mut().find(|c| c.id == id) {
            Some(chat) => {
                if let Some(name) = state.name {
                    chat.name = name;
                }
                chat.timestamp = chat.timestamp.max(at);
                chat.archived = state.archived;
                chat.pinned = state.pinned;
                chat.muted = state.muted;
                chat.mute_expiration = state.mute_expiration;
            }
            None => chats.push(ChatSummary {
                name: state.name.unwrap_or_else(|| id.user().to_string()),
                id,
                archived: state.archived,
                pinned: state.pinned,
                muted: state.muted,
                mute_expiration: state.mute_expiration,
                unread_count: u32::try_from(state.unread_count).unwrap_or(0),
                timestamp: at,
                last_message: None,
            }),
        }
    }
    chats.sort_by_key(|c| std::cmp::Reverse(c.timestamp));
}
