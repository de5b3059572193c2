//! The sim network keeps traffic for a linked device until the device acknowledges it (`held.rs`): a refusal
//! is handed over again, a reconnect gets what was never acknowledged, an embedded network restarted on its
//! journal holds it again, and in a cluster (real Redis) a session that connects on another node after its
//! node died gets what that node was handed and never acknowledged, and any node accepts inbound traffic
//! for a linked session that no node serves right now.

use super::control::InboundSpec;
use super::held::Journal;
use super::network::SimConfig;
use super::tests::{A, B, Handset, handset, hold_leases, jid, linked};
use super::*;
use std::time::Duration;

fn spec(body: &str) -> InboundSpec {
    InboundSpec {
        from: jid(A),
        chat_id: None,
        kind: MessageType::Text,
        body: Some(body.into()),
        media: None,
        quoted_id: None,
        mentioned_ids: Vec::new(),
    }
}

/// The next message event with its acknowledgement still owed (other events are acknowledged and skipped).
async fn next_message(h: &mut Handset) -> (InboundMessage, Ack) {
    loop {
        let incoming = h.next_unacked().await;
        match incoming.event {
            EngineEvent::Message(msg) => return (*msg, incoming.ack),
            _ => incoming.ack.complete(),
        }
    }
}

/// A handset for `session` started with `account`'s stored credentials, through `Authenticated` + `Ready`.
async fn reconnected(net: &SimNetwork, session: &str, account: &LinkedAccount) -> Handset {
    let mut h = handset(net, session, Some(account.clone()));
    h.engine.start().await.expect("start");
    h.expect_linked().await;
    h
}

#[tokio::test(start_paused = true)]
async fn refused_traffic_is_handed_over_again_until_acknowledged() {
    let net = SimNetwork::new(SimConfig::default());
    let mut b = linked(&net, "b", B).await;
    let id = net.inbound("b", spec("one")).expect("inbound");
    let (first, ack) = next_message(&mut b).await;
    assert_eq!(first.id, id);
    assert!(ack.is_owed(), "network traffic is owed an acknowledgement");
    drop(ack);
    let (again, ack) = next_message(&mut b).await;
    assert_eq!(
        (again.id.as_str(), again.body.as_str()),
        (id.as_str(), "one")
    );
    ack.complete();
    let quiet = tokio::time::timeout(Duration::from_secs(30), b.rx.recv()).await;
    assert!(
        quiet.is_err(),
        "acknowledged traffic is not handed over again: {quiet:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn traffic_never_acknowledged_comes_back_when_the_device_reconnects() {
    let net = SimNetwork::new(SimConfig::default());
    let mut b = linked(&net, "b", B).await;
    let account = b.account.clone().expect("credentials");
    let id = net.inbound("b", spec("in flight")).expect("inbound");
    let (_, ack) = next_message(&mut b).await;
    // The supervisor dies with the event uncommitted: the engine goes, the acknowledgement never comes.
    b.engine.kill().await.expect("kill");
    drop(b);
    drop(ack);
    let offline = net.inbound("b", spec("while offline")).expect("inbound");
    let mut b = reconnected(&net, "b", &account).await;
    let (first, ack1) = next_message(&mut b).await;
    let (second, ack2) = next_message(&mut b).await;
    assert_eq!(
        (first.id, second.id),
        (id, offline),
        "redelivered in arrival order"
    );
    ack1.complete();
    ack2.complete();
}

#[tokio::test(start_paused = true)]
async fn a_network_restarted_on_its_journal_hands_over_what_was_never_acknowledged() {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = SimConfig {
        journal_dir: Some(dir.path().to_path_buf()),
        ..SimConfig::default()
    };
    let net = SimNetwork::new(config.clone());
    let mut b = linked(&net, "b", B).await;
    let account = b.account.clone().expect("credentials");
    let acked = net.inbound("b", spec("committed")).expect("inbound");
    let (msg, ack) = next_message(&mut b).await;
    assert_eq!(msg.id, acked);
    ack.complete();
    let lost = net
        .inbound("b", spec("in flight at the crash"))
        .expect("inbound");
    let (msg, ack) = next_message(&mut b).await;
    assert_eq!(msg.id, lost);
    // kill -9: no answer ever comes, and the process's memory is gone.
    ack.disarm();
    drop(b);
    drop(net);

    let net = SimNetwork::new(config);
    let mut b = reconnected(&net, "b", &account).await;
    let (msg, ack) = next_message(&mut b).await;
    assert_eq!(
        (msg.id.as_str(), msg.body.as_str()),
        (lost.as_str(), "in flight at the crash"),
        "only what was never acknowledged comes back"
    );
    ack.complete();
    drop(b);
    drop(net);
    let (_, replayed) = Journal::open(dir.path()).expect("journal");
    assert!(
        replayed.is_empty(),
        "acknowledged traffic is forgotten: {replayed:?}"
    );
}

mod cluster {
    use super::*;
    use crate::peers::Peers as _;
    use crate::peers_redis::RedisPeers;

    struct Redis {
        pool: deadpool_redis::Pool,
        url: String,
        prefix: String,
    }

    fn redis() -> Redis {
        let url = std::env::var("WAGATE_TEST_REDIS_URL")
            .unwrap_or_else(|_| "redis://127.0.0.1:6379".into());
        let pool = deadpool_redis::Config::from_url(url.as_str())
            .create_pool(Some(deadpool_redis::Runtime::Tokio1))
            .expect("redis pool");
        let prefix = format!("wagate-test:{}:", uuid::Uuid::new_v4().simple());
        Redis { pool, url, prefix }
    }

    impl Redis {
        fn joined(&self, node: &str) -> (SimNetwork, Arc<RedisPeers>) {
            let net = SimNetwork::new(SimConfig {
                link_delay: Duration::from_millis(10),
                ack_delay: Duration::from_millis(10),
                id_prefix: format!("3EB0{}", node.to_uppercase()),
                ..SimConfig::default()
            });
            let peers = Arc::new(
                RedisPeers::new(
                    self.pool.clone(),
                    &self.url,
                    node.into(),
                    self.prefix.clone(),
                )
                .expect("peers"),
            );
            peers::attach(&net, peers.clone());
            (net, peers)
        }
    }

    async fn held_count(peers: &RedisPeers, session: &str) -> usize {
        // A connection's take (`redeliver`) reads what is held without changing it.
        let taken = peers.take_inbox(session, true).await.expect("take");
        taken.map_or(0, |t| t.held.len() + t.fresh.len())
    }

    #[tokio::test]
    async fn traffic_a_dead_node_never_acknowledged_is_redelivered_where_the_session_connects_next()
    {
        let r = redis();
        let (n1, _) = r.joined("n1");
        let (n2, p2) = r.joined("n2");
        tokio::time::sleep(Duration::from_millis(300)).await;
        hold_leases(&r.pool, &r.prefix, &[("b", "n1")]).await;
        let mut b = linked(&n1, "b", B).await;
        let account = b.account.clone().expect("credentials");
        let acked = n1
            .inbound_anywhere("b", spec("committed"))
            .await
            .expect("inbound");
        let (msg, ack) = next_message(&mut b).await;
        assert_eq!(msg.id, acked);
        ack.complete();
        let lost = n1
            .inbound_anywhere("b", spec("in flight"))
            .await
            .expect("inbound");
        let (msg, ack) = next_message(&mut b).await;
        assert_eq!(msg.id, lost);
        // n1 dies (kill -9): no acknowledgement, nothing more from it.
        ack.disarm();
        n1.flush_peers().await;
        drop(b);

        // The lease lapses and n2 takes the session over from its stored credentials.
        hold_leases(&r.pool, &r.prefix, &[("b", "n2")]).await;
        let mut b = reconnected(&n2, "b", &account).await;
        let (msg, ack) = next_message(&mut b).await;
        assert_eq!(
            (msg.id.as_str(), msg.body.as_str()),
            (lost.as_str(), "in flight"),
            "only the unacknowledged message comes back"
        );
        ack.complete();
        n2.flush_peers().await;
        assert_eq!(held_count(&p2, "b").await, 0, "acknowledged: nothing held");
    }

    #[tokio::test]
    async fn any_node_accepts_inbound_traffic_for_a_session_no_node_serves() {
        let r = redis();
        let (n1, _) = r.joined("n1");
        let (n2, _) = r.joined("n2");
        tokio::time::sleep(Duration::from_millis(300)).await;
        hold_leases(&r.pool, &r.prefix, &[("b", "n1")]).await;
        let b = linked(&n1, "b", B).await;
        let account = b.account.clone().expect("credentials");
        b.engine.kill().await.expect("kill");
        drop(b);

        // No node serves b now; n2 never saw it, yet takes its traffic as the network would.
        let id = n2
            .inbound_anywhere("b", spec("held by the network"))
            .await
            .expect("a linked session's traffic is accepted");
        let unknown = n2.inbound_anywhere("nobody", spec("x")).await;
        assert!(
            matches!(unknown, Err(EngineError::NotFound(_))),
            "{unknown:?}"
        );

        hold_leases(&r.pool, &r.prefix, &[("b", "n2")]).await;
        let mut b = reconnected(&n2, "b", &account).await;
        let (msg, ack) = next_message(&mut b).await;
        assert_eq!(
            (msg.id.as_str(), msg.body.as_str()),
            (id.as_str(), "held by the network")
        );
        ack.complete();
    }
}
