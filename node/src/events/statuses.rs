//! Status (story) rows: the session's own posts (with their media, to serve it again) and the statuses it
//! receives (`EngineEvent::Status`). Maps engine records to `status_updates` rows, which the event path's
//! one writer (`messaging/record.rs` -> `messaging/commit.rs`) writes: a received status in the same
//! transaction as its `status.received` outbox rows. Reads media back; the SQL is in
//! `store/status_updates.rs`.

use base64::Engine as _;
use serde_json::json;
use wagate_proto::Jid;

use crate::engine::StatusUpdate;
use crate::store::status_updates::{self, NewStatus, StatusDirection};
use crate::store::{DataPool, StoreResult};

fn row(session_id: &str, update: &StatusUpdate, direction: StatusDirection) -> NewStatus {
    NewStatus {
        session_id: session_id.to_string(),
        status_id: update.status_id.clone(),
        contact: update.contact.to_string(),
        direction,
        kind: serde_json::to_value(update.kind)
            .ok()
            .and_then(|v| v.as_str().map(str::to_string))
            .unwrap_or_else(|| "unknown".into()),
        caption: update.caption.clone(),
        has_media: update.has_media,
        media: None,
        recipients: None,
        posted_at_ms: update.posted_at.saturating_mul(1000),
        expires_at_ms: update.expires_at.saturating_mul(1000),
    }
}

/// The row of a status a contact posted and this session may see.
pub(crate) fn received_row(session_id: &str, update: &StatusUpdate) -> NewStatus {
    let mut new = row(session_id, update, StatusDirection::Incoming);
    new.media = update
        .media
        .as_ref()
        .map(|m| media_json(&m.mimetype, &m.data));
    new
}

fn media_json(mimetype: &str, bytes: &[u8]) -> String {
    let data = base64::engine::general_purpose::STANDARD.encode(bytes);
    json!({ "mimetype": mimetype, "data": data }).to_string()
}

/// The row of the session's own post, with its media (`mimetype`, bytes) and audience.
pub(crate) fn own_row(
    session_id: &str,
    update: &StatusUpdate,
    media: Option<(&str, &[u8])>,
    recipients: &[Jid],
) -> NewStatus {
    let mut new = row(session_id, update, StatusDirection::Outgoing);
    new.media = media.map(|(mimetype, bytes)| media_json(mimetype, bytes));
    new.recipients = Some(json!(recipients).to_string());
    new
}

/// The stored media of a status as (mimetype, bytes); `None` when there is none.
pub(crate) async fn media(
    db: &DataPool,
    session_id: &str,
    status_id: &str,
) -> StoreResult<Option<(String, Vec<u8>)>> {
    let Some(text) = status_updates::media(db, session_id, status_id).await? else {
        return Ok(None);
    };
    let value: serde_json::Value = crate::store::from_json(&text)?;
    let mimetype = value["mimetype"]
        .as_str()
        .unwrap_or("application/octet-stream");
    let bytes = value["data"]
        .as_str()
        .and_then(|d| base64::engine::general_purpose::STANDARD.decode(d).ok());
    Ok(bytes.map(|b| (mimetype.to_string(), b)))
}

pub(crate) async fn forget(db: &DataPool, session_id: &str, status_id: &str) -> StoreResult<()> {
    status_updates::delete(db, session_id, status_id).await
}
