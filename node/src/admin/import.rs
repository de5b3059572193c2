//! The data import: the payload's `tables` replace the sixteen tables in ONE transaction (a failing row
//! rolls everything back and the answer says `imported: false`). A row fails when the database refuses
//! it, when a read could not decode it (`DECODED`) or when it breaks a rule the API holds its own writes
//! to (`import_rules.rs`); a payload naming none of the tables is refused (400). Before it, running engines of sessions
//! the payload lacks (orphans) refuse the import (409) unless `stopOrphans` stops them or `force` accepts
//! them. Active statuses come back `disconnected` (counted in a notice); `created` stays. Inline media
//! (`media.data`) is written to the media store first; files are content-addressed, so a rollback leaves
//! only unreferenced copies.

use std::collections::{BTreeMap, HashSet};

use serde_json::{Map, Value};
use wagate_db::table_spec::{TableSpec, camel_case};
use wagate_proto::SessionStatus;
use wagate_proto::dto::admin::ImportResult;
use wagate_proto::dto::bulk::{BatchItemResult, BulkItem, BulkOptions};
use wagate_proto::dto::sessions::SessionConfig;
use wagate_proto::dto::webhooks::{FilterCondition, WebhookFilters};
use wagate_workers::webhook::store::outbox::OutboxStatus;

use super::TABLES;
use super::import_rules::{BoundRow, TableRules};
use super::{AdminError, AdminResult, DataAdmin, RemoteStop};
use crate::messaging::record::MediaMeta;
use crate::sessions::service::RunningEngines;
use crate::store::StoreError;
use crate::store::data_tables::{self, Bound};

/// A parsed import body.
#[derive(Debug)]
pub(crate) struct ImportRequest {
    tables: Map<String, Value>,
    stop_orphans: bool,
    force: bool,
}

/// Statuses a restore turns into `disconnected` (the spec's "any active status" row).
const ACTIVE: [&str; 5] = [
    "ready",
    "initializing",
    "qr_ready",
    "authenticating",
    "action_required",
];

/// Why a parsed body cannot be imported at all (400).
pub(crate) type ImportError = String;

impl ImportRequest {
    /// Checks the body's structure: `tables` an object of arrays of objects, the flags booleans.
    pub(crate) fn parse(body: Value) -> Result<ImportRequest, ImportError> {
        let Value::Object(mut body) = body else {
            return Err("Import body must be a JSON object".into());
        };
        let flag = |body: &Map<String, Value>, key: &str| match body.get(key) {
            None | Some(Value::Null) => Ok(false),
            Some(Value::Bool(b)) => Ok(*b),
            Some(_) => Err(format!("{key} must be a boolean")),
        };
        let stop_orphans = flag(&body, "stopOrphans")?;
        let force = flag(&body, "force")?;
        let Some(Value::Object(tables)) = body.remove("tables") else {
            return Err("tables must be an object keyed by table name".into());
        };
        for (key, rows) in &tables {
            let Value::Array(rows) = rows else {
                return Err(format!("tables.{key} must be an array"));
            };
            if rows.iter().any(|r| !r.is_object()) {
                return Err(format!("tables.{key} must be an array of objects"));
            }
        }
        // The import clears every exported table: a payload naming none of them (a misspelt key, an
        // empty object) would only wipe the data, so it is refused before anything happens.
        if !tables.keys().any(|key| TABLES.iter().any(|t| t.key == key)) {
            let known: Vec<&str> = TABLES.iter().map(|t| t.key).collect();
            return Err(format!(
                "tables names none of the exported tables ({}); nothing was imported",
                known.join(", ")
            ));
        }
        Ok(ImportRequest {
            tables,
            stop_orphans,
            force,
        })
    }
}

impl DataAdmin {
    /// `remote` stops orphaned engines that run on other nodes of a cluster.
    pub(crate) async fn import(
        &self,
        mut req: ImportRequest,
        remote: &dyn RemoteStop,
    ) -> AdminResult<ImportResult> {
        let payload_sessions: HashSet<String> = rows(&req.tables, "sessions")
            .filter_map(|r| r.get("id").and_then(Value::as_str).map(str::to_string))
            .collect();
        let mut result = ImportResult {
            imported: false,
            counts: TABLES
                .iter()
                .map(|t| {
                    let n = rows(&req.tables, t.key).count() as u64;
                    (t.key.to_string(), n)
                })
                .collect::<BTreeMap<_, _>>(),
            warnings: Vec::new(),
            notices: Vec::new(),
            restart_required: false,
            orphaned_engines: Vec::new(),
            stopped_orphan_engines: Vec::new(),
            failed_orphan_engines: Vec::new(),
        };
        for key in req.tables.keys() {
            if !TABLES.iter().any(|t| t.key == key) {
                result
                    .warnings
                    .push(format!("Unknown table '{key}' was ignored"));
            }
        }
        let running = self
            .sessions
            .running_engines_everywhere()
            .await
            .map_err(|err| AdminError::Internal(err.to_string()))?;
        let orphans = orphans_of(&running, &payload_sessions);
        if !orphans.is_empty() && !req.stop_orphans && !req.force {
            return Err(would_orphan(&orphans));
        }
        // Rows the database would refuse are found before anything runs is stopped or any file written:
        // a rolled-back import leaves the node as it was.
        match self
            .replace_tables(&req.tables, &payload_sessions, Commit::No)
            .await
        {
            Err(RowFailure::Row(reason)) => {
                result
                    .warnings
                    .push(format!("Import rolled back: {reason}"));
                return Ok(result);
            }
            Err(RowFailure::Store(err)) => return Err(err.into()),
            Ok(_) => {}
        }
        self.settle_orphans(&req, orphans, &running, remote, &mut result)
            .await?;
        let stopped_restored = self
            .stop_restored(&running, &payload_sessions, remote, &mut result)
            .await;
        self.take_in_inline_media(&mut req.tables, &mut result.warnings)
            .await;
        let replaced = self
            .replace_tables(&req.tables, &payload_sessions, Commit::Yes)
            .await;
        self.sessions.forget_cached_records().await;
        match replaced {
            Ok(normalised) => {
                result.imported = true;
                if normalised > 0 {
                    result.notices.push(format!(
                        "{normalised} session(s) with an active status were restored as disconnected; start them again"
                    ));
                }
                if stopped_restored > 0 {
                    result.notices.push(format!(
                        "{stopped_restored} running session(s) of the payload were stopped; their restored records replace them"
                    ));
                }
                self.pipeline.subscriptions().invalidate_all();
                self.automation.forget_all();
            }
            Err(RowFailure::Row(reason)) => {
                result
                    .warnings
                    .push(format!("Import rolled back: {reason}"));
            }
            Err(RowFailure::Store(err)) => return Err(err.into()),
        }
        Ok(result)
    }

    /// The orphans (`orphans_of`), settled: stopped (here, or through the node that runs them) with
    /// `stopOrphans`, else (or for those that did not stop) refused unless `force` reports them.
    async fn settle_orphans(
        &self,
        req: &ImportRequest,
        mut orphans: Vec<String>,
        running: &RunningEngines,
        remote: &dyn RemoteStop,
        result: &mut ImportResult,
    ) -> AdminResult<()> {
        if orphans.is_empty() {
            return Ok(());
        }
        if req.stop_orphans {
            for id in std::mem::take(&mut orphans) {
                let stopped = if running.elsewhere.contains(&id) {
                    remote.stop(&id).await
                } else {
                    self.sessions
                        .unload_engine(&id)
                        .await
                        .map_err(|err| err.to_string())
                };
                match stopped {
                    Ok(()) => result.stopped_orphan_engines.push(id),
                    Err(err) => {
                        tracing::warn!(session_id = %id, error = %err, "orphan engine did not stop before import");
                        result.failed_orphan_engines.push(id.clone());
                        orphans.push(id);
                    }
                }
            }
            if orphans.is_empty() {
                return Ok(());
            }
        }
        if !req.force {
            return Err(would_orphan(&orphans));
        }
        result.restart_required = true;
        result.orphaned_engines = orphans;
        Ok(())
    }

    /// Stops the running engines of sessions the payload restores (here, or through the node that runs
    /// them), so that each reads as its restored record says and can be started again: an engine left
    /// running under a replaced row would keep its old state and refuse the next start. Answers how many
    /// stopped; one that did not stop is a warning.
    async fn stop_restored(
        &self,
        running: &RunningEngines,
        payload_sessions: &HashSet<String>,
        remote: &dyn RemoteStop,
        result: &mut ImportResult,
    ) -> usize {
        let mut stopped = 0;
        let restored = running
            .here
            .iter()
            .map(|id| (id, false))
            .chain(running.elsewhere.iter().map(|id| (id, true)))
            .filter(|(id, _)| payload_sessions.contains(*id));
        for (id, elsewhere) in restored {
            let outcome = if elsewhere {
                remote.stop(id).await
            } else {
                self.sessions
                    .stop(id)
                    .await
                    .map(|_| ())
                    .map_err(|err| err.to_string())
            };
            match outcome {
                Ok(()) => stopped += 1,
                Err(err) => result.warnings.push(format!(
                    "Session {id} was running and did not stop before the import: {err}"
                )),
            }
        }
        stopped
    }

    /// Writes each message's inline `media.data` to the media store and keeps only its key in the row.
    async fn take_in_inline_media(
        &self,
        tables: &mut Map<String, Value>,
        warnings: &mut Vec<String>,
    ) {
        let Some(Value::Array(messages)) = tables.get_mut("messages") else {
            return;
        };
        let mut without_file = 0u64;
        for row in messages.iter_mut() {
            let Some(Value::Object(media)) = row.get_mut("media") else {
                continue;
            };
            if media.remove("omitted").is_some() {
                without_file += 1;
            }
            let Some(Value::String(data)) = media.remove("data") else {
                continue;
            };
            let session_id = row
                .get("sessionId")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string();
            let Some(Value::Object(media)) = row.get_mut("media") else {
                continue;
            };
            match self.media.put_base64(&session_id, &data).await {
                Ok(stored) => {
                    media.insert("key".into(), Value::String(stored.key));
                    media.insert("sizeBytes".into(), Value::from(stored.size));
                }
                Err(err) => {
                    without_file += 1;
                    let id = row.get("id").and_then(Value::as_str).unwrap_or("?");
                    warnings.push(format!("Media of message {id} was not restored: {err}"));
                    // Without a stored object there is no key, and media without one fails every read.
                    if let Some(media) = row.get_mut("media") {
                        *media = Value::Null;
                    }
                }
            }
        }
        if without_file > 0 {
            warnings.push(format!(
                "{without_file} message(s) reference media not included in the payload; import a storage archive to restore the files"
            ));
        }
    }

    /// The one transaction: clear, insert every row, commit. Answers how many statuses were normalised.
    /// With `Commit::No` the same work is rolled back: a trial that finds the rows the database refuses.
    async fn replace_tables(
        &self,
        tables: &Map<String, Value>,
        keep: &HashSet<String>,
        commit: Commit,
    ) -> Result<u64, RowFailure> {
        let mut tx = crate::store::begin(&self.db).await?;
        // A table the database lacks (or will not clear) fails the import like a refused row, with the reason.
        data_tables::clear_for_import(&mut tx, &TABLES, keep)
            .await
            .map_err(|e| RowFailure::Row(format!("clearing the tables: {e}")))?;
        let mut normalised = 0u64;
        for table in TABLES.iter() {
            let sql = data_tables::insert_sql(table);
            let keys = table.column_keys();
            let mut rules = TableRules::new(table, self.webhook_ssrf_protect);
            for (index, row) in rows(tables, table.key).enumerate() {
                let mut values = Vec::with_capacity(table.columns.len());
                for (column, key) in table.columns.iter().zip(&keys) {
                    let mut value = row.get(key);
                    let replaced;
                    if table.key == "sessions"
                        && key == "status"
                        && let Some(status) = value.and_then(Value::as_str)
                        && ACTIVE.contains(&status)
                    {
                        normalised += 1;
                        replaced = Value::String("disconnected".into());
                        value = Some(&replaced);
                    } else if table.key == "sessions" && key == "desiredRunning" {
                        // Restored sessions are started by the operator, not by the next boot.
                        replaced = Value::Bool(false);
                        value = Some(&replaced);
                    }
                    let bound = data_tables::bind_value(column, value)
                        .and_then(|bound| as_read_back(table, key, bound))
                        .map_err(|e| RowFailure::Row(format!("{} row {index}: {e}", table.key)))?;
                    values.push(bound);
                }
                rules
                    .check(index, &BoundRow::new(table, &values))
                    .map_err(|e| RowFailure::Row(format!("{} row {index}: {e}", table.key)))?;
                data_tables::insert_row(&mut tx, &sql, &values)
                    .await
                    .map_err(|e| RowFailure::Row(format!("{} row {index}: {e}", table.key)))?;
            }
        }
        data_tables::reconcile_credentials(&mut tx).await?;
        if commit == Commit::No {
            tx.rollback().await.map_err(StoreError::from)?;
            return Ok(normalised);
        }
        // An imported row may reuse an id a node's page cache holds at the version it came in at.
        crate::store::messages::restamp_versions(&mut tx, wagate_db::now_ms()).await?;
        let committed = tx.commit().await;
        crate::store::message_writes::changed_everywhere();
        committed.map_err(StoreError::from)?;
        Ok(normalised)
    }
}

/// How a read decodes a column's stored text; `Err` names what is wrong.
type Decode = fn(&str) -> Result<(), String>;

/// The columns whose stored text a read decodes into a type (JSON columns beyond "any JSON", enum-typed
/// text), each with that read's own type. A row only the read would refuse would otherwise be stored and
/// answer 500 ("stored data is corrupt") on every later read, so the import decodes it first.
const DECODED: &[(&str, &str, Decode)] = &[
    // store::sessions, `SessionRecord`.
    ("sessions", "status", parsed::<SessionStatus>),
    ("sessions", "config", decoded::<SessionConfig>),
    // wagate_workers::webhook::store::webhooks, `WebhookRecord`.
    ("webhooks", "events", decoded::<Vec<String>>),
    ("webhooks", "filters", decoded::<WebhookFilters>),
    // messaging::reads, `to_message` and `media_stream`.
    ("messages", "media", message_media),
    ("messages", "mentionedIds", decoded::<Vec<String>>),
    // messaging::bulk, the batch status read and the runner's resume.
    ("messageBatches", "items", decoded::<Vec<BulkItem>>),
    ("messageBatches", "options", decoded::<BulkOptions>),
    ("messageBatches", "results", decoded::<Vec<BatchItemResult>>),
    // wagate_workers::webhook::store::outbox, every read of a row's status.
    ("webhookOutboxEvents", "status", parsed::<OutboxStatus>),
    // store::automation, `RuleRecord`.
    (
        "automationRules",
        "conditions",
        decoded::<Vec<FilterCondition>>,
    ),
];

/// `bound`, refused when a read of the stored row would fail: a key column (those a table is ordered by)
/// left null, or text the column's read cannot decode ([`DECODED`]).
fn as_read_back(table: &TableSpec, key: &str, bound: Bound) -> Result<Bound, String> {
    let is_key = table
        .order_by
        .split(',')
        .any(|k| camel_case(k.trim()) == key);
    match &bound {
        Bound::Text(None) | Bound::Int(None) | Bound::Bool(None) if is_key => {
            return Err(format!("{key} is required"));
        }
        Bound::Text(Some(text)) => {
            let decode = DECODED
                .iter()
                .find(|(t, k, _)| *t == table.key && *k == key);
            if let Some((_, _, decode)) = decode {
                decode(text).map_err(|e| format!("{key} is malformed: {e}"))?;
            }
        }
        _ => {}
    }
    Ok(bound)
}

fn decoded<T: serde::de::DeserializeOwned>(text: &str) -> Result<(), String> {
    crate::store::from_json::<T>(text)
        .map(|_| ())
        .map_err(|e| e.to_string())
}

fn parsed<T: std::str::FromStr>(text: &str) -> Result<(), String>
where
    T::Err: std::fmt::Display,
{
    text.parse::<T>().map(|_| ()).map_err(|e| e.to_string())
}

/// A message's media as `MediaMeta`; inline `data` stands for the key and size that
/// `take_in_inline_media` writes in before the rows that are committed.
fn message_media(text: &str) -> Result<(), String> {
    let mut media: Value = serde_json::from_str(text).map_err(|e| e.to_string())?;
    if let Value::Object(fields) = &mut media
        && fields.get("data").is_some_and(Value::is_string)
    {
        fields.entry("key").or_insert(Value::from(""));
        fields.entry("sizeBytes").or_insert(Value::from(0));
    }
    serde_json::from_value::<MediaMeta>(media)
        .map(|_| ())
        .map_err(|e| e.to_string())
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Commit {
    Yes,
    No,
}

/// Running engines (on any node of a cluster; the leases say where) of sessions the payload lacks.
fn orphans_of(running: &RunningEngines, payload_sessions: &HashSet<String>) -> Vec<String> {
    let mut orphans: Vec<String> = running
        .here
        .iter()
        .chain(&running.elsewhere)
        .filter(|id| !payload_sessions.contains(*id))
        .cloned()
        .collect();
    orphans.sort();
    orphans.dedup();
    orphans
}

fn would_orphan(orphans: &[String]) -> AdminError {
    AdminError::Conflict(format!(
        "Import would orphan running engines of sessions missing from the payload: {}. \
         Retry with stopOrphans=true to stop them first, or force=true to import anyway",
        orphans.join(", ")
    ))
}

enum RowFailure {
    /// A row the database refused, or a value of the wrong type: the import is rolled back.
    Row(String),
    Store(crate::store::StoreError),
}

impl From<crate::store::StoreError> for RowFailure {
    fn from(err: crate::store::StoreError) -> Self {
        RowFailure::Store(err)
    }
}

fn rows<'a>(
    tables: &'a Map<String, Value>,
    key: &str,
) -> impl Iterator<Item = &'a Map<String, Value>> {
    tables
        .get(key)
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_object)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn structure_is_checked_before_anything_runs() {
        assert!(ImportRequest::parse(serde_json::json!([])).is_err());
        assert!(ImportRequest::parse(serde_json::json!({})).is_err());
        assert!(ImportRequest::parse(serde_json::json!({"tables": {"sessions": {}}})).is_err());
        assert!(ImportRequest::parse(serde_json::json!({"tables": {"sessions": [1]}})).is_err());
        assert!(ImportRequest::parse(serde_json::json!({"tables": {}, "force": "yes"})).is_err());
        let none = ImportRequest::parse(serde_json::json!({"tables": {"sesions": []}}));
        assert!(none.is_err_and(|e| e.contains("none of the exported tables")));
        assert!(ImportRequest::parse(serde_json::json!({"tables": {}})).is_err());
        // An unknown table beside a known one is a warning at import time, not a refusal.
        assert!(
            ImportRequest::parse(serde_json::json!({"tables": {"sesions": [], "templates": []}}))
                .is_ok()
        );
        let ok = ImportRequest::parse(
            serde_json::json!({"tables": {"sessions": []}, "stopOrphans": true}),
        )
        .unwrap();
        assert!(ok.stop_orphans && !ok.force);
    }
}
