//! Pipeline tests on a real SQLite file: outbox rows per matching webhook inside the transaction, filters,
//! inactive webhooks, cache invalidation, the stored envelope's shape, and a received status's row
//! committed with its outbox rows by the event path's writer.

use serde_json::json;
use wagate_proto::EventName;
use wagate_proto::dto::sessions::SessionConfig;
use wagate_proto::dto::webhooks::WebhookFilters;

use super::{Event, Pipeline};
use crate::store::{DataPool, backends, on_pool, sessions};
use wagate_workers::webhook::store::webhooks::{self as webhook_store, WebhookRecord};

const SID: &str = "11111111-1111-4111-8111-111111111111";

async fn db() -> (tempfile::TempDir, DataPool) {
    let dir = tempfile::tempdir().unwrap();
    let db = backends::connect_data_sqlite(&dir.path().join("d.sqlite"))
        .await
        .unwrap();
    sessions::insert(&db, SID, "alpha", &SessionConfig::default(), None)
        .await
        .unwrap();
    (dir, db)
}

fn hook(id: &str, events: &[&str], filters: Option<serde_json::Value>) -> WebhookRecord {
    WebhookRecord {
        id: id.into(),
        session_id: SID.into(),
        url: "http://127.0.0.1:9/hook".into(),
        events: events.iter().map(|e| e.to_string()).collect(),
        secret: None,
        headers: Default::default(),
        active: true,
        filters: filters.map(|f| serde_json::from_value::<WebhookFilters>(f).unwrap()),
        retry_count: 3,
        last_triggered_at: None,
        created_at: 1,
        updated_at: 1,
    }
}

async fn outbox(db: &DataPool) -> Vec<(String, String, String)> {
    on_pool!(db, |p| sqlx::query_as(
        "SELECT webhook_id, event, payload FROM webhook_outbox_events ORDER BY webhook_id"
    )
    .fetch_all(p)
    .await)
    .unwrap()
}

fn received() -> Event {
    Event::new(
        EventName::MessageReceived,
        SID,
        json!({"id": "m1", "from": "111@c.us", "to": "222@c.us", "chatId": "111@c.us", "body": "hi",
               "type": "text", "fromMe": false}),
    )
}

#[tokio::test]
async fn one_row_per_subscribed_webhook_whose_filters_pass() {
    let (_dir, db) = db().await;
    let sender =
        json!({"conditions": [{"field": "sender", "operator": "is", "value": "111@c.us"}]});
    webhook_store::insert(&db, &hook("a-all", &["*"], None))
        .await
        .unwrap();
    webhook_store::insert(
        &db,
        &hook("b-recv", &["message.received"], Some(sender.clone())),
    )
    .await
    .unwrap();
    webhook_store::insert(&db, &hook("c-ack", &["message.ack"], None))
        .await
        .unwrap();
    let mut off = hook("d-off", &["*"], None);
    off.active = false;
    webhook_store::insert(&db, &off).await.unwrap();
    let p = Pipeline::new(db.clone());
    let mut feed = p.subscribe();
    let event = received();
    p.publish(event.clone()).await.unwrap();
    let rows = outbox(&db).await;
    let ids: Vec<&str> = rows.iter().map(|r| r.0.as_str()).collect();
    assert_eq!(ids, ["a-all", "b-recv"]);
    let payload = &rows[0].2;
    assert!(
        payload.starts_with(r#"{"event":"message.received","timestamp":"#),
        "{payload}"
    );
    assert!(payload.contains(&format!(
        r#""idempotencyKey":"{}","data":"#,
        event.idempotency_key
    )));
    assert_eq!(
        feed.recv().await.unwrap().idempotency_key,
        event.idempotency_key
    );

    // A sender filter drops an ack (no `from` in its data).
    webhook_store::insert(&db, &hook("e-ackf", &["message.ack"], Some(sender)))
        .await
        .unwrap();
    p.subscriptions().invalidate(SID);
    let ack = Event::new(
        EventName::MessageAck,
        SID,
        json!({"id": "m1", "messageId": "m1", "status": "read", "chatId": "x"}),
    );
    p.publish(ack).await.unwrap();
    let acks: Vec<String> = outbox(&db)
        .await
        .into_iter()
        .filter(|r| r.1 == "message.ack")
        .map(|r| r.0)
        .collect();
    assert_eq!(acks, ["a-all", "c-ack"]);
}

/// A delete can overtake the memo of a session's webhooks; the event is still written, without a row for
/// the webhook that is gone (the foreign key would otherwise fail the event's whole write).
#[tokio::test]
async fn a_webhook_deleted_behind_the_memo_costs_its_row_not_the_event() {
    let (_dir, db) = db().await;
    for id in ["a", "b", "c"] {
        webhook_store::insert(&db, &hook(id, &["*"], None))
            .await
            .unwrap();
    }
    let p = Pipeline::new(db.clone());
    p.publish(received()).await.unwrap();
    assert_eq!(outbox(&db).await.len(), 3);
    // Deleted without telling the pipeline: the memo still names all three.
    webhook_store::delete(&db, SID, "a").await.unwrap();
    p.publish(received())
        .await
        .expect("two rows (one statement)");
    webhook_store::delete(&db, SID, "b").await.unwrap();
    p.publish(received()).await.expect("one row");
    // A delete takes the webhook's rows with it (ON DELETE CASCADE): c's three are left.
    let ids: Vec<String> = outbox(&db).await.into_iter().map(|r| r.0).collect();
    assert_eq!(ids, ["c", "c", "c"]);
}

#[tokio::test]
async fn rows_roll_back_with_the_transaction_and_cache_needs_invalidation() {
    let (_dir, db) = db().await;
    let p = Pipeline::new(db.clone());
    p.publish(received()).await.unwrap();
    webhook_store::insert(&db, &hook("a", &["*"], None))
        .await
        .unwrap();
    p.publish(received()).await.unwrap();
    assert!(
        outbox(&db).await.is_empty(),
        "cached empty list until invalidated"
    );
    p.subscriptions().invalidate(SID);
    let mut tx = crate::store::begin(&db).await.unwrap();
    let _rolled_back = p.publish_in(&mut tx, &[received()]).await.unwrap();
    drop(tx);
    assert!(outbox(&db).await.is_empty());
    p.publish(received()).await.unwrap();
    assert_eq!(outbox(&db).await.len(), 1);
}

/// A received status is recorded by the event path's one writer: its row and its `status.received` outbox
/// row commit together, the network's ack is taken only after that commit, and the same status handed over
/// again (a redelivery) writes and publishes nothing more.
#[tokio::test]
async fn a_received_status_commits_with_its_outbox_rows_once() {
    use crate::engine::{Ack, EngineEvent, MessageType, StatusUpdate};
    use crate::media::{FetchOptions, MediaStore};
    use crate::messaging::Recorder;

    let (dir, db) = db().await;
    webhook_store::insert(&db, &hook("a", &["status.received"], None))
        .await
        .unwrap();
    let media = MediaStore::new(dir.path().join("media"), 1 << 20, FetchOptions::default());
    let recorder = Recorder::new(db.clone(), Pipeline::new(db.clone()), media);
    let update = StatusUpdate {
        status_id: "st1".into(),
        contact: wagate_proto::Jid::parse("111@c.us").unwrap(),
        kind: MessageType::Text,
        caption: Some("hi".into()),
        has_media: false,
        posted_at: 1,
        expires_at: 86_401,
        media: None,
    };
    for _ in 0..2 {
        let (taken, settled) = tokio::sync::oneshot::channel();
        let ack = Ack::new(move |ok: bool| {
            let _ = taken.send(ok);
        });
        let event = EngineEvent::Status(update.clone());
        recorder.record_event(SID, &event, ack).await;
        assert_eq!(settled.await.ok(), Some(true), "ack taken after the commit");
    }
    let statuses: Vec<(String, String)> = on_pool!(&db, |p| sqlx::query_as(
        "SELECT status_id, direction FROM status_updates"
    )
    .fetch_all(p)
    .await)
    .unwrap();
    assert_eq!(statuses, [("st1".to_string(), "incoming".to_string())]);
    let events: Vec<String> = outbox(&db).await.into_iter().map(|r| r.1).collect();
    assert_eq!(events, ["status.received"]);
}
