//! The sim network across processes: networks joined through a real Redis (127.0.0.1:6379 or
//! `WAGATE_TEST_REDIS_URL`, own key prefix each). What follows a session moved to another node (a ringing
//! call, chats, labels, stars, saved names, profile, unread messages), presence subscriptions ending with the
//! subscriber's connection, the lease fence on traffic a node hands to its own devices, and who exists once
//! a session is gone. Plus the embedded network's subscriptions. Real time (Redis), so every wait polls with a generous deadline.

use super::network::SimConfig;
use super::peers::{Peers as _, Traffic};
use super::peers_redis::{Fence, RedisPeers};
use super::tests::{A, B, C, Handset, handset, hold_leases, jid, linked, text};
use super::*;
use std::collections::HashSet;
use std::time::Duration;

struct Redis {
    pool: deadpool_redis::Pool,
    url: String,
    prefix: String,
}

fn redis() -> Redis {
    let url =
        std::env::var("WAGATE_TEST_REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379".into());
    let pool = deadpool_redis::Config::from_url(url.as_str())
        .create_pool(Some(deadpool_redis::Runtime::Tokio1))
        .expect("redis pool");
    let prefix = format!("wagate-test:{}:", uuid::Uuid::new_v4().simple());
    Redis { pool, url, prefix }
}

impl Redis {
    fn peers(&self, node: &str) -> RedisPeers {
        RedisPeers::new(
            self.pool.clone(),
            &self.url,
            node.into(),
            self.prefix.clone(),
        )
        .expect("peers")
    }

    /// A network of its own (one process's worth) joined to the others through this Redis.
    fn joined(&self, node: &str, fence: Option<Fence>) -> SimNetwork {
        self.joined_linking_in(node, fence, Duration::from_millis(10))
    }

    /// [`Redis::joined`] with a link that completes `link_delay` after the scan.
    fn joined_linking_in(
        &self,
        node: &str,
        fence: Option<Fence>,
        link_delay: Duration,
    ) -> SimNetwork {
        let net = SimNetwork::new(SimConfig {
            link_delay,
            ack_delay: Duration::from_millis(10),
            id_prefix: format!("3EB0{}", node.to_uppercase()),
            ..SimConfig::default()
        });
        let peers = match fence {
            Some(fence) => self.peers(node).with_fence(fence),
            None => self.peers(node),
        };
        peers::attach(&net, Arc::new(peers));
        net
    }

    async fn members(&self, key: &str) -> Vec<String> {
        let mut conn = self.pool.get().await.expect("redis");
        deadpool_redis::redis::cmd("SMEMBERS")
            .arg(format!("{}sim:{key}", self.prefix))
            .query_async(&mut *conn)
            .await
            .expect("SMEMBERS")
    }
}

/// The first event `pred` accepts (others are skipped).
async fn until(h: &mut Handset, pred: impl Fn(&EngineEvent) -> bool) -> EngineEvent {
    loop {
        let event = h.next().await;
        if pred(&event) {
            return event;
        }
    }
}

fn is_call(event: &EngineEvent, phase: CallPhase) -> bool {
    matches!(event, EngineEvent::Call(call) if call.phase == phase)
}

/// Lets the wake listeners subscribe before the first cross-node traffic (they start in the background).
async fn listeners_up() {
    tokio::time::sleep(Duration::from_millis(300)).await;
}

#[tokio::test]
async fn a_session_moved_to_another_node_finds_its_call_account_and_read_state() {
    let r = redis();
    let (n1, n2) = (r.joined("n1", None), r.joined("n2", None));
    hold_leases(&r.pool, &r.prefix, &[("a", "n1"), ("b", "n1")]).await;
    let mut a = linked(&n1, "a", A).await;
    let mut b = linked(&n1, "b", B).await;
    listeners_up().await;
    let sent = a.engine.send(text(B, "read me later")).await.expect("send");
    assert_eq!(b.message().await.id, sent.id);
    for _ in 0..3 {
        a.ack().await;
    }

    let chat = jid(A);
    let engine = &b.engine;
    engine.archive_chat(&chat, true).await.expect("archive");
    let upsert = LabelUpsert {
        id: None,
        name: Some("VIP".into()),
        color: Some(3),
    };
    let label = engine.upsert_label(upsert).await.expect("label");
    engine.add_chat_label(&chat, &label.id).await.expect("tag");
    engine.star(&chat, &sent.id, true).await.expect("star");
    engine
        .save_contact(&chat, "Anna", None)
        .await
        .expect("save");
    engine.set_profile_name("Bea").await.expect("name");
    let call = n1.call("b", &chat, false, None).expect("call");
    n1.flush_peers().await;
    until(&mut b, |e| is_call(e, CallPhase::Received)).await;

    // b moves: stopped on n1, its lease passes to n2, started there from its stored credentials.
    b.engine.stop().await.expect("stop");
    hold_leases(&r.pool, &r.prefix, &[("b", "n2")]).await;
    let mut moved = handset(&n2, "b", b.account.clone());
    moved.engine.start().await.expect("start on n2");
    moved.expect_linked().await;

    let chats = moved.engine.list_chats().await.expect("chats");
    let summary = chats.iter().find(|c| c.id == chat).expect("the chat moved");
    assert_eq!((summary.archived, summary.unread_count), (true, 1));
    {
        let state = n2.lock();
        let account = state.accounts.get(&jid(B)).expect("b's account");
        assert_eq!(
            account.labels.get(&label.id).map(|l| l.name.as_str()),
            Some("VIP")
        );
        assert!(
            account
                .chat_labels
                .get(&chat)
                .is_some_and(|t| t.contains(&label.id))
        );
        assert!(account.starred.contains(&sent.id));
        assert_eq!(
            account.saved_names.get(&chat).map(String::as_str),
            Some("Anna")
        );
        assert_eq!(account.push_name.as_deref(), Some("Bea"));
    }
    match moved.engine.get_contact(&chat).await.expect("contact").name {
        Some(name) => assert_eq!(name, "Anna"),
        None => panic!("the saved name did not move"),
    }

    moved.engine.reject_call(&call).await.expect("reject on n2");
    let rejected = until(&mut a, |e| is_call(e, CallPhase::Rejected)).await;
    assert!(
        matches!(&rejected, EngineEvent::Call(c) if c.call_id == call && c.from == jid(B)),
        "{rejected:?}"
    );

    moved
        .engine
        .mark_read(&chat, &[])
        .await
        .expect("read on n2");
    let receipt = until(&mut a, |e| matches!(e, EngineEvent::Ack { .. })).await;
    assert_eq!(
        receipt,
        EngineEvent::Ack {
            message_id: sent.id.clone(),
            chat_id: jid(B),
            status: AckStatus::Read,
        }
    );
    let chats = moved.engine.list_chats().await.expect("chats");
    let summary = chats.iter().find(|c| c.id == chat).expect("chat");
    assert_eq!(summary.unread_count, 0);
}

#[tokio::test]
async fn traffic_sent_while_a_link_completes_waits_for_the_session() {
    let r = redis();
    let n1 = r.joined("n1", None);
    let n2 = r.joined_linking_in("n2", None, Duration::from_millis(800));
    hold_leases(&r.pool, &r.prefix, &[("a", "n1"), ("b", "n2")]).await;
    let a = linked(&n1, "a", A).await;
    listeners_up().await;
    let mut b = handset(&n2, "b", None);
    b.engine.start().await.expect("start");
    assert!(matches!(b.next().await, EngineEvent::Qr { .. }));
    n2.scan("b", &jid(B), None).expect("scan");
    // What the scan route does before it answers: the phone's traffic is routed to b from here on.
    n2.flush_peers().await;
    assert_eq!(b.next().await, EngineEvent::Authenticating);
    let mut conn = r.pool.get().await.expect("redis");
    let linked_sessions: Vec<String> = deadpool_redis::redis::cmd("HKEYS")
        .arg(format!("{}sim:linked:{}", r.prefix, jid(B)))
        .query_async(&mut *conn)
        .await
        .expect("HKEYS");
    assert_eq!(linked_sessions, vec!["b".to_string()]);

    // Sent before b is ready: it waits in b's inbox and arrives once the link completes.
    let sent = a.engine.send(text(B, "early")).await.expect("send");
    n1.flush_peers().await;
    b.expect_linked().await;
    let got = b.message().await;
    assert_eq!((got.id, got.body), (sent.id, "early".to_string()));
}

#[tokio::test]
async fn a_node_past_a_sessions_lease_hands_its_traffic_to_the_inbox() {
    let r = redis();
    let lapsed = Arc::new(parking_lot::Mutex::new(HashSet::<String>::new()));
    let fence: Fence = {
        let lapsed = lapsed.clone();
        Box::new(move |session| !lapsed.lock().contains(session))
    };
    let n1 = r.joined("n1", Some(fence));
    hold_leases(&r.pool, &r.prefix, &[("a", "n1"), ("b", "n1")]).await;
    let mut a = linked(&n1, "a", A).await;
    let mut b = linked(&n1, "b", B).await;
    listeners_up().await;
    a.engine.send(text(B, "direct")).await.expect("send");
    assert_eq!(b.message().await.body, "direct");

    // b's lease lapses on n1 (stalled) and passes to n2; b's device here still looks online.
    lapsed.lock().insert("b".into());
    hold_leases(&r.pool, &r.prefix, &[("b", "n2")]).await;
    let sent = a.engine.send(text(B, "fenced")).await.expect("send");
    n1.flush_peers().await;
    assert!(
        b.rx.try_recv().is_err(),
        "a local delivery happens during the send; none reached the stale device"
    );
    let taken = r
        .peers("n2")
        .take_inbox("b", false)
        .await
        .expect("take")
        .expect("the successor takes b's inbox");
    assert!(
        matches!(taken.fresh.as_slice(), [(_, Traffic::Message { msg })] if msg.id == sent.id && msg.body == "fenced"),
        "{taken:?}"
    );
    // a still holds its own lease: its acks arrive here.
    assert_eq!(a.ack().await, AckStatus::Sent);
}

#[tokio::test]
async fn presence_subscriptions_end_with_the_subscribers_connection_across_nodes() {
    let r = redis();
    let n1 = r.joined("n1", None);
    hold_leases(&r.pool, &r.prefix, &[("a", "n1"), ("b", "n1")]).await;
    let _a = linked(&n1, "a", A).await;
    let b = linked(&n1, "b", B).await;
    b.engine
        .subscribe_presence(&jid(A))
        .await
        .expect("subscribe");
    assert_eq!(
        r.members(&format!("presubs:{A}")).await,
        vec!["b".to_string()]
    );
    assert_eq!(r.members("subs:b").await, vec![A.to_string()]);
    b.engine.stop().await.expect("stop");
    assert!(r.members(&format!("presubs:{A}")).await.is_empty());
    assert!(r.members("subs:b").await.is_empty());
    let subscribers = n1.lock().accounts[&jid(A)].presence_subscribers.len();
    assert_eq!(subscribers, 0);
}

#[tokio::test(start_paused = true)]
async fn embedded_presence_subscriptions_end_when_the_subscriber_stops_or_logs_out() {
    let net = SimNetwork::new(SimConfig::default());
    let _a = linked(&net, "a", A).await;
    let b = linked(&net, "b", B).await;
    let subscribers = |net: &SimNetwork| net.lock().accounts[&jid(A)].presence_subscribers.clone();
    b.engine
        .subscribe_presence(&jid(A))
        .await
        .expect("subscribe");
    assert!(subscribers(&net).contains("b"));
    b.engine.stop().await.expect("stop");
    assert!(subscribers(&net).is_empty());

    let mut again = handset(&net, "b", None);
    again.engine.start().await.expect("start");
    again.expect_linked().await;
    again
        .engine
        .subscribe_presence(&jid(A))
        .await
        .expect("subscribe");
    assert!(subscribers(&net).contains("b"));
    again.engine.logout().await.expect("logout");
    assert!(subscribers(&net).is_empty());
}

#[tokio::test]
async fn a_phone_unlink_through_another_node_revokes_a_stopped_session_everywhere() {
    let r = redis();
    let (n1, n2) = (r.joined("n1", None), r.joined("n2", None));
    hold_leases(&r.pool, &r.prefix, &[("a", "n1")]).await;
    let a = linked(&n1, "a", A).await;
    let account = a.account.clone();
    a.engine.stop().await.expect("stop");

    // n2 never ran "a": the phone still knows the session, so the unlink is accepted there.
    n2.unlink_anywhere("a").await.expect("unlink through n2");
    match n2.unlink_anywhere("a").await {
        Err(EngineError::NotFound(_)) => {}
        other => panic!("a second unlink finds nothing linked: {other:?}"),
    }
    match n2.unlink_anywhere("never").await {
        Err(EngineError::NotFound(_)) => {}
        other => panic!("expected NotFound, got {other:?}"),
    }

    // Either node answers the revoked credentials as logged out, and n1 forgot its stale link.
    for net in [&n2, &n1] {
        let mut h = handset(net, "a", account.clone());
        h.engine.start().await.expect("start");
        assert!(
            matches!(h.next().await, EngineEvent::LoggedOut { .. }),
            "logged out"
        );
        h.engine.stop().await.expect("stop");
    }
    assert!(n1.lock().devices.get("a").is_none_or(|d| d.phone.is_none()));
}

/// Who exists, cluster-wide (wire-notes §10): a phone while a session is linked to it, an `/inbound` sender
/// for good. A session deleted on its node (stopped, then its link forgotten) or unlinked by the phone
/// through another node takes its phone off the directory, also for a node that remembers the phone from
/// its traffic.
#[tokio::test]
async fn a_phone_whose_session_is_gone_exists_on_no_node() {
    let r = redis();
    let (n1, n2) = (r.joined("n1", None), r.joined("n2", None));
    hold_leases(&r.pool, &r.prefix, &[("a", "n1"), ("b", "n2"), ("c", "n1")]).await;
    let a = linked(&n1, "a", A).await;
    let mut b = linked(&n2, "b", B).await;
    let _c = linked(&n1, "c", C).await;
    listeners_up().await;
    a.engine.send(text(B, "remember me")).await.expect("send");
    b.message().await;
    let spec = control::InboundSpec {
        from: jid("495555555555@c.us"),
        chat_id: None,
        kind: MessageType::Text,
        body: Some("hi".into()),
        media: None,
        quoted_id: None,
        mentioned_ids: Vec::new(),
    };
    n1.inbound_anywhere("a", spec).await.expect("inbound");
    let exists = async |number: &str| b.engine.check_number(number).await.expect("check").exists;
    for number in ["491111111111", "493333333333", "495555555555"] {
        assert!(exists(number).await, "{number} exists");
    }

    a.engine.stop().await.expect("stop");
    n1.forget_link("a");
    n1.flush_peers().await;
    n2.unlink_anywhere("c").await.expect("unlink");
    assert!(!exists("491111111111").await, "a deleted session's phone");
    assert!(!exists("493333333333").await, "an unlinked session's phone");
    assert!(exists("495555555555").await, "an /inbound sender stays");
}
