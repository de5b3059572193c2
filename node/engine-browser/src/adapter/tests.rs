//! The adapter end to end over a real (Debian) Chromium, offline: the `Engine` trait of a browser engine
//! against the crate's loopback fake WhatsApp Web (its `fake-wpp.js` stands in for the wa-js bundle), in
//! the engine API's standalone context (no node). What runs is this folder's mapping: answers into domain
//! records, the browser column's 501s, status `recipients` ignored, and a dead page as `Network` on
//! bounded operations and `Internal` on unbounded ones (the node answers them 503 and 500:
//! `node/tests/browser_engine.rs`).

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use tokio::sync::mpsc::UnboundedReceiver;
use wagate_engine_api::{
    CallKind, ChatState, Engine, EngineContext, EngineError, EngineEvent, Incoming, LabelUpsert,
    MediaKind, MediaMessage, MediaSource, MessageContent, MessageType, NewGroup, Op,
    OutgoingMessage, ParticipantAction, PresenceState, StatusContent, StatusPost, event_channel,
};
use wagate_proto::Jid;

use super::{BrowserEngine, BrowserFactory};
use crate::{BrowserConfig, Launcher, default_chromium_path};

#[path = "../../tests/fake/server.rs"]
mod fake_server;
use fake_server::FAKE_WPP;

const ME: &str = "15550001111@c.us";
const ANN: &str = "15550002222@c.us";
const GROUP: &str = "120363000000000001@g.us";
const CHANNEL: &str = "120363000000000002@newsletter";
/// Generous: the machine is shared; nothing here asserts a duration.
const PATIENCE: Duration = Duration::from_secs(60);

fn jid(raw: &str) -> Jid {
    Jid::parse(raw).unwrap()
}

async fn linked_engine(
    dir: &std::path::Path,
) -> (
    Arc<BrowserEngine>,
    UnboundedReceiver<Incoming>,
    fake_server::FakeWhatsApp,
) {
    let fake = fake_server::fake_whatsapp().await;
    fake.scanned.store(true, Ordering::SeqCst);
    let chromium = std::env::var_os("CHROMIUM_PATH")
        .map(PathBuf::from)
        .unwrap_or_else(default_chromium_path);
    let launcher = Launcher::new(BrowserConfig {
        chromium_path: chromium,
        bundle_path: PathBuf::from(FAKE_WPP),
        url: fake.url.clone(),
        auth_wait: Duration::from_millis(500),
        watch_interval: Duration::from_millis(100),
        ..BrowserConfig::default()
    })
    .unwrap();
    let (events, mut rx) = event_channel();
    let mut ctx = EngineContext::standalone("b1", events, None);
    ctx.data_dir = dir.join("b1");
    let engine = BrowserFactory::new(launcher, dir.join("sessions")).build(ctx);
    engine.start().await.unwrap();
    loop {
        let incoming = tokio::time::timeout(PATIENCE, rx.recv())
            .await
            .expect("an event in time")
            .expect("the engine keeps its channel");
        let ready = incoming.event == EngineEvent::Ready;
        incoming.ack.complete();
        if ready {
            break;
        }
    }
    (engine, rx, fake)
}

fn media_to(to: &str) -> OutgoingMessage {
    OutgoingMessage {
        to: jid(to),
        content: MessageContent::Media(MediaMessage {
            kind: MediaKind::Image,
            source: MediaSource::Bytes(vec![0x89, b'P', b'N', b'G']),
            mimetype: "image/png".into(),
            filename: None,
            caption: Some("pic".into()),
        }),
        quoted_id: None,
        mentions: Vec::new(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_browser_column_runs_through_the_adapter_and_a_dead_page_is_503_or_500() {
    let dir = tempfile::tempdir().unwrap();
    let (engine, _rx, _fake) = linked_engine(dir.path()).await;

    // Groups: list, roster change with a per-participant refusal, detail, settings; create stays 501.
    let groups = engine.list_groups().await.unwrap();
    assert_eq!(
        (
            groups[0].id.to_string(),
            groups[0].participants_count,
            groups[0].is_admin
        ),
        (GROUP.to_string(), 2, true)
    );
    let results = engine
        .update_participants(
            &jid(GROUP),
            ParticipantAction::Add,
            &[jid("15550005555@c.us"), jid("15550009990@c.us")],
        )
        .await
        .unwrap();
    assert_eq!(
        results
            .iter()
            .map(|r| (r.success, r.status))
            .collect::<Vec<_>>(),
        vec![(true, 200), (false, 403)]
    );
    let info = engine.group_info(&jid(GROUP)).await.unwrap();
    assert_eq!(
        (info.owner.to_string(), info.participants.len()),
        (ME.to_string(), 3)
    );
    let pending = engine.membership_requests(&jid(GROUP)).await.unwrap();
    assert_eq!(pending.len(), 2);
    let rejected = engine
        .answer_membership_requests(
            &jid(GROUP),
            false,
            Some(&[pending[0].participant_id.clone()]),
        )
        .await
        .unwrap();
    assert_eq!((rejected.len(), rejected[0].success), (1, true));
    let new_group = NewGroup {
        subject: "x".into(),
        participants: vec![jid(ANN)],
    };
    assert_eq!(
        engine.create_group(new_group).await,
        Err(EngineError::NotSupported(Op::CreateGroup))
    );
    assert!(matches!(
        engine.group_info(&jid("120363999999999999@g.us")).await,
        Err(EngineError::NotFound(_))
    ));

    // Channels: list and create work; owner transfer, subscribe by invite and media to a channel are 501.
    let channels = engine.list_channels().await.unwrap();
    assert_eq!(
        (channels[0].id.to_string(), channels[0].verified),
        (CHANNEL.to_string(), true)
    );
    let created = engine.create_channel("Mine", Some("about")).await.unwrap();
    assert!(created.is_owner && created.id.to_string().ends_with("@newsletter"));
    assert_eq!(
        engine
            .transfer_channel_owner(&jid(CHANNEL), &jid(ANN))
            .await,
        Err(EngineError::NotSupported(Op::TransferChannelOwner))
    );
    assert!(matches!(
        engine.subscribe_channel("CHANFAKE").await,
        Err(EngineError::NotSupported(Op::SubscribeChannel))
    ));
    assert_eq!(
        engine.send(media_to(CHANNEL)).await,
        Err(EngineError::NotSupported(Op::SendMedia))
    );
    assert!(engine.send(media_to(ANN)).await.is_ok());

    // Status posts: `recipients` ignored (empty is fine here, unlike the socket engine).
    let posted = engine
        .post_status(StatusPost {
            content: StatusContent::Text {
                text: "hello".into(),
                background_color: None,
                font: None,
            },
            recipients: Vec::new(),
        })
        .await
        .unwrap();
    assert_eq!(
        (posted.contact.to_string(), posted.kind),
        (ME.to_string(), MessageType::Text)
    );
    let mine = engine.list_statuses().await.unwrap();
    assert_eq!(mine[0].status_id, posted.status_id);
    engine.delete_status(&posted.status_id).await.unwrap();
    assert!(engine.list_statuses().await.unwrap().is_empty());

    // Presence commands work and reads answer what the page heard; no presence event ever leaves.
    assert_eq!(engine.presence(&jid(ANN)).await, Ok(None));
    engine.set_presence(true).await.unwrap();
    engine.subscribe_presence(&jid(ANN)).await.unwrap();
    let deadline = tokio::time::Instant::now() + PATIENCE;
    let heard = loop {
        if let Ok(Some(entries)) = engine.presence(&jid(ANN)).await {
            break entries;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "presence never heard"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(heard[0].state, PresenceState::Available);

    // Chat actions, seen in the chat list; labels read.
    engine.archive_chat(&jid(ANN), true).await.unwrap();
    engine.mute_chat(&jid(ANN), Some(0)).await.unwrap();
    engine
        .set_chat_state(&jid(ANN), ChatState::Typing)
        .await
        .unwrap();
    let chats = engine.list_chats().await.unwrap();
    let ann = chats.iter().find(|c| c.id == jid(ANN)).unwrap();
    assert_eq!(
        (ann.archived, ann.muted, ann.mute_expiration),
        (true, true, 0)
    );
    assert_eq!(
        engine.chat_labels(&jid(ANN)).await.unwrap()[0].name,
        "Customers"
    );
    assert_eq!(engine.label_chats("1").await.unwrap()[0].id, jid(ANN));
    assert!(matches!(
        engine
            .upsert_label(LabelUpsert {
                id: None,
                name: Some("x".into()),
                color: None
            })
            .await,
        Err(EngineError::NotSupported(Op::UpsertLabel))
    ));
    let link = engine
        .create_call_link(CallKind::Audio, 1_700_000_000_000)
        .await
        .unwrap();
    assert_eq!(link, "https://call.whatsapp.com/voice/FAKE1700000000");

    // A dead page: the bounded chat list answers 503 (`Network`), an unbounded create 500 (`Internal`).
    // Each attempt crashes the renderer and asks at once, before the engine has replaced the page.
    let session = engine.session().clone();
    let mut seen_503 = false;
    let mut seen_500 = false;
    let deadline = tokio::time::Instant::now() + PATIENCE;
    while !(seen_503 && seen_500) {
        assert!(
            tokio::time::Instant::now() < deadline,
            "503 {seen_503}, 500 {seen_500}"
        );
        session.crash_renderer_for_test();
        tokio::time::sleep(Duration::from_millis(20)).await;
        match engine.list_chats().await {
            Err(EngineError::Network(_)) => seen_503 = true,
            Ok(_) | Err(EngineError::Busy(_)) => {}
            Err(other) => panic!("a dead page on chat list: {other:?}"),
        }
        match engine.create_channel("During", None).await {
            Err(EngineError::Internal(_)) => seen_500 = true,
            Ok(_) | Err(EngineError::Busy(_)) => {}
            Err(other) => panic!("a dead page on channel create: {other:?}"),
        }
        // Let the engine bring a page back before the next round.
        let healed = tokio::time::Instant::now() + PATIENCE;
        while engine.list_chats().await.is_err() {
            assert!(
                tokio::time::Instant::now() < healed,
                "the page never came back"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
    engine.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn received_media_is_read_from_the_page_into_the_media_store() {
    const ECHO: &str = "15550007777@c.us";
    let dir = tempfile::tempdir().unwrap();
    let (engine, mut rx, _fake) = linked_engine(dir.path()).await;
    engine.send(media_to(ECHO)).await.unwrap();
    let received = loop {
        let incoming = tokio::time::timeout(PATIENCE, rx.recv())
            .await
            .expect("the echo in time")
            .expect("the engine keeps its channel");
        incoming.ack.complete();
        if let EngineEvent::Message(m) = incoming.event
            && m.body == "pic"
        {
            break m;
        }
    };
    let media = received.media.expect("the echo's image");
    let stored = media.stored.expect("kept in the media store");
    assert_eq!(
        (media.mimetype.as_str(), media.data.as_slice(), stored.size),
        ("image/png", &[0x89, b'P', b'N', b'G'][..], 4)
    );
    let ctx_media = engine.ctx.media.get(&stored.key).await.unwrap();
    assert_eq!(ctx_media.as_deref(), Some(&[0x89, b'P', b'N', b'G'][..]));
}
