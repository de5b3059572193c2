//! The `contact_names` table: the push name the network reported for each account (history-sync
//! pushnames, live messages and name changes), so the contact list can name accounts the session has no
//! chat with yet.

use super::{DataPool, StoreError, StoreResult, now_ms, on_pool};

const UPSERT: &str = "INSERT INTO contact_names (session_id, jid, push_name, updated_at) \
     VALUES ($1, $2, $3, $4) ON CONFLICT (session_id, jid) \
     DO UPDATE SET push_name = excluded.push_name, updated_at = excluded.updated_at";
const LIST: &str = "SELECT jid, push_name FROM contact_names WHERE session_id = $1 ORDER BY jid";

/// Sets the push names of `(jid, name)` pairs in one transaction.
pub(crate) async fn upsert(
    db: &DataPool,
    session_id: &str,
    names: &[(String, String)],
) -> StoreResult<()> {
    if names.is_empty() {
        return Ok(());
    }
    let now = now_ms();
    let mut tx = super::begin(db).await?;
    for (jid, name) in names {
        super::execute_tx!(
            &mut tx,
            sqlx::query(UPSERT)
                .bind(session_id)
                .bind(jid)
                .bind(name)
                .bind(now)
        )
        .map_err(|e| StoreError::from(e).in_session(session_id))?;
    }
    Ok(tx.commit().await?)
}

/// `(jid, push name)` of every named account of the session.
pub(crate) async fn list(db: &DataPool, session_id: &str) -> StoreResult<Vec<(String, String)>> {
    Ok(on_pool!(db, |p| sqlx::query_as(LIST)
        .bind(session_id)
        .fetch_all(p)
        .await)?)
}
