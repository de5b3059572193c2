//! Sending: every `OutgoingMessage` content becomes one protocol message (built in the leaf crate's
//! `build`), with its quote and mentions, media uploaded through the library first. The answer is the
//! raw key id (the spec's socket-engine message id) and the send time.

use wagate_engine_socket::build::{self, Quote, wa as proto};
use wagate_engine_socket::whatsapp_rust::upload::UploadOptions;

use super::{Client, Store, author_of, fail, fail_any, now_secs, stored, wa, was};
use crate::engine::{
    EngineError, EngineResult, Location, MediaKind, MediaMessage, MediaSource, MessageContent,
    MessageType, OutgoingMessage, Poll, SentMessage,
};
use crate::store::messages::MessageRow;

pub(crate) async fn send(
    client: &Client,
    store: Store<'_>,
    msg: OutgoingMessage,
) -> EngineResult<SentMessage> {
    let to = wa(&msg.to)?;
    let quote = match msg.quoted_id.as_deref() {
        Some(id) => Some(quote(client, store, id).await?),
        None => None,
    };
    let mentions = was(&msg.mentions)?;
    let ctx = build::context(&to, &mentions, quote.as_ref());
    let message = content(client, msg.content, ctx).await?;
    let sent = client.send_message(to, message).await.map_err(fail)?;
    Ok(SentMessage {
        id: sent.message_id,
        timestamp: now_secs(),
    })
}

/// The quoted message from our store; a quote we cannot resolve is the spec's 404.
async fn quote(client: &Client, store: Store<'_>, id: &str) -> EngineResult<Quote> {
    let row = stored(store, id)
        .await?
        .ok_or_else(|| EngineError::NotFound(format!("Message {id} not found")))?;
    let chat =
        wagate_proto::Jid::parse(&row.chat_id).map_err(|e| EngineError::NotFound(e.to_string()))?;
    Ok(Quote {
        id: row.wa_message_id.clone(),
        sender: author_of(client, &chat, &row)?,
        chat: wa(&chat)?,
        message: build::quoted_stand_in(row.body.as_deref().unwrap_or_default()),
    })
}

async fn content(
    client: &Client,
    content: MessageContent,
    ctx: Option<proto::ContextInfo>,
) -> EngineResult<proto::Message> {
    Ok(match content {
        // The preview fields need a page fetch through the session's proxy: sent without one.
        MessageContent::Text { body, .. } => build::text(&body, ctx, None),
        MessageContent::Media(media) => upload(client, media, ctx).await?,
        MessageContent::Location(loc) => {
            build::location(loc.latitude, loc.longitude, loc.description.as_deref(), ctx)
        }
        MessageContent::Contact(card) => build::contact(&card.name, &card.vcard(), ctx),
        MessageContent::Poll(poll) => {
            let secret: [u8; build::POLL_SECRET_LEN] = rand::random();
            build::poll(&poll.name, &poll.options, poll.allow_multiple, secret, ctx)
        }
        MessageContent::Product { product_id, body } => {
            // The catalog query (to fill title and price) is not built yet: the product is named
            // by id in the account's own catalog.
            let owner = client.pn().ok_or(EngineError::NotReady)?.to_non_ad();
            let snapshot = build::ProductSnapshot {
                id: product_id,
                ..Default::default()
            };
            build::product(&snapshot, &owner.to_string(), body.as_deref(), ctx)
        }
    })
}

/// Uploads the bytes through the library (it encrypts them) and builds the media message.
pub(crate) async fn upload(
    client: &Client,
    media: MediaMessage,
    ctx: Option<proto::ContextInfo>,
) -> EngineResult<proto::Message> {
    let bytes = media
        .source
        .load()
        .await
        .map_err(|e| EngineError::BadInput(format!("media could not be read: {e}")))?;
    let kind = leaf_kind(media.kind);
    let uploaded = client
        .upload(bytes, build::media_type(kind), UploadOptions::default())
        .await
        .map_err(|e| fail_any(&e))?;
    let opts = build::MediaOptions {
        mimetype: Some(media.mimetype),
        caption: media.caption,
        filename: media.filename,
        context: ctx,
    };
    Ok(build::media(kind, uploaded.into(), opts))
}

pub(crate) fn leaf_kind(kind: MediaKind) -> build::MediaKind {
    match kind {
        MediaKind::Image => build::MediaKind::Image,
        MediaKind::Video => build::MediaKind::Video,
        MediaKind::Audio => build::MediaKind::Audio,
        MediaKind::Voice => build::MediaKind::Voice,
        MediaKind::Document => build::MediaKind::Document,
        MediaKind::Sticker => build::MediaKind::Sticker,
    }
}

/// The content of a stored row as a protocol message (for forwards): text-like rows from the body,
/// location and poll from the row's `extra`, media re-uploaded from the media directory.
pub(crate) async fn stored_content(
    client: &Client,
    row: &MessageRow,
    media_dir: Option<&std::path::Path>,
) -> EngineResult<proto::Message> {
    let body = row.body.clone().unwrap_or_default();
    let extra: serde_json::Value = row
        .extra
        .as_deref()
        .and_then(|e| serde_json::from_str(e).ok())
        .unwrap_or_default();
    let kind: MessageType =
        serde_json::from_value(serde_json::json!(row.kind)).unwrap_or(MessageType::Unknown);
    if kind.has_media() {
        let media = stored_media(row, kind, media_dir)?;
        return upload(client, media, None).await;
    }
    Ok(match kind {
        MessageType::Location => {
            match serde_json::from_value::<Location>(extra["location"].clone()) {
                Ok(loc) => build::location(
                    loc.latitude,
                    loc.longitude,
                    loc.description.as_deref(),
                    None,
                ),
                Err(_) => build::text(&body, None, None),
            }
        }
        MessageType::Contact => build::contact(&vcard_name(&body), &body, None),
        MessageType::Poll => match serde_json::from_value::<Poll>(extra["poll"].clone()) {
            Ok(poll) => build::poll(
                &poll.name,
                &poll.options,
                poll.allow_multiple,
                rand::random(),
                None,
            ),
            Err(_) => build::text(&body, None, None),
        },
        _ => build::text(&body, None, None),
    })
}

fn stored_media(
    row: &MessageRow,
    kind: MessageType,
    media_dir: Option<&std::path::Path>,
) -> EngineResult<MediaMessage> {
    let meta: serde_json::Value = row
        .media
        .as_deref()
        .and_then(|m| serde_json::from_str(m).ok())
        .unwrap_or_default();
    let key = meta["key"]
        .as_str()
        .filter(|k| k.len() == 64 && k.bytes().all(|b| b.is_ascii_hexdigit()));
    let (Some(dir), Some(key)) = (media_dir, key) else {
        return Err(EngineError::NotFound(format!(
            "The media of message {} is not stored",
            row.wa_message_id
        )));
    };
    let media_kind = match kind {
        MessageType::Image => MediaKind::Image,
        MessageType::Video => MediaKind::Video,
        MessageType::Voice => MediaKind::Voice,
        MessageType::Audio => MediaKind::Audio,
        MessageType::Sticker => MediaKind::Sticker,
        _ => MediaKind::Document,
    };
    Ok(MediaMessage {
        kind: media_kind,
        source: MediaSource::File(dir.join(key)),
        mimetype: meta["mimetype"]
            .as_str()
            .unwrap_or("application/octet-stream")
            .to_string(),
        filename: meta["filename"].as_str().map(str::to_string),
        caption: row.body.clone().filter(|b| !b.is_empty()),
    })
}

/// The `FN:` line of a vCard (the display name), or the whole text when it has none.
fn vcard_name(vcard: &str) -> String {
    vcard
        .lines()
        .find_map(|l| l.strip_prefix("FN:"))
        .unwrap_or(vcard)
        .trim()
        .to_string()
}
