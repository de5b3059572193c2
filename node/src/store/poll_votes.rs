//! The `poll_votes` table: each voter's current selection on a poll, as option names (decrypted by the
//! engine). A voter's newer vote replaces the older one; an empty selection withdraws it.

use super::{DataPool, StoreError, StoreResult, execute, to_json};
#[cfg(test)]
use super::{from_json, on_pool};

const UPSERT: &str = "INSERT INTO poll_votes (session_id, poll_message_id, chat_id, voter, options, timestamp) \
     VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (session_id, poll_message_id, voter) \
     DO UPDATE SET options = excluded.options, timestamp = excluded.timestamp \
     WHERE excluded.timestamp >= poll_votes.timestamp";
const DELETE: &str = "DELETE FROM poll_votes WHERE session_id = $1 AND poll_message_id = $2 AND voter = $3 \
     AND timestamp <= $4";
#[cfg(test)]
const LIST: &str = "SELECT voter, options, timestamp FROM poll_votes \
     WHERE session_id = $1 AND poll_message_id = $2 ORDER BY voter";

/// One voter's selection.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct PollVoteRow {
    pub poll_message_id: String,
    pub chat_id: String,
    pub voter: String,
    pub options: Vec<String>,
    /// Unix seconds of the vote; an older vote arriving late does not overwrite a newer one.
    pub timestamp: i64,
}

pub(crate) async fn apply(db: &DataPool, session_id: &str, vote: &PollVoteRow) -> StoreResult<()> {
    if vote.options.is_empty() {
        execute!(
            db,
            sqlx::query(DELETE)
                .bind(session_id)
                .bind(&vote.poll_message_id)
                .bind(&vote.voter)
                .bind(vote.timestamp)
        )?;
    } else {
        execute!(
            db,
            sqlx::query(UPSERT)
                .bind(session_id)
                .bind(&vote.poll_message_id)
                .bind(&vote.chat_id)
                .bind(&vote.voter)
                .bind(to_json(&vote.options)?)
                .bind(vote.timestamp)
        )
        .map_err(|e| StoreError::from(e).in_session(session_id))?;
    }
    Ok(())
}

/// Every current vote on a poll, by voter (no route reads votes yet: the spec has no field for them).
#[cfg(test)]
pub(crate) async fn list(
    db: &DataPool,
    session_id: &str,
    poll_message_id: &str,
) -> StoreResult<Vec<(String, Vec<String>, i64)>> {
    let rows: Vec<(String, String, i64)> = on_pool!(db, |p| sqlx::query_as(LIST)
        .bind(session_id)
        .bind(poll_message_id)
        .fetch_all(p)
        .await)?;
    rows.into_iter()
        .map(|(voter, options, ts)| Ok((voter, from_json(&options)?, ts)))
        .collect()
}
