//! Chat actions (archive, pin, mute, typing state, clear, delete) through the library's app-state
//! and chat-state APIs, and the chat list, which the library cannot query: it is read from the
//! messages we stored (history sync and live traffic).

use wagate_engine_socket::whatsapp_rust::features::ChatStateType;
use wagate_proto::Jid;

use super::{Client, Store, fail, store_err, wa};
use crate::engine::{ChatState, ChatSummary, EngineResult};
use crate::store::chat_states::{self, ChatStateRow};
use crate::store::with_pool;

/// One row per chat: its name, newest message time and body, and inbound messages not read yet.
const CHATS: &str = "SELECT chat_id, MAX(chat_name) AS name, MAX(timestamp) AS ts, \
     SUM(CASE WHEN direction = 'incoming' AND status <> 'read' THEN 1 ELSE 0 END) AS unread, \
     (SELECT body FROM messages l WHERE l.session_id = $1 AND l.chat_id = m.chat_id \
      ORDER BY l.timestamp DESC, l.id DESC LIMIT 1) AS last_body \
     FROM messages m WHERE session_id = $1 GROUP BY chat_id ORDER BY ts DESC";

type ChatRow = (String, Option<String>, i64, i64, Option<String>);

pub(crate) async fn list(store: Store<'_>) -> EngineResult<Vec<ChatSummary>> {
    let rows: Vec<ChatRow> = with_pool!(store.db, p => sqlx::query_as(CHATS)
        .bind(store.session_id).fetch_all(p).await)
    .map_err(|e| store_err(e.into()))?;
    let states = chat_states::list(store.db, store.session_id)
        .await
        .map_err(store_err)?;
    let mut chats: Vec<ChatSummary> = rows.into_iter().filter_map(summary).collect();
    merge_states(&mut chats, states);
    Ok(chats)
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

fn summary((chat, name, ts, unread, last): ChatRow) -> Option<ChatSummary> {
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

pub(crate) async fn archive(client: &Client, chat: &Jid, archive: bool) -> EngineResult<()> {
    let jid = wa(chat)?;
    let actions = client.chat_actions();
    let done = if archive {
        actions.archive_chat(&jid, None).await
    } else {
        actions.unarchive_chat(&jid, None).await
    };
    done.map_err(fail)
}

pub(crate) async fn pin(client: &Client, chat: &Jid, pin: bool) -> EngineResult<()> {
    let jid = wa(chat)?;
    let actions = client.chat_actions();
    let done = if pin {
        actions.pin_chat(&jid).await
    } else {
        actions.unpin_chat(&jid).await
    };
    done.map_err(fail)
}

/// `Some(0)` mutes indefinitely, `None` unmutes, otherwise until the epoch-ms instant.
pub(crate) async fn mute(client: &Client, chat: &Jid, until_ms: Option<i64>) -> EngineResult<()> {
    let jid = wa(chat)?;
    let actions = client.chat_actions();
    let done = match until_ms {
        None => actions.unmute_chat(&jid).await,
        Some(0) => actions.mute_chat(&jid).await,
        Some(ms) => actions.mute_chat_until(&jid, ms).await,
    };
    done.map_err(fail)
}

pub(crate) async fn set_state(client: &Client, chat: &Jid, state: ChatState) -> EngineResult<()> {
    let kind = match state {
        ChatState::Typing => ChatStateType::Composing,
        ChatState::Recording => ChatStateType::Recording,
        ChatState::Paused => ChatStateType::Paused,
    };
    client
        .chatstate()
        .send(&wa(chat)?, kind)
        .await
        .map_err(fail)
}

/// Clears the messages but keeps the chat (starred messages and media kept, as WA Web's default).
pub(crate) async fn clear(client: &Client, chat: &Jid) -> EngineResult<()> {
    client
        .chat_actions()
        .clear_chat(&wa(chat)?, false, false, None)
        .await
        .map_err(fail)
}

pub(crate) async fn delete(client: &Client, chat: &Jid) -> EngineResult<()> {
    client
        .chat_actions()
        .delete_chat(&wa(chat)?, false, None)
        .await
        .map_err(fail)
}
