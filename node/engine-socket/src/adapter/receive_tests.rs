//! Receive-path tests on the engine API's standalone pieces (no node): synthetic library events
//! (history-sync chunks, an encrypted poll vote, media messages, push names) go through the mapper and
//! the receive worker, and what the worker emits, stores in the engine's own tables and writes through
//! `EngineStore`/`EngineMedia` is checked. Media is served by a loopback HTTP server as the CDN would
//! (encrypted with the library's own media encryption). Recording these events into the node's tables is
//! the node's to test (`node/src/messaging/record_tests.rs`).

use std::sync::Arc;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::mpsc::unbounded_channel;
use wagate_db::DataPool;
use wagate_engine_api::media::EngineMedia;
use wagate_engine_api::store::{MemoryStore, StoredMessage};
use wagate_engine_api::{AckStatus, EngineEvent, InboundMessage, MessageType, Poll};
use wagate_proto::Jid;

use super::events::{Mapper, Work};
use super::media::Fetch;
use super::ops::calls::RecentCalls;
use super::ops::presence::PresenceBook;
use super::receive::{ClientSlot, Receiver};
use super::testkit::{self, LoopbackMedia};
use crate::http::ReqwestHttpClient;
use crate::store::SqlBackend;
use crate::whatsapp_rust::TokioRuntime;
use crate::whatsapp_rust::download::{MediaDownloader, MediaType};
use crate::whatsapp_rust::store::traits::MsgSecretStore;
use crate::whatsapp_rust::types::events::{
    BatchOrigin, Event, InboundMessage as LibInbound, LazyHistorySync, MessageBatch,
};
use crate::whatsapp_rust::types::message::{MessageInfo, MessageSource};
use crate::whatsapp_rust::wacore::poll::{compute_option_hash, encrypt_poll_vote_with_secret};
use crate::whatsapp_rust::wacore::upload::encrypt_media;
use crate::whatsapp_rust::waproto::buffa::MessageField;
use crate::whatsapp_rust::waproto::codec::history_sync_encode_into;
use crate::whatsapp_rust::waproto::whatsapp as wa;

const SID: &str = "22222222-2222-4222-8222-222222222222";
const ANN: &str = "4915100000001@s.whatsapp.net";
const BOB: &str = "4915100000002@s.whatsapp.net";
const US: &str = "4915100000009@s.whatsapp.net";

/// The engine's own tables, and the node's side as the engine API's in-memory store and media.
struct Rig {
    _dir: tempfile::TempDir,
    db: DataPool,
    store: Arc<MemoryStore>,
    media: Arc<LoopbackMedia>,
}

async fn rig(max_media: u64) -> Rig {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = testkit::data_db(dir.path(), SID).await;
    Rig {
        _dir: dir,
        db,
        store: Arc::new(MemoryStore::default()),
        media: testkit::media(max_media),
    }
}

impl Rig {
    fn receiver(
        &self,
        events: wagate_engine_api::EventSender,
        fetch: Option<Arc<dyn Fetch>>,
    ) -> Receiver {
        Receiver {
            session_id: SID.into(),
            events,
            pool: self.db.clone(),
            store: self.store.clone(),
            media: self.media.clone(),
            client: ClientSlot::default(),
            own: Some(lib(US)),
            fetch,
        }
    }

    /// Feeds library events through the mapper and a receive worker and returns what the worker emits.
    async fn receive(&self, events: Vec<Event>, fetch: Option<Arc<dyn Fetch>>) -> Vec<EngineEvent> {
        let (work, queue) = unbounded_channel();
        let (out, mut emitted) = wagate_engine_api::event_channel();
        let mapper = Mapper::new(
            SID.into(),
            work,
            Arc::new(RecentCalls::default()),
            Arc::new(PresenceBook::default()),
        );
        for event in events {
            mapper.map(&Arc::new(event));
        }
        drop(mapper);
        self.receiver(out, fetch).run(queue).await;
        let mut got = Vec::new();
        while let Ok(incoming) = emitted.try_recv() {
            got.push(incoming.event);
        }
        got
    }
}

fn lib(raw: &str) -> crate::whatsapp_rust::Jid {
    raw.parse().expect("library jid")
}

fn ours(raw: &str) -> Jid {
    Jid::parse(raw).expect("jid")
}

fn live(id: &str, chat: &str, sender: &str, message: wa::Message) -> Event {
    live_named(id, chat, sender, message, "")
}

fn live_named(id: &str, chat: &str, sender: &str, message: wa::Message, push_name: &str) -> Event {
    let info = MessageInfo {
        push_name: push_name.into(),
        id: id.into(),
        source: MessageSource {
            chat: lib(chat),
            sender: lib(sender),
            is_from_me: sender == US,
            is_group: chat.ends_with("@g.us"),
            ..MessageSource::default()
        },
        timestamp: chrono::DateTime::from_timestamp(1_700_000_500, 0).expect("time"),
        ..MessageInfo::default()
    };
    let inbound = LibInbound::builder()
        .message(Arc::new(message))
        .info(Arc::new(info))
        .build();
    Event::Messages(
        MessageBatch::builder()
            .messages(Arc::from(vec![inbound]))
            .origin(BatchOrigin::Live)
            .build(),
    )
}

fn text(body: &str) -> wa::Message {
    wa::Message {
        conversation: Some(body.into()),
        ..Default::default()
    }
}

/// zlib with stored (uncompressed) blocks: the framing the library inflates, without a compressor.
fn zlib(raw: &[u8]) -> Vec<u8> {
    let mut out = vec![0x78, 0x01];
    let chunks: Vec<&[u8]> = raw.chunks(65_535).collect();
    for (i, chunk) in chunks.iter().enumerate() {
        out.push(u8::from(i + 1 == chunks.len()));
        let len = chunk.len() as u16;
        out.extend_from_slice(&len.to_le_bytes());
        out.extend_from_slice(&(!len).to_le_bytes());
        out.extend_from_slice(chunk);
    }
    let (mut a, mut b) = (1u32, 0u32);
    for byte in raw {
        a = (a + u32::from(*byte)) % 65_521;
        b = (b + a) % 65_521;
    }
    out.extend_from_slice(&((b << 16) | a).to_be_bytes());
    out
}

fn history_message(id: &str, from_me: bool, at: u64, body: &str) -> wa::HistorySyncMsg {
    wa::HistorySyncMsg {
        message: MessageField::some(wa::WebMessageInfo {
            key: MessageField::some(wa::MessageKey {
                remote_jid: Some(ANN.into()),
                from_me: Some(from_me),
                id: Some(id.into()),
                participant: None,
            }),
            message: MessageField::some(text(body)),
            message_timestamp: Some(at),
            ..Default::default()
        }),
        ..Default::default()
    }
}

fn history_event() -> Event {
    let sync = wa::HistorySync {
        sync_type: wa::history_sync::HistorySyncType::InitialBootstrap,
        conversations: vec![wa::Conversation {
            id: ANN.into(),
            name: Some("Ann".into()),
            unread_count: Some(1),
            archived: Some(true),
            pinned: Some(1_700_000_100),
            last_msg_timestamp: Some(1_700_000_200),
            messages: vec![
                history_message("H1", false, 1_700_000_000, "old hello"),
                history_message("H2", false, 1_700_000_200, "new hello"),
                history_message("H3", true, 1_700_000_100, "reply"),
            ],
            ..Default::default()
        }],
        pushnames: vec![
            wa::Pushname {
                id: Some(ANN.into()),
                pushname: Some("Ann P".into()),
            },
            wa::Pushname {
                id: Some(BOB.into()),
                pushname: Some("Bob".into()),
            },
        ],
        ..Default::default()
    };
    let mut raw = Vec::new();
    history_sync_encode_into(&sync, &mut raw);
    let lazy = LazyHistorySync::new(bytes::Bytes::from(zlib(&raw)), raw.len(), 0, None, None);
    Event::HistorySync(Box::new(lazy))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_history_sync_chunk_becomes_one_batch_with_states_chats_and_push_names() {
    let rig = rig(1024 * 1024).await;
    let emitted = rig.receive(vec![history_event()], None).await;
    let [EngineEvent::History(batch)] = emitted.as_slice() else {
        panic!("expected one history batch, got {emitted:?}");
    };
    let message = |id: &str| {
        batch
            .messages
            .iter()
            .find(|(m, _)| m.id == id)
            .cloned()
            .unwrap_or_else(|| panic!("{id} not in the batch"))
    };
    // The phone said one message is unread: the newest incoming one.
    assert_eq!(message("H2").1, AckStatus::Delivered);
    assert_eq!(message("H1").1, AckStatus::Read);
    assert_eq!(message("H3").1, AckStatus::Sent);
    assert_eq!(batch.messages.len(), 3);

    let (h2, _) = message("H2");
    assert_eq!(h2.body, "new hello");
    assert_eq!((h2.from_me, h2.kind), (false, MessageType::Text));
    assert_eq!(h2.chat_id, ours("4915100000001@c.us"));
    let (h3, _) = message("H3");
    assert!(h3.from_me);
    assert_eq!(
        h3.from,
        ours("4915100000009@c.us"),
        "our own history message"
    );

    // What history said about the chat: its name, flags, unread count and newest message time.
    let [chat] = batch.chats.as_slice() else {
        panic!("expected one chat, got {:?}", batch.chats);
    };
    assert_eq!(chat.id, ours("4915100000001@c.us"));
    assert_eq!(chat.name.as_deref(), Some("Ann"));
    assert_eq!(chat.archived, Some(true));
    assert_eq!(chat.pinned, Some(true));
    assert_eq!(chat.unread_count, Some(1));
    assert_eq!(chat.last_message_at, Some(1_700_000_200));

    // Push names, including an account without a chat.
    assert_eq!(
        batch.push_names,
        vec![
            (ours("4915100000001@c.us"), "Ann P".to_string()),
            (ours("4915100000002@c.us"), "Bob".to_string()),
        ]
    );
}

/// Our poll as the node stored it (what `EngineStore::message` answers).
fn stored_poll(id: &str) -> StoredMessage {
    let poll = poll_message(id);
    StoredMessage {
        wa_message_id: id.into(),
        chat_id: poll.chat_id.to_string(),
        from_jid: poll.from.to_string(),
        author: None,
        from_me: true,
        kind: "poll".into(),
        body: Some(poll.body.clone()),
        timestamp: poll.timestamp,
        media: None,
        extra: Some(serde_json::json!({ "poll": poll.poll }).to_string()),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_encrypted_poll_vote_decrypts_to_the_option_names() {
    let rig = rig(1024 * 1024).await;
    rig.store
        .insert_message(SID, stored_poll("POLL1"))
        .expect("poll stored");
    // The library's send path keeps our poll's secret under (chat, our JID, poll id).
    let secret = [7u8; 32];
    SqlBackend::new(rig.db.clone(), SID)
        .put_msg_secret(ANN, US, "POLL1", &secret)
        .await
        .expect("secret");

    let emitted = rig
        .receive(
            vec![vote_from_ann(&secret, &["Tacos", "Pizza"], "V1")],
            None,
        )
        .await;
    let [EngineEvent::PollVote(vote)] = emitted.as_slice() else {
        panic!("expected a poll vote, got {emitted:?}");
    };
    assert_eq!(vote.poll_id, "POLL1");
    assert_eq!(vote.chat_id, ours("4915100000001@c.us"));
    assert_eq!(vote.voter, ours("4915100000001@c.us"));
    assert_eq!(vote.options, vec!["Pizza".to_string(), "Tacos".to_string()]);
    assert_eq!(vote.timestamp, 1_700_000_500);

    // A vote sealed with another secret does not open: nothing is emitted.
    let forged = rig
        .receive(vec![vote_from_ann(&[9u8; 32], &["Sushi"], "V2")], None)
        .await;
    assert!(forged.is_empty(), "{forged:?}");

    // Ann withdraws her vote: an empty selection.
    let withdrawn = rig
        .receive(vec![vote_from_ann(&secret, &[], "V3")], None)
        .await;
    let [EngineEvent::PollVote(vote)] = withdrawn.as_slice() else {
        panic!("expected a poll vote, got {withdrawn:?}");
    };
    assert!(vote.options.is_empty());

    // A vote on a poll the node does not have is dropped.
    SqlBackend::new(rig.db.clone(), SID)
        .put_msg_secret(ANN, US, "POLL9", &secret)
        .await
        .expect("secret");
    let dropped = rig
        .receive(vec![vote_on(&secret, &["Pizza"], "POLL9", "V4")], None)
        .await;
    assert!(dropped.is_empty(), "{dropped:?}");
}

fn poll_message(id: &str) -> InboundMessage {
    InboundMessage {
        id: id.into(),
        chat_id: ours("4915100000001@c.us"),
        from: ours("4915100000009@c.us"),
        to: ours("4915100000001@c.us"),
        author: None,
        from_me: true,
        kind: MessageType::Poll,
        body: "Lunch?".into(),
        timestamp: 1_700_000_000,
        media: None,
        quoted: None,
        mentioned_ids: vec![],
        location: None,
        poll: Some(Poll {
            name: "Lunch?".into(),
            options: vec!["Pizza".into(), "Sushi".into(), "Tacos".into()],
            allow_multiple: true,
        }),
    }
}

/// What Ann's phone sends when she votes on our poll: the vote sealed with the poll's secret, the key
/// written from her side (our JID as `remoteJid`, not `fromMe`).
fn vote_from_ann(secret: &[u8], choices: &[&str], id: &str) -> Event {
    vote_on(secret, choices, "POLL1", id)
}

/// Ann's vote on the poll `poll_id`.
fn vote_on(secret: &[u8], choices: &[&str], poll_id: &str, id: &str) -> Event {
    let hashes: Vec<Vec<u8>> = choices
        .iter()
        .map(|c| compute_option_hash(c).to_vec())
        .collect();
    let (payload, iv) =
        encrypt_poll_vote_with_secret(&hashes, secret, poll_id, US, ANN).expect("encrypt");
    let message = wa::Message {
        poll_update_message: MessageField::some(wa::message::PollUpdateMessage {
            poll_creation_message_key: MessageField::some(wa::MessageKey {
                remote_jid: Some(US.into()),
                from_me: Some(false),
                id: Some(poll_id.into()),
                participant: None,
            }),
            vote: MessageField::some(wa::message::PollEncValue {
                enc_payload: Some(payload),
                enc_iv: Some(iv.to_vec()),
            }),
            ..Default::default()
        }),
        ..Default::default()
    };
    live(id, ANN, ANN, message)
}

/// A one-route CDN on loopback: `/blob` answers `body`, anything else 404.
async fn cdn(body: Vec<u8>) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("addr");
    tokio::spawn(async move {
        while let Ok((mut socket, _)) = listener.accept().await {
            let body = body.clone();
            tokio::spawn(async move {
                let mut request = Vec::new();
                let mut buf = [0u8; 1024];
                while !request.windows(4).any(|w| w == b"\r\n\r\n") {
                    match socket.read(&mut buf).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => request.extend_from_slice(&buf[..n]),
                    }
                }
                let found = request.starts_with(b"GET /blob ");
                let (status, body) = if found {
                    ("200 OK", body)
                } else {
                    ("404 Not Found", Vec::new())
                };
                let head = format!(
                    "HTTP/1.1 {status}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                    body.len()
                );
                let _ = socket.write_all(head.as_bytes()).await;
                let _ = socket.write_all(&body).await;
            });
        }
    });
    format!("http://{addr}")
}

fn image(
    url: String,
    plaintext_len: usize,
    enc: &crate::whatsapp_rust::wacore::upload::EncryptedMedia,
) -> wa::Message {
    wa::Message {
        image_message: MessageField::some(wa::message::ImageMessage {
            static_url: Some(url),
            direct_path: Some("/v/t62/blob".into()),
            media_key: Some(enc.media_key.to_vec()),
            file_sha256: Some(enc.file_sha256.to_vec()),
            file_enc_sha256: Some(enc.file_enc_sha256.to_vec()),
            file_length: Some(plaintext_len as u64),
            mimetype: Some("image/jpeg".into()),
            caption: Some("look".into()),
            ..Default::default()
        }),
        ..Default::default()
    }
}

fn downloader() -> Arc<dyn Fetch> {
    // reqwest is built without a default crypto provider (boot installs ring the same way).
    let _ = rustls::crypto::ring::default_provider().install_default();
    Arc::new(MediaDownloader::with_default_hosts(
        Arc::new(ReqwestHttpClient::new(None)),
        Arc::new(TokioRuntime),
    ))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn received_media_is_downloaded_decrypted_and_stored() {
    let rig = rig(1024 * 1024).await;
    let plaintext: Vec<u8> = (0..200_000u32).map(|i| (i % 251) as u8).collect();
    let enc = encrypt_media(&plaintext, MediaType::Image).expect("encrypt");
    let base = cdn(enc.data_to_upload.clone()).await;

    let emitted = rig
        .receive(
            vec![
                live(
                    "IMG1",
                    ANN,
                    ANN,
                    image(format!("{base}/blob"), plaintext.len(), &enc),
                ),
                // Gone from the CDN: the message still arrives, without media.
                live(
                    "IMG2",
                    ANN,
                    ANN,
                    image(format!("{base}/gone"), plaintext.len(), &enc),
                ),
            ],
            Some(downloader()),
        )
        .await;
    let [EngineEvent::Message(ok), EngineEvent::Message(gone)] = emitted.as_slice() else {
        panic!("expected two messages, got {emitted:?}");
    };
    let media = ok.media.as_ref().expect("media downloaded");
    assert_eq!(media.mimetype, "image/jpeg");
    assert_eq!(media.data, plaintext, "small media is inlined in the event");
    let file = media.stored.as_ref().expect("stored file");
    assert_eq!(file.size, plaintext.len() as u64);
    assert_eq!(
        rig.media.get(&file.key).await.expect("read"),
        Some(plaintext.clone()),
        "the stored file is the decrypted media"
    );
    assert!(gone.media.is_none());
    assert_eq!(gone.kind, MessageType::Image);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn media_over_the_cap_is_refused_and_the_message_kept() {
    // Declared within the cap but larger on the wire: the capped file stops the download.
    let rig = rig(64 * 1024).await;
    let plaintext = vec![42u8; 100_000];
    let enc = encrypt_media(&plaintext, MediaType::Image).expect("encrypt");
    let base = cdn(enc.data_to_upload.clone()).await;
    let emitted = rig
        .receive(
            vec![
                live("BIG1", ANN, ANN, image(format!("{base}/blob"), 1_000, &enc)),
                live(
                    "BIG2",
                    ANN,
                    ANN,
                    image(format!("{base}/blob"), plaintext.len(), &enc),
                ),
            ],
            Some(downloader()),
        )
        .await;
    assert_eq!(emitted.len(), 2);
    for event in &emitted {
        let EngineEvent::Message(msg) = event else {
            panic!("not a message: {event:?}");
        };
        assert!(msg.media.is_none(), "{} kept media over the cap", msg.id);
    }
    assert_eq!(
        rig.media.get("mem-0").await.expect("read"),
        None,
        "a refused download stored an object"
    );
}

/// Push names seen live (on others' messages and in name changes) name the contact list; our own name and
/// repeats are not written again.
#[tokio::test]
async fn live_push_names_are_kept_for_the_contact_list() {
    let rig = rig(1 << 20).await;
    let change = Event::PushNameUpdate(
        crate::whatsapp_rust::types::events::PushNameUpdate::builder()
            .jid(lib(BOB))
            .message(Box::new(MessageInfo::default()))
            .old_push_name("Bob".into())
            .new_push_name("Robert".into())
            .build(),
    );
    rig.receive(
        vec![
            live_named("N1", ANN, ANN, text("hi"), "Ann P"),
            live_named("N2", ANN, ANN, text("again"), "Ann P"),
            live_named("N3", ANN, US, text("mine"), "Us"),
            change,
            live_named("N4", ANN, ANN, text("renamed"), "Ann Q"),
        ],
        None,
    )
    .await;
    let names = rig.store.push_names(SID).expect("names");
    assert_eq!(
        names,
        vec![
            ("4915100000001@c.us".to_string(), "Ann Q".to_string()),
            ("4915100000002@c.us".to_string(), "Robert".to_string()),
        ]
    );
}

/// The library's durability hook (`gate.rs`) hands its batch to the receive worker as `Work::Gated`: the
/// message goes to the supervisor with an owed acknowledgement, and the hook's answer is `true` only once
/// the message committed (the library then acknowledges it to the server); a refused acknowledgement
/// answers `false` (the server redelivers). The batch the library dispatches afterwards, marked
/// `hook_committed`, emits nothing a second time.
#[tokio::test]
async fn gated_messages_are_answered_only_after_their_commit() {
    let rig = rig(1 << 20).await;
    let batch = |id: &str, body: &str| match live(id, ANN, ANN, text(body)) {
        Event::Messages(batch) => batch.messages.to_vec(),
        _ => unreachable!("live() builds a message batch"),
    };
    let (work, queue) = unbounded_channel();
    let (out, mut emitted) = wagate_engine_api::event_channel();
    let worker = tokio::spawn(rig.receiver(out, None).run(queue));
    let gated = |items, done| Work::Gated { items, done };

    let (done, answer) = tokio::sync::oneshot::channel();
    work.send(gated(
        super::events::classify_batch(&batch("G1", "kept")),
        done,
    ))
    .expect("queued");
    let incoming = emitted.recv().await.expect("the message");
    assert!(
        incoming.ack.is_owed(),
        "a gated message is owed its acknowledgement"
    );
    assert!(matches!(&incoming.event, EngineEvent::Message(m) if m.id == "G1"));
    // The node acknowledges once the message is committed.
    incoming.ack.complete();
    assert_eq!(answer.await.ok(), Some(true), "answered after the commit");

    let (done, answer) = tokio::sync::oneshot::channel();
    work.send(gated(
        super::events::classify_batch(&batch("G2", "refused")),
        done,
    ))
    .expect("queued");
    let incoming = emitted.recv().await.expect("the message");
    drop(incoming);
    assert_eq!(answer.await.ok(), Some(false), "not committed: redelivered");
    drop(work);
    worker.await.expect("worker");

    let committed = match live("G1", ANN, ANN, text("kept")) {
        Event::Messages(batch) => Event::Messages(
            MessageBatch::builder()
                .messages(batch.messages.clone())
                .origin(BatchOrigin::Live)
                .hook_committed(true)
                .build(),
        ),
        _ => unreachable!("live() builds a message batch"),
    };
    assert!(
        rig.receive(vec![committed], None).await.is_empty(),
        "a batch the hook committed is not emitted again"
    );
}
