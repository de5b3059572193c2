//! Session lifecycle over HTTP on the sim network: every transition row the sim can trigger.

use std::time::Duration;

use serde_json::json;
use wagate_loadtest::harness::sessions::{create, create_linked, get, link, wait_status};
use wagate_loadtest::harness::{Client, Node, NodeOptions, Receiver};

const WAIT: Duration = Duration::from_secs(10);

async fn node() -> Node {
    Node::start(NodeOptions::new(env!("CARGO_BIN_EXE_wagate")))
        .await
        .expect("node")
}

fn path(id: &str, rest: &str) -> String {
    format!("/api/sessions/{id}{rest}")
}

async fn post(client: &Client, id: &str, rest: &str) -> wagate_loadtest::harness::Reply {
    client.post_empty(&path(id, rest)).await.expect("reply")
}

#[tokio::test]
async fn start_shows_a_rotating_png_qr_then_scan_links_to_ready() {
    let node = node().await;
    let c = node.client();
    let id = create(&c, "alpha").await.expect("create");
    let started = post(&c, &id, "/start").await;
    assert_eq!(started.status, 200, "{}", started.text);
    assert_eq!(started.body["status"], "qr_ready");
    assert_eq!(started.body["engineLoaded"], true);
    let qr = c.get(&path(&id, "/qr")).await.expect("qr");
    assert!(
        qr.str("qrCode").starts_with("data:image/png;base64,"),
        "{}",
        qr.text
    );
    assert_eq!(qr.body["status"], "qr_ready");
    c.post(
        &format!("/api/sim/sessions/{id}/scan"),
        json!({ "phone": "4915100000001", "pushName": "Ann" }),
    )
    .await
    .expect("scan");
    let ready = wait_status(&c, &id, "ready", WAIT).await.expect("ready");
    assert_eq!(ready.body["phone"], "4915100000001");
    assert_eq!(ready.body["pushName"], "Ann");
    assert!(ready.body.get("lastError").is_none());
    assert_eq!(
        c.get(&path(&id, "/qr")).await.expect("qr").status,
        400,
        "no QR once ready"
    );
}

#[tokio::test]
async fn start_twice_answers_409_and_unknown_or_named_sessions_are_refused() {
    let node = node().await;
    let c = node.client();
    let id = create(&c, "twice").await.expect("create");
    assert_eq!(post(&c, &id, "/start").await.status, 200);
    assert_eq!(post(&c, &id, "/start").await.status, 409);
    assert_eq!(
        c.get("/api/sessions/twice").await.expect("r").status,
        400,
        "names are not ids"
    );
    let by_name = c
        .get("/api/sessions/twice/presence/4915100000010@c.us")
        .await
        .expect("r");
    assert_eq!(by_name.status, 400, "{}", by_name.text);
    assert_eq!(by_name.body["message"], "Session 'twice' is not active");
    let status_by_name = c.get("/api/sessions/twice/status").await.expect("r");
    assert_eq!(status_by_name.status, 404, "{}", status_by_name.text);
    let unknown = c
        .get("/api/sessions/00000000-0000-4000-8000-000000000000")
        .await
        .expect("r");
    assert_eq!(unknown.status, 404);
    assert_eq!(unknown.body["statusCode"], 404);
}

#[tokio::test]
async fn concurrent_starts_start_one_engine_and_refuse_the_rest() {
    let node = node().await;
    let c = node.client();
    let id = create(&c, "racing").await.expect("create");
    let rx = Receiver::start().await.expect("receiver");
    let hook = c
        .post(
            &path(&id, "/webhooks"),
            json!({ "url": rx.url(), "events": ["session.status", "session.qr"] }),
        )
        .await
        .expect("webhook");
    assert_eq!(hook.status, 201, "{}", hook.text);
    let starts = futures::future::join_all((0..6).map(|_| post(&c, &id, "/start"))).await;
    let started: Vec<_> = starts.iter().filter(|r| r.status == 200).collect();
    assert_eq!(started.len(), 1, "one start wins: {starts:?}");
    assert_eq!(started[0].body["status"], "qr_ready", "{}", started[0].text);
    for refused in starts.iter().filter(|r| r.status != 200) {
        assert_eq!(refused.status, 409, "{}", refused.text);
    }
    rx.wait_until(WAIT, |all| {
        all.iter().any(|d| d.json()["event"] == "session.qr")
    })
    .await;
    // Torn-down engines' QRs and statuses came within milliseconds of the first.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let events: Vec<String> = rx
        .deliveries()
        .iter()
        .map(|d| format!("{} {}", d.json()["event"], d.json()["data"]["status"]))
        .collect();
    assert!(
        !events.iter().any(|e| e.contains("disconnected")),
        "no start tears another down: {events:?}"
    );
    assert_eq!(
        events.iter().filter(|e| e.contains("session.qr")).count(),
        1,
        "one engine, one QR: {events:?}"
    );
}

#[tokio::test]
async fn pairing_code_only_while_qr_ready() {
    let node = node().await;
    let c = node.client();
    let id = create(&c, "pairing").await.expect("create");
    let body = json!({ "phoneNumber": "4915100000002" });
    let early = c
        .post(&path(&id, "/pairing-code"), body.clone())
        .await
        .expect("r");
    assert_eq!(early.status, 409, "before start: {}", early.text);
    post(&c, &id, "/start").await;
    let code = c
        .post(&path(&id, "/pairing-code"), body.clone())
        .await
        .expect("r");
    assert_eq!(code.status, 201, "{}", code.text);
    assert_eq!(code.str("pairingCode").len(), 8);
    assert_eq!(
        c.post(
            &path(&id, "/pairing-code"),
            json!({ "phoneNumber": "49-abc" })
        )
        .await
        .expect("r")
        .status,
        400
    );
    c.post(
        &format!("/api/sim/sessions/{id}/scan"),
        json!({ "phone": "4915100000002" }),
    )
    .await
    .expect("scan");
    wait_status(&c, &id, "ready", WAIT).await.expect("ready");
    assert_eq!(
        c.post(&path(&id, "/pairing-code"), body)
            .await
            .expect("r")
            .status,
        409,
        "after linking"
    );
}

#[tokio::test]
async fn a_dropped_link_reconnects_to_ready() {
    let node = node().await;
    let c = node.client();
    let id = create_linked(&c, "drops", "4915100000003")
        .await
        .expect("linked");
    c.patch(&path(&id, "/config"), json!({ "reconnectBaseDelay": 1000 }))
        .await
        .expect("config");
    post(&c, &id, "/stop").await;
    link_again(&c, &id).await;
    c.post_empty(&format!("/api/sim/sessions/{id}/drop"))
        .await
        .expect("drop");
    wait_status(&c, &id, "disconnected", WAIT)
        .await
        .expect("disconnected");
    let back = wait_status(&c, &id, "ready", WAIT)
        .await
        .expect("reconnected");
    assert_eq!(back.body["phone"], "4915100000003");
}

/// Starts a session that has credentials: it goes straight to ready, no QR.
async fn link_again(c: &Client, id: &str) {
    let started = post(c, id, "/start").await;
    assert_eq!(started.body["status"], "ready", "{}", started.text);
}

#[tokio::test]
async fn exhausted_reconnect_attempts_end_in_failed_with_last_error() {
    let node = node().await;
    let c = node.client();
    let id = create(&c, "exhaust").await.expect("create");
    let cfg = c
        .patch(
            &path(&id, "/config"),
            json!({ "maxReconnectAttempts": 1, "reconnectBaseDelay": 1000 }),
        )
        .await;
    assert_eq!(cfg.expect("config").body["maxReconnectAttempts"], 1);
    link(&c, &id, "4915100000004").await.expect("linked");
    drop_with_failing_relaunches(&c, &id, 5).await;
    let failed = wait_status(&c, &id, "failed", WAIT).await.expect("failed");
    assert!(
        failed.str("lastError").contains("launch failure"),
        "{}",
        failed.text
    );
    // What the failed relaunch left is torn down: no engine, so presence reads answer null.
    let unloaded = wait_unloaded(&c, &id).await;
    assert_eq!(unloaded.body["status"], "failed", "{}", unloaded.text);
    let presence = c
        .get(&path(&id, "/presence/4915100000099@c.us"))
        .await
        .expect("presence");
    assert_eq!(presence.status, 200, "{}", presence.text);
    assert!(presence.body.is_null(), "{}", presence.text);
}

/// The link drops and the next `fails` relaunches fail to launch.
async fn drop_with_failing_relaunches(c: &Client, id: &str, fails: u32) {
    c.post(
        &format!("/api/sim/sessions/{id}/faults"),
        json!({ "failNextStarts": fails }),
    )
    .await
    .expect("faults");
    c.post_empty(&format!("/api/sim/sessions/{id}/drop"))
        .await
        .expect("drop");
}

async fn wait_unloaded(c: &Client, id: &str) -> wagate_loadtest::harness::Reply {
    let deadline = std::time::Instant::now() + WAIT;
    loop {
        let record = get(c, id).await.expect("get");
        if record.body["engineLoaded"] == false {
            return record;
        }
        assert!(std::time::Instant::now() < deadline, "{}", record.text);
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Spec rule 5: with no engine running (after a drop, between failed relaunch attempts, after a stop) a
/// presence read answers null, and `engineLoaded` says no engine is loaded while a failed launch backs off.
#[tokio::test]
async fn presence_reads_null_and_no_engine_shows_while_relaunches_fail() {
    let node = node().await;
    let c = node.client();
    let id = create(&c, "backoff").await.expect("create");
    c.patch(
        &path(&id, "/config"),
        json!({ "maxReconnectAttempts": 10, "reconnectBaseDelay": 1000 }),
    )
    .await
    .expect("config");
    link(&c, &id, "4915100000014").await.expect("linked");
    let presence_path = path(&id, "/presence/4915100000099@c.us");
    let is_null_presence = |reply: &wagate_loadtest::harness::Reply| {
        (reply.status, reply.body.is_null()) == (200, true)
    };
    drop_with_failing_relaunches(&c, &id, 10).await;
    wait_status(&c, &id, "disconnected", WAIT)
        .await
        .expect("disconnected");
    let dropped = c.get(&presence_path).await.expect("presence");
    assert!(
        is_null_presence(&dropped),
        "after the drop: {}",
        dropped.text
    );

    // The first relaunch failed: initializing with lastError, backing off before the next attempt.
    let deadline = std::time::Instant::now() + WAIT;
    let backing_off = loop {
        let record = get(&c, &id).await.expect("get");
        if record.body["status"] == "initializing" && record.body["lastError"].is_string() {
            break record;
        }
        assert!(std::time::Instant::now() < deadline, "{}", record.text);
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert!(
        backing_off.str("lastError").contains("launch failure"),
        "{}",
        backing_off.text
    );
    assert_eq!(
        backing_off.body["engineLoaded"], false,
        "a failed launch leaves no engine: {}",
        backing_off.text
    );
    let between = c.get(&presence_path).await.expect("presence");
    assert!(
        is_null_presence(&between),
        "between relaunch attempts: {}",
        between.text
    );

    let stopped = post(&c, &id, "/stop").await;
    assert_eq!(stopped.body["engineLoaded"], false, "{}", stopped.text);
    let after_stop = c.get(&presence_path).await.expect("presence");
    assert!(
        is_null_presence(&after_stop),
        "after stop: {}",
        after_stop.text
    );
}

#[tokio::test]
async fn zero_reconnect_attempts_fail_at_once() {
    let node = node().await;
    let c = node.client();
    let id = create(&c, "no-retry").await.expect("create");
    c.patch(&path(&id, "/config"), json!({ "maxReconnectAttempts": 0 }))
        .await
        .expect("config");
    link(&c, &id, "4915100000005").await.expect("linked");
    c.post_empty(&format!("/api/sim/sessions/{id}/drop"))
        .await
        .expect("drop");
    let failed = wait_status(&c, &id, "failed", WAIT).await.expect("failed");
    assert!(failed.body["lastError"].is_string());
    // The engine is torn down right after the status is stored.
    wait_unloaded(&c, &id).await;
    // And it starts again as any failed session does.
    let started = post(&c, &id, "/start").await;
    assert!(started.status < 300, "{}", started.text);
    wait_status(&c, &id, "ready", WAIT)
        .await
        .expect("ready again");
}

/// Creates a session with the given reconnect config whose next `fails` engine launches fail.
async fn create_failing(c: &Client, name: &str, config: serde_json::Value, fails: u32) -> String {
    let created = c
        .post("/api/sessions", json!({ "name": name, "config": config }))
        .await
        .expect("create");
    assert_eq!(created.status, 201, "{}", created.text);
    let id = created.str("id");
    let faults = c
        .post(
            &format!("/api/sim/sessions/{id}/faults"),
            json!({ "failNextStarts": fails }),
        )
        .await
        .expect("faults");
    assert!(faults.status < 300, "{}", faults.text);
    id
}

/// The start's own launch is not a reconnect attempt: `maxReconnectAttempts: 1` still allows one
/// automatic relaunch after it fails, and the start answers with what that relaunch brought.
#[tokio::test]
async fn a_failed_first_launch_leaves_every_reconnect_attempt() {
    let node = node().await;
    let c = node.client();
    let config = json!({ "maxReconnectAttempts": 1, "reconnectBaseDelay": 1000 });
    let id = create_failing(&c, "fs4", config, 1).await;
    let started = post(&c, &id, "/start").await;
    assert_eq!(started.status, 200, "{}", started.text);
    assert_eq!(started.body["status"], "qr_ready", "{}", started.text);
    assert_eq!(started.body["engineLoaded"], true, "{}", started.text);
}

/// More failing launches than the budget: the session fails after exactly `maxReconnectAttempts`
/// relaunches, with `lastError` set. A budget of 0 fails the first failed launch at once.
#[tokio::test]
async fn failing_relaunches_after_a_failed_start_end_in_failed_after_the_budget() {
    let node = node().await;
    let c = node.client();
    let config = json!({ "maxReconnectAttempts": 2, "reconnectBaseDelay": 1000 });
    // The start's launch and both relaunches fail.
    let id = create_failing(&c, "fs-budget", config, 3).await;
    let started = post(&c, &id, "/start").await;
    assert_eq!(started.status, 200, "{}", started.text);
    let failed = wait_status(&c, &id, "failed", WAIT).await.expect("failed");
    assert!(
        failed.str("lastError").contains("launch failure"),
        "{}",
        failed.text
    );
    // All three failing launches were used (a fourth would have succeeded, so no more were made): with
    // no automatic reconnect left, the next start comes up at once.
    c.patch(&path(&id, "/config"), json!({ "maxReconnectAttempts": 0 }))
        .await
        .expect("config");
    let again = post(&c, &id, "/start").await;
    assert_eq!(again.body["status"], "qr_ready", "{}", again.text);

    let config = json!({ "maxReconnectAttempts": 0 });
    let id = create_failing(&c, "fs-zero", config, 1).await;
    let started = post(&c, &id, "/start").await;
    assert_eq!(started.status, 200, "{}", started.text);
    assert_eq!(started.body["status"], "failed", "{}", started.text);
    assert!(
        started.str("lastError").contains("launch failure"),
        "{}",
        started.text
    );
    assert_eq!(started.body["engineLoaded"], false, "{}", started.text);
}

#[tokio::test]
async fn unlink_from_the_phone_clears_the_phone_and_needs_a_new_qr() {
    let node = node().await;
    let c = node.client();
    let id = create_linked(&c, "unlinked", "4915100000006")
        .await
        .expect("linked");
    c.post_empty(&format!("/api/sim/sessions/{id}/unlink"))
        .await
        .expect("unlink");
    let gone = wait_status(&c, &id, "disconnected", WAIT)
        .await
        .expect("disconnected");
    assert!(gone.body["phone"].is_null(), "{}", gone.text);
    // The engine is torn down right after the status is stored.
    let unloaded = wait_unloaded(&c, &id).await;
    assert_eq!(unloaded.body["status"], "disconnected", "{}", unloaded.text);
    assert_eq!(post(&c, &id, "/start").await.body["status"], "qr_ready");
    assert!(
        relink_warned(&node, &id).await,
        "a previously linked session asks for a QR again: {}",
        node.logs()
    );
}

/// Whether the node logged the spec's `relink_required` warning for session `id`.
async fn relink_warned(node: &Node, id: &str) -> bool {
    let deadline = std::time::Instant::now() + WAIT;
    loop {
        let logs = node.logs();
        if logs
            .lines()
            .any(|l| l.contains("relink_required") && l.contains(id))
        {
            return true;
        }
        if std::time::Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The phone unlinks the device while the session is stopped: nothing runs to hear it, so the next start
/// learns it from the network, forgets the phone and the credentials and asks for a new QR (warning
/// `relink_required`) rather than failing on every start.
#[tokio::test]
async fn unlink_while_stopped_gives_a_new_qr_at_the_next_start() {
    let node = node().await;
    let c = node.client();
    let id = create_linked(&c, "unlinked-idle", "4915100000015")
        .await
        .expect("linked");
    let stopped = post(&c, &id, "/stop").await;
    assert_eq!(stopped.body["status"], "disconnected", "{}", stopped.text);
    let unlink = c
        .post_empty(&format!("/api/sim/sessions/{id}/unlink"))
        .await
        .expect("unlink");
    assert_eq!(unlink.status, 200, "{}", unlink.text);

    let started = post(&c, &id, "/start").await;
    assert_eq!(started.status, 200, "{}", started.text);
    assert_eq!(started.body["status"], "qr_ready", "{}", started.text);
    assert!(started.body["phone"].is_null(), "{}", started.text);
    assert!(started.body.get("lastError").is_none(), "{}", started.text);
    let qr = c.get(&path(&id, "/qr")).await.expect("qr");
    assert_eq!(qr.status, 200, "{}", qr.text);
    assert!(
        relink_warned(&node, &id).await,
        "a previously linked session asks for a QR again: {}",
        node.logs()
    );

    // The new link is the one a later start comes back with.
    c.post(
        &format!("/api/sim/sessions/{id}/scan"),
        json!({ "phone": "4915100000016" }),
    )
    .await
    .expect("scan");
    let relinked = wait_status(&c, &id, "ready", WAIT).await.expect("ready");
    assert_eq!(relinked.body["phone"], "4915100000016", "{}", relinked.text);
    post(&c, &id, "/stop").await;
    link_again(&c, &id).await;
}

#[tokio::test]
async fn stop_keeps_credentials_logout_and_force_kill_do_what_they_say() {
    let node = node().await;
    let c = node.client();
    let id = create_linked(&c, "stopper", "4915100000007")
        .await
        .expect("linked");
    let stopped = post(&c, &id, "/stop").await;
    assert_eq!(
        (stopped.status, stopped.body["status"].as_str()),
        (200, Some("disconnected"))
    );
    assert_eq!(stopped.body["engineLoaded"], false);
    link_again(&c, &id).await;
    let killed = post(&c, &id, "/force-kill").await;
    assert_eq!(
        (
            killed.body["status"].as_str(),
            killed.body["engineLoaded"].as_bool()
        ),
        (Some("disconnected"), Some(false))
    );
    link_again(&c, &id).await;
    let out = post(&c, &id, "/logout").await;
    assert_eq!(out.status, 200, "{}", out.text);
    assert!(out.body["phone"].is_null());
    assert_eq!(
        post(&c, &id, "/start").await.body["status"],
        "qr_ready",
        "logout forgot the credentials"
    );
    let audit = c
        .get(&format!("/api/audit?sessionId={id}"))
        .await
        .expect("audit");
    assert!(
        audit.body["total"].as_i64().is_some_and(|n| n >= 4),
        "{}",
        audit.text
    );
}

#[tokio::test]
async fn delete_removes_the_session_and_refuses_during_teardown() {
    let node = node().await;
    let c = node.client();
    let id = create_linked(&c, "doomed", "4915100000008")
        .await
        .expect("linked");
    c.post(
        &format!("/api/sim/sessions/{id}/faults"),
        json!({ "queryDelayMs": 1500 }),
    )
    .await
    .expect("faults");
    let (c2, id2) = (c.clone(), id.clone());
    let logout =
        tokio::spawn(async move { c2.post_empty(&format!("/api/sessions/{id2}/logout")).await });
    tokio::time::sleep(Duration::from_millis(300)).await;
    let busy = c.delete(&path(&id, "")).await.expect("delete");
    assert_eq!(busy.status, 409, "{}", busy.text);
    assert_eq!(busy.body["code"], "SESSION_NAME_TEARDOWN_PENDING");
    assert_eq!(
        post(&c, &id, "/start").await.body["code"],
        "SESSION_NAME_TEARDOWN_PENDING"
    );
    assert_eq!(logout.await.expect("join").expect("logout").status, 200);
    c.post(
        &format!("/api/sim/sessions/{id}/faults"),
        json!({ "queryDelayMs": 0 }),
    )
    .await
    .expect("faults");
    assert_eq!(c.delete(&path(&id, "")).await.expect("delete").status, 204);
    assert_eq!(get(&c, &id).await.expect("get").status, 404);
}

#[tokio::test]
async fn a_restriction_requires_action_and_lifting_it_restores_ready() {
    let node = node().await;
    let c = node.client();
    let id = create_linked(&c, "restricted", "4915100000009")
        .await
        .expect("linked");
    let sim = format!("/api/sim/sessions/{id}/restrict");
    c.post(&sim, json!({ "kind": "temporary_ban", "active": true }))
        .await
        .expect("restrict");
    let held = wait_status(&c, &id, "action_required", WAIT)
        .await
        .expect("action_required");
    assert!(held.body["lastError"].is_string());
    assert_eq!(held.body["restriction"]["kind"], "temporary_ban");
    // The engine stays connected: reads and chat actions go on, sends answer 409.
    let chats = c
        .get(&path(&id, "/chats"))
        .await
        .expect("chats while restricted");
    assert_eq!(chats.status, 200, "{}", chats.text);
    let send = c
        .post(
            &path(&id, "/messages/send-text"),
            json!({ "chatId": "4915100000010@c.us", "text": "held" }),
        )
        .await
        .expect("send while restricted");
    assert_eq!(send.status, 409, "{}", send.text);
    c.post(&sim, json!({ "kind": "temporary_ban", "active": false }))
        .await
        .expect("lift");
    wait_status(&c, &id, "ready", WAIT)
        .await
        .expect("ready again");
}

#[tokio::test]
async fn a_stop_clears_the_restriction_and_its_last_error() {
    let node = node().await;
    let c = node.client();
    let id = create_linked(&c, "restricted2", "4915100000019")
        .await
        .expect("linked");
    let sim = format!("/api/sim/sessions/{id}/restrict");
    let until = json!({ "kind": "spam", "active": true, "expiresAt": "2030-01-01T00:00:00Z" });
    let restricted = c.post(&sim, until).await.expect("restrict");
    assert_eq!(restricted.status, 200, "ISO expiresAt: {}", restricted.text);
    let held = wait_status(&c, &id, "action_required", WAIT)
        .await
        .expect("action_required");
    assert_eq!(
        held.body["restriction"]["expiresAt"],
        "2030-01-01T00:00:00.000Z"
    );
    let stopped = post(&c, &id, "/stop").await;
    assert_eq!(stopped.body["status"], "disconnected", "{}", stopped.text);
    assert!(stopped.body.get("lastError").is_none(), "{}", stopped.text);
    assert!(
        stopped.body.get("restriction").is_none(),
        "{}",
        stopped.text
    );
}

#[tokio::test]
async fn a_pairing_code_dies_with_the_engine_run_that_issued_it() {
    let node = node().await;
    let c = node.client();
    let id = create(&c, "pairing2").await.expect("create");
    post(&c, &id, "/start").await;
    let body = json!({ "phoneNumber": "4915100000020" });
    let code = c.post(&path(&id, "/pairing-code"), body).await.expect("r");
    assert_eq!(code.status, 201, "{}", code.text);
    post(&c, &id, "/stop").await;
    post(&c, &id, "/start").await;
    let scan = c
        .post(
            &format!("/api/sim/sessions/{id}/scan"),
            json!({ "phone": "4915100000021" }),
        )
        .await
        .expect("scan");
    assert_eq!(scan.status, 200, "{}", scan.text);
    wait_status(&c, &id, "ready", WAIT).await.expect("ready");
    let subscribe = c
        .post(
            &path(&id, "/presence/subscribe"),
            json!({ "chatId": "4915100000099@c.us" }),
        )
        .await
        .expect("subscribe");
    assert_eq!(
        subscribe.status, 200,
        "a number off the network: {}",
        subscribe.text
    );
}

#[tokio::test]
async fn engine_routes_answer_409_while_not_ready() {
    let node = node().await;
    let c = node.client();
    let id = create(&c, "idle").await.expect("create");
    let reply = c
        .put(&path(&id, "/presence"), json!({ "available": true }))
        .await
        .expect("r");
    assert_eq!(reply.status, 409, "{}", reply.text);
    assert_eq!(reply.body["message"], "Session is not connected");
    let presence = c
        .get(&path(&id, "/presence/4915100000010@c.us"))
        .await
        .expect("r");
    assert_eq!(
        (presence.status, presence.body.is_null()),
        (200, true),
        "null without an engine"
    );
}

#[tokio::test]
async fn linked_sessions_come_back_after_a_restart() {
    let mut node = node().await;
    let c = node.client();
    let id = create_linked(&c, "survivor", "4915100000011")
        .await
        .expect("linked");
    let idle = create(&c, "never-started").await.expect("create");
    node.restart().await.expect("restart");
    let c = node.client();
    wait_status(&c, &id, "ready", WAIT)
        .await
        .expect("restored without a QR");
    assert_eq!(get(&c, &idle).await.expect("get").body["status"], "created");
}

#[tokio::test]
async fn a_restart_brings_back_only_what_was_running_and_says_what_changed() {
    let mut node = node().await;
    let c = node.client();
    let running = create_linked(&c, "was-running", "4915100000012")
        .await
        .expect("linked");
    let failed = create(&c, "gave-up").await.expect("create");
    c.patch(
        &path(&failed, "/config"),
        json!({ "maxReconnectAttempts": 0 }),
    )
    .await
    .expect("config");
    link(&c, &failed, "4915100000013").await.expect("linked");
    c.post_empty(&format!("/api/sim/sessions/{failed}/drop"))
        .await
        .expect("drop");
    wait_status(&c, &failed, "failed", WAIT)
        .await
        .expect("failed");
    let rx = Receiver::start().await.expect("receiver");
    let hook = c
        .post(
            &path(&running, "/webhooks"),
            json!({ "url": rx.url(), "events": ["session.status"] }),
        )
        .await
        .expect("webhook");
    assert_eq!(hook.status, 201, "{}", hook.text);

    // A boot that starts nothing: the running session is now disconnected, and its subscribers hear so.
    node.options = node.options.clone().env("AUTO_START_SESSIONS", "false");
    node.restart().await.expect("restart");
    let c = node.client();
    assert_eq!(
        get(&c, &running).await.expect("get").body["status"],
        "disconnected"
    );
    let is_disconnected = |d: &wagate_loadtest::harness::receiver::Delivery| {
        d.json()["data"]["status"] == "disconnected"
    };
    let said = rx
        .wait_until(WAIT, |all| all.iter().any(is_disconnected))
        .await;
    assert!(
        said.iter().any(is_disconnected),
        "no session.status for the restart: {} deliveries",
        said.len()
    );

    // Nothing was running when that node stopped, so the next boot starts nothing either.
    node.options = node.options.clone().env("AUTO_START_SESSIONS", "true");
    node.restart().await.expect("restart");
    let c = node.client();
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(
        get(&c, &running).await.expect("get").body["status"],
        "disconnected"
    );
    assert_eq!(
        get(&c, &failed).await.expect("get").body["status"],
        "failed"
    );
}

#[tokio::test]
async fn session_authenticated_names_the_phone_as_the_session_record_does() {
    let node = node().await;
    let c = node.client();
    let id = create(&c, "auth-event").await.expect("create");
    let rx = Receiver::start().await.expect("receiver");
    let hook = c
        .post(
            &path(&id, "/webhooks"),
            json!({ "url": rx.url(), "events": ["session.authenticated"] }),
        )
        .await
        .expect("webhook");
    assert_eq!(hook.status, 201, "{}", hook.text);
    link(&c, &id, "4915100000014").await.expect("linked");
    let got = rx.wait_count(1, WAIT).await;
    let event = got.first().expect("session.authenticated").json();
    assert_eq!(event["data"]["phone"], "4915100000014", "{event}");
    assert_eq!(
        get(&c, &id).await.expect("get").body["phone"],
        "4915100000014"
    );
}

#[tokio::test]
async fn a_restriction_without_an_engine_code_shows_its_kind_upper_cased_as_code() {
    let node = node().await;
    let c = node.client();
    let id = create_linked(&c, "timelocked", "4915100000031")
        .await
        .expect("linked");
    let restricted = c
        .post(
            &format!("/api/sim/sessions/{id}/restrict"),
            json!({ "kind": "reachout_timelock", "active": true }),
        )
        .await
        .expect("restrict");
    assert_eq!(restricted.status, 200, "{}", restricted.text);
    let held = wait_status(&c, &id, "action_required", WAIT)
        .await
        .expect("action_required");
    assert_eq!(
        (
            held.body["restriction"]["kind"].as_str(),
            held.body["restriction"]["code"].as_str()
        ),
        (Some("reachout_timelock"), Some("REACHOUT_TIMELOCK")),
        "{}",
        held.text
    );
}

/// Force-kill acts on a running engine only: with none left to kill (never started, stopped, killed
/// already) it answers 400, as OpenWA's clients expect; logout of a stopped linked session still works.
#[tokio::test]
async fn force_kill_with_no_engine_running_answers_400() {
    let node = node().await;
    let c = node.client();
    let idle = create(&c, "never-started").await.expect("create");
    let refused = post(&c, &idle, "/force-kill").await;
    assert_eq!(refused.status, 400, "{}", refused.text);
    assert_eq!(
        refused.body["message"],
        format!("Session {idle} has no running engine to kill")
    );
    assert_eq!(refused.body["error"], "Bad Request", "{}", refused.text);

    let id = create_linked(&c, "killed-twice", "4915100000032")
        .await
        .expect("linked");
    let killed = post(&c, &id, "/force-kill").await;
    assert_eq!(killed.status, 200, "{}", killed.text);
    let again = post(&c, &id, "/force-kill").await;
    assert_eq!(
        again.status, 400,
        "a retry has nothing to kill: {}",
        again.text
    );

    link_again(&c, &id).await;
    assert_eq!(post(&c, &id, "/stop").await.status, 200);
    let after_stop = post(&c, &id, "/force-kill").await;
    assert_eq!(after_stop.status, 400, "{}", after_stop.text);
    let out = post(&c, &id, "/logout").await;
    assert_eq!(out.status, 200, "logout of a stopped session: {}", out.text);
    assert!(out.body["phone"].is_null(), "{}", out.text);
}

/// Reads `path` until `done` holds for its body (or the wait runs out); answers the last body.
async fn read_until(
    c: &Client,
    path: &str,
    done: impl Fn(&serde_json::Value) -> bool,
) -> serde_json::Value {
    let deadline = std::time::Instant::now() + WAIT;
    loop {
        let reply = c.get(path).await.expect("read");
        assert_eq!(reply.status, 200, "{}", reply.text);
        if done(&reply.body) || std::time::Instant::now() > deadline {
            return reply.body;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The presence read answers the last `presence.update` the session received for the chat, stamped with
/// when it arrived: null before any report, the typing state a report said (not a fresh query), the same
/// `observedAt` on every read, and null again once the engine run that heard it is gone.
#[tokio::test]
async fn a_presence_read_answers_the_last_report_and_when_it_arrived() {
    let node = node().await;
    let c = node.client();
    let watcher = create_linked(&c, "watcher", "4915100000033")
        .await
        .expect("linked");
    let typist = create_linked(&c, "typist", "4915100000034")
        .await
        .expect("linked");
    let read = path(&watcher, "/presence/4915100000034@c.us");
    let before = c.get(&read).await.expect("presence");
    assert_eq!(before.status, 200, "{}", before.text);
    assert!(before.body.is_null(), "nothing reported: {}", before.text);

    let subscribed = c
        .post(
            &path(&watcher, "/presence/subscribe"),
            json!({ "chatId": "4915100000034@c.us" }),
        )
        .await
        .expect("subscribe");
    assert_eq!(subscribed.status, 200, "{}", subscribed.text);
    let first = read_until(&c, &read, |b| !b.is_null()).await;
    assert_eq!(first["chatId"], "4915100000034@c.us", "{first}");

    let typing = c
        .post(
            &path(&typist, "/chats/typing"),
            json!({ "chatId": "4915100000033@c.us", "state": "typing" }),
        )
        .await
        .expect("typing");
    assert_eq!(typing.status, 200, "{}", typing.text);
    let composing = read_until(&c, &read, |b| b["participants"][0]["state"] == "composing").await;
    assert_eq!(
        composing["participants"][0]["state"], "composing",
        "the reported state: {composing}"
    );
    assert_eq!(
        composing["participants"][0]["id"], "4915100000034@c.us",
        "{composing}"
    );
    tokio::time::sleep(Duration::from_millis(30)).await;
    let later = c.get(&read).await.expect("presence");
    assert_eq!(
        later.body, composing,
        "a later read answers the same report, observedAt included"
    );

    assert_eq!(post(&c, &watcher, "/stop").await.status, 200);
    let stopped = c.get(&read).await.expect("presence");
    assert!(stopped.body.is_null(), "no engine: {}", stopped.text);
    link_again(&c, &watcher).await;
    let restarted = c.get(&read).await.expect("presence");
    assert!(
        restarted.body.is_null(),
        "the new run was told nothing yet: {}",
        restarted.text
    );
}

/// Statuses only a running engine is in: the session shows `engineLoaded: true` in these and only these.
const ENGINE_STATUSES: [&str; 5] = [
    "initializing",
    "qr_ready",
    "authenticating",
    "ready",
    "action_required",
];

/// Fires every operation of `ops` at the session at once (`scan` is the sim's QR scan with `phone`).
async fn burst(c: &Client, id: &str, ops: &[&str], phone: &str) -> Vec<(String, u16, String)> {
    let calls = ops.iter().map(|op| {
        let c = c.clone();
        let (id, op, phone) = (id.to_string(), op.to_string(), phone.to_string());
        tokio::spawn(async move {
            let reply = if op == "scan" {
                c.post(
                    &format!("/api/sim/sessions/{id}/scan"),
                    json!({ "phone": phone }),
                )
                .await
            } else {
                c.post_empty(&path(&id, &format!("/{op}"))).await
            };
            let reply = reply.expect("reply");
            (op, reply.status, reply.text)
        })
    });
    futures::future::join_all(calls)
        .await
        .into_iter()
        .map(|joined| joined.expect("join"))
        .collect()
}

/// Once what the burst set off has run its course (a QR shown, a scan linked), the session's status and
/// `engineLoaded` agree, and a `qr_ready` session has a QR to fetch.
async fn assert_coherent(c: &Client, id: &str, replies: &[(String, u16, String)]) {
    let deadline = std::time::Instant::now() + WAIT;
    let record = loop {
        let record = get(c, id).await.expect("get");
        let settling = matches!(
            record.body["status"].as_str(),
            Some("initializing" | "authenticating")
        );
        if !settling || std::time::Instant::now() >= deadline {
            break record;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    let status = record.str("status");
    assert_eq!(
        record.body["engineLoaded"].as_bool(),
        Some(ENGINE_STATUSES.contains(&status.as_str())),
        "status and engineLoaded disagree after {replies:?}: {}",
        record.text
    );
    if status == "qr_ready" {
        let qr = c.get(&path(id, "/qr")).await.expect("qr");
        assert_eq!(qr.status, 200, "qr_ready without a QR: {}", qr.text);
    }
}

/// Start, stop, logout and force-kill fired at one session at the same moment are serialised: whichever
/// wins, the session ends coherent (an engine status only with an engine loaded), and no start waits out
/// its budget for an engine a stop tore down (a start a stop overtook answers 409).
#[tokio::test]
async fn racing_lifecycle_operations_leave_the_session_coherent() {
    let node = Node::start(
        NodeOptions::new(env!("CARGO_BIN_EXE_wagate")).env("SESSION_START_TIMEOUT_MS", "5000"),
    )
    .await
    .expect("node");
    let c = node.client();
    let fresh = ["start", "start", "stop", "stop"];
    for round in 0..40 {
        let id = create(&c, &format!("race-{round}")).await.expect("create");
        let replies = burst(&c, &id, &fresh, "").await;
        for (op, status, text) in &replies {
            assert!(
                *status < 500,
                "{op} answered {status}: {text} ({replies:?})"
            );
        }
        assert_coherent(&c, &id, &replies).await;
    }
    let mixed = [
        "start",
        "start",
        "scan",
        "stop",
        "force-kill",
        "start",
        "logout",
        "stop",
        "stop",
        "start",
    ];
    for round in 0..20 {
        let phone = format!("49151000{round:05}");
        let id = create_linked(&c, &format!("mixed-{round}"), &phone)
            .await
            .expect("linked");
        assert_eq!(post(&c, &id, "/stop").await.status, 200);
        let replies = burst(&c, &id, &mixed, &phone).await;
        for (op, status, text) in &replies {
            assert_ne!(
                *status, 504,
                "{op} waited out its budget: {text} ({replies:?})"
            );
        }
        assert_coherent(&c, &id, &replies).await;
    }
}

/// The `session_started` audit rows of the session (written before the start's answer went out).
async fn started_rows(c: &Client, id: &str) -> i64 {
    let audit = c
        .get(&format!("/api/audit?action=session_started&sessionId={id}"))
        .await
        .expect("audit");
    assert_eq!(audit.status, 200, "{}", audit.text);
    audit.body["total"].as_i64().expect("total")
}

/// A start racing a stop, logout or force-kill of a created session either answers the session it
/// started (`initializing` or `qr_ready`, engine loaded) or, when the other ended its run before it
/// settled, 409 Conflict with no `session_started` audit row; never 200 with the stopped session.
#[tokio::test]
async fn a_start_a_stop_overtook_answers_409_not_the_stopped_session() {
    let node = node().await;
    let c = node.client();
    for op in ["stop", "logout", "force-kill"] {
        for round in 0..30 {
            let id = create(&c, &format!("{op}-overtook-{round}"))
                .await
                .expect("create");
            let replies = burst(&c, &id, &["start", op], "").await;
            let (_, status, text) = &replies[0];
            let body: serde_json::Value = serde_json::from_str(text).expect("json");
            let (_, other, other_text) = &replies[1];
            assert!(*other < 500, "{op} answered {other}: {other_text}");
            match status {
                200 => {
                    assert!(
                        matches!(body["status"].as_str(), Some("initializing" | "qr_ready")),
                        "start racing {op} answered {text}"
                    );
                    assert_eq!(body["engineLoaded"], true, "{text}");
                    assert_eq!(started_rows(&c, &id).await, 1);
                }
                409 if body["code"] == "SESSION_NAME_TEARDOWN_PENDING" => {
                    assert_eq!(op, "logout", "{text}");
                }
                409 => {
                    assert_eq!(
                        body["message"], "Session was stopped while it was starting",
                        "{text}"
                    );
                    assert_eq!(body["error"], "Conflict", "{text}");
                    assert_eq!(*other, 200, "{op}: {other_text}");
                    assert_eq!(
                        started_rows(&c, &id).await,
                        0,
                        "an interrupted start is not audited as started"
                    );
                }
                _ => panic!("start racing {op} answered {status}: {text}"),
            }
            assert_coherent(&c, &id, &replies).await;
        }
    }
}

/// Two logouts at once: the second waits for the first and answers as a logout of a logged-out session
/// does (200), not the start/delete teardown refusal. A delete racing a logout keeps that refusal.
#[tokio::test]
async fn concurrent_logouts_both_answer_the_logged_out_session() {
    let node = node().await;
    let c = node.client();
    for round in 0..10 {
        let phone = format!("49152000{round:05}");
        let id = create_linked(&c, &format!("twice-out-{round}"), &phone)
            .await
            .expect("linked");
        let replies = burst(&c, &id, &["logout", "logout"], "").await;
        for (_, status, text) in &replies {
            assert_eq!(*status, 200, "{replies:?}");
            let body: serde_json::Value = serde_json::from_str(text).expect("json");
            assert_eq!(body["status"], "disconnected", "{text}");
            assert_eq!(body["engineLoaded"], false, "{text}");
            assert!(body.get("phone").is_none_or(|p| p.is_null()), "{text}");
        }
    }
    for round in 0..10 {
        let phone = format!("49153000{round:05}");
        let id = create_linked(&c, &format!("out-del-{round}"), &phone)
            .await
            .expect("linked");
        let (logout, delete) = tokio::join!(post(&c, &id, "/logout"), async {
            c.delete(&path(&id, "")).await.expect("delete")
        });
        match delete.status {
            204 => {
                assert!(
                    matches!(logout.status, 200 | 404),
                    "logout racing a delete: {}",
                    logout.text
                );
                assert_eq!(get(&c, &id).await.expect("get").status, 404);
            }
            409 => {
                assert_eq!(
                    delete.body["code"], "SESSION_NAME_TEARDOWN_PENDING",
                    "{}",
                    delete.text
                );
                assert_eq!(logout.status, 200, "{}", logout.text);
            }
            other => panic!("delete racing a logout answered {other}: {}", delete.text),
        }
        assert_ne!(logout.body["code"], "SESSION_NAME_TEARDOWN_PENDING");
    }
}
