//! Validation (400 naming the field), media caps (413), the outbound-address guard on media URLs,
//! idempotent replays, and operations on messages (react, edit, delete, pin, star, vote, read).

mod messaging_support;

use base64::Engine as _;
use messaging_support::*;
use serde_json::json;

#[tokio::test]
async fn every_validation_rule_answers_400_naming_the_field() {
    let p = pair(options().env("MEDIA_DOWNLOAD_MAX_BYTES", "1000")).await;
    let to = jid(PHONE_B);
    let cases = [
        ("messages/send-text", json!({ "text": "x" }), "chatId"),
        (
            "messages/send-text",
            json!({ "chatId": "12345", "text": "x" }),
            "chatId",
        ),
        ("messages/send-text", json!({ "chatId": to }), "text"),
        (
            "messages/send-text",
            json!({ "chatId": to, "text": "x".repeat(4097) }),
            "text",
        ),
        (
            "messages/send-text",
            json!({ "chatId": to, "text": "hi", "mentions": [to] }),
            "mentions",
        ),
        (
            "messages/send-text",
            json!({ "chatId": to, "text": "hi", "customLinkPreview": "https://x" }),
            "customLinkPreview",
        ),
        (
            "messages/send-text",
            json!({ "chatId": to, "text": "see https://example.com", "linkPreview": false,
                "customLinkPreview": { "url": "https://example.com", "title": "Example" } }),
            "customLinkPreview cannot be combined with linkPreview: false",
        ),
        (
            "messages/send-image",
            json!({ "chatId": to }),
            "url or base64",
        ),
        (
            "messages/send-image",
            json!({ "chatId": to, "url": "https://x.invalid/a", "base64": "AAAA", "mimetype": "image/png" }),
            "url or base64",
        ),
        (
            "messages/send-image",
            json!({ "chatId": to, "base64": "AAAA" }),
            "mimetype",
        ),
        (
            "messages/send-image",
            json!({ "chatId": to, "base64": "AAAA", "mimetype": "image/png", "caption": "c".repeat(1025) }),
            "caption",
        ),
        (
            "messages/send-image",
            json!({ "chatId": to, "base64": "data:image/png;base64,AAAA", "mimetype": "image/png" }),
            "base64",
        ),
        (
            "messages/send-poll",
            json!({ "chatId": to, "name": "q", "options": ["one"] }),
            "options",
        ),
        (
            "messages/send-poll",
            json!({ "chatId": to, "name": "q".repeat(256), "options": ["a", "b"] }),
            "name",
        ),
        (
            "messages/send-poll",
            json!({ "chatId": to, "name": "q", "options": ["a", "b".repeat(101)] }),
            "options",
        ),
        (
            "messages/send-poll",
            json!({ "chatId": to, "name": "q", "options": ["a", "a"] }),
            "options must be unique",
        ),
        (
            "messages/send-poll",
            json!({ "chatId": to, "name": "q", "options": ["a", "b", " a "] }),
            "options must be unique",
        ),
        (
            "messages/send-location",
            json!({ "chatId": to, "longitude": 1.0 }),
            "latitude",
        ),
        (
            "messages/send-contact",
            json!({ "chatId": to, "contactName": "A" }),
            "contactNumber",
        ),
        (
            "messages/send-product",
            json!({ "chatId": to }),
            "productId",
        ),
        (
            "messages/reply",
            json!({ "chatId": to, "text": "x" }),
            "quotedMessageId",
        ),
        (
            "messages/forward",
            json!({ "toChatId": to, "messageId": "m" }),
            "fromChatId",
        ),
        (
            "messages/react",
            json!({ "chatId": to, "messageId": "m" }),
            "emoji",
        ),
        (
            "messages/pin",
            json!({ "chatId": to, "messageId": "m", "durationSeconds": 5 }),
            "durationSeconds",
        ),
        (
            "chats/read",
            json!({ "chatId": to, "messageIds": (0..101).map(|i| i.to_string()).collect::<Vec<_>>() }),
            "messageIds",
        ),
        (
            "chats/read",
            json!({ "chatId": to, "messageIds": [] }),
            "messageIds must not be empty",
        ),
        (
            "messages/vote-poll",
            json!({ "chatId": to, "pollMessageId": "p" }),
            "options is required",
        ),
        (
            "messages/vote-poll",
            json!({ "chatId": to, "pollMessageId": "p", "options": ["a", " "] }),
            "options must not hold blank",
        ),
        ("messages/send-bulk", json!({ "messages": [] }), "messages"),
        (
            "messages/send-bulk",
            json!({ "messages": [{ "chatId": "", "type": "text", "content": { "text": "x" } }] }),
            "chatId",
        ),
        (
            "messages/send-bulk",
            json!({ "messages": [{ "chatId": to, "type": "text", "content": {} }] }),
            "text",
        ),
        (
            "messages/send-bulk",
            json!({ "messages": [{ "chatId": to, "type": "image", "content": { "image": {} } }] }),
            "url or base64",
        ),
        (
            "messages/send-bulk",
            json!({ "messages": [{ "chatId": to, "type": "text", "content": { "text": "x" } }], "options": { "delayBetweenMessages": 999 } }),
            "delayBetweenMessages",
        ),
        (
            "messages/send-bulk",
            json!({ "messages": [{ "chatId": to, "type": "text", "content": { "text": "no tag", "mentions": ["4915100000001@c.us"] } }] }),
            "mention",
        ),
    ];
    for (route, body, field) in cases {
        let reply = p.post(route, body).await;
        assert_eq!(reply.status, 400, "{route}: {}", reply.text);
        assert!(
            reply.str("message").contains(field),
            "{route}: '{}' should name {field}",
            reply.str("message")
        );
    }
    let too_many: Vec<_> = (0..101)
        .map(|_| json!({ "chatId": to, "type": "text", "content": { "text": "x" } }))
        .collect();
    assert_eq!(
        p.post("messages/send-bulk", json!({ "messages": too_many }))
            .await
            .status,
        400
    );
    let big = base64::engine::general_purpose::STANDARD.encode(vec![7u8; 2000]);
    let reply = p
        .post(
            "messages/send-image",
            json!({ "chatId": to, "base64": big, "mimetype": "image/png" }),
        )
        .await;
    assert_eq!(reply.status, 413, "{}", reply.text);
    assert!(reply.body.get("code").is_none());
    let item = json!({ "chatId": to, "type": "image",
        "content": { "image": { "base64": big, "mimetype": "image/png" } } });
    let bulk = p
        .post("messages/send-bulk", json!({ "messages": [item] }))
        .await;
    assert_eq!(bulk.status, 413, "a bulk item's media too: {}", bulk.text);
}

/// A bulk item's media body is refused at submission with the message its single send gives for the same
/// body (naming the item), a missing or unknown `type` and a non-string text are refused too, and a
/// client batchId must make a usable statusUrl.
#[tokio::test]
async fn bulk_items_and_batch_ids_are_checked_at_submission() {
    let p = pair(options()).await;
    let to = jid(PHONE_B);
    let text = json!({ "chatId": to, "type": "text", "content": { "text": "ok" } });
    let media_bodies = [
        json!({ "url": "notaurl" }),
        json!({ "url": "ftp://example.com/a.png" }),
        json!({ "base64": "data:image/png;base64,AAAA", "mimetype": "image/png" }),
        json!({ "base64": "AAAA" }),
        json!({ "url": "https://example.com/a.png", "base64": "AAAA", "mimetype": "image/png" }),
        json!({ "base64": "AAAA", "mimetype": "image/png", "caption": "c".repeat(1025) }),
    ];
    for media in media_bodies {
        let mut single = media.clone();
        single["chatId"] = json!(to);
        let single = p.post("messages/send-image", single).await;
        assert_eq!(single.status, 400, "{media}: {}", single.text);
        let mut image = media.clone();
        let caption = image.as_object_mut().and_then(|m| m.remove("caption"));
        let item = json!({ "chatId": to, "type": "image",
            "content": { "image": image, "caption": caption } });
        let bulk = p
            .post("messages/send-bulk", json!({ "messages": [text, item] }))
            .await;
        assert_eq!(bulk.status, 400, "{media}: {}", bulk.text);
        assert_eq!(
            bulk.str("message"),
            format!("messages[1]: {}", single.str("message")),
            "{media}"
        );
    }
    let untyped = json!({ "chatId": to, "content": { "text": "no type" } });
    let sticker = json!({ "chatId": to, "type": "sticker", "content": {} });
    let number = json!({ "chatId": to, "type": "text", "content": { "text": 5 } });
    for (item, says) in [
        (untyped, "messages[1]: type is required"),
        (sticker, "messages[1]: type must be"),
        (number, "messages[1]: text must be a string"),
    ] {
        let bulk = p
            .post("messages/send-bulk", json!({ "messages": [text, item] }))
            .await;
        assert_eq!(bulk.status, 400, "{}", bulk.text);
        assert!(bulk.str("message").starts_with(says), "{}", bulk.text);
    }
    for bad in ["", "   ", "a/b", "a b", "..", "x?y", &"x".repeat(129)] {
        let bulk = p
            .post(
                "messages/send-bulk",
                json!({ "messages": [text], "batchId": bad }),
            )
            .await;
        assert_eq!(bulk.status, 400, "{bad:?}: {}", bulk.text);
        assert!(bulk.str("message").contains("batchId"), "{}", bulk.text);
    }
    for good in [json!("Run-1.a_b:c"), json!("y".repeat(128)), json!(null)] {
        let options = json!({ "delayBetweenMessages": 1000 });
        let accepted = p
            .post(
                "messages/send-bulk",
                json!({ "messages": [text], "batchId": good, "options": options }),
            )
            .await;
        assert_eq!(accepted.status, 202, "{good}: {}", accepted.text);
        let status = p.client.get(&accepted.str("statusUrl")).await.unwrap();
        assert_eq!(status.status, 200, "{good}: {}", status.text);
        assert_eq!(status.str("batchId"), accepted.str("batchId"));
    }
}

async fn serve_media(bytes: &'static [u8]) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let app = axum::Router::new().route(
        "/media.png",
        axum::routing::get(move || async move {
            ([(axum::http::header::CONTENT_TYPE, "image/png")], bytes)
        }),
    );
    tokio::spawn(async move { axum::serve(listener, app).await.ok() });
    format!("http://{addr}/media.png")
}

#[tokio::test]
async fn media_urls_are_guarded_and_fetched_when_allowed() {
    let url = serve_media(b"FROM-URL").await;
    let guarded = pair(options()).await;
    let to = jid(PHONE_B);
    for blocked in [
        url.as_str(),
        "http://169.254.169.254/latest/meta-data",
        "http://localhost:9/x.png",
    ] {
        let reply = guarded
            .post(
                "messages/send-image",
                json!({ "chatId": to, "url": blocked }),
            )
            .await;
        assert_eq!(reply.status, 400, "{blocked}: {}", reply.text);
        assert!(reply.str("message").contains("guard"), "{}", reply.text);
    }
    drop(guarded);
    let open = pair(
        options()
            .env("MEDIA_URL_GUARD", "false")
            .env("MEDIA_DOWNLOAD_MAX_BYTES", "5"),
    )
    .await;
    let too_big = open
        .post("messages/send-image", json!({ "chatId": to, "url": url }))
        .await;
    assert_eq!(too_big.status, 413, "{}", too_big.text);
    drop(open);
    let open = pair(options().env("MEDIA_URL_GUARD", "false")).await;
    let sent = open
        .post(
            "messages/send-image",
            json!({ "chatId": to, "url": url, "caption": "u" }),
        )
        .await;
    assert_eq!(sent.status, 201, "{}", sent.text);
    let got = open.wait_message(&open.b, "type=image", |_| true).await;
    assert_eq!(
        got["media"]["data"],
        base64::engine::general_purpose::STANDARD.encode(b"FROM-URL")
    );
    assert_eq!(got["media"]["mimetype"], "image/png");
    // The sim plays a contact sending media: base64 under `data` or `base64`, or a URL it downloads.
    let inbound = format!("/api/sim/sessions/{}/inbound", open.b);
    let from = jid("4915100000077");
    let b64 = base64::engine::general_purpose::STANDARD.encode(b"INBOUND-B64");
    for media in [
        json!({ "base64": b64, "mimetype": "image/png" }),
        json!({ "url": url }),
    ] {
        let sent = open
            .client
            .post(
                &inbound,
                json!({ "from": from, "type": "image", "media": media }),
            )
            .await
            .unwrap();
        assert_eq!(sent.status, 200, "{media}: {}", sent.text);
        let id = sent.body["messageId"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        let got = open
            .wait_message(&open.b, "type=image", |m| m["waMessageId"] == id.as_str())
            .await;
        assert_ne!(got["media"]["data"], "", "{media}: {got}");
        assert_eq!(got["media"]["mimetype"], "image/png", "{got}");
    }
    for media in [
        json!({ "mimetype": "image/png" }),
        json!({ "url": url, "data": b64 }),
    ] {
        let refused = open
            .client
            .post(
                &inbound,
                json!({ "from": from, "type": "image", "media": media }),
            )
            .await
            .unwrap();
        assert_eq!(refused.status, 400, "{media}: {}", refused.text);
    }
}

#[tokio::test]
async fn idempotency_key_replays_the_first_answer() {
    let p = pair(options()).await;
    let path = format!("/api/sessions/{}/messages/send-text", p.a);
    let body = json!({ "chatId": jid(PHONE_B), "text": "once" });
    let send = |body: serde_json::Value| {
        let req = p
            .client
            .raw(reqwest::Method::POST, &path)
            .header("Idempotency-Key", "k-1")
            .json(&body);
        p.client.send(req)
    };
    let first = send(body.clone()).await.unwrap();
    assert_eq!(first.status, 201, "{}", first.text);
    let again = send(body).await.unwrap();
    assert_eq!(
        (again.status, again.body.clone()),
        (201, first.body.clone())
    );
    let other = send(json!({ "chatId": jid(PHONE_B), "text": "twice" }))
        .await
        .unwrap();
    assert_eq!(other.status, 422, "{}", other.text);
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    let rows = p
        .client
        .get(&format!(
            "/api/sessions/{}/messages?direction=outgoing",
            p.a
        ))
        .await
        .unwrap();
    assert_eq!(rows.body.as_array().map(Vec::len), Some(1));
}

#[tokio::test]
async fn operations_on_messages() {
    let p = pair(options()).await;
    let to = jid(PHONE_B);
    let sent = p
        .post(
            "messages/send-text",
            json!({ "chatId": to, "text": "edit me" }),
        )
        .await;
    let id = sent.str("messageId");
    let ok = |r: &wagate_loadtest::harness::Reply| r.status == 200 && r.body["success"] == true;
    let react = p
        .post(
            "messages/react",
            json!({ "chatId": to, "messageId": id, "emoji": "👍" }),
        )
        .await;
    assert!(ok(&react), "{}", react.text);
    let own = p
        .client
        .get(&format!(
            "/api/sessions/{}/messages/{to}/{id}/reactions",
            p.a
        ))
        .await
        .unwrap();
    assert_eq!(own.body[0]["emoji"], "👍", "{}", own.text);
    assert_eq!(own.body[0]["senders"][0]["senderId"], jid(PHONE_A));
    let from_b = p
        .client
        .post(
            &format!("/api/sessions/{}/messages/react", p.b),
            json!({ "chatId": jid(PHONE_A), "messageId": id, "emoji": "🎉" }),
        )
        .await
        .unwrap();
    assert!(ok(&from_b), "{}", from_b.text);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    loop {
        let r = p
            .client
            .get(&format!(
                "/api/sessions/{}/messages/{to}/{id}/reactions",
                p.a
            ))
            .await
            .unwrap();
        if r.body.as_array().map(Vec::len) == Some(2) {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "{}", r.text);
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    let edit = p
        .post(
            "messages/edit",
            json!({ "chatId": to, "messageId": id, "body": "edited" }),
        )
        .await;
    assert_eq!(
        (edit.status, edit.str("messageId")),
        (200, id.clone()),
        "{}",
        edit.text
    );
    p.wait_message(&p.b, "", |m| {
        m["waMessageId"] == id.as_str() && m["body"] == "edited"
    })
    .await;
    for (route, body) in [
        (
            "messages/pin",
            json!({ "chatId": to, "messageId": id, "durationSeconds": 604800 }),
        ),
        ("messages/unpin", json!({ "chatId": to, "messageId": id })),
        (
            "messages/star",
            json!({ "chatId": to, "messageId": id, "star": true }),
        ),
        ("chats/read", json!({ "chatId": to, "messageIds": [id] })),
        (
            "messages/click-button",
            json!({ "chatId": to, "messageId": id, "buttonId": "b1", "text": "Yes" }),
        ),
        ("messages/delete", json!({ "chatId": to, "messageId": id })),
    ] {
        let reply = p.post(route, body).await;
        assert!(ok(&reply), "{route}: {}", reply.text);
    }
    let quoting_deleted = p
        .post(
            "messages/reply",
            json!({ "chatId": to, "quotedMessageId": id, "text": "too late" }),
        )
        .await;
    assert_eq!(quoting_deleted.status, 404, "{}", quoting_deleted.text);
    let poll = p
        .post(
            "messages/send-poll",
            json!({ "chatId": to, "name": "q", "options": ["a", "b"] }),
        )
        .await;
    let vote = p
        .post(
            "messages/vote-poll",
            json!({ "chatId": to, "pollMessageId": poll.str("messageId"), "options": ["a"] }),
        )
        .await;
    assert!(ok(&vote), "{}", vote.text);
    // An empty selection withdraws the vote (OpenWA's SDK: "[] clears the vote"); option texts are
    // still checked against the poll.
    for (options, status) in [(json!([]), 200), (json!(["zzz"]), 400)] {
        let body =
            json!({ "chatId": to, "pollMessageId": poll.str("messageId"), "options": options });
        let vote = p.post("messages/vote-poll", body).await;
        assert_eq!(vote.status, status, "{options}: {}", vote.text);
    }
    let card = json!({ "url": "https://example.com", "title": "Example" });
    for enabled in [json!(true), json!(null)] {
        let body = json!({ "chatId": to, "text": "see https://example.com",
            "linkPreview": enabled, "customLinkPreview": card });
        let sent = p.post("messages/send-text", body).await;
        assert_eq!(sent.status, 201, "linkPreview {enabled}: {}", sent.text);
    }
    let history = p
        .client
        .get(&format!("/api/sessions/{}/messages/{to}/history", p.a))
        .await
        .unwrap();
    assert_eq!(history.status, 200);
    assert!(history.body.as_array().map(Vec::len).unwrap_or(0) >= 2);
    for item in history.body.as_array().into_iter().flatten() {
        let outgoing = item["direction"] == "outgoing";
        assert_eq!(item["fromMe"], outgoing, "{item}");
        assert_eq!(item["kind"], "individual", "{item}");
    }
    let none = p
        .client
        .get(&format!("/api/sessions/{}/messages/{to}/{id}/media", p.a))
        .await
        .unwrap();
    assert_eq!(none.status, 404);
}

/// The embedded sim network forgets its messages with the process; the session's store does not, so a
/// reply, reaction, edit, forward and delete for everyone still work on a message from before a restart.
#[tokio::test]
async fn operations_on_a_message_from_before_a_restart() {
    let mut p = pair(options()).await;
    let to = jid(PHONE_B);
    let sent = p
        .post(
            "messages/send-text",
            json!({ "chatId": to, "text": "before the restart" }),
        )
        .await;
    assert_eq!(sent.status, 201, "{}", sent.text);
    let id = sent.str("messageId");
    p.wait_message(&p.b, "", |m| m["waMessageId"] == id.as_str())
        .await;
    p.node.restart().await.unwrap();
    p.client = p.node.client();
    // The rows read `ready` as the killed process left them until the boot restore has run: wait for
    // the engines themselves.
    for session in [&p.a, &p.b] {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(15);
        loop {
            let reply = p
                .client
                .get(&format!("/api/sessions/{session}"))
                .await
                .unwrap();
            if reply.body["status"] == "ready" && reply.body["engineLoaded"] == true {
                break;
            }
            assert!(std::time::Instant::now() < deadline, "{}", reply.text);
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
    }
    for (route, body, status) in [
        (
            "messages/reply",
            json!({ "chatId": to, "quotedMessageId": id, "text": "after the restart" }),
            201,
        ),
        (
            "messages/react",
            json!({ "chatId": to, "messageId": id, "emoji": "👍" }),
            200,
        ),
        (
            "messages/edit",
            json!({ "chatId": to, "messageId": id, "body": "edited after" }),
            200,
        ),
        (
            "messages/forward",
            json!({ "fromChatId": to, "toChatId": to, "messageId": id }),
            201,
        ),
    ] {
        let reply = p.post(route, body).await;
        assert_eq!(reply.status, status, "{route}: {}", reply.text);
    }
    p.wait_message(&p.b, "", |m| m["body"] == "after the restart")
        .await;
    p.wait_message(&p.b, "", |m| {
        m["waMessageId"] == id.as_str() && m["body"] == "edited after"
    })
    .await;
    // Deleted for everyone last (it takes the text away), it reaches the other side too.
    let deleted = p
        .post("messages/delete", json!({ "chatId": to, "messageId": id }))
        .await;
    assert_eq!(deleted.status, 200, "{}", deleted.text);
    p.wait_message(&p.b, "", |m| {
        m["waMessageId"] == id.as_str() && m["type"] == "revoked"
    })
    .await;
}

/// A quote is a message of the chat the send goes to: one of another chat answers 404 as react, edit and pin
/// do for the same pair, on every send that carries `quotedMessageId`; the chat's other spelling still quotes.
#[tokio::test]
async fn a_quote_from_another_chat_is_not_found() {
    let p = pair(options()).await;
    let sent = p
        .post(
            "messages/send-text",
            json!({ "chatId": jid(PHONE_B), "text": "in chat B" }),
        )
        .await;
    let id = sent.str("messageId");
    let other = "15550004444@c.us";
    for (route, body) in [
        ("messages/reply", json!({ "text": "x" })),
        ("messages/send-text", json!({ "text": "x" })),
        (
            "messages/send-poll",
            json!({ "name": "q", "options": ["a", "b"] }),
        ),
        (
            "messages/send-location",
            json!({ "latitude": 1.0, "longitude": 2.0 }),
        ),
        (
            "messages/send-contact",
            json!({ "contactName": "Ann", "contactNumber": "15550001111" }),
        ),
    ] {
        let mut body = body;
        body["chatId"] = json!(other);
        body["quotedMessageId"] = json!(id);
        let reply = p.post(route, body).await;
        assert_eq!(reply.status, 404, "{route}: {}", reply.text);
        assert_eq!(
            reply.body["message"],
            format!("Message {id} not found"),
            "{route}"
        );
    }
    let alias = format!("{PHONE_B}@s.whatsapp.net");
    let same = p
        .post(
            "messages/reply",
            json!({ "chatId": alias, "quotedMessageId": id, "text": "same chat" }),
        )
        .await;
    assert_eq!(same.status, 201, "{}", same.text);
}
