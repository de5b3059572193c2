//! How stored media leaves the API: the `Content-Type` a stored mimetype becomes. Mimetypes come from
//! callers and from the network as free text, so one that is not a well-formed media type is served as
//! `application/octet-stream` rather than echoed into a header (where non-ASCII bytes pass `HeaderValue`
//! but break every client that parses the header).

use axum::http::HeaderValue;

const FALLBACK: &str = "application/octet-stream";

/// The `Content-Type` to serve stored bytes under.
pub(crate) fn content_type_of(stored: &str) -> HeaderValue {
    stored
        .trim()
        .parse::<mime::Mime>()
        .ok()
        // mime takes `image/` with an empty subtype.
        .filter(|parsed| !parsed.subtype().as_str().is_empty())
        .and_then(|parsed| HeaderValue::from_str(parsed.as_ref()).ok())
        .unwrap_or(HeaderValue::from_static(FALLBACK))
}

#[cfg(test)]
mod tests {
    use super::content_type_of;

    #[test]
    fn well_formed_types_pass_and_anything_else_is_octet_stream() {
        assert_eq!(content_type_of("image/jpeg"), "image/jpeg");
        assert_eq!(
            content_type_of("audio/ogg; codecs=opus"),
            "audio/ogg; codecs=opus"
        );
        for bad in ["", "jpeg", "image/", "ð¾tñ/ò¹", "image/jpeg\u{7f}", "a b/c"] {
            assert_eq!(content_type_of(bad), "application/octet-stream", "{bad:?}");
        }
    }
}
