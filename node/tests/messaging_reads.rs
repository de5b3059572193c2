//! The message read routes name chats as the send routes do: `@s.whatsapp.net` reads as `@c.us`, and a
//! chat or sender id that is no JID is a 400 carrying the send routes' text, never an empty page.

mod messaging_support;

use messaging_support::*;
use serde_json::{Value, json};

const NET: &str = "s.whatsapp.net";

fn ids(rows: &Value) -> Vec<String> {
    rows.as_array()
        .into_iter()
        .flatten()
        .map(|r| r["id"].as_str().unwrap_or_default().to_string())
        .collect()
}

#[tokio::test]
async fn reads_normalise_whatsapp_net_and_refuse_ids_that_are_no_jid() {
    let p = pair(options()).await;
    let sent = p
        .post(
            "messages/send-text",
            json!({ "chatId": jid(PHONE_B), "text": "to bob" }),
        )
        .await;
    assert_eq!(sent.status, 201, "{}", sent.text);
    let message_id = sent.str("messageId");
    let inbound = p
        .client
        .post(
            &format!("/api/sim/sessions/{}/inbound", p.a),
            json!({ "from": jid(PHONE_B), "type": "text", "body": "from bob" }),
        )
        .await
        .unwrap();
    assert_eq!(inbound.status, 200, "{}", inbound.text);
    let bob = jid(PHONE_B);
    p.wait_message(&p.a, &format!("chatId={bob}"), |m| m["body"] == "from bob")
        .await;
    p.wait_message(&p.a, &format!("chatId={bob}"), |m| {
        m["waMessageId"] == message_id.as_str()
    })
    .await;
    let get = |path: String| {
        let client = &p.client;
        async move { client.get(&path).await.unwrap() }
    };
    let base = format!("/api/sessions/{}/messages", p.a);

    // The list by chat and by sender, in both spellings.
    let by_cus = get(format!("{base}?chatId={bob}")).await;
    let by_net = get(format!("{base}?chatId={PHONE_B}@{NET}")).await;
    assert_eq!(by_net.status, 200, "{}", by_net.text);
    assert_eq!(ids(&by_cus.body).len(), 2, "{}", by_cus.text);
    assert_eq!(ids(&by_net.body), ids(&by_cus.body));
    let from_cus = get(format!("{base}?from={bob}")).await;
    let from_net = get(format!("{base}?from={PHONE_B}@{NET}")).await;
    assert_eq!(from_net.status, 200, "{}", from_net.text);
    assert_eq!(ids(&from_cus.body).len(), 1, "{}", from_cus.text);
    assert_eq!(ids(&from_net.body), ids(&from_cus.body));

    // History of the normalised id is the chat's history.
    let history = get(format!("{base}/{PHONE_B}@{NET}/history")).await;
    assert_eq!(history.status, 200, "{}", history.text);
    assert_eq!(ids(&history.body), ids(&by_cus.body));
    for item in history.body.as_array().into_iter().flatten() {
        assert_eq!(item["chatId"], bob.as_str(), "{item}");
        assert_eq!(item["kind"], "individual", "{item}");
    }
    let reactions = get(format!("{base}/{PHONE_B}@{NET}/{message_id}/reactions")).await;
    assert_eq!(reactions.status, 200, "{}", reactions.text);

    // An id that is no JID: 400 with the error JSON and the text a send gives for it.
    let refused_send = p
        .post(
            "messages/send-text",
            json!({ "chatId": "garbage", "text": "x" }),
        )
        .await;
    assert_eq!(refused_send.status, 400, "{}", refused_send.text);
    let send_text = refused_send.str("message");
    for path in [
        format!("{base}?chatId=garbage"),
        format!("{base}/garbage/history"),
        format!("{base}/garbage/{message_id}/reactions"),
        format!("{base}/garbage/{message_id}/media"),
    ] {
        let r = get(path.clone()).await;
        assert_eq!(r.status, 400, "{path}: {}", r.text);
        assert_eq!(r.body["statusCode"], 400, "{path}: {}", r.text);
        assert_eq!(r.body["error"], "Bad Request", "{path}: {}", r.text);
        assert_eq!(r.str("message"), send_text, "{path}");
    }
    let bad_from = get(format!("{base}?from=garbage")).await;
    assert_eq!(bad_from.status, 400, "{}", bad_from.text);
    assert!(
        bad_from
            .str("message")
            .starts_with("from must be a valid WhatsApp id"),
        "{}",
        bad_from.text
    );
    // A blank filter still reads as absent.
    let blank = get(format!("{base}?chatId=&from=")).await;
    assert_eq!(blank.status, 200, "{}", blank.text);
    assert_eq!(ids(&blank.body).len(), 2, "{}", blank.text);
}

/// The row of `rows` whose network id is `wa_id`.
fn by_wa_id<'a>(rows: &'a Value, wa_id: &str) -> &'a Value {
    rows.as_array()
        .into_iter()
        .flatten()
        .find(|r| r["waMessageId"] == wa_id)
        .unwrap_or_else(|| panic!("no row {wa_id} in {rows}"))
}

/// A stored reply shows the message it quotes (`quotedMessage {id, body}`, as `message.received` carries
/// it) in the list, in a chat's history and in cursor pages (whose rows the page cache keeps): the body is the
/// quoted message's current text, absent when the session does not store it or it was deleted for everyone.
/// A message that quotes none, and a reply deleted for everyone, have no `quotedMessage`.
#[tokio::test]
async fn replies_show_the_message_they_quote_until_it_is_edited_or_deleted() {
    let p = pair(options()).await;
    let bob = jid(PHONE_B);
    let inbound = |body: Value| {
        let client = &p.client;
        let path = format!("/api/sim/sessions/{}/inbound", p.a);
        async move {
            let r = client.post(&path, body).await.unwrap();
            assert_eq!(r.status, 200, "{}", r.text);
            r.str("messageId")
        }
    };
    let stored = |wa_id: String| {
        let p = &p;
        let query = format!("chatId={}", jid(PHONE_B));
        async move {
            p.wait_message(&p.a, &query, |m| m["waMessageId"] == wa_id.as_str())
                .await;
        }
    };
    let question = inbound(json!({ "from": bob, "type": "text", "body": "which plan?" })).await;
    stored(question.clone()).await;
    let mine = p
        .post(
            "messages/send-text",
            json!({ "chatId": bob, "text": "mine v1" }),
        )
        .await;
    assert_eq!(mine.status, 201, "{}", mine.text);
    let mine = mine.str("messageId");
    let answer =
        inbound(json!({ "from": bob, "type": "text", "body": "pro", "quotedMessageId": question }))
            .await;
    let on_mine = inbound(
        json!({ "from": bob, "type": "text", "body": "about yours", "quotedMessageId": mine }),
    )
    .await;
    let reply = p
        .post(
            "messages/reply",
            json!({ "chatId": bob, "quotedMessageId": question, "text": "pro it is" }),
        )
        .await;
    assert_eq!(reply.status, 201, "{}", reply.text);
    let reply = reply.str("messageId");
    // A message on the network that this session does not store: Bob's to Carol.
    let carol = create_session(&p.client, "carol").await;
    link(&p.client, &carol, "4915100000003").await;
    let elsewhere = p
        .client
        .post(
            &format!("/api/sessions/{}/messages/send-text", p.b),
            json!({ "chatId": jid("4915100000003"), "text": "not for alice" }),
        )
        .await
        .unwrap();
    assert_eq!(elsewhere.status, 201, "{}", elsewhere.text);
    let elsewhere = elsewhere.str("messageId");
    let on_elsewhere = inbound(
        json!({ "from": bob, "type": "text", "body": "as I told Carol", "quotedMessageId": elsewhere }),
    )
    .await;
    let tail = inbound(json!({ "from": bob, "type": "text", "body": "tail" })).await;
    for id in [&answer, &on_mine, &reply, &on_elsewhere, &tail] {
        stored(id.clone()).await;
    }

    let base = format!("/api/sessions/{}/messages", p.a);
    let tail_row_id = {
        let list = p.client.get(&format!("{base}?chatId={bob}")).await.unwrap();
        by_wa_id(&list.body, &tail)["id"]
            .as_str()
            .unwrap_or_default()
            .to_string()
    };
    // The list, the chat's history and a cursor page (twice: built, then from the page cache).
    let pages = || {
        let client = &p.client;
        let paths = [
            format!("{base}?chatId={bob}"),
            format!("{base}/{bob}/history"),
            format!("{base}?chatId={bob}&after={tail_row_id}"),
            format!("{base}?chatId={bob}&after={tail_row_id}"),
        ];
        async move {
            let mut out = Vec::new();
            for path in paths {
                let r = client.get(&path).await.unwrap();
                assert_eq!(r.status, 200, "{path}: {}", r.text);
                out.push(r);
            }
            out
        }
    };
    for page in pages().await {
        let rows = &page.body;
        for (wa_id, quoted, body) in [
            (&answer, &question, "which plan?"),
            (&reply, &question, "which plan?"),
            (&on_mine, &mine, "mine v1"),
        ] {
            let row = by_wa_id(rows, wa_id);
            assert_eq!(
                row["quotedMessage"],
                json!({ "id": quoted, "body": body }),
                "{row}"
            );
        }
        // Not stored in this session: the id alone.
        let row = by_wa_id(rows, &on_elsewhere);
        assert_eq!(row["quotedMessage"], json!({ "id": elsewhere }), "{row}");
        // Quoting nothing: no field at all.
        for wa_id in [&question, &mine] {
            let row = by_wa_id(rows, wa_id);
            assert!(row.get("quotedMessage").is_none(), "{row}");
        }
    }

    // An edit of the quoted message shows in its replies, cached or not.
    let edited = p
        .post(
            "messages/edit",
            json!({ "chatId": bob, "messageId": mine, "body": "mine v2" }),
        )
        .await;
    assert_eq!(edited.status, 200, "{}", edited.text);
    for page in pages().await {
        let row = by_wa_id(&page.body, &on_mine);
        assert_eq!(
            row["quotedMessage"],
            json!({ "id": mine, "body": "mine v2" }),
            "{row}"
        );
    }

    // Deleted for everyone: its replies keep the id but not the text; a deleted reply shows no quote.
    for id in [&mine, &reply] {
        let deleted = p
            .post("messages/delete", json!({ "chatId": bob, "messageId": id }))
            .await;
        assert_eq!(deleted.status, 200, "{}", deleted.text);
    }
    for page in pages().await {
        let row = by_wa_id(&page.body, &on_mine);
        assert_eq!(row["quotedMessage"], json!({ "id": mine }), "{row}");
        assert!(!page.text.contains("mine v"), "{}", page.text);
        let row = by_wa_id(&page.body, &reply);
        assert_eq!(row["type"], "revoked", "{row}");
        assert!(row.get("quotedMessage").is_none(), "{row}");
        let row = by_wa_id(&page.body, &answer);
        assert_eq!(row["quotedMessage"]["body"], "which plan?", "{row}");
    }
}
