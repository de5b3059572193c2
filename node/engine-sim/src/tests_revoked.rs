//! A message deleted for everyone stays deleted: neither side can edit it or delete it again, and no
//! `Edited` or second `Revoked` event goes out for it (a consumer of the events would bring its text
//! back). Recalling a row the store kept as revoked is tested in `recall.rs`.

use super::control::InboundSpec;
use super::network::SimConfig;
use super::tests::{A, B, jid, linked, text};
use super::*;
use std::time::Duration;

const STRANGER: &str = "495555555555@c.us";

fn not_found(result: EngineResult<impl std::fmt::Debug>, id: &str) {
    match result {
        Err(EngineError::NotFound(msg)) => assert_eq!(msg, format!("Message {id} not found")),
        other => panic!("expected NotFound, got {other:?}"),
    }
}

#[tokio::test(start_paused = true)]
async fn the_other_side_cannot_edit_or_revoke_a_revoked_message() {
    let net = SimNetwork::new(SimConfig::default());
    let mut a = linked(&net, "a", A).await;
    let spec = InboundSpec {
        from: jid(STRANGER),
        chat_id: None,
        kind: MessageType::Text,
        body: Some("secret".into()),
        media: None,
        quoted_id: None,
        mentioned_ids: Vec::new(),
    };
    let id = net.inbound("a", spec).expect("inbound");
    a.message().await;
    net.edit("a", &id, "still live")
        .expect("edit before the revoke");
    assert!(matches!(a.next().await, EngineEvent::Edited { .. }));
    net.revoke("a", &id).expect("revoke");
    assert!(matches!(a.next().await, EngineEvent::Revoked { .. }));

    not_found(net.edit("a", &id, "back again"), &id);
    not_found(net.revoke("a", &id), &id);
    assert!(a.silent_for(Duration::from_secs(10)).await, "no event");
}

#[tokio::test(start_paused = true)]
async fn our_revoked_message_is_not_edited_or_revoked_again() {
    let net = SimNetwork::new(SimConfig::default());
    let a = linked(&net, "a", A).await;
    let mut b = linked(&net, "b", B).await;
    let chat_b = jid(B);
    let sent = a.engine.send(text(B, "secret")).await.expect("send");
    b.message().await;
    a.engine
        .revoke(&chat_b, &sent.id, true)
        .await
        .expect("revoke");
    assert!(matches!(b.next().await, EngineEvent::Revoked { .. }));

    // Our own edit is refused; a second delete for everyone has nothing left to do and announces nothing.
    not_found(a.engine.edit(&chat_b, &sent.id, "back").await, &sent.id);
    a.engine
        .revoke(&chat_b, &sent.id, true)
        .await
        .expect("a second revoke is a no-op");
    // Nor can the control API's side do either to it.
    not_found(net.edit("b", &sent.id, "back"), &sent.id);
    not_found(net.revoke("b", &sent.id), &sent.id);
    assert!(b.silent_for(Duration::from_secs(10)).await, "no event");
}
