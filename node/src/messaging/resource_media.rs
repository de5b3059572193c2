//! Media handed to a resource route (status posts, group and profile pictures) as `{url|base64, mimetype?}`.
//! It takes the same road as a send's media: the media store streams it into the session's objects with the
//! `MEDIA_DOWNLOAD_MAX_BYTES` cap, and a URL is fetched through the outbound-address guard and the session's
//! proxy. Those engines take the content as bytes, so the stored object is read back once.

use wagate_proto::dto::status::MediaInput;

use super::{MessagingError, MessagingResult, MessagingService};
use crate::engine::MediaSource;
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
            (Some(b64), _) => media.put_base64(session_id, strip_data_url(b64)).await?,
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
}

/// The spec's media-body rules, which status posts follow as sends do (pictures have their own,
/// `http/profile.rs` `picture_body`, where base64 wins over a url): exactly one of url or base64, raw
/// base64 without a data-URL prefix, and a mimetype with base64 unless the kind has a default one (a voice
/// note's `audio/ogg; codecs=opus`).
pub(crate) fn check_media_body(
    input: &MediaInput,
    has_default_mimetype: bool,
) -> MessagingResult<()> {
    let has_mimetype = has_default_mimetype || non_empty(&input.mimetype).is_some();
    super::draft::media_input(input.url.clone(), input.base64.clone(), has_mimetype)?;
    if non_empty(&input.base64).is_some_and(|b64| b64.starts_with("data:")) {
        return Err(super::error::bad(
            "base64 must be raw base64 without a data: URL prefix",
        ));
    }
    Ok(())
}

fn non_empty(value: &Option<String>) -> Option<&str> {
    value.as_deref().map(str::trim).filter(|v| !v.is_empty())
}

/// Picture and status routes have always taken a `data:<mime>;base64,` URL as well as raw base64.
fn strip_data_url(raw: &str) -> &str {
    match raw.strip_prefix("data:") {
        Some(rest) => rest.split_once("base64,").map_or(raw, |(_, data)| data),
        None => raw,
    }
}

fn bad_input(message: &str) -> MessagingError {
    MessagingError::Media(MediaError::BadInput(message.to_string()))
}

#[cfg(test)]
mod tests {
    use super::{MediaInput, check_media_body, strip_data_url};

    fn input(url: Option<&str>, base64: Option<&str>, mimetype: Option<&str>) -> MediaInput {
        MediaInput {
            url: url.map(str::to_string),
            base64: base64.map(str::to_string),
            mimetype: mimetype.map(str::to_string),
        }
    }

    #[test]
    fn a_status_media_body_follows_the_media_body_rules() {
        let refused = [
            (
                input(None, Some("AAAA"), None),
                false,
                "mimetype is required",
            ),
            (
                input(Some("http://x/a.png"), Some("AAAA"), Some("image/png")),
                false,
                "exactly one",
            ),
            (input(None, None, Some("image/png")), false, "exactly one"),
            (
                input(None, Some("data:image/png;base64,AAAA"), Some("image/png")),
                false,
                "data: URL",
            ),
        ];
        for (body, default, message) in refused {
            let err = check_media_body(&body, default).expect_err(message);
            assert!(err.to_string().contains(message), "{err}");
        }
        assert!(check_media_body(&input(None, Some("AAAA"), None), true).is_ok());
        assert!(check_media_body(&input(None, Some("AAAA"), Some("image/png")), false).is_ok());
        assert!(check_media_body(&input(Some("http://x/a.png"), None, None), false).is_ok());
    }

    #[test]
    fn data_url_prefix_is_dropped_and_raw_base64_kept() {
        assert_eq!(strip_data_url("data:image/png;base64,AAAA"), "AAAA");
        assert_eq!(strip_data_url("AAAA"), "AAAA");
    }
}
