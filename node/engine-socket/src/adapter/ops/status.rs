//! Status posts with recipients (the socket column requires them), the account's and a contact's
//! live statuses read from our `status_updates` rows (the library has no query), and deleting a post
//! (a revoke encrypted to the same recipients, read back from the stored row).

use crate::build;
use crate::whatsapp_rust::features::StatusSendOptions;
use crate::whatsapp_rust::waproto::whatsapp::message::extended_text_message::FontType;
use wagate_proto::Jid;

use super::{Client, Store, fail, now_secs, send, was};
use wagate_engine_api::media::EngineMedia;
use wagate_engine_api::{
    EngineError, EngineResult, MediaKind, MediaMessage, MessageType, StatusContent, StatusPost,
    StatusUpdate,
};

/// A status lives 24 hours.
const STATUS_TTL_S: i64 = 24 * 60 * 60;
const DEFAULT_BACKGROUND: u32 = 0xFF1E_6E4F;

pub(crate) async fn post(
    client: &Client,
    store: &dyn EngineMedia,
    post: StatusPost,
) -> EngineResult<StatusUpdate> {
    if post.recipients.is_empty() {
        return Err(EngineError::BadInput(
            "recipients must be a non-empty array".into(),
        ));
    }
    let recipients = was(&post.recipients)?;
    let own = client.pn().ok_or(EngineError::NotReady)?.to_non_ad();
    let (kind, caption, has_media, sent) = match post.content {
        StatusContent::Text {
            text,
            background_color,
            font,
        } => {
            let argb = background_color
                .as_deref()
                .and_then(build::status_argb)
                .unwrap_or(DEFAULT_BACKGROUND);
            let font = font_type(font);
            let sent = client
                .status()
                .send_text(&text, argb, font, &recipients, StatusSendOptions::default())
                .await;
            (MessageType::Text, Some(text), false, sent)
        }
        StatusContent::Media {
            kind,
            source,
            mimetype,
            caption,
        } => {
            let media_kind = match kind {
                MessageType::Video => MediaKind::Video,
                MessageType::Audio | MessageType::Voice => MediaKind::Voice,
                _ => MediaKind::Image,
            };
            let media = MediaMessage {
                kind: media_kind,
                source,
                mimetype,
                filename: None,
                caption: caption.clone(),
            };
            let message = send::upload(client, store, media, None).await?;
            let sent = client
                .status()
                .send_raw(message, &recipients, StatusSendOptions::default())
                .await;
            (kind, caption, true, sent)
        }
    };
    let sent = sent.map_err(fail)?;
    let posted_at = now_secs();
    Ok(StatusUpdate {
        status_id: sent.message_id,
        contact: super::wire(&own).ok_or(EngineError::NotReady)?,
        kind,
        caption,
        has_media,
        posted_at,
        media: None,
        expires_at: posted_at + STATUS_TTL_S,
    })
}

/// Live statuses from the node's rows: own posts (`contact = None`) or one contact's.
pub(crate) async fn live(
    store: Store<'_>,
    contact: Option<&Jid>,
) -> EngineResult<Vec<StatusUpdate>> {
    let now_ms = chrono::Utc::now().timestamp_millis();
    Ok(store
        .db
        .live_statuses(store.session_id, contact, now_ms)
        .await?)
}

/// Revokes our post for the recipients it was sent to.
pub(crate) async fn delete(client: &Client, store: Store<'_>, status_id: &str) -> EngineResult<()> {
    let recipients = store
        .db
        .status_recipients(store.session_id, status_id)
        .await?
        .ok_or_else(|| EngineError::NotFound(format!("Status {status_id} not found")))?;
    client
        .status()
        .revoke(status_id, &was(&recipients)?, StatusSendOptions::default())
        .await
        .map_err(fail)?;
    Ok(())
}

/// The status font index (0-5 in WA Web's picker) as the protocol enum; unknown values fall back to
/// the system font.
fn font_type(font: Option<u8>) -> FontType {
    match font {
        Some(1) => FontType::SYSTEM_TEXT,
        Some(2) => FontType::FB_SCRIPT,
        Some(3) => FontType::SYSTEM_BOLD,
        Some(4) => FontType::MORNINGBREEZE_REGULAR,
        Some(5) => FontType::CALISTOGA_REGULAR,
        _ => FontType::SYSTEM,
    }
}
