//! The `message_reactions` table: the current reaction of each sender on a stored message.
//! Written inside the reaction event's transaction; an empty emoji deletes the sender's row.

use super::{DataPool, DataTx, StoreError, StoreResult, execute_tx, on_pool};

const UPSERT: &str = "INSERT INTO message_reactions (session_id, wa_message_id, chat_id, sender_id, emoji, \
     timestamp) VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (session_id, wa_message_id, sender_id) \
     DO UPDATE SET emoji = excluded.emoji, timestamp = excluded.timestamp";
const DELETE: &str =
    "DELETE FROM message_reactions WHERE session_id = $1 AND wa_message_id = $2 AND sender_id = $3";
const LIST: &str = "SELECT * FROM message_reactions WHERE session_id = $1 AND wa_message_id = $2 \
     ORDER BY timestamp, sender_id";

#[derive(Debug, Clone, PartialEq, sqlx::FromRow)]
pub(crate) struct ReactionRow {
    pub session_id: String,
    pub wa_message_id: String,
    pub chat_id: String,
    pub sender_id: String,
    pub emoji: String,
    /// Unix seconds.
    pub timestamp: i64,
}

/// Sets (or with an empty emoji removes) the sender's reaction.
pub(crate) async fn apply(tx: &mut DataTx, r: &ReactionRow) -> StoreResult<()> {
    if r.emoji.is_empty() {
        execute_tx!(
            tx,
            sqlx::query(DELETE)
                .bind(&r.session_id)
                .bind(&r.wa_message_id)
                .bind(&r.sender_id)
        )?;
    } else {
        execute_tx!(
            tx,
            sqlx::query(UPSERT)
                .bind(&r.session_id)
                .bind(&r.wa_message_id)
                .bind(&r.chat_id)
                .bind(&r.sender_id)
                .bind(&r.emoji)
                .bind(r.timestamp)
        )
        .map_err(|e| StoreError::from(e).in_session(&r.session_id))?;
    }
    Ok(())
}

pub(crate) async fn list(
    db: &DataPool,
    session_id: &str,
    wa_id: &str,
) -> StoreResult<Vec<ReactionRow>> {
    Ok(on_pool!(db, |p| sqlx::query_as(LIST)
        .bind(session_id)
        .bind(wa_id)
        .fetch_all(p)
        .await)?)
}
