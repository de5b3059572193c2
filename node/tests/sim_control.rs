//! The sim control API's contract (wire-notes §10) where it refuses or restricts: `/inbound` needs
//! `type`, `/call` needs `isVideo` and `/restrict` needs `kind` and `active` (400 with the standard error
//! body otherwise); a session id the gateway does not have is 404 on every control route, as on the
//! session routes. Only linked phones and `/inbound` senders exist on the network: a send to any other
//! number does not make it exist, and a phone whose session was deleted, logged out or unlinked exists no
//! more. A message deleted for everyone can no longer be edited or revoked through it (404, no event), and
//! an `/inbound` to `status@broadcast` is a status post (`status.received`), not a message.

mod messaging_support;

use std::time::Duration;

use messaging_support::*;
use serde_json::json;
use wagate_loadtest::harness::Reply;
use wagate_loadtest::harness::receiver::{Delivery, Receiver};

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
    let rx = Receiver::start().await.unwrap();
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

async fn sim(p: &Pair, session: &str, route: &str, body: serde_json::Value) -> Reply {
    p.client
        .post(&format!("/api/sim/sessions/{session}/{route}"), body)
        .await
        .unwrap()
}

fn assert_error(reply: &Reply, status: u16, message: &str) {
    assert_eq!(reply.status, status, "{}", reply.text);
    assert_eq!(reply.body["statusCode"], status, "{}", reply.text);
    assert_eq!(reply.body["message"], message, "{}", reply.text);
}

/// A webhook of `session` for `events`, delivered to a fresh receiver.
async fn hooked(p: &Pair, session: &str, events: &[&str]) -> Receiver {
    let rx = Receiver::start().await.unwrap();
    let hook = p
        .client
        .post(
            &format!("/api/sessions/{session}/webhooks"),
            json!({ "url": rx.url(), "events": events }),
        )
        .await
        .unwrap();
    assert_eq!(hook.status, 201, "{}", hook.text);
    rx
}

/// The `data` of the `status.received` delivery for `status_id`, once it arrived.
async fn received_status(rx: &Receiver, status_id: &str) -> serde_json::Value {
    let of = |d: &Delivery| {
        let body = d.json();
        (body["event"] == "status.received" && body["data"]["statusId"] == status_id)
            .then(|| body["data"].clone())
    };
    let all = rx
        .wait_until(Duration::from_secs(10), |d| {
            d.iter().any(|d| of(d).is_some())
        })
        .await;
    all.iter()
        .find_map(of)
        .unwrap_or_else(|| panic!("no status.received for {status_id}"))
}

/// On WhatsApp a message to `status@broadcast` is a status post: `/inbound` there raises `status.received`
/// (the same data as a post by another sim session) and no `message.received`, and the post is the
/// contact's status, with its media, like one posted by another session.
#[tokio::test]
async fn an_inbound_to_status_broadcast_is_a_status_post() {
    let p = pair(options()).await;
    let rx = hooked(&p, &p.a, &["status.received", "message.received"]).await;
    let poster = jid("4915100000055");
    let inbound = sim(
        &p,
        &p.a,
        "inbound",
        json!({ "from": poster, "chatId": "status@broadcast", "type": "image", "body": "sunset",
            "media": { "data": "aW1hZ2U=", "mimetype": "image/png" } }),
    )
    .await;
    assert_eq!(inbound.status, 200, "{}", inbound.text);
    let status_id = inbound.str("messageId");
    let data = received_status(&rx, &status_id).await;
    assert_eq!(data["contact"], poster.as_str(), "{data}");
    assert_eq!(data["type"], "image", "{data}");
    assert_eq!(data["caption"], "sunset", "{data}");
    assert_eq!(data["hasMedia"], true, "{data}");

    // A post by session B to A's phone: the same shape of event.
    let posted = p
        .client
        .post(
            &format!("/api/sessions/{}/status/send-image", p.b),
            json!({ "image": { "base64": "aW1hZ2U=", "mimetype": "image/png" }, "caption": "pic",
                "recipients": [jid(PHONE_A)] }),
        )
        .await
        .unwrap();
    assert_eq!(posted.status, 201, "{}", posted.text);
    let other = received_status(&rx, &posted.str("statusId")).await;
    let keys = |v: &serde_json::Value| {
        let mut keys: Vec<String> = v
            .as_object()
            .map(|o| o.keys().cloned().collect())
            .unwrap_or_default();
        keys.sort();
        keys
    };
    assert_eq!(keys(&data), keys(&other), "{data} vs {other}");

    // A chat message sent after it is the first and only message.received.
    let later = sim(
        &p,
        &p.a,
        "inbound",
        json!({ "from": poster, "type": "text", "body": "hi" }),
    )
    .await;
    assert_eq!(later.status, 200, "{}", later.text);
    let later_id = later.str("messageId");
    rx.wait_until(Duration::from_secs(10), |d| {
        d.iter()
            .any(|d| d.json()["data"]["id"] == later_id.as_str())
    })
    .await;
    let received: Vec<_> = rx
        .of_event("message.received")
        .iter()
        .map(|d| d.json()["data"]["id"].clone())
        .collect();
    assert_eq!(received, vec![json!(later_id)]);

    let listed = p
        .client
        .get(&format!("/api/sessions/{}/status/{poster}", p.a))
        .await
        .unwrap();
    assert_eq!(listed.status, 200, "{}", listed.text);
    let ids: Vec<_> = listed.body["statuses"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|s| s["id"].clone())
        .collect();
    assert_eq!(ids, vec![json!(status_id)], "{}", listed.text);
    let media = p
        .client
        .raw(
            reqwest::Method::GET,
            &format!("/api/sessions/{}/status/{status_id}/media", p.a),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(media.status(), 200);
    assert_eq!(media.bytes().await.unwrap().as_ref(), b"image");
}

/// `/restrict {kind, active, expiresAt?}`: `kind` (a non-empty string) and `active` (a boolean) are
/// required; nothing is assumed for them.
#[tokio::test]
async fn restrict_needs_kind_and_active() {
    let p = pair(options()).await;
    for (body, message) in [
        (json!({ "active": true }), "kind is required"),
        (json!({ "kind": "", "active": true }), "kind is required"),
        (json!({ "kind": null, "active": true }), "kind is required"),
        (
            json!({ "kind": 7, "active": true }),
            "kind must be a string",
        ),
        (json!({ "kind": "temporary_ban" }), "active is required"),
        (
            json!({ "kind": "temporary_ban", "active": "yes" }),
            "active must be a boolean",
        ),
        (
            json!({ "kind": "temporary_ban", "active": true, "expiresAt": "soon" }),
            "expiresAt must be epoch seconds or milliseconds, or an ISO 8601 string",
        ),
    ] {
        let reply = sim(&p, &p.a, "restrict", body.clone()).await;
        assert_error(&reply, 400, message);
        assert_eq!(reply.body["error"], "Bad Request", "{body}: {}", reply.text);
    }
    let fine = sim(
        &p,
        &p.a,
        "restrict",
        json!({ "kind": "temporary_ban", "active": true, "expiresAt": 4102444800_i64 }),
    )
    .await;
    assert_eq!(fine.status, 200, "{}", fine.text);
}

/// Every session-scoped control route answers a session id the gateway does not have as the session
/// routes do (404, same message); an existing session that is not linked keeps its 409.
#[tokio::test]
async fn control_routes_answer_an_unknown_session_with_404() {
    let p = pair(options()).await;
    let unknown = "00000000-0000-4000-8000-000000000001";
    let session = p
        .client
        .get(&format!("/api/sessions/{unknown}"))
        .await
        .unwrap();
    assert_eq!(session.status, 404, "{}", session.text);
    let message = session.str("message");
    let from = jid("4915100000077");
    for (route, body) in [
        ("scan", json!({ "phone": "4915100000066" })),
        (
            "inbound",
            json!({ "from": from, "type": "text", "body": "hi" }),
        ),
        ("ack", json!({ "messageId": "x", "status": "read" })),
        (
            "react",
            json!({ "messageId": "x", "emoji": "👍", "from": from }),
        ),
        ("revoke", json!({ "messageId": "x" })),
        ("edit", json!({ "messageId": "x", "body": "y" })),
        ("drop", json!({})),
        ("unlink", json!({})),
        (
            "restrict",
            json!({ "kind": "temporary_ban", "active": true }),
        ),
        ("call", json!({ "from": from, "isVideo": false })),
        (
            "group-event",
            json!({ "groupId": "123@g.us", "action": "join", "participantIds": [] }),
        ),
        ("faults", json!({ "failNextStarts": 1 })),
    ] {
        let reply = sim(&p, unknown, route, body).await;
        assert_error(&reply, 404, &message);
    }
    let outbox = p
        .client
        .get(&format!("/api/sim/sessions/{unknown}/outbox"))
        .await
        .unwrap();
    assert_error(&outbox, 404, &message);

    let idle = create_session(&p.client, "idle").await;
    let restrict = sim(
        &p,
        &idle,
        "restrict",
        json!({ "kind": "temporary_ban", "active": true }),
    )
    .await;
    assert_eq!(restrict.status, 409, "{}", restrict.text);
}

/// Wire-notes §10: a phone exists while a session is linked to it, or for good once it wrote through
/// `/inbound`. Deleting, logging out or unlinking (from the phone) the only session of a phone takes it
/// off the network for every other session's contact check.
#[tokio::test]
async fn a_phone_whose_session_is_gone_no_longer_exists() {
    let p = pair(options()).await;
    let phones = ["4915100000031", "4915100000032", "4915100000033"];
    let mut sessions = Vec::new();
    for (i, phone) in phones.iter().enumerate() {
        let id = create_session(&p.client, &format!("gone-{i}")).await;
        link(&p.client, &id, phone).await;
        sessions.push(id);
    }
    let check = async |number: &str| {
        let reply = p
            .client
            .get(&format!("/api/sessions/{}/contacts/check/{number}", p.a))
            .await
            .unwrap();
        assert_eq!(reply.status, 200, "{}", reply.text);
        reply.body["exists"].clone()
    };
    for phone in phones {
        assert_eq!(check(phone).await, json!(true), "{phone} is linked");
    }
    // B's phone also wrote through /inbound: it stays after B's session goes.
    let wrote = sim(
        &p,
        &p.a,
        "inbound",
        json!({ "from": jid(PHONE_B), "type": "text", "body": "hi" }),
    )
    .await;
    assert_eq!(wrote.status, 200, "{}", wrote.text);

    let deleted = p
        .client
        .delete(&format!("/api/sessions/{}", sessions[0]))
        .await
        .unwrap();
    assert!(deleted.status < 300, "{}", deleted.text);
    let logged_out = p
        .client
        .post_empty(&format!("/api/sessions/{}/logout", sessions[1]))
        .await
        .unwrap();
    assert_eq!(logged_out.status, 200, "{}", logged_out.text);
    let unlinked = sim(&p, &sessions[2], "unlink", json!({})).await;
    assert_eq!(unlinked.status, 200, "{}", unlinked.text);
    let deleted_b = p
        .client
        .delete(&format!("/api/sessions/{}", p.b))
        .await
        .unwrap();
    assert!(deleted_b.status < 300, "{}", deleted_b.text);

    for phone in phones {
        assert_eq!(check(phone).await, json!(false), "{phone} is gone");
    }
    assert_eq!(
        check(PHONE_B).await,
        json!(true),
        "an /inbound sender stays"
    );

    // Linked again, the phone is back.
    let again = create_session(&p.client, "again").await;
    link(&p.client, &again, phones[0]).await;
    assert_eq!(check(phones[0]).await, json!(true));
}
