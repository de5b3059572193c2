//! Media of received messages: downloaded by the page (wa-js), read back in slices into the node's media
//! store, so a large file never crosses the DevTools protocol as one string nor sits whole in memory.

use std::io::Write;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use serde_json::{Value, json};
use wagate_engine_api::media::EngineMedia;
use wagate_engine_api::{ReceivedMedia, StoredFile};

use crate::BrowserSession;

/// One CDP round trip carries this much (a third more as base64).
const SLICE_BYTES: u64 = 1024 * 1024;

/// The message's media in the store, or `None` (logged) when it has none or it could not be kept: the
/// message itself is delivered either way.
pub(super) async fn received_media(
    session: &BrowserSession,
    media: &dyn EngineMedia,
    raw: &Value,
) -> Option<ReceivedMedia> {
    if !raw["hasMedia"].as_bool().unwrap_or(false) {
        return None;
    }
    let id = raw["id"].as_str()?;
    match download(session, media, raw, id).await {
        Ok(received) => Some(received),
        Err(err) => {
            tracing::warn!(message_id = id, error = %err, "received media not stored");
            None
        }
    }
}

async fn download(
    session: &BrowserSession,
    media: &dyn EngineMedia,
    raw: &Value,
    id: &str,
) -> Result<ReceivedMedia, String> {
    let opened = session
        .call("mediaOpen", &[json!(id)])
        .await
        .map_err(|e| e.to_string())?;
    let token = opened["token"]
        .as_str()
        .ok_or("the page answered no download token")?;
    let copied = copy(session, media, &opened, token).await;
    // The page holds the blob until closed; a failed close only leaves it to the page's next reload.
    if let Err(err) = session.call("mediaClose", &[json!(token)]).await {
        tracing::debug!(message_id = id, error = %err, "page download not closed");
    }
    let stored = copied?;
    let data = media
        .inline_copy(&stored)
        .await
        .map_err(|e| e.to_string())?;
    let mimetype = [&raw["mimetype"], &opened["mimetype"]]
        .into_iter()
        .find_map(|m| m.as_str().filter(|m| !m.is_empty()))
        .unwrap_or("application/octet-stream");
    Ok(ReceivedMedia {
        mimetype: mimetype.to_string(),
        filename: raw["filename"].as_str().map(str::to_string),
        data,
        stored: Some(Box::new(stored)),
    })
}

/// Reads the open download slice by slice into a new upload; refuses it before reading when it is over
/// `MEDIA_DOWNLOAD_MAX_BYTES`.
async fn copy(
    session: &BrowserSession,
    media: &dyn EngineMedia,
    opened: &Value,
    token: &str,
) -> Result<StoredFile, String> {
    let size = opened["size"]
        .as_u64()
        .ok_or("the page answered no download size")?;
    let max = media.max_bytes();
    if size > max {
        return Err(format!(
            "size {size} exceeds MEDIA_DOWNLOAD_MAX_BYTES ({max})"
        ));
    }
    let mut upload = media.begin().map_err(|e| e.to_string())?;
    let mut offset = 0;
    while offset < size {
        let length = SLICE_BYTES.min(size - offset);
        let slice = session
            .call("mediaRead", &[json!(token), json!(offset), json!(length)])
            .await
            .map_err(|e| e.to_string())?;
        let bytes = BASE64
            .decode(
                slice
                    .as_str()
                    .ok_or("the page answered a slice that is not text")?,
            )
            .map_err(|e| format!("slice at {offset}: {e}"))?;
        if bytes.is_empty() {
            return Err(format!(
                "the page's download ended at {offset} of {size} bytes"
            ));
        }
        upload.write_all(&bytes).map_err(|e| e.to_string())?;
        offset += bytes.len() as u64;
    }
    media.finish(upload).await.map_err(|e| e.to_string())
}
