//! `MsgSecretStore` over `socket_msg_secrets`: the 32-byte secrets of messages (ours and history) that
//! later poll votes, reactions and edits are decrypted with, with their retention deadline.

use async_trait::async_trait;
use whatsapp_rust::wacore::store::error::Result;
use whatsapp_rust::wacore::store::traits::{MsgSecretEntry, MsgSecretStore};

use super::{SqlBackend, in_tx, on_db};

/// The conflict merge of the trait: `expires_at` keeps the later deadline with 0 ("never") winning,
/// `message_ts` keeps the larger value (so an unknown 0 never clobbers a known time). Written with CASE
/// because SQLite spells `GREATEST` as `MAX`.
const PUT_MSG_SECRET: &str = "INSERT INTO socket_msg_secrets \
     (session_id, chat_jid, sender_jid, message_id, secret, expires_at, message_ts) VALUES ($1, $2, $3, $4, $5, $6, $7) \
     ON CONFLICT (session_id, chat_jid, sender_jid, message_id) DO UPDATE SET secret = excluded.secret, \
     expires_at = CASE WHEN socket_msg_secrets.expires_at = 0 OR excluded.expires_at = 0 THEN 0 \
       WHEN excluded.expires_at > socket_msg_secrets.expires_at THEN excluded.expires_at \
       ELSE socket_msg_secrets.expires_at END, \
     message_ts = CASE WHEN excluded.message_ts > socket_msg_secrets.message_ts THEN excluded.message_ts \
       ELSE socket_msg_secrets.message_ts END";
const GET_MSG_SECRET: &str = "SELECT secret, message_ts FROM socket_msg_secrets \
     WHERE session_id = $1 AND chat_jid = $2 AND sender_jid = $3 AND message_id = $4";
const DELETE_EXPIRED: &str = "DELETE FROM socket_msg_secrets \
     WHERE session_id = $1 AND expires_at <> 0 AND expires_at <= $2";

#[async_trait]
impl MsgSecretStore for SqlBackend {
    /// One transaction; entries apply in order, so a key repeated inside the batch merges like two calls.
    async fn put_msg_secrets(&self, entries: Vec<MsgSecretEntry>) -> Result<usize> {
        if entries.is_empty() {
            return Ok(0);
        }
        in_tx!(self, "put_msg_secrets", |tx| {
            for entry in &entries {
                sqlx::query(PUT_MSG_SECRET)
                    .bind(&*self.session_id)
                    .bind(&*entry.chat)
                    .bind(&*entry.sender)
                    .bind(&*entry.msg_id)
                    .bind(entry.secret.as_slice())
                    .bind(entry.expires_at)
                    .bind(entry.message_ts)
                    .execute(&mut *tx)
                    .await?;
            }
            Ok::<(), sqlx::Error>(())
        })?;
        Ok(entries.len())
    }

    async fn get_msg_secret(
        &self,
        chat: &str,
        sender: &str,
        msg_id: &str,
    ) -> Result<Option<Vec<u8>>> {
        Ok(self
            .get_msg_secret_with_ts(chat, sender, msg_id)
            .await?
            .map(|(secret, _)| secret))
    }

    async fn get_msg_secret_with_ts(
        &self,
        chat: &str,
        sender: &str,
        msg_id: &str,
    ) -> Result<Option<(Vec<u8>, i64)>> {
        on_db!(self, "get_msg_secret", |p| sqlx::query_as(GET_MSG_SECRET)
            .bind(&*self.session_id)
            .bind(chat)
            .bind(sender)
            .bind(msg_id)
            .fetch_optional(p)
            .await)
    }

    async fn delete_expired_msg_secrets(&self, cutoff_timestamp: i64) -> Result<u32> {
        let rows = on_db!(self, "delete_expired_msg_secrets", |p| sqlx::query(
            DELETE_EXPIRED
        )
        .bind(&*self.session_id)
        .bind(cutoff_timestamp)
        .execute(p)
        .await
        .map(|r| r.rows_affected()))?;
        Ok(u32::try_from(rows).unwrap_or(u32::MAX))
    }
}
