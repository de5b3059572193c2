//! Contact and chat routes end to end on the sim: number checks (true and false), contact records,
//! blocking, pictures, phone lookups, address-book edits, the chat list and every chat write.

mod resources_support;

use resources_support::{at, jid, key, linked_session, node};
use serde_json::{Value, json};

const ALICE: &str = "4915300000001";
const BOB: &str = "4915300000002";
const STRANGER: &str = "4915300000099";
const NOBODY: &str = "4915300000077";

async fn inbound(c: &wagate_loadtest::harness::Client, session: &str, from: &str, body: &str) {
    let reply = c
        .post(
            &format!("/api/sim/sessions/{session}/inbound"),
            json!({ "from": jid(from), "type": "text", "body": body }),
        )
        .await
        .expect("inbound");
    assert!(reply.status < 300, "{}", reply.text);
}

fn chat<'a>(list: &'a Value, id: &str) -> Option<&'a Value> {
    list.as_array()?.iter().find(|c| c["id"] == id)
}

#[tokio::test]
async fn contacts_check_block_pictures_and_edits() {
    let node = node().await;
    let c = node.client();
    let alice = linked_session(&c, "alice", ALICE).await;
    linked_session(&c, "bob", BOB).await;
    inbound(&c, &alice, STRANGER, "hello").await;

    let yes = c
        .get(&at(&alice, &format!("/contacts/check/{BOB}")))
        .await
        .expect("check");
    assert_eq!(
        yes.body,
        json!({ "number": BOB, "exists": true, "whatsappId": jid(BOB) })
    );
    let no = c
        .get(&at(&alice, &format!("/contacts/check/{NOBODY}")))
        .await
        .expect("check");
    assert_eq!(no.status, 200);
    assert_eq!(no.body["exists"], false);
    assert_eq!(
        c.get(&at(&alice, "/contacts/check/12ab"))
            .await
            .expect("check")
            .status,
        400
    );

    let list = c.get(&at(&alice, "/contacts")).await.expect("contacts");
    let stranger = chat(&list.body, &jid(STRANGER))
        .cloned()
        .unwrap_or_default();
    assert_eq!(stranger["number"], STRANGER, "{}", list.text);
    assert_eq!(stranger["isBlocked"], false);
    let all = list.body.as_array().cloned().unwrap_or_default();
    let paged = c
        .get(&at(&alice, "/contacts?limit=1&offset=1"))
        .await
        .expect("paged");
    let second: Vec<Value> = all.into_iter().skip(1).take(1).collect();
    assert_eq!(paged.body, Value::Array(second), "{}", paged.text);
    let bad = c.get(&at(&alice, "/contacts?limit=0")).await.expect("bad");
    assert_eq!(bad.status, 400, "{}", bad.text);
    let one = c
        .get(&at(&alice, &format!("/contacts/{}", jid(STRANGER))))
        .await
        .expect("contact");
    assert_eq!(one.status, 200, "{}", one.text);

    let block = at(&alice, &format!("/contacts/{}/block", jid(STRANGER)));
    assert_eq!(c.post_empty(&block).await.expect("block").status, 200);
    let blocked = c
        .get(&at(&alice, "/contacts/blocked"))
        .await
        .expect("blocked");
    assert_eq!(blocked.body, json!([jid(STRANGER)]));
    assert_eq!(c.delete(&block).await.expect("unblock").status, 200);
    assert_eq!(
        c.get(&at(&alice, "/contacts/blocked"))
            .await
            .expect("blocked")
            .body,
        json!([])
    );

    let picture = c
        .get(&at(
            &alice,
            &format!("/contacts/{}/profile-picture", jid(BOB)),
        ))
        .await
        .expect("picture");
    assert_eq!(picture.status, 200, "{}", picture.text);
    assert!(
        picture.body.get("url").is_some(),
        "url is present (null or string)"
    );
    let ids = format!("{},{}", jid(BOB), jid(STRANGER));
    let many = c
        .get(&at(
            &alice,
            &format!("/contacts/profile-pictures?ids={ids}"),
        ))
        .await
        .expect("pictures");
    assert_eq!(many.status, 200, "{}", many.text);
    assert_eq!(many.body["pictures"].as_object().map(|o| o.len()), Some(2));

    let phone = c
        .get(&at(&alice, &format!("/contacts/{}/phone", jid(BOB))))
        .await
        .expect("phone");
    assert_eq!(phone.body, json!({ "contactId": jid(BOB), "phone": BOB }));

    let contact = at(&alice, &format!("/contacts/{}", jid(STRANGER)));
    let saved = c
        .put(&contact, json!({ "firstName": "Sam", "lastName": "Stone" }))
        .await
        .expect("save");
    assert_eq!(saved.status, 200, "{}", saved.text);
    assert_eq!(
        c.get(&contact).await.expect("get").body["name"],
        "Sam Stone"
    );
    assert_eq!(c.delete(&contact).await.expect("delete").status, 200);

    let viewer = node.client_with_key(Some(&key(&c, "viewer", None).await));
    assert_eq!(
        viewer
            .get(&at(&alice, "/contacts"))
            .await
            .expect("list")
            .status,
        200
    );
    assert_eq!(viewer.post_empty(&block).await.expect("block").status, 403);
}

#[tokio::test]
async fn chat_list_and_chat_writes() {
    let node = node().await;
    let c = node.client();
    let alice = linked_session(&c, "alice", ALICE).await;
    inbound(&c, &alice, STRANGER, "first").await;
    inbound(&c, &alice, BOB, "second").await;
    let chat_id = jid(STRANGER);

    let list = c.get(&at(&alice, "/chats")).await.expect("chats");
    let summary = chat(&list.body, &chat_id).cloned().unwrap_or_default();
    assert_eq!(summary["isGroup"], false, "{}", list.text);
    assert_eq!(summary["kind"], "individual");
    assert_eq!(summary["unreadCount"], 1);
    assert_eq!(summary["lastMessage"], "first");
    assert_eq!(
        (
            summary["archived"].clone(),
            summary["pinned"].clone(),
            summary["muted"].clone()
        ),
        (json!(false), json!(false), json!(false))
    );
    // 0 would mean muted indefinitely: an unmuted chat carries no muteExpiration at all.
    assert!(summary.get("muteExpiration").is_none(), "{summary}");
    let page = c
        .get(&at(&alice, "/chats?limit=1&offset=1"))
        .await
        .expect("page");
    assert_eq!(page.body.as_array().map(Vec::len), Some(1));
    assert_eq!(
        c.get(&at(&alice, "/chats?limit=0"))
            .await
            .expect("bad")
            .status,
        400
    );
    assert_eq!(
        c.get(&at(&alice, "/chats?limit=2.5"))
            .await
            .expect("bad")
            .status,
        400
    );

    let ok = |r: wagate_loadtest::harness::Reply| assert_eq!(r.status, 200, "{}", r.text);
    ok(c.post(
        &at(&alice, "/chats/archive"),
        json!({ "chatId": chat_id, "archive": true }),
    )
    .await
    .expect("archive"));
    ok(c.post(
        &at(&alice, "/chats/pin"),
        json!({ "chatId": chat_id, "pin": true }),
    )
    .await
    .expect("pin"));
    ok(c.post(
        &at(&alice, "/chats/mute"),
        json!({ "chatId": chat_id, "muteUntil": 0 }),
    )
    .await
    .expect("mute"));
    let missing = c
        .post(&at(&alice, "/chats/mute"), json!({ "chatId": chat_id }))
        .await
        .expect("mute");
    assert_eq!(missing.status, 400, "muteUntil is required");
    let after = c.get(&at(&alice, "/chats")).await.expect("chats");
    let summary = chat(&after.body, &chat_id).cloned().unwrap_or_default();
    assert_eq!(
        (
            summary["archived"].clone(),
            summary["pinned"].clone(),
            summary["muted"].clone()
        ),
        (json!(true), json!(true), json!(true))
    );
    assert_eq!(summary["muteExpiration"], 0, "0 = muted indefinitely");
    // A mute with an end reads back with that end, as given.
    let until = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
        + 86_400_000;
    ok(c.post(
        &at(&alice, "/chats/mute"),
        json!({ "chatId": chat_id, "muteUntil": until }),
    )
    .await
    .expect("timed mute"));
    let timed = c.get(&at(&alice, "/chats")).await.expect("chats");
    let summary = chat(&timed.body, &chat_id).cloned().unwrap_or_default();
    assert_eq!(summary["muted"], true, "{summary}");
    assert_eq!(summary["muteExpiration"], until, "{summary}");
    ok(c.post(
        &at(&alice, "/chats/mute"),
        json!({ "chatId": chat_id, "muteUntil": null }),
    )
    .await
    .expect("unmute"));
    let unmuted = c.get(&at(&alice, "/chats")).await.expect("chats");
    let summary = chat(&unmuted.body, &chat_id).cloned().unwrap_or_default();
    assert_eq!(summary["muted"], false, "{summary}");
    assert!(summary.get("muteExpiration").is_none(), "{summary}");

    ok(c.post(
        &at(&alice, "/chats/typing"),
        json!({ "chatId": chat_id, "state": "recording" }),
    )
    .await
    .expect("typing"));
    let bad = c
        .post(
            &at(&alice, "/chats/typing"),
            json!({ "chatId": chat_id, "state": "dancing" }),
        )
        .await
        .expect("typing");
    assert_eq!(bad.status, 400);
    ok(
        c.post(&at(&alice, "/chats/unread"), json!({ "chatId": chat_id }))
            .await
            .expect("unread"),
    );
    ok(c.delete(&at(&alice, &format!("/chats/{chat_id}/messages")))
        .await
        .expect("clear"));
    ok(
        c.post(&at(&alice, "/chats/delete"), json!({ "chatId": chat_id }))
            .await
            .expect("delete"),
    );
    let gone = c.get(&at(&alice, "/chats")).await.expect("chats");
    assert!(chat(&gone.body, &chat_id).is_none(), "{}", gone.text);
}

/// Only a person can be blocked: a group id is a 400 for block and unblock and never reaches the list.
#[tokio::test]
async fn blocking_a_group_is_refused() {
    let node = node().await;
    let c = node.client();
    let alice = linked_session(&c, "alice", ALICE).await;
    let block = at(&alice, "/contacts/120363000000000000@g.us/block");
    let post = c.post_empty(&block).await.expect("block");
    assert_eq!(post.status, 400, "{}", post.text);
    assert!(
        post.body["message"]
            .as_str()
            .is_some_and(|m| m.contains("individual")),
        "{}",
        post.text
    );
    let delete = c.delete(&block).await.expect("unblock");
    assert_eq!(delete.status, 400, "{}", delete.text);
    let blocked = c
        .get(&at(&alice, "/contacts/blocked"))
        .await
        .expect("blocked");
    assert_eq!(blocked.body, json!([]));
}

/// Archive, pin and mute of a chat the session never had answer 404 as read and clear do, and leave the
/// chat list as it was.
#[tokio::test]
async fn chat_writes_on_an_unknown_chat_are_not_found() {
    let node = node().await;
    let c = node.client();
    let alice = linked_session(&c, "alice", ALICE).await;
    linked_session(&c, "bob", BOB).await;
    let unknown = jid(NOBODY);
    for (route, body) in [
        (
            "/chats/archive",
            json!({ "chatId": unknown, "archive": true }),
        ),
        ("/chats/pin", json!({ "chatId": unknown, "pin": true })),
        ("/chats/mute", json!({ "chatId": unknown, "muteUntil": 0 })),
        ("/chats/unread", json!({ "chatId": unknown })),
    ] {
        let reply = c.post(&at(&alice, route), body).await.expect(route);
        assert_eq!(reply.status, 404, "{route}: {}", reply.text);
        assert_eq!(
            reply.body["message"],
            format!("Chat {unknown} not found"),
            "{route}"
        );
    }
    let list = c.get(&at(&alice, "/chats")).await.expect("chats");
    assert!(chat(&list.body, &unknown).is_none(), "{}", list.text);
    // A group the session belongs to is its chat from the start, before any message in it.
    let created = c
        .post(
            &at(&alice, "/groups"),
            json!({ "name": "G", "participants": [jid(BOB)] }),
        )
        .await
        .expect("group");
    assert_eq!(created.status, 201, "{}", created.text);
    let group = created.str("id");
    let archive = json!({ "chatId": group, "archive": true });
    let archived = c.post(&at(&alice, "/chats/archive"), archive).await;
    assert_eq!(archived.expect("archive").status, 200);
}

/// The unread count of `chat` in `session`'s chat list.
async fn unread(c: &wagate_loadtest::harness::Client, session: &str, chat_id: &str) -> Value {
    let list = c.get(&at(session, "/chats")).await.expect("chats");
    chat(&list.body, chat_id).map_or(Value::Null, |s| s["unreadCount"].clone())
}

/// The stored row of the message `body` in `session`'s chat `chat_id`, once the event path stored it.
async fn stored_row(
    c: &wagate_loadtest::harness::Client,
    session: &str,
    chat_id: &str,
    body: &str,
) -> Value {
    for _ in 0..200 {
        let rows = c
            .get(&at(session, &format!("/messages?chatId={chat_id}")))
            .await
            .expect("messages");
        if let Some(row) = rows
            .body
            .as_array()
            .and_then(|a| a.iter().find(|m| m["body"] == body))
        {
            return row.clone();
        }
        tokio::time::sleep(std::time::Duration::from_millis(25)).await;
    }
    panic!("{body} was never stored in {chat_id}");
}

/// Waits until the sender's stored copy of `body` is acked `read`.
async fn acked_read(
    c: &wagate_loadtest::harness::Client,
    session: &str,
    chat_id: &str,
    body: &str,
) {
    for _ in 0..200 {
        if stored_row(c, session, chat_id, body).await["status"] == "read" {
            return;
        }
        tokio::time::sleep(std::time::Duration::from_millis(25)).await;
    }
    panic!("{body} was never acked read");
}

/// A received message is read by its id whatever produced it: a send from another linked session as
/// an injected inbound one, named by its network id (`waMessageId`) or its row id (`id`).
#[tokio::test]
async fn reading_a_message_by_id_counts_whoever_sent_it() {
    let node = node().await;
    let c = node.client();
    let alice = linked_session(&c, "alice", ALICE).await;
    let bob = linked_session(&c, "bob", BOB).await;
    let bob_chat = jid(BOB);
    let read_path = at(&alice, "/chats/read");
    let read =
        |ids: Vec<Value>| c.post(&read_path, json!({ "chatId": bob_chat, "messageIds": ids }));
    for (body, by_row_id) in [("z1", false), ("z2", true)] {
        let sent = c
            .post(
                &at(&bob, "/messages/send-text"),
                json!({ "chatId": jid(ALICE), "text": body }),
            )
            .await
            .expect("send");
        assert!(sent.status < 300, "{}", sent.text);
        let row = stored_row(&c, &alice, &bob_chat, body).await;
        assert_eq!(unread(&c, &alice, &bob_chat).await, 1, "{row}");
        // The sim acks bob's send as read on its own; alice's read state stays her own.
        acked_read(&c, &bob, &jid(ALICE), body).await;
        assert_eq!(unread(&c, &alice, &bob_chat).await, 1, "{row}");
        let id = if by_row_id {
            &row["id"]
        } else {
            &row["waMessageId"]
        };
        let reply = read(vec![id.clone()]).await.expect("read");
        assert_eq!(reply.status, 200, "{}", reply.text);
        assert_eq!(unread(&c, &alice, &bob_chat).await, 0, "{body} by {id}");
    }

    let injected = c
        .post(
            &format!("/api/sim/sessions/{alice}/inbound"),
            json!({ "from": bob_chat, "type": "text", "body": "z3" }),
        )
        .await
        .expect("inbound");
    assert!(injected.status < 300, "{}", injected.text);
    let row = stored_row(&c, &alice, &bob_chat, "z3").await;
    assert_eq!(unread(&c, &alice, &bob_chat).await, 1);
    let reply = read(vec![row["id"].clone()]).await.expect("read");
    assert_eq!(reply.status, 200, "{}", reply.text);
    assert_eq!(
        unread(&c, &alice, &bob_chat).await,
        0,
        "injected, by row id"
    );
}

/// A contact is a person: its record, phone lookup and address-book edits answer a group, channel or
/// broadcast id with the same 400 as blocking it, and such an id never lands in the contact list. A
/// picture is asked for any chat id.
#[tokio::test]
async fn contact_routes_refuse_groups_and_channels() {
    let node = node().await;
    let c = node.client();
    let alice = linked_session(&c, "alice", ALICE).await;
    for id in [
        "120363000000000062@g.us",
        "120363000000000063@newsletter",
        "status@broadcast",
    ] {
        let path = at(&alice, &format!("/contacts/{id}"));
        let put = c
            .put(&path, json!({ "firstName": "GroupAsContact" }))
            .await
            .expect("put");
        let delete = c.delete(&path).await.expect("delete");
        let get = c.get(&path).await.expect("get");
        let phone = c.get(&format!("{path}/phone")).await.expect("phone");
        for reply in [&put, &delete, &get, &phone] {
            assert_eq!(reply.status, 400, "{id}: {}", reply.text);
            assert_eq!(
                reply.body["message"],
                format!("contactId must be an individual contact, not {id}"),
                "{id}"
            );
        }
        let picture = c
            .get(&format!("{path}/profile-picture"))
            .await
            .expect("picture");
        assert_eq!(picture.status, 200, "{id}: {}", picture.text);
    }
    let list = c.get(&at(&alice, "/contacts")).await.expect("contacts");
    assert!(
        !list.text.contains("GroupAsContact") && !list.text.contains("@g.us"),
        "{}",
        list.text
    );
}

/// A number check takes a number (`+` allowed) or a `<number>@c.us` id; any other suffix is a 400, not a
/// check of the digits in front of it.
#[tokio::test]
async fn number_checks_refuse_other_suffixes() {
    let node = node().await;
    let c = node.client();
    let alice = linked_session(&c, "alice", ALICE).await;
    linked_session(&c, "bob", BOB).await;
    for given in [BOB.to_string(), format!("+{BOB}"), jid(BOB)] {
        let yes = c
            .get(&at(&alice, &format!("/contacts/check/{given}")))
            .await
            .expect("check");
        assert_eq!(
            yes.body,
            json!({ "number": BOB, "exists": true, "whatsappId": jid(BOB) }),
            "{given}"
        );
    }
    for given in [
        format!("{BOB}@g.us"),
        format!("{BOB}@lid"),
        format!("{BOB}@newsletter"),
        format!("{BOB}@"),
        format!("{BOB}@c.us@c.us"),
    ] {
        let reply = c
            .get(&at(&alice, &format!("/contacts/check/{given}")))
            .await
            .expect("check");
        assert_eq!(reply.status, 400, "{given}: {}", reply.text);
    }
}
