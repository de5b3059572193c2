//! Forgetting a chat's stored history once the network has cleared or deleted the chat: its `messages`
//! rows (the search index goes with them: FTS5 triggers on SQLite, a generated column on PostgreSQL), the
//! reactions and poll votes recorded on them, and on delete the chat's `chat_states` row. Media objects
//! are not touched: they are content-addressed per session (`{sessionId}/{sha256}`), so one object may
//! back messages of other chats, statuses or sends in flight.

use super::{DataPool, StoreResult, execute_tx};

const DELETE_MESSAGES: &str = "DELETE FROM messages WHERE session_id = $1 AND chat_id = $2";
const DELETE_REACTIONS: &str =
    "DELETE FROM message_reactions WHERE session_id = $1 AND chat_id = $2";
const DELETE_VOTES: &str = "DELETE FROM poll_votes WHERE session_id = $1 AND chat_id = $2";
const DELETE_STATE: &str = "DELETE FROM chat_states WHERE session_id = $1 AND chat_id = $2";

/// What goes besides the messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Forget {
    /// The chat stays in the list: only its history goes.
    History,
    /// The chat itself goes, with what history sync recorded about it.
    Chat,
}

/// Deletes the chat's stored history in one transaction; answers how many message rows went.
pub(crate) async fn forget(
    db: &DataPool,
    session_id: &str,
    chat_id: &str,
    what: Forget,
) -> StoreResult<u64> {
    let mut tx = super::begin(db).await?;
    for sql in [DELETE_REACTIONS, DELETE_VOTES] {
        execute_tx!(&mut tx, sqlx::query(sql).bind(session_id).bind(chat_id))?;
    }
    if what == Forget::Chat {
        execute_tx!(
            &mut tx,
            sqlx::query(DELETE_STATE).bind(session_id).bind(chat_id)
        )?;
    }
    let deleted = execute_tx!(
        &mut tx,
        sqlx::query(DELETE_MESSAGES).bind(session_id).bind(chat_id)
    )?;
    let committed = tx.commit().await;
    // Raised after the commit, and also when it failed (it may have committed): whole pages read before
    // must not serve the deleted rows.
    super::message_writes::changed([session_id]);
    committed?;
    Ok(deleted)
}
