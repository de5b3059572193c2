//! Data export/import and storage archives against real nodes: every table filled and carried from the
//! suite's database to the other backend and back (the suite runs on SQLite and again on PostgreSQL, so
//! both directions are covered), the orphan refusal and both ways past it, a failing row rolling the whole
//! import back (rows the database refuses, rows a read could not decode, rows breaking the API's own rules),
//! malformed and oversized bodies, a payload naming no exported table, media archives with their path and
//! content refusals.

mod support;

use std::time::Duration;

use base64::Engine as _;
use serde_json::{Value, json};
use wagate_loadtest::harness::cluster::{TestCluster, Timings};
use wagate_loadtest::harness::pg::PgDatabase;
use wagate_loadtest::harness::sessions::create_linked;
use wagate_loadtest::harness::{Client, Node, NodeOptions};

const SESSION_A: &str = "11111111-1111-4111-8111-111111111111";
const SESSION_B: &str = "22222222-2222-4222-8222-222222222222";
const WEBHOOK: &str = "33333333-3333-4333-8333-333333333333";
const TEMPLATE: &str = "44444444-4444-4444-8444-444444444444";
const RULE: &str = "55555555-5555-4555-8555-555555555555";

fn options() -> NodeOptions {
    NodeOptions::new(env!("CARGO_BIN_EXE_wagate"))
}

/// A node on the backend the suite does not use, for the cross-database legs.
async fn node_on_other_backend() -> (Node, Option<PgDatabase>) {
    let suite_is_pg = std::env::var("WAGATE_TEST_DATABASE").is_ok_and(|v| v == "postgres");
    if suite_is_pg {
        let node = Node::start(options().env("DATABASE_TYPE", "sqlite"))
            .await
            .expect("sqlite node");
        (node, None)
    } else {
        let db = PgDatabase::create().expect("throwaway PostgreSQL database");
        let node = Node::start(
            options()
                .env("DATABASE_TYPE", "postgres")
                .env("DATABASE_URL", db.url.clone()),
        )
        .await
        .expect("postgres node");
        (node, Some(db))
    }
}

fn media_b64() -> String {
    base64::engine::general_purpose::STANDARD.encode(b"a tiny voice note, not really")
}

/// One or more rows in every one of the sixteen tables.
fn full_payload() -> Value {
    let t = 1_700_000_000_000i64;
    json!({
        "tables": {
            "sessions": [
                {"id": SESSION_A, "name": "alpha", "status": "ready", "phone": "15550001111",
                 "pushName": "Alpha", "config": {"autoRejectCalls": true},
                 "proxyUrl": "socks5://user:secret@10.1.2.3:1080", "desiredRunning": false,
                 "hasCredentials": false, "createdAt": t, "updatedAt": t + 1},
                {"id": SESSION_B, "name": "bravo", "status": "created", "config": {},
                 "proxyUrl": "::not a url::", "createdAt": t, "updatedAt": t}
            ],
            "webhooks": [
                {"id": WEBHOOK, "sessionId": SESSION_A, "url": "http://127.0.0.1:9/hook",
                 "events": ["message.received"], "secret": "0123456789abcdef-secret",
                 "headers": {"X-Token": "hidden"}, "active": true, "retryCount": 2,
                 "filters": {"conditions": [{"field": "isGroup", "operator": "is", "value": false}]},
                 "createdAt": t, "updatedAt": t}
            ],
            "messages": [
                {"id": "m-1", "sessionId": SESSION_A, "waMessageId": "WA1", "chatId": "15550002222@c.us",
                 "fromJid": "15550002222@c.us", "toJid": "15550001111@c.us", "body": "hello",
                 "type": "text", "direction": "incoming", "status": "read", "timestamp": 1_700_000_000,
                 "hasMedia": false, "isGroup": false, "mentionedIds": ["15550001111@c.us"],
                 "createdAt": t},
                {"id": "m-2", "sessionId": SESSION_A, "waMessageId": "WA2", "chatId": "15550002222@c.us",
                 "fromJid": "15550001111@c.us", "toJid": "15550002222@c.us", "type": "voice",
                 "direction": "outgoing", "status": "sent", "timestamp": 1_700_000_001, "hasMedia": true,
                 "media": {"mimetype": "audio/ogg; codecs=opus", "data": media_b64()},
                 "isGroup": false, "starred": true, "createdAt": t + 5}
            ],
            "messageBatches": [
                {"id": "b-1", "sessionId": SESSION_A, "status": "completed",
                 "items": [{"chatId": "15550002222@c.us", "type": "image",
                            "content": {"image": {"base64": "aGVsbG8=", "mimetype": "image/png"}}}],
                 "options": {"delayBetweenMessages": 1000}, "results": [], "nextIndex": 1,
                 "createdAt": t, "updatedAt": t}
            ],
            "templates": [
                {"id": TEMPLATE, "sessionId": SESSION_A, "name": "greet", "body": "Hi {{name}}",
                 "footer": "bye", "createdAt": t, "updatedAt": t}
            ],
            "baileysStoredMessages": [
                {"sessionId": SESSION_A, "messageId": "WA1", "payload": {"key": "v"}, "createdAt": t}
            ],
            "lidMappings": [
                {"sessionId": SESSION_A, "lid": "123@lid", "phoneNumber": "15550002222", "createdAt": t,
                 "updatedAt": t + 1, "learningSource": "usync", "pnCurrent": true}
            ],
            "chatStates": [
                {"sessionId": SESSION_A, "chatId": "15550002222@c.us", "name": "Bob", "archived": true,
                 "pinned": false, "muted": true, "muteExpiration": 0, "unreadCount": 3,
                 "labels": ["1"], "lastMessageAt": t, "updatedAt": t}
            ],
            "pluginInstances": [
                {"id": "p-1", "name": "echo", "version": "1.0.0", "enabled": true,
                 "config": {"k": 1}, "createdAt": t, "updatedAt": t}
            ],
            "conversationMappings": [
                {"id": "c-1", "integration": "crm", "sessionId": SESSION_A,
                 "chatId": "15550002222@c.us", "externalId": "x-9", "createdAt": t}
            ],
            "ingressEvents": [
                {"id": "i-1", "source": "crm", "sessionId": SESSION_A, "payload": {"a": [1, 2]},
                 "status": "done", "attempts": 1, "createdAt": t, "processedAt": t + 9}
            ],
            "webhookDeliveryFailures": [
                {"id": "f-1", "webhookId": WEBHOOK, "sessionId": SESSION_A, "event": "message.received",
                 "url": "http://127.0.0.1:9/hook", "idempotencyKey": "idem-1", "deliveryId": "dlv_1",
                 "attempts": 4, "lastStatusCode": 500, "lastError": "boom", "payload": {"event": "x"},
                 "createdAt": t}
            ],
            "webhookOutboxEvents": [
                {"id": "o-1", "webhookId": WEBHOOK, "sessionId": SESSION_A, "event": "message.received",
                 "idempotencyKey": "idem-2", "payload": {"event": "y"}, "status": "delivered",
                 "attempts": 1, "nextAttemptAt": t, "deliveryId": "dlv_o-1", "createdAt": t,
                 "updatedAt": t}
            ],
            "integrationDeliveryFailures": [
                {"id": "g-1", "integration": "crm", "sessionId": SESSION_A, "payload": {"z": true},
                 "attempts": 2, "lastError": "down", "createdAt": t}
            ],
            "statusUpdates": [
                {"id": "s-1", "sessionId": SESSION_A, "statusId": "ST1", "contact": "15550002222@c.us",
                 "direction": "incoming", "type": "text", "caption": "sunny", "hasMedia": false,
                 "recipients": ["15550002222@c.us"], "postedAt": t, "expiresAt": t + 86_400_000,
                 "createdAt": t}
            ],
            "automationRules": [
                {"id": RULE, "sessionId": SESSION_A, "name": "auto", "enabled": true,
                 "conditions": [{"field": "body", "operator": "contains", "value": "hi"}],
                 "replyText": "hello!", "cooldownSeconds": 60, "createdAt": t, "updatedAt": t}
            ]
        }
    })
}

const TABLE_KEYS: [&str; 16] = [
    "sessions",
    "webhooks",
    "messages",
    "messageBatches",
    "templates",
    "baileysStoredMessages",
    "lidMappings",
    "chatStates",
    "pluginInstances",
    "conversationMappings",
    "ingressEvents",
    "webhookDeliveryFailures",
    "webhookOutboxEvents",
    "integrationDeliveryFailures",
    "statusUpdates",
    "automationRules",
];

async fn export(c: &Client) -> Value {
    let reply = c.get("/api/infra/export-data").await.unwrap();
    assert_eq!(reply.status, 200, "{}", reply.text);
    reply.body
}

async fn import(c: &Client, body: Value) -> wagate_loadtest::harness::Reply {
    c.post("/api/infra/import-data", body).await.unwrap()
}

/// Each table's rows in a canonical order (row order differs between backends' collations).
fn canonical_tables(export: &Value) -> Value {
    let mut out = serde_json::Map::new();
    for key in TABLE_KEYS {
        let mut rows: Vec<String> = export["tables"][key]
            .as_array()
            .unwrap_or_else(|| panic!("table {key} missing"))
            .iter()
            .map(|r| r.to_string())
            .collect();
        rows.sort();
        out.insert(key.to_string(), json!(rows));
    }
    Value::Object(out)
}

fn row<'a>(export: &'a Value, table: &str, id: &str) -> &'a Value {
    export["tables"][table]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["id"] == id)
        .unwrap_or_else(|| panic!("{table} row {id} missing"))
}

#[tokio::test]
async fn every_table_round_trips_on_this_backend_and_across_to_the_other() {
    let a = Node::start(options()).await.unwrap();
    let ca = a.client();
    let imported = import(&ca, full_payload()).await;
    assert_eq!(imported.status, 200, "{}", imported.text);
    let r = &imported.body;
    assert_eq!(r["imported"], true, "{r}");
    for key in TABLE_KEYS {
        assert!(r["counts"][key].as_u64().unwrap() >= 1, "{key}: {r}");
    }
    assert_eq!(r["restartRequired"], false);
    assert_eq!(r["orphanedEngines"], json!([]));
    assert_eq!(r["stoppedOrphanEngines"], json!([]));
    assert_eq!(r["failedOrphanEngines"], json!([]));
    let notices = r["notices"].to_string();
    assert!(
        notices.contains('1') && notices.contains("disconnected"),
        "{notices}"
    );

    let first = export(&ca).await;
    assert!(first["exportedAt"].is_string());
    let db = if std::env::var("WAGATE_TEST_DATABASE").is_ok_and(|v| v == "postgres") {
        "postgres"
    } else {
        "sqlite"
    };
    assert_eq!(first["dataDbType"], db);
    assert_eq!(first["skippedTables"], json!([]));
    for key in TABLE_KEYS {
        assert_eq!(
            first["counts"][key].as_u64(),
            Some(first["tables"][key].as_array().unwrap().len() as u64),
            "{key}"
        );
        assert!(first["counts"][key].as_u64().unwrap() >= 1, "{key}");
    }
    // Statuses: active -> disconnected, created kept. Proxy credentials stripped, garbage cleared.
    let alpha = row(&first, "sessions", SESSION_A);
    assert_eq!(alpha["status"], "disconnected");
    assert_eq!(alpha["proxyUrl"], "socks5://10.1.2.3:1080");
    let bravo = row(&first, "sessions", SESSION_B);
    assert_eq!(bravo["status"], "created");
    assert_eq!(bravo["proxyUrl"], Value::Null);
    // Webhook secret and headers never leave the database.
    let hook = row(&first, "webhooks", WEBHOOK);
    assert!(
        hook.get("secret").is_none() && hook.get("headers").is_none(),
        "{hook}"
    );
    assert_eq!(hook["retryCount"], 2);
    // The inline media came back as a file and goes out inline again (well within the 8 MiB budget).
    let voice = row(&first, "messages", "m-2");
    assert_eq!(voice["media"]["data"], media_b64(), "{voice}");
    assert_eq!(
        first["omittedInlineMedia"],
        json!({"messages": 0, "messageBatches": 0})
    );

    // Same backend: importing the export gives the same export.
    let again = import(&ca, first.clone()).await;
    assert_eq!(again.body["imported"], true, "{}", again.text);
    assert_eq!(
        canonical_tables(&export(&ca).await),
        canonical_tables(&first)
    );

    // Across backends, and back: every row equal.
    let (b, _db) = node_on_other_backend().await;
    let cb = b.client();
    let crossed = import(&cb, first.clone()).await;
    assert_eq!(crossed.body["imported"], true, "{}", crossed.text);
    let second = export(&cb).await;
    assert_ne!(second["dataDbType"], first["dataDbType"]);
    assert_eq!(canonical_tables(&second), canonical_tables(&first));
    let back = import(&ca, second.clone()).await;
    assert_eq!(back.body["imported"], true, "{}", back.text);
    assert_eq!(
        canonical_tables(&export(&ca).await),
        canonical_tables(&first)
    );

    // Both actions left audit rows.
    for action in ["data_exported", "data_imported"] {
        let audit = ca
            .get(&format!("/api/audit?action={action}"))
            .await
            .unwrap();
        assert!(
            audit.body["total"].as_u64().unwrap() >= 1,
            "{action}: {}",
            audit.text
        );
    }
}

#[tokio::test]
async fn a_table_absent_from_the_source_is_listed_in_skipped_tables() {
    let suite_is_pg = std::env::var("WAGATE_TEST_DATABASE").is_ok_and(|v| v == "postgres");
    let pg = suite_is_pg.then(|| PgDatabase::create().expect("throwaway PostgreSQL database"));
    let mut opts = options();
    if let Some(db) = &pg {
        opts = opts
            .env("DATABASE_TYPE", "postgres")
            .env("DATABASE_URL", db.url.clone());
    } else {
        opts = opts.env("DATABASE_TYPE", "sqlite");
    }
    let node = Node::start(opts).await.unwrap();
    let c = node.client();
    assert_eq!(import(&c, full_payload()).await.body["imported"], true);
    // An older or foreign source: one of the sixteen tables does not exist there.
    let drop = "DROP TABLE plugin_instances";
    match &pg {
        Some(db) => {
            use sqlx::Connection as _;
            let mut conn = sqlx::PgConnection::connect(&db.url).await.unwrap();
            sqlx::query(drop).execute(&mut conn).await.unwrap();
        }
        None => {
            use sqlx::Connection as _;
            let path = data_dir(&node).join("wagate.sqlite");
            let url = format!("sqlite://{}", path.display());
            let mut conn = sqlx::SqliteConnection::connect(&url).await.unwrap();
            sqlx::query(drop).execute(&mut conn).await.unwrap();
        }
    }
    let out = export(&c).await;
    assert_eq!(out["skippedTables"], json!(["pluginInstances"]), "{out}");
    assert!(out["tables"].get("pluginInstances").is_none());
    assert!(out["counts"].get("pluginInstances").is_none());
    assert_eq!(out["counts"]["sessions"], 2);
    assert_eq!(out["counts"]["lidMappings"], 1);
    assert_eq!(
        row_by(&out, "lidMappings", "lid", "123@lid")["phoneNumber"],
        "15550002222"
    );
}

/// A message page a lone SQLite node keeps whole in memory is never served past an import that rewrote its
/// rows (the import raises every session's write generation).
#[tokio::test]
async fn a_message_page_read_before_an_import_shows_the_imported_rows() {
    let node = Node::start(options().env("DATABASE_TYPE", "sqlite"))
        .await
        .unwrap();
    let c = node.client();
    let mut payload = full_payload();
    assert_eq!(import(&c, payload.clone()).await.body["imported"], true);
    // Text only: the voice note's media would keep the page from being kept whole.
    let path = format!("/api/sessions/{SESSION_A}/messages?type=text");
    for _ in 0..2 {
        let page = c.get(&path).await.unwrap();
        assert_eq!(page.status, 200, "{}", page.text);
        assert_eq!(page.body[0]["body"], "hello", "{}", page.text);
    }
    payload["tables"]["messages"][0]["body"] = json!("rewritten by the import");
    assert_eq!(import(&c, payload).await.body["imported"], true);
    let page = c.get(&path).await.unwrap();
    assert_eq!(
        page.body[0]["body"], "rewritten by the import",
        "{}",
        page.text
    );
}

fn row_by<'a>(export: &'a Value, table: &str, key: &str, value: &str) -> &'a Value {
    export["tables"][table]
        .as_array()
        .and_then(|rows| rows.iter().find(|r| r[key] == value))
        .unwrap_or_else(|| panic!("{table} row {key}={value} missing"))
}

#[tokio::test]
async fn inline_media_over_the_budget_becomes_the_omitted_marker_newest_first() {
    // Budget for one of the two payloads: the newer message keeps its data, the older one is marked.
    let node = Node::start(options().env("EXPORT_INLINE_MEDIA_BUDGET_BYTES", "45"))
        .await
        .unwrap();
    let c = node.client();
    let mut payload = full_payload();
    let older = json!({"id": "m-0", "sessionId": SESSION_A, "waMessageId": "WA0",
        "chatId": "15550002222@c.us", "fromJid": "15550001111@c.us", "toJid": "15550002222@c.us",
        "type": "voice", "direction": "outgoing", "status": "sent", "timestamp": 1, "hasMedia": true,
        "media": {"mimetype": "audio/ogg", "data": base64::engine::general_purpose::STANDARD.encode(b"older voice note bytes")},
        "createdAt": 1});
    payload["tables"]["messages"]
        .as_array_mut()
        .unwrap()
        .push(older);
    assert_eq!(import(&c, payload).await.body["imported"], true);
    let out = export(&c).await;
    assert!(row(&out, "messages", "m-2")["media"]["data"].is_string());
    let marked = &row(&out, "messages", "m-0")["media"];
    assert_eq!(marked["omitted"], true, "{marked}");
    assert!(marked.get("data").is_none());
    assert_eq!(marked["sizeBytes"], 22);
    // The batch's base64 (older than m-2) did not fit either.
    let item = &row(&out, "messageBatches", "b-1")["items"][0]["content"]["image"];
    assert_eq!(item["omitted"], true, "{item}");
    assert_eq!(
        out["omittedInlineMedia"],
        json!({"messages": 1, "messageBatches": 1})
    );
}

#[tokio::test]
async fn a_failing_row_rolls_the_whole_import_back() {
    let node = Node::start(options()).await.unwrap();
    let c = node.client();
    assert_eq!(import(&c, full_payload()).await.body["imported"], true);
    let before = export(&c).await;
    let mut bad = full_payload();
    bad["tables"]["templates"] = json!([]);
    // A message of a session the payload does not have: refused by the database, after every session,
    // webhook and earlier message was written inside the transaction.
    bad["tables"]["messages"]
        .as_array_mut()
        .unwrap()
        .push(json!({
        "id": "m-9", "sessionId": "99999999-9999-4999-8999-999999999999", "waMessageId": "WA9",
        "chatId": "x@c.us", "fromJid": "x@c.us", "toJid": "y@c.us", "type": "text",
        "direction": "incoming", "status": "read", "timestamp": 1, "createdAt": 1}));
    let reply = import(&c, bad).await;
    assert_eq!(reply.status, 200, "{}", reply.text);
    assert_eq!(reply.body["imported"], false, "{}", reply.text);
    assert_eq!(reply.body["counts"]["messages"], 3);
    assert_eq!(reply.body["counts"]["templates"], 0);
    assert!(
        reply.body["warnings"]
            .to_string()
            .contains("messages row 2"),
        "{}",
        reply.text
    );
    // Nothing changed: the templates that the failed import cleared are still there.
    assert_eq!(
        canonical_tables(&export(&c).await),
        canonical_tables(&before)
    );

    // A value of the wrong type is a row failure too.
    let mut wrong = full_payload();
    wrong["tables"]["templates"][0]["createdAt"] = json!("yesterday");
    let reply = import(&c, wrong).await;
    assert_eq!(reply.body["imported"], false);
    assert!(reply.text.contains("createdAt"), "{}", reply.text);
}

#[tokio::test]
async fn malformed_and_oversized_import_bodies() {
    let node = Node::start(options().env("BODY_SIZE_LIMIT", "4kb"))
        .await
        .unwrap();
    let c = node.client();
    for body in [
        json!({}),
        json!({"tables": 5}),
        json!({"tables": {"sessions": {}}}),
        json!({"tables": {"sessions": [1]}}),
        json!({"tables": {}, "force": "yes"}),
    ] {
        let reply = import(&c, body.clone()).await;
        assert_eq!(reply.status, 400, "{body}: {}", reply.text);
        assert_eq!(reply.body["statusCode"], 400);
    }
    let raw = c
        .send(
            c.raw(reqwest::Method::POST, "/api/infra/import-data")
                .header("content-type", "application/json")
                .body("{\"tables\": {"),
        )
        .await
        .unwrap();
    assert_eq!(raw.status, 400, "{}", raw.text);
    let big = json!({"tables": {"templates": [{"body": "x".repeat(8 * 1024)}]}});
    let reply = import(&c, big).await;
    assert_eq!(reply.status, 413, "{}", reply.text);
    // A viewer or operator key may not export or import.
    let viewer = c
        .post(
            "/api/auth/api-keys",
            json!({"name": "viewer-key", "role": "operator"}),
        )
        .await
        .unwrap();
    let op = c.with_key(&viewer.str("apiKey"));
    assert_eq!(op.get("/api/infra/export-data").await.unwrap().status, 403);
}

#[tokio::test]
async fn orphaned_engines_refuse_the_import_until_stopped_or_forced() {
    let node = support::node().await;
    let c = node.client();
    let running = support::ready_session(&c, "orphan-one").await;
    let empty = json!({"tables": {"sessions": []}});
    let refused = import(&c, empty.clone()).await;
    assert_eq!(refused.status, 409, "{}", refused.text);
    assert!(
        refused.body["message"].as_str().unwrap().contains(&running),
        "{}",
        refused.text
    );
    assert_eq!(
        c.get(&format!("/api/sessions/{running}"))
            .await
            .unwrap()
            .status,
        200
    );

    let mut stop = empty.clone();
    stop["stopOrphans"] = json!(true);
    let stopped = import(&c, stop).await;
    assert_eq!(stopped.status, 200, "{}", stopped.text);
    assert_eq!(stopped.body["imported"], true);
    assert_eq!(stopped.body["stoppedOrphanEngines"], json!([running]));
    assert_eq!(stopped.body["restartRequired"], false);
    assert_eq!(stopped.body["orphanedEngines"], json!([]));
    assert_eq!(
        c.get(&format!("/api/sessions/{running}"))
            .await
            .unwrap()
            .status,
        404
    );

    let second = support::ready_session(&c, "orphan-two").await;
    let mut force = empty;
    force["force"] = json!(true);
    let forced = import(&c, force).await;
    assert_eq!(forced.status, 200, "{}", forced.text);
    assert_eq!(forced.body["imported"], true);
    assert_eq!(forced.body["restartRequired"], true);
    assert_eq!(forced.body["orphanedEngines"], json!([second]));
    assert_eq!(forced.body["stoppedOrphanEngines"], json!([]));
    assert_eq!(forced.body["failedOrphanEngines"], json!([]));

    // The forced orphan has no record any more; stopOrphans still stops its engine.
    let again = import(&c, json!({"tables": {"sessions": []}, "stopOrphans": true})).await;
    assert_eq!(again.status, 200, "{}", again.text);
    assert_eq!(
        again.body["stoppedOrphanEngines"],
        json!([second]),
        "{}",
        again.text
    );
    assert_eq!(again.body["failedOrphanEngines"], json!([]));
    let devices = c.get("/api/sim/devices").await.expect("devices");
    assert!(!devices.text.contains(&second), "{}", devices.text);
}

#[tokio::test]
async fn a_rolled_back_import_leaves_running_sessions_and_the_media_store_alone() {
    let node = support::node().await;
    let c = node.client();
    let id = support::ready_session(&c, "keeps-running").await;
    let mut bad = export(&c).await;
    let messages = bad["tables"]["messages"].as_array_mut().expect("messages");
    messages.push(json!({
        "id": "m-inline", "sessionId": "99999999-9999-4999-8999-999999999999", "waMessageId": "WA8",
        "chatId": "x@c.us", "fromJid": "x@c.us", "toJid": "y@c.us", "type": "image",
        "direction": "incoming", "status": "read", "timestamp": 1, "createdAt": 1, "hasMedia": true,
        "media": {"mimetype": "image/png", "data": "aGVsbG8gd29ybGQ=", "sizeBytes": 11}}));
    let before = c.get("/api/infra/storage/files/count").await.unwrap();
    let reply = import(&c, bad).await;
    assert_eq!(reply.status, 200, "{}", reply.text);
    assert_eq!(reply.body["imported"], false, "{}", reply.text);
    let record = c.get(&format!("/api/sessions/{id}")).await.unwrap();
    assert_eq!(record.body["status"], "ready", "{}", record.text);
    assert_eq!(record.body["engineLoaded"], true, "{}", record.text);
    let after = c.get("/api/infra/storage/files/count").await.unwrap();
    assert_eq!(after.body["count"], before.body["count"], "{}", after.text);
    // The audit row names the status the client got.
    let audit = c.get("/api/audit?action=data_imported").await.unwrap();
    assert_eq!(audit.body["data"][0]["statusCode"], 200, "{}", audit.text);
}

#[tokio::test]
async fn a_running_session_restored_by_its_own_export_can_be_started_again() {
    let node = support::node().await;
    let c = node.client();
    let id = support::ready_session(&c, "restored-while-ready").await;
    let snapshot = export(&c).await;
    let restored = import(&c, snapshot).await;
    assert_eq!(restored.status, 200, "{}", restored.text);
    assert_eq!(restored.body["imported"], true, "{}", restored.text);
    assert_eq!(restored.body["orphanedEngines"], json!([]));
    let record = c.get(&format!("/api/sessions/{id}")).await.unwrap();
    assert_eq!(record.body["status"], "disconnected", "{}", record.text);
    assert_eq!(record.body["engineLoaded"], false, "{}", record.text);
    // The operator starts it; a later boot does not.
    assert_eq!(
        row(&export(&c).await, "sessions", &id)["desiredRunning"],
        false
    );
    let started = c
        .post_empty(&format!("/api/sessions/{id}/start"))
        .await
        .unwrap();
    assert_eq!(
        started.status, 200,
        "startable afterwards: {}",
        started.text
    );
}

#[tokio::test]
async fn an_orphan_running_on_another_node_of_a_cluster_is_found_and_stopped_there() {
    let c = TestCluster::start(env!("CARGO_BIN_EXE_wagate"), 2, Timings::default())
        .await
        .expect("cluster");
    let id = create_linked(&c.client(0), "remote-orphan", "15550002201")
        .await
        .expect("linked on node a");
    let empty = json!({"tables": {"sessions": []}});
    // Imported through node b: the engine runs on node a, and it is an orphan all the same.
    let refused = import(&c.client(1), empty.clone()).await;
    assert_eq!(refused.status, 409, "{}", refused.text);
    assert!(refused.text.contains(&id), "{}", refused.text);
    let mut stop = empty;
    stop["stopOrphans"] = json!(true);
    let stopped = import(&c.client(1), stop).await;
    assert_eq!(stopped.status, 200, "{}", stopped.text);
    assert_eq!(stopped.body["imported"], true, "{}", stopped.text);
    assert_eq!(stopped.body["stoppedOrphanEngines"], json!([id]));
    assert_eq!(stopped.body["failedOrphanEngines"], json!([]));
    let devices = c.client(1).get("/api/sim/devices").await.expect("devices");
    let still = devices
        .body
        .as_array()
        .is_some_and(|rows| rows.iter().any(|r| r["sessionId"] == id.as_str()));
    assert!(!still, "node a's engine is stopped: {}", devices.text);
}

/// The node's data directory (archives must lie inside it).
fn data_dir(node: &Node) -> std::path::PathBuf {
    node.dir.path().join("data")
}

#[tokio::test]
async fn storage_archive_round_trip_and_refusals() {
    let node = Node::start(options()).await.unwrap();
    let c = node.client();
    assert_eq!(import(&c, full_payload()).await.body["imported"], true);
    let count = c.get("/api/infra/storage/files/count").await.unwrap();
    assert_eq!(count.status, 200, "{}", count.text);
    assert_eq!(count.body["storageType"], "local");
    assert_eq!(count.body["count"], 1);
    assert_eq!(count.body["sizeBytes"], 29);
    assert!(count.body["sizeMB"].is_number());

    let exported = c.get("/api/infra/storage/export").await.unwrap();
    assert_eq!(exported.status, 200, "{}", exported.text);
    assert!(exported.body["message"].is_string());
    let download = exported.str("download");
    assert!(
        download.contains("exports") && download.ends_with(".tar.gz"),
        "{download}"
    );
    assert!(std::path::Path::new(&download).exists() || data_dir(&node).join("exports").exists());

    // Lose the media, then bring it back from the archive.
    let media = data_dir(&node).join("media");
    for entry in std::fs::read_dir(&media).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            std::fs::remove_dir_all(&path).unwrap();
        } else {
            std::fs::remove_file(&path).unwrap();
        }
    }
    assert_eq!(
        c.get("/api/infra/storage/files/count").await.unwrap().body["count"],
        0
    );
    let restored = c
        .post("/api/infra/storage/import", json!({"filePath": download}))
        .await
        .unwrap();
    assert_eq!(restored.status, 200, "{}", restored.text);
    assert_eq!(
        restored.body,
        json!({"imported": true, "count": 1, "storageType": "local"})
    );
    assert_eq!(
        c.get("/api/infra/storage/files/count").await.unwrap().body["count"],
        1
    );
    let out = export(&c).await;
    assert_eq!(row(&out, "messages", "m-2")["media"]["data"], media_b64());

    let refuse = |body: Value| {
        let c = c.clone();
        async move {
            let reply = c
                .post("/api/infra/storage/import", body.clone())
                .await
                .unwrap();
            assert_eq!(reply.status, 400, "{body}: {}", reply.text);
            reply.body["message"].as_str().unwrap().to_string()
        }
    };
    // Outside data/: absolute, `..` tricks, and nothing at all.
    refuse(json!({"filePath": "/etc/passwd"})).await;
    let sneaky = format!("{}/exports/../../../etc/passwd", data_dir(&node).display());
    assert!(refuse(json!({"filePath": sneaky})).await.contains("data/"));
    refuse(json!({"filePath": "data/../../etc/passwd"})).await;
    refuse(json!({})).await;
    // A symlink inside data/ pointing at the archive (or anywhere) is refused.
    let link = data_dir(&node).join("link.tar.gz");
    std::os::unix::fs::symlink(&download, &link).unwrap();
    assert!(
        refuse(json!({"filePath": link}))
            .await
            .contains("symbolic link")
    );
    // Missing, corrupt, expired.
    let missing = data_dir(&node).join("exports/nope.tar.gz");
    assert!(
        refuse(json!({"filePath": missing}))
            .await
            .contains("not found")
    );
    let corrupt = data_dir(&node).join("exports/corrupt.tar.gz");
    std::fs::write(&corrupt, b"this is not gzip at all").unwrap();
    assert!(
        refuse(json!({"filePath": corrupt}))
            .await
            .contains("corrupt")
    );
    let stale = c
        .get("/api/infra/storage/export")
        .await
        .unwrap()
        .str("download");
    let aged = std::process::Command::new("touch")
        .args(["-d", "2 hours ago", &stale])
        .status()
        .unwrap();
    assert!(aged.success());
    assert!(refuse(json!({"filePath": stale})).await.contains("expired"));
    assert!(
        !std::path::Path::new(&stale).exists(),
        "the expired archive was deleted"
    );
    // An archive whose entry would land outside the media directory.
    let evil = data_dir(&node).join("exports/evil.tar.gz");
    write_archive_with_raw_name(&evil, "media/../../escaped");
    assert!(refuse(json!({"filePath": evil})).await.contains("escape"));
    assert!(!data_dir(&node).join("escaped").exists());

    for action in ["storage_exported", "storage_imported"] {
        let audit = c.get(&format!("/api/audit?action={action}")).await.unwrap();
        assert!(
            audit.body["total"].as_u64().unwrap() >= 1,
            "{action}: {}",
            audit.text
        );
    }
}

#[tokio::test]
async fn archives_are_deleted_after_their_ttl() {
    let node = Node::start(options().env("STORAGE_EXPORT_TTL_MS", "300"))
        .await
        .unwrap();
    let c = node.client();
    let download = c
        .get("/api/infra/storage/export")
        .await
        .unwrap()
        .str("download");
    let path = std::path::PathBuf::from(&download);
    support::wait_for(Duration::from_secs(10), || {
        let path = path.clone();
        async move { !path.exists() }
    })
    .await;
    // Gone, and the refusal still says why.
    let refused = c
        .post("/api/infra/storage/import", json!({"filePath": download}))
        .await
        .unwrap();
    assert_eq!(refused.status, 400, "{}", refused.text);
    assert!(
        refused.str("message").contains("expired"),
        "{}",
        refused.text
    );
}

/// A gzip'd tar with one regular entry whose name is written byte for byte (the tar crate refuses `..`
/// when building, as it should; an attacker's archive is not built with it).
fn write_archive_with_raw_name(path: &std::path::Path, name: &str) {
    let file = std::fs::File::create(path).unwrap();
    let gz = flate2::write::GzEncoder::new(file, flate2::Compression::fast());
    let mut builder = tar::Builder::new(gz);
    let mut header = tar::Header::new_gnu();
    header.as_gnu_mut().unwrap().name[..name.len()].copy_from_slice(name.as_bytes());
    header.set_size(4);
    header.set_mode(0o644);
    header.set_entry_type(tar::EntryType::Regular);
    header.set_cksum();
    builder.append(&header, &b"evil"[..]).unwrap();
    builder.into_inner().unwrap().finish().unwrap();
}

#[tokio::test]
async fn rows_a_read_could_not_decode_roll_the_import_back_and_reads_keep_answering() {
    let node = Node::start(options()).await.unwrap();
    let c = node.client();
    assert_eq!(import(&c, full_payload()).await.body["imported"], true);
    let before = export(&c).await;
    let reads = [
        "/api/sessions".to_string(),
        format!("/api/sessions/{SESSION_A}"),
        format!("/api/sessions/{SESSION_A}/config"),
        "/api/webhooks".to_string(),
        format!("/api/sessions/{SESSION_A}/webhooks"),
        format!("/api/sessions/{SESSION_A}/webhooks/{WEBHOOK}"),
        format!("/api/sessions/{SESSION_A}/messages?limit=1000"),
        format!("/api/sessions/{SESSION_A}/messages/batch/b-1"),
        format!("/api/sessions/{SESSION_A}/automation-rules"),
    ];
    // The black-box audit's cases: each was stored and then answered 500 on every read of it.
    let cases: Vec<(&str, &str, Value)> = vec![
        ("sessions", "config", json!("notjson")),
        ("sessions", "config", json!(5)),
        ("sessions", "restriction", json!("x")),
        ("sessions", "status", json!("")),
        ("webhooks", "events", json!("notjson")),
        ("webhooks", "events", json!(5)),
        ("webhooks", "events", json!({})),
        ("webhooks", "filters", json!("x")),
        ("webhooks", "filters", json!(5)),
        ("webhooks", "filters", json!([])),
        ("messages", "media", json!("x")),
        ("messages", "media", json!(5)),
        ("messages", "media", json!({})),
        ("messages", "media", json!([])),
        ("messages", "mentionedIds", json!("x")),
        ("messages", "mentionedIds", json!(5)),
        ("messages", "mentionedIds", json!({})),
        ("messages", "id", Value::Null),
        ("messageBatches", "results", json!("notjson")),
        ("messageBatches", "results", json!(5)),
        ("messageBatches", "results", json!({})),
        ("automationRules", "conditions", json!("notjson")),
        ("automationRules", "conditions", json!(5)),
        ("automationRules", "conditions", json!({})),
        ("webhookOutboxEvents", "status", json!("bogus")),
    ];
    for (table, field, value) in cases {
        let mut bad = full_payload();
        bad["tables"][table][0][field] = value.clone();
        let reply = import(&c, bad).await;
        let case = format!("{table}.{field} = {value}: {}", reply.text);
        assert_eq!(reply.status, 200, "{case}");
        assert_eq!(reply.body["imported"], false, "{case}");
        let warnings = reply.body["warnings"].to_string();
        assert!(warnings.contains(&format!("{table} row 0")), "{case}");
        assert!(warnings.contains(field), "{case}");
        for path in &reads {
            let read = c.get(path).await.unwrap();
            assert_eq!(read.status, 200, "{case}; GET {path}: {}", read.text);
        }
    }
    assert_eq!(
        canonical_tables(&export(&c).await),
        canonical_tables(&before)
    );
    // The payload itself still imports: the checks refuse only what a read would.
    assert_eq!(import(&c, before).await.body["imported"], true);
}

/// Creates an automation rule through the API.
async fn add_rule(c: &Client, session: &str, name: &str) {
    let r = c
        .post(
            &format!("/api/sessions/{session}/automation-rules"),
            json!({"name": name, "replyText": "x", "cooldownSeconds": 5}),
        )
        .await
        .unwrap();
    assert_eq!(r.status, 201, "{}", r.text);
}

/// The delivery-failure rows of `session`.
async fn delivery_failures(c: &Client, session: &str) -> Vec<Value> {
    let r = c
        .get(&format!(
            "/api/webhooks/delivery-failures?sessionId={session}"
        ))
        .await
        .unwrap();
    assert_eq!(r.status, 200, "{}", r.text);
    r.body.as_array().cloned().unwrap_or_default()
}

/// An inbound message to a webhook on a dead loopback port with no retries, and the failure row it leaves.
async fn fail_one_delivery(c: &Client, session: &str, body: &str, expected_rows: usize) {
    support::inbound(c, session, "15557770000@c.us", body).await;
    support::wait_for(Duration::from_secs(20), || async {
        delivery_failures(c, session).await.len() >= expected_rows
    })
    .await;
    assert_eq!(delivery_failures(c, session).await.len(), expected_rows);
}

/// The import writes rows with the same columns as the automation-rule store and the webhook worker's
/// failure log. On PostgreSQL those statements are prepared per pooled connection (keyed by their text), so
/// an import that shared a store's statement text bound its integers against the store's parameter types
/// (and the reverse): the import rolled back ("incorrect binary data format") or the worker's settle failed
/// ("insufficient data left in message") and its delivery stayed pending without a failure row.
#[tokio::test]
async fn an_export_imports_again_and_again_next_to_the_stores_own_writes() {
    let node = support::node().await;
    let c = node.client();
    let s = support::ready_session(&c, "statement-texts").await;
    support::add_webhook(
        &c,
        &s,
        json!({"url": "http://127.0.0.1:1/hook", "events": ["message.received"], "retryCount": 0}),
    )
    .await;
    for i in 0..4 {
        add_rule(&c, &s, &format!("r{i}")).await;
    }
    fail_one_delivery(&c, &s, "before", 1).await;

    for round in 0..6 {
        // The store writes between imports, so store and import statements meet on the pooled connections.
        add_rule(&c, &s, &format!("round-{round}")).await;
        let mut snapshot = export(&c).await;
        assert_eq!(
            snapshot["counts"]["webhookDeliveryFailures"], 1,
            "{snapshot}"
        );
        snapshot["stopOrphans"] = json!(true);
        let reply = import(&c, snapshot).await;
        assert_eq!(reply.status, 200, "round {round}: {}", reply.text);
        assert_eq!(
            reply.body["imported"], true,
            "round {round}: {}",
            reply.text
        );
        assert_eq!(reply.body["counts"]["automationRules"], 5 + round);
    }

    // The worker records its failures after the imports; none is lost, no delivery stays pending.
    let started = c
        .post_empty(&format!("/api/sessions/{s}/start"))
        .await
        .unwrap();
    assert!(started.status < 300, "{}", started.text);
    // The restarted session may ask for its QR again: scan it when it does.
    support::wait_for(Duration::from_secs(20), || async {
        let status = c
            .get(&format!("/api/sessions/{s}"))
            .await
            .unwrap()
            .str("status");
        if status == "ready" {
            return true;
        }
        let scan = json!({ "phone": "15550001111@c.us" });
        let _ = c.post(&format!("/api/sim/sessions/{s}/scan"), scan).await;
        false
    })
    .await;
    for (i, body) in ["after-1", "after-2", "after-3", "after-4"]
        .iter()
        .enumerate()
    {
        fail_one_delivery(&c, &s, body, i + 2).await;
    }
    let outbox = export(&c).await["tables"]["webhookOutboxEvents"].clone();
    let outbox = outbox.as_array().expect("outbox rows");
    assert_eq!(outbox.len(), 5, "{outbox:?}");
    assert!(outbox.iter().all(|r| r["status"] == "failed"), "{outbox:?}");
}

#[tokio::test]
async fn a_payload_naming_no_exported_table_is_refused_and_wipes_nothing() {
    let node = Node::start(options()).await.unwrap();
    let c = node.client();
    assert_eq!(import(&c, full_payload()).await.body["imported"], true);
    let before = export(&c).await;
    for body in [
        json!({"tables": {"sesions": []}}),
        json!({"tables": {"sesions": [], "hooks": [{"id": "x"}]}}),
        json!({"tables": {}}),
        json!({"tables": {}, "stopOrphans": true, "force": true}),
        json!({"tables": []}),
        json!({"tables": null}),
        json!({"stopOrphans": true}),
    ] {
        let reply = import(&c, body.clone()).await;
        assert_eq!(reply.status, 400, "{body}: {}", reply.text);
        assert_eq!(reply.body["statusCode"], 400, "{body}: {}", reply.text);
        assert_eq!(reply.body["error"], "Bad Request", "{body}: {}", reply.text);
        if body["tables"].is_object() {
            assert!(
                reply.str("message").contains("none of the exported tables"),
                "{body}: {}",
                reply.text
            );
        }
        assert_eq!(
            canonical_tables(&export(&c).await),
            canonical_tables(&before),
            "{body}"
        );
    }
    for path in [
        format!("/api/sessions/{SESSION_A}"),
        format!("/api/sessions/{SESSION_A}/webhooks/{WEBHOOK}"),
    ] {
        let read = c.get(&path).await.unwrap();
        assert_eq!(read.status, 200, "{path}: {}", read.text);
    }
    // An unknown table beside a known one is still only a warning.
    let mut mixed = before.clone();
    mixed["tables"]["sesions"] = json!([]);
    let reply = import(&c, mixed).await;
    assert_eq!(reply.body["imported"], true, "{}", reply.text);
    assert!(
        reply.body["warnings"]
            .to_string()
            .contains("Unknown table 'sesions' was ignored"),
        "{}",
        reply.text
    );
}

/// Each case: `(table, row, field, value)` applied to `full_payload()` (`field` `None` pushes a copy of the
/// row with `value` merged in), and the text the warning must carry.
type RuleCase = (
    &'static str,
    usize,
    Option<&'static str>,
    Value,
    &'static str,
);

#[tokio::test]
async fn rows_breaking_the_api_rules_roll_the_import_back() {
    let node = Node::start(options()).await.unwrap();
    let c = node.client();
    assert_eq!(import(&c, full_payload()).await.body["imported"], true);
    let before = export(&c).await;
    let uuid_rule = "must be a UUID in lowercase hyphenated form";
    let cases: Vec<RuleCase> = vec![
        // Sessions: bounds of PATCH /config, the create's name rule, UUID ids, one row per id.
        (
            "sessions",
            0,
            Some("config"),
            json!({"maxReconnectAttempts": 999, "reconnectBaseDelay": 1}),
            "config.maxReconnectAttempts must be an integer between 0 and 20",
        ),
        (
            "sessions",
            0,
            Some("config"),
            json!({"reconnectBaseDelay": 1}),
            "config.reconnectBaseDelay must be an integer between 1000 and 300000",
        ),
        (
            "sessions",
            0,
            Some("config"),
            json!({"autoRejectCalls": "yes"}),
            "config",
        ),
        ("sessions", 1, Some("id"), json!("not-a-uuid"), uuid_rule),
        (
            "sessions",
            1,
            Some("id"),
            json!("ABCDEF12-2222-4222-8222-222222222222"),
            uuid_rule,
        ),
        (
            "sessions",
            1,
            Some("name"),
            json!("bad name!"),
            "name must be 3-50 characters",
        ),
        (
            "sessions",
            1,
            Some("name"),
            json!("ab"),
            "name must be 3-50",
        ),
        (
            "sessions",
            1,
            None,
            json!({"name": "charlie"}),
            "duplicate primary key (id = 22222222-2222-4222-8222-222222222222), first given in row 1",
        ),
        // Webhooks: the create's rules but DNS.
        (
            "webhooks",
            0,
            Some("retryCount"),
            json!(-5),
            "retryCount must be between 0 and 10",
        ),
        ("webhooks", 0, Some("retryCount"), json!(11), "retryCount"),
        ("webhooks", 0, Some("url"), json!("not a url"), "url: "),
        (
            "webhooks",
            0,
            Some("url"),
            json!("ftp://example.com/x"),
            "url: ",
        ),
        (
            "webhooks",
            0,
            Some("url"),
            json!(""),
            "url must not be empty",
        ),
        (
            "webhooks",
            0,
            Some("events"),
            json!([]),
            "events must not be empty",
        ),
        (
            "webhooks",
            0,
            Some("events"),
            json!(["message.nope"]),
            "unknown event name 'message.nope'",
        ),
        (
            "webhooks",
            0,
            Some("events"),
            json!(["*", "message.ack"]),
            "events",
        ),
        (
            "webhooks",
            0,
            Some("filters"),
            json!({"conditions": [{"field": "isGroup", "operator": "is", "value": "yes"}]}),
            "filters.conditions[0].value must be true or false",
        ),
        ("webhooks", 0, Some("id"), json!("w-1"), uuid_rule),
        (
            "webhooks",
            0,
            None,
            json!({}),
            "duplicate primary key (id = 33333333-3333-4333-8333-333333333333)",
        ),
        ("templates", 0, Some("id"), json!("t-1"), uuid_rule),
        // Automation rules: the create's rules.
        (
            "automationRules",
            0,
            Some("cooldownSeconds"),
            json!(-1),
            "cooldownSeconds must be between 0 and",
        ),
        (
            "automationRules",
            0,
            Some("name"),
            json!("  "),
            "name must be 1-100",
        ),
        (
            "automationRules",
            0,
            Some("replyText"),
            json!(" "),
            "replyText must be 1-4096",
        ),
        (
            "automationRules",
            0,
            Some("conditions"),
            json!([{"field": "isGroup", "operator": "is", "value": "yes"}]),
            "conditions[0].value must be true or false",
        ),
        ("automationRules", 0, Some("id"), json!("r-1"), uuid_rule),
        // Any table: a primary key given twice (a batch id is unique within its session).
        (
            "messageBatches",
            0,
            None,
            json!({}),
            "duplicate primary key (sessionId, id = 11111111-1111-4111-8111-111111111111, b-1)",
        ),
        (
            "chatStates",
            0,
            None,
            json!({"name": "Robert"}),
            "duplicate primary key (sessionId, chatId",
        ),
    ];
    for (table, index, field, value, expected) in cases {
        let mut bad = full_payload();
        let rows = bad["tables"][table].as_array_mut().unwrap();
        let at = match field {
            Some(field) => {
                rows[index][field] = value.clone();
                index
            }
            None => {
                let mut copy = rows[index].clone();
                for (k, v) in value.as_object().unwrap() {
                    copy[k] = v.clone();
                }
                rows.push(copy);
                rows.len() - 1
            }
        };
        let attempted = rows.len();
        let reply = import(&c, bad).await;
        let case = format!("{table}[{at}].{field:?} = {value}: {}", reply.text);
        assert_eq!(reply.status, 200, "{case}");
        assert_eq!(reply.body["imported"], false, "{case}");
        assert_eq!(reply.body["counts"][table], attempted, "{case}");
        let warnings = reply.body["warnings"].to_string();
        assert!(
            warnings.contains(&format!("Import rolled back: {table} row {at}: ")),
            "{case}"
        );
        assert!(warnings.contains(expected), "{case}");
        assert_eq!(
            canonical_tables(&export(&c).await),
            canonical_tables(&before),
            "{case}"
        );
    }
    // A host this machine cannot resolve is imported all the same: the export may come from elsewhere.
    let mut elsewhere = full_payload();
    elsewhere["tables"]["webhooks"][0]["url"] = json!("https://hooks.wagate-import.invalid/in");
    let reply = import(&c, elsewhere).await;
    assert_eq!(reply.body["imported"], true, "{}", reply.text);
    let hook = c
        .get(&format!("/api/sessions/{SESSION_A}/webhooks/{WEBHOOK}"))
        .await
        .unwrap();
    assert_eq!(hook.status, 200, "{}", hook.text);
    assert_eq!(hook.str("url"), "https://hooks.wagate-import.invalid/in");
}

#[tokio::test]
async fn an_imported_webhook_url_meets_the_ssrf_guard_as_a_created_one_does() {
    let node = Node::start(options().env("WEBHOOK_SSRF_PROTECT", "true"))
        .await
        .unwrap();
    let c = node.client();
    // full_payload's webhook posts to a loopback literal, which the guard refuses at create time.
    let reply = import(&c, full_payload()).await;
    assert_eq!(reply.status, 200, "{}", reply.text);
    assert_eq!(reply.body["imported"], false, "{}", reply.text);
    let warnings = reply.body["warnings"].to_string();
    assert!(
        warnings.contains("webhooks row 0: url: ") && warnings.contains("refused address"),
        "{}",
        reply.text
    );
    let session = c.get(&format!("/api/sessions/{SESSION_A}")).await.unwrap();
    assert_eq!(
        session.status, 404,
        "nothing was imported: {}",
        session.text
    );
    let mut public = full_payload();
    public["tables"]["webhooks"][0]["url"] = json!("https://93.184.216.34/hook");
    let reply = import(&c, public).await;
    assert_eq!(reply.body["imported"], true, "{}", reply.text);
}
