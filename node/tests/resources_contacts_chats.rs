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
