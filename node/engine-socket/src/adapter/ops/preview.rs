//! Link previews for send-text: the caller's `customLinkPreview` as given, or (with `linkPreview`) a
//! preview fetched from the first URL of the text. The page and its `og:image` are fetched through the
//! media store's outbound-address guard and the session's proxy, each capped in bytes and time; the
//! page metadata is read by the leaf crate's `build::parse_html`. Any failure means no preview: the
//! text is still sent.

use std::time::Duration;

use crate::build;
use base64::Engine as _;

use super::Media;
use wagate_engine_api::LinkPreview;

/// Enough of a page for its `<head>`; the rest is never read.
const PAGE_MAX_BYTES: usize = 256 * 1024;
/// A thumbnail is sent inline in the message: larger images are left out rather than resized.
const THUMBNAIL_MAX_BYTES: usize = 128 * 1024;
/// Each fetch gives up after this; a slow site must not hold the send for long.
const FETCH_BUDGET: Duration = Duration::from_secs(5);
/// The page and its image together: past this the text goes out without a preview.
const PREVIEW_BUDGET: Duration = Duration::from_secs(8);

/// The caller's own card; its URL defaults to the first link of the text. A thumbnail that is not
/// base64 is dropped (the validation layer already checked the types).
pub(crate) fn custom(body: &str, card: &LinkPreview) -> build::LinkPreview {
    let url = card
        .url
        .clone()
        .or_else(|| build::first_url(body).map(str::to_string))
        .unwrap_or_default();
    let thumbnail = card.thumbnail.as_deref().and_then(|b64| {
        base64::engine::general_purpose::STANDARD
            .decode(b64.trim())
            .ok()
    });
    build::LinkPreview {
        url,
        title: card.title.clone(),
        description: card.description.clone(),
        thumbnail,
    }
}

/// The preview of the first link of `body`, or `None` (no link, not a page, no title, any failure,
/// or the page and image together took longer than `PREVIEW_BUDGET`).
pub(crate) async fn fetch(media: Media<'_>, body: &str) -> Option<build::LinkPreview> {
    tokio::time::timeout(PREVIEW_BUDGET, card(media, body))
        .await
        .ok()
        .flatten()
}

async fn card(media: Media<'_>, body: &str) -> Option<build::LinkPreview> {
    let url = build::first_url(body)?;
    let page = match media
        .store
        .fetch_small(url, media.proxy_url, PAGE_MAX_BYTES, FETCH_BUDGET)
        .await
    {
        Ok(page) => page,
        Err(error) => {
            tracing::debug!(%url, %error, "link preview page not fetched; sending without preview");
            return None;
        }
    };
    if !is_html(page.content_type.as_deref()) {
        return None;
    }
    let meta = build::parse_html(&String::from_utf8_lossy(&page.bytes));
    let title = meta.title.filter(|t| !t.is_empty())?;
    let thumbnail = match meta.image.as_deref().and_then(|image| absolute(url, image)) {
        Some(image) => thumbnail(media, &image).await,
        None => None,
    };
    Some(build::LinkPreview {
        url: url.to_string(),
        title: Some(title),
        description: meta.description,
        thumbnail,
    })
}

/// A page without a content type is read as HTML; anything else named (images, PDFs) is not a page.
fn is_html(content_type: Option<&str>) -> bool {
    content_type.is_none_or(|ct| {
        let ct = ct.to_ascii_lowercase();
        ct.starts_with("text/html") || ct.starts_with("application/xhtml")
    })
}

/// `og:image` may be relative to the page.
fn absolute(page: &str, image: &str) -> Option<String> {
    let base = url::Url::parse(page).ok()?;
    let joined = base.join(image).ok()?;
    matches!(joined.scheme(), "http" | "https").then(|| joined.to_string())
}

/// The image as the message's JPEG thumbnail, when it is a JPEG small enough to send inline.
async fn thumbnail(media: Media<'_>, image: &str) -> Option<Vec<u8>> {
    let fetched = media
        .store
        .fetch_small(image, media.proxy_url, THUMBNAIL_MAX_BYTES, FETCH_BUDGET)
        .await
        .map_err(|error| tracing::debug!(%image, %error, "link preview image not fetched"))
        .ok()?;
    let is_jpeg = fetched.bytes.starts_with(&[0xFF, 0xD8, 0xFF]);
    (is_jpeg && !fetched.truncated).then_some(fetched.bytes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::adapter::testkit::LoopbackMedia;
    use wagate_engine_api::media::MemoryMedia;

    #[test]
    fn a_custom_card_takes_the_texts_first_link_and_decodes_its_thumbnail() {
        let card = LinkPreview {
            title: Some("Mine".into()),
            thumbnail: Some("/9j/".into()),
            ..Default::default()
        };
        let preview = custom("see https://example.org/x now", &card);
        assert_eq!(preview.url, "https://example.org/x");
        assert_eq!(preview.title.as_deref(), Some("Mine"));
        assert_eq!(preview.thumbnail, Some(vec![0xFF, 0xD8, 0xFF]));
    }

    #[test]
    fn relative_images_resolve_against_the_page_and_only_web_urls_count() {
        assert_eq!(
            absolute("https://example.org/a/b", "/img/c.jpg").as_deref(),
            Some("https://example.org/img/c.jpg")
        );
        assert_eq!(
            absolute("https://example.org/a", "data:image/png;base64,AA"),
            None
        );
        assert!(is_html(Some("text/html; charset=utf-8")));
        assert!(is_html(None));
        assert!(!is_html(Some("image/jpeg")));
    }

    /// Loopback site: a page with Open Graph tags and a relative `og:image`, the JPEG it names, a page
    /// whose image is a PNG, and a non-HTML resource.
    mod site {
        use axum::Router;
        use axum::http::header::CONTENT_TYPE;
        use axum::routing::get;

        pub(super) const JPEG: &[u8] = &[0xFF, 0xD8, 0xFF, 0xE0, 0, 16, b'J', b'F', b'I', b'F'];

        pub(super) async fn serve() -> String {
            // What boot does once: reqwest is built without a default TLS provider.
            let _ = rustls::crypto::ring::default_provider().install_default();
            let page = r#"<html><head><title>Plain</title>
                <meta property="og:title" content="Wagate &amp; friends">
                <meta property="og:description" content="A gateway">
                <meta property="og:image" content="/thumb.jpg"></head><body>hi</body></html>"#;
            let png_page = r#"<html><head><meta property="og:title" content="Png">
                <meta property="og:image" content="/thumb.png"></head></html>"#;
            let app = Router::new()
                .route(
                    "/page",
                    get(move || async move { ([(CONTENT_TYPE, "text/html")], page) }),
                )
                .route(
                    "/png-page",
                    get(move || async move { ([(CONTENT_TYPE, "text/html")], png_page) }),
                )
                .route(
                    "/thumb.jpg",
                    get(|| async { ([(CONTENT_TYPE, "image/jpeg")], JPEG) }),
                )
                .route(
                    "/thumb.png",
                    get(|| async { ([(CONTENT_TYPE, "image/png")], &b"\x89PNG\r\n"[..]) }),
                )
                .route(
                    "/file.pdf",
                    get(|| async { ([(CONTENT_TYPE, "application/pdf")], "%PDF") }),
                );
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            let addr = listener.local_addr().unwrap();
            tokio::spawn(async move { axum::serve(listener, app).await });
            format!("http://{addr}")
        }
    }

    /// A media store that fetches the loopback site (the node's outbound-address guard is the node's to
    /// test: `node/src/engine/node_media.rs`).
    fn store() -> LoopbackMedia {
        LoopbackMedia::new(1024 * 1024)
    }

    #[tokio::test]
    async fn a_texts_first_link_becomes_the_expected_preview_message() {
        let base = site::serve().await;
        let store = store();
        let media = Media {
            store: &store,
            proxy_url: None,
        };
        let body = format!("read {base}/page. now");
        let msg = super::super::send::text(media, &body, true, None, None).await;
        let expected = build::wa::Message {
            extended_text_message: crate::whatsapp_rust::buffa::MessageField::some(
                build::wa::message::ExtendedTextMessage {
                    text: Some(body.clone()),
                    matched_text: Some(format!("{base}/page")),
                    title: Some("Wagate & friends".into()),
                    description: Some("A gateway".into()),
                    jpeg_thumbnail: Some(site::JPEG.to_vec()),
                    preview_type: Some(
                        build::wa::message::extended_text_message::PreviewType::NONE,
                    ),
                    ..Default::default()
                },
            ),
            ..Default::default()
        };
        assert_eq!(msg, expected);
    }

    #[tokio::test]
    async fn a_non_jpeg_image_leaves_the_card_without_thumbnail_and_a_non_page_gives_none() {
        let base = site::serve().await;
        let store = store();
        let media = Media {
            store: &store,
            proxy_url: None,
        };
        let card = fetch(media, &format!("{base}/png-page")).await.unwrap();
        assert_eq!((card.title.as_deref(), card.thumbnail), (Some("Png"), None));
        assert_eq!(fetch(media, &format!("{base}/file.pdf")).await, None);
        assert_eq!(fetch(media, &format!("{base}/missing")).await, None);
    }

    #[tokio::test]
    async fn a_refused_fetch_sends_the_text_plain() {
        let base = site::serve().await;
        // The memory store refuses every fetch, as the node's guard refuses loopback.
        let store = MemoryMedia::default();
        let media = Media {
            store: &store,
            proxy_url: None,
        };
        let body = format!("see {base}/page");
        assert_eq!(fetch(media, &body).await, None);
        let msg = super::super::send::text(media, &body, true, None, None).await;
        assert_eq!(msg, build::text(&body, None, None));
        assert_eq!(msg.conversation.as_deref(), Some(body.as_str()));
    }

    #[tokio::test]
    async fn link_preview_false_sends_plain_text_and_a_custom_card_wins() {
        let base = site::serve().await;
        let store = store();
        let media = Media {
            store: &store,
            proxy_url: None,
        };
        let body = format!("see {base}/page");
        let plain = super::super::send::text(media, &body, false, None, None).await;
        assert_eq!(plain.conversation.as_deref(), Some(body.as_str()));
        let card = LinkPreview {
            title: Some("Mine".into()),
            ..Default::default()
        };
        let msg = super::super::send::text(media, &body, true, Some(&card), None).await;
        let ext = msg.extended_text_message.as_option().unwrap();
        assert_eq!(ext.title.as_deref(), Some("Mine"));
        assert_eq!(
            ext.matched_text.as_deref(),
            Some(format!("{base}/page").as_str())
        );
        assert_eq!(ext.jpeg_thumbnail, None);
    }
}
