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
            chat_filters_read_jids_as_sends_do(&c, &query).await;
            return;
        }
        tokio::time::sleep(std::time::Duration::from_millis(25)).await;
    }
    panic!("the inbound message never became searchable");
}

/// `chatId` and `from` read `@s.whatsapp.net` as the `@c.us` the store keeps, as message reads do, and a
/// value that is no JID is a 400 rather than an empty page.
async fn chat_filters_read_jids_as_sends_do(c: &wagate_loadtest::harness::Client, query: &str) {
    for filter in ["chatId", "from"] {
        let long_form = format!("{query}&{filter}=4915500000042@s.whatsapp.net");
        let found = c.get(&long_form).await.expect("search");
        assert_eq!(found.body["total"], 1, "{long_form}: {}", found.text);
        let garbage = format!("{query}&{filter}=garbage");
        let refused = c.get(&garbage).await.expect("search");
        assert_eq!(refused.status, 400, "{garbage}: {}", refused.text);
        assert_eq!(refused.body["statusCode"], 400);
        assert!(
            refused.str("message").starts_with(filter),
            "{}",
            refused.text
        );
    }
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

/// A message row of chat `chat` (a group when its JID is one), straight into the data DB.
async fn insert_in_chat(db: &SqlitePool, session: &str, id: &str, chat: &str, body: &str, at: i64) {
    let sql = "INSERT INTO messages (id, session_id, wa_message_id, chat_id, from_jid, to_jid, body, type, \
         direction, status, timestamp, is_group, created_at) VALUES ($1, $2, $3, $4, $4, '4915500000001@c.us', \
         $5, 'text', 'incoming', 'delivered', $6, $7, 1700000000000)";
    sqlx::query(sql)
        .bind(id)
        .bind(session)
        .bind(format!("wa-{id}"))
        .bind(chat)
        .bind(body)
        .bind(at)
        .bind(chat.ends_with("@g.us"))
        .execute(db)
        .await
        .expect("insert message");
}

/// The spec: search "returns matches for messages and chats". A chat matches when its id or its name
/// (history sync's, else the contact's push name) contains `q`, whatever the case; the chats come in
/// `chats`/`chatTotal` beside the unchanged message `hits`/`total`, paged by the same limit and offset,
/// scoped like the hits, and left out when a message-only filter narrows the search.
#[tokio::test]
async fn search_returns_chats_whose_id_or_name_matches() {
    let node = sqlite_node().await;
    let c = node.client();
    let a = created_session(&c, "chats-a").await;
    let b = created_session(&c, "chats-b").await;
    let db = data_db(&node).await;
    let group = "120363000000000001@g.us";
    insert_in_chat(&db, &a, "g1", group, "meeting at eight", 1_700_000_100).await;
    insert_in_chat(
        &db,
        &a,
        "d1",
        "4915500000009@c.us",
        "see you",
        1_700_000_000,
    )
    .await;
    insert_in_chat(
        &db,
        &a,
        "d2",
        "4915500000321@c.us",
        "pizza tonight?",
        1_700_000_010,
    )
    .await;
    insert_in_chat(
        &db,
        &b,
        "d3",
        "4915500000777@c.us",
        "nothing",
        1_700_000_050,
    )
    .await;
    for (session, chat, name, is_group) in [
        (&a, group, "Pizza Club", true),
        (&a, "4915500000555@c.us", "PIZZABOY", false),
    ] {
        sqlx::query(
            "INSERT INTO chat_states (session_id, chat_id, name, is_group, updated_at) \
             VALUES ($1, $2, $3, $4, 0)",
        )
        .bind(session)
        .bind(chat)
        .bind(name)
        .bind(is_group)
        .execute(&db)
        .await
        .expect("chat state");
    }
    for (session, chat, name) in [
        (&a, "4915500000009@c.us", "Maria's pizza place"),
        (&b, "4915500000777@c.us", "Pizza Guy"),
    ] {
        sqlx::query(
            "INSERT INTO contact_names (session_id, jid, push_name, updated_at) VALUES ($1, $2, $3, 0)",
        )
        .bind(session)
        .bind(chat)
        .bind(name)
        .execute(&db)
        .await
        .expect("push name");
    }
    let chats_of = |body: &serde_json::Value| -> Vec<(String, String)> {
        body["chats"]
            .as_array()
            .map(|chats| {
                chats
                    .iter()
                    .map(|c| {
                        let session = c["sessionId"].as_str().unwrap_or_default();
                        let id = c["id"].as_str().unwrap_or_default();
                        (session.to_string(), id.to_string())
                    })
                    .collect()
            })
            .unwrap_or_default()
    };
    let pair = |s: &str, id: &str| (s.to_string(), id.to_string());

    let all = c.get("/api/search?q=PiZzA").await.expect("search");
    assert_eq!(all.status, 200, "{}", all.text);
    assert_eq!(
        all.body["total"], 1,
        "the message hit is unchanged: {}",
        all.text
    );
    assert_eq!(all.body["hits"][0]["messageId"], "d2");
    assert_eq!(all.body["chatTotal"], 4, "{}", all.text);
    assert_eq!(
        chats_of(&all.body),
        vec![
            pair(&a, group),
            pair(&b, "4915500000777@c.us"),
            pair(&a, "4915500000009@c.us"),
            pair(&a, "4915500000555@c.us"),
        ],
        "newest activity first: {}",
        all.text
    );
    assert_eq!(
        all.body["chats"][0],
        json!({ "sessionId": a, "id": group, "name": "Pizza Club", "isGroup": true, "timestamp": 1_700_000_100 })
    );
    assert_eq!(all.body["chats"][2]["name"], "Maria's pizza place");
    assert_eq!(
        all.body["chats"][3]["timestamp"], 0,
        "a chat without messages"
    );

    let by_id = c.get("/api/search?q=500000321").await.expect("search");
    assert_eq!(
        by_id.body["chats"],
        json!([{ "sessionId": a, "id": "4915500000321@c.us", "name": "4915500000321", "isGroup": false, "timestamp": 1_700_000_010 }]),
        "an unnamed chat matches by id and goes by its number: {}",
        by_id.text
    );

    let one_session = c
        .get(&format!("/api/search?q=pizza&sessionId={a}"))
        .await
        .expect("search");
    assert_eq!(one_session.body["chatTotal"], 3, "{}", one_session.text);
    let one_chat = c
        .get(&format!("/api/search?q=pizza&chatId={group}"))
        .await
        .expect("search");
    assert_eq!(chats_of(&one_chat.body), vec![pair(&a, group)]);
    let paged = c
        .get("/api/search?q=pizza&limit=1&offset=1")
        .await
        .expect("search");
    assert_eq!(chats_of(&paged.body), vec![pair(&b, "4915500000777@c.us")]);
    assert_eq!(paged.body["chatTotal"], 4);
    for narrowed in [
        "direction=incoming",
        "type=text",
        "from=4915500000009@c.us",
        "dateFrom=0",
    ] {
        let reply = c
            .get(&format!("/api/search?q=pizza&{narrowed}"))
            .await
            .expect("search");
        assert_eq!(reply.status, 200, "{narrowed}: {}", reply.text);
        assert_eq!(
            (reply.body["chats"].clone(), reply.body["chatTotal"].clone()),
            (json!([]), json!(0)),
            "{narrowed}: a message-only filter matches no chat"
        );
    }

    let scoped = node.client_with_key(Some(&key(&c, "viewer", Some(&[b.as_str()])).await));
    let seen = scoped.get("/api/search?q=pizza").await.expect("search");
    assert_eq!(seen.status, 200, "{}", seen.text);
    assert_eq!(
        chats_of(&seen.body),
        vec![pair(&b, "4915500000777@c.us")],
        "a scoped key sees only its sessions' chats"
    );
    assert_eq!(seen.body["chatTotal"], 1);
}
