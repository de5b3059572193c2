//! Chat actions (archive, pin, mute, typing state, clear, delete) through the library's app-state
//! and chat-state APIs, and the chat list, which the library cannot query: the node's store answers it
//! from the messages it stored (history sync and live traffic).

use crate::whatsapp_rust::features::ChatStateType;
use wagate_proto::Jid;

use super::{Client, Store, fail, wa};
use wagate_engine_api::{ChatState, ChatSummary, EngineResult};

/// The chat list from the node's store (stored messages overlaid with what history sync said).
pub(crate) async fn list(store: Store<'_>) -> EngineResult<Vec<ChatSummary>> {
    Ok(store.db.chats(store.session_id).await?)
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
