//! Chat reads and clears: a read naming messages reads only those, and a read or clear of a chat the
//! account never had is 404 instead of adding an empty chat to the list; a message deleted for everyone
//! is no chat's last message, and an edited one shows its edit.

use super::control::InboundSpec;
use super::network::SimConfig;
use super::tests::{jid, linked};
use super::*;

const STRANGER: &str = "495555555555@c.us";

fn from_stranger(body: &str) -> InboundSpec {
    InboundSpec {
        from: jid(STRANGER),
        chat_id: None,
        kind: MessageType::Text,
        body: Some(body.into()),
        media: None,
        quoted_id: None,
        mentioned_ids: Vec::new(),
    }
}

async fn unread(engine: &Arc<dyn Engine>, chat: &Jid) -> Option<u32> {
    let chats = engine.list_chats().await.expect("chats");
    chats.iter().find(|c| c.id == *chat).map(|c| c.unread_count)
}

#[tokio::test(start_paused = true)]
async fn a_read_naming_messages_reads_only_those() {
    let net = SimNetwork::new(SimConfig::default());
    let a = linked(&net, "a", super::tests::A).await;
    let chat = jid(STRANGER);
    let ids: Vec<String> = ["one", "two", "three"]
        .into_iter()
        .map(|b| net.inbound("a", from_stranger(b)).expect("inbound"))
        .collect();
    assert_eq!(unread(&a.engine, &chat).await, Some(3));

    let first = std::slice::from_ref(&ids[0]);
    a.engine.mark_read(&chat, first).await.expect("read one");
    assert_eq!(unread(&a.engine, &chat).await, Some(2));
    // Reading it again changes nothing: it is no longer unread.
    a.engine.mark_read(&chat, first).await.expect("read again");
    assert_eq!(unread(&a.engine, &chat).await, Some(2));

    a.engine.mark_read(&chat, &[]).await.expect("read all");
    assert_eq!(unread(&a.engine, &chat).await, Some(0));
}

#[tokio::test(start_paused = true)]
async fn reading_or_clearing_an_unknown_chat_is_404_and_lists_nothing() {
    let net = SimNetwork::new(SimConfig::default());
    let a = linked(&net, "a", super::tests::A).await;
    let ghost = jid("497777777777@c.us");
    for result in [
        a.engine.mark_read(&ghost, &[]).await,
        a.engine.clear_chat(&ghost).await,
    ] {
        match result {
            Err(EngineError::NotFound(msg)) => {
                assert_eq!(msg, "Chat 497777777777@c.us not found")
            }
            other => panic!("expected NotFound, got {other:?}"),
        }
    }
    assert_eq!(unread(&a.engine, &ghost).await, None);

    let chat = jid(STRANGER);
    net.inbound("a", from_stranger("hi")).expect("inbound");
    a.engine
        .clear_chat(&chat)
        .await
        .expect("clear a known chat");
    assert_eq!(unread(&a.engine, &chat).await, Some(0));
}

async fn last_message(engine: &Arc<dyn Engine>, chat: &Jid) -> Option<String> {
    let chats = engine.list_chats().await.expect("chats");
    chats
        .into_iter()
        .find(|c| c.id == *chat)
        .and_then(|c| c.last_message)
}

/// Sessions a and b linked on `net`, and a's text `body` delivered to b: both handsets and the message id.
async fn a_text_to_b(
    net: &SimNetwork,
    body: &str,
) -> (super::tests::Handset, super::tests::Handset, String) {
    let a = linked(net, "a", super::tests::A).await;
    let mut b = linked(net, "b", super::tests::B).await;
    let sent = a
        .engine
        .send(super::tests::text(super::tests::B, body))
        .await
        .expect("send");
    b.message().await;
    (a, b, sent.id)
}

/// A message deleted for everyone, by us or by the other side, is no chat's last message any more (on
/// either side); the chat stays, and the next message is its last one again.
#[tokio::test(start_paused = true)]
async fn a_revoked_last_message_leaves_the_chat_list() {
    let net = SimNetwork::new(SimConfig::default());
    let (a, b, sent) = a_text_to_b(&net, "secret").await;
    let (chat_b, chat_a) = (jid(super::tests::B), jid(super::tests::A));
    assert_eq!(
        last_message(&b.engine, &chat_a).await.as_deref(),
        Some("secret")
    );
    a.engine.revoke(&chat_b, &sent, true).await.expect("revoke");
    assert_eq!(last_message(&a.engine, &chat_b).await, None);
    assert_eq!(last_message(&b.engine, &chat_a).await, None);

    let stranger = jid(STRANGER);
    let id = net.inbound("a", from_stranger("psst")).expect("inbound");
    assert_eq!(
        last_message(&a.engine, &stranger).await.as_deref(),
        Some("psst")
    );
    net.revoke("a", &id).expect("peer revoke");
    assert_eq!(last_message(&a.engine, &stranger).await, None);
    assert_eq!(
        unread(&a.engine, &stranger).await,
        Some(1),
        "the chat stays"
    );
    net.inbound("a", from_stranger("again")).expect("inbound");
    assert_eq!(
        last_message(&a.engine, &stranger).await.as_deref(),
        Some("again")
    );
}

/// An edit, ours or the other side's, is what the chat list shows as the chat's last message (on both
/// sides of our edit); a cleared chat still shows none.
#[tokio::test(start_paused = true)]
async fn an_edited_last_message_shows_its_edit() {
    let net = SimNetwork::new(SimConfig::default());
    let (a, b, sent) = a_text_to_b(&net, "frist").await;
    let (chat_b, chat_a) = (jid(super::tests::B), jid(super::tests::A));
    a.engine.edit(&chat_b, &sent, "first").await.expect("edit");
    for (engine, chat) in [(&a.engine, &chat_b), (&b.engine, &chat_a)] {
        assert_eq!(last_message(engine, chat).await.as_deref(), Some("first"));
    }

    let stranger = jid(STRANGER);
    let id = net.inbound("a", from_stranger("helo")).expect("inbound");
    net.edit("a", &id, "hello").expect("peer edit");
    assert_eq!(
        last_message(&a.engine, &stranger).await.as_deref(),
        Some("hello")
    );
    a.engine.clear_chat(&stranger).await.expect("clear");
    assert_eq!(last_message(&a.engine, &stranger).await, None);
}
