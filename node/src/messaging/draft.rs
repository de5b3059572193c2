//! Send bodies -> `Draft`: a validated outgoing message whose media is not fetched or decoded yet (that
//! happens after the session is known to be ready). One builder per send route; pure apart from nothing.

use wagate_proto::Jid;
use wagate_proto::dto::messages::{
    ReplyRequest, SendContactRequest, SendLocationRequest, SendMediaRequest, SendPollRequest,
    SendProductRequest, SendTextRequest,
};

use super::error::{MessagingResult, bad};
use super::validate as v;
use crate::engine::{ContactCard, Location, MediaKind, MessageContent, Poll};

/// Where a media send's bytes come from.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum MediaInput {
    Url(String),
    Base64(String),
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) struct MediaDraft {
    pub kind: MediaKind,
    pub input: MediaInput,
    pub mimetype: Option<String>,
    pub filename: Option<String>,
    pub caption: Option<String>,
    /// Convert the media with ffmpeg before sending.
    pub convert: Option<crate::media::convert::Target>,
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) enum DraftContent {
    Ready(MessageContent),
    Media(MediaDraft),
}

/// A validated send.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Draft {
    pub to: Jid,
    pub content: DraftContent,
    pub quoted_id: Option<String>,
    pub mentions: Vec<Jid>,
}

fn quoted(raw: Option<String>) -> Option<String> {
    raw.filter(|q| !q.trim().is_empty())
}

pub(crate) fn text(b: SendTextRequest) -> MessagingResult<Draft> {
    let to = v::jid("chatId", b.chat_id.as_deref())?;
    let body = v::text("text", b.text.as_deref())?;
    let mentions = v::mentions(&b.mentions, &body, "text")?;
    let custom_preview = v::link_preview(b.custom_link_preview.as_ref(), b.link_preview)?;
    let link_preview = b.link_preview.unwrap_or(true) || custom_preview.is_some();
    Ok(Draft {
        to,
        content: DraftContent::Ready(MessageContent::Text {
            body,
            link_preview,
            custom_preview,
        }),
        quoted_id: quoted(b.quoted_message_id),
        mentions,
    })
}

pub(crate) fn reply(b: ReplyRequest) -> MessagingResult<Draft> {
    v::required("quotedMessageId", b.quoted_message_id.as_deref())?;
    text(SendTextRequest {
        chat_id: b.chat_id,
        text: b.text,
        mentions: b.mentions,
        quoted_message_id: b.quoted_message_id,
        ..SendTextRequest::default()
    })
}

/// The spec's audio mimetype: a voice note's default, and plain audio's when its URL names none.
pub(crate) const DEFAULT_AUDIO_MIMETYPE: &str = "audio/ogg; codecs=opus";

/// The media of one of the five media routes (`kind` from the route; `ptt` turns audio into voice).
pub(crate) fn media(kind: MediaKind, b: SendMediaRequest) -> MessagingResult<Draft> {
    let to = v::jid("chatId", b.chat_id.as_deref())?;
    let kind = match kind {
        MediaKind::Audio if b.ptt == Some(true) => MediaKind::Voice,
        other => other,
    };
    // WhatsApp's audio, voice and sticker messages have no caption: one sent along (the published clients
    // share one media body) is dropped with its mentions, as the network would, rather than delivered as
    // the message's text.
    let (caption, mentions) = if has_caption(kind) {
        let caption = v::caption(b.caption.as_deref())?;
        let mentions = v::mentions(&b.mentions, caption.as_deref().unwrap_or(""), "caption")?;
        (caption, mentions)
    } else {
        (None, Default::default())
    };
    let mimetype = b.mimetype.filter(|m| !m.trim().is_empty());
    // The spec gives a voice note a default mimetype, so its base64 needs none.
    let has_mimetype = mimetype.is_some() || matches!(kind, MediaKind::Voice);
    let input = media_input(b.url, b.base64, has_mimetype)?;
    // Base64 voice without a mimetype is typed by its first bytes, as a URL's is by what it serves once
    // fetched; a voice note that is not Opus then is converted (`send.rs` `materialise`).
    let mimetype = match (mimetype, kind, &input) {
        (None, MediaKind::Voice, MediaInput::Base64(data)) => {
            Some(sniffed_voice_mimetype(data).to_string())
        }
        (m, _, _) => m,
    };
    let convert = match kind {
        MediaKind::Voice | MediaKind::Audio if b.convert == Some(true) => {
            Some(crate::media::convert::Target::Voice)
        }
        MediaKind::Video if b.convert == Some(true) => Some(crate::media::convert::Target::Video),
        _ => None,
    };
    Ok(Draft {
        to,
        content: DraftContent::Media(MediaDraft {
            kind,
            input,
            mimetype,
            filename: b.filename,
            caption,
            convert,
        }),
        quoted_id: quoted(b.quoted_message_id),
        mentions,
    })
}

/// The media WhatsApp shows a caption under.
fn has_caption(kind: MediaKind) -> bool {
    matches!(
        kind,
        MediaKind::Image | MediaKind::Video | MediaKind::Document
    )
}

/// The type of base64 voice bytes sent without a mimetype: an Ogg stream whose first packet is Opus's
/// header (`OpusHead`) is taken for Opus (the spec's default); anything else (Vorbis or FLAC in Ogg too) is
/// marked as not Opus, so that it is converted rather than sent as voice as it is.
fn sniffed_voice_mimetype(data: &str) -> &'static str {
    use base64::Engine as _;
    // 96 characters decode to the first 72 bytes: the Ogg page header (27 bytes), its segment table and
    // the start of the first packet, where `OpusHead` sits (at byte 28 with the usual one segment).
    let head: Vec<u8> = data
        .bytes()
        .filter(|b| !b.is_ascii_whitespace())
        .take(96)
        .collect();
    let decoded = base64::engine::general_purpose::STANDARD_NO_PAD
        .decode(
            head.strip_suffix(b"==")
                .or(head.strip_suffix(b"="))
                .unwrap_or(&head),
        )
        .unwrap_or_default();
    let opus = decoded.starts_with(b"OggS") && decoded.windows(8).any(|w| w == b"OpusHead");
    if opus {
        DEFAULT_AUDIO_MIMETYPE
    } else {
        "application/octet-stream"
    }
}

/// Exactly one of url or base64; base64 needs a mimetype.
pub(crate) fn media_input(
    url: Option<String>,
    base64: Option<String>,
    has_mimetype: bool,
) -> MessagingResult<MediaInput> {
    let url = url.filter(|u| !u.trim().is_empty());
    let base64 = base64.filter(|b| !b.trim().is_empty());
    match (url, base64) {
        (Some(url), None) => Ok(MediaInput::Url(url)),
        (None, Some(data)) if has_mimetype => Ok(MediaInput::Base64(data)),
        (None, Some(_)) => Err(bad("mimetype is required with base64")),
        _ => Err(bad("exactly one of url or base64 is required")),
    }
}

pub(crate) fn location(b: SendLocationRequest) -> MessagingResult<Draft> {
    let to = v::jid("chatId", b.chat_id.as_deref())?;
    v::max_chars_opt(
        "description",
        b.description.as_deref(),
        v::LOCATION_DESCRIPTION_MAX,
    )?;
    let loc = Location {
        latitude: v::coordinate("latitude", b.latitude, 90.0)?,
        longitude: v::coordinate("longitude", b.longitude, 180.0)?,
        description: b.description,
    };
    Ok(ready(
        to,
        MessageContent::Location(loc),
        b.quoted_message_id,
    ))
}

pub(crate) fn contact(b: SendContactRequest) -> MessagingResult<Draft> {
    let to = v::jid("chatId", b.chat_id.as_deref())?;
    let name = v::required("contactName", b.contact_name.as_deref())?.to_string();
    v::max_chars("contactName", &name, v::CONTACT_NAME_MAX)?;
    let number = v::required("contactNumber", b.contact_number.as_deref())?;
    v::max_chars("contactNumber", number, v::CONTACT_NUMBER_MAX)?;
    let digits = number.trim().trim_start_matches('+');
    if digits.len() < 6 || !digits.chars().all(|c| c.is_ascii_digit()) {
        return Err(bad(
            "contactNumber must be an international number (digits only)",
        ));
    }
    let card = ContactCard {
        name,
        number: digits.to_string(),
    };
    Ok(ready(
        to,
        MessageContent::Contact(card),
        b.quoted_message_id,
    ))
}

pub(crate) fn poll(b: SendPollRequest) -> MessagingResult<Draft> {
    let to = v::jid("chatId", b.chat_id.as_deref())?;
    let (name, options) = v::poll(b.name.as_deref(), b.options.as_deref())?;
    let poll = Poll {
        name,
        options,
        allow_multiple: b.allow_multiple_answers.unwrap_or(false),
    };
    Ok(ready(to, MessageContent::Poll(poll), b.quoted_message_id))
}

pub(crate) fn product(b: SendProductRequest) -> MessagingResult<Draft> {
    let to = v::jid("chatId", b.chat_id.as_deref())?;
    let product_id = v::required("productId", b.product_id.as_deref())?.to_string();
    v::max_chars_opt("body", b.body.as_deref(), v::TEXT_MAX)?;
    let content = MessageContent::Product {
        product_id,
        body: b.body,
    };
    Ok(ready(to, content, b.quoted_message_id))
}

fn ready(to: Jid, content: MessageContent, quoted_id: Option<String>) -> Draft {
    Draft {
        to,
        content: DraftContent::Ready(content),
        quoted_id: quoted(quoted_id),
        mentions: Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ptt_audio_from_a_url_becomes_voice_typed_by_what_the_url_serves() {
        let body = SendMediaRequest {
            chat_id: Some("4915100000001@c.us".into()),
            url: Some("https://example.com/a.ogg".into()),
            ptt: Some(true),
            ..SendMediaRequest::default()
        };
        let draft = media(MediaKind::Audio, body).unwrap();
        let DraftContent::Media(m) = draft.content else {
            panic!("not media")
        };
        assert_eq!(m.kind, MediaKind::Voice);
        assert_eq!(m.mimetype, None);
        assert_eq!(m.convert, None);
    }

    #[test]
    fn a_base64_voice_note_needs_no_mimetype_but_plain_audio_does() {
        // An Ogg page whose first packet is Opus's header.
        let page = [&b"OggS"[..], &[0u8; 23], &[19], b"OpusHead\x01\x01"].concat();
        let opus = {
            use base64::Engine as _;
            base64::engine::general_purpose::STANDARD.encode(&page)
        };
        let body = |ptt| SendMediaRequest {
            chat_id: Some("4915100000001@c.us".into()),
            base64: Some(opus.clone()),
            ptt: Some(ptt),
            ..SendMediaRequest::default()
        };
        let draft = media(MediaKind::Audio, body(true)).unwrap();
        let DraftContent::Media(m) = draft.content else {
            panic!("not media")
        };
        assert_eq!(m.mimetype.as_deref(), Some(DEFAULT_AUDIO_MIMETYPE));
        let refused = media(MediaKind::Audio, body(false))
            .map(|_| ())
            .unwrap_err();
        assert_eq!(refused.to_string(), "mimetype is required with base64");
    }

    #[test]
    fn a_base64_voice_note_without_a_mimetype_is_typed_by_its_bytes() {
        let body = |base64: &str| SendMediaRequest {
            chat_id: Some("4915100000001@c.us".into()),
            base64: Some(base64.into()),
            ptt: Some(true),
            ..SendMediaRequest::default()
        };
        let mimetype = |base64: &str| match media(MediaKind::Audio, body(base64)).map(|d| d.content)
        {
            Ok(DraftContent::Media(m)) => m.mimetype,
            _ => None,
        };
        // An Ogg page whose first packet is Opus's header; a bare "OggS" (or Vorbis in Ogg) is not Opus.
        use base64::Engine as _;
        let mut page = b"OggS".to_vec();
        page.extend([0u8; 23]);
        page.push(19);
        page.extend(b"OpusHead\x01\x01");
        let opus = base64::engine::general_purpose::STANDARD.encode(&page);
        assert_eq!(mimetype(&opus).as_deref(), Some(DEFAULT_AUDIO_MIMETYPE));
        let bare = mimetype("T2dnUwACAAAA").unwrap_or_default();
        assert!(!crate::media::convert::is_opus(&bare), "{bare}");
        let mp3 = mimetype("SUQzBAAAAAAAI1RTU0U=").unwrap_or_default();
        assert!(!crate::media::convert::is_opus(&mp3), "{mp3}");
    }

    #[test]
    fn plain_audio_leaves_the_mimetype_to_its_url() {
        let body = SendMediaRequest {
            chat_id: Some("4915100000001@c.us".into()),
            url: Some("https://example.com/a.mp3".into()),
            ..SendMediaRequest::default()
        };
        let draft = media(MediaKind::Audio, body).unwrap();
        let DraftContent::Media(m) = draft.content else {
            panic!("not media")
        };
        assert_eq!(m.kind, MediaKind::Audio);
        assert_eq!(m.mimetype, None);
    }

    #[test]
    fn custom_link_preview_reaches_the_engine_content() {
        let body = SendTextRequest {
            chat_id: Some("4915100000001@c.us".into()),
            text: Some("see https://example.com".into()),
            custom_link_preview: Some(serde_json::json!({
                "url": "https://example.com", "title": "Example", "description": "A page"
            })),
            ..SendTextRequest::default()
        };
        let off = SendTextRequest {
            link_preview: Some(false),
            ..body.clone()
        };
        assert!(
            text(off)
                .unwrap_err()
                .to_string()
                .contains("cannot be combined with linkPreview: false")
        );
        let DraftContent::Ready(MessageContent::Text {
            link_preview,
            custom_preview,
            ..
        }) = text(body).unwrap().content
        else {
            panic!("not text")
        };
        assert!(link_preview);
        let card = custom_preview.unwrap();
        assert_eq!(card.title.as_deref(), Some("Example"));
        assert_eq!(card.description.as_deref(), Some("A page"));
        let bad = SendTextRequest {
            chat_id: Some("4915100000001@c.us".into()),
            text: Some("x".into()),
            custom_link_preview: Some(serde_json::json!({ "title": 5 })),
            ..SendTextRequest::default()
        };
        assert!(
            text(bad)
                .unwrap_err()
                .to_string()
                .contains("customLinkPreview.title")
        );
    }

    #[test]
    fn media_needs_exactly_one_source() {
        assert!(media_input(None, None, true).is_err());
        assert!(media_input(Some("u".into()), Some("b".into()), true).is_err());
        let err = media_input(None, Some("AAAA".into()), false)
            .unwrap_err()
            .to_string();
        assert!(err.contains("mimetype"));
    }
}
