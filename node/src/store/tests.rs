//! The data-store conformance suite: written once over `DataPool`, run on SQLite and on a real PostgreSQL.

use wagate_loadtest::harness::pg::PgDatabase;
use wagate_proto::SessionStatus;
use wagate_proto::dto::sessions::SessionConfig;

use super::messages::{self, MessageRow, StatusMove};
use super::sessions::{self, RuntimeState};
use super::{DataPool, StoreError, backends};

const SQLITE_TABLES: &str = "SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name";
const PG_TABLES: &str = "SELECT table_name::text FROM information_schema.tables WHERE table_schema = current_schema() ORDER BY 1";

/// Names of the tables in the data DB.
async fn list_tables(pool: &DataPool) -> super::StoreResult<Vec<String>> {
    Ok(match pool {
        DataPool::Sqlite(p) => sqlx::query_scalar(SQLITE_TABLES).fetch_all(p).await?,
        DataPool::Postgres(p) => sqlx::query_scalar(PG_TABLES).fetch_all(p).await?,
    })
}

const EXPORT_TABLES: [&str; 16] = [
    "sessions",
    "webhooks",
    "messages",
    "message_batches",
    "templates",
    "baileys_stored_messages",
    "lid_mappings",
    "chat_states",
    "plugin_instances",
    "conversation_mappings",
    "ingress_events",
    "webhook_delivery_failures",
    "webhook_outbox_events",
    "integration_delivery_failures",
    "status_updates",
    "automation_rules",
];

async fn migrations_create_every_export_table(db: &DataPool) {
    let tables = list_tables(db).await.expect("tables");
    for table in EXPORT_TABLES {
        assert!(
            tables.iter().any(|t| t == table),
            "{table} missing: {tables:?}"
        );
    }
}

async fn sessions_round_trip_and_names_are_unique(db: &DataPool) {
    let config = SessionConfig {
        max_reconnect_attempts: Some(3),
        ..SessionConfig::default()
    };
    let created = sessions::insert(
        db,
        "11111111-1111-4111-8111-111111111111",
        "alpha",
        &config,
        None,
    )
    .await;
    let created = created.expect("insert");
    assert_eq!(created.status, SessionStatus::Created);
    assert_eq!(created.config, config);
    let dup = sessions::insert(
        db,
        "22222222-2222-4222-8222-222222222222",
        "alpha",
        &config,
        None,
    )
    .await;
    assert!(matches!(dup, Err(StoreError::Conflict { .. })), "{dup:?}");
    let found = sessions::find_by_name(db, "alpha").await.expect("find");
    assert_eq!(found.map(|s| s.id), Some(created.id.clone()));
    assert_eq!(
        sessions::find_by_name(db, "ALPHA").await.expect("find"),
        None,
        "names are case-sensitive"
    );
    assert_eq!(sessions::list(db, 10, 0).await.expect("list").len(), 1);
    assert_eq!(sessions::list(db, 10, 1).await.expect("list").len(), 0);
}

async fn runtime_writes_are_fenced_by_the_lease_generation(db: &DataPool) {
    let id = "33333333-3333-4333-8333-333333333333";
    sessions::insert(db, id, "fenced", &SessionConfig::default(), None)
        .await
        .expect("insert");
    sessions::claim(db, id, 1, "node-a").await.expect("claim 1");
    let ready = RuntimeState {
        status: Some(SessionStatus::Ready),
        phone: Some("4912345678@c.us".into()),
        ..Default::default()
    };
    sessions::save_runtime(db, id, 1, &ready)
        .await
        .expect("owner writes");
    sessions::claim(db, id, 2, "node-b").await.expect("claim 2");
    assert!(matches!(
        sessions::claim(db, id, 2, "node-a").await,
        Err(StoreError::StaleLease)
    ));
    let stale = RuntimeState {
        status: Some(SessionStatus::Failed),
        ..Default::default()
    };
    assert!(matches!(
        sessions::save_runtime(db, id, 1, &stale).await,
        Err(StoreError::StaleLease)
    ));
    let row = sessions::get(db, id).await.expect("get");
    assert_eq!(
        (row.status, row.owner_node.as_deref()),
        (SessionStatus::Ready, Some("node-b"))
    );
}

async fn engine_auth_goes_with_the_session(db: &DataPool) {
    let id = "44444444-4444-4444-8444-444444444444";
    sessions::insert(db, id, "authed", &SessionConfig::default(), None)
        .await
        .expect("insert");
    sessions::save_engine_auth(db, id, "sim", "{\"v\":1}")
        .await
        .expect("save");
    sessions::save_engine_auth(db, id, "sim", "{\"v\":2}")
        .await
        .expect("upsert");
    assert_eq!(
        sessions::load_engine_auth(db, id, "sim")
            .await
            .expect("load")
            .as_deref(),
        Some("{\"v\":2}")
    );
    sessions::delete(db, id).await.expect("delete");
    assert_eq!(
        sessions::load_engine_auth(db, id, "sim")
            .await
            .expect("load"),
        None
    );
    assert!(matches!(
        sessions::get(db, id).await,
        Err(StoreError::NotFound)
    ));
}

fn message(session_id: &str, n: usize, wa_id: &str) -> MessageRow {
    MessageRow {
        id: format!("row-{n:03}"),
        session_id: session_id.to_string(),
        wa_message_id: wa_id.to_string(),
        chat_id: "4917000000001@c.us".into(),
        from_jid: "4917000000001@c.us".into(),
        to_jid: "4917000000002@c.us".into(),
        chat_name: None,
        author: None,
        body: Some(format!("body {n}")),
        kind: "text".into(),
        direction: "incoming".into(),
        status: "pending".into(),
        timestamp: 1_700_000_000,
        has_media: false,
        media: None,
        mentioned_ids: None,
        is_group: false,
        quoted_id: None,
        extra: None,
        starred: false,
        revoked: false,
        created_at: 1_700_000_000_000 + n as i64,
    }
}

/// A row with every optional column set, booleans true, and a body that needs escaping in JSON and SQL.
fn every_column_set(session_id: &str) -> MessageRow {
    MessageRow {
        chat_name: Some("Grüße \"team\"".into()),
        author: Some("4917000000003@c.us".into()),
        body: Some("line one\nline 'two' \\ \u{1F600} {\"json\": [1]}".into()),
        kind: "image".into(),
        has_media: true,
        media: Some(r#"{"key":"ab/cd","mimetype":"image/png","sizeBytes":12}"#.into()),
        mentioned_ids: Some(r#"["4917000000003@c.us"]"#.into()),
        is_group: true,
        quoted_id: Some("wa-1".into()),
        extra: Some(r#"{"location":{"latitude":52.5,"longitude":13.4}}"#.into()),
        timestamp: 9_007_199_254_740_993,
        ..message(session_id, 200, "wa-full")
    }
}

/// The group commit's batched statements give the rows one-by-one statements would: 71 rows (every chunk size
/// on PostgreSQL, one JSON statement on SQLite) with a duplicate inside the batch, one already stored and one
/// with every column set (it must come back exactly); status moves only go forward.
async fn message_batches_match_one_by_one(db: &DataPool) {
    let session = "5b5b5b5b-5b5b-4b5b-8b5b-5b5b5b5b5b5b";
    sessions::insert(
        db,
        session,
        "message-batches",
        &SessionConfig::default(),
        None,
    )
    .await
    .expect("session");
    let mut tx = super::begin(db).await.expect("begin");
    assert!(
        messages::insert(&mut tx, &message(session, 999, "wa-stored"))
            .await
            .expect("insert")
    );
    let mut rows: Vec<MessageRow> = (0..68)
        .map(|n| message(session, n, &format!("wa-{n}")))
        .collect();
    rows.push(message(session, 100, "wa-5"));
    rows.push(message(session, 101, "wa-stored"));
    let full = every_column_set(session);
    rows.push(full.clone());
    let refs: Vec<&MessageRow> = rows.iter().collect();
    let inserted = messages::insert_many(&mut tx, &refs).await.expect("many");
    assert_eq!(inserted.len(), 69);
    assert!(inserted.contains("row-005") && !inserted.contains("row-100"));
    assert!(!inserted.contains("row-101"));
    let moves = [
        ("wa-1", "read", 3),
        ("wa-2", "delivered", 2),
        ("wa-stored", "sent", 1),
        ("wa-missing", "read", 3),
    ];
    let moves: Vec<StatusMove<'_>> = moves
        .iter()
        .map(|(wa, status, rank)| StatusMove {
            session_id: session,
            wa_message_id: wa,
            status,
            rank: *rank,
        })
        .collect();
    messages::update_status_many(&mut tx, &moves)
        .await
        .expect("moves");
    let back = [StatusMove {
        session_id: session,
        wa_message_id: "wa-1",
        status: "delivered",
        rank: 2,
    }];
    messages::update_status_many(&mut tx, &back)
        .await
        .expect("backwards");
    tx.commit().await.expect("commit");
    let status = |wa: &'static str| async move {
        messages::find(db, session, wa)
            .await
            .expect("find")
            .map(|m| (m.status, m.body))
    };
    assert_eq!(
        status("wa-1").await,
        Some(("read".into(), Some("body 1".into())))
    );
    let stored = messages::find(db, session, "wa-full").await.expect("find");
    assert_eq!(stored, Some(full), "every column comes back as written");
    assert_eq!(status("wa-2").await.map(|s| s.0), Some("delivered".into()));
    assert_eq!(status("wa-3").await.map(|s| s.0), Some("pending".into()));
    assert_eq!(
        status("wa-5").await.map(|s| s.1),
        Some(Some("body 5".into()))
    );
    assert_eq!(
        status("wa-stored").await,
        Some(("sent".into(), Some("body 999".into())))
    );
}

async fn suite(db: DataPool) {
    migrations_create_every_export_table(&db).await;
    sessions_round_trip_and_names_are_unique(&db).await;
    runtime_writes_are_fenced_by_the_lease_generation(&db).await;
    engine_auth_goes_with_the_session(&db).await;
    history_tables_merge_and_go_with_the_session(&db).await;
    message_batches_match_one_by_one(&db).await;
    writes_for_a_deleted_session_answer_session_gone(&db).await;
}

/// A session-scoped row written after its session's delete (a delete raced the caller's existence check)
/// fails its foreign key; every store answers that as `SessionGone` with the session's id (the route's 404),
/// on either backend (SQLite 787, PostgreSQL 23503), not as a database error.
async fn writes_for_a_deleted_session_answer_session_gone(db: &DataPool) {
    use super::{automation, batches, chat_states, contact_names, poll_votes, templates};
    let sid = "5c5c5c5c-5c5c-4c5c-8c5c-5c5c5c5c5c5c";
    let gone = |result: super::StoreResult<()>, what: &str| match result {
        Err(StoreError::SessionGone(id)) => assert_eq!(id, sid, "{what}"),
        other => panic!("{what}: {other:?}"),
    };
    sessions::insert(
        db,
        sid,
        "deleted-meanwhile",
        &SessionConfig::default(),
        None,
    )
    .await
    .expect("session");
    sessions::delete(db, sid).await.expect("delete");

    let template = templates::TemplateRow {
        id: "t1".into(),
        session_id: sid.into(),
        name: "greeting".into(),
        body: "hello".into(),
        header: None,
        footer: None,
        created_at: 1,
        updated_at: 1,
    };
    gone(templates::insert(db, &template).await, "template");
    let rule = automation::RuleRecord {
        id: "r1".into(),
        session_id: sid.into(),
        name: "rule".into(),
        enabled: true,
        conditions: Vec::new(),
        reply_text: "auto".into(),
        cooldown_seconds: 0,
        created_at: 1,
        updated_at: 1,
    };
    gone(automation::insert(db, &rule).await, "automation rule");
    let batch = batches::BatchRow {
        id: "b1".into(),
        session_id: sid.into(),
        status: "processing".into(),
        items: "[]".into(),
        options: "{}".into(),
        results: "[]".into(),
        next_index: 0,
        started_at: None,
        completed_at: None,
        created_at: 1,
        updated_at: 1,
    };
    gone(batches::insert(db, &batch).await, "batch");
    let chat = chat_states::ChatFacts {
        chat_id: "111@c.us".into(),
        ..Default::default()
    };
    gone(chat_states::upsert(db, sid, &[chat]).await, "chat state");
    let name = ("111@c.us".to_string(), "Ann".to_string());
    gone(
        contact_names::upsert(db, sid, &[name]).await,
        "contact name",
    );
    let vote = poll_votes::PollVoteRow {
        poll_message_id: "P1".into(),
        chat_id: "111@c.us".into(),
        voter: "111@c.us".into(),
        options: vec!["a".into()],
        timestamp: 1,
    };
    gone(poll_votes::apply(db, sid, &vote).await, "poll vote");
    let mut tx = super::begin(db).await.expect("begin");
    let inserted = messages::insert(&mut tx, &message(sid, 500, "wa-gone")).await;
    gone(inserted.map(|_| ()), "message");
}

/// History sync's chat facts merge (a thinner later chunk keeps what it does not repeat), push names and
/// poll votes replace per key, and all of it goes with the session.
async fn history_tables_merge_and_go_with_the_session(db: &DataPool) {
    use super::{chat_states, contact_names, poll_votes};
    let sid = "5a5a5a5a-5a5a-4a5a-8a5a-5a5a5a5a5a5a";
    sessions::insert(
        db,
        sid,
        "history-sync-rows",
        &SessionConfig::default(),
        None,
    )
    .await
    .expect("session");
    let first = chat_states::ChatFacts {
        chat_id: "111@c.us".into(),
        name: Some("Ann".into()),
        archived: Some(true),
        pinned: Some(true),
        unread_count: Some(3),
        last_message_at: Some(200),
        ..Default::default()
    };
    let thinner = chat_states::ChatFacts {
        chat_id: "111@c.us".into(),
        unread_count: Some(0),
        last_message_at: Some(100),
        ..Default::default()
    };
    chat_states::upsert(db, sid, &[first])
        .await
        .expect("upsert");
    chat_states::upsert(db, sid, &[thinner])
        .await
        .expect("upsert");
    let rows = chat_states::list(db, sid).await.expect("list");
    assert_eq!(rows.len(), 1);
    let row = &rows[0];
    assert_eq!(row.name.as_deref(), Some("Ann"));
    assert!(row.archived && row.pinned && !row.muted);
    assert_eq!((row.unread_count, row.last_message_at), (0, Some(200)));

    contact_names::upsert(db, sid, &[("111@c.us".into(), "A".into())])
        .await
        .expect("names");
    contact_names::upsert(db, sid, &[("111@c.us".into(), "Ann".into())])
        .await
        .expect("names");
    assert_eq!(
        contact_names::list(db, sid).await.expect("names"),
        vec![("111@c.us".to_string(), "Ann".to_string())]
    );

    let vote = |options: &[&str], timestamp| poll_votes::PollVoteRow {
        poll_message_id: "P1".into(),
        chat_id: "111@c.us".into(),
        voter: "111@c.us".into(),
        options: options.iter().map(|o| o.to_string()).collect(),
        timestamp,
    };
    poll_votes::apply(db, sid, &vote(&["a"], 10))
        .await
        .expect("vote");
    poll_votes::apply(db, sid, &vote(&["b"], 5))
        .await
        .expect("late older vote");
    assert_eq!(
        poll_votes::list(db, sid, "P1").await.expect("votes"),
        vec![("111@c.us".to_string(), vec!["a".to_string()], 10)]
    );

    sessions::delete(db, sid).await.expect("delete");
    assert!(chat_states::list(db, sid).await.expect("list").is_empty());
    assert!(contact_names::list(db, sid).await.expect("list").is_empty());
    assert!(
        poll_votes::list(db, sid, "P1")
            .await
            .expect("list")
            .is_empty()
    );
}

#[tokio::test]
async fn store_suite_on_sqlite() {
    let dir = tempfile::tempdir().expect("dir");
    let db = backends::connect_data_sqlite(&dir.path().join("data.sqlite"))
        .await
        .expect("sqlite");
    suite(db).await;
}

#[tokio::test]
async fn store_suite_on_postgres() {
    let pg = PgDatabase::create().expect("throwaway PostgreSQL database");
    let db = backends::connect_data_postgres(&pg.url)
        .await
        .expect("postgres");
    suite(db.clone()).await;
    if let DataPool::Postgres(pool) = db {
        pool.close().await;
    }
}
