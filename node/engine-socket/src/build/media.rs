//! Media messages from the library's upload result. The CDN and crypto fields are copied exactly as
//! the library's own `whatsapp_rust::media::*_message` builders copy them (their tests are the oracle
//! mirrored below); we add what those builders lack: stickers, the file name of documents, and the
//! caption/quote/mention context on every kind.

use whatsapp_rust::buffa::MessageField;
use whatsapp_rust::download::MediaType;
use whatsapp_rust::upload::UploadResponse;

use super::wa;

/// Which send route the media came from (`Voice` is push-to-talk audio).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MediaKind {
    Image,
    Video,
    Audio,
    Voice,
    Document,
    Sticker,
}

/// The upload kind the library encrypts and files the bytes under.
pub fn media_type(kind: MediaKind) -> MediaType {
    match kind {
        MediaKind::Image => MediaType::Image,
        MediaKind::Video => MediaType::Video,
        MediaKind::Audio | MediaKind::Voice => MediaType::Audio,
        MediaKind::Document => MediaType::Document,
        MediaKind::Sticker => MediaType::Sticker,
    }
}

/// The library's `UploadResponse`, as plain data (it is `non_exhaustive`, so it cannot be built
/// outside the library; this can, which is what makes the builders testable).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Uploaded {
    pub url: String,
    pub direct_path: String,
    pub media_key: [u8; 32],
    pub file_enc_sha256: [u8; 32],
    pub file_sha256: [u8; 32],
    pub file_length: u64,
    pub media_key_timestamp: i64,
    pub streaming_sidecar: Option<Vec<u8>>,
}

impl From<UploadResponse> for Uploaded {
    fn from(r: UploadResponse) -> Self {
        Self {
            url: r.url,
            direct_path: r.direct_path,
            media_key: r.media_key,
            file_enc_sha256: r.file_enc_sha256,
            file_sha256: r.file_sha256,
            file_length: r.file_length,
            media_key_timestamp: r.media_key_timestamp,
            streaming_sidecar: r.streaming_sidecar,
        }
    }
}

/// How to present the media.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct MediaOptions {
    pub mimetype: Option<String>,
    pub caption: Option<String>,
    pub filename: Option<String>,
    pub context: Option<wa::ContextInfo>,
}

/// The message for an uploaded file of `kind`.
pub fn media(kind: MediaKind, up: Uploaded, opts: MediaOptions) -> wa::Message {
    let ctx = opts.context.map(MessageField::some).unwrap_or_default();
    let mime = |default: &str| Some(opts.mimetype.clone().unwrap_or_else(|| default.to_string()));
    let mut msg = wa::Message::default();
    match kind {
        MediaKind::Image => {
            msg.image_message = MessageField::some(wa::message::ImageMessage {
                url: Some(up.url),
                direct_path: Some(up.direct_path),
                media_key: Some(up.media_key.to_vec()),
                file_sha256: Some(up.file_sha256.to_vec()),
                file_enc_sha256: Some(up.file_enc_sha256.to_vec()),
                file_length: Some(up.file_length),
                media_key_timestamp: Some(up.media_key_timestamp),
                mimetype: mime("image/jpeg"),
                caption: opts.caption,
                context_info: ctx,
                ..Default::default()
            })
        }
        MediaKind::Video => {
            msg.video_message = MessageField::some(wa::message::VideoMessage {
                url: Some(up.url),
                direct_path: Some(up.direct_path),
                media_key: Some(up.media_key.to_vec()),
                file_sha256: Some(up.file_sha256.to_vec()),
                file_enc_sha256: Some(up.file_enc_sha256.to_vec()),
                file_length: Some(up.file_length),
                media_key_timestamp: Some(up.media_key_timestamp),
                streaming_sidecar: up.streaming_sidecar,
                mimetype: mime("video/mp4"),
                caption: opts.caption,
                context_info: ctx,
                ..Default::default()
            })
        }
        MediaKind::Audio | MediaKind::Voice => {
            msg.audio_message = MessageField::some(wa::message::AudioMessage {
                url: Some(up.url),
                direct_path: Some(up.direct_path),
                media_key: Some(up.media_key.to_vec()),
                file_sha256: Some(up.file_sha256.to_vec()),
                file_enc_sha256: Some(up.file_enc_sha256.to_vec()),
                file_length: Some(up.file_length),
                media_key_timestamp: Some(up.media_key_timestamp),
                streaming_sidecar: up.streaming_sidecar,
                mimetype: mime("audio/ogg; codecs=opus"),
                ptt: Some(kind == MediaKind::Voice),
                context_info: ctx,
                ..Default::default()
            })
        }
        MediaKind::Document => {
            msg.document_message = MessageField::some(wa::message::DocumentMessage {
                url: Some(up.url),
                direct_path: Some(up.direct_path),
                media_key: Some(up.media_key.to_vec()),
                file_sha256: Some(up.file_sha256.to_vec()),
                file_enc_sha256: Some(up.file_enc_sha256.to_vec()),
                file_length: Some(up.file_length),
                media_key_timestamp: Some(up.media_key_timestamp),
                mimetype: mime("application/octet-stream"),
                title: opts.filename.clone(),
                file_name: opts.filename,
                caption: opts.caption,
                context_info: ctx,
                ..Default::default()
            })
        }
        MediaKind::Sticker => {
            msg.sticker_message = MessageField::some(wa::message::StickerMessage {
                url: Some(up.url),
                direct_path: Some(up.direct_path),
                media_key: Some(up.media_key.to_vec()),
                file_sha256: Some(up.file_sha256.to_vec()),
                file_enc_sha256: Some(up.file_enc_sha256.to_vec()),
                file_length: Some(up.file_length),
                media_key_timestamp: Some(up.media_key_timestamp),
                mimetype: mime("image/webp"),
                is_animated: Some(false),
                context_info: ctx,
                ..Default::default()
            })
        }
    }
    msg
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The library's own `media::tests::sample_upload`.
    fn sample_upload() -> Uploaded {
        Uploaded {
            url: "https://cdn/u".into(),
            direct_path: "/d".into(),
            media_key: [1u8; 32],
            file_enc_sha256: [2u8; 32],
            file_sha256: [3u8; 32],
            file_length: 4096,
            media_key_timestamp: 1_700_000_000,
            streaming_sidecar: Some(vec![9, 9, 9]),
        }
    }

    // Mirrors `whatsapp_rust::media::tests::image_maps_cdn_fields_and_defaults_mimetype`.
    #[test]
    fn image_maps_cdn_fields_and_defaults_mimetype() {
        let msg = media(MediaKind::Image, sample_upload(), MediaOptions::default());
        let im = msg.image_message.as_option().expect("image");
        assert_eq!(im.url.as_deref(), Some("https://cdn/u"));
        assert_eq!(im.direct_path.as_deref(), Some("/d"));
        assert_eq!(im.media_key.as_deref(), Some(&[1u8; 32][..]));
        assert_eq!(im.file_sha256.as_deref(), Some(&[3u8; 32][..]));
        assert_eq!(im.file_enc_sha256.as_deref(), Some(&[2u8; 32][..]));
        assert_eq!(im.file_length, Some(4096));
        assert_eq!(im.media_key_timestamp, Some(1_700_000_000));
        assert_eq!(im.mimetype.as_deref(), Some("image/jpeg"));
    }

    // Mirrors `video_carries_sidecar_and_options`.
    #[test]
    fn video_carries_sidecar_and_caption() {
        let opts = MediaOptions {
            caption: Some("c".into()),
            ..Default::default()
        };
        let msg = media(MediaKind::Video, sample_upload(), opts);
        let vm = msg.video_message.as_option().expect("video");
        assert_eq!(vm.streaming_sidecar.as_deref(), Some(&[9, 9, 9][..]));
        assert_eq!(vm.caption.as_deref(), Some("c"));
        assert_eq!(vm.mimetype.as_deref(), Some("video/mp4"));
    }

    // Mirrors `document_and_audio_set_type_specific_fields`.
    #[test]
    fn document_and_voice_set_type_specific_fields() {
        let opts = MediaOptions {
            filename: Some("f.pdf".into()),
            ..Default::default()
        };
        let doc = media(MediaKind::Document, sample_upload(), opts);
        let doc = doc.document_message.as_option().expect("document");
        assert_eq!(doc.file_name.as_deref(), Some("f.pdf"));
        assert_eq!(doc.mimetype.as_deref(), Some("application/octet-stream"));

        let voice = media(MediaKind::Voice, sample_upload(), MediaOptions::default());
        let audio = voice.audio_message.as_option().expect("audio");
        assert_eq!(audio.ptt, Some(true));
        assert_eq!(audio.mimetype.as_deref(), Some("audio/ogg; codecs=opus"));
        assert_eq!(audio.streaming_sidecar.as_deref(), Some(&[9, 9, 9][..]));
        let plain = media(MediaKind::Audio, sample_upload(), MediaOptions::default());
        assert_eq!(
            plain.audio_message.as_option().and_then(|a| a.ptt),
            Some(false)
        );
    }

    #[test]
    fn sticker_is_webp_with_the_upload_fields() {
        let msg = media(MediaKind::Sticker, sample_upload(), MediaOptions::default());
        let st = msg.sticker_message.as_option().expect("sticker");
        assert_eq!(st.mimetype.as_deref(), Some("image/webp"));
        assert_eq!(st.direct_path.as_deref(), Some("/d"));
        assert_eq!(st.media_key.as_deref(), Some(&[1u8; 32][..]));
        assert_eq!(st.file_length, Some(4096));
        assert_eq!(media_type(MediaKind::Sticker), MediaType::Sticker);
    }

    #[test]
    fn context_is_attached_to_the_media_message() {
        let opts = MediaOptions {
            context: Some(wa::ContextInfo {
                mentioned_jid: vec!["1@s.whatsapp.net".into()],
                ..Default::default()
            }),
            ..Default::default()
        };
        let msg = media(MediaKind::Image, sample_upload(), opts);
        let ctx = msg
            .image_message
            .as_option()
            .and_then(|m| m.context_info.as_option());
        assert_eq!(ctx.map(|c| c.mentioned_jid.len()), Some(1));
        assert_eq!(media_type(MediaKind::Voice), MediaType::Audio);
    }
}
