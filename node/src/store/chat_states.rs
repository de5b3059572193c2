//! The `chat_states` table: per-chat facts the message rows cannot give (the name the phone shows, the
//! unread count, archived/pinned/muted), written from history sync. Read by the socket engine's chat list,
//! which merges them over what it derives from the stored messages.

use super::{DataPool, StoreError, StoreResult, now_ms, on_pool};

/// Only facts the sync carried overwrite a row: `COALESCE(excluded.x, ...)` keeps what a later, thinner
/// chunk (one without a name, say) does not repeat.
const UPSERT: &str = "INSERT INTO chat_states (session_id, chat_id, name, is_group, archived, pinned, \
     muted, mute_expiration, unread_count, last_message_at, updated_at) \
     VALUES ($1, $2, $3, $4, COALESCE($5, FALSE), COALESCE($6, FALSE), COALESCE($7, FALSE), \
     COALESCE($8, 0), COALESCE($9, 0), $10, $11) \
     ON CONFLICT (session_id, chat_id) DO UPDATE SET \
     name = COALESCE(excluded.name, chat_states.name), \
     archived = COALESCE($5, chat_states.archived), pinned = COALESCE($6, chat_states.pinned), \
     muted = COALESCE($7, chat_states.muted), mute_expiration = COALESCE($8, chat_states.mute_expiration), \
     unread_count = COALESCE($9, chat_states.unread_count), \
     last_message_at = CASE WHEN chat_states.last_message_at IS NULL \
       OR excluded.last_message_at > chat_states.last_message_at \
       THEN COALESCE(excluded.last_message_at, chat_states.last_message_at) \
       ELSE chat_states.last_message_at END, \
     updated_at = excluded.updated_at";
const LIST: &str = "SELECT chat_id, name, is_group, archived, pinned, muted, mute_expiration, unread_count, \
     last_message_at FROM chat_states WHERE session_id = $1 ORDER BY chat_id";

/// What history sync says about one chat; `None` = the sync did not say.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct ChatFacts {
    pub chat_id: String,
    pub name: Option<String>,
    pub is_group: bool,
    pub archived: Option<bool>,
    pub pinned: Option<bool>,
    pub muted: Option<bool>,
    /// Epoch milliseconds; 0 = indefinitely.
    pub mute_expiration: Option<i64>,
    pub unread_count: Option<i64>,
    /// Unix seconds.
    pub last_message_at: Option<i64>,
}

/// A stored chat row.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub(crate) struct ChatStateRow {
    pub chat_id: String,
    pub name: Option<String>,
    pub is_group: bool,
    pub archived: bool,
    pub pinned: bool,
    pub muted: bool,
    pub mute_expiration: i64,
    pub unread_count: i32,
    pub last_message_at: Option<i64>,
}

/// Merges one sync chunk's chats in one transaction.
pub(crate) async fn upsert(
    db: &DataPool,
    session_id: &str,
    chats: &[ChatFacts],
) -> StoreResult<()> {
    if chats.is_empty() {
        return Ok(());
    }
    let now = now_ms();
    let mut tx = super::begin(db).await?;
    for c in chats {
        super::execute_tx!(
            &mut tx,
            sqlx::query(UPSERT)
                .bind(session_id)
                .bind(&c.chat_id)
                .bind(&c.name)
                .bind(c.is_group)
                .bind(c.archived)
                .bind(c.pinned)
                .bind(c.muted)
                .bind(c.mute_expiration)
                .bind(c.unread_count.map(|n| i32::try_from(n).unwrap_or(i32::MAX)))
                .bind(c.last_message_at)
                .bind(now)
        )
        .map_err(|e| StoreError::from(e).in_session(session_id))?;
    }
    Ok(tx.commit().await?)
}

pub(crate) async fn list(db: &DataPool, session_id: &str) -> StoreResult<Vec<ChatStateRow>> {
    Ok(on_pool!(db, |p| sqlx::query_as(LIST)
        .bind(session_id)
        .fetch_all(p)
        .await)?)
}
