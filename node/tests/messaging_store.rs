//! The message store's list (cursor paging, filters), bulk batches that survive a restart, wait while
//! their session is stopped and can be cancelled, and send pacing refusals.

mod messaging_support;

use std::collections::HashSet;
use std::time::{Duration, Instant};

use messaging_support::*;
use serde_json::{Value, json};

#[tokio::test]
async fn cursor_paging_over_500_messages_returns_each_once() {
    let p = pair(options()).await;
    for i in 0..500 {
        let from = format!("49170{:07}", i % 7);
        let r = p
            .client
            .post(
                &format!("/api/sim/sessions/{}/inbound", p.a),
                json!({ "from": jid(&from), "type": "text", "body": format!("m{i}") }),
            )
            .await
            .unwrap();
        assert_eq!(r.status, 200, "{}", r.text);
    }
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut seen = HashSet::new();
    loop {
        seen.clear();
        let mut after = String::new();
        loop {
            let page = p
                .client
                .get(&format!(
                    "/api/sessions/{}/messages?limit=37&after={after}",
                    p.a
                ))
                .await
                .unwrap();
            assert_eq!(page.status, 200, "{}", page.text);
            let rows = page.body.as_array().cloned().unwrap_or_default();
            for row in &rows {
                assert!(
                    seen.insert(row["id"].as_str().unwrap_or_default().to_string()),
                    "duplicate row"
                );
            }
            match rows.last() {
                Some(last) if rows.len() == 37 => {
                    after = last["waMessageId"].as_str().unwrap_or_default().to_string()
                }
                _ => break,
            }
        }
        if seen.len() == 500 || Instant::now() > deadline {
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert_eq!(seen.len(), 500);
    let unknown = p
        .client
        .get(&format!("/api/sessions/{}/messages?after=nope", p.a))
        .await
        .unwrap();
    assert_eq!(unknown.status, 400, "{}", unknown.text);
    let blank = p
        .client
        .get(&format!("/api/sessions/{}/messages?after=&offset=490", p.a))
        .await
        .unwrap();
    assert_eq!(blank.body.as_array().map(Vec::len), Some(10));
    let from = p
        .client
        .get(&format!(
            "/api/sessions/{}/messages?limit=1000&from={}",
            p.a,
            jid("491700000003")
        ))
        .await
        .unwrap();
    assert_eq!(from.body.as_array().map(Vec::len), Some(71));
    let bad = p
        .client
        .get(&format!("/api/sessions/{}/messages?limit=0", p.a))
        .await
        .unwrap();
    assert_eq!(bad.status, 400);
}

async fn batch(p: &Pair, id: &str) -> Value {
    p.client
        .get(&format!("/api/sessions/{}/messages/batch/{id}", p.a))
        .await
        .unwrap()
        .body
}

#[tokio::test]
async fn a_bulk_batch_survives_a_node_restart() {
    let mut p = pair(options()).await;
    let items: Vec<_> = (0..4).map(|i| json!({ "chatId": jid(PHONE_B), "type": "text", "content": { "text": format!("bulk {i}") } })).collect();
    let accepted = p.post("messages/send-bulk", json!({ "messages": items, "options": { "delayBetweenMessages": 1000 }, "batchId": "b-1" })).await;
    assert_eq!(accepted.status, 202, "{}", accepted.text);
    assert_eq!(
        (
            accepted.str("status"),
            accepted.body["totalMessages"].as_u64()
        ),
        ("processing".into(), Some(4))
    );
    assert_eq!(
        accepted.str("statusUrl"),
        format!("/api/sessions/{}/messages/batch/b-1", p.a)
    );
    let dup = p.post("messages/send-bulk", json!({ "messages": [{ "chatId": jid(PHONE_B), "type": "text", "content": { "text": "x" } }], "batchId": "b-1" })).await;
    assert_eq!(dup.status, 400, "{}", dup.text);
    let deadline = Instant::now() + Duration::from_secs(10);
    while batch(&p, "b-1").await["progress"]["sent"]
        .as_u64()
        .unwrap_or(0)
        < 1
    {
        assert!(Instant::now() < deadline);
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    p.node.restart().await.unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let status = batch(&p, "b-1").await;
        if status["status"] == "completed" {
            assert_eq!(
                status["progress"],
                json!({ "total": 4, "sent": 4, "failed": 0, "pending": 0, "cancelled": 0 }),
                "{status}"
            );
            assert!(
                status["results"][3]["messageId"].is_string() && status["completedAt"].is_string()
            );
            break;
        }
        assert!(Instant::now() < deadline, "{status}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let bodies: HashSet<String> = p
        .client
        .get(&format!(
            "/api/sessions/{}/messages?direction=outgoing",
            p.a
        ))
        .await
        .unwrap()
        .body
        .as_array()
        .cloned()
        .unwrap_or_default()
        .iter()
        .map(|m| m["body"].as_str().unwrap_or_default().to_string())
        .collect();
    assert_eq!(bodies.len(), 4, "{bodies:?}");
}

/// A batch sends only where its session runs: stopped, the session keeps its batch `processing` with the
/// rest pending (none marked failed unsent), and a later start sends the rest.
#[tokio::test]
async fn a_batch_of_a_stopped_session_waits_for_its_next_start() {
    let p = pair(options()).await;
    let items: Vec<_> = (0..3).map(|i| json!({ "chatId": jid(PHONE_B), "type": "text", "content": { "text": format!("later {i}") } })).collect();
    let accepted = p
        .post(
            "messages/send-bulk",
            json!({ "messages": items, "options": { "delayBetweenMessages": 2000 }, "batchId": "b-stop" }),
        )
        .await;
    assert_eq!(accepted.status, 202, "{}", accepted.text);
    let deadline = Instant::now() + Duration::from_secs(10);
    while batch(&p, "b-stop").await["progress"]["sent"] != 1 {
        assert!(Instant::now() < deadline);
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let stopped = p
        .client
        .post_empty(&format!("/api/sessions/{}/stop", p.a))
        .await
        .unwrap();
    assert_eq!(stopped.status, 200, "{}", stopped.text);
    // Past the item delay and more than one resume look: nothing is sent or failed while it is stopped.
    tokio::time::sleep(Duration::from_secs(5)).await;
    let waiting = batch(&p, "b-stop").await;
    assert_eq!(waiting["status"], "processing", "{waiting}");
    assert_eq!(
        waiting["progress"],
        json!({ "total": 3, "sent": 1, "failed": 0, "pending": 2, "cancelled": 0 }),
        "{waiting}"
    );
    let started = p
        .client
        .post_empty(&format!("/api/sessions/{}/start", p.a))
        .await
        .unwrap();
    assert_eq!(started.status, 200, "{}", started.text);
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let status = batch(&p, "b-stop").await;
        if status["status"] == "completed" {
            assert_eq!(status["progress"]["sent"], 3, "{status}");
            break;
        }
        assert!(Instant::now() < deadline, "{status}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[tokio::test]
async fn stop_on_error_ends_the_batch_at_its_first_failed_item() {
    let p = pair(options()).await;
    // The outbound-address guard refuses a loopback media URL: the item fails when it is sent.
    let blocked = json!({ "chatId": jid(PHONE_B), "type": "image",
        "content": { "image": { "url": "http://127.0.0.1:9/blocked.png" } } });
    let after = json!({ "chatId": jid(PHONE_B), "type": "text", "content": { "text": "after" } });
    let accepted = p
        .post(
            "messages/send-bulk",
            json!({ "messages": [blocked, after], "batchId": "b-stop-on-error",
                "options": { "delayBetweenMessages": 1000, "stopOnError": true } }),
        )
        .await;
    assert_eq!(accepted.status, 202, "{}", accepted.text);
    let deadline = Instant::now() + Duration::from_secs(30);
    let done = loop {
        let status = batch(&p, "b-stop-on-error").await;
        if status["status"] != "processing" {
            break status;
        }
        assert!(Instant::now() < deadline, "{status}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert_eq!(done["status"], "failed", "{done}");
    assert_eq!(
        done["progress"],
        json!({ "total": 2, "sent": 0, "failed": 1, "pending": 0, "cancelled": 1 }),
        "{done}"
    );
}

/// A batchId is unique within its session only: another session may use it (and learns nothing of the
/// first session's batch), while the same session reusing it is refused; each session reads and cancels
/// its own batch.
#[tokio::test]
async fn a_batch_id_is_unique_per_session() {
    let p = pair(options()).await;
    let submit = |session: &str, to: &str| {
        let path = format!("/api/sessions/{session}/messages/send-bulk");
        let items: Vec<_> = (0..3)
            .map(|_| json!({ "chatId": jid(to), "type": "text", "content": { "text": "u" } }))
            .collect();
        let body = json!({ "messages": items, "batchId": "my-batch-1",
            "options": { "delayBetweenMessages": 60000 } });
        let client = p.client.clone();
        async move { client.post(&path, body).await.unwrap() }
    };
    let first = submit(&p.a, PHONE_B).await;
    assert_eq!(first.status, 202, "{}", first.text);
    let again = submit(&p.a, PHONE_B).await;
    assert_eq!(again.status, 400, "{}", again.text);
    assert!(
        again.str("message").contains("already exists"),
        "{}",
        again.text
    );
    let other = submit(&p.b, PHONE_A).await;
    assert_eq!(other.status, 202, "{}", other.text);
    assert_eq!(
        other.str("statusUrl"),
        format!("/api/sessions/{}/messages/batch/my-batch-1", p.b)
    );
    let cancel =
        |session: &str| format!("/api/sessions/{session}/messages/batch/my-batch-1/cancel");
    let cancelled = p.client.post(&cancel(&p.b), json!({})).await.unwrap();
    assert_eq!(cancelled.status, 200, "{}", cancelled.text);
    let theirs = p.client.get(&other.str("statusUrl")).await.unwrap();
    assert_eq!(theirs.body["status"], "cancelled", "{}", theirs.text);
    assert_eq!(theirs.body["results"][0]["chatId"], jid(PHONE_A));
    let ours = batch(&p, "my-batch-1").await;
    assert_eq!(ours["status"], "processing", "{ours}");
    assert_eq!(ours["results"][0]["chatId"], jid(PHONE_B));
    let cancelled = p.client.post(&cancel(&p.a), json!({})).await.unwrap();
    assert_eq!(cancelled.status, 200, "{}", cancelled.text);
}

#[tokio::test]
async fn a_cancelled_batch_stops_and_reports_cancelled_items() {
    let p = pair(options()).await;
    let items: Vec<_> = (0..3)
        .map(|_| json!({ "chatId": jid(PHONE_B), "type": "text", "content": { "text": "c" } }))
        .collect();
    let accepted = p
        .post(
            "messages/send-bulk",
            json!({ "messages": items, "options": { "delayBetweenMessages": 5000 } }),
        )
        .await;
    let id = accepted.str("batchId");
    tokio::time::sleep(Duration::from_millis(500)).await;
    let cancelled = p
        .post(&format!("messages/batch/{id}/cancel"), json!({}))
        .await;
    assert_eq!(cancelled.status, 200, "{}", cancelled.text);
    assert_eq!(cancelled.body["status"], "cancelled");
    assert_eq!(cancelled.body["progress"]["cancelled"], 2);
    assert_eq!(batch(&p, &id).await["status"], "cancelled");
    let again = p
        .post(&format!("messages/batch/{id}/cancel"), json!({}))
        .await;
    assert_eq!(again.status, 400, "a finished batch: {}", again.text);
    assert_eq!(batch(&p, &id).await["status"], "cancelled");
    let missing = p
        .client
        .get(&format!("/api/sessions/{}/messages/batch/nope", p.a))
        .await
        .unwrap();
    assert_eq!(missing.status, 404);
}

#[tokio::test]
async fn a_cancel_right_after_submit_reports_what_was_really_sent() {
    let p = pair(options()).await;
    for round in 0..3 {
        let items: Vec<_> = (0..4)
            .map(|i| {
                json!({ "chatId": jid(PHONE_B), "type": "text",
                    "content": { "text": format!("cancel-{round}-{i}") } })
            })
            .collect();
        let accepted = p
            .post(
                "messages/send-bulk",
                json!({ "messages": items, "options": { "delayBetweenMessages": 5000 } }),
            )
            .await;
        assert_eq!(accepted.status, 202, "{}", accepted.text);
        let id = accepted.str("batchId");
        let cancelled = p
            .post(&format!("messages/batch/{id}/cancel"), json!({}))
            .await;
        assert_eq!(cancelled.status, 200, "{}", cancelled.text);
        // The first item may have been in flight: the answer counts it as it ended, never as cancelled.
        tokio::time::sleep(Duration::from_millis(300)).await;
        let later = batch(&p, &id).await;
        assert_eq!(later["progress"], cancelled.body["progress"], "{later}");
        let progress = &cancelled.body["progress"];
        assert_eq!(progress["pending"], 0, "{progress}");
        assert_eq!(
            progress["sent"].as_u64().unwrap_or(9) + progress["cancelled"].as_u64().unwrap_or(9),
            4,
            "{progress}"
        );
    }
}

#[tokio::test]
async fn send_pacing_refuses_with_429_and_counts_the_refusals() {
    let opts = options()
        .env("SEND_PACING_ENABLED", "true")
        .env("SEND_PACING_WARMUP_START", "3")
        .env("SEND_PACING_COLD_DAILY", "1")
        .env("METRICS_TOKEN", "metrics-token");
    let p = pair(opts).await;
    let send = |to: String| p.post("messages/send-text", json!({ "chatId": to, "text": "hi" }));
    assert_eq!(send(jid(PHONE_B)).await.status, 201);
    let cold = send(jid("4915188888888")).await;
    assert_eq!(cold.status, 429, "{}", cold.text);
    assert_eq!(cold.str("code"), "SEND_PACING_LIMITED");
    assert!(cold.body["retryAfterSeconds"].as_u64().unwrap_or(0) > 0);
    assert!(cold.str("message").contains("cold_reachout"));
    assert_eq!(send(jid(PHONE_B)).await.status, 201);
    assert_eq!(send(jid(PHONE_B)).await.status, 201);
    let ramp = send(jid(PHONE_B)).await;
    assert_eq!(
        (ramp.status, ramp.str("code")),
        (429, "SEND_PACING_LIMITED".to_string())
    );
    assert!(ramp.str("message").contains("warmup"), "{}", ramp.text);
    let req = p
        .client
        .raw(reqwest::Method::GET, "/api/metrics")
        .header("Authorization", "Bearer metrics-token");
    let metrics = p.client.send(req).await.unwrap();
    assert!(
        metrics
            .text
            .contains("wagate_sends_refused_total{reason=\"pacing\"} 2"),
        "{}",
        metrics.text
    );
}

/// Pages serve rows, and on this single SQLite node whole pages, from memory (`messaging/page_cache.rs`), never
/// past a write: an edit and a send the API answered show in the very next page, and a receipt the network
/// sends shows once it is stored, on a row read before.
#[tokio::test]
async fn a_page_read_before_a_write_shows_the_write() {
    let p = pair(options()).await;
    let to = jid(PHONE_B);
    let send = async |text: &str| {
        let sent = p
            .post("messages/send-text", json!({ "chatId": to, "text": text }))
            .await;
        assert_eq!(sent.status, 201, "{}", sent.text);
        sent.str("messageId")
    };
    let first_page = async || {
        let page = p
            .client
            .get(&format!("/api/sessions/{}/messages", p.a))
            .await
            .unwrap();
        assert_eq!(page.status, 200, "{}", page.text);
        page.body.as_array().cloned().unwrap_or_default()
    };
    let id = send("first draft").await;
    let mine = |m: &Value| m["waMessageId"] == id.as_str();
    p.wait_message(&p.a, "", |m| mine(m) && m["body"] == "first draft")
        .await;
    let edit = p
        .post(
            "messages/edit",
            json!({ "chatId": to, "messageId": id, "body": "second draft" }),
        )
        .await;
    assert_eq!(edit.status, 200, "{}", edit.text);
    let rows = first_page().await;
    let row = rows.iter().find(|m| mine(m));
    assert_eq!(
        row.map(|m| m["body"].clone()),
        Some(json!("second draft")),
        "{rows:?}"
    );
    let follow_up = send("follow-up").await;
    let rows = first_page().await;
    assert!(
        rows.iter().any(|m| m["waMessageId"] == follow_up.as_str()),
        "{rows:?}"
    );
    let ack = p
        .client
        .post(
            &format!("/api/sim/sessions/{}/ack", p.a),
            json!({ "messageId": id, "status": "read" }),
        )
        .await
        .unwrap();
    assert_eq!(ack.status, 200, "{}", ack.text);
    p.wait_message(&p.a, "", |m| mine(m) && m["status"] == "read")
        .await;
}

/// A message deleted for everyone, by us (`messages/delete`) or by the other side (the sim's `revoke`),
/// keeps its row as type `revoked` with no body and no media: the list and the chat history no longer
/// show what it said, search no longer finds it (the chat itself still matches), and it is no chat's
/// last message. Each side's stored copy changes.
#[tokio::test]
async fn a_message_deleted_for_everyone_is_stored_as_revoked_without_its_content() {
    let p = pair(options()).await;
    let (to, stranger) = (jid(PHONE_B), jid("4915100000077"));
    let sent = p
        .post(
            "messages/send-text",
            json!({ "chatId": to, "text": "pineapple secret" }),
        )
        .await;
    assert_eq!(sent.status, 201, "{}", sent.text);
    let own = sent.str("messageId");
    let png = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==";
    let inbound = p
        .client
        .post(
            &format!("/api/sim/sessions/{}/inbound", p.a),
            json!({ "from": stranger, "type": "image", "body": "pineapple photo",
                    "media": { "data": png, "mimetype": "image/png" } }),
        )
        .await
        .unwrap();
    assert_eq!(inbound.status, 200, "{}", inbound.text);
    let theirs = inbound.str("messageId");
    for (session, id) in [(&p.a, &own), (&p.b, &own), (&p.a, &theirs)] {
        p.wait_message(session, "", |m| m["waMessageId"] == id.as_str())
            .await;
    }
    let search = async || {
        let found = p.client.get("/api/search?q=pineapple").await.unwrap();
        assert_eq!(found.status, 200, "{}", found.text);
        found.body
    };
    assert_eq!(search().await["total"], 3);

    let deleted = p
        .post("messages/delete", json!({ "chatId": to, "messageId": own }))
        .await;
    assert_eq!(deleted.status, 200, "{}", deleted.text);
    let revoked = p
        .client
        .post(
            &format!("/api/sim/sessions/{}/revoke", p.a),
            json!({ "messageId": theirs }),
        )
        .await
        .unwrap();
    assert_eq!(revoked.status, 200, "{}", revoked.text);

    for (session, id) in [(&p.a, &own), (&p.b, &own), (&p.a, &theirs)] {
        let row = p
            .wait_message(session, "", |m| {
                m["waMessageId"] == id.as_str() && m["type"] == "revoked"
            })
            .await;
        assert_eq!(row["body"], "", "{row}");
        assert_eq!(row["hasMedia"], false, "{row}");
        assert!(row["media"].is_null(), "{row}");
    }
    let history = p
        .client
        .get(&format!(
            "/api/sessions/{}/messages/{stranger}/history",
            p.a
        ))
        .await
        .unwrap();
    assert_eq!(history.status, 200, "{}", history.text);
    assert!(!history.text.contains("pineapple"), "{}", history.text);
    assert_eq!(history.body[0]["type"], "revoked", "{}", history.text);

    let found = search().await;
    assert_eq!(found["total"], 0, "{found}");
    let chat = p.client.get("/api/search?q=4915100000077").await.unwrap();
    assert_eq!(
        chat.body["chats"][0]["id"],
        stranger.as_str(),
        "{}",
        chat.text
    );

    for (session, chat) in [(&p.a, &to), (&p.a, &stranger), (&p.b, &jid(PHONE_A))] {
        let chats = p
            .client
            .get(&format!("/api/sessions/{session}/chats"))
            .await
            .unwrap();
        assert_eq!(chats.status, 200, "{}", chats.text);
        let listed = chats
            .body
            .as_array()
            .and_then(|all| all.iter().find(|c| c["id"] == chat.as_str()).cloned())
            .unwrap_or_default();
        assert_eq!(
            listed["id"],
            chat.as_str(),
            "the chat stays: {}",
            chats.text
        );
        assert!(listed["lastMessage"].is_null(), "{listed}");
    }
}

/// A chat's `lastMessage` shows an edit of it, whichever side made it: ours (`messages/edit`, on both
/// sides' chat lists) and the other side's (the sim's `edit`), as the message list does.
#[tokio::test]
async fn a_chats_last_message_shows_its_edit() {
    let p = pair(options()).await;
    let (to, stranger) = (jid(PHONE_B), jid("4915100000077"));
    let last_message = async |session: &str, chat: &str| {
        let chats = p
            .client
            .get(&format!("/api/sessions/{session}/chats"))
            .await
            .unwrap();
        assert_eq!(chats.status, 200, "{}", chats.text);
        chats
            .body
            .as_array()
            .and_then(|all| all.iter().find(|c| c["id"] == chat).cloned())
            .map(|c| c["lastMessage"].clone())
    };
    let sent = p
        .post(
            "messages/send-text",
            json!({ "chatId": to, "text": "frist" }),
        )
        .await;
    assert_eq!(sent.status, 201, "{}", sent.text);
    let own = sent.str("messageId");
    p.wait_message(&p.b, "", |m| m["waMessageId"] == own.as_str())
        .await;
    let edit = p
        .post(
            "messages/edit",
            json!({ "chatId": to, "messageId": own, "body": "first" }),
        )
        .await;
    assert_eq!(edit.status, 200, "{}", edit.text);
    assert_eq!(last_message(&p.a, &to).await, Some(json!("first")));
    assert_eq!(
        last_message(&p.b, &jid(PHONE_A)).await,
        Some(json!("first"))
    );

    let inbound = p
        .client
        .post(
            &format!("/api/sim/sessions/{}/inbound", p.a),
            json!({ "from": stranger, "type": "text", "body": "helo" }),
        )
        .await
        .unwrap();
    assert_eq!(inbound.status, 200, "{}", inbound.text);
    let theirs = inbound.str("messageId");
    let edited = p
        .client
        .post(
            &format!("/api/sim/sessions/{}/edit", p.a),
            json!({ "messageId": theirs, "body": "hello" }),
        )
        .await
        .unwrap();
    assert_eq!(edited.status, 200, "{}", edited.text);
    assert_eq!(last_message(&p.a, &stranger).await, Some(json!("hello")));
    p.wait_message(&p.a, "", |m| {
        m["waMessageId"] == theirs.as_str() && m["body"] == "hello"
    })
    .await;
}

/// `wagate_messages_failed_total` follows `message.failed`: a send the engine accepted (201) that the network
/// then fails counts once under its type, however often the network reports the failure.
#[tokio::test]
async fn a_send_the_network_fails_counts_as_failed_once() {
    let p = pair(options().env("METRICS_TOKEN", "metrics-token")).await;
    let failed_texts = async || {
        let req = p
            .client
            .raw(reqwest::Method::GET, "/api/metrics")
            .header("Authorization", "Bearer metrics-token");
        let metrics = p.client.send(req).await.unwrap();
        assert_eq!(metrics.status, 200, "{}", metrics.text);
        metrics
            .text
            .lines()
            .find_map(|l| l.strip_prefix("wagate_messages_failed_total{type=\"text\"} "))
            .and_then(|v| v.parse::<f64>().ok())
    };
    let send = async |text: &str| {
        let sent = p
            .post(
                "messages/send-text",
                json!({ "chatId": jid(PHONE_B), "text": text }),
            )
            .await;
        assert_eq!(sent.status, 201, "{}", sent.text);
        sent.str("messageId")
    };
    let ack = async |id: &str, status: &str| {
        let acked = p
            .client
            .post(
                &format!("/api/sim/sessions/{}/ack", p.a),
                json!({ "messageId": id, "status": status }),
            )
            .await
            .unwrap();
        assert_eq!(acked.status, 200, "{}", acked.text);
    };
    let doomed = send("doomed").await;
    let fine = send("fine").await;
    assert_eq!(failed_texts().await, Some(0.0));
    ack(&doomed, "failed").await;
    p.wait_message(&p.a, "", |m| {
        m["waMessageId"] == doomed.as_str() && m["status"] == "failed"
    })
    .await;
    let deadline = Instant::now() + Duration::from_secs(10);
    while failed_texts().await != Some(1.0) && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(failed_texts().await, Some(1.0));
    // Reported again, then a receipt for another message: the session's events are written in order, so
    // once the receipt shows, the repeated failure has been handled.
    ack(&doomed, "failed").await;
    ack(&fine, "read").await;
    p.wait_message(&p.a, "", |m| {
        m["waMessageId"] == fine.as_str() && m["status"] == "read"
    })
    .await;
    assert_eq!(failed_texts().await, Some(1.0));
}
