//! Sending: every `OutgoingMessage` content becomes one protocol message (built in the leaf crate's
//! `build`), with its quote and mentions, media uploaded through the library first, a text's link
//! preview fetched (`preview.rs`) and a product filled from the catalog (`catalog.rs`). The answer is
//! the raw key id (the spec's socket-engine message id) and the send time.

use crate::build::{self, Quote, wa as proto};
use crate::whatsapp_rust::upload::UploadOptions;

use super::{
    Client, Media, Store, author_of, catalog, fail, fail_any, now_secs, preview, stored, wa, was,
};
use wagate_engine_api::media::EngineMedia;
use wagate_engine_api::store::StoredMessage;
use wagate_engine_api::{
    EngineError, EngineResult, LinkPreview, Location, MediaKind, MediaMessage, MediaSource,
    MessageContent, MessageType, OutgoingMessage, Poll, SentMessage,
};

pub(crate) async fn send(
    client: &Client,
    store: Store<'_>,
    media: Media<'_>,
    msg: OutgoingMessage,
) -> EngineResult<SentMessage> {
    let to = wa(&msg.to)?;
    let quote = match msg.quoted_id.as_deref() {
        Some(id) => Some(quote(client, store, id).await?),
        None => None,
    };
    let mentions = was(&msg.mentions)?;
    let ctx = build::context(&to, &mentions, quote.as_ref());
    let message = content(client, media, msg.content, ctx).await?;
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
    media: Media<'_>,
    content: MessageContent,
    ctx: Option<proto::ContextInfo>,
) -> EngineResult<proto::Message> {
    Ok(match content {
        MessageContent::Text {
            body,
            link_preview,
            custom_preview,
        } => text(media, &body, link_preview, custom_preview.as_ref(), ctx).await,
        MessageContent::Media(m) => upload(client, media.store, m, ctx).await?,
        MessageContent::Location(loc) => {
            build::location(loc.latitude, loc.longitude, loc.description.as_deref(), ctx)
        }
        MessageContent::Contact(card) => build::contact(&card.name, &card.vcard(), ctx),
        MessageContent::Poll(poll) => {
            let secret: [u8; build::POLL_SECRET_LEN] = rand::random();
            build::poll(&poll.name, &poll.options, poll.allow_multiple, secret, ctx)
        }
        MessageContent::Product { product_id, body } => {
            product(client, media, &product_id, body.as_deref(), ctx).await?
        }
    })
}

/// A text with the caller's preview card, else (with `linkPreview`) one fetched from its first link;
/// without either, or when the fetch fails, the plain text.
pub(crate) async fn text(
    media: Media<'_>,
    body: &str,
    link_preview: bool,
    custom: Option<&LinkPreview>,
    ctx: Option<proto::ContextInfo>,
) -> proto::Message {
    let card = match custom {
        Some(card) => Some(preview::custom(body, card)),
        None if link_preview => preview::fetch(media, body).await,
        None => None,
    };
    build::text(body, ctx, card.as_ref())
}

/// A product message filled from the account's own catalog (title, description, price, retailer id,
/// link, image count), with the product's first image uploaded so the card shows it. A product the
/// catalog does not list is the spec's 404; an image that cannot be fetched leaves the card without one.
async fn product(
    client: &Client,
    media: Media<'_>,
    product_id: &str,
    body: Option<&str>,
    ctx: Option<proto::ContextInfo>,
) -> EngineResult<proto::Message> {
    let item = catalog::find(client, product_id).await?.ok_or_else(|| {
        EngineError::NotFound(format!("Product {product_id} not found in the catalog"))
    })?;
    let mut snapshot = build::ProductSnapshot::from(&item);
    if let Some(url) = item.image_url.as_deref() {
        snapshot.image = product_image(client, media, url).await;
    }
    let owner = client.pn().ok_or(EngineError::NotReady)?.to_non_ad();
    Ok(build::product(&snapshot, &owner.to_string(), body, ctx))
}

/// Product images are shown at most this large; a bigger one is left off the card.
const PRODUCT_IMAGE_MAX_BYTES: usize = 5 * 1024 * 1024;
const PRODUCT_IMAGE_BUDGET: std::time::Duration = std::time::Duration::from_secs(15);

async fn product_image(
    client: &Client,
    media: Media<'_>,
    url: &str,
) -> Option<proto::message::ImageMessage> {
    let fetched = media
        .store
        .fetch_small(
            url,
            media.proxy_url,
            PRODUCT_IMAGE_MAX_BYTES,
            PRODUCT_IMAGE_BUDGET,
        )
        .await
        .map_err(|error| tracing::debug!(%url, %error, "product image not fetched"))
        .ok()
        .filter(|f| !f.truncated)?;
    let mimetype = fetched
        .content_type
        .filter(|ct| ct.starts_with("image/"))
        .unwrap_or_else(|| "image/jpeg".to_string());
    let uploaded = client
        .upload(
            fetched.bytes,
            build::media_type(build::MediaKind::Image),
            UploadOptions::default(),
        )
        .await
        .map_err(|error| tracing::debug!(%url, %error, "product image not uploaded"))
        .ok()?;
    let opts = build::MediaOptions {
        mimetype: Some(mimetype),
        ..Default::default()
    };
    build::media(build::MediaKind::Image, uploaded.into(), opts)
        .image_message
        .into_option()
}

/// Uploads the bytes through the library (it encrypts them) and builds the media message.
pub(crate) async fn upload(
    client: &Client,
    store: &dyn EngineMedia,
    media: MediaMessage,
    ctx: Option<proto::ContextInfo>,
) -> EngineResult<proto::Message> {
    let bytes = media.source.load(store).await?;
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
/// location and poll from the row's `extra`, media re-uploaded from the media store.
pub(crate) async fn stored_content(
    client: &Client,
    row: &StoredMessage,
    media: Media<'_>,
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
        let stored = stored_media(row, kind, media).await?;
        return upload(client, media.store, stored, None).await;
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

/// A stored message's media as an object of the media store, by key; a row without a stored object (media
/// never downloaded, or the object removed) cannot be forwarded: 404; a store that cannot be reached: 503.
pub(crate) async fn stored_media(
    row: &StoredMessage,
    kind: MessageType,
    media: Media<'_>,
) -> EngineResult<MediaMessage> {
    let meta: serde_json::Value = row
        .media
        .as_deref()
        .and_then(|m| serde_json::from_str(m).ok())
        .unwrap_or_default();
    let key = meta["key"].as_str().unwrap_or_default().to_string();
    let present = media.store.head(&key).await?.is_some();
    if !present {
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
        source: MediaSource::Stored { key },
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

#[cfg(test)]
mod tests {
    use wagate_engine_api::media::MemoryMedia;
    use wagate_engine_api::store::MemoryStore;

    use super::*;

    const SID: &str = "11111111-1111-4111-8111-111111111111";

    fn row(wa_id: &str, media: serde_json::Value) -> StoredMessage {
        StoredMessage {
            wa_message_id: wa_id.into(),
            chat_id: "15550001111@c.us".into(),
            from_jid: "15550001111@c.us".into(),
            author: None,
            from_me: false,
            kind: "image".into(),
            body: Some("the caption".into()),
            timestamp: 1_700_000_000,
            media: Some(media.to_string()),
            extra: None,
        }
    }

    /// A forward of a stored media message reads the blob the media store holds for the row (what is
    /// then uploaded through the library); a row whose blob is not stored is the spec's 404.
    #[tokio::test]
    async fn a_stored_media_message_is_forwarded_from_the_media_stores_blob() {
        let media_store = MemoryMedia::default();
        let blob = media_store.put(b"\xFF\xD8\xFFjpeg bytes").await.unwrap();
        let store = MemoryStore::default();
        let with_blob = row(
            "WA1",
            serde_json::json!({"key": blob.key, "mimetype": "image/jpeg", "sizeBytes": blob.size}),
        );
        let missing = row(
            "WA2",
            serde_json::json!({"key": "ab".repeat(32), "mimetype": "image/jpeg", "sizeBytes": 3}),
        );
        store.insert_message(SID, with_blob).unwrap();
        store.insert_message(SID, missing).unwrap();

        let ours = Store {
            db: &store,
            session_id: SID,
        };
        let media = Media {
            store: &media_store,
            proxy_url: None,
        };
        let found = stored(ours, "WA1").await.unwrap().expect("row stored");
        let message = stored_media(&found, MessageType::Image, media)
            .await
            .unwrap();
        assert_eq!(message.kind, MediaKind::Image);
        assert_eq!(message.mimetype, "image/jpeg");
        assert_eq!(message.caption.as_deref(), Some("the caption"));
        assert_eq!(
            message.source.load(&media_store).await.unwrap(),
            b"\xFF\xD8\xFFjpeg bytes".to_vec()
        );

        let gone = stored(ours, "WA2").await.unwrap().expect("row stored");
        let err = stored_media(&gone, MessageType::Image, media)
            .await
            .unwrap_err();
        assert!(matches!(err, EngineError::NotFound(m) if m.contains("WA2")));
    }
}
