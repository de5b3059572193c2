//! Every send type, end to end on two linked sim sessions: it answers 201 and arrives at the other side
//! with the right type and fields (the recipient's message store), and the sender's store keeps it too.

mod messaging_support;

use base64::Engine as _;
use messaging_support::*;
use serde_json::{Value, json};

fn b64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

#[tokio::test]
async fn every_send_type_arrives_with_its_type_and_fields() {
    let p = pair(options()).await;
    let to = jid(PHONE_B);
    let from = jid(PHONE_A);
    let text = p
        .post(
            "messages/send-text",
            json!({ "chatId": to, "text": "hello @4915100000002", "mentions": [to] }),
        )
        .await;
    assert_eq!(text.status, 201, "{}", text.text);
    assert!(text.body["timestamp"].as_i64().is_some());
    let text_id = text.str("messageId");
    let got = p
        .wait_message(&p.b, "", |m| m["waMessageId"] == text_id.as_str())
        .await;
    assert_eq!(
        (got["type"].as_str(), got["body"].as_str()),
        (Some("text"), Some("hello @4915100000002"))
    );
    assert_eq!(
        (got["direction"].as_str(), got["from"].as_str()),
        (Some("incoming"), Some(from.as_str()))
    );
    assert_eq!(got["mentionedIds"], json!([to]));

    let image = p.post("messages/send-image", json!({ "chatId": to, "base64": b64(b"PNGDATA"), "mimetype": "image/png", "caption": "pic" })).await;
    assert_eq!(image.status, 201, "{}", image.text);
    let got = p
        .wait_message(&p.b, "type=image", |m| {
            m["waMessageId"] == image.str("messageId").as_str()
        })
        .await;
    assert_eq!(got["hasMedia"], true);
    assert_eq!(got["body"], "pic");
    assert_eq!(got["media"]["data"], b64(b"PNGDATA"));
    let no_inline = p
        .wait_message(&p.b, "type=image&inlineMedia=false", |_| true)
        .await;
    assert_eq!(no_inline["media"]["omitted"], true);
    assert_eq!(no_inline["media"]["sizeBytes"], 7);
    // In B's store the message belongs to the chat with A.
    let raw = p
        .client
        .get(&format!(
            "/api/sessions/{}/messages/{from}/{}/media",
            p.b,
            got["id"].as_str().unwrap_or_default()
        ))
        .await
        .unwrap();
    assert_eq!((raw.status, raw.text.as_str()), (200, "PNGDATA"));

    let voice = p
        .post(
            "messages/send-audio",
            json!({ "chatId": to, "base64": b64(b"OGG"), "mimetype": "audio/ogg", "ptt": true,
                "caption": "spoken" }),
        )
        .await;
    assert_eq!(voice.status, 201, "{}", voice.text);
    let got = p
        .wait_message(&p.b, "type=voice", |m| {
            m["waMessageId"] == voice.str("messageId").as_str()
        })
        .await;
    // Voice notes (and audio, stickers) have no caption on WhatsApp: one sent along is dropped.
    assert!(got["body"].as_str().unwrap_or_default().is_empty(), "{got}");
    let audio = p
        .post(
            "messages/send-audio",
            json!({ "chatId": to, "base64": b64(b"MP3"), "mimetype": "audio/mpeg" }),
        )
        .await;
    p.wait_message(&p.b, "type=audio", |m| {
        m["waMessageId"] == audio.str("messageId").as_str()
    })
    .await;
    for (route, kind) in [
        ("send-video", "video"),
        ("send-document", "document"),
        ("send-sticker", "sticker"),
    ] {
        let sent = p.post(&format!("messages/{route}"), json!({ "chatId": to, "base64": b64(b"BYTES"), "mimetype": "application/octet-stream", "filename": "f.bin", "caption": "under" })).await;
        assert_eq!(sent.status, 201, "{route}: {}", sent.text);
        let got = p
            .wait_message(&p.b, &format!("type={kind}"), |m| {
                m["waMessageId"] == sent.str("messageId").as_str()
            })
            .await;
        let captioned = kind != "sticker";
        assert_eq!(got["body"] == "under", captioned, "{route}: {got}");
    }

    let loc = p
        .post(
            "messages/send-location",
            json!({ "chatId": to, "latitude": 52.52, "longitude": 13.4, "description": "Berlin" }),
        )
        .await;
    assert_eq!(loc.status, 201, "{}", loc.text);
    let got = p.wait_message(&p.b, "type=location", |_| true).await;
    assert_eq!(got["body"], "Berlin");
    let contact = p
        .post(
            "messages/send-contact",
            json!({ "chatId": to, "contactName": "Ann", "contactNumber": "4915199999999" }),
        )
        .await;
    assert_eq!(contact.status, 201, "{}", contact.text);
    let got = p.wait_message(&p.b, "type=contact", |_| true).await;
    assert!(
        got["body"]
            .as_str()
            .unwrap_or_default()
            .contains("waid=4915199999999")
    );
    let poll = p
        .post(
            "messages/send-poll",
            json!({ "chatId": to, "name": "Lunch?", "options": ["yes", "no"] }),
        )
        .await;
    assert_eq!(poll.status, 201, "{}", poll.text);
    let got = p.wait_message(&p.b, "type=poll", |_| true).await;
    assert_eq!(got["body"], "Lunch?");
    let product = p
        .post(
            "messages/send-product",
            json!({ "chatId": to, "productId": "sim-product-1" }),
        )
        .await;
    assert_eq!(product.status, 201, "{}", product.text);
    assert!(product.body["id"].is_string() && product.body["timestamp"].is_i64());
    p.wait_message(&p.b, "type=product", |_| true).await;
}

#[tokio::test]
async fn reply_forward_and_template_sends() {
    let p = pair(options()).await;
    let to = jid(PHONE_B);
    let first = p
        .post(
            "messages/send-text",
            json!({ "chatId": to, "text": "original" }),
        )
        .await;
    let first_id = first.str("messageId");
    let reply = p
        .post(
            "messages/reply",
            json!({ "chatId": to, "quotedMessageId": first_id, "text": "answer" }),
        )
        .await;
    assert_eq!(reply.status, 201, "{}", reply.text);
    p.wait_message(&p.b, "", |m| m["body"] == "answer").await;
    let unknown = p
        .post(
            "messages/reply",
            json!({ "chatId": to, "quotedMessageId": "nope", "text": "x" }),
        )
        .await;
    assert_eq!(unknown.status, 404, "{}", unknown.text);
    assert_eq!(unknown.body["message"], "Message nope not found");
    let quoted_text = p
        .post(
            "messages/send-text",
            json!({ "chatId": to, "text": "x", "quotedMessageId": "nope" }),
        )
        .await;
    assert_eq!(quoted_text.status, 404);

    let fwd = p
        .post(
            "messages/forward",
            json!({ "fromChatId": to, "toChatId": to, "messageId": first_id }),
        )
        .await;
    assert_eq!(fwd.status, 201, "{}", fwd.text);
    p.wait_message(&p.b, "", |m| {
        m["waMessageId"] == fwd.str("messageId").as_str() && m["body"] == "original"
    })
    .await;

    let path = format!("/api/sessions/{}/templates", p.a);
    let created = p
        .client
        .post(
            &path,
            json!({ "name": "greet", "body": "Hi {{name}}!", "footer": "bye" }),
        )
        .await
        .unwrap();
    assert_eq!(created.status, 201, "{}", created.text);
    let tpl_id = created.str("id");
    let dup = p
        .client
        .post(&path, json!({ "name": "greet", "body": "x" }))
        .await
        .unwrap();
    assert_eq!(dup.status, 409);
    let null_name = p
        .client
        .put(&format!("{path}/{tpl_id}"), json!({ "name": null }))
        .await
        .unwrap();
    assert_eq!(null_name.status, 400, "{}", null_name.text);
    let updated = p
        .client
        .put(
            &format!("{path}/{tpl_id}"),
            json!({ "body": "Hello {{name}}!" }),
        )
        .await
        .unwrap();
    assert_eq!(
        (updated.status, updated.str("body")),
        (200, "Hello {{name}}!".to_string())
    );
    let listed = p.client.get(&path).await.unwrap();
    assert_eq!(listed.body.as_array().map(Vec::len), Some(1));
    let sent = p
        .post(
            "messages/send-template",
            json!({ "chatId": to, "templateName": "greet", "vars": { "name": "Bob" } }),
        )
        .await;
    assert_eq!(sent.status, 201, "{}", sent.text);
    p.wait_message(&p.b, "", |m| m["body"] == "Hello Bob!\n\nbye")
        .await;
    let by_id = p
        .post(
            "messages/send-template",
            json!({ "chatId": to, "templateId": tpl_id, "vars": { "name": "Al" } }),
        )
        .await;
    assert_eq!(by_id.status, 201, "{}", by_id.text);
    let neither = p
        .post("messages/send-template", json!({ "chatId": to }))
        .await;
    assert_eq!(neither.status, 400);
    assert!(neither.str("message").contains("templateId"));
    let deleted = p.client.delete(&format!("{path}/{tpl_id}")).await.unwrap();
    assert_eq!(deleted.status, 204);

    let own = p
        .wait_message(&p.a, "direction=outgoing", |m| {
            m["waMessageId"] == first_id.as_str()
        })
        .await;
    assert_eq!(own["type"], "text");
    let acked = p
        .wait_message(&p.a, "direction=outgoing", |m| {
            m["waMessageId"] == first_id.as_str() && m["status"] == "read"
        })
        .await;
    assert_eq!(acked["to"], Value::String(to));
}

#[tokio::test]
async fn sends_answer_409_until_the_session_is_ready_and_404_for_unknown_sessions() {
    let node = wagate_loadtest::harness::Node::start(options())
        .await
        .unwrap();
    let client = node.client();
    let id = create_session(&client, "idle").await;
    let body = json!({ "chatId": jid(PHONE_B), "text": "hi" });
    let reply = client
        .post(
            &format!("/api/sessions/{id}/messages/send-text"),
            body.clone(),
        )
        .await
        .unwrap();
    assert_eq!(reply.status, 409, "{}", reply.text);
    assert_eq!(reply.body["message"], "Session is not connected");
    let product = client
        .post(
            &format!("/api/sessions/{id}/messages/send-product"),
            json!({ "chatId": jid(PHONE_B), "productId": "x" }),
        )
        .await
        .unwrap();
    assert_eq!(product.status, 409);
    let bulk = client
        .post(
            &format!("/api/sessions/{id}/messages/send-bulk"),
            json!({ "messages": [{ "chatId": jid(PHONE_B), "type": "text", "content": { "text": "hi" } }] }),
        )
        .await
        .unwrap();
    assert_eq!(bulk.status, 409, "a bulk send is a send: {}", bulk.text);
    let missing = client
        .post(
            "/api/sessions/00000000-0000-4000-8000-000000000000/messages/send-text",
            body,
        )
        .await
        .unwrap();
    assert_eq!(missing.status, 404, "{}", missing.text);
}
