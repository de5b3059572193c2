//! Bulk batches: validate and store a batch (`message_batches`), then send its items one by one in a
//! background task with the requested delay, saving each result and the next index. A batch runs only on
//! the node whose engine runs its session: its runner stops, leaving the batch `processing`, when the
//! session is no longer here (stopped, handed over, taken over), and `keep_resuming` starts a runner for
//! every `processing` batch of a session that runs here (after a restart, a takeover, a later start), so
//! in a cluster no other node sends its items or marks them failed. Cancel marks the remaining items
//! cancelled and wakes the runner; it first waits for an item already handed to the engine, so its answer
//! counts that item as sent or failed, never as cancelled. Items are checked by the single sends' draft
//! builders and media checks when the batch is submitted, and go through the same send path as single
//! sends (pacing, hook, recording). A batch is named by its session and its id (unique per session).

use std::sync::Arc;
use std::time::Duration;

use dashmap::DashMap;
use rand::Rng;
use serde_json::Value;
use tokio_util::sync::CancellationToken;
use wagate_proto::dto::bulk::{
    BatchCancelled, BatchItemError, BatchItemResult, BatchProgress, BatchStatus, BulkAccepted,
    BulkItem, BulkOptions, SendBulkRequest,
};
use wagate_proto::dto::messages::{SendMediaRequest, SendTextRequest};
use wagate_proto::iso_ms;

use super::MessagingService;
use super::draft::{self, Draft, DraftContent, MediaDraft, MediaInput};
use super::error::{MessagingError, MessagingResult, bad};
use super::validate as v;
use crate::engine::MediaKind;
use crate::media::MediaError;
use crate::store::batches::{self as batch_store, BatchRow};
use crate::store::{from_json, now_ms, to_json};

const MAX_ITEMS: usize = 100;
const MIN_DELAY_MS: u64 = 1000;
const DEFAULT_DELAY_MS: u64 = 3000;
/// The longest delay between two items (one hour). The spec names only the minimum; without a ceiling a
/// caller could park a batch in `processing` for ever, and the arithmetic on the delay could overflow.
const MAX_DELAY_MS: u64 = 3_600_000;
/// How long an item waits for its session (running here) to become ready before failing.
const READY_WAIT: Duration = Duration::from_secs(60);
/// How often this node looks for batches of its sessions that no runner here sends.
const RESUME_EVERY: Duration = Duration::from_secs(2);
/// The longest client batchId.
const BATCH_ID_MAX: usize = 128;
const ITEM_TYPES: &str = "text, image, video, audio or document";

/// A batch as its runner knows it: (session id, batch id).
type BatchKey = (String, String);

pub(crate) struct BulkRunner {
    service: Arc<MessagingService>,
    /// Serialises read-modify-write of batch rows between runners and cancel.
    lock: tokio::sync::Mutex<()>,
    running: DashMap<BatchKey, Running>,
    shutdown: CancellationToken,
}

/// A batch's runner on this node.
#[derive(Clone)]
struct Running {
    token: CancellationToken,
    /// Held from an item's send until its result is saved, so a cancel never overtakes a send in flight.
    sending: Arc<tokio::sync::Mutex<()>>,
}

/// One bulk item as a draft, built as its single send's body would be; errors name the item.
fn item_draft(index: usize, item: &BulkItem) -> MessagingResult<Draft> {
    let at = |e: MessagingError| bad(format!("messages[{index}]: {e}"));
    let chat_id = item.chat_id.clone().filter(|c| !c.trim().is_empty());
    let chat_id = chat_id.ok_or_else(|| at(bad("chatId is required")))?;
    let kind = item.kind.as_deref();
    let kind = kind.ok_or_else(|| at(bad(format!("type is required ({ITEM_TYPES})"))))?;
    let content = item_content(item).map_err(at)?;
    let mentions = item_mentions(&content).map_err(at)?;
    let vars = item_variables(item).map_err(at)?;
    // Text and caption get send-template's `{{var}}` substitution.
    let filled = |key: &str| {
        string_at(&content, key)
            .map(|raw| raw.map(|raw| v::render(&raw, &vars)))
            .map_err(at)
    };
    let media_kind = match kind {
        "text" => {
            let body = SendTextRequest {
                chat_id: Some(chat_id),
                text: filled("text")?,
                mentions,
                ..Default::default()
            };
            return draft::text(body).map_err(at);
        }
        "image" => MediaKind::Image,
        "video" => MediaKind::Video,
        "audio" => MediaKind::Audio,
        "document" => MediaKind::Document,
        other => {
            return Err(at(bad(format!("type must be {ITEM_TYPES}, got '{other}'"))));
        }
    };
    let body = SendMediaRequest {
        chat_id: Some(chat_id),
        caption: filled("caption")?,
        mentions,
        ..media_body(&content, kind).map_err(at)?
    };
    draft::media(media_kind, body).map_err(at)
}

/// The item's `content` object; absent reads as empty.
fn item_content(item: &BulkItem) -> MessagingResult<Value> {
    match &item.content {
        None | Some(Value::Null) => Ok(Value::Object(serde_json::Map::new())),
        Some(content @ Value::Object(_)) => Ok(content.clone()),
        Some(_) => Err(bad("content must be an object")),
    }
}

/// `content.<type>`, `{url|base64, mimetype?, filename?, ptt?}`, as a single media send's body.
fn media_body(content: &Value, kind: &str) -> MessagingResult<SendMediaRequest> {
    let media = match content.get(kind) {
        None | Some(Value::Null) => Value::Object(serde_json::Map::new()),
        Some(media @ Value::Object(_)) => media.clone(),
        Some(_) => return Err(bad(format!("content.{kind} must be an object"))),
    };
    let ptt = match media.get("ptt") {
        None | Some(Value::Null) => None,
        Some(Value::Bool(ptt)) => Some(*ptt),
        Some(_) => return Err(bad("ptt must be a boolean")),
    };
    Ok(SendMediaRequest {
        url: string_at(&media, "url")?,
        base64: string_at(&media, "base64")?,
        mimetype: string_at(&media, "mimetype")?,
        filename: string_at(&media, "filename")?,
        ptt,
        ..Default::default()
    })
}

/// A string field of `object`: a value of another type is refused, not read as absent (a single send's
/// body would not parse either).
fn string_at(object: &Value, key: &str) -> MessagingResult<Option<String>> {
    match object.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(value)) => Ok(Some(value.clone())),
        Some(_) => Err(bad(format!("{key} must be a string"))),
    }
}

/// The client's batchId, checked so that `statusUrl` is a usable path; a generated UUID when absent.
fn batch_id(raw: Option<String>) -> MessagingResult<String> {
    let Some(id) = raw else {
        return Ok(uuid::Uuid::new_v4().to_string());
    };
    if id.trim().is_empty() {
        return Err(bad("batchId must not be empty"));
    }
    if id.chars().count() > BATCH_ID_MAX {
        return Err(bad(format!(
            "batchId must be at most {BATCH_ID_MAX} characters"
        )));
    }
    let allowed = |c: char| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | ':' | '-');
    if !id.chars().all(allowed) {
        return Err(bad(
            "batchId may hold only letters, digits, '.', '_', ':' and '-'",
        ));
    }
    // Dot segments are resolved away by clients, so a statusUrl ending in one would not name the batch.
    if id == "." || id == ".." {
        return Err(bad("batchId must not be '.' or '..'"));
    }
    Ok(id)
}

/// `variables`: an object of the values for the item's `{{name}}` placeholders.
fn item_variables(item: &BulkItem) -> MessagingResult<serde_json::Map<String, Value>> {
    match &item.variables {
        None | Some(Value::Null) => Ok(serde_json::Map::new()),
        Some(Value::Object(vars)) => Ok(vars.clone()),
        Some(_) => Err(bad("variables must be an object")),
    }
}

/// `content.mentions`: per item, since a WID is taggable only in a chat it is in.
fn item_mentions(content: &Value) -> MessagingResult<Vec<String>> {
    match content.get("mentions") {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(list) => serde_json::from_value(list.clone())
            .map_err(|_| bad("content.mentions must be an array of strings")),
    }
}

/// The size an item's inline base64 media decodes to (0 without one), known before the batch is accepted
/// so that media over `MEDIA_DOWNLOAD_MAX_BYTES` is refused with 413 as a single send's is.
fn inline_media_bytes(item: &BulkItem) -> u64 {
    let decoded = item
        .kind
        .as_deref()
        .and_then(|kind| item.content.as_ref()?.get(kind)?.get("base64")?.as_str())
        .map_or(0, decoded_len);
    decoded as u64
}

/// The decoded size of base64 text, padded or not: each digit carries six bits and padding none, so a
/// blob of exactly the cap passes.
fn decoded_len(b64: &str) -> usize {
    let digits = b64
        .bytes()
        .filter(|b| !b.is_ascii_whitespace() && *b != b'=')
        .count();
    digits * 6 / 8
}

/// An item's media source that a single send would refuse (a malformed URL, undecodable or `data:`
/// base64) is refused now, with that send's message, rather than failing at its turn. The address guard
/// still judges a URL when it is fetched (`SEND_BLOCKED`).
fn check_media(index: usize, draft: &Draft) -> MessagingResult<()> {
    let checked = match &draft.content {
        DraftContent::Media(MediaDraft { input, .. }) => match input {
            MediaInput::Base64(data) => crate::media::check_base64(data),
            MediaInput::Url(url) => crate::media::check_url(url),
        },
        DraftContent::Ready(_) => Ok(()),
    };
    checked.map_err(|e| bad(format!("messages[{index}]: {e}")))
}

/// `options.delayBetweenMessages`, within its bounds.
fn checked_delay(options: &BulkOptions) -> MessagingResult<u64> {
    let delay = options.delay_between_messages.unwrap_or(DEFAULT_DELAY_MS);
    if !(MIN_DELAY_MS..=MAX_DELAY_MS).contains(&delay) {
        return Err(bad(format!(
            "options.delayBetweenMessages must be between {MIN_DELAY_MS} and {MAX_DELAY_MS} ms"
        )));
    }
    Ok(delay)
}

fn progress(results: &[BatchItemResult]) -> BatchProgress {
    let count = |s: &str| results.iter().filter(|r| r.status == s).count();
    BatchProgress {
        total: results.len(),
        sent: count("sent"),
        failed: count("failed"),
        pending: count("pending"),
        cancelled: count("cancelled"),
    }
}

fn item_error(err: &MessagingError) -> BatchItemError {
    let code = match err {
        MessagingError::Paced { .. } => "SEND_PACING_LIMITED",
        MessagingError::Media(MediaError::Blocked(_)) => "SEND_BLOCKED",
        _ => "SEND_FAILED",
    };
    BatchItemError {
        code: code.into(),
        message: err.to_string(),
    }
}

/// The wait before the next item. Clamped again here because batches stored before the ceiling existed
/// resume through this path; the jitter (up to half the delay) cannot overflow.
fn delay_ms(options: &BulkOptions) -> u64 {
    let base = options
        .delay_between_messages
        .unwrap_or(DEFAULT_DELAY_MS)
        .clamp(MIN_DELAY_MS, MAX_DELAY_MS);
    if options.randomize_delay == Some(true) {
        rand::rng().random_range(base..=base.saturating_add(base / 2))
    } else {
        base
    }
}

impl BulkRunner {
    pub(crate) fn new(
        service: Arc<MessagingService>,
        shutdown: CancellationToken,
    ) -> Arc<BulkRunner> {
        Arc::new(BulkRunner {
            service,
            lock: tokio::sync::Mutex::new(()),
            running: DashMap::new(),
            shutdown,
        })
    }

    /// Validates and stores a batch, starts it, and answers the 202 body.
    pub(crate) async fn submit(
        self: &Arc<Self>,
        session_id: &str,
        req: SendBulkRequest,
    ) -> MessagingResult<BulkAccepted> {
        self.service.check_session(session_id).await?;
        let items = req.messages.unwrap_or_default();
        self.check_items(&items)?;
        let options = req.options.unwrap_or_default();
        let delay = checked_delay(&options)?;
        let batch_id = batch_id(req.batch_id)?;
        // A bulk send is a send: refused with 409 while the session is not ready (spec, States rule 1).
        self.service.sessions.ready_engine(session_id)?;
        let row = new_row(&batch_id, session_id, &items, &options)?;
        // The key is (session, id): another session's batch of the same id is neither a conflict nor named.
        batch_store::insert(&self.service.db, &row)
            .await
            .map_err(|e| match e {
                crate::store::StoreError::Conflict { .. } => {
                    bad(format!("batchId {batch_id} already exists"))
                }
                other => other.into(),
            })?;
        self.spawn((session_id.to_string(), batch_id.clone()));
        let spread = delay.saturating_mul(items.len().saturating_sub(1) as u64);
        let eta = row
            .created_at
            .saturating_add(i64::try_from(spread).unwrap_or(i64::MAX));
        Ok(BulkAccepted {
            status_url: format!("/api/sessions/{session_id}/messages/batch/{batch_id}"),
            batch_id,
            status: "processing".into(),
            total_messages: items.len(),
            estimated_completion_time: iso_ms(eta),
        })
    }

    /// Every item checked as its single send would be (413 for inline media over the cap), before
    /// anything is stored.
    fn check_items(&self, items: &[BulkItem]) -> MessagingResult<()> {
        if items.is_empty() || items.len() > MAX_ITEMS {
            return Err(bad(format!("messages must hold 1-{MAX_ITEMS} items")));
        }
        let max_media = self.service.media_max_bytes();
        for (i, item) in items.iter().enumerate() {
            let draft = item_draft(i, item)?;
            if inline_media_bytes(item) > max_media {
                return Err(MediaError::TooLarge(max_media).into());
            }
            check_media(i, &draft)?;
        }
        Ok(())
    }

    pub(crate) async fn status(
        &self,
        session_id: &str,
        batch_id: &str,
    ) -> MessagingResult<BatchStatus> {
        self.service.check_session(session_id).await?;
        let row = self.load(session_id, batch_id).await?;
        let results: Vec<BatchItemResult> = from_json(&row.results)?;
        Ok(BatchStatus {
            batch_id: row.id,
            status: row.status,
            progress: progress(&results),
            results,
            started_at: row.started_at.map(iso_ms),
            completed_at: row.completed_at.map(iso_ms),
        })
    }

    pub(crate) async fn cancel(
        &self,
        session_id: &str,
        batch_id: &str,
    ) -> MessagingResult<BatchCancelled> {
        self.service.check_session(session_id).await?;
        let key = (session_id.to_string(), batch_id.to_string());
        let running = self.running.get(&key).map(|r| r.clone());
        let _turn = match &running {
            Some(r) => Some(r.sending.lock().await),
            None => None,
        };
        let _guard = self.lock.lock().await;
        let mut row = self.load(session_id, batch_id).await?;
        let mut results: Vec<BatchItemResult> = from_json(&row.results)?;
        // Terminal statuses are exclusive: a finished batch is not reported as cancelled.
        if row.status != "processing" {
            return Err(MessagingError::BadInput(format!(
                "Batch {batch_id} is already {}",
                row.status
            )));
        }
        for r in results.iter_mut().filter(|r| r.status == "pending") {
            r.status = "cancelled".into();
        }
        row.status = "cancelled".into();
        row.completed_at = Some(now_ms());
        row.results = to_json(&results)?;
        row.updated_at = now_ms();
        batch_store::save(&self.service.db, &row).await?;
        if let Some(r) = &running {
            r.token.cancel();
        }
        Ok(BatchCancelled {
            batch_id: row.id,
            status: "cancelled".into(),
            progress: progress(&results),
        })
    }

    async fn load(&self, session_id: &str, batch_id: &str) -> MessagingResult<BatchRow> {
        batch_store::get(&self.service.db, session_id, batch_id)
            .await?
            .ok_or_else(|| MessagingError::NotFound(format!("Batch {batch_id} not found")))
    }

    /// Until shutdown: starts a runner for each `processing` batch of a session whose engine runs here and
    /// that no runner here sends (at boot once sessions are restored, after a takeover or a handover, when
    /// a stopped session starts again).
    pub(crate) async fn keep_resuming(self: Arc<Self>) {
        loop {
            self.resume_here().await;
            tokio::select! {
                _ = self.shutdown.cancelled() => return,
                _ = tokio::time::sleep(RESUME_EVERY) => {}
            }
        }
    }

    async fn resume_here(self: &Arc<Self>) {
        let running: std::collections::HashSet<String> = self
            .service
            .sessions
            .running_engine_ids()
            .into_iter()
            .collect();
        if running.is_empty() {
            return;
        }
        match batch_store::processing(&self.service.db).await {
            Ok(rows) => rows
                .into_iter()
                .filter(|row| running.contains(&row.session_id))
                .for_each(|row| self.spawn((row.session_id, row.id))),
            Err(err) => tracing::error!(error = %err, "bulk batches could not be resumed"),
        }
    }

    /// Starts the batch's runner unless one already sends it here.
    fn spawn(self: &Arc<Self>, key: BatchKey) {
        let running = Running {
            token: self.shutdown.child_token(),
            sending: Arc::new(tokio::sync::Mutex::new(())),
        };
        match self.running.entry(key.clone()) {
            dashmap::mapref::entry::Entry::Occupied(_) => return,
            dashmap::mapref::entry::Entry::Vacant(slot) => {
                slot.insert(running.clone());
            }
        }
        let runner = self.clone();
        tokio::spawn(async move {
            if let Err(err) = runner.run(&key, &running).await {
                tracing::error!(session_id = key.0, batch_id = key.1, error = %err, "bulk batch stopped");
            }
            runner.running.remove(&key);
        });
    }

    async fn run(&self, key: &BatchKey, running: &Running) -> MessagingResult<()> {
        let token = &running.token;
        loop {
            let Some((row, items, options)) = self.next(key).await? else {
                return Ok(());
            };
            let index = usize::try_from(row.next_index).unwrap_or(0);
            if index > 0 {
                tokio::select! {
                    _ = token.cancelled() => return Ok(()),
                    _ = tokio::time::sleep(Duration::from_millis(delay_ms(&options))) => {}
                }
            }
            if token.is_cancelled() || !self.wait_ready(&row.session_id, token).await {
                return Ok(());
            }
            let _sending = running.sending.lock().await;
            // A cancel that took the turn first has marked this item cancelled.
            if token.is_cancelled() {
                return Ok(());
            }
            let outcome = self.send_item(&row.session_id, index, &items[index]).await;
            let stop_on_error = options.stop_on_error == Some(true);
            self.save_result(key, index, &items[index], outcome, stop_on_error)
                .await?;
        }
    }

    /// The batch if it still has an item to send.
    async fn next(
        &self,
        (session_id, batch_id): &BatchKey,
    ) -> MessagingResult<Option<(BatchRow, Vec<BulkItem>, BulkOptions)>> {
        let _guard = self.lock.lock().await;
        let Some(row) = batch_store::get(&self.service.db, session_id, batch_id).await? else {
            return Ok(None);
        };
        let items: Vec<BulkItem> = from_json(&row.items)?;
        if row.status != "processing"
            || usize::try_from(row.next_index).unwrap_or(usize::MAX) >= items.len()
        {
            return Ok(None);
        }
        let options: BulkOptions = from_json(&row.options)?;
        Ok(Some((row, items, options)))
    }

    /// Waits (bounded) for the session to be ready. False on shutdown or cancel, and as soon as no engine
    /// of the session runs here: the batch stays `processing` for the node that runs it next.
    async fn wait_ready(&self, session_id: &str, token: &CancellationToken) -> bool {
        let deadline = tokio::time::Instant::now() + READY_WAIT;
        loop {
            if self.service.sessions.loaded_engine(session_id).is_none() {
                return false;
            }
            if self.service.sessions.ready_engine(session_id).is_ok()
                || tokio::time::Instant::now() >= deadline
            {
                return true;
            }
            tokio::select! {
                _ = token.cancelled() => return false,
                _ = tokio::time::sleep(Duration::from_millis(200)) => {}
            }
        }
    }

    async fn send_item(
        &self,
        session_id: &str,
        index: usize,
        item: &BulkItem,
    ) -> MessagingResult<String> {
        let draft = item_draft(index, item)?;
        Ok(self.service.send(session_id, draft).await?.id)
    }

    async fn save_result(
        &self,
        (session_id, batch_id): &BatchKey,
        index: usize,
        item: &BulkItem,
        outcome: MessagingResult<String>,
        stop_on_error: bool,
    ) -> MessagingResult<()> {
        let _guard = self.lock.lock().await;
        let Some(mut row) = batch_store::get(&self.service.db, session_id, batch_id).await? else {
            return Ok(());
        };
        let mut results: Vec<BatchItemResult> = from_json(&row.results)?;
        let chat_id = item.chat_id.clone().unwrap_or_default();
        let now = now_ms();
        let failed = outcome.is_err();
        let result = match outcome {
            Ok(id) => BatchItemResult {
                chat_id,
                status: "sent".into(),
                message_id: Some(id),
                sent_at: Some(iso_ms(now)),
                error: None,
            },
            Err(err) => BatchItemResult {
                chat_id,
                status: "failed".into(),
                message_id: None,
                sent_at: None,
                error: Some(item_error(&err)),
            },
        };
        if let Some(slot) = results.get_mut(index) {
            *slot = result;
        }
        row.next_index = i64::try_from(index + 1).unwrap_or(i64::MAX);
        if row.status == "processing" && failed && stop_on_error {
            for r in results.iter_mut().filter(|r| r.status == "pending") {
                r.status = "cancelled".into();
            }
            row.status = "failed".into();
            row.completed_at = Some(now);
        } else if row.status == "processing" && index + 1 >= results.len() {
            row.status = "completed".into();
            row.completed_at = Some(now);
        }
        row.results = to_json(&results)?;
        row.updated_at = now;
        batch_store::save(&self.service.db, &row).await?;
        Ok(())
    }
}

fn new_row(
    batch_id: &str,
    session_id: &str,
    items: &[BulkItem],
    options: &BulkOptions,
) -> MessagingResult<BatchRow> {
    let pending: Vec<BatchItemResult> = items
        .iter()
        .map(|i| BatchItemResult {
            chat_id: i.chat_id.clone().unwrap_or_default(),
            status: "pending".into(),
            message_id: None,
            sent_at: None,
            error: None,
        })
        .collect();
    let now = now_ms();
    Ok(BatchRow {
        id: batch_id.to_string(),
        session_id: session_id.to_string(),
        status: "processing".into(),
        items: to_json(&items)?,
        options: to_json(options)?,
        results: to_json(&pending)?,
        next_index: 0,
        started_at: Some(now),
        completed_at: None,
        created_at: now,
        updated_at: now,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inline_media_is_measured_by_its_decoded_size() {
        use base64::Engine as _;
        for len in [0, 1, 2, 3, 998, 999, 1000, 1001] {
            let blob = vec![7u8; len];
            let padded = base64::engine::general_purpose::STANDARD.encode(&blob);
            let bare = base64::engine::general_purpose::STANDARD_NO_PAD.encode(&blob);
            assert_eq!(decoded_len(&padded), len, "padded {len}");
            assert_eq!(decoded_len(&bare), len, "unpadded {len}");
        }
        assert_eq!(decoded_len("AAAA\nAAAA"), 6);
    }

    #[test]
    fn the_delay_of_any_stored_batch_stays_within_bounds() {
        for (delay, randomize) in [
            (Some(u64::MAX), Some(true)),
            (Some(u64::MAX), None),
            (Some(0), Some(true)),
            (None, Some(true)),
        ] {
            let options = BulkOptions {
                delay_between_messages: delay,
                randomize_delay: randomize,
                stop_on_error: None,
            };
            let ms = delay_ms(&options);
            assert!(
                (MIN_DELAY_MS..=MAX_DELAY_MS + MAX_DELAY_MS / 2).contains(&ms),
                "{delay:?} {randomize:?} -> {ms}"
            );
        }
    }
}
