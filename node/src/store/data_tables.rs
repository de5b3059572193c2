//! The node's eleven of the sixteen tables the spec's data export covers, described once
//! (`wagate_db::table_spec`: column, kind, what an import binds when a row lacks the key), and the SQL that
//! reads any described table row by row and writes rows back. The other five are described where their SQL
//! lives: the webhook and ingress tables by the workers crate, `lidMappings` by the socket engine
//! (`admin::TABLES` puts the list together). Columns the export leaves out on purpose are simply not
//! listed: the sessions' cluster bookkeeping (`lease_generation`, `owner_node`), which belongs to the
//! database the rows live in.
//! Engine-owned tables (`engine_auth`, the socket engine's other tables) and derived or cache tables
//! (`message_reactions`, `contact_names`, `poll_votes`, `idempotency_keys`) are not exported.
//! Each table's `order_by` is its primary key: the import refuses a payload repeating one
//! (`admin/import_rules.rs`).

use serde_json::Value;
use wagate_db::table_spec::{
    Column, Kind, TableSpec, camel_case, flag, int, int_or, json, json_or, text,
};

use super::{DataPool, DataTx, StoreResult, execute_tx, on_tx};

/// The statement [`rows`] runs for `table`.
fn select_sql(table: &TableSpec) -> String {
    let exprs: Vec<String> = table
        .columns
        .iter()
        .map(|c| match c.kind {
            Kind::Int => format!("CAST({0} AS BIGINT) AS {0}", c.name),
            Kind::Bool => format!(
                "CAST(CASE WHEN {0} THEN 1 ELSE 0 END AS BIGINT) AS {0}",
                c.name
            ),
            Kind::Text | Kind::Json => c.name.to_string(),
        })
        .collect();
    format!(
        "SELECT {} FROM {} ORDER BY {}",
        exprs.join(", "),
        table.name,
        table.order_by
    )
}

/// The statement `insert_row` runs for `table`. Every parameter is cast to the type `insert_row` binds for
/// its kind (TEXT, BIGINT, BOOLEAN; the database converts on assignment, e.g. BIGINT into an INTEGER
/// column). The casts also keep the text apart from the owning store's own INSERT of the same columns:
/// PostgreSQL statements are prepared once per pooled connection and found again by their text alone, so a
/// shared text would bind the import's BIGINTs against a store's INTEGER parameters, or the store's INTEGERs
/// against the import's BIGINT ones ("incorrect binary data format", "insufficient data left in message").
/// The module's other statements bind text only, or nothing, so sharing their text is harmless.
pub(crate) fn insert_sql(table: &TableSpec) -> String {
    let names: Vec<&str> = table.columns.iter().map(|c| c.name).collect();
    let params: Vec<String> = table
        .columns
        .iter()
        .enumerate()
        .map(|(i, c)| format!("CAST(${} AS {})", i + 1, bind_type(c.kind)))
        .collect();
    let mut sql = format!(
        "INSERT INTO {} ({}) VALUES ({})",
        table.name,
        names.join(", "),
        params.join(", ")
    );
    // Sessions are upserted rather than re-inserted: deleting a row that stays would cascade to the
    // engine credentials kept under it.
    if table.name == "sessions" {
        let sets: Vec<String> = names
            .iter()
            .filter(|n| **n != "id")
            .map(|n| format!("{n} = excluded.{n}"))
            .collect();
        sql.push_str(&format!(
            " ON CONFLICT (id) DO UPDATE SET {}",
            sets.join(", ")
        ));
    }
    sql
}

/// The SQL type of what `insert_row` binds for a column of `kind` (see [`Bound`]).
fn bind_type(kind: Kind) -> &'static str {
    match kind {
        Kind::Text | Kind::Json => "TEXT",
        Kind::Int => "BIGINT",
        Kind::Bool => "BOOLEAN",
    }
}

/// `sessions` (`sessions` in an export).
pub(crate) static SESSIONS: TableSpec = TableSpec {
    key: "sessions",
    name: "sessions",
    columns: &[
        text("id"),
        text("name"),
        text("status"),
        text("phone"),
        text("push_name"),
        text("last_error"),
        json_or("config", "{}"),
        text("proxy_url"),
        json("restriction"),
        flag("desired_running", "false"),
        flag("has_credentials", "false"),
        int("connected_at"),
        int("last_active"),
        int("created_at"),
        int("updated_at"),
    ],
    order_by: "id",
};

/// `messages` (`messages` in an export).
pub(crate) static MESSAGES: TableSpec = TableSpec {
    key: "messages",
    name: "messages",
    columns: &[
        text("id"),
        text("session_id"),
        text("wa_message_id"),
        text("chat_id"),
        text("from_jid"),
        text("to_jid"),
        text("chat_name"),
        text("author"),
        text("body"),
        text("type"),
        text("direction"),
        text("status"),
        int("timestamp"),
        flag("has_media", "false"),
        json("media"),
        json("mentioned_ids"),
        flag("is_group", "false"),
        text("quoted_id"),
        json("extra"),
        flag("starred", "false"),
        flag("revoked", "false"),
        int("created_at"),
    ],
    order_by: "id",
};

/// `message_batches` (`messageBatches` in an export).
pub(crate) static MESSAGE_BATCHES: TableSpec = TableSpec {
    key: "messageBatches",
    name: "message_batches",
    columns: &[
        text("id"),
        text("session_id"),
        text("status"),
        json("items"),
        json("options"),
        json("results"),
        int_or("next_index", "0"),
        int("started_at"),
        int("completed_at"),
        int("created_at"),
        int("updated_at"),
    ],
    // The primary key since migration 0100: a batch id is unique within its session only.
    order_by: "session_id, id",
};

/// `templates` (`templates` in an export).
pub(crate) static TEMPLATES: TableSpec = TableSpec {
    key: "templates",
    name: "templates",
    columns: &[
        text("id"),
        text("session_id"),
        text("name"),
        text("body"),
        text("header"),
        text("footer"),
        int("created_at"),
        int("updated_at"),
    ],
    order_by: "id",
};

/// `baileys_stored_messages` (`baileysStoredMessages` in an export).
pub(crate) static BAILEYS_STORED_MESSAGES: TableSpec = TableSpec {
    key: "baileysStoredMessages",
    name: "baileys_stored_messages",
    columns: &[
        text("session_id"),
        text("message_id"),
        json("payload"),
        int("created_at"),
    ],
    order_by: "session_id, message_id",
};

/// `chat_states` (`chatStates` in an export).
pub(crate) static CHAT_STATES: TableSpec = TableSpec {
    key: "chatStates",
    name: "chat_states",
    columns: &[
        text("session_id"),
        text("chat_id"),
        text("name"),
        flag("is_group", "false"),
        flag("archived", "false"),
        flag("pinned", "false"),
        flag("muted", "false"),
        int_or("mute_expiration", "0"),
        int_or("unread_count", "0"),
        json_or("labels", "[]"),
        int("last_message_at"),
        int("updated_at"),
    ],
    order_by: "session_id, chat_id",
};

/// `plugin_instances` (`pluginInstances` in an export).
pub(crate) static PLUGIN_INSTANCES: TableSpec = TableSpec {
    key: "pluginInstances",
    name: "plugin_instances",
    columns: &[
        text("id"),
        text("name"),
        text("version"),
        flag("enabled", "false"),
        json_or("config", "{}"),
        int("created_at"),
        int("updated_at"),
    ],
    order_by: "id",
};

/// `conversation_mappings` (`conversationMappings` in an export).
pub(crate) static CONVERSATION_MAPPINGS: TableSpec = TableSpec {
    key: "conversationMappings",
    name: "conversation_mappings",
    columns: &[
        text("id"),
        text("integration"),
        text("session_id"),
        text("chat_id"),
        text("external_id"),
        int("created_at"),
    ],
    order_by: "id",
};

/// `integration_delivery_failures` (`integrationDeliveryFailures` in an export).
pub(crate) static INTEGRATION_DELIVERY_FAILURES: TableSpec = TableSpec {
    key: "integrationDeliveryFailures",
    name: "integration_delivery_failures",
    columns: &[
        text("id"),
        text("integration"),
        text("session_id"),
        json("payload"),
        int("attempts"),
        text("last_error"),
        int("created_at"),
    ],
    order_by: "id",
};

/// `status_updates` (`statusUpdates` in an export).
pub(crate) static STATUS_UPDATES: TableSpec = TableSpec {
    key: "statusUpdates",
    name: "status_updates",
    columns: &[
        text("id"),
        text("session_id"),
        text("status_id"),
        text("contact"),
        text("direction"),
        text("type"),
        text("caption"),
        flag("has_media", "false"),
        json("media"),
        // The media store object of the status's media (migration 0060); `media` keeps its metadata.
        text("media_key"),
        json("recipients"),
        int("posted_at"),
        int("expires_at"),
        int("created_at"),
        // An own text status's style (migration 0090).
        text("background_color"),
        int("font"),
    ],
    order_by: "id",
};

/// `automation_rules` (`automationRules` in an export).
pub(crate) static AUTOMATION_RULES: TableSpec = TableSpec {
    key: "automationRules",
    name: "automation_rules",
    columns: &[
        text("id"),
        text("session_id"),
        text("name"),
        flag("enabled", "true"),
        json_or("conditions", "[]"),
        text("reply_text"),
        int_or("cooldown_seconds", "0"),
        int("created_at"),
        int("updated_at"),
    ],
    order_by: "id",
};

/// One column's value as read: text (also JSON text) or an integer (also a flag).
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Cell {
    Text(Option<String>),
    Int(Option<i64>),
}

impl Cell {
    /// The value as the export shows it.
    pub(crate) fn into_json(self, kind: Kind) -> Value {
        match (self, kind) {
            (Cell::Text(None), _) | (Cell::Int(None), _) => Value::Null,
            (Cell::Text(Some(s)), Kind::Json) => {
                serde_json::from_str(&s).unwrap_or(Value::String(s))
            }
            (Cell::Text(Some(s)), _) => Value::String(s),
            (Cell::Int(Some(n)), Kind::Bool) => Value::Bool(n != 0),
            (Cell::Int(Some(n)), _) => Value::from(n),
        }
    }
}

/// A value ready to bind.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Bound {
    Text(Option<String>),
    Int(Option<i64>),
    Bool(Option<bool>),
}

/// The value an import binds for `column` from the row's JSON value (`None` = key absent); the error
/// names the column.
pub(crate) fn bind_value(column: &Column, value: Option<&Value>) -> Result<Bound, String> {
    let fallback;
    let value = match value {
        Some(v) => v,
        None => match column.fallback {
            Some(text) => {
                fallback = serde_json::from_str::<Value>(text).unwrap_or(Value::Null);
                &fallback
            }
            None => &Value::Null,
        },
    };
    let wrong = |what: &str| format!("{} must be {what}", camel_case(column.name));
    Ok(match column.kind {
        Kind::Text => match value {
            Value::Null => Bound::Text(None),
            Value::String(s) => Bound::Text(Some(s.clone())),
            _ => return Err(wrong("a string")),
        },
        Kind::Int => match value {
            Value::Null => Bound::Int(None),
            Value::Number(n) => Bound::Int(Some(n.as_i64().ok_or_else(|| wrong("an integer"))?)),
            _ => return Err(wrong("an integer")),
        },
        Kind::Bool => match value {
            Value::Null => Bound::Bool(None),
            Value::Bool(b) => Bound::Bool(Some(*b)),
            Value::Number(n) if n.as_i64() == Some(0) || n.as_i64() == Some(1) => {
                Bound::Bool(Some(n.as_i64() == Some(1)))
            }
            _ => return Err(wrong("a boolean")),
        },
        Kind::Json => match value {
            Value::Null => Bound::Text(None),
            // A string is the column's JSON text as stored; text that is no JSON would fail every read.
            Value::String(s) => match serde_json::from_str::<serde::de::IgnoredAny>(s) {
                Ok(_) => Bound::Text(Some(s.clone())),
                Err(_) => return Err(wrong("JSON (or its JSON text)")),
            },
            other => Bound::Text(Some(other.to_string())),
        },
    })
}

/// Whether `table` exists in the data DB (an export lists absent ones in `skippedTables`).
pub(crate) async fn table_exists(tx: &mut DataTx, table: &str) -> StoreResult<bool> {
    let found: Option<i64> = match tx {
        DataTx::Sqlite(t, _) => {
            sqlx::query_scalar("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = $1")
                .bind(table)
                .fetch_optional(&mut **t)
                .await?
        }
        DataTx::Postgres(t) => {
            sqlx::query_scalar(
                "SELECT CAST(1 AS BIGINT) FROM information_schema.tables \
                 WHERE table_schema = current_schema() AND table_name = $1",
            )
            .bind(table)
            .fetch_optional(&mut **t)
            .await?
        }
    };
    Ok(found.is_some())
}

/// Opens a read snapshot for an export: every table is read as of one moment.
pub(crate) async fn begin_snapshot(db: &DataPool) -> StoreResult<DataTx> {
    Ok(match db {
        DataPool::Sqlite(p) => DataTx::Sqlite(p.begin().await?, None),
        DataPool::Postgres(p) => {
            let mut tx = p.begin().await?;
            sqlx::query("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
                .execute(&mut *tx)
                .await?;
            DataTx::Postgres(tx)
        }
    })
}

/// `table`'s rows one at a time in its stable order; rows are never collected, so memory stays flat
/// however large the table.
pub(crate) fn rows<'a>(
    tx: &'a mut DataTx,
    table: &'static TableSpec,
) -> futures::stream::BoxStream<'a, StoreResult<Vec<Cell>>> {
    use futures::StreamExt;
    let sql = sqlx::AssertSqlSafe(select_sql(table));
    match tx {
        DataTx::Sqlite(t, _) => sqlx::query(sql)
            .fetch(&mut **t)
            .map(move |row| decode(&row?, table))
            .boxed(),
        DataTx::Postgres(t) => sqlx::query(sql)
            .fetch(&mut **t)
            .map(move |row| decode(&row?, table))
            .boxed(),
    }
}

fn decode<R: sqlx::Row>(row: &R, table: &TableSpec) -> StoreResult<Vec<Cell>>
where
    for<'r> Option<String>: sqlx::Decode<'r, R::Database> + sqlx::Type<R::Database>,
    for<'r> Option<i64>: sqlx::Decode<'r, R::Database> + sqlx::Type<R::Database>,
    usize: sqlx::ColumnIndex<R>,
{
    let mut cells = Vec::with_capacity(table.columns.len());
    for (i, column) in table.columns.iter().enumerate() {
        cells.push(match column.kind {
            Kind::Text | Kind::Json => Cell::Text(row.try_get::<Option<String>, _>(i)?),
            Kind::Int | Kind::Bool => Cell::Int(row.try_get::<Option<i64>, _>(i)?),
        });
    }
    Ok(cells)
}

/// The rows that may carry inline media, each with its age and the JSON text that holds the media
/// (`messages.media`, `message_batches.items`); the caller ranks them newest first.
pub(crate) async fn for_each_media_candidate(
    tx: &mut DataTx,
    mut each: impl FnMut(&'static str, String, i64, String),
) -> StoreResult<()> {
    use futures::TryStreamExt;
    for (key, table, column) in [
        ("messages", "messages", "media"),
        ("messageBatches", "message_batches", "items"),
    ] {
        if !table_exists(tx, table).await? {
            continue;
        }
        let sql = format!(
            "SELECT id, CAST(created_at AS BIGINT), {column} FROM {table} WHERE {column} IS NOT NULL"
        );
        on_tx!(tx, |conn| {
            let mut rows =
                sqlx::query_as::<_, (String, i64, String)>(sqlx::AssertSqlSafe(sql.clone()))
                    .fetch(conn);
            while let Some((id, at, text)) = rows.try_next().await? {
                each(key, id, at, text);
            }
        });
    }
    Ok(())
}

/// Session ids in the data DB.
pub(crate) async fn session_ids(tx: &mut DataTx) -> StoreResult<Vec<String>> {
    Ok(on_tx!(tx, |conn| {
        sqlx::query_scalar::<_, String>("SELECT id FROM sessions")
            .fetch_all(conn)
            .await?
    }))
}

/// Removes every row of the exported tables except the sessions in `keep` (those are upserted, so their
/// engine credentials survive); children first.
pub(crate) async fn clear_for_import(
    tx: &mut DataTx,
    tables: &[&TableSpec],
    keep: &std::collections::HashSet<String>,
) -> StoreResult<()> {
    for table in tables.iter().rev() {
        if table.name == "sessions" {
            for id in session_ids(tx).await? {
                if !keep.contains(&id) {
                    execute_tx!(
                        tx,
                        sqlx::query("DELETE FROM sessions WHERE id = $1").bind(&id)
                    )?;
                }
            }
        } else {
            let sql = format!("DELETE FROM {}", table.name);
            execute_tx!(tx, sqlx::query(sqlx::AssertSqlSafe(sql.clone())))?;
        }
    }
    Ok(())
}

/// Inserts one row (upserts a session).
pub(crate) async fn insert_row(tx: &mut DataTx, sql: &str, values: &[Bound]) -> StoreResult<()> {
    execute_tx!(tx, {
        let mut query = sqlx::query(sqlx::AssertSqlSafe(sql.to_string()));
        for value in values {
            query = match value {
                Bound::Text(v) => query.bind(v.clone()),
                Bound::Int(v) => query.bind(*v),
                Bound::Bool(v) => query.bind(*v),
            };
        }
        query
    })?;
    Ok(())
}

/// After an import: a session keeps `has_credentials` only when the target holds credentials for it
/// (moving to another database brings none along). `engine_auth` is the node's record of every engine's
/// link (written when any engine reports `Linked`), so no engine's own tables need naming here.
pub(crate) async fn reconcile_credentials(tx: &mut DataTx) -> StoreResult<()> {
    execute_tx!(
        tx,
        sqlx::query(
            "UPDATE sessions SET has_credentials = FALSE WHERE has_credentials \
             AND NOT EXISTS (SELECT 1 FROM engine_auth a WHERE a.session_id = sessions.id)"
        )
    )?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn import_inserts_cast_every_parameter_to_its_bound_type() {
        for table in crate::admin::TABLES.iter() {
            let sql = insert_sql(table);
            for (i, column) in table.columns.iter().enumerate() {
                let cast = format!("CAST(${} AS {})", i + 1, bind_type(column.kind));
                assert!(sql.contains(&cast), "{}: {sql}", table.name);
            }
            // Never the plain text a store writes the same columns with (its prepared statement).
            assert!(!sql.contains("($1,"), "{sql}");
        }
        let rules = insert_sql(&AUTOMATION_RULES);
        assert!(
            rules.contains(
                "CAST($4 AS BOOLEAN), CAST($5 AS TEXT), CAST($6 AS TEXT), CAST($7 AS BIGINT)"
            ),
            "{rules}"
        );
    }

    #[test]
    fn values_bind_by_kind_and_refuse_wrong_types() {
        let col = int("created_at");
        assert_eq!(
            bind_value(&col, Some(&Value::from(5))),
            Ok(Bound::Int(Some(5)))
        );
        assert!(
            bind_value(&col, Some(&Value::from("x")))
                .unwrap_err()
                .contains("createdAt")
        );
        let events = json_or("events", "[\"*\"]");
        assert_eq!(
            bind_value(&events, None),
            Ok(Bound::Text(Some("[\"*\"]".into())))
        );
        assert_eq!(
            Cell::Text(Some("{\"a\":1}".into())).into_json(Kind::Json),
            serde_json::json!({"a": 1})
        );
        assert_eq!(Cell::Int(Some(1)).into_json(Kind::Bool), Value::Bool(true));
        assert!(
            bind_value(&events, Some(&Value::from("notjson")))
                .unwrap_err()
                .contains("events")
        );
    }
}
