//! Media handed to a resource route (status posts, group and profile pictures) as `{url|base64, mimetype?}`.
//! It takes the same road as a send's media: the media store streams it into the session's objects with the
//! `MEDIA_DOWNLOAD_MAX_BYTES` cap, and a URL is fetched through the outbound-address guard and the session's
//! proxy. Those engines take the content as bytes, so the stored object is read back once. Also owns the
//! body rules of those routes (the spec's media body) and the `infer` typing of their bytes.

use wagate_proto::dto::status::MediaInput;

use base64::Engine as _;
use futures::StreamExt as _;

use super::{MessagingError, MessagingResult, MessagingService};
use crate::engine::{MediaSource, MessageType};
use crate::media::{MediaError, StoredMedia};

/// Media taken in for a resource route: the content, its mimetype and the object that holds it.
pub(crate) struct ResourceMedia {
    pub source: MediaSource,
    pub mimetype: String,
    pub stored: StoredMedia,
}

impl MessagingService {
    /// The content and mimetype of `input` (`default_mimetype` when none was given or served).
    pub(crate) async fn resource_media(
        &self,
        session_id: &str,
        input: &MediaInput,
        default_mimetype: &str,
    ) -> MessagingResult<ResourceMedia> {
        let media = self.recorder.media();
        let stored = match (non_empty(&input.base64), non_empty(&input.url)) {
            (Some(b64), _) => media.put_base64(session_id, b64).await?,
            (None, Some(url)) => {
                let record = self.sessions.record(session_id).await?;
                media
                    .put_url(session_id, url, record.proxy_url.as_deref())
                    .await?
            }
            (None, None) => return Err(bad_input("media needs url or base64")),
        };
        let mimetype = non_empty(&input.mimetype)
            .map(str::to_string)
            .or_else(|| stored.content_type.clone())
            .unwrap_or_else(|| default_mimetype.to_string());
        Ok(ResourceMedia {
            source: MediaSource::Stored {
                key: stored.key.clone(),
            },
            mimetype,
            stored,
        })
    }

    /// The type the first bytes of stored object `key` show (`infer`), if any: a picture fetched from a
    /// URL is typed by its content, not only by the type it was served with.
    pub(crate) async fn stored_type(&self, key: &str) -> MessagingResult<Option<&'static str>> {
        let Some(mut object) = self.recorder.media().stream(key).await? else {
            return Ok(None);
        };
        let mut head = Vec::new();
        while head.len() < DETECT_BYTES {
            match object.body.next().await {
                Some(chunk) => head.extend_from_slice(&chunk?),
                None => break,
            }
        }
        Ok(infer::get(&head).map(|t| t.mime_type()))
    }
}

/// A group or profile picture body follows the spec's media-body rules as a send's does (exactly one of
/// url or base64, raw base64 without a data-URL prefix, a mimetype with base64), and base64 must hold an
/// image whatever type it declares: the engines would hand WhatsApp any bytes as the picture.
pub(crate) fn check_picture_body(input: &MediaInput) -> MessagingResult<()> {
    let has_mimetype = non_empty(&input.mimetype).is_some();
    super::draft::media_input(input.url.clone(), input.base64.clone(), has_mimetype)?;
    raw_base64(input)?;
    match non_empty(&input.base64) {
        Some(b64) => picture_type(detect_type(b64)?),
        None => Ok(()),
    }
}

/// Refuses picture bytes that show no image type (`found` is what `infer` saw, if anything).
pub(crate) fn picture_type(found: Option<&str>) -> MessagingResult<()> {
    match found {
        Some(found) if found.starts_with("image/") => Ok(()),
        Some(found) => Err(super::error::bad(format!(
            "the picture must be an image (image/*), not {found} (detected from the bytes)"
        ))),
        None => Err(super::error::bad(
            "the picture must be an image (image/*): its bytes show no known image type",
        )),
    }
}

/// The spec's media-body rules, which status posts follow as sends do: exactly one of url or base64, raw
/// base64 without a data-URL prefix, and a mimetype with base64. Unlike a send (whose spec requires the
/// mimetype), a status image or video without one takes the type its bytes show, which must be the
/// route's kind; a voice note keeps its default (`audio/ogg; codecs=opus`). Answers the input to store,
/// its mimetype filled in when it was detected.
pub(crate) fn check_media_body(
    input: MediaInput,
    kind: MessageType,
) -> MessagingResult<MediaInput> {
    let input = with_detected_mimetype(input, kind)?;
    let has_mimetype = kind == MessageType::Voice || non_empty(&input.mimetype).is_some();
    super::draft::media_input(input.url.clone(), input.base64.clone(), has_mimetype)?;
    raw_base64(&input)?;
    Ok(input)
}

/// The spec's base64 is raw: a `data:` URL is refused before anything is stored.
fn raw_base64(input: &MediaInput) -> MessagingResult<()> {
    if non_empty(&input.base64).is_some_and(|b64| b64.starts_with("data:")) {
        return Err(super::error::bad(
            "base64 must be raw base64 without a data: URL prefix",
        ));
    }
    Ok(())
}

/// Refuses a declared type of another kind than the route's, and fills in the mimetype of untyped base64
/// for an image or video status from its magic numbers. Bodies
/// the media-body rules refuse anyway (a url too, a data-URL prefix) are left for those rules to name.
fn with_detected_mimetype(mut input: MediaInput, kind: MessageType) -> MessagingResult<MediaInput> {
    let (noun, family) = match kind {
        MessageType::Image => ("an image", "image/"),
        MessageType::Video => ("a video", "video/"),
        _ => return Ok(input),
    };
    if let Some(declared) = non_empty(&input.mimetype).filter(|m| !m.starts_with(family)) {
        return Err(super::error::bad(format!(
            "the status media must be {noun} ({family}*), not {declared}"
        )));
    }
    let untyped = non_empty(&input.mimetype).is_none() && non_empty(&input.url).is_none();
    let Some(b64) = non_empty(&input.base64).filter(|b| untyped && !b.starts_with("data:")) else {
        return Ok(input);
    };
    match detect_type(b64)? {
        Some(found) if found.starts_with(family) => {
            input.mimetype = Some(found.to_string());
            Ok(input)
        }
        Some(found) => Err(super::error::bad(format!(
            "the status media must be {noun} ({family}*), not {found} (detected from the bytes)"
        ))),
        None => Err(super::error::bad(
            "mimetype is required with base64: the bytes' type could not be detected",
        )),
    }
}

/// Content read to detect a type: 4 KiB, far past the furthest byte any of `infer`'s magic numbers
/// reaches (262), so a large upload is not decoded or read twice.
const DETECT_BYTES: usize = 4096;
/// The base64 characters that hold `DETECT_BYTES` of content.
const DETECT_B64_CHARS: usize = 5464;

/// The mimetype the leading bytes of `b64` show, if any (whitespace is skipped, as the media store does).
fn detect_type(b64: &str) -> MessagingResult<Option<&'static str>> {
    let head: Vec<u8> = b64
        .bytes()
        .filter(|b| !b.is_ascii_whitespace())
        .take(DETECT_B64_CHARS)
        .collect();
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(&head)
        .map_err(|e| super::error::bad(format!("base64 is not valid base64: {e}")))?;
    Ok(infer::get(&bytes).map(|t| t.mime_type()))
}

fn non_empty(value: &Option<String>) -> Option<&str> {
    value.as_deref().map(str::trim).filter(|v| !v.is_empty())
}

fn bad_input(message: &str) -> MessagingError {
    MessagingError::Media(MediaError::BadInput(message.to_string()))
}

#[cfg(test)]
mod tests {
    use super::{MediaInput, MessageType, check_media_body, check_picture_body};

    /// The 8-byte PNG signature and the start of its IHDR chunk.
    const PNG_B64: &str = "iVBORw0KGgoAAAANSUhEUg==";

    fn input(url: Option<&str>, base64: Option<&str>, mimetype: Option<&str>) -> MediaInput {
        MediaInput {
            url: url.map(str::to_string),
            base64: base64.map(str::to_string),
            mimetype: mimetype.map(str::to_string),
        }
    }

    fn refusal(body: MediaInput, kind: MessageType) -> String {
        match check_media_body(body, kind) {
            Ok(_) => panic!("accepted"),
            Err(err) => err.to_string(),
        }
    }

    #[test]
    fn a_status_media_body_follows_the_media_body_rules() {
        let refused = [
            (
                input(None, Some("AAAA"), None),
                MessageType::Image,
                "mimetype is required with base64: the bytes' type could not be detected",
            ),
            (
                input(Some("http://x/a.png"), Some("AAAA"), Some("image/png")),
                MessageType::Image,
                "exactly one",
            ),
            (
                input(Some("http://x/a.png"), Some(PNG_B64), None),
                MessageType::Image,
                "exactly one",
            ),
            (
                input(None, None, Some("image/png")),
                MessageType::Image,
                "exactly one",
            ),
            (
                input(None, Some("data:image/png;base64,AAAA"), Some("image/png")),
                MessageType::Image,
                "data: URL",
            ),
            (
                input(None, Some(PNG_B64), None),
                MessageType::Video,
                "must be a video (video/*), not image/png",
            ),
            (
                input(None, Some("!!!!"), None),
                MessageType::Image,
                "base64 is not valid base64",
            ),
        ];
        for (body, kind, message) in refused {
            let err = refusal(body, kind);
            assert!(err.contains(message), "{err}");
        }
        let kept = |body, kind| check_media_body(body, kind).map(|i| i.mimetype);
        assert_eq!(
            kept(input(None, Some("AAAA"), None), MessageType::Voice).ok(),
            Some(None),
            "a voice note keeps its default type"
        );
        assert_eq!(
            kept(
                input(None, Some("AAAA"), Some("image/png")),
                MessageType::Image
            )
            .ok(),
            Some(Some("image/png".into()))
        );
        assert_eq!(
            kept(
                input(Some("http://x/a.png"), None, None),
                MessageType::Image
            )
            .ok(),
            Some(None)
        );
    }

    #[test]
    fn untyped_base64_takes_the_type_its_bytes_show() {
        let detected = |b64: &str, kind| {
            check_media_body(input(None, Some(b64), None), kind)
                .ok()
                .and_then(|i| i.mimetype)
        };
        assert_eq!(
            detected(PNG_B64, MessageType::Image).as_deref(),
            Some("image/png")
        );
        // JPEG (SOI + APP0 marker), and an MP4 `ftyp` box of brand isom, split by whitespace as
        // wrapped base64 may be.
        assert_eq!(
            detected("/9j/4AAQ", MessageType::Image).as_deref(),
            Some("image/jpeg")
        );
        let mp4 = "AAAAIGZ0eXBp\nc29tAAACAGlzb21pc28y";
        assert_eq!(
            detected(mp4, MessageType::Video).as_deref(),
            Some("video/mp4")
        );
    }

    #[test]
    fn a_declared_type_of_another_kind_than_the_route_is_refused() {
        let declared = |mimetype: &str, kind| {
            check_media_body(input(None, Some(PNG_B64), Some(mimetype)), kind).map(|_| ())
        };
        assert!(declared("video/mp4", MessageType::Image).is_err());
        assert!(declared("image/png", MessageType::Video).is_err());
        assert!(declared("image/png", MessageType::Image).is_ok());
    }

    #[test]
    fn a_picture_body_follows_the_media_body_rules_and_holds_an_image() {
        let refusal = |body: MediaInput| match check_picture_body(&body) {
            Ok(()) => panic!("accepted {body:?}"),
            Err(err) => err.to_string(),
        };
        let png = Some("image/png");
        let refused = [
            (
                input(Some("http://x/a.png"), Some(PNG_B64), png),
                "exactly one",
            ),
            (input(None, None, png), "exactly one"),
            (input(None, Some(PNG_B64), None), "mimetype is required"),
            (
                input(None, Some("data:image/png;base64,AAAA"), png),
                "data: URL",
            ),
            (input(None, Some("aGVsbG8="), png), "no known image type"),
            (
                input(None, Some("JVBERi0xLjQK"), png),
                "not application/pdf",
            ),
        ];
        for (body, message) in refused {
            let err = refusal(body);
            assert!(err.contains(message), "{err}");
        }
        assert!(check_picture_body(&input(None, Some(PNG_B64), png)).is_ok());
        assert!(check_picture_body(&input(Some("http://x/a.png"), None, None)).is_ok());
    }
}
