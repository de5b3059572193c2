//! Idempotent single sends: the first successful answer to a `(session, Idempotency-Key)` is kept for
//! 24 h and replayed (status and body) for the same request; the same key with a different request is
//! refused (422). The HTTP layer captures and replays the bytes; this module owns the rules.

use sha2::{Digest, Sha256};

use super::MessagingService;
use super::error::{MessagingError, MessagingResult};
use crate::store::idempotency::{self as store, StoredReply};
use crate::store::now_ms;

pub(crate) const TTL_MS: i64 = 24 * 3600 * 1000;
pub(crate) const MAX_KEY_LEN: usize = 255;

/// Fingerprint of a request: route and exact body bytes.
pub(crate) fn request_hash(path: &str, body: &[u8]) -> String {
    let mut hasher = Sha256::new();
    hasher.update(path.as_bytes());
    hasher.update([0]);
    hasher.update(body);
    hex::encode(hasher.finalize())
}

impl MessagingService {
    /// The stored first answer for this key, if any; 422 when the key was used for another request.
    pub(crate) async fn replay(
        &self,
        session_id: &str,
        key: &str,
        hash: &str,
    ) -> MessagingResult<Option<(u16, String)>> {
        if key.is_empty() || key.len() > MAX_KEY_LEN {
            return Err(MessagingError::BadInput(format!(
                "Idempotency-Key must be 1-{MAX_KEY_LEN} characters"
            )));
        }
        let Some(stored) = store::get(&self.db, session_id, key, now_ms() - TTL_MS).await? else {
            return Ok(None);
        };
        if stored.request_hash != hash {
            return Err(MessagingError::Unprocessable(
                "Idempotency-Key was already used with a different request".into(),
            ));
        }
        Ok(Some((
            u16::try_from(stored.status_code).unwrap_or(200),
            stored.response,
        )))
    }

    /// Keeps the first successful answer.
    pub(crate) async fn remember(
        &self,
        session_id: &str,
        key: &str,
        hash: &str,
        status: u16,
        body: String,
    ) -> MessagingResult<()> {
        let reply = StoredReply {
            request_hash: hash.to_string(),
            status_code: i32::from(status),
            response: body,
        };
        let now = now_ms();
        store::put(&self.db, session_id, key, &reply, now, now - TTL_MS).await?;
        Ok(())
    }
}
