//! Status (story) rows: the session's own posts (with their media, to serve it again) and the statuses it
//! receives (`EngineEvent::Status`). Maps engine records to `status_updates` rows, which the event path's
//! one writer (`messaging/record.rs` -> `messaging/commit.rs`) writes: a received status in the same
//! transaction as its `status.received` outbox rows. Reads media back; the SQL is in
//! `store/status_updates.rs`.

use base64::Engine as _;
use serde_json::json;
use wagate_proto::Jid;

use crate::engine::StatusUpdate;
use crate::media::{MediaStore, StoredMedia};
use crate::store::status_updates::{self, NewStatus, StatusDirection};
use crate::store::{DataPool, StoreResult, now_ms};

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
        media_key: None,
        recipients: None,
        posted_at_ms: update.posted_at.saturating_mul(1000),
        expires_at_ms: update.expires_at.saturating_mul(1000),
    }
}

/// Keeps the media of a received status in the media store (the bytes the engine downloaded, or the
/// session's copy of the object it names), before its row is recorded. A store that cannot take it leaves the status without media, logged.
pub(crate) async fn store_received_media(
    media: &MediaStore,
    session_id: &str,
    update: &StatusUpdate,
) -> Option<StoredMedia> {
    let m = update.media.as_ref()?;
    let file = m.stored.as_deref().map(|f| (f.key.as_str(), f.size));
    match media.keep_received(session_id, file, &m.data).await {
        Ok(Some(stored)) => Some(stored),
        Ok(None) => {
            tracing::warn!(session_id, status_id = %update.status_id, "received status media object missing");
            None
        }
        Err(err) => {
            tracing::warn!(session_id, status_id = %update.status_id, error = %err, "received status media not stored");
            None
        }
    }
}

/// The row of a status a contact posted and this session may see, pointing at its media object when
/// `store_received_media` stored one.
pub(crate) fn received_row(
    session_id: &str,
    update: &StatusUpdate,
    stored: Option<&StoredMedia>,
) -> NewStatus {
    let mut new = row(session_id, update, StatusDirection::Incoming);
    if let (Some(m), Some(stored)) = (&update.media, stored) {
        new.media = Some(media_meta(&m.mimetype, stored));
        new.media_key = Some(stored.key.clone());
    }
    new
}

fn media_meta(mimetype: &str, stored: &StoredMedia) -> String {
    json!({ "mimetype": mimetype, "sizeBytes": stored.size }).to_string()
}

/// The row of the session's own post, with its media (`mimetype` and the object already in the media
/// store) and audience.
pub(crate) fn own_row(
    session_id: &str,
    update: &StatusUpdate,
    media: Option<(&str, &StoredMedia)>,
    recipients: &[Jid],
) -> NewStatus {
    let mut new = row(session_id, update, StatusDirection::Outgoing);
    if let Some((mimetype, stored)) = media {
        new.media = Some(media_meta(mimetype, stored));
        new.media_key = Some(stored.key.clone());
    }
    new.recipients = Some(json!(recipients).to_string());
    new
}

/// Where a status's media is: an object of the media store, or (a row not moved yet) inline.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum StatusMedia {
    Stored { mimetype: String, key: String },
    Inline { mimetype: String, bytes: Vec<u8> },
}

/// The stored media of a status; `None` when there is none.
pub(crate) async fn media(
    db: &DataPool,
    session_id: &str,
    status_id: &str,
) -> StoreResult<Option<StatusMedia>> {
    let Some((text, key)) = status_updates::media(db, session_id, status_id).await? else {
        return Ok(None);
    };
    let value: serde_json::Value = crate::store::from_json(&text)?;
    let mimetype = value["mimetype"]
        .as_str()
        .unwrap_or("application/octet-stream")
        .to_string();
    if let Some(key) = key {
        return Ok(Some(StatusMedia::Stored { mimetype, key }));
    }
    let bytes = value["data"]
        .as_str()
        .and_then(|d| base64::engine::general_purpose::STANDARD.decode(d).ok());
    Ok(bytes.map(|bytes| StatusMedia::Inline { mimetype, bytes }))
}

/// Rows moved per batch by `move_inline_media`.
const MOVE_BATCH: i64 = 50;

/// Moves status media still held inline as base64 (rows written before migration 0060) into the media
/// store, then points each row at its object. Idempotent and safe on several nodes at once (objects are
/// content-addressed; a row already moved is left alone). A storage failure stops the pass with the
/// rows untouched, to be retried at the next boot. Returns how many rows moved.
pub(crate) async fn move_inline_media(db: &DataPool, media: &MediaStore) -> anyhow::Result<u64> {
    let mut moved = 0u64;
    loop {
        let rows = status_updates::inline_media(db, MOVE_BATCH).await?;
        if rows.is_empty() {
            return Ok(moved);
        }
        let mut progressed = false;
        for row in rows {
            let value: serde_json::Value = serde_json::from_str(&row.media).unwrap_or_default();
            let mimetype = value["mimetype"]
                .as_str()
                .unwrap_or("application/octet-stream");
            let Some(bytes) = value["data"]
                .as_str()
                .and_then(|d| base64::engine::general_purpose::STANDARD.decode(d).ok())
            else {
                // No usable payload: keep the metadata, mark it moved so it is not retried forever.
                let meta = json!({ "mimetype": mimetype, "sizeBytes": 0 }).to_string();
                status_updates::set_media_key(db, &row.id, &meta, "").await?;
                progressed = true;
                continue;
            };
            let stored = media.put_bytes(&row.session_id, &bytes).await?;
            let meta = json!({ "mimetype": mimetype, "sizeBytes": stored.size }).to_string();
            status_updates::set_media_key(db, &row.id, &meta, &stored.key).await?;
            moved += 1;
            progressed = true;
        }
        if !progressed {
            return Ok(moved);
        }
    }
}

/// A deleted status: its row stays as a tombstone (no longer live, no media), see `status_updates::retire`.
pub(crate) async fn forget(db: &DataPool, session_id: &str, status_id: &str) -> StoreResult<()> {
    status_updates::retire(db, session_id, status_id, now_ms()).await
}
