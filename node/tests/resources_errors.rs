//! How the resource routes fail: 404 unknown session, 409 before 501 for a session never started, the
//! sim's 501 rows with the operation name, 503 when the network does not answer within the engine query
//! budget, and 400 for status posts without recipients; and the order of a session-scoped route's checks
//! (403 key, 400 body and fields, 404 unknown session, 409 not ready) on every kind of session route.

mod resources_support;

use reqwest::Method;
use resources_support::{at, created_session, jid, key, linked_session, node, node_with};
use serde_json::json;

const ALICE: &str = "4915200000001";

#[tokio::test]
async fn never_started_session_answers_409_before_501_and_unknown_is_404() {
    let node = node().await;
    let c = node.client();
    let idle = created_session(&c, "idle").await;
    for path in ["/labels", "/channels", "/groups", "/contacts", "/chats"] {
        let reply = c.get(&at(&idle, path)).await.expect("get");
        assert_eq!(reply.status, 409, "{path}: {}", reply.text);
        assert_eq!(reply.str("message"), "Session is not connected");
    }
    let unknown = "3f2504e0-4f89-41d3-9a0c-0305e82c3301";
    assert_eq!(
        c.get(&at(unknown, "/groups")).await.expect("get").status,
        404
    );
    assert_eq!(
        c.get(&at("by-name", "/groups")).await.expect("get").status,
        400
    );
}

#[tokio::test]
async fn socket_column_refusals_answer_501_with_the_operation() {
    let node = node().await;
    let c = node.client();
    let alice = linked_session(&c, "alice", ALICE).await;
    let rows = [
        ("/labels", "getLabels"),
        ("/labels/7", "getLabel"),
        ("/labels/7/chats", "getLabelChats"),
        ("/labels/chat/4915200000009@c.us", "getChatLabels"),
        ("/channels", "getChannels"),
        ("/channels/abc123@newsletter/messages", "getChannelMessages"),
    ];
    for (path, op) in rows {
        let reply = c.get(&at(&alice, path)).await.expect("get");
        assert_eq!(reply.status, 501, "{path}: {}", reply.text);
        assert_eq!(
            reply.str("message"),
            format!("Operation not supported by the active engine: {op}")
        );
    }
}

#[tokio::test]
async fn unanswered_queries_answer_503_and_never_exists_false() {
    let node = node_with(&[("ENGINE_QUERY_TIMEOUT_MS", "300")]).await;
    let c = node.client();
    let alice = linked_session(&c, "alice", ALICE).await;
    let faults = c
        .post(
            &format!("/api/sim/sessions/{alice}/faults"),
            json!({ "queryDelayMs": 3000 }),
        )
        .await
        .expect("faults");
    assert!(faults.status < 300, "{}", faults.text);
    for path in [
        "/groups",
        "/contacts/check/4915200000002",
        "/contacts/4915200000002@c.us/profile-picture",
    ] {
        let reply = c.get(&at(&alice, path)).await.expect("get");
        assert_eq!(reply.status, 503, "{path}: {}", reply.text);
    }
    let write = c
        .post(
            &at(&alice, "/chats/archive"),
            json!({ "chatId": jid("4915200000002"), "archive": true }),
        )
        .await
        .expect("archive");
    assert_eq!(write.status, 503, "{}", write.text);
    let read = c
        .post(
            &at(&alice, "/chats/read"),
            json!({ "chatId": jid("4915200000002") }),
        )
        .await
        .expect("read");
    assert_eq!(read.status, 503, "chats read: {}", read.text);
    // Routes that never answer 503 are not bounded by the query budget.
    let link = c
        .post(
            &at(&alice, "/calls/link"),
            json!({ "type": "video", "startTime": 1_700_000_000_000_i64 }),
        )
        .await
        .expect("link");
    assert_eq!(link.status, 200, "{}", link.text);
    c.post(
        &format!("/api/sim/sessions/{alice}/faults"),
        json!({ "queryDelayMs": 0 }),
    )
    .await
    .expect("faults");
    assert_eq!(
        c.get(&at(&alice, "/groups")).await.expect("get").status,
        200
    );
}

#[tokio::test]
async fn status_posts_need_recipients_on_the_socket_column_and_keep_the_message_limits() {
    let node = node().await;
    let c = node.client();
    let alice = linked_session(&c, "alice", ALICE).await;
    let bodies = [
        json!({ "text": "hi" }),
        json!({ "text": "hi", "recipients": [] }),
        json!({ "text": "hi", "recipients": ["not-a-jid"] }),
        json!({ "text": "hi", "recipients": [jid("4915200000002")], "font": 3 }),
        // The message limits apply to status posts too: text 4096, caption 1024 characters.
        json!({ "text": "x".repeat(4097), "recipients": [jid("4915200000002")] }),
    ];
    for body in bodies {
        let reply = c
            .post(&at(&alice, "/status/send-text"), body.clone())
            .await
            .expect("post");
        assert_eq!(reply.status, 400, "{body}: {}", reply.text);
    }
    let too_many: Vec<String> = (0..257).map(|i| jid(&format!("49152000{i:05}"))).collect();
    let reply = c
        .post(
            &at(&alice, "/status/send-image"),
            json!({ "image": { "base64": "aGk=", "mimetype": "image/png" }, "recipients": too_many }),
        )
        .await
        .expect("post");
    assert_eq!(reply.status, 400, "{}", reply.text);
    let reply = c
        .post(
            &at(&alice, "/status/send-image"),
            json!({ "image": { "base64": "aGk=", "mimetype": "image/png" }, "caption": "c".repeat(1025), "recipients": [jid("4915200000002")] }),
        )
        .await
        .expect("post");
    assert_eq!(reply.status, 400, "{}", reply.text);
    assert!(reply.str("message").contains("caption"), "{}", reply.text);
    // A status post's media is a media body: one of url or base64, raw base64, a mimetype with base64.
    let to = [jid("4915200000002")];
    for (media, message) in [
        (
            json!({ "base64": "aGk=" }),
            "mimetype is required with base64: the bytes' type could not be detected",
        ),
        (
            json!({ "base64": "aGk=", "url": "http://127.0.0.1:9/a.png", "mimetype": "image/png" }),
            "exactly one of url or base64 is required",
        ),
        (
            json!({ "base64": "data:image/png;base64,aGk=", "mimetype": "image/png" }),
            "base64 must be raw base64 without a data: URL prefix",
        ),
    ] {
        let reply = c
            .post(
                &at(&alice, "/status/send-image"),
                json!({ "image": media, "recipients": to }),
            )
            .await
            .expect("post");
        assert_eq!(reply.status, 400, "{media}: {}", reply.text);
        assert_eq!(reply.str("message"), message, "{}", reply.text);
    }
}

/// What every session-scoped route answers when more than one thing is wrong: the key first (403), then the
/// path id and the body (400, malformed or a bad field), then the session (404), then its readiness (409).
#[tokio::test]
async fn session_checks_answer_in_the_spec_order() {
    let node = node().await;
    let c = node.client();
    let idle = created_session(&c, "idle").await;
    let unknown = "3f2504e0-4f89-41d3-9a0c-0305e82c3301";
    let malformed = |path: String| {
        let req = c.raw(Method::POST, &path);
        c.send(req.header("content-type", "application/json").body("{"))
    };
    let status = |r: &wagate_loadtest::harness::Reply| (r.status, r.str("message"));
    let chat = json!({ "chatId": jid(ALICE) });

    // Engine routes: malformed body, bad field, unknown, not ready.
    for path in ["/chats/unread", "/messages/send-text"] {
        let r = malformed(at(unknown, path)).await.expect("post");
        assert_eq!(r.status, 400, "{path}: {}", r.text);
        assert!(
            r.str("message").starts_with("Invalid request body"),
            "{path}: {}",
            r.text
        );
    }
    let r = c
        .post(
            &at(unknown, "/chats/unread"),
            json!({ "chatId": "not a jid" }),
        )
        .await
        .expect("post");
    assert_eq!(r.status, 400, "{}", r.text);
    let r = c
        .post(
            &at(unknown, "/messages/send-text"),
            json!({ "chatId": jid(ALICE) }),
        )
        .await
        .expect("post");
    assert_eq!(r.status, 400, "{}", r.text);
    let text = json!({ "chatId": jid(ALICE), "text": "hi" });
    for (path, body) in [("/chats/unread", &chat), ("/messages/send-text", &text)] {
        let r = c
            .post(&at(unknown, path), body.clone())
            .await
            .expect("post");
        assert_eq!(
            status(&r),
            (404, format!("Session {unknown} not found")),
            "{path}"
        );
        let r = c.post(&at(&idle, path), body.clone()).await.expect("post");
        assert_eq!(
            status(&r),
            (409, "Session is not connected".to_owned()),
            "{path}"
        );
    }
    let r = c.get(&at(unknown, "/groups?limit=0")).await.expect("get");
    assert_eq!(r.status, 400, "{}", r.text);
    let r = c
        .put(&at(unknown, "/presence"), json!({}))
        .await
        .expect("put");
    assert_eq!(r.status, 400, "{}", r.text);
    let r = c
        .put(&at(unknown, "/presence"), json!({ "available": true }))
        .await
        .expect("put");
    assert_eq!(r.status, 404, "{}", r.text);
    let r = c
        .put(&at(&idle, "/presence"), json!({ "available": true }))
        .await
        .expect("put");
    assert_eq!(r.status, 409, "{}", r.text);
    let r = c
        .get(&at(unknown, &format!("/presence/{}", jid(ALICE))))
        .await
        .expect("get");
    assert_eq!(r.status, 404, "{}", r.text);

    // Routes on the stored session only.
    for path in [
        "/config",
        "/proxy",
        "/media/convert",
        "/templates",
        "/webhooks",
        "/automation-rules",
    ] {
        let r = c.get(&at(unknown, path)).await.expect("get");
        assert_eq!(r.status, 404, "{path}: {}", r.text);
    }
    for path in [
        "/webhooks",
        "/automation-rules",
        "/templates",
        "/media/convert/voice",
    ] {
        let r = malformed(at(unknown, path)).await.expect("post");
        assert_eq!(r.status, 400, "{path}: {}", r.text);
        assert!(
            r.str("message").starts_with("Invalid request body"),
            "{path}: {}",
            r.text
        );
    }
    // A path id that is not a UUID: the webhook routes read the body first and name the id.
    let r = malformed(at("by-name", "/webhooks")).await.expect("post");
    assert!(
        r.str("message").starts_with("Invalid request body"),
        "{}",
        r.text
    );
    let hook = json!({ "url": "https://example.com/hook", "events": ["message.received"] });
    let r = c
        .post(&at("by-name", "/webhooks"), hook.clone())
        .await
        .expect("post");
    assert_eq!(
        status(&r),
        (
            400,
            "Invalid session id 'by-name': expected a UUID".to_owned()
        )
    );
    // Other spellings uuid would parse (bare hex, braced) are not the session's id either.
    let bare = unknown.replace('-', "");
    let braced = format!("{{{unknown}}}");
    for spelling in [bare.as_str(), braced.as_str()] {
        let r = c
            .post(&at(spelling, "/webhooks"), hook.clone())
            .await
            .expect("post");
        assert_eq!(r.status, 400, "{spelling}: {}", r.text);
    }
    let r = c.post(&at(unknown, "/webhooks"), hook).await.expect("post");
    assert_eq!(r.status, 404, "{}", r.text);
    let r = malformed(at("by-name", "/chats/unread"))
        .await
        .expect("post");
    assert_eq!(
        status(&r),
        (400, "Session 'by-name' is not active".to_owned())
    );

    // The key before anything else: another session's key, and a viewer on a write.
    let other = key(&c, "operator", Some(&[idle.as_str()])).await;
    let scoped = c.with_key(&other);
    for path in [
        "/chats/unread",
        "/messages/send-text",
        "/webhooks",
        "/automation-rules",
    ] {
        let req = scoped.raw(Method::POST, &at(unknown, path)).body("{");
        let r = scoped.send(req).await.expect("post");
        assert_eq!(r.status, 403, "{path}: {}", r.text);
    }
    let viewer = c.with_key(&key(&c, "viewer", None).await);
    let r = viewer
        .send(
            viewer
                .raw(Method::POST, &at(unknown, "/chats/unread"))
                .body("{"),
        )
        .await
        .expect("post");
    assert_eq!(r.status, 403, "{}", r.text);
}

/// A path parameter that is not UTF-8 is a JSON 400 on the queue dashboard's routes too, as on every route.
#[tokio::test]
async fn queue_dashboard_routes_refuse_undecodable_path_parameters_with_json() {
    let node = node().await;
    let c = node.client();
    for (method, path) in [
        (Method::POST, "/api/admin/queues/%ff%fe/jobs/1/retry"),
        (Method::DELETE, "/api/admin/queues/webhook-queue/jobs/%ff"),
        (Method::GET, "/api/admin/queues/assets/%ff"),
    ] {
        let reply = c.send(c.raw(method, path)).await.expect("request");
        assert_eq!(reply.status, 400, "{path}: {}", reply.text);
        assert_eq!(reply.body["statusCode"], 400, "{path}: {}", reply.text);
        assert!(
            reply.str("message").starts_with("Invalid path parameter"),
            "{path}: {}",
            reply.text
        );
    }
}
