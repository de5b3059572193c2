//! The sim control API's contract (wire-notes §10) where it refuses or restricts: `/inbound` needs
//! `type` and `/call` needs `isVideo` (400 with the standard error body otherwise), and only linked phones
//! and `/inbound` senders exist on the network: a send to any other number does not make it exist.

mod messaging_support;

use messaging_support::*;
use serde_json::json;

#[tokio::test]
async fn inbound_without_type_and_call_without_is_video_are_400() {
    let p = pair(options()).await;
    let from = jid("4915100000077");
    for (route, body, message) in [
        (
            "inbound",
            json!({ "from": from, "body": "hi" }),
            "type is required",
        ),
        (
            "inbound",
            json!({ "from": from, "type": "", "body": "hi" }),
            "type is required",
        ),
        ("call", json!({ "from": from }), "isVideo is required"),
    ] {
        let reply = p
            .client
            .post(&format!("/api/sim/sessions/{}/{route}", p.a), body.clone())
            .await
            .unwrap();
        assert_eq!(reply.status, 400, "{route} {body}: {}", reply.text);
        assert_eq!(reply.body["statusCode"], 400, "{}", reply.text);
        assert_eq!(reply.body["error"], "Bad Request", "{}", reply.text);
        assert_eq!(reply.body["message"], message, "{}", reply.text);
    }
    // With them, both are accepted.
    for (route, body) in [
        (
            "inbound",
            json!({ "from": from, "type": "text", "body": "hi" }),
        ),
        ("call", json!({ "from": from, "isVideo": false })),
    ] {
        let reply = p
            .client
            .post(&format!("/api/sim/sessions/{}/{route}", p.a), body)
            .await
            .unwrap();
        assert_eq!(reply.status, 200, "{route}: {}", reply.text);
    }
}

#[tokio::test]
async fn a_send_to_an_unknown_number_does_not_put_it_on_the_network() {
    let p = pair(options()).await;
    let check = async |number: &str| {
        let reply = p
            .client
            .get(&format!("/api/sessions/{}/contacts/check/{number}", p.a))
            .await
            .unwrap();
        assert_eq!(reply.status, 200, "{}", reply.text);
        reply.body["exists"].clone()
    };
    let sent = p
        .post(
            "messages/send-text",
            json!({ "chatId": jid("4915100000099"), "text": "anyone there?" }),
        )
        .await;
    assert_eq!(sent.status, 201, "{}", sent.text);
    assert_eq!(check("4915100000099").await, json!(false));
    assert_eq!(check(PHONE_B).await, json!(true), "a linked phone exists");
}
