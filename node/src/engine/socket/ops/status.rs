//! Status posts with recipients (the socket column requires them), the account's and a contact's
//! live statuses read from our `status_updates` rows (the library has no query), and deleting a post
//! (a revoke encrypted to the same recipients, read back from the stored row).

use wagate_engine_socket::build;
use wagate_engine_socket::whatsapp_rust::features::StatusSendOptions;
use wagate_engine_socket::whatsapp_rust::waproto::whatsapp::message::extended_text_message::FontType;
use wagate_proto::Jid;

use super::{Client, Store, fail, now_secs, send, store_err, was};
use crate::engine::{
    EngineError, EngineResult, MediaKind, MediaMessage, MessageType, StatusContent, StatusPost,
    StatusUpdate,
};
use crate::store::with_pool;

/// A status lives 24 hours.
const STATUS_TTL_S: i64 = 24 * 60 * 60;
const DEFAULT_BACKGROUND: u32 = 0xFF1E_6E4F;

pub(crate) async fn post(client: &Client, post: StatusPost) -> EngineResult<StatusUpdate> {
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
            let message = send::upload(client, media, None).await?;
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

const LIVE: &str = "SELECT status_id, contact, type, caption, has_media, posted_at, expires_at \
     FROM status_updates WHERE session_id = $1 AND direction = $2 AND expires_at > $3 \
     AND ($4 IS NULL OR contact = $4) ORDER BY posted_at DESC";

type StatusRow = (String, String, String, Option<String>, bool, i64, i64);

/// Live statuses from our rows: own posts (`contact = None`) or one contact's.
pub(crate) async fn live(
    store: Store<'_>,
    contact: Option<&Jid>,
) -> EngineResult<Vec<StatusUpdate>> {
    let direction = if contact.is_some() {
        "incoming"
    } else {
        "outgoing"
    };
    let now_ms = chrono::Utc::now().timestamp_millis();
    let contact = contact.map(|c| c.to_string());
    let rows: Vec<StatusRow> = with_pool!(store.db, p => sqlx::query_as(LIVE)
        .bind(store.session_id).bind(direction).bind(now_ms).bind(&contact).fetch_all(p).await)
    .map_err(|e| store_err(e.into()))?;
    Ok(rows
        .into_iter()
        .filter_map(|(id, contact, kind, caption, has_media, posted, expires)| {
            Some(StatusUpdate {
                status_id: id,
                contact: Jid::parse(&contact).ok()?,
                kind: serde_json::from_value(serde_json::json!(kind))
                    .unwrap_or(MessageType::Unknown),
                caption,
                has_media,
                posted_at: posted / 1000,
                expires_at: expires / 1000,
                media: None,
            })
        })
        .collect())
}

const RECIPIENTS: &str = "SELECT recipients FROM status_updates \
     WHERE session_id = $1 AND status_id = $2 AND direction = 'outgoing'";

/// Revokes our post for the recipients it was sent to.
pub(crate) async fn delete(client: &Client, store: Store<'_>, status_id: &str) -> EngineResult<()> {
    let row: Option<(Option<String>,)> = with_pool!(store.db, p => sqlx::query_as(RECIPIENTS)
        .bind(store.session_id).bind(status_id).fetch_optional(p).await)
    .map_err(|e| store_err(e.into()))?;
    let (recipients,) =
        row.ok_or_else(|| EngineError::NotFound(format!("Status {status_id} not found")))?;
    let recipients: Vec<Jid> = recipients
        .as_deref()
        .and_then(|r| serde_json::from_str(r).ok())
        .unwrap_or_default();
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
