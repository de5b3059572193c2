//! The node's half of the receive path, on a real SQLite data DB: the events a receiving engine emits
//! (history batches, poll votes, media messages, owed acknowledgements; built here, no engine) are
//! recorded by the `Recorder` as the session runtime does, and what the store and the engine-facing
//! `NodeStore` answer afterwards is checked. The engine's half (library events to these `EngineEvent`s)
//! is each engine crate's to test (`node/engine-socket/src/adapter/receive_tests.rs`).

use std::time::Duration;

use wagate_engine_api::store::EngineStore;
use wagate_proto::Jid;
use wagate_proto::dto::sessions::SessionConfig;
use wagate_workers::webhook::store::webhooks::{self as webhook_store, WebhookRecord};

use super::record::Recorder;
use crate::engine::node_store::NodeStore;
use crate::engine::{
    Ack, AckStatus, EngineEvent, HistoryBatch, HistoryChat, InboundMessage, MessageType, Poll,
    PollVote, ReceivedMedia, StoredFile,
};
use crate::events::Pipeline;
use crate::media::{FetchOptions, MediaStore};
use crate::store::messages as message_store;
use crate::store::{DataPool, backends, on_pool, poll_votes, sessions};

const SID: &str = "22222222-2222-4222-8222-222222222222";
const ANN: &str = "4915100000001@c.us";
const BOB: &str = "4915100000002@c.us";
const US: &str = "4915100000009@c.us";

struct Rig {
    _dir: tempfile::TempDir,
    db: DataPool,
    media: MediaStore,
    recorder: Recorder,
}

async fn rig() -> Rig {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = backends::connect_data_sqlite(&dir.path().join("d.sqlite"))
        .await
        .expect("db");
    sessions::insert(&db, SID, "receiver", &SessionConfig::default(), None)
        .await
        .expect("session");
    let media = MediaStore::new(dir.path().join("media"), 1 << 20, FetchOptions::default());
    let recorder = Recorder::new(db.clone(), Pipeline::new(db.clone()), media.clone());
    Rig {
        _dir: dir,
        db,
        media,
        recorder,
    }
}

impl Rig {
    /// Records each event with an owed acknowledgement and waits until it is settled committed.
    async fn record(&self, events: &[EngineEvent]) {
        for event in events {
            let (taken, settled) = tokio::sync::oneshot::channel();
            let ack = Ack::new(move |ok: bool| {
                let _ = taken.send(ok);
            });
            self.recorder.record_event(SID, event, ack).await;
            assert!(settled.await.expect("settled"), "event not committed");
        }
    }

    async fn count(&self, sql: &'static str) -> i64 {
        on_pool!(&self.db, |p| sqlx::query_scalar(sql)
            .bind(SID)
            .fetch_one(p)
            .await)
        .expect("count")
    }

    /// Message writes commit on the group-commit task; wait (bounded) until `n` rows are there.
    async fn await_count(&self, sql: &'static str, n: i64) {
        for _ in 0..500 {
            if self.count(sql).await >= n {
                return;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        panic!("{n} rows never stored: {sql}");
    }

    fn store(&self) -> NodeStore {
        NodeStore::new(self.db.clone())
    }
}

const MESSAGES: &str = "SELECT COUNT(*) FROM messages WHERE session_id = $1";
const OUTBOX: &str = "SELECT COUNT(*) FROM webhook_outbox_events WHERE session_id = $1";

fn jid(raw: &str) -> Jid {
    Jid::parse(raw).expect("jid")
}

fn message(id: &str, from_me: bool, at: i64, body: &str) -> InboundMessage {
    let (from, to) = if from_me { (US, ANN) } else { (ANN, US) };
    InboundMessage {
        id: id.into(),
        chat_id: jid(ANN),
        from: jid(from),
        to: jid(to),
        author: None,
        from_me,
        kind: MessageType::Text,
        body: body.into(),
        timestamp: at,
        media: None,
        quoted: None,
        mentioned_ids: vec![],
        location: None,
        poll: None,
    }
}

/// What an engine makes of a history chunk: three messages of Ann's chat (one unread), what the phone
/// said about the chat, and two push names (one of an account without a chat).
fn history() -> EngineEvent {
    EngineEvent::History(Box::new(HistoryBatch {
        messages: vec![
            (
                message("H1", false, 1_700_000_000, "old hello"),
                AckStatus::Read,
            ),
            (
                message("H2", false, 1_700_000_200, "new hello"),
                AckStatus::Delivered,
            ),
            (message("H3", true, 1_700_000_100, "reply"), AckStatus::Sent),
        ],
        chats: vec![HistoryChat {
            id: jid(ANN),
            name: Some("Ann".into()),
            unread_count: Some(1),
            last_message_at: Some(1_700_000_200),
            archived: Some(true),
            pinned: Some(true),
            muted: None,
            mute_expiration: None,
        }],
        push_names: vec![(jid(ANN), "Ann P".into()), (jid(BOB), "Bob".into())],
    }))
}

fn webhook_for_everything() -> WebhookRecord {
    WebhookRecord {
        id: "hook-all".into(),
        session_id: SID.into(),
        url: "http://127.0.0.1:9/hook".into(),
        events: vec!["*".into()],
        secret: None,
        headers: Default::default(),
        active: true,
        filters: None,
        retry_count: 3,
        last_triggered_at: None,
        created_at: 1,
        updated_at: 1,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn history_fills_messages_chats_and_contacts_once_without_events() {
    let rig = rig().await;
    webhook_store::insert(&rig.db, &webhook_for_everything())
        .await
        .expect("webhook");

    // Recorded twice (a re-sent chunk): every message is stored once.
    let batch = [history()];
    rig.record(&batch).await;
    rig.record(&batch).await;
    rig.await_count(MESSAGES, 3).await;
    let h2 = message_store::find(&rig.db, SID, "H2")
        .await
        .expect("find")
        .expect("H2 stored");
    assert_eq!(h2.body.as_deref(), Some("new hello"));
    assert_eq!(
        (h2.direction.as_str(), h2.kind.as_str()),
        ("incoming", "text")
    );
    assert_eq!(h2.chat_id, ANN);
    let h3 = message_store::find(&rig.db, SID, "H3")
        .await
        .expect("find")
        .expect("H3");
    assert_eq!(h3.direction, "outgoing");

    // Live traffic afterwards: one more row, and only it reaches the webhook.
    rig.record(&[EngineEvent::Message(Box::new(message(
        "L1",
        false,
        1_700_000_500,
        "live",
    )))])
    .await;
    rig.await_count(MESSAGES, 4).await;
    assert_eq!(rig.count(MESSAGES).await, 4);
    rig.await_count(OUTBOX, 1).await;
    assert_eq!(rig.count(OUTBOX).await, 1, "history raised events");

    // The chat list engines read: history's name and flags, the newest message, the unread count.
    let chats = rig.store().chats(SID).await.expect("chats");
    assert_eq!(chats.len(), 1, "{chats:?}");
    let ann = &chats[0];
    assert_eq!(ann.id, jid(ANN));
    assert_eq!(ann.name, "Ann");
    assert!(ann.archived && ann.pinned && !ann.muted);
    assert_eq!(ann.unread_count, 2, "H2 from history and the live L1");
    assert_eq!(ann.last_message.as_deref(), Some("live"));

    // Push names, including an account without a chat.
    let names = rig.store().contact_names(SID).await.expect("names");
    assert_eq!(
        names,
        vec![
            (ANN.to_string(), Some("Ann P".to_string())),
            (BOB.to_string(), Some("Bob".to_string())),
        ]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_poll_is_found_by_engines_and_its_votes_replace_per_voter() {
    let rig = rig().await;
    let mut poll = message("POLL1", true, 1_700_000_000, "Lunch?");
    poll.kind = MessageType::Poll;
    poll.poll = Some(Poll {
        name: "Lunch?".into(),
        options: vec!["Pizza".into(), "Sushi".into(), "Tacos".into()],
        allow_multiple: true,
    });
    rig.record(&[EngineEvent::Message(Box::new(poll.clone()))])
        .await;
    rig.await_count(MESSAGES, 1).await;

    // What an engine reads back to decrypt a vote: the poll's definition among the stored extras.
    let stored = rig
        .store()
        .message(SID, "POLL1")
        .await
        .expect("read")
        .expect("poll stored");
    assert!(stored.from_me);
    let extra: serde_json::Value =
        serde_json::from_str(stored.extra.as_deref().expect("extras")).expect("json");
    let read: Poll = serde_json::from_value(extra["poll"].clone()).expect("poll");
    assert_eq!(Some(read), poll.poll);

    let vote = |options: &[&str]| {
        EngineEvent::PollVote(PollVote {
            poll_id: "POLL1".into(),
            chat_id: jid(ANN),
            voter: jid(ANN),
            options: options.iter().map(|o| o.to_string()).collect(),
            timestamp: 1_700_000_500,
        })
    };
    rig.record(&[vote(&["Pizza", "Tacos"])]).await;
    assert_eq!(
        poll_votes::list(&rig.db, SID, "POLL1")
            .await
            .expect("votes"),
        vec![(
            ANN.to_string(),
            vec!["Pizza".to_string(), "Tacos".to_string()],
            1_700_000_500
        )]
    );
    // An empty selection withdraws the vote.
    rig.record(&[vote(&[])]).await;
    assert!(
        poll_votes::list(&rig.db, SID, "POLL1")
            .await
            .expect("votes")
            .is_empty()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn media_an_engine_stored_is_kept_by_key_and_a_message_without_it_still_stored() {
    let rig = rig().await;
    let plaintext: Vec<u8> = (0..200_000u32).map(|i| (i % 251) as u8).collect();
    let object = rig.media.put_bytes(SID, &plaintext).await.expect("stored");
    let mut with_media = message("IMG1", false, 1_700_000_500, "look");
    with_media.kind = MessageType::Image;
    with_media.media = Some(ReceivedMedia {
        mimetype: "image/jpeg".into(),
        filename: None,
        data: Vec::new(),
        stored: Some(Box::new(StoredFile {
            key: object.key.clone(),
            size: object.size,
        })),
    });
    let mut without = message("IMG2", false, 1_700_000_501, "");
    without.kind = MessageType::Image;
    rig.record(&[
        EngineEvent::Message(Box::new(with_media)),
        EngineEvent::Message(Box::new(without)),
    ])
    .await;
    rig.await_count(MESSAGES, 2).await;

    let row = message_store::find(&rig.db, SID, "IMG1")
        .await
        .expect("find")
        .expect("IMG1");
    let meta: serde_json::Value =
        serde_json::from_str(row.media.as_deref().expect("media column")).expect("json");
    assert_eq!(meta["key"], object.key.as_str());
    assert_eq!(meta["sizeBytes"], plaintext.len());
    assert_eq!(row.body.as_deref(), Some("look"));
    assert_eq!(
        rig.media.get(&object.key).await.expect("read"),
        Some(plaintext)
    );
    let row = message_store::find(&rig.db, SID, "IMG2")
        .await
        .expect("find")
        .expect("IMG2 kept");
    assert!(row.has_media && row.media.is_none());
}

/// Push names an engine hears live are what the contact list names the accounts with.
#[tokio::test]
async fn push_names_saved_by_engines_name_the_contacts() {
    let rig = rig().await;
    let store = rig.store();
    store
        .save_push_names(SID, &[(ANN.into(), "Ann P".into())])
        .await
        .expect("save");
    store
        .save_push_names(
            SID,
            &[(ANN.into(), "Ann Q".into()), (BOB.into(), "Robert".into())],
        )
        .await
        .expect("save");
    assert_eq!(
        store.contact_names(SID).await.expect("names"),
        vec![
            (ANN.to_string(), Some("Ann Q".to_string())),
            (BOB.to_string(), Some("Robert".to_string())),
        ]
    );
}

/// A receipt is acknowledged to the network on receipt (it is never sent again): when its write fails for
/// a moment (here the messages table is away for a second), the writer retries it until it is stored.
#[tokio::test]
async fn a_receipt_whose_write_fails_for_a_moment_is_stored_once_it_can_be() {
    let rig = rig().await;
    rig.record(&[EngineEvent::Message(Box::new(message(
        "S1",
        true,
        1_700_000_000,
        "sent by us",
    )))])
    .await;
    let rename = |sql: &'static str| {
        let db = rig.db.clone();
        async move {
            on_pool!(&db, |p| sqlx::query(sql).execute(p).await.map(|_| ())).expect("rename");
        }
    };
    rename("ALTER TABLE messages RENAME TO messages_away").await;
    let receipt = EngineEvent::Ack {
        message_id: "S1".into(),
        chat_id: jid(ANN),
        status: AckStatus::Read,
    };
    rig.recorder.record_event(SID, &receipt, Ack::none()).await;
    tokio::time::sleep(Duration::from_millis(800)).await;
    rename("ALTER TABLE messages_away RENAME TO messages").await;
    let read = "SELECT COUNT(*) FROM messages WHERE session_id = $1 AND status = 'read'";
    for _ in 0..200 {
        if rig.count(read).await == 1 {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("the receipt was not stored after the table came back");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_ack_committed_before_its_message_row_still_reaches_the_row() {
    let rig = rig().await;
    let read = EngineEvent::Ack {
        message_id: "EARLY1".into(),
        chat_id: jid(ANN),
        status: AckStatus::Read,
    };
    let own = EngineEvent::Message(Box::new(message("EARLY1", true, 1_700_000_300, "mine")));
    rig.record(&[read, own]).await;
    rig.await_count(MESSAGES, 1).await;
    let status: String = on_pool!(&rig.db, |p| sqlx::query_scalar(
        "SELECT status FROM messages WHERE session_id = $1 AND wa_message_id = 'EARLY1'"
    )
    .bind(SID)
    .fetch_one(p)
    .await)
    .expect("status");
    assert_eq!(status, "read", "the ack that came first is not lost");
}

/// A receipt the network hands over again (after a restart whose release was not journaled yet) moves
/// nothing and publishes nothing a second time, alone or in a group; one for a message not stored yet
/// still publishes (its row may come later).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_receipt_handed_over_again_publishes_once() {
    const ACKS: &str = "SELECT COUNT(*) FROM webhook_outbox_events WHERE session_id = $1 AND event = 'message.ack'";
    let rig = rig().await;
    webhook_store::insert(&rig.db, &webhook_for_everything())
        .await
        .expect("webhook");
    let own = |id: &str| EngineEvent::Message(Box::new(message(id, true, 1_700_000_400, "mine")));
    let ack = |id: &str, status| EngineEvent::Ack {
        message_id: id.into(),
        chat_id: jid(ANN),
        status,
    };
    rig.record(&[own("AGAIN1"), own("AGAIN2")]).await;
    rig.record(&[ack("AGAIN1", AckStatus::Delivered)]).await;
    rig.record(&[ack("AGAIN1", AckStatus::Delivered)]).await;
    assert_eq!(rig.count(ACKS).await, 1, "a repeat publishes nothing");
    // A group: both receipts of AGAIN2 are news, the repeat of AGAIN1 and an older one are not.
    let group = [
        ack("AGAIN2", AckStatus::Delivered),
        ack("AGAIN1", AckStatus::Delivered),
        ack("AGAIN2", AckStatus::Read),
        ack("AGAIN1", AckStatus::Sent),
    ];
    let settled = group.iter().map(|event| {
        let (taken, settled) = tokio::sync::oneshot::channel();
        let ack = Ack::new(move |ok: bool| {
            let _ = taken.send(ok);
        });
        (event, ack, settled)
    });
    let mut waits = Vec::new();
    for (event, ack, settled) in settled {
        rig.recorder.record_event(SID, event, ack).await;
        waits.push(settled);
    }
    for settled in waits {
        assert!(settled.await.expect("settled"));
    }
    assert_eq!(rig.count(ACKS).await, 3, "AGAIN2 delivered and read");
    rig.record(&[ack("NOT-STORED", AckStatus::Read)]).await;
    assert_eq!(
        rig.count(ACKS).await,
        4,
        "a receipt before its message publishes"
    );
}

/// A revoke the network delivers again, and an edit of a message already deleted for everyone, change no
/// row and publish nothing (a consumer would see the message revoked twice, or its text come back); an
/// edit and a revoke of a live message, and of one not stored, publish once each.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_revoked_message_takes_no_second_revoke_and_no_edit() {
    const REVOKES: &str = "SELECT COUNT(*) FROM webhook_outbox_events WHERE session_id = $1 AND event = 'message.revoked'";
    const EDITS: &str = "SELECT COUNT(*) FROM webhook_outbox_events WHERE session_id = $1 AND event = 'message.edited'";
    let rig = rig().await;
    webhook_store::insert(&rig.db, &webhook_for_everything())
        .await
        .expect("webhook");
    let revoke = |id: &str| EngineEvent::Revoked {
        id: format!("R-{id}"),
        revoked_id: id.into(),
        chat_id: jid(ANN),
        from: jid(ANN),
        to: jid(US),
        timestamp: 1_700_000_501,
    };
    let edit = |id: &str, body: &str| EngineEvent::Edited {
        message_id: id.into(),
        chat_id: jid(ANN),
        body: body.into(),
        from: jid(ANN),
        from_me: false,
        timestamp: 1_700_000_502,
    };
    let theirs = EngineEvent::Message(Box::new(message("GONE1", false, 1_700_000_500, "secret")));
    rig.record(&[theirs]).await;
    rig.await_count(MESSAGES, 1).await;
    rig.record(&[edit("GONE1", "still secret")]).await;
    assert_eq!(rig.count(EDITS).await, 1, "an edit of a live message");
    rig.record(&[revoke("GONE1"), revoke("GONE1")]).await;
    assert_eq!(
        rig.count(REVOKES).await,
        1,
        "a repeat revoke publishes nothing"
    );
    rig.record(&[edit("GONE1", "back again")]).await;
    assert_eq!(
        rig.count(EDITS).await,
        1,
        "an edit after the revoke publishes nothing"
    );
    let body: Option<String> = on_pool!(&rig.db, |p| sqlx::query_scalar(
        "SELECT body FROM messages WHERE session_id = $1 AND wa_message_id = 'GONE1'"
    )
    .bind(SID)
    .fetch_one(p)
    .await)
    .expect("body");
    assert_eq!(body, None, "the revoked row keeps no text");
    rig.record(&[revoke("NOT-STORED"), edit("NOT-STORED-2", "new")])
        .await;
    assert_eq!(
        (rig.count(REVOKES).await, rig.count(EDITS).await),
        (2, 2),
        "changes of messages not stored still publish"
    );
}
