//! The API's own rules for an imported row, beyond what the database and the reads enforce: the ids the
//! API generates are UUIDs as it writes them (sessions, webhooks, templates, automation rules), a session's
//! name and config, a webhook's url, events, filters and retryCount, an automation rule's fields, each by
//! the validator the API's create (or the config PATCH) uses; and no two rows of a table share a primary
//! key. A row that breaks one fails the import like a row the database refuses (`import.rs`). The rules
//! themselves stay with their owners (`sessions`, `http::sessions`, `webhooks`, `automation`).

use std::collections::HashMap;

use wagate_db::table_spec::{TableSpec, camel_case};
use wagate_proto::dto::sessions::UpdateSessionConfigRequest;
use wagate_proto::dto::webhooks::{FilterCondition, WebhookFilters};

use crate::store::data_tables::Bound;

/// The tables whose `id` the API generates with `uuid::Uuid::new_v4` (message batches take the client's
/// `batchId`; the other tables' ids come from engines, the workers or other sources).
const UUID_IDS: [&str; 4] = ["sessions", "webhooks", "templates", "automationRules"];

/// One bound row, its values looked up by column name.
pub(super) struct BoundRow<'a> {
    table: &'a TableSpec,
    values: &'a [Bound],
}

impl<'a> BoundRow<'a> {
    pub(super) fn new(table: &'a TableSpec, values: &'a [Bound]) -> BoundRow<'a> {
        BoundRow { table, values }
    }

    fn value(&self, column: &str) -> Option<&'a Bound> {
        let i = self.table.columns.iter().position(|c| c.name == column)?;
        self.values.get(i)
    }

    fn text(&self, column: &str) -> Option<&'a str> {
        match self.value(column) {
            Some(Bound::Text(Some(text))) => Some(text),
            _ => None,
        }
    }

    fn int(&self, column: &str) -> Option<i64> {
        match self.value(column) {
            Some(Bound::Int(n)) => *n,
            _ => None,
        }
    }

    /// A JSON column decoded into `T`. The read checks (`import.rs` `DECODED`) ran first, so a value
    /// that does not decode here is one those leave alone; it is skipped rather than reported twice.
    fn json<T: serde::de::DeserializeOwned>(&self, column: &str) -> Option<T> {
        self.text(column)
            .and_then(|text| serde_json::from_str::<T>(text).ok())
    }

    /// The row's primary key (the table's `order_by` columns), as text.
    fn key(&self) -> Vec<String> {
        self.table
            .order_by
            .split(',')
            .map(|column| match self.value(column.trim()) {
                Some(Bound::Text(Some(text))) => text.clone(),
                Some(Bound::Int(Some(n))) => n.to_string(),
                Some(Bound::Bool(Some(b))) => b.to_string(),
                _ => String::new(),
            })
            .collect()
    }
}

/// Checks rows of one table as they come: the API's rules per row, and primary keys seen before.
pub(super) struct TableRules<'a> {
    table: &'a TableSpec,
    is_ssrf_protected: bool,
    /// Each primary key seen, with the index of its row.
    seen: HashMap<Vec<String>, usize>,
}

impl<'a> TableRules<'a> {
    pub(super) fn new(table: &'a TableSpec, is_ssrf_protected: bool) -> TableRules<'a> {
        TableRules {
            table,
            is_ssrf_protected,
            seen: HashMap::new(),
        }
    }

    /// Row `index`, refused with the reason (naming the field) when it breaks a rule.
    pub(super) fn check(&mut self, index: usize, row: &BoundRow<'_>) -> Result<(), String> {
        if UUID_IDS.contains(&self.table.key)
            && let Some(id) = row.text("id")
            && !is_canonical_uuid(id)
        {
            return Err(format!(
                "id '{id}' must be a UUID in lowercase hyphenated form, as the API writes them"
            ));
        }
        match self.table.key {
            "sessions" => session(row)?,
            "webhooks" => webhook(row, self.is_ssrf_protected)?,
            "automationRules" => automation_rule(row)?,
            _ => {}
        }
        let key = row.key();
        if let Some(first) = self.seen.get(&key) {
            let columns: Vec<String> = self
                .table
                .order_by
                .split(',')
                .map(|c| camel_case(c.trim()))
                .collect();
            return Err(format!(
                "duplicate primary key ({} = {}), first given in row {first}",
                columns.join(", "),
                key.join(", ")
            ));
        }
        self.seen.insert(key, index);
        Ok(())
    }
}

/// What the session routes address: `SessionId` and `ScopedRawId` take the hyphenated form and look up its
/// lowercase spelling, so a row stored under any other spelling could never be read or deleted.
fn is_canonical_uuid(id: &str) -> bool {
    uuid::Uuid::parse_str(id).is_ok_and(|uuid| uuid.hyphenated().to_string() == id)
}

/// The name as `POST /api/sessions` checks it; the config by the bounds of `PATCH .../config`.
fn session(row: &BoundRow<'_>) -> Result<(), String> {
    if let Some(name) = row.text("name") {
        crate::sessions::service::check_name(name).map_err(|e| e.to_string())?;
    }
    if let Some(config) = row.json::<UpdateSessionConfigRequest>("config") {
        crate::http::sessions::parse_config_change(&config)
            .map_err(|e| format!("config.{}", e.message))?;
    }
    Ok(())
}

fn webhook(row: &BoundRow<'_>, is_ssrf_protected: bool) -> Result<(), String> {
    crate::webhooks::check_imported(
        row.text("url"),
        row.json::<Vec<String>>("events"),
        row.json::<WebhookFilters>("filters"),
        row.int("retry_count"),
        is_ssrf_protected,
    )
    .map_err(|e| e.to_string())
}

fn automation_rule(row: &BoundRow<'_>) -> Result<(), String> {
    crate::automation::check_imported(
        row.text("name"),
        row.json::<Vec<FilterCondition>>("conditions"),
        row.text("reply_text"),
        row.int("cooldown_seconds"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::data_tables::{AUTOMATION_RULES, SESSIONS, bind_value};
    use serde_json::{Value, json};

    fn bound(table: &TableSpec, row: Value) -> Vec<Bound> {
        table
            .columns
            .iter()
            .zip(table.column_keys())
            .map(|(column, key)| bind_value(column, row.get(&key)).unwrap())
            .collect()
    }

    fn check(rules: &mut TableRules<'_>, index: usize, row: Value) -> Result<(), String> {
        let values = bound(rules.table, row);
        rules.check(index, &BoundRow::new(rules.table, &values))
    }

    const ID: &str = "a1111111-1111-4111-8111-11111111111b";

    #[test]
    fn session_rows_follow_the_api_rules() {
        let mut rules = TableRules::new(&SESSIONS, true);
        assert_eq!(
            check(&mut rules, 0, json!({"id": ID, "name": "alpha"})),
            Ok(())
        );
        let mut rules = TableRules::new(&SESSIONS, true);
        for (row, field) in [
            (json!({"id": "not-a-uuid", "name": "alpha"}), "id"),
            (json!({"id": ID.to_uppercase(), "name": "alpha"}), "id"),
            (json!({"id": ID, "name": "bad name!"}), "name"),
            (
                json!({"id": ID, "name": "alpha", "config": {"maxReconnectAttempts": 999}}),
                "maxReconnectAttempts",
            ),
            (
                json!({"id": ID, "name": "alpha", "config": {"reconnectBaseDelay": 1}}),
                "reconnectBaseDelay",
            ),
        ] {
            let err = check(&mut rules, 0, row.clone()).expect_err(&row.to_string());
            assert!(err.contains(field), "{row}: {err}");
        }
        let mut rules = TableRules::new(&SESSIONS, true);
        assert_eq!(
            check(&mut rules, 0, json!({"id": ID, "name": "alpha"})),
            Ok(())
        );
        let again = check(&mut rules, 1, json!({"id": ID, "name": "bravo"})).unwrap_err();
        assert!(
            again.contains(&format!(
                "duplicate primary key (id = {ID}), first given in row 0"
            )),
            "{again}"
        );
    }

    #[test]
    fn rule_rows_follow_the_api_rules() {
        let mut rules = TableRules::new(&AUTOMATION_RULES, true);
        let row = json!({"id": ID, "sessionId": ID, "name": "r", "replyText": "x", "cooldownSeconds": -1});
        let err = check(&mut rules, 0, row).unwrap_err();
        assert!(err.contains("cooldownSeconds"), "{err}");
    }
}
