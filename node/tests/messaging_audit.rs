//! Fixes from the black-box audit of the sim engine: message operations confined to the chat they name,
//! base64 voice notes sniffed, bulk items refused up front, exact mention tokens, edit rules, template
//! readiness, field caps from the reference, bulk variables and repeated deletes for everyone.

mod messaging_support;

use base64::Engine as _;
use messaging_support::*;
use serde_json::json;

fn b64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

#[tokio::test]
async fn an_operation_naming_another_chat_than_the_stored_message_answers_404() {
    let p = pair(options()).await;
    let to = jid(PHONE_B);
    let other = jid("4915100000003");
    let sent = p
        .post(
            "messages/send-image",
            json!({ "chatId": to, "base64": b64(b"PNG"), "mimetype": "image/png", "caption": "keep" }),
        )
        .await;
    assert_eq!(sent.status, 201, "{}", sent.text);
    let id = sent.str("messageId");
    let poll = p
        .post(
            "messages/send-poll",
            json!({ "chatId": to, "name": "q", "options": ["a", "b"] }),
        )
        .await;
    let poll_id = poll.str("messageId");
    let not_found = format!("Message {id} not found");
    for (route, body) in [
        (
            "messages/edit",
            json!({ "chatId": other, "messageId": id, "body": "changed" }),
        ),
        (
            "messages/react",
            json!({ "chatId": other, "messageId": id, "emoji": "👍" }),
        ),
        ("messages/pin", json!({ "chatId": other, "messageId": id })),
        (
            "messages/unpin",
            json!({ "chatId": other, "messageId": id }),
        ),
        (
            "messages/star",
            json!({ "chatId": other, "messageId": id, "star": true }),
        ),
        (
            "messages/delete",
            json!({ "chatId": other, "messageId": id }),
        ),
        (
            "messages/forward",
            json!({ "fromChatId": other, "toChatId": to, "messageId": id }),
        ),
    ] {
        let reply = p.post(route, body).await;
        assert_eq!(reply.status, 404, "{route}: {}", reply.text);
        assert_eq!(reply.str("message"), not_found, "{route}");
    }
    let vote = p
        .post(
            "messages/vote-poll",
            json!({ "chatId": other, "pollMessageId": poll_id, "options": ["a"] }),
        )
        .await;
    assert_eq!(vote.status, 404, "{}", vote.text);
    for read in ["reactions", "media"] {
        let reply = p
            .client
            .get(&format!(
                "/api/sessions/{}/messages/{other}/{id}/{read}",
                p.a
            ))
            .await
            .unwrap();
        assert_eq!(reply.status, 404, "{read}: {}", reply.text);
        assert_eq!(reply.str("message"), not_found, "{read}");
        let right = p
            .client
            .get(&format!("/api/sessions/{}/messages/{to}/{id}/{read}", p.a))
            .await
            .unwrap();
        assert_eq!(right.status, 200, "{read}: {}", right.text);
    }
    let rows = p
        .client
        .get(&format!("/api/sessions/{}/messages?type=image", p.a))
        .await
        .unwrap();
    assert_eq!(rows.body[0]["body"], "keep", "{}", rows.text);
    // The same id under @s.whatsapp.net names the same chat.
    let same = p
        .post(
            "messages/star",
            json!({ "chatId": format!("{PHONE_B}@s.whatsapp.net"), "messageId": id, "star": true }),
        )
        .await;
    assert_eq!(same.status, 200, "{}", same.text);
}
