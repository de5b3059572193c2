//! Sim network behaviour, end to end through the `Engine` trait and the control API: linking, QR
//! rotation, messages with acks, group fan-out, reconnect, unlink, contact checks and the test knobs.
//! Every test runs under paused tokio time, so delays cost nothing and nothing depends on the wall clock.

use super::control::InboundSpec;
use super::network::SimConfig;
use super::*;
use std::time::Duration;
use tokio::sync::mpsc::UnboundedReceiver;
use tokio::time::Instant;

pub(super) const A: &str = "491111111111@c.us";
pub(super) const B: &str = "492222222222@c.us";
pub(super) const C: &str = "493333333333@c.us";

pub(super) fn jid(raw: &str) -> Jid {
    Jid::parse(raw).expect("test JID")
}

pub(super) struct Handset {
    pub(super) engine: Arc<dyn Engine>,
    pub(super) rx: UnboundedReceiver<Incoming>,
    pub(super) account: Option<LinkedAccount>,
}

pub(super) fn handset(net: &SimNetwork, session: &str, linked: Option<LinkedAccount>) -> Handset {
    let (events, rx) = event_channel();
    let ctx = EngineContext::standalone(session, events, linked);
    Handset {
        engine: SimFactory::new(net.clone()).create(ctx),
        rx,
        account: None,
    }
}

impl Handset {
    /// The next event, acknowledged at once (a supervisor whose commits always succeed).
    pub(super) async fn next(&mut self) -> EngineEvent {
        let incoming = self.next_unacked().await;
        incoming.ack.complete();
        incoming.event
    }

    /// The next event with its acknowledgement still owed.
    pub(super) async fn next_unacked(&mut self) -> Incoming {
        let event = tokio::time::timeout(Duration::from_secs(300), self.rx.recv()).await;
        event.expect("an event in time").expect("channel open")
    }

    pub(super) async fn silent_for(&mut self, span: Duration) -> bool {
        tokio::time::timeout(span, self.rx.recv()).await.is_err()
    }

    pub(super) async fn ack(&mut self) -> AckStatus {
        match self.next().await {
            EngineEvent::Ack { status, .. } => status,
            other => panic!("expected an ack, got {other:?}"),
        }
    }

    pub(super) async fn message(&mut self) -> InboundMessage {
        match self.next().await {
            EngineEvent::Message(msg) => *msg,
            other => panic!("expected a message, got {other:?}"),
        }
    }

    /// Expects `Authenticated` then `Ready`, keeping the credentials.
    pub(super) async fn expect_linked(&mut self) {
        match self.next().await {
            EngineEvent::Authenticated { account } => self.account = Some(account),
            other => panic!("expected Authenticated, got {other:?}"),
        }
        assert_eq!(self.next().await, EngineEvent::Ready);
    }
}

fn net() -> SimNetwork {
    SimNetwork::new(SimConfig::default())
}

/// A session linked to `phone` by QR scan.
pub(super) async fn linked(net: &SimNetwork, session: &str, phone: &str) -> Handset {
    let mut h = handset(net, session, None);
    h.engine.start().await.expect("start");
    assert!(matches!(h.next().await, EngineEvent::Qr { .. }));
    net.scan(session, &jid(phone), Some(session)).expect("scan");
    assert_eq!(h.next().await, EngineEvent::Authenticating);
    h.expect_linked().await;
    h
}

pub(super) fn text(to: &str, body: &str) -> OutgoingMessage {
    OutgoingMessage {
        to: jid(to),
        content: MessageContent::Text {
            body: body.to_string(),
            link_preview: false,
            custom_preview: None,
        },
        quoted_id: None,
        mentions: Vec::new(),
    }
}

#[tokio::test(start_paused = true)]
async fn two_linked_sessions_exchange_a_message_with_acks() {
    let net = net();
    let (mut a, mut b) = (linked(&net, "a", A).await, linked(&net, "b", B).await);
    let sent = a.engine.send(text(B, "hello")).await.expect("send");
    assert!(sent.id.starts_with("3EB0SIM"));
    let got = b.message().await;
    assert_eq!(
        (got.id.as_str(), got.body.as_str()),
        (sent.id.as_str(), "hello")
    );
    assert_eq!(
        (got.from, got.chat_id, got.from_me),
        (jid(A), jid(A), false)
    );
    let acks = [a.ack().await, a.ack().await, a.ack().await];
    assert_eq!(
        acks,
        [AckStatus::Sent, AckStatus::Delivered, AckStatus::Read]
    );
    let outbox = net.outbox("a").await;
    assert_eq!((outbox.len(), outbox[0].to.clone()), (1, jid(B)));
}

#[tokio::test(start_paused = true)]
async fn a_number_without_a_device_only_gets_the_server_ack() {
    let net = net();
    let mut a = linked(&net, "a", A).await;
    a.engine.send(text(C, "anyone?")).await.expect("send");
    assert_eq!(a.ack().await, AckStatus::Sent);
    assert!(a.silent_for(Duration::from_secs(10)).await);
}

#[tokio::test(start_paused = true)]
async fn group_send_fans_out_to_every_member() {
    let net = net();
    let mut a = linked(&net, "a", A).await;
    let (mut b, mut c) = (linked(&net, "b", B).await, linked(&net, "c", C).await);
    let new = NewGroup {
        subject: "team".into(),
        participants: vec![jid(B), jid(C)],
    };
    let group = a.engine.create_group(new).await.expect("create");
    assert_eq!((group.participants_count, group.is_admin), (3, true));
    for member in [&mut b, &mut c] {
        assert!(matches!(
            member.next().await,
            EngineEvent::Group(GroupEvent {
                action: GroupAction::Join,
                ..
            })
        ));
    }
    let sent = a
        .engine
        .send(text(&group.id.to_string(), "hi all"))
        .await
        .expect("send");
    for member in [&mut b, &mut c] {
        let got = member.message().await;
        assert_eq!(
            (got.id.clone(), got.chat_id, got.author),
            (sent.id.clone(), group.id.clone(), Some(jid(A)))
        );
    }
    assert_eq!(a.ack().await, AckStatus::Sent);
}

#[tokio::test(start_paused = true)]
async fn qr_rotates_on_its_interval_until_scanned() {
    let net = net();
    let mut h = handset(&net, "a", None);
    h.engine.start().await.expect("start");
    let started = Instant::now();
    let EngineEvent::Qr { data_url: first } = h.next().await else {
        panic!("first QR")
    };
    assert!(first.starts_with("data:image/png;base64,"));
    let EngineEvent::Qr { data_url: second } = h.next().await else {
        panic!("second QR")
    };
    assert_ne!(first, second);
    assert_eq!(started.elapsed().as_secs(), 60);
    net.scan("a", &jid(A), None).expect("scan");
    assert_eq!(h.next().await, EngineEvent::Authenticating);
    h.expect_linked().await;
    assert!(
        h.silent_for(Duration::from_secs(120)).await,
        "no QR after the scan"
    );
}

#[tokio::test(start_paused = true)]
async fn stored_credentials_go_straight_to_ready() {
    let net = net();
    let a = linked(&net, "a", A).await;
    a.engine.stop().await.expect("stop");
    let mut again = handset(&net, "a", a.account.clone());
    again.engine.start().await.expect("restart");
    again.expect_linked().await;
    assert_eq!(again.account.map(|acc| acc.phone), Some(jid(A)));
}

#[tokio::test(start_paused = true)]
async fn a_dropped_session_reconnects_and_gets_what_queued_up() {
    let net = net();
    let (mut a, mut b) = (linked(&net, "a", A).await, linked(&net, "b", B).await);
    net.drop_link("b").expect("drop");
    assert!(matches!(b.next().await, EngineEvent::Disconnected { .. }));
    assert_eq!(
        b.engine.send(text(A, "x")).await.err(),
        Some(EngineError::NotReady)
    );
    let sent = a
        .engine
        .send(text(B, "while you were away"))
        .await
        .expect("send");
    assert_eq!(a.ack().await, AckStatus::Sent);
    let mut b = handset(&net, "b", b.account.clone());
    b.engine.start().await.expect("reconnect");
    b.expect_linked().await;
    assert_eq!(b.message().await.id, sent.id);
}

#[tokio::test(start_paused = true)]
async fn unlink_logs_the_device_out_and_voids_its_credentials() {
    let net = net();
    let mut a = linked(&net, "a", A).await;
    net.unlink("a").expect("unlink");
    assert!(matches!(a.next().await, EngineEvent::LoggedOut { .. }));
    // A later start with the revoked credentials connects and is told it was logged out (as the real
    // network does), and the device does not come online.
    let mut stale = handset(&net, "a", a.account.clone());
    stale.engine.start().await.expect("start");
    assert!(matches!(stale.next().await, EngineEvent::LoggedOut { .. }));
    assert!(stale.silent_for(Duration::from_secs(5)).await);
    // Started again without them, the device asks for a QR.
    let mut fresh = handset(&net, "a", None);
    fresh.engine.start().await.expect("fresh start");
    assert!(matches!(fresh.next().await, EngineEvent::Qr { .. }));
}

#[tokio::test(start_paused = true)]
async fn contact_check_knows_linked_phones_and_inbound_senders_only() {
    let net = net();
    let (mut a, _b) = (linked(&net, "a", A).await, linked(&net, "b", B).await);
    let spec = InboundSpec {
        from: jid("495555555555@c.us"),
        chat_id: None,
        kind: MessageType::Text,
        body: Some("hi".into()),
        media: None,
        quoted_id: None,
        mentioned_ids: Vec::new(),
    };
    let id = net.inbound("a", spec).expect("inbound");
    assert_eq!(a.message().await.id, id);
    for (number, exists) in [
        ("492222222222", true),
        ("495555555555", true),
        ("497777777777", false),
    ] {
        let check = a.engine.check_number(number).await.expect("check");
        assert_eq!((check.exists, check.whatsapp_id.user()), (exists, number));
    }
    let contacts = a.engine.list_contacts().await.expect("contacts");
    assert_eq!(
        contacts
            .iter()
            .map(|c| c.id.to_string())
            .collect::<Vec<_>>(),
        vec!["495555555555@c.us"]
    );
}

/// Wire-notes §10: only linked phones and `/inbound` senders exist. A send to any other number goes out
/// (the network does not refuse it), but does not put the number on the network.
#[tokio::test(start_paused = true)]
async fn a_send_to_an_unknown_number_does_not_make_it_exist() {
    let net = net();
    let mut a = linked(&net, "a", A).await;
    let nobody = "497777777777@c.us";
    for body in ["one", "two"] {
        a.engine.send(text(nobody, body)).await.expect("send");
        assert_eq!(a.ack().await, AckStatus::Sent);
    }
    let check = a.engine.check_number("497777777777").await.expect("check");
    assert!(!check.exists, "{check:?}");
    assert!(matches!(
        a.engine.get_contact(&jid(nobody)).await,
        Err(EngineError::NotFound(_))
    ));
    let chats = a.engine.list_chats().await.expect("chats");
    assert_eq!(
        chats.iter().map(|c| c.id.to_string()).collect::<Vec<_>>(),
        vec![nobody],
        "the sender's own chat with the number stays"
    );
}

#[tokio::test(start_paused = true)]
async fn peer_actions_reach_the_session() {
    let net = net();
    let (mut a, mut b) = (linked(&net, "a", A).await, linked(&net, "b", B).await);
    let sent = a.engine.send(text(B, "edit me")).await.expect("send");
    b.message().await;
    net.react("a", &sent.id, "👍", &jid(B)).expect("react");
    net.edit("a", &sent.id, "edited").expect("edit");
    net.revoke("a", &sent.id).expect("revoke");
    let mut seen = Vec::new();
    while seen.len() < 3 {
        match a.next().await {
            EngineEvent::Ack { .. } => {}
            other => seen.push(other),
        }
    }
    assert!(matches!(&seen[0], EngineEvent::Reaction { reaction, .. } if reaction == "👍"));
    assert!(matches!(&seen[1], EngineEvent::Edited { body, .. } if body == "edited"));
    assert!(matches!(&seen[2], EngineEvent::Revoked { revoked_id, .. } if *revoked_id == sent.id));
}

#[tokio::test(start_paused = true)]
async fn a_ringing_call_can_be_rejected() {
    let net = net();
    let mut a = linked(&net, "a", A).await;
    let call_id = net.call("a", &jid(C), true, None).expect("call");
    assert!(matches!(
        a.next().await,
        EngineEvent::Call(CallEvent {
            phase: CallPhase::Received,
            is_video: true,
            ..
        })
    ));
    a.engine.reject_call(&call_id).await.expect("reject");
    assert!(matches!(
        a.next().await,
        EngineEvent::Call(CallEvent {
            phase: CallPhase::Rejected,
            ..
        })
    ));
    assert!(matches!(
        a.engine.reject_call(&call_id).await,
        Err(EngineError::NotFound(_))
    ));
}

#[tokio::test(start_paused = true)]
async fn pairing_code_is_accepted_by_a_scan_from_that_number() {
    let net = net();
    let mut h = handset(&net, "a", None);
    h.engine.start().await.expect("start");
    assert!(matches!(h.next().await, EngineEvent::Qr { .. }));
    let code = h
        .engine
        .request_pairing_code("491111111111")
        .await
        .expect("code");
    assert_eq!(
        h.next().await,
        EngineEvent::PairingCode { code: code.clone() }
    );
    assert_eq!(code.len(), 8);
    assert!(matches!(
        net.scan("a", &jid(B), None),
        Err(EngineError::BadInput(_))
    ));
    net.scan("a", &jid(A), None).expect("scan");
    assert_eq!(h.next().await, EngineEvent::Authenticating);
    assert!(matches!(
        h.engine.request_pairing_code("491111111111").await,
        Err(EngineError::Busy(_))
    ));
}

#[tokio::test(start_paused = true)]
async fn knobs_fail_starts_and_delay_queries() {
    let net = net();
    net.fail_next_starts("a", 2);
    let h = handset(&net, "a", None);
    for _ in 0..2 {
        assert!(matches!(
            h.engine.start().await,
            Err(EngineError::Network(_))
        ));
    }
    h.engine.start().await.expect("third start");
    let a = linked(&net, "b", B).await;
    net.set_query_delay(Some(Duration::from_secs(45)));
    let budget = tokio::time::timeout(Duration::from_secs(30), a.engine.list_groups()).await;
    assert!(budget.is_err(), "the query outlasts a 30 s budget");
    net.set_query_delay(None);
    assert!(a.engine.list_groups().await.is_ok());
}

#[tokio::test(start_paused = true)]
async fn socket_column_refusals_and_send_checks() {
    let net = net();
    let mut a = handset(&net, "a", None);
    assert_eq!(
        a.engine.send(text(B, "too early")).await.err(),
        Some(EngineError::NotReady)
    );
    a = linked(&net, "a", A).await;
    assert_eq!(
        a.engine.list_labels().await.err(),
        Some(EngineError::NotSupported(Op::ListLabels))
    );
    assert_eq!(
        a.engine.list_channels().await.err(),
        Some(EngineError::NotSupported(Op::ListChannels))
    );
    let product = |id: &str| OutgoingMessage {
        content: MessageContent::Product {
            product_id: id.to_string(),
            body: None,
        },
        ..text(B, "")
    };
    assert!(matches!(
        a.engine.send(product("nope")).await,
        Err(EngineError::NotFound(_))
    ));
    assert!(a.engine.send(product("sim-product-1")).await.is_ok());
    let quoting = OutgoingMessage {
        quoted_id: Some("missing".into()),
        ..text(B, "re")
    };
    let err = a.engine.send(quoting).await.err().map(|e| e.to_string());
    assert_eq!(err.as_deref(), Some("Message missing not found"));
}

#[tokio::test(start_paused = true)]
async fn participant_changes_answer_per_participant() {
    let net = net();
    let a = linked(&net, "a", A).await;
    let _b = linked(&net, "b", B).await;
    let group = a
        .engine
        .create_group(NewGroup {
            subject: "g".into(),
            participants: vec![],
        })
        .await
        .expect("create");
    let who = [jid(B), jid(C)];
    let results = a
        .engine
        .update_participants(&group.id, ParticipantAction::Add, &who)
        .await
        .expect("add");
    let statuses: Vec<(bool, u16)> = results.iter().map(|r| (r.success, r.status)).collect();
    assert_eq!(statuses, vec![(true, 200), (false, 404)]);
    let info = a.engine.group_info(&group.id).await.expect("info");
    assert_eq!(info.participants.len(), 2);
}

#[tokio::test(start_paused = true)]
async fn group_event_join_request_reaches_the_admin_and_can_be_approved() {
    let net = net();
    let mut a = linked(&net, "a", A).await;
    let new = NewGroup {
        subject: "g".into(),
        participants: vec![],
    };
    let group = a.engine.create_group(new).await.expect("create");
    let who = [jid(C)];
    net.group_event("a", &group.id, GroupAction::JoinRequest, &who, None)
        .expect("event");
    let event = a.next().await;
    assert!(matches!(
        event,
        EngineEvent::Group(GroupEvent {
            action: GroupAction::JoinRequest,
            ..
        })
    ));
    let pending = a
        .engine
        .membership_requests(&group.id)
        .await
        .expect("requests");
    assert_eq!(pending.len(), 1);
    let results = a
        .engine
        .answer_membership_requests(&group.id, true, None)
        .await
        .expect("approve");
    assert_eq!(
        results.iter().map(|r| r.status).collect::<Vec<_>>(),
        vec![200]
    );
    let info = a.engine.group_info(&group.id).await.expect("info");
    assert_eq!(info.participants.len(), 2);
}

#[tokio::test(start_paused = true)]
async fn a_join_event_for_a_member_keeps_its_role() {
    let net = net();
    let a = linked(&net, "a", A).await;
    let new = NewGroup {
        subject: "g".into(),
        participants: vec![],
    };
    let group = a.engine.create_group(new).await.expect("create");
    net.group_event("a", &group.id, GroupAction::Join, &[jid(A), jid(C)], None)
        .expect("event");
    let info = a.engine.group_info(&group.id).await.expect("info");
    let creator = info.participants.iter().find(|p| p.id == jid(A));
    assert!(creator.is_some_and(|p| p.is_super_admin), "{info:?}");
    let joined = info.participants.iter().find(|p| p.id == jid(C));
    assert!(joined.is_some_and(|p| !p.is_admin), "{info:?}");
}

/// Two sim networks (two processes' worth) joined through a real Redis (127.0.0.1:6379 or
/// `WAGATE_TEST_REDIS_URL`, own key prefix): traffic, acks, reactions, who exists and the device view cross.
#[tokio::test]
async fn networks_joined_through_redis_act_as_one() {
    let url =
        std::env::var("WAGATE_TEST_REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379".into());
    let pool = deadpool_redis::Config::from_url(url.as_str())
        .create_pool(Some(deadpool_redis::Runtime::Tokio1))
        .expect("redis pool");
    let prefix = format!("wagate-test:{}:", uuid::Uuid::new_v4().simple());
    let joined = |node: &str| {
        let net = SimNetwork::new(SimConfig {
            link_delay: Duration::from_millis(10),
            ack_delay: Duration::from_millis(10),
            id_prefix: format!("3EB0{}", node.to_uppercase()),
            ..SimConfig::default()
        });
        let peers = peers_redis::RedisPeers::new(pool.clone(), &url, node.into(), prefix.clone())
            .expect("peers");
        peers::attach(&net, Arc::new(peers));
        net
    };
    let (n1, n2) = (joined("n1"), joined("n2"));
    // In a cluster a session online on a node holds its lease there; only the holder drains its inbox.
    hold_leases(&pool, &prefix, &[("a", "n1"), ("b", "n2")]).await;
    let mut a = linked(&n1, "a", A).await;
    let mut b = linked(&n2, "b", B).await;
    // The wake listeners subscribe in the background; give them a moment before the first send.
    tokio::time::sleep(Duration::from_millis(300)).await;

    let sent = a.engine.send(text(B, "across")).await.expect("send");
    let got = b.message().await;
    assert_eq!(
        (got.id.as_str(), got.body.as_str()),
        (sent.id.as_str(), "across")
    );
    assert_eq!((got.from, got.from_me), (jid(A), false));
    let acks = [a.ack().await, a.ack().await, a.ack().await];
    assert_eq!(
        acks,
        [AckStatus::Sent, AckStatus::Delivered, AckStatus::Read]
    );

    b.engine
        .react(&jid(A), &sent.id, "👍")
        .await
        .expect("react");
    match a.next().await {
        EngineEvent::Reaction {
            message_id,
            reaction,
            sender_id,
            ..
        } => {
            assert_eq!(
                (message_id, reaction, sender_id),
                (sent.id.clone(), "👍".into(), jid(B))
            );
        }
        other => panic!("expected the reaction, got {other:?}"),
    }
    let check = b.engine.check_number("491111111111").await.expect("check");
    assert!(check.exists, "a's phone exists for b's network");
    let nobody = b.engine.check_number("499999999999").await.expect("check");
    assert!(!nobody.exists);
    let contacts = b.engine.list_contacts().await.expect("contacts");
    assert!(contacts.iter().any(|c| c.id == jid(A)), "{contacts:?}");

    let view = n2
        .connected_devices(Some(&jid(A)), "n2")
        .await
        .expect("view");
    assert_eq!(view.len(), 1, "{view:?}");
    assert_eq!(
        (view[0].session_id.as_str(), view[0].node_id.as_str()),
        ("a", "n1")
    );
    b.engine.kill().await.expect("kill");
    let gone = n1
        .connected_devices(Some(&jid(B)), "n1")
        .await
        .expect("view");
    assert!(
        gone.is_empty(),
        "a killed engine leaves the view at once: {gone:?}"
    );
}

/// Writes lease keys as `cluster/lease_redis.rs` does (`{nodeId}:{generation}`), for the inbox fence.
pub(super) async fn hold_leases(pool: &deadpool_redis::Pool, prefix: &str, held: &[(&str, &str)]) {
    let mut conn = pool.get().await.expect("redis");
    for (session, node) in held {
        deadpool_redis::redis::cmd("SET")
            .arg(format!("{prefix}lease:{session}"))
            .arg(format!("{node}:1"))
            .query_async::<()>(&mut *conn)
            .await
            .expect("lease key");
    }
}

/// The inbox fence (`peers_redis.rs`): only the node named in a session's lease takes its inbox, so a stalled
/// owner that resumed after its lease lapsed (or passed to another node) leaves the traffic to its successor.
#[tokio::test]
async fn only_the_lease_holder_takes_a_sessions_inbox() {
    let url =
        std::env::var("WAGATE_TEST_REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379".into());
    let pool = deadpool_redis::Config::from_url(url.as_str())
        .create_pool(Some(deadpool_redis::Runtime::Tokio1))
        .expect("redis pool");
    let prefix = format!("wagate-test:{}:", uuid::Uuid::new_v4().simple());
    let peers = |node: &str| {
        peers_redis::RedisPeers::new(pool.clone(), &url, node.into(), prefix.clone())
            .expect("peers")
    };
    let (stale, successor) = (peers("n1"), peers("n2"));
    let online = peers::Op::Online {
        session: "b".into(),
        phone: jid(B),
    };
    let ack = peers::Traffic::Ack {
        message_id: "m1".into(),
        chat_id: jid(A),
        status: AckStatus::Read,
    };
    let to_b = peers::Op::ToPhone {
        phone: jid(B),
        traffic: Box::new(ack),
        skip: Vec::new(),
    };
    use peers::Peers as _;
    stale.apply(&[online, to_b]).await.expect("apply");

    assert!(
        stale.take_inbox("b", false).await.expect("take").is_none(),
        "a lapsed lease: nobody takes"
    );
    hold_leases(&pool, &prefix, &[("b", "n2")]).await;
    assert!(
        stale.take_inbox("b", false).await.expect("take").is_none(),
        "the lease is another node's: the stale owner takes nothing"
    );
    let taken = successor
        .take_inbox("b", false)
        .await
        .expect("take")
        .expect("the holder takes");
    assert!(
        matches!(taken.fresh.as_slice(), [(_, peers::Traffic::Ack { message_id, .. })] if message_id == "m1"),
        "{taken:?}"
    );
    let again = successor.take_inbox("b", false).await.expect("take");
    assert!(
        again.is_some_and(|t| t.fresh.is_empty() && t.held.is_empty()),
        "taken once"
    );
    // Taken is not forgotten: it is held until acknowledged, and a connection gets it again.
    let reconnect = successor
        .take_inbox("b", true)
        .await
        .expect("take")
        .expect("the holder takes");
    assert_eq!(reconnect.held.len(), 1, "{reconnect:?}");
}
