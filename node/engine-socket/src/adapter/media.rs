//! Received media: the payload's media part downloaded and decrypted by the library, streamed into a
//! capped temporary file of the media store and adopted under its content address, so a message event
//! and the stored row carry it. Media over `MEDIA_DOWNLOAD_MAX_BYTES` (declared or received) is refused
//! before or while it arrives; the caller stores the message without it.

use std::io::{Seek, SeekFrom, Write};

use crate::whatsapp_rust::Client;
use crate::whatsapp_rust::download::{DownloadWriter, Downloadable, MediaDownloader};
use crate::whatsapp_rust::wacore::proto_helpers::MessageExt;
use crate::whatsapp_rust::waproto::whatsapp as wa;
use async_trait::async_trait;

use wagate_engine_api::ReceivedMedia;
use wagate_engine_api::media::{EngineMedia, MediaUpload};

/// Who fetches from the CDN: the live client (it asks the server for hosts and credentials), or a
/// `MediaDownloader` with hosts of its own (static URLs, tests).
#[async_trait]
pub(super) trait Fetch: Send + Sync {
    async fn to_sink(&self, media: &dyn Downloadable, sink: Sink) -> anyhow::Result<Sink>;
}

#[async_trait]
impl Fetch for Client {
    async fn to_sink(&self, media: &dyn Downloadable, sink: Sink) -> anyhow::Result<Sink> {
        self.download_to_writer(media, sink).await
    }
}

#[async_trait]
impl Fetch for MediaDownloader {
    async fn to_sink(&self, media: &dyn Downloadable, sink: Sink) -> anyhow::Result<Sink> {
        Ok(self.download_to_writer(media, sink).await?)
    }
}

/// The library's writer contract over an upload into the node's media store.
pub(super) struct Sink(Box<dyn MediaUpload>);

impl Write for Sink {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.write(buf)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        self.0.flush()
    }
}

impl Seek for Sink {
    fn seek(&mut self, pos: SeekFrom) -> std::io::Result<u64> {
        self.0.seek(pos)
    }
}

impl DownloadWriter for Sink {
    fn truncate(&mut self, len: u64) -> std::io::Result<()> {
        self.0.truncate(len)
    }
}

/// The media part of a payload and how to present it.
struct Part<'a> {
    media: &'a dyn Downloadable,
    mimetype: Option<&'a str>,
    filename: Option<&'a str>,
}

fn part(message: &wa::Message) -> Option<Part<'_>> {
    let m = message.get_base_message();
    if let Some(x) = m.image_message.as_option() {
        return Some(Part {
            media: x,
            mimetype: x.mimetype.as_deref(),
            filename: None,
        });
    }
    if let Some(x) = m.video_message.as_option() {
        return Some(Part {
            media: x,
            mimetype: x.mimetype.as_deref(),
            filename: None,
        });
    }
    if let Some(x) = m.audio_message.as_option() {
        return Some(Part {
            media: x,
            mimetype: x.mimetype.as_deref(),
            filename: None,
        });
    }
    if let Some(x) = m.document_message.as_option() {
        let filename = x.file_name.as_deref();
        return Some(Part {
            media: x,
            mimetype: x.mimetype.as_deref(),
            filename,
        });
    }
    if let Some(x) = m.sticker_message.as_option() {
        return Some(Part {
            media: x,
            mimetype: x.mimetype.as_deref(),
            filename: None,
        });
    }
    None
}

/// Downloads the payload's media into the store. `Err` says why there is none (logged by the caller).
pub(super) async fn download(
    fetch: &dyn Fetch,
    store: &dyn EngineMedia,
    payload: &wa::Message,
) -> Result<ReceivedMedia, String> {
    let part = part(payload).ok_or("the message carries no downloadable media")?;
    let max = store.max_bytes();
    if let Some(declared) = part.media.file_length().filter(|len| *len > max) {
        return Err(format!(
            "declared size {declared} exceeds MEDIA_DOWNLOAD_MAX_BYTES ({max})"
        ));
    }
    let upload = store.begin().map_err(|e| e.to_string())?;
    let Sink(upload) = fetch
        .to_sink(part.media, Sink(upload))
        .await
        .map_err(|e| format!("{e:#}"))?;
    let stored = store.finish(upload).await.map_err(|e| e.to_string())?;
    let data = store
        .inline_copy(&stored)
        .await
        .map_err(|e| e.to_string())?;
    Ok(ReceivedMedia {
        mimetype: part
            .mimetype
            .filter(|m| !m.is_empty())
            .unwrap_or("application/octet-stream")
            .to_string(),
        filename: part.filename.map(str::to_string),
        data,
        stored: Some(Box::new(stored)),
    })
}
