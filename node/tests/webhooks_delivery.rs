//! Webhook delivery end to end on the real binaries, once embedded (`ROLE=all`, SQLite data DB and queue)
//! and once clustered (`ROLE=api` node + a separate `wagate-worker`, PostgreSQL data DB, Redis queues):
//! signatures over the raw bytes, retries with stable keys, the failure log and redrive, filters, and
//! crash recovery (kill -9 between commit and delivery loses nothing).

mod support;

use std::collections::HashMap;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use serde_json::json;
use support::{SECRET, add_webhook, fast_options, inbound, ready_session, worker_binary};
use wagate_loadtest::harness::pg::PgDatabase;
use wagate_loadtest::harness::{Client, Delivery, Node, Receiver};

const WAIT: Duration = Duration::from_secs(30);
const PEER: &str = "15557770000@c.us";

/// One deployment under test; the worker process and the database die with it.
struct Rig {
    node: Node,
    worker: Option<Child>,
    worker_env: Vec<(String, String)>,
    _pg: Option<PgDatabase>,
}

impl Drop for Rig {
    fn drop(&mut self) {
        if let Some(mut w) = self.worker.take() {
            let _ = w.kill();
            let _ = w.wait();
        }
    }
}

impl Rig {
    async fn embedded() -> Rig {
        let node = Node::start(fast_options()).await.expect("node");
        Rig {
            node,
            worker: None,
            worker_env: Vec::new(),
            _pg: None,
        }
    }

    async fn clustered() -> Rig {
        let pg = PgDatabase::create().expect("postgres");
        let prefix = format!("t{}-", uuid_like());
        let shared = vec![
            ("DATABASE_TYPE".to_string(), "postgres".to_string()),
            ("DATABASE_URL".to_string(), pg.url.clone()),
            ("REDIS_ENABLED".to_string(), "true".to_string()),
            (
                "CLUSTER_SECRET".to_string(),
                wagate_loadtest::harness::CLUSTER_SECRET.to_string(),
            ),
            ("QUEUE_PREFIX".to_string(), prefix),
            ("WEBHOOK_RETRY_DELAY".to_string(), "50".to_string()),
            ("WEBHOOK_TIMEOUT".to_string(), "2000".to_string()),
            ("WEBHOOK_SSRF_PROTECT".to_string(), "false".to_string()),
        ];
        let mut opts = fast_options().env("ROLE", "api");
        for (k, v) in &shared {
            opts = opts.env(k, v.clone());
        }
        let node = Node::start(opts).await.expect("node");
        let mut rig = Rig {
            node,
            worker: None,
            worker_env: shared,
            _pg: Some(pg),
        };
        rig.start_worker();
        rig
    }

    fn start_worker(&mut self) {
        let dir = self.node.dir.path().join("worker");
        let log = std::fs::File::create(self.node.dir.path().join("worker.log")).expect("log");
        let child = Command::new(worker_binary())
            .env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("DATA_DIR", dir)
            .envs(self.worker_env.iter().cloned())
            .stdout(log.try_clone().expect("log"))
            .stderr(log)
            .stdin(Stdio::null())
            .spawn()
            .expect("worker starts");
        self.worker = Some(child);
    }

    fn client(&self) -> Client {
        self.node.client()
    }
}

fn uuid_like() -> String {
    format!(
        "{:x}",
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default()
            .as_nanos()
    )
}

fn of_key<'a>(all: &'a [Delivery], key: &str) -> Vec<&'a Delivery> {
    all.iter()
        .filter(|d| d.header("x-wagate-idempotency-key") == Some(key))
        .collect()
}

async fn retries_keep_keys_sign_raw_bytes_and_back_off(rig: Rig) {
    let c = rig.client();
    let s = ready_session(&c, "dlv-retry").await;
    let rx = Receiver::start().await.unwrap();
    rx.respond_with(&[500, 500]);
    let w = add_webhook(
        &c,
        &s,
        json!({ "url": rx.url(), "events": ["message.received"], "secret": SECRET }),
    )
    .await;
    inbound(&c, &s, PEER, "hello").await;
    let got = rx.wait_until(WAIT, |d| d.len() >= 3).await;
    assert_eq!(got.len(), 3, "{}", rig.node.logs());
    let key = got[0]
        .header("x-wagate-idempotency-key")
        .unwrap()
        .to_string();
    let dlv = got[0].header("x-wagate-delivery-id").unwrap().to_string();
    assert!(dlv.starts_with("dlv_"));
    for (i, d) in got.iter().enumerate() {
        assert!(
            d.signed_with(SECRET),
            "attempt {i} not signed over its raw body"
        );
        assert_eq!(d.header("x-wagate-idempotency-key"), Some(key.as_str()));
        assert_eq!(d.header("x-wagate-delivery-id"), Some(dlv.as_str()));
        assert_eq!(
            d.header("x-wagate-retry-count"),
            Some(i.to_string().as_str())
        );
        assert_eq!(d.header("x-wagate-event"), Some("message.received"));
        assert!(
            d.header("user-agent")
                .unwrap()
                .starts_with("wagate-webhook/")
        );
    }
    // Gaps honour the doubling backoff from WEBHOOK_RETRY_DELAY (lower bounds only).
    assert!(got[1].at - got[0].at >= Duration::from_millis(50));
    assert!(got[2].at - got[1].at >= Duration::from_millis(100));
    let body = got[2].json();
    let keys: Vec<&str> = body
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(
        keys,
        [
            "data",
            "deliveryId",
            "event",
            "idempotencyKey",
            "sessionId",
            "timestamp"
        ]
    );
    let text = String::from_utf8(got[2].body.to_vec()).unwrap();
    assert!(
        text.starts_with(r#"{"event":"message.received","timestamp":""#),
        "{text}"
    );
    assert_eq!(body["data"]["body"], "hello");
    assert_eq!(body["data"]["from"], PEER);
    assert_eq!(body["sessionId"], s.as_str());
    let path = format!("/api/sessions/{s}/webhooks/{}", w["id"].as_str().unwrap());
    support::wait_for(WAIT, || async {
        !c.get(&path).await.unwrap().body["lastTriggeredAt"].is_null()
    })
    .await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(
        rx.deliveries().len(),
        3,
        "a delivered event is not sent again"
    );
}

async fn exhausted_deliveries_land_in_the_failure_log_and_redrive(rig: Rig) {
    let c = rig.client();
    let s = ready_session(&c, "dlv-fail").await;
    let rx = Receiver::start().await.unwrap();
    rx.respond_with(&[500, 502]);
    let w = add_webhook(
        &c,
        &s,
        json!({ "url": rx.url(), "events": ["message.received"], "retryCount": 1 }),
    )
    .await;
    inbound(&c, &s, PEER, "doomed").await;
    let failures = format!("/api/webhooks/delivery-failures?sessionId={s}");
    support::wait_for(WAIT, || async {
        !c.get(&failures)
            .await
            .unwrap()
            .body
            .as_array()
            .unwrap()
            .is_empty()
    })
    .await;
    let rows = c.get(&failures).await.unwrap().body;
    let row = &rows[0];
    assert_eq!(row["attempts"], 2);
    assert_eq!(row["lastStatusCode"], 502);
    assert_eq!(row["webhookId"], w["id"]);
    assert_eq!(row["event"], "message.received");
    assert_eq!(row["url"], rx.url().as_str());
    assert_eq!(rx.deliveries().len(), 2, "1 + retryCount attempts, no more");
    assert_eq!(
        row["idempotencyKey"],
        rx.deliveries()[0]
            .header("x-wagate-idempotency-key")
            .unwrap()
    );
    let all = c.get("/api/webhooks/delivery-failures").await.unwrap();
    assert!(
        all.body
            .as_array()
            .unwrap()
            .iter()
            .any(|r| r["id"] == row["id"])
    );
    let path = format!("/api/sessions/{s}/webhooks/{}", w["id"].as_str().unwrap());
    assert!(
        c.get(&path).await.unwrap().body["lastTriggeredAt"].is_null(),
        "no 2xx yet"
    );

    let r = c
        .post(
            "/api/webhooks/delivery-failures/redrive",
            json!({ "sessionId": s }),
        )
        .await
        .unwrap();
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(
        r.body,
        json!({ "redriven": 1, "delivered": 1, "failed": 0, "remaining": 0 })
    );
    let got = rx.deliveries();
    assert_eq!(got.len(), 3);
    assert_eq!(
        got[2].header("x-wagate-idempotency-key"),
        got[0].header("x-wagate-idempotency-key")
    );
    assert_eq!(got[2].json()["data"]["body"], "doomed");
    assert!(
        c.get(&failures)
            .await
            .unwrap()
            .body
            .as_array()
            .unwrap()
            .is_empty()
    );
    assert!(!c.get(&path).await.unwrap().body["lastTriggeredAt"].is_null());
}

async fn a_sender_filter_drops_events_without_a_sender(rig: Rig) {
    let c = rig.client();
    let s = ready_session(&c, "dlv-filter").await;
    let filtered = Receiver::start().await.unwrap();
    let plain = Receiver::start().await.unwrap();
    let cond = json!({ "conditions": [{ "field": "sender", "operator": "is", "value": PEER }] });
    add_webhook(&c, &s, json!({ "url": filtered.url(), "events": ["message.received", "message.reaction"], "filters": cond })).await;
    add_webhook(
        &c,
        &s,
        json!({ "url": plain.url(), "events": ["message.received", "message.reaction"] }),
    )
    .await;
    let id = inbound(&c, &s, PEER, "one").await;
    inbound(&c, &s, "15558880000@c.us", "other sender").await;
    let r = c
        .post(
            &format!("/api/sim/sessions/{s}/react"),
            json!({ "messageId": id, "emoji": "👍", "from": PEER }),
        )
        .await
        .unwrap();
    assert!(r.status < 300, "{}", r.text);
    plain.wait_until(WAIT, |d| d.len() >= 3).await;
    assert_eq!(plain.of_event("message.reaction").len(), 1);
    tokio::time::sleep(Duration::from_millis(700)).await;
    let got = filtered.deliveries();
    assert_eq!(got.len(), 1, "only the message from the filtered sender");
    assert_eq!(got[0].json()["data"]["body"], "one");
}

/// What the session itself does to its message through the API raises the event too, from its side.
async fn own_reactions_edits_and_revokes_raise_events(rig: Rig) {
    let c = rig.client();
    let s = ready_session(&c, "dlv-own").await;
    let rx = Receiver::start().await.unwrap();
    let events = json!(["message.reaction", "message.edited", "message.revoked"]);
    add_webhook(&c, &s, json!({ "url": rx.url(), "events": events })).await;
    inbound(&c, &s, PEER, "hello").await;
    let sent = c
        .post(
            &format!("/api/sessions/{s}/messages/send-text"),
            json!({ "chatId": PEER, "text": "typo" }),
        )
        .await
        .unwrap();
    assert!(sent.status < 300, "{}", sent.text);
    let id = sent.str("messageId");
    for (route, body) in [
        (
            "react",
            json!({ "chatId": PEER, "messageId": id, "emoji": "👍" }),
        ),
        (
            "edit",
            json!({ "chatId": PEER, "messageId": id, "body": "fixed" }),
        ),
        ("delete", json!({ "chatId": PEER, "messageId": id })),
    ] {
        let r = c
            .post(&format!("/api/sessions/{s}/messages/{route}"), body)
            .await
            .unwrap();
        assert_eq!(r.status, 200, "{route}: {}", r.text);
    }
    rx.wait_until(WAIT, |d| d.len() >= 3).await;
    let me = c.get(&format!("/api/sessions/{s}")).await.unwrap();
    let me = format!("{}@c.us", me.body["phone"].as_str().unwrap_or_default());
    let data = |event: &str| {
        let got = rx.of_event(event);
        assert_eq!(got.len(), 1, "{event}: {got:?}");
        got[0].json()["data"].clone()
    };
    let reaction = data("message.reaction");
    assert_eq!(
        (
            &reaction["messageId"],
            &reaction["chatId"],
            &reaction["reaction"]
        ),
        (&json!(id), &json!(PEER), &json!("👍")),
        "{reaction}"
    );
    assert_eq!(reaction["senderId"], me.as_str(), "{reaction}");
    let edited = data("message.edited");
    assert_eq!(
        (&edited["messageId"], &edited["body"], &edited["fromMe"]),
        (&json!(id), &json!("fixed"), &json!(true)),
        "{edited}"
    );
    assert_eq!(edited["from"], me.as_str(), "{edited}");
    let revoked = data("message.revoked");
    assert_eq!(
        (&revoked["revokedId"], &revoked["chatId"], &revoked["to"]),
        (&json!(id), &json!(PEER), &json!(PEER)),
        "{revoked}"
    );
    assert_eq!(revoked["from"], me.as_str(), "{revoked}");
    assert!(revoked["id"].as_str().is_some_and(|r| r != id), "{revoked}");
    // The row changes ride the same writes as the events: the delete for everyone came last, so the row
    // is left revoked, with the edited text gone too.
    let rows = c.get(&format!("/api/sessions/{s}/messages")).await.unwrap();
    let row = rows
        .body
        .as_array()
        .and_then(|r| r.iter().find(|m| m["waMessageId"] == id.as_str()).cloned());
    assert_eq!(
        row.map(|m| (m["type"].clone(), m["body"].clone())),
        Some((json!("revoked"), json!(""))),
        "{}",
        rows.text
    );
}

/// An idle SQLite-queue worker picks a new delivery up within a second or so, not at its next 30 s heartbeat.
async fn an_idle_worker_delivers_promptly(rig: Rig) {
    let c = rig.client();
    let s = ready_session(&c, "dlv-prompt").await;
    let receiver = Receiver::start().await.unwrap();
    add_webhook(
        &c,
        &s,
        json!({ "url": receiver.url(), "events": ["message.received"] }),
    )
    .await;
    // Let the worker go idle past its first heartbeat, then time one delivery.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let started = std::time::Instant::now();
    inbound(&c, &s, PEER, "prompt").await;
    receiver.wait_until(WAIT, |d| !d.is_empty()).await;
    let took = started.elapsed();
    // Half the heartbeat: tells a woken worker from one waiting for its heartbeat, with room for a loaded
    // CI machine (this is a defect check, not a latency figure; the benchmarks measure latency).
    assert!(took < Duration::from_secs(15), "delivery took {took:?}");
}

/// Committed events whose deliveries are still failing when the process dies (kill -9) are all delivered
/// after the restart.
async fn nothing_is_lost_across_kill9(mut rig: Rig) {
    let c = rig.client();
    let s = ready_session(&c, "dlv-crash").await;
    let rx = Receiver::start().await.unwrap();
    // Every attempt fails until the crash (a fixed number of failures raced the retries under load).
    rx.respond_with(&[500; 10_000]);
    add_webhook(
        &c,
        &s,
        json!({ "url": rx.url(), "events": ["message.received"], "retryCount": 10 }),
    )
    .await;
    for i in 0..5 {
        inbound(&c, &s, PEER, &format!("m{i}")).await;
    }
    // Every occurrence is committed (each has been attempted at least once) and none has succeeded yet.
    rx.wait_until(WAIT, |d| {
        d.iter()
            .filter_map(|x| x.header("x-wagate-idempotency-key"))
            .collect::<std::collections::HashSet<_>>()
            .len()
            == 5
    })
    .await;
    rig.node.kill9();
    let worker = rig.worker.take();
    let had_worker = worker.is_some();
    if let Some(mut w) = worker {
        let _ = w.kill();
        let _ = w.wait();
    }
    let failing = rx.switch_responses(&[]);
    if had_worker {
        rig.start_worker();
    }
    rig.node.restart().await.expect("restart");
    let got = rx
        .wait_until(Duration::from_secs(60), |d| {
            let mut ok: HashMap<&str, bool> = HashMap::new();
            for (i, x) in d.iter().enumerate() {
                let e = ok
                    .entry(x.header("x-wagate-idempotency-key").unwrap_or(""))
                    .or_default();
                *e |= i >= failing;
            }
            ok.len() == 5 && ok.values().all(|v| *v)
        })
        .await;
    let bodies: std::collections::BTreeSet<String> = got
        .iter()
        .map(|d| d.json()["data"]["body"].as_str().unwrap_or("").to_string())
        .collect();
    assert_eq!(
        bodies.len(),
        5,
        "every event delivered: {bodies:?}\n{}",
        rig.node.logs()
    );
    for d in &got {
        let key = d.header("x-wagate-idempotency-key").unwrap();
        let same = of_key(&got, key);
        assert!(same.iter().all(|x| x.header("x-wagate-delivery-id") == same[0].header("x-wagate-delivery-id")));
    }
}

#[tokio::test]
async fn embedded_retries_keep_keys_sign_raw_bytes_and_back_off() {
    retries_keep_keys_sign_raw_bytes_and_back_off(Rig::embedded().await).await;
}

#[tokio::test]
async fn embedded_exhausted_deliveries_land_in_the_failure_log_and_redrive() {
    exhausted_deliveries_land_in_the_failure_log_and_redrive(Rig::embedded().await).await;
}

#[tokio::test]
async fn embedded_sender_filter_drops_reactions() {
    a_sender_filter_drops_events_without_a_sender(Rig::embedded().await).await;
}

#[tokio::test]
async fn embedded_own_reactions_edits_and_revokes_raise_events() {
    own_reactions_edits_and_revokes_raise_events(Rig::embedded().await).await;
}

#[tokio::test]
async fn embedded_an_idle_worker_delivers_promptly() {
    an_idle_worker_delivers_promptly(Rig::embedded().await).await;
}

#[tokio::test]
async fn embedded_nothing_is_lost_across_kill9() {
    nothing_is_lost_across_kill9(Rig::embedded().await).await;
}

#[tokio::test]
async fn clustered_retries_keep_keys_sign_raw_bytes_and_back_off() {
    retries_keep_keys_sign_raw_bytes_and_back_off(Rig::clustered().await).await;
}

#[tokio::test]
async fn clustered_exhausted_deliveries_land_in_the_failure_log_and_redrive() {
    exhausted_deliveries_land_in_the_failure_log_and_redrive(Rig::clustered().await).await;
}

#[tokio::test]
async fn clustered_sender_filter_drops_reactions() {
    a_sender_filter_drops_events_without_a_sender(Rig::clustered().await).await;
}

#[tokio::test]
async fn clustered_nothing_is_lost_across_kill9() {
    nothing_is_lost_across_kill9(Rig::clustered().await).await;
}
