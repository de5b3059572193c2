//! Socket engine mapping tests: synthetic library events (built with the library's builders and types) go
//! through `events::map_event` and `LinkTracker`, and the `EngineEvent`s they produce are checked.

use std::sync::Arc;
use std::time::Duration;

use crate::transport::TransportObserver;
use crate::whatsapp_rust::Jid as LibJid;
use crate::whatsapp_rust::types::call::{CallAction, IncomingCall, MissedCall, MissedReason};
use crate::whatsapp_rust::types::events::{
    BatchOrigin, ClientOutdated, Connected, Event, GroupUpdate, InboundMessage as LibInbound,
    MessageBatch, PairSuccess, PairingQrCode, PictureUpdate, PresenceUpdate, Receipt, ServerAck,
    StreamReplaced,
};
use crate::whatsapp_rust::types::message::{MessageInfo, MessageSource};
use crate::whatsapp_rust::types::presence::ReceiptType;
use crate::whatsapp_rust::wacore::stanza::groups::GroupNotificationAction;
use crate::whatsapp_rust::waproto::whatsapp as wa;
use tokio::sync::mpsc::unbounded_channel;
use wagate_proto::Jid;

use super::events::map_event;
use super::link::{LinkTracker, NextAttempt, PASSKEY_ACTION};
use super::ops::calls::RecentCalls;
use super::ops::presence::PresenceBook;
use wagate_engine_api::{
    AckStatus, CallPhase, EngineEvent, GroupAction, MessageType, PresenceState, ReconnectPolicy,
};

const ANN: &str = "4915100000001@s.whatsapp.net";
const US: &str = "4915100000009@s.whatsapp.net";

fn lib(raw: &str) -> LibJid {
    raw.parse().expect("library jid")
}

fn ours(raw: &str) -> Jid {
    Jid::parse(raw).expect("jid")
}

fn info(id: &str, chat: &str, sender: &str, from_me: bool) -> MessageInfo {
    MessageInfo {
        id: id.into(),
        source: MessageSource {
            chat: lib(chat),
            sender: lib(sender),
            is_from_me: from_me,
            is_group: chat.ends_with("@g.us"),
            ..MessageSource::default()
        },
        timestamp: chrono::DateTime::from_timestamp(1_700_000_000, 0).expect("time"),
        ..MessageInfo::default()
    }
}

fn batch(message: wa::Message, info: MessageInfo) -> Event {
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

fn one(event: &Event) -> EngineEvent {
    let mut mapped = map_event(event);
    assert_eq!(mapped.len(), 1, "{mapped:?}");
    mapped.remove(0)
}

#[test]
fn a_text_message_becomes_a_message_event() {
    let message = wa::Message {
        conversation: Some("hello".into()),
        ..Default::default()
    };
    let EngineEvent::Message(msg) = one(&batch(message, info("3EB0A", ANN, ANN, false))) else {
        panic!("not a message");
    };
    assert_eq!(msg.id, "3EB0A");
    assert_eq!(msg.body, "hello");
    assert_eq!(msg.kind, MessageType::Text);
    assert_eq!(msg.chat_id, ours("4915100000001@c.us"));
    assert_eq!(msg.from, ours("4915100000001@c.us"));
    assert!(!msg.from_me);
    assert_eq!(msg.timestamp, 1_700_000_000);
}

#[test]
fn our_own_message_from_the_phone_is_from_me() {
    let message = wa::Message {
        conversation: Some("sent from the phone".into()),
        ..Default::default()
    };
    let EngineEvent::Message(msg) = one(&batch(message, info("3EB0B", ANN, US, true))) else {
        panic!("not a message");
    };
    assert!(msg.from_me);
    assert_eq!(msg.from, ours("4915100000009@c.us"));
    assert_eq!(msg.to, ours("4915100000001@c.us"));
}

#[test]
fn revoke_edit_and_reaction_are_classified_from_the_payload() {
    use wa::message::protocol_message::Type;
    let key = wa::MessageKey {
        id: Some("TARGET".into()),
        ..Default::default()
    };
    let revoke = wa::Message {
        protocol_message: wa::message::ProtocolMessage {
            key: key.clone().into(),
            r#type: Some(Type::REVOKE),
            ..Default::default()
        }
        .into(),
        ..Default::default()
    };
    match one(&batch(revoke, info("R1", ANN, ANN, false))) {
        EngineEvent::Revoked { id, revoked_id, .. } => {
            assert_eq!((id.as_str(), revoked_id.as_str()), ("R1", "TARGET"))
        }
        other => panic!("{other:?}"),
    }
    let edit = wa::Message {
        protocol_message: wa::message::ProtocolMessage {
            key: key.clone().into(),
            r#type: Some(Type::MESSAGE_EDIT),
            edited_message: wa::Message {
                conversation: Some("fixed".into()),
                ..Default::default()
            }
            .into(),
            ..Default::default()
        }
        .into(),
        ..Default::default()
    };
    match one(&batch(edit, info("E1", ANN, ANN, false))) {
        EngineEvent::Edited {
            message_id, body, ..
        } => assert_eq!((message_id.as_str(), body.as_str()), ("TARGET", "fixed")),
        other => panic!("{other:?}"),
    }
    let reaction = wa::Message {
        reaction_message: wa::message::ReactionMessage {
            key: key.into(),
            text: Some("👍".into()),
            ..Default::default()
        }
        .into(),
        ..Default::default()
    };
    match one(&batch(reaction, info("X1", ANN, ANN, false))) {
        EngineEvent::Reaction {
            message_id,
            reaction,
            sender_id,
            ..
        } => {
            assert_eq!((message_id.as_str(), reaction.as_str()), ("TARGET", "👍"));
            assert_eq!(sender_id, ours("4915100000001@c.us"));
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_status_broadcast_post_becomes_a_status_update() {
    let message = wa::Message {
        image_message: wa::message::ImageMessage {
            caption: Some("beach".into()),
            ..Default::default()
        }
        .into(),
        ..Default::default()
    };
    match one(&batch(message, info("S1", "status@broadcast", ANN, false))) {
        EngineEvent::Status(status) => {
            assert_eq!(status.status_id, "S1");
            assert_eq!(status.kind, MessageType::Image);
            assert_eq!(status.caption.as_deref(), Some("beach"));
            assert!(status.has_media);
            assert_eq!(status.expires_at - status.posted_at, 24 * 3600);
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn receipts_become_acks_and_server_nacks_become_failed() {
    let receipt = Event::Receipt(
        Receipt::builder()
            .source(MessageSource {
                chat: lib(ANN),
                sender: lib(ANN),
                ..MessageSource::default()
            })
            .message_ids(vec!["M1".into(), "M2".into()])
            .timestamp(chrono::Utc::now())
            .r#type(ReceiptType::Read)
            .offline(false)
            .build(),
    );
    let mapped = map_event(&receipt);
    assert_eq!(mapped.len(), 2);
    assert!(
        matches!(&mapped[1], EngineEvent::Ack { message_id, status: AckStatus::Read, .. } if message_id == "M2")
    );

    let nack = Event::ServerAck(
        ServerAck::builder()
            .id("M3".into())
            .class("message".into())
            .from(lib(ANN))
            .error("479".into())
            .build(),
    );
    assert!(matches!(
        one(&nack),
        EngineEvent::Ack {
            status: AckStatus::Failed,
            ..
        }
    ));
    let receipt_ack = Event::ServerAck(
        ServerAck::builder()
            .id("R".into())
            .class("receipt".into())
            .build(),
    );
    assert!(
        map_event(&receipt_ack).is_empty(),
        "only message acks count"
    );
}

#[test]
fn presence_and_calls_are_mapped() {
    let presence = Event::Presence(
        PresenceUpdate::builder()
            .from(lib(ANN))
            .unavailable(true)
            .build(),
    );
    match one(&presence) {
        EngineEvent::Presence { participants, .. } => {
            assert_eq!(participants[0].state, PresenceState::Unavailable)
        }
        other => panic!("{other:?}"),
    }
    let offer = CallAction::Offer {
        call_id: "CALL1".into(),
        call_creator: lib(ANN),
        caller_pn: None,
        caller_country_code: None,
        device_class: None,
        joinable: false,
        is_video: true,
        audio: vec![],
        group_jid: None,
    };
    let call = Event::IncomingCall(
        IncomingCall::builder()
            .from(lib(ANN))
            .stanza_id("st".into())
            .timestamp(chrono::Utc::now())
            .offline(false)
            .action(offer)
            .build(),
    );
    match one(&call) {
        EngineEvent::Call(call) => {
            assert_eq!(
                (call.phase, call.call_id.as_str(), call.is_video),
                (CallPhase::Received, "CALL1", true)
            );
        }
        other => panic!("{other:?}"),
    }
    // The offer is remembered so a later reject (or autoRejectCalls) can name caller and creator.
    let (tx, mut rx) = unbounded_channel();
    let calls = Arc::new(RecentCalls::default());
    let presence = Arc::new(PresenceBook::default());
    super::events::Mapper::new("s1".into(), tx, calls.clone(), presence).map(&Arc::new(call));
    assert!(matches!(
        rx.try_recv(),
        Ok(super::events::Work::Emit(EngineEvent::Call(_)))
    ));
    let (peer, creator) = calls.get("CALL1").expect("offer remembered");
    assert_eq!(
        (peer.user.as_str(), creator.user.as_str()),
        ("4915100000001", "4915100000001")
    );
    let missed = Event::MissedCall(MissedCall::new(
        lib(ANN),
        "CALL2".into(),
        chrono::Utc::now(),
        MissedReason::Remote,
    ));
    assert!(matches!(one(&missed), EngineEvent::Call(c) if c.phase == CallPhase::Missed));
}

/// A presence read answers what the session's own presence events said: null before any, then the
/// latest state, kept across events the mapper passes on to the supervisor.
#[test]
fn presence_reads_answer_from_the_mapped_presence_events() {
    let (tx, mut rx) = unbounded_channel();
    let book = Arc::new(PresenceBook::default());
    let mapper = super::events::Mapper::new(
        "s1".into(),
        tx,
        Arc::new(RecentCalls::default()),
        book.clone(),
    );
    let ann = ours("4915100000001@c.us");
    assert_eq!(book.read(&ann), None);
    mapper.map(&Arc::new(Event::Presence(
        PresenceUpdate::builder()
            .from(lib(ANN))
            .unavailable(false)
            .build(),
    )));
    assert!(matches!(
        rx.try_recv(),
        Ok(super::events::Work::Emit(EngineEvent::Presence { .. }))
    ));
    let entries = book.read(&ann).expect("presence heard");
    assert_eq!(entries.len(), 1);
    assert_eq!(
        (entries[0].id.clone(), entries[0].state),
        (ann.clone(), PresenceState::Available)
    );
    mapper.map(&Arc::new(Event::Presence(
        PresenceUpdate::builder()
            .from(lib(ANN))
            .unavailable(true)
            .build(),
    )));
    let entries = book.read(&ann).expect("presence heard");
    assert_eq!(entries[0].state, PresenceState::Unavailable);
}

fn tracker() -> (
    LinkTracker,
    tokio::sync::mpsc::UnboundedReceiver<wagate_engine_api::Incoming>,
) {
    let (tx, rx) = wagate_engine_api::event_channel();
    (LinkTracker::new("s1".into(), tx), rx)
}

fn drain(
    rx: &mut tokio::sync::mpsc::UnboundedReceiver<wagate_engine_api::Incoming>,
) -> Vec<EngineEvent> {
    let mut out = Vec::new();
    while let Ok(incoming) = rx.try_recv() {
        out.push(incoming.event);
    }
    out
}

#[test]
fn qr_codes_render_to_png_data_urls_and_pairing_leads_to_authenticating() {
    let (link, mut rx) = tracker();
    for code in ["2@first,ref", "2@second,ref"] {
        let qr = PairingQrCode::builder()
            .code(code.into())
            .timeout(std::time::Duration::from_secs(20))
            .build();
        assert!(link.on_event(&Event::PairingQrCode(qr)));
    }
    let paired = PairSuccess::builder()
        .id(lib(US))
        .lid(lib("123@lid"))
        .business_name(String::new())
        .platform("web".into())
        .build();
    assert!(link.on_event(&Event::PairSuccess(paired)));
    let events = drain(&mut rx);
    assert_eq!(events.len(), 3, "{events:?}");
    let (EngineEvent::Qr { data_url: a }, EngineEvent::Qr { data_url: b }) =
        (&events[0], &events[1])
    else {
        panic!("{events:?}");
    };
    assert!(
        a.starts_with("data:image/png;base64,") && a != b,
        "rotation as sent"
    );
    assert_eq!(events[2], EngineEvent::Authenticating);
}

#[test]
fn connected_is_ready_and_refusals_fail_with_a_reason() {
    let (link, mut rx) = tracker();
    link.on_event(&Event::Connected(Connected::builder().build()));
    assert_eq!(
        drain(&mut rx),
        vec![EngineEvent::Ready],
        "no client yet: no account to report"
    );
    link.on_event(&Event::StreamReplaced(StreamReplaced::builder().build()));
    link.on_event(&Event::ClientOutdated(ClientOutdated::builder().build()));
    let events = drain(&mut rx);
    assert!(
        matches!(&events[0], EngineEvent::Failed { reason } if reason.contains("stream replaced"))
    );
    assert!(matches!(&events[1], EngineEvent::Failed { reason } if reason.contains("outdated")));
    assert!(PASSKEY_ACTION.contains("QR code"));
}

fn policy(base_delay_ms: u64, max_attempts: Option<u32>) -> ReconnectPolicy {
    ReconnectPolicy {
        base_delay_ms,
        max_attempts,
    }
}

/// One attempt of the run loop that fails the way `fail` says; answers what the tracker scheduled.
fn failed_attempt(
    link: &LinkTracker,
    policy: &ReconnectPolicy,
    reconnect: bool,
    fail: impl FnOnce(&LinkTracker),
) -> Option<NextAttempt> {
    link.begin_attempt(reconnect);
    fail(link);
    link.attempt_ended(policy)
}

fn next_after(
    link: &LinkTracker,
    policy: &ReconnectPolicy,
    next: Option<NextAttempt>,
) -> Option<NextAttempt> {
    failed_attempt(link, policy, next.is_some_and(|n| n.reconnect), |l| {
        l.dial_failed("cannot reach ws://127.0.0.1:1/ws/chat: refused")
    })
}

fn self_retries(events: &[EngineEvent]) -> Vec<(u32, Option<u64>)> {
    events
        .iter()
        .filter_map(|e| match e {
            EngineEvent::SelfRetry {
                failures,
                next_delay_ms,
                ..
            } => Some((*failures, *next_delay_ms)),
            _ => None,
        })
        .collect()
}

#[test]
fn failed_attempts_are_reported_with_their_reason_and_the_next_delay() {
    let (link, mut rx) = tracker();
    let p = policy(1_000, None);
    // The start's own connect reaches the server, which closes before the handshake.
    let next = failed_attempt(&link, &p, false, |l| l.closed("server closed (1000)"));
    // Reconnect 1 cannot even dial.
    next_after(&link, &p, next);
    let events = drain(&mut rx);
    assert_eq!(events.len(), 2, "{events:?}");
    assert!(
        matches!(&events[0], EngineEvent::SelfRetry { failures: 0, reason: Some(r), next_delay_ms: Some(1_000) } if r.contains("handshake")),
        "the start's own connect spends no attempt: {events:?}"
    );
    assert!(
        matches!(&events[1], EngineEvent::SelfRetry { failures: 1, reason: Some(r), next_delay_ms: Some(2_000) } if r.contains("cannot reach")),
        "{events:?}"
    );
    assert_eq!(link.attempts(), 2);
    // Reconnect 2 connects and later drops: reconnect 1 comes after the base delay, counting afresh.
    link.begin_attempt(true);
    link.on_event(&Event::Connected(Connected::builder().build()));
    let disconnected = crate::whatsapp_rust::types::events::Disconnected::builder()
        .reason(crate::whatsapp_rust::transport::DisconnectReason::Unknown)
        .build();
    link.on_event(&Event::Disconnected(disconnected));
    let next = link.attempt_ended(&p);
    assert_eq!(
        next,
        Some(NextAttempt {
            delay: Duration::from_millis(1_000),
            reconnect: true
        })
    );
    assert_eq!(
        drain(&mut rx).last(),
        Some(&EngineEvent::SelfRetry {
            failures: 0,
            reason: None,
            next_delay_ms: Some(1_000)
        })
    );
    assert_eq!(link.failures(), 0);
}

/// The self-retries wait what the session's policy says: `reconnectBaseDelay * 2^(n-1)`, capped at 5
/// minutes, not the library's own Fibonacci backoff (1 s, 1 s, 2 s, ... up to 15 minutes). The run loop
/// sleeps exactly the `NextAttempt` delay, and the event reports the same number.
#[test]
fn self_retries_follow_the_base_delay_and_the_cap() {
    let (link, mut rx) = tracker();
    let p = policy(60_000, None);
    let mut next = failed_attempt(&link, &p, false, |l| l.dial_failed("refused"));
    let mut delays = vec![next.map(|n| n.delay)];
    for _ in 0..5 {
        next = next_after(&link, &p, next);
        delays.push(next.map(|n| n.delay));
    }
    let secs = |s: u64| Some(Duration::from_secs(s));
    assert_eq!(
        delays,
        vec![
            secs(60),
            secs(120),
            secs(240),
            secs(300),
            secs(300),
            secs(300)
        ]
    );
    assert_eq!(
        self_retries(&drain(&mut rx)),
        vec![
            (0, Some(60_000)),
            (1, Some(120_000)),
            (2, Some(240_000)),
            (3, Some(300_000)),
            (4, Some(300_000)),
            (5, Some(300_000)),
        ],
        "each event names the delay the loop waits"
    );
    // The default base: 5 s first, never the library's 1 s.
    let (link, _rx) = tracker();
    let next = failed_attempt(&link, &ReconnectPolicy::default(), false, |l| {
        l.dial_failed("refused")
    });
    assert_eq!(next.map(|n| n.delay), secs(5));
}

/// `maxReconnectAttempts: N` allows exactly N reconnects after the start's own connect; 0 allows none.
#[test]
fn max_reconnect_attempts_counts_reconnects_only() {
    for max in [0u32, 1, 2, 5] {
        let (link, mut rx) = tracker();
        let p = policy(1_000, Some(max));
        let mut next = failed_attempt(&link, &p, false, |l| l.dial_failed("refused"));
        while next.is_some() {
            next = next_after(&link, &p, next);
        }
        assert_eq!(link.attempts(), max + 1, "max {max}: connects made");
        let retries = self_retries(&drain(&mut rx));
        assert_eq!(
            retries.last(),
            Some(&(max, None)),
            "max {max}: the last report says no attempt follows: {retries:?}"
        );
    }
}

/// The restart the network asks for after pairing (the connection ends without a drop) goes at once and
/// is not a reconnect; a failed or logged-out engine, and one being stopped, makes no further attempt.
#[test]
fn restarts_go_at_once_and_ended_engines_stop_retrying() {
    let (link, mut rx) = tracker();
    let p = policy(1_000, Some(0));
    link.begin_attempt(false);
    link.on_event(&Event::PairSuccess(
        PairSuccess::builder()
            .id(lib(US))
            .lid(lib("100000000000001@lid"))
            .business_name(String::new())
            .platform("android".into())
            .build(),
    ));
    assert_eq!(
        link.attempt_ended(&p),
        Some(NextAttempt {
            delay: Duration::ZERO,
            reconnect: false
        })
    );
    drain(&mut rx);
    link.begin_attempt(false);
    link.on_event(&Event::StreamReplaced(StreamReplaced::builder().build()));
    assert_eq!(link.attempt_ended(&p), None);
    assert!(
        self_retries(&drain(&mut rx)).is_empty(),
        "the failure is the report"
    );
    let (link, mut rx) = tracker();
    link.begin_teardown();
    assert_eq!(
        failed_attempt(&link, &p, false, |l| l.dial_failed("refused")),
        None
    );
    assert!(drain(&mut rx).is_empty());
}

#[test]
fn teardown_swallows_the_librarys_own_disconnect_and_logout() {
    let (link, mut rx) = tracker();
    link.begin_teardown();
    let disconnected = crate::whatsapp_rust::types::events::Disconnected::builder()
        .reason(crate::whatsapp_rust::transport::DisconnectReason::Unknown)
        .build();
    link.on_event(&Event::Disconnected(disconnected));
    assert!(drain(&mut rx).is_empty());
}

#[test]
fn a_connect_during_logout_does_not_report_ready() {
    // A logout connects only to send the unlink; the session must not read `ready` after the logout.
    let (link, mut rx) = tracker();
    link.begin_teardown();
    link.attempt();
    link.on_event(&Event::Connected(Connected::builder().build()));
    link.dial_failed("refused");
    assert!(drain(&mut rx).is_empty());
}

fn group_update(action: GroupNotificationAction) -> Event {
    Event::GroupUpdate(
        GroupUpdate::builder()
            .group_jid(lib("120363000000000001@g.us"))
            .participant(lib(ANN))
            .timestamp(chrono::DateTime::from_timestamp(1_700_000_000, 0).expect("time"))
            .is_lid_addressing_mode(false)
            .action(action)
            .build(),
    )
}

#[test]
fn disappearing_timer_and_member_add_mode_changes_are_group_updates() {
    let cases = [
        (
            GroupNotificationAction::Ephemeral {
                expiration: 86_400,
                trigger: None,
            },
            serde_json::json!({ "ephemeralSeconds": 86_400 }),
        ),
        (
            GroupNotificationAction::MemberAddMode {
                mode: "admin_add".into(),
            },
            serde_json::json!({ "memberAddMode": "admins" }),
        ),
        (
            GroupNotificationAction::MemberAddMode {
                mode: "all_member_add".into(),
            },
            serde_json::json!({ "memberAddMode": "all" }),
        ),
    ];
    for (action, expected) in cases {
        let EngineEvent::Group(event) = one(&group_update(action)) else {
            panic!("not a group event");
        };
        assert_eq!(event.action, GroupAction::Update);
        assert_eq!(event.actor_id, Some(ours(ANN)));
        assert_eq!(
            serde_json::to_value(&event.changes).expect("json"),
            expected
        );
    }
}

#[test]
fn a_group_picture_change_is_a_group_update_and_a_contact_picture_is_none() {
    let picture = |jid: &str, removed: bool| {
        Event::PictureUpdate(
            PictureUpdate::builder()
                .jid(lib(jid))
                .author(lib(ANN))
                .timestamp(chrono::DateTime::from_timestamp(1_700_000_000, 0).expect("time"))
                .removed(removed)
                .build(),
        )
    };
    for (removed, expected) in [(false, "set"), (true, "removed")] {
        let EngineEvent::Group(event) = one(&picture("120363000000000001@g.us", removed)) else {
            panic!("not a group event");
        };
        assert_eq!(event.actor_id, Some(ours(ANN)));
        let changes = serde_json::to_value(&event.changes).expect("json");
        assert_eq!(changes, serde_json::json!({ "picture": expected }));
    }
    assert!(map_event(&picture(US, false)).is_empty());
}
