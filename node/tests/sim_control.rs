//! The sim control API's contract (wire-notes §10) where it refuses or restricts: `/inbound` needs
//! `type` and `/call` needs `isVideo` (400 with the standard error body otherwise), and only linked phones
//! and `/inbound` senders exist on the network: a send to any other number does not make it exist. A
//! message deleted for everyone can no longer be edited or revoked through it (404, no event).

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

/// A message deleted for everyone (by the other side's `/revoke`, or by our own delete for everyone) is
/// gone for the control API too: `/edit` and a second `/revoke` are 404 with the standard error body, and
/// neither raises an event, so no webhook consumer gets its text back or a second `message.revoked`.
#[tokio::test]
async fn edits_and_revokes_of_a_revoked_message_are_404_without_events() {
    let p = pair(options()).await;
    let rx = wagate_loadtest::harness::Receiver::start().await.unwrap();
    let hook = p
        .client
        .post(
            &format!("/api/sessions/{}/webhooks", p.a),
            json!({ "url": rx.url(), "events": ["message.edited", "message.revoked"] }),
        )
        .await
        .unwrap();
    assert_eq!(hook.status, 201, "{}", hook.text);
    let sim = async |session: &str, route: &str, body: serde_json::Value| {
        p.client
            .post(&format!("/api/sim/sessions/{session}/{route}"), body)
            .await
            .unwrap()
    };
    let stranger = jid("4915100000077");
    let inbound = async |text: &str| {
        let r = sim(
            &p.a,
            "inbound",
            json!({ "from": stranger, "type": "text", "body": text }),
        )
        .await;
        assert_eq!(r.status, 200, "{}", r.text);
        r.str("messageId")
    };
    let theirs = inbound("their secret").await;
    let sent = p
        .post(
            "messages/send-text",
            json!({ "chatId": jid(PHONE_B), "text": "our secret" }),
        )
        .await;
    assert_eq!(sent.status, 201, "{}", sent.text);
    let own = sent.str("messageId");
    for id in [&theirs, &own] {
        p.wait_message(&p.a, "", |m| m["waMessageId"] == id.as_str())
            .await;
    }
    let deleted = p
        .post(
            "messages/delete",
            json!({ "chatId": jid(PHONE_B), "messageId": own }),
        )
        .await;
    assert_eq!(deleted.status, 200, "{}", deleted.text);
    let revoked = sim(&p.a, "revoke", json!({ "messageId": theirs })).await;
    assert_eq!(revoked.status, 200, "{}", revoked.text);

    for (session, id) in [(&p.a, &theirs), (&p.a, &own), (&p.b, &own)] {
        for (route, body) in [
            ("edit", json!({ "messageId": id, "body": "back again" })),
            ("revoke", json!({ "messageId": id })),
        ] {
            let r = sim(session, route, body).await;
            assert_eq!(r.status, 404, "{route} {id}: {}", r.text);
            assert_eq!(r.body["statusCode"], 404, "{}", r.text);
            assert_eq!(r.body["error"], "Not Found", "{}", r.text);
            assert_eq!(
                r.body["message"],
                format!("Message {id} not found"),
                "{}",
                r.text
            );
        }
    }

    // A live message is still edited, and its event comes after anything the refused calls raised.
    let later = inbound("later").await;
    let edited = sim(
        &p.a,
        "edit",
        json!({ "messageId": later, "body": "later, edited" }),
    )
    .await;
    assert_eq!(edited.status, 200, "{}", edited.text);
    rx.wait_until(std::time::Duration::from_secs(10), |d| {
        let revokes = d.iter().filter(|d| d.json()["event"] == "message.revoked");
        revokes.count() >= 2
            && d.iter()
                .any(|d| d.json()["data"]["messageId"] == later.as_str())
    })
    .await;
    let ids = |event: &str, field: &str| -> Vec<String> {
        rx.of_event(event)
            .iter()
            .map(|d| {
                d.json()["data"][field]
                    .as_str()
                    .unwrap_or_default()
                    .to_string()
            })
            .collect()
    };
    assert_eq!(ids("message.edited", "messageId"), vec![later.clone()]);
    let mut revokes = ids("message.revoked", "revokedId");
    revokes.sort();
    let mut expected = vec![own.clone(), theirs.clone()];
    expected.sort();
    assert_eq!(revokes, expected);
    for id in [&theirs, &own] {
        let row = p
            .wait_message(&p.a, "", |m| m["waMessageId"] == id.as_str())
            .await;
        assert_eq!(
            (&row["type"], &row["body"]),
            (&json!("revoked"), &json!(""))
        );
    }
}
