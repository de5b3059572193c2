//! Fixes from the black-box audit of the sim engine: message operations confined to the chat they name,
//! base64 voice notes sniffed, bulk items refused up front, exact mention tokens, edit rules, template
//! readiness, field caps from the reference, bulk variables and repeated deletes for everyone.

mod messaging_support;

use base64::Engine as _;
use messaging_support::*;
use serde_json::{Value, json};

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

/// An MP3 of one second's tone, made by the system ffmpeg (`scripts/test.sh` installs it).
/// The start of an Ogg Opus stream: a page whose first packet is Opus's header.
fn opus_page() -> Vec<u8> {
    [&b"OggS"[..], &[0u8; 23], &[19], b"OpusHead\x01\x01rest"].concat()
}

fn mp3_tone() -> Vec<u8> {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("tone.mp3");
    let status = std::process::Command::new("ffmpeg")
        .args(["-hide_banner", "-loglevel", "error", "-y", "-f", "lavfi"])
        .args(["-i", "sine=frequency=440:duration=1"])
        .arg(&out)
        .status()
        .expect("ffmpeg is installed");
    assert!(status.success());
    std::fs::read(out).unwrap()
}

#[tokio::test]
async fn a_base64_voice_note_without_a_mimetype_is_converted_unless_it_is_ogg() {
    let p = pair(options()).await;
    let to = jid(PHONE_B);
    let sent = p
        .post(
            "messages/send-audio",
            json!({ "chatId": to, "base64": b64(&mp3_tone()), "ptt": true }),
        )
        .await;
    assert_eq!(sent.status, 201, "{}", sent.text);
    let id = sent.str("messageId");
    let row = p
        .wait_message(&p.a, "type=voice", |m| m["waMessageId"] == id.as_str())
        .await;
    assert_eq!(row["media"]["mimetype"], "audio/ogg; codecs=opus", "{row}");
    let bytes = p
        .client
        .get(&format!("/api/sessions/{}/messages/{to}/{id}/media", p.a))
        .await
        .unwrap();
    assert_eq!(bytes.status, 200);
    assert!(bytes.text.starts_with("OggS"), "the stored bytes are Ogg");
    drop(p);
    // Without conversion the MP3 is refused as a URL's would be, not sent as a voice note.
    let p = pair(options().env("MEDIA_CONVERSION_ENABLED", "false")).await;
    let refused = p
        .post(
            "messages/send-audio",
            json!({ "chatId": to, "base64": b64(&mp3_tone()), "ptt": true }),
        )
        .await;
    // Refused before anything reached the network: the spec's 503 for disabled conversion holds here too.
    assert_eq!(refused.status, 503, "{}", refused.text);
    assert!(
        refused.str("message").contains("conversion is disabled"),
        "{}",
        refused.text
    );
    let ogg = p
        .post(
            "messages/send-audio",
            json!({ "chatId": to, "base64": b64(&opus_page()), "ptt": true }),
        )
        .await;
    assert_eq!(ogg.status, 201, "{}", ogg.text);
}

#[tokio::test]
async fn bulk_media_a_single_send_refuses_is_refused_when_the_batch_is_submitted() {
    let p = pair(options()).await;
    let to = jid(PHONE_B);
    let good = json!({ "chatId": to, "type": "text", "content": { "text": "first" } });
    for (base64, rule) in [
        ("data:image/png;base64,AAAA", "data: URL prefix"),
        ("!!!", "not valid base64"),
    ] {
        let single = p
            .post(
                "messages/send-image",
                json!({ "chatId": to, "base64": base64, "mimetype": "image/png" }),
            )
            .await;
        assert_eq!(single.status, 400, "{}", single.text);
        let item = json!({ "chatId": to, "type": "image",
            "content": { "image": { "base64": base64, "mimetype": "image/png" } } });
        let bulk = p
            .post(
                "messages/send-bulk",
                json!({ "messages": [good, item], "options": { "delayBetweenMessages": 1000 } }),
            )
            .await;
        assert_eq!(bulk.status, 400, "{}", bulk.text);
        let message = bulk.str("message");
        assert!(
            message.starts_with("messages[1]: ") && message.contains(rule),
            "{message}"
        );
        assert!(single.str("message").contains(rule), "{}", single.text);
    }
}

#[tokio::test]
async fn a_mention_needs_its_whole_token_and_is_listed_once() {
    let p = pair(options()).await;
    let to = jid(PHONE_B);
    let mention = jid("15550000002");
    let prefix = p
        .post(
            "messages/send-text",
            json!({ "chatId": to, "text": "hi @155500000021", "mentions": [mention] }),
        )
        .await;
    assert_eq!(prefix.status, 400, "{}", prefix.text);
    assert!(
        prefix.str("message").contains("mentions"),
        "{}",
        prefix.text
    );
    let sent = p
        .post(
            "messages/send-text",
            json!({ "chatId": to, "text": "hi @15550000002", "mentions": [mention, mention] }),
        )
        .await;
    assert_eq!(sent.status, 201, "{}", sent.text);
    let id = sent.str("messageId");
    let row = p
        .wait_message(&p.a, "", |m| m["waMessageId"] == id.as_str())
        .await;
    assert_eq!(row["mentionedIds"], json!([mention]), "{row}");
}

#[tokio::test]
async fn edits_keep_to_text_and_captions_within_their_limits() {
    let p = pair(options()).await;
    let to = jid(PHONE_B);
    let image = p
        .post(
            "messages/send-image",
            json!({ "chatId": to, "base64": b64(b"PNG"), "mimetype": "image/png", "caption": "c" }),
        )
        .await;
    let text = p
        .post("messages/send-text", json!({ "chatId": to, "text": "t" }))
        .await;
    let location = p
        .post(
            "messages/send-location",
            json!({ "chatId": to, "latitude": 1.0, "longitude": 2.0 }),
        )
        .await;
    let poll = p
        .post(
            "messages/send-poll",
            json!({ "chatId": to, "name": "q", "options": ["a", "b"] }),
        )
        .await;
    let edit = |id: String, body: String| {
        p.post(
            "messages/edit",
            json!({ "chatId": to, "messageId": id, "body": body }),
        )
    };
    let long_caption = edit(image.str("messageId"), "x".repeat(1025)).await;
    assert_eq!(long_caption.status, 400, "{}", long_caption.text);
    assert!(
        long_caption.str("message").contains("1024"),
        "{}",
        long_caption.text
    );
    let caption = edit(image.str("messageId"), "x".repeat(1024)).await;
    assert_eq!(caption.status, 200, "{}", caption.text);
    let long_text = edit(text.str("messageId"), "x".repeat(4097)).await;
    assert_eq!(long_text.status, 400, "{}", long_text.text);
    let body = edit(text.str("messageId"), "x".repeat(4096)).await;
    assert_eq!(body.status, 200, "{}", body.text);
    for (kind, sent) in [("location", location), ("poll", poll)] {
        let refused = edit(sent.str("messageId"), "new".into()).await;
        assert_eq!(refused.status, 400, "{kind}: {}", refused.text);
        assert!(
            refused.str("message").contains("cannot be edited"),
            "{}",
            refused.text
        );
    }
}

type Socket =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

/// A WebSocket subscribed to `events` of `session`.
async fn subscribe(p: &Pair, session: &str, events: Value) -> Socket {
    use futures::SinkExt as _;
    use tokio_tungstenite::tungstenite::client::IntoClientRequest as _;
    let mut req = format!("ws://127.0.0.1:{}/api/ws", p.node.port)
        .into_client_request()
        .unwrap();
    let key = wagate_loadtest::harness::ADMIN_KEY.parse().unwrap();
    req.headers_mut().insert("X-API-Key", key);
    let mut ws = tokio_tungstenite::connect_async(req).await.unwrap().0;
    let frame = json!({ "type": "subscribe", "sessionId": session, "events": events });
    ws.send(frame.to_string().into()).await.unwrap();
    assert_eq!(next_frame(&mut ws).await["type"], "subscribed");
    ws
}

async fn next_frame(ws: &mut Socket) -> Value {
    use futures::StreamExt as _;
    loop {
        let frame = tokio::time::timeout(std::time::Duration::from_secs(15), ws.next())
            .await
            .expect("a frame")
            .expect("socket open")
            .unwrap();
        if let tokio_tungstenite::tungstenite::Message::Text(text) = frame {
            return serde_json::from_str(&text).unwrap();
        }
    }
}

#[tokio::test]
async fn deleting_a_revoked_message_for_everyone_again_raises_no_second_event() {
    let p = pair(options()).await;
    let to = jid(PHONE_B);
    let mut ws = subscribe(&p, &p.a, json!(["message.revoked"])).await;
    let mut sent = Vec::new();
    for text in ["first", "fence"] {
        let reply = p
            .post("messages/send-text", json!({ "chatId": to, "text": text }))
            .await;
        sent.push(reply.str("messageId"));
    }
    for id in [&sent[0], &sent[0], &sent[1]] {
        let deleted = p
            .post("messages/delete", json!({ "chatId": to, "messageId": id }))
            .await;
        assert_eq!(deleted.status, 200, "{}", deleted.text);
    }
    // Events of one session arrive in the order they were recorded: the fence's comes last.
    let mut revoked = Vec::new();
    while revoked.last() != Some(&sent[1]) {
        let frame = next_frame(&mut ws).await;
        if frame["type"] == "event" {
            let id = frame["payload"]["data"]["revokedId"].as_str().unwrap_or("");
            revoked.push(id.to_string());
        }
    }
    assert_eq!(revoked, sent, "one message.revoked per message");

    // What is deleted for everyone is gone from the chat: no reaction, edit, pin, star or forward.
    let gone = &sent[0];
    let ops = [
        (
            "messages/react",
            json!({ "chatId": to, "messageId": gone, "emoji": "👍" }),
        ),
        (
            "messages/edit",
            json!({ "chatId": to, "messageId": gone, "body": "back" }),
        ),
        ("messages/pin", json!({ "chatId": to, "messageId": gone })),
        (
            "messages/star",
            json!({ "chatId": to, "messageId": gone, "star": true }),
        ),
        (
            "messages/forward",
            json!({ "fromChatId": to, "toChatId": to, "messageId": gone }),
        ),
    ];
    for (route, body) in ops {
        let refused = p.post(route, body).await;
        assert_eq!(refused.status, 404, "{route}: {}", refused.text);
        assert_eq!(
            refused.str("message"),
            format!("Message {gone} not found"),
            "{route}"
        );
    }
}

#[tokio::test]
async fn send_template_on_a_session_that_is_not_ready_answers_409_before_the_lookup() {
    let node = wagate_loadtest::harness::Node::start(options())
        .await
        .unwrap();
    let client = node.client();
    let id = create_session(&client, "stopped").await;
    let reply = client
        .post(
            &format!("/api/sessions/{id}/messages/send-template"),
            json!({ "chatId": jid(PHONE_B), "templateName": "nope" }),
        )
        .await
        .unwrap();
    assert_eq!(reply.status, 409, "{}", reply.text);
    assert!(
        reply.str("message").contains("not connected"),
        "{}",
        reply.text
    );
    let missing = client
        .post(
            &format!("/api/sessions/{id}/messages/send-template"),
            json!({ "chatId": jid(PHONE_B) }),
        )
        .await
        .unwrap();
    assert_eq!(missing.status, 400, "{}", missing.text);
    let both = client
        .post(
            &format!("/api/sessions/{id}/messages/send-template"),
            json!({ "chatId": jid(PHONE_B), "templateId": "a", "templateName": "b" }),
        )
        .await
        .unwrap();
    assert_eq!(both.status, 400, "{}", both.text);
    assert_eq!(
        both.str("message"),
        "give either templateId or templateName, not both"
    );
}

#[tokio::test]
async fn the_reference_length_caps_answer_400_naming_the_field() {
    let p = pair(options()).await;
    let to = jid(PHONE_B);
    let sent = p
        .post("messages/send-text", json!({ "chatId": to, "text": "t" }))
        .await;
    let id = sent.str("messageId");
    let cases = [
        (
            "messages/react",
            json!({ "chatId": to, "messageId": id, "emoji": "x".repeat(33) }),
            "emoji must be at most 32 characters",
        ),
        (
            "messages/send-product",
            json!({ "chatId": to, "productId": "p1", "body": "x".repeat(4097) }),
            "body must be at most 4096 characters",
        ),
        (
            "messages/send-location",
            json!({ "chatId": to, "latitude": 1.0, "longitude": 2.0, "description": "x".repeat(1025) }),
            "description must be at most 1024 characters",
        ),
        (
            "messages/send-contact",
            json!({ "chatId": to, "contactName": "x".repeat(256), "contactNumber": "4915100000009" }),
            "contactName must be at most 255 characters",
        ),
        (
            "messages/send-contact",
            json!({ "chatId": to, "contactName": "A", "contactNumber": "1".repeat(31) }),
            "contactNumber must be at most 30 characters",
        ),
        (
            "templates",
            json!({ "name": "t", "body": "b", "footer": "x".repeat(1025) }),
            "footer must be at most 1024 characters",
        ),
    ];
    for (route, body, message) in cases {
        let reply = p.post(route, body).await;
        assert_eq!(reply.status, 400, "{route}: {}", reply.text);
        assert_eq!(reply.str("message"), message, "{route}");
    }
    let at_the_cap = p
        .post(
            "messages/react",
            json!({ "chatId": to, "messageId": id, "emoji": "x".repeat(32) }),
        )
        .await;
    assert_eq!(at_the_cap.status, 200, "{}", at_the_cap.text);
}

#[tokio::test]
async fn bulk_item_variables_fill_the_text_and_the_caption() {
    let p = pair(options()).await;
    let to = jid(PHONE_B);
    let items = json!([
        { "chatId": to, "type": "text", "content": { "text": "Hi {{name}}" },
          "variables": { "name": "Bob" } },
        { "chatId": to, "type": "image", "variables": { "n": 2 },
          "content": { "image": { "base64": b64(b"PNG"), "mimetype": "image/png" },
                       "caption": "picture {{ n }}" } },
    ]);
    let accepted = p
        .post(
            "messages/send-bulk",
            json!({ "messages": items, "options": { "delayBetweenMessages": 1000 } }),
        )
        .await;
    assert_eq!(accepted.status, 202, "{}", accepted.text);
    p.wait_message(&p.b, "type=text", |m| m["body"] == "Hi Bob")
        .await;
    p.wait_message(&p.b, "type=image", |m| m["body"] == "picture 2")
        .await;
    let refused = p
        .post(
            "messages/send-bulk",
            json!({ "messages": [{ "chatId": to, "type": "text",
                "content": { "text": "x" }, "variables": ["Bob"] }] }),
        )
        .await;
    assert_eq!(refused.status, 400, "{}", refused.text);
    assert_eq!(
        refused.str("message"),
        "messages[0]: variables must be an object"
    );
    // A value is sent as given, even when it holds a token itself.
    let literal = json!([{ "chatId": to, "type": "text", "content": { "text": "[{{a}}]" },
        "variables": { "a": "{{b}}", "b": "B" } }]);
    let accepted = p
        .post(
            "messages/send-bulk",
            json!({ "messages": literal, "options": { "delayBetweenMessages": 1000 } }),
        )
        .await;
    assert_eq!(accepted.status, 202, "{}", accepted.text);
    p.wait_message(&p.b, "type=text", |m| m["body"] == "[{{b}}]")
        .await;
}

#[tokio::test]
async fn a_blank_template_header_or_footer_is_no_header_or_footer() {
    let p = pair(options()).await;
    let to = jid(PHONE_B);
    let created = p
        .post(
            "templates",
            json!({ "name": "blank", "body": "Hi {{name}}", "header": "  ", "footer": "bye" }),
        )
        .await;
    assert_eq!(created.status, 201, "{}", created.text);
    assert!(created.body["header"].is_null(), "{}", created.text);
    let path = format!("/api/sessions/{}/templates/{}", p.a, created.str("id"));
    let cleared = p.client.put(&path, json!({ "footer": "" })).await.unwrap();
    assert_eq!(cleared.status, 200, "{}", cleared.text);
    assert!(cleared.body["footer"].is_null(), "{}", cleared.text);
    let sent = p
        .post(
            "messages/send-template",
            json!({ "chatId": to, "templateName": "blank", "vars": { "name": "Bob" } }),
        )
        .await;
    assert_eq!(sent.status, 201, "{}", sent.text);
    p.wait_message(&p.b, "type=text", |m| m["body"] == "Hi Bob")
        .await;

    // A header whose variables render to nothing is left out too.
    let headed = p
        .client
        .put(&path, json!({ "header": "{{title}}", "footer": "bye" }))
        .await
        .unwrap();
    assert_eq!(headed.status, 200, "{}", headed.text);
    let sent = p
        .post(
            "messages/send-template",
            json!({ "chatId": to, "templateName": "blank",
                    "vars": { "name": "Ann", "title": " " } }),
        )
        .await;
    assert_eq!(sent.status, 201, "{}", sent.text);
    p.wait_message(&p.b, "type=text", |m| m["body"] == "Hi Ann\n\nbye")
        .await;
}
