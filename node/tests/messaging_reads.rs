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
