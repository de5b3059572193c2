//! `GET /api/search` on the built-in SQLite provider: FTS5 hits with their fields and snippet, filters,
//! paging validation, the triggers that keep the index in step with `messages`, and key scoping.
//! Rows are written straight into the node's data DB, the way the message store writes them.

mod resources_support;

use resources_support::{created_session, jid, key, linked_session, node};
use serde_json::json;
use sqlx::sqlite::SqliteConnectOptions;
use sqlx::{Executor, SqlitePool};
use wagate_loadtest::harness::{Node, NodeOptions};

/// This test writes rows straight into the SQLite file, so it pins the node to SQLite even when the suite
/// runs on PostgreSQL (`WAGATE_TEST_DATABASE=postgres`).
async fn sqlite_node() -> Node {
    let options = NodeOptions::new(env!("CARGO_BIN_EXE_wagate")).env("DATABASE_TYPE", "sqlite");
    Node::start(options).await.expect("node")
}

async fn data_db(node: &Node) -> SqlitePool {
    let path = node.dir.path().join("data").join("wagate.sqlite");
    let options = SqliteConnectOptions::new()
        .filename(path)
        .busy_timeout(std::time::Duration::from_secs(5));
    wagate_db::pool_options()
        .connect_with(options)
        .await
        .expect("data db")
}

async fn insert(db: &SqlitePool, session: &str, id: &str, body: &str, direction: &str) {
    let sql = "INSERT INTO messages (id, session_id, wa_message_id, chat_id, from_jid, to_jid, body, type, \
         direction, status, timestamp, created_at) VALUES ($1, $2, $3, '4915500000009@c.us', \
         '4915500000009@c.us', '4915500000001@c.us', $4, 'text', $5, 'delivered', 1700000000, 1700000000000)";
    sqlx::query(sql)
        .bind(id)
        .bind(session)
        .bind(format!("wa-{id}"))
        .bind(body)
        .bind(direction)
        .execute(db)
        .await
        .expect("insert message");
}

#[tokio::test]
async fn search_finds_messages_filters_and_scopes() {
    let node = sqlite_node().await;
    let c = node.client();
    let a = created_session(&c, "search-a").await;
    let b = created_session(&c, "search-b").await;
    let db = data_db(&node).await;
    insert(&db, &a, "m1", "Shall we order pizza tonight?", "incoming").await;
    insert(&db, &a, "m2", "pizza again, really", "outgoing").await;
    insert(&db, &b, "m3", "I love pizza", "incoming").await;
    insert(&db, &a, "m4", "nothing to see", "incoming").await;

    let all = c.get("/api/search?q=pizza").await.expect("search");
    assert_eq!(all.status, 200, "{}", all.text);
    assert_eq!(all.body["total"], 3);
    assert_eq!(all.body["provider"], "builtin-fts");
    assert!(all.body["tookMs"].is_u64());
    let hit = all.body["hits"]
        .as_array()
        .and_then(|h| h.iter().find(|h| h["messageId"] == "m1"))
        .cloned()
        .unwrap_or_default();
    assert_eq!(hit["waMessageId"], "wa-m1");
    assert_eq!(hit["sessionId"], a.as_str());
    assert_eq!(hit["direction"], "incoming");
    assert_eq!(hit["type"], "text");
    assert_eq!(hit["from"], "4915500000009@c.us");
    assert_eq!(hit["timestamp"], 1_700_000_000);
    assert!(
        hit["snippet"]
            .as_str()
            .unwrap_or_default()
            .contains("<mark>pizza</mark>"),
        "{hit}"
    );

    let filtered = c
        .get(&format!(
            "/api/search?q=pizza&sessionId={a}&direction=incoming"
        ))
        .await
        .expect("search");
    assert_eq!(filtered.body["total"], 1, "{}", filtered.text);
    let paged = c
        .get("/api/search?q=pizza&limit=1&offset=1")
        .await
        .expect("search");
    assert_eq!(paged.body["hits"].as_array().map(Vec::len), Some(1));
    assert_eq!(paged.body["total"], 3);
    for bad in [
        "/api/search",
        "/api/search?q=",
        "/api/search?q=pizza&limit=1.5",
        "/api/search?q=pizza&offset=0.5",
    ] {
        assert_eq!(c.get(bad).await.expect("search").status, 400, "{bad}");
    }

    db.execute(sqlx::query(
        "UPDATE messages SET body = 'switched to sushi' WHERE id = 'm2'",
    ))
    .await
    .expect("update");
    db.execute(sqlx::query("DELETE FROM messages WHERE id = 'm3'"))
        .await
        .expect("delete");
    let after = c.get("/api/search?q=pizza").await.expect("search");
    assert_eq!(
        after.body["total"], 1,
        "triggers keep the index in step: {}",
        after.text
    );
    let sushi = c.get("/api/search?q=sushi").await.expect("search");
    assert_eq!(sushi.body["hits"][0]["messageId"], "m2");

    let scoped = node.client_with_key(Some(&key(&c, "viewer", Some(&[b.as_str()])).await));
    let seen = scoped.get("/api/search?q=sushi").await.expect("search");
    assert_eq!(seen.body["total"], 0, "a scoped key only sees its sessions");
    let denied = scoped
        .get(&format!("/api/search?q=sushi&sessionId={a}"))
        .await
        .expect("search");
    assert_eq!(denied.status, 403);
    assert_eq!(
        json!(c.get("/api/search?q=zzz").await.expect("search").body["hits"]),
        json!([])
    );
}

#[tokio::test]
async fn search_finds_an_inbound_message() {
    let node = node().await;
    let c = node.client();
    let alice = linked_session(&c, "alice", "4915500000001").await;
    let inbound = c
        .post(
            &format!("/api/sim/sessions/{alice}/inbound"),
            json!({ "from": jid("4915500000042"), "type": "text", "body": "fresh kiwi smoothie" }),
        )
        .await
        .expect("inbound");
    assert!(inbound.status < 300, "{}", inbound.text);
    let query = format!("/api/search?q=kiwi&sessionId={alice}");
    for _ in 0..100 {
        let found = c.get(&query).await.expect("search");
        if found.body["total"] == 1 {
            let hit = &found.body["hits"][0];
            assert_eq!(hit["direction"], "incoming");
            assert_eq!(hit["from"], jid("4915500000042").as_str());
            assert_eq!(hit["waMessageId"], inbound.str("messageId").as_str());
            return;
        }
        tokio::time::sleep(std::time::Duration::from_millis(25)).await;
    }
    panic!("the inbound message never became searchable");
}

/// Found by the API fuzzer: a NUL inside `q` reached FTS5 and answered 500 ("unterminated string").
#[tokio::test]
async fn search_refuses_nul_characters_with_400() {
    let node = node().await;
    let c = node.client();
    for query in ["/api/search?q=a%00b", "/api/search?q=kiwi&chatId=x%00y"] {
        let reply = c.get(query).await.expect("search");
        assert_eq!(reply.status, 400, "{query}: {}", reply.text);
        assert_eq!(reply.body["statusCode"], 400);
    }
}
