//! The data export: one read snapshot of the sixteen tables, written as JSON while it is read (rows are
//! streamed through a small channel, so memory stays flat however many rows there are). Webhook secrets and
//! headers are not read at all; session proxy URLs lose their credentials; inline media is spent newest
//! first within `EXPORT_INLINE_MEDIA_BUDGET_BYTES` across messages and batches, the rest becomes the omitted
//! marker; an inlined object is base64-encoded into the body as it is read from the media store, never
//! held whole. Which tables exist is checked before the answer starts, so a missing table is listed in
//! `skippedTables`; a read failure after that aborts the body (the client never gets a complete document).

use std::collections::{BTreeMap, HashSet};

use axum::body::Bytes;
use base64::Engine as _;
use futures::StreamExt;
use futures::stream::BoxStream;
use serde_json::{Map, Value};
use tokio::sync::mpsc;

use super::{AdminResult, DataAdmin};
use crate::media::{MediaError, MediaStore};
use wagate_db::table_spec::TableSpec;

use super::TABLES;
use crate::store::data_tables::{self, Cell};
use crate::store::{DataPool, DataTx};

pub(crate) type ExportStream = futures::stream::BoxStream<'static, Result<Bytes, std::io::Error>>;

/// What an export wrote, for its audit row.
#[derive(Debug, Clone, Default)]
pub(crate) struct ExportDone {
    pub counts: BTreeMap<String, u64>,
    pub skipped_tables: Vec<String>,
    pub omitted_messages: u64,
    pub omitted_batches: u64,
    /// False when the read failed or the client went away before the end.
    pub complete: bool,
}

/// Bytes buffered before a chunk is handed to the response body.
const CHUNK: usize = 64 * 1024;

/// An inline-media payload: which row (and which batch item) it belongs to.
type PayloadRef = (&'static str, String, usize);

impl DataAdmin {
    /// Opens the snapshot, decides which media is inlined and starts streaming; `done` runs at the end, and the
    /// audit rows it records are durable before the body ends.
    pub(crate) async fn export(
        &self,
        done: impl FnOnce(ExportDone) + Send + 'static,
    ) -> AdminResult<ExportStream> {
        let mut tx = data_tables::begin_snapshot(&self.db).await?;
        let mut skipped = Vec::new();
        for table in TABLES.iter() {
            if !data_tables::table_exists(&mut tx, table.name).await? {
                skipped.push(table.key.to_string());
            }
        }
        let inline = inline_plan(&mut tx, self.inline_budget).await?;
        let (sender, receiver) = mpsc::channel::<Result<Bytes, std::io::Error>>(4);
        // The body ends only when every sender is gone: this one is dropped after `done`'s audit row is
        // durable, so a client that saw the whole export never outlives its audit row.
        let hold_body_open = sender.clone();
        let writer = Writer {
            sender,
            buf: Vec::with_capacity(CHUNK * 2),
            media: self.media.clone(),
            inline,
            placeholder: format!("wagate-inline-media-{}", uuid::Uuid::new_v4()),
            pending: None,
            done: ExportDone {
                skipped_tables: skipped,
                ..ExportDone::default()
            },
        };
        let db_type = match &self.db {
            DataPool::Sqlite(_) => "sqlite",
            DataPool::Postgres(_) => "postgres",
        };
        tokio::spawn(async move {
            let done_info = writer.run(tx, db_type).await;
            crate::audit::with_durable_audit(async move { done(done_info) }).await;
            drop(hold_body_open);
        });
        let stream = futures::stream::unfold(receiver, |mut rx| async move {
            rx.recv().await.map(|item| (item, rx))
        });
        Ok(stream.boxed())
    }
}

/// Ranks every inline-media payload newest first and keeps those that fit the budget.
async fn inline_plan(tx: &mut DataTx, budget: u64) -> AdminResult<HashSet<PayloadRef>> {
    let mut candidates: Vec<(i64, PayloadRef, u64)> = Vec::new();
    data_tables::for_each_media_candidate(tx, |table, id, at, text| {
        let Ok(value) = serde_json::from_str::<Value>(&text) else {
            return;
        };
        if table == "messages" {
            if value.get("key").and_then(Value::as_str).is_some() {
                let size = value.get("sizeBytes").and_then(Value::as_u64).unwrap_or(0);
                candidates.push((at, (table, id, 0), size.div_ceil(3) * 4));
            }
        } else if let Value::Array(items) = value {
            for (index, item) in items.iter().enumerate() {
                if let Some(b64) = batch_item_media(item).and_then(|m| m.get("base64")) {
                    let len = b64.as_str().map_or(0, str::len) as u64;
                    candidates.push((at, (table, id.clone(), index), len));
                }
            }
        }
    })
    .await?;
    candidates.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| b.1.1.cmp(&a.1.1)));
    let mut left = budget;
    let mut inline = HashSet::new();
    for (_, payload, size) in candidates {
        if size <= left {
            left -= size;
            inline.insert(payload);
        }
    }
    Ok(inline)
}

/// The media object of a bulk item (`content.{image|video|audio|document}`), when it has one.
fn batch_item_media(item: &Value) -> Option<&Value> {
    let content = item.get("content")?;
    ["image", "video", "audio", "document"]
        .iter()
        .find_map(|k| content.get(*k).filter(|v| v.is_object()))
}

fn batch_item_media_mut(item: &mut Value) -> Option<&mut Map<String, Value>> {
    let content = item.get_mut("content")?.as_object_mut()?;
    let key = ["image", "video", "audio", "document"]
        .into_iter()
        .find(|k| content.get(*k).is_some_and(Value::is_object))?;
    content.get_mut(key)?.as_object_mut()
}

/// A proxy URL without its credentials; `None` when it does not parse.
pub(super) fn strip_proxy_credentials(raw: &str) -> Option<String> {
    let mut url = url::Url::parse(raw).ok()?;
    url.host_str()?;
    url.set_username("").ok()?;
    url.set_password(None).ok()?;
    let mut clean = url.to_string();
    // The URL type adds a root path to a bare `scheme://host:port`; keep what was written.
    if url.path() == "/" && !raw.ends_with('/') && clean.ends_with('/') {
        clean.pop();
    }
    Some(clean)
}

struct Writer {
    sender: mpsc::Sender<Result<Bytes, std::io::Error>>,
    buf: Vec<u8>,
    media: MediaStore,
    inline: HashSet<PayloadRef>,
    /// Stands in for an inlined object's `data` in the row's JSON until the object is streamed there
    /// (random per export, so no stored text can look like it).
    placeholder: String,
    /// The object of the row being written whose `data` is `placeholder`, opened and not yet read.
    pending: Option<(String, BoxStream<'static, Result<Bytes, MediaError>>)>,
    done: ExportDone,
}

impl Writer {
    async fn run(mut self, mut tx: DataTx, db_type: &str) -> ExportDone {
        match self.write_all(&mut tx, db_type).await {
            Ok(true) => self.done.complete = true,
            Ok(false) => {}
            Err(err) => {
                tracing::warn!(error = %err, "data export failed while streaming");
                let _ = self
                    .sender
                    .send(Err(std::io::Error::other("export failed while reading")))
                    .await;
            }
        }
        self.done
    }

    /// `Ok(false)` when the client went away.
    async fn write_all(
        &mut self,
        tx: &mut DataTx,
        db_type: &str,
    ) -> Result<bool, crate::store::StoreError> {
        let exported_at = chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true);
        self.buf.extend_from_slice(
            format!(
                "{{\"exportedAt\":\"{exported_at}\",\"dataDbType\":\"{db_type}\",\"tables\":{{"
            )
            .as_bytes(),
        );
        let mut first_table = true;
        for table in TABLES.iter() {
            if self.done.skipped_tables.iter().any(|k| k == table.key) {
                continue;
            }
            if !first_table {
                self.buf.push(b',');
            }
            first_table = false;
            self.buf
                .extend_from_slice(format!("\"{}\":[", table.key).as_bytes());
            let keys = table.column_keys();
            let mut rows = 0u64;
            let mut stream = data_tables::rows(tx, table);
            while let Some(cells) = stream.next().await {
                let row = self.row_json(table, &keys, cells?).await;
                if rows > 0 {
                    self.buf.push(b',');
                }
                rows += 1;
                if !self.write_row(&row).await? {
                    return Ok(false);
                }
            }
            drop(stream);
            self.buf.push(b']');
            self.done.counts.insert(table.key.to_string(), rows);
        }
        let tail = serde_json::json!({
            "counts": self.done.counts,
            "skippedTables": self.done.skipped_tables,
            "omittedInlineMedia": {
                "messages": self.done.omitted_messages,
                "messageBatches": self.done.omitted_batches,
            },
        });
        let tail = tail.to_string();
        // `tail` is `{...}`: splice its members in after the tables object.
        self.buf.extend_from_slice(b"},");
        self.buf.extend_from_slice(&tail.as_bytes()[1..]);
        Ok(self.flush().await)
    }

    /// Writes one row; an inlined object is base64-encoded into the output as it is read, so it is
    /// never held whole (a read failure half-way aborts the export: the JSON is already under way).
    async fn write_row(&mut self, row: &Value) -> Result<bool, crate::store::StoreError> {
        let corrupt = |e: serde_json::Error| crate::store::StoreError::Corrupt(e.to_string());
        let Some((key, mut body)) = self.pending.take() else {
            serde_json::to_writer(&mut self.buf, row).map_err(corrupt)?;
            return Ok(self.flush_if_full().await);
        };
        let text = serde_json::to_string(row).map_err(corrupt)?;
        let marker = format!("\"{}\"", self.placeholder);
        let Some((before, after)) = text.split_once(&marker) else {
            return Err(crate::store::StoreError::Corrupt(
                "inline media placeholder lost".into(),
            ));
        };
        self.buf.extend_from_slice(before.as_bytes());
        self.buf.push(b'"');
        let mut encoder = Base64Chunks::default();
        while let Some(chunk) = body.next().await {
            let chunk = chunk.map_err(|e| {
                crate::store::StoreError::Corrupt(format!("media object {key}: {e}"))
            })?;
            encoder.push(&chunk, &mut self.buf);
            if !self.flush_if_full().await {
                return Ok(false);
            }
        }
        encoder.finish(&mut self.buf);
        self.buf.push(b'"');
        self.buf.extend_from_slice(after.as_bytes());
        Ok(self.flush_if_full().await)
    }

    async fn flush_if_full(&mut self) -> bool {
        if self.buf.len() < CHUNK {
            return true;
        }
        self.flush().await
    }

    async fn flush(&mut self) -> bool {
        let chunk = Bytes::from(std::mem::replace(
            &mut self.buf,
            Vec::with_capacity(CHUNK * 2),
        ));
        self.sender.send(Ok(chunk)).await.is_ok()
    }

    async fn row_json(
        &mut self,
        table: &'static TableSpec,
        keys: &[String],
        cells: Vec<Cell>,
    ) -> Value {
        let mut row = Map::new();
        for ((column, key), cell) in table.columns.iter().zip(keys).zip(cells) {
            row.insert(key.clone(), cell.into_json(column.kind));
        }
        match table.key {
            "sessions" => {
                if let Some(Value::String(raw)) = row.get("proxyUrl") {
                    let clean = strip_proxy_credentials(raw).map_or(Value::Null, Value::String);
                    row.insert("proxyUrl".into(), clean);
                }
            }
            "messages" => self.message_media(&mut row).await,
            "messageBatches" => self.batch_media(&mut row),
            _ => {}
        }
        Value::Object(row)
    }

    /// Inlines the file of a message's media (`data`, base64) when it is within budget; otherwise marks it
    /// `omitted` (the key, mimetype and size stay, so a storage archive can bring the file along).
    async fn message_media(&mut self, row: &mut Map<String, Value>) {
        let id = row
            .get("id")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        let Some(Value::Object(media)) = row.get_mut("media") else {
            return;
        };
        let Some(key) = media.get("key").and_then(Value::as_str).map(str::to_string) else {
            return;
        };
        let payload = ("messages", id, 0usize);
        if self.inline.contains(&payload)
            && let Some(object) = open_object(&self.media, &key).await
        {
            // `write_row` streams the object where the placeholder stands.
            media.insert("data".into(), Value::String(self.placeholder.clone()));
            media.insert("sizeBytes".into(), Value::from(object.size));
            self.pending = Some((key, object.body));
            return;
        }
        media.insert("omitted".into(), Value::Bool(true));
        media.entry("sizeBytes").or_insert(Value::from(0));
        self.done.omitted_messages += 1;
    }

    /// Bulk items carry their media as base64 in the row; those over budget become the omitted marker.
    fn batch_media(&mut self, row: &mut Map<String, Value>) {
        let id = row
            .get("id")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        let Some(Value::Array(items)) = row.get_mut("items") else {
            return;
        };
        for (index, item) in items.iter_mut().enumerate() {
            let Some(media) = batch_item_media_mut(item) else {
                continue;
            };
            let Some(b64) = media.get("base64").and_then(Value::as_str) else {
                continue;
            };
            if self.inline.contains(&("messageBatches", id.clone(), index)) {
                continue;
            }
            let size = decoded_len(b64);
            media.remove("base64");
            media.insert("omitted".into(), Value::Bool(true));
            media.insert("sizeBytes".into(), Value::from(size));
            self.done.omitted_batches += 1;
        }
    }
}

/// The object, opened for streaming; a missing or unreadable one is logged and exported as omitted.
async fn open_object(media: &MediaStore, key: &str) -> Option<crate::media::MediaStream> {
    match media.stream(key).await {
        Ok(Some(object)) => Some(object),
        Ok(None) => {
            tracing::warn!(key, "media object missing; exported as omitted");
            None
        }
        Err(err) => {
            tracing::warn!(key, error = %err, "media object unreadable; exported as omitted");
            None
        }
    }
}

/// Base64 of a body that arrives in chunks of any length: whole 3-byte groups go out as they come, up
/// to two bytes wait for the next chunk, the padding comes at the end.
#[derive(Default)]
struct Base64Chunks {
    carry: Vec<u8>,
    text: String,
}

impl Base64Chunks {
    fn push(&mut self, chunk: &[u8], out: &mut Vec<u8>) {
        self.carry.extend_from_slice(chunk);
        let whole = self.carry.len() - self.carry.len() % 3;
        self.text.clear();
        base64::engine::general_purpose::STANDARD
            .encode_string(&self.carry[..whole], &mut self.text);
        self.carry.drain(..whole);
        out.extend_from_slice(self.text.as_bytes());
    }

    fn finish(mut self, out: &mut Vec<u8>) {
        self.text.clear();
        base64::engine::general_purpose::STANDARD.encode_string(&self.carry, &mut self.text);
        out.extend_from_slice(self.text.as_bytes());
    }
}

/// Bytes a base64 text decodes to.
fn decoded_len(b64: &str) -> u64 {
    let trimmed = b64.trim_end_matches('=');
    (trimmed.len() as u64 * 3) / 4
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proxy_credentials_are_stripped_and_garbage_cleared() {
        assert_eq!(
            strip_proxy_credentials("socks5://user:pass@10.0.0.1:1080").as_deref(),
            Some("socks5://10.0.0.1:1080")
        );
        assert_eq!(
            strip_proxy_credentials("http://proxy.example:3128").as_deref(),
            Some("http://proxy.example:3128")
        );
        assert_eq!(strip_proxy_credentials("not a url"), None);
        assert_eq!(decoded_len("aGVsbG8="), 5);
    }

    #[test]
    fn base64_in_chunks_matches_the_whole_encoding() {
        let data: Vec<u8> = (0..1000u32).map(|i| (i * 7 % 256) as u8).collect();
        for len in [0, 1, 2, 3, 4, 5, 998, 1000] {
            let whole = base64::engine::general_purpose::STANDARD.encode(&data[..len]);
            for step in [1, 2, 3, 4, 7, 64, 1000] {
                let mut encoder = Base64Chunks::default();
                let mut out = Vec::new();
                for chunk in data[..len].chunks(step) {
                    encoder.push(chunk, &mut out);
                }
                encoder.finish(&mut out);
                assert_eq!(String::from_utf8(out).unwrap(), whole, "{len} in {step}s");
            }
        }
    }
}
