//! Webhook delivery end to end through the real queue workers, against a recording receiver on loopback. Every
//! scenario runs on SQLite (embedded), PostgreSQL with the SQLite queue, and PostgreSQL with the Redis queue.

mod common;

use std::time::Duration;

use common::*;
use serde_json::json;
use wagate_proto::jobs::IngressJob;
use wagate_workers::db::now_ms;
use wagate_workers::on_pool;
use wagate_workers::webhook::sign::verify;
use wagate_workers::{
    DataPool, PastClaims, enqueue_outbox, reconcile_outbox, release_claims_of_past_life,
};

const SECRET: &str = "a-secret-of-16-chars";

async fn delivers_a_signed_envelope(kind: Kind) {
    let env = TestEnv::start(kind, test_settings()).await;
    let rx = Receiver::start(vec![], None).await;
    let mut seed = WebhookSeed::new(&rx.url);
    seed.secret = Some(SECRET);
    let (sid, wid) = seed_webhook(&env.pool, &seed).await;
    let (oid, key) = seed_outbox(&env.pool, &sid, &wid, json!({"id": "m1", "body": "héllo"})).await;
    assert_eq!(
        enqueue_outbox(&env.pool, &env.queue, std::slice::from_ref(&oid))
            .await
            .unwrap(),
        1
    );

    wait_for("delivered", || async {
        outbox_status(&env.pool, &oid).await.as_deref() == Some("delivered")
    })
    .await;
    let reqs = rx.requests();
    assert_eq!(reqs.len(), 1);
    let r = &reqs[0];
    assert!(
        verify(SECRET, &r.body, r.header("x-wagate-signature")),
        "signature over the raw body"
    );
    assert_eq!(r.header("x-wagate-event"), "message.received");
    assert_eq!(r.header("x-wagate-idempotency-key"), key);
    assert_eq!(r.header("x-wagate-retry-count"), "0");
    assert_eq!(r.header("content-type"), "application/json");
    assert!(r.header("user-agent").starts_with("wagate-webhook/"));
    let delivery_id = r.header("x-wagate-delivery-id");
    assert!(delivery_id.starts_with("dlv_"), "{delivery_id}");
    let expected = format!(
        r#"{{"event":"message.received","timestamp":"2026-05-01T10:00:00.000Z","sessionId":"{sid}","idempotencyKey":"{key}","deliveryId":"{delivery_id}","data":{{"body":"héllo","id":"m1"}}}}"#
    );
    assert_eq!(std::str::from_utf8(&r.body).unwrap(), expected);
    assert!(last_triggered_at(&env.pool, &wid).await.is_some());
    assert!(failure_rows(&env.pool, &wid).await.is_empty());
    env.finish().await;
}

async fn retries_with_growing_gaps_then_records_the_failure(kind: Kind) {
    let env = TestEnv::start(kind, test_settings()).await;
    let rx = Receiver::start(vec![], Some(500)).await;
    let mut seed = WebhookSeed::new(&rx.url);
    seed.retry_count = 2;
    let (sid, wid) = seed_webhook(&env.pool, &seed).await;
    let (oid, key) = seed_outbox(&env.pool, &sid, &wid, json!({"n": 1})).await;
    enqueue_outbox(&env.pool, &env.queue, std::slice::from_ref(&oid))
        .await
        .unwrap();

    wait_for("failed", || async {
        outbox_status(&env.pool, &oid).await.as_deref() == Some("failed")
    })
    .await;
    let reqs = rx.requests();
    assert_eq!(reqs.len(), 3, "1 + retryCount attempts");
    let counts: Vec<&str> = reqs
        .iter()
        .map(|r| r.header("x-wagate-retry-count"))
        .collect();
    assert_eq!(counts, ["0", "1", "2"]);
    let delivery_id = reqs[0].header("x-wagate-delivery-id").to_owned();
    for r in &reqs {
        assert_eq!(r.header("x-wagate-idempotency-key"), key);
        assert_eq!(r.header("x-wagate-delivery-id"), delivery_id);
    }
    // The table owns the schedule: an attempt is never claimed before it is due (50 ms, then 100 ms).
    assert!(reqs[1].at - reqs[0].at >= Duration::from_millis(50));
    assert!(reqs[2].at - reqs[1].at >= Duration::from_millis(100));

    let rows = failure_rows(&env.pool, &wid).await;
    assert_eq!(rows.len(), 1);
    let f = &rows[0];
    assert_eq!((f.attempts, f.last_status_code), (3, Some(500)));
    assert_eq!(
        (f.session_id.as_str(), f.event.as_str(), f.url.as_str()),
        (sid.as_str(), "message.received", rx.url.as_str())
    );
    assert_eq!(
        (f.idempotency_key.as_str(), f.delivery_id.as_str()),
        (key.as_str(), delivery_id.as_str())
    );
    assert!(
        f.payload.contains(&key) && !f.payload.contains("deliveryId"),
        "the stored envelope is kept for redrive"
    );
    assert!(f.last_error.as_deref().unwrap_or("").contains("500"));
    assert_eq!(last_triggered_at(&env.pool, &wid).await, None);
    env.finish().await;
}

async fn a_later_attempt_can_succeed(kind: Kind) {
    let env = TestEnv::start(kind, test_settings()).await;
    let rx = Receiver::start(vec![503, 502], None).await;
    let (sid, wid) = seed_webhook(&env.pool, &WebhookSeed::new(&rx.url)).await;
    let (oid, _) = seed_outbox(&env.pool, &sid, &wid, json!({})).await;
    enqueue_outbox(&env.pool, &env.queue, std::slice::from_ref(&oid))
        .await
        .unwrap();

    wait_for("delivered", || async {
        outbox_status(&env.pool, &oid).await.as_deref() == Some("delivered")
    })
    .await;
    let counts: Vec<String> = rx
        .requests()
        .iter()
        .map(|r| r.header("x-wagate-retry-count").to_owned())
        .collect();
    assert_eq!(counts, ["0", "1", "2"]);
    assert!(failure_rows(&env.pool, &wid).await.is_empty());
    assert!(last_triggered_at(&env.pool, &wid).await.is_some());
    env.finish().await;
}

/// A retry a few seconds out runs once due, well before the 30 s heartbeat of a queue that is not polled.
async fn a_retry_runs_once_due(kind: Kind) {
    let settings = wagate_workers::WebhookSettings {
        retry_delay_ms: 2_000,
        ..test_settings()
    };
    let env = TestEnv::start(kind, settings).await;
    let rx = Receiver::start(vec![503], None).await;
    let (sid, wid) = seed_webhook(&env.pool, &WebhookSeed::new(&rx.url)).await;
    let (oid, _) = seed_outbox(&env.pool, &sid, &wid, json!({})).await;
    enqueue_outbox(&env.pool, &env.queue, std::slice::from_ref(&oid))
        .await
        .unwrap();
    let delivered = tokio::time::timeout(Duration::from_secs(12), async {
        while outbox_status(&env.pool, &oid).await.as_deref() != Some("delivered") {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await;
    assert!(delivered.is_ok(), "the retry did not run once due");
    let reqs = rx.requests();
    assert_eq!(reqs.len(), 2);
    assert!(reqs[1].at - reqs[0].at >= Duration::from_secs(2));
    env.finish().await;
}

async fn oversize_payload_is_never_dispatched(kind: Kind) {
    let settings = wagate_workers::WebhookSettings {
        max_payload_bytes: 256,
        ..test_settings()
    };
    let env = TestEnv::start(kind, settings).await;
    let rx = Receiver::start(vec![], None).await;
    let (sid, wid) = seed_webhook(&env.pool, &WebhookSeed::new(&rx.url)).await;
    let (oid, _) = seed_outbox(&env.pool, &sid, &wid, json!({"blob": "x".repeat(400)})).await;
    enqueue_outbox(&env.pool, &env.queue, std::slice::from_ref(&oid))
        .await
        .unwrap();

    wait_for("failed", || async {
        outbox_status(&env.pool, &oid).await.as_deref() == Some("failed")
    })
    .await;
    assert!(rx.requests().is_empty());
    let rows = failure_rows(&env.pool, &wid).await;
    assert_eq!(
        (rows.len(), rows[0].attempts, rows[0].last_status_code),
        (1, 0, None)
    );
    assert!(
        rows[0]
            .last_error
            .as_deref()
            .unwrap_or("")
            .contains("WEBHOOK_MAX_PAYLOAD_BYTES")
    );
    env.finish().await;
}

async fn custom_headers_are_sent_without_reserved_ones(kind: Kind) {
    let env = TestEnv::start(kind, test_settings()).await;
    let rx = Receiver::start(vec![], None).await;
    let mut seed = WebhookSeed::new(&rx.url);
    seed.headers = r#"{"X-Tenant":"acme","X-Wagate-Event":"forged","X-Wagate-Signature":"sha256=00","User-Agent":"evil","Host":"evil.example","Content-Type":"text/plain"}"#;
    let (sid, wid) = seed_webhook(&env.pool, &seed).await;
    let (oid, _) = seed_outbox(&env.pool, &sid, &wid, json!({})).await;
    enqueue_outbox(&env.pool, &env.queue, std::slice::from_ref(&oid))
        .await
        .unwrap();

    wait_for("delivered", || async {
        outbox_status(&env.pool, &oid).await.as_deref() == Some("delivered")
    })
    .await;
    let r = &rx.requests()[0];
    assert_eq!(r.header("x-tenant"), "acme");
    assert_eq!(r.header("x-wagate-event"), "message.received");
    assert_eq!(
        r.header("x-wagate-signature"),
        "",
        "no secret, so no signature, forged or not"
    );
    assert!(r.header("user-agent").starts_with("wagate-webhook/"));
    assert_eq!(r.header("content-type"), "application/json");
    assert!(r.header("host").starts_with("127.0.0.1:"));
    env.finish().await;
}

async fn duplicate_jobs_deliver_once(kind: Kind) {
    let env = TestEnv::start(kind, test_settings()).await;
    let rx = Receiver::start(vec![], None).await;
    let (sid, wid) = seed_webhook(&env.pool, &WebhookSeed::new(&rx.url)).await;
    let (oid, _) = seed_outbox(&env.pool, &sid, &wid, json!({})).await;
    enqueue_outbox(&env.pool, &env.queue, std::slice::from_ref(&oid))
        .await
        .unwrap();
    for _ in 0..3 {
        env.queue.push_delivery(&oid, None).await.unwrap();
    }
    wait_for("delivered", || async {
        outbox_status(&env.pool, &oid).await.as_deref() == Some("delivered")
    })
    .await;
    // Let the duplicates run: each finds the row already delivered.
    tokio::time::sleep(Duration::from_millis(600)).await;
    assert_eq!(rx.requests().len(), 1);
    env.finish().await;
}

async fn inactive_webhook_keeps_the_row_in_the_failure_log(kind: Kind) {
    let env = TestEnv::start(kind, test_settings()).await;
    let rx = Receiver::start(vec![], None).await;
    let mut seed = WebhookSeed::new(&rx.url);
    seed.active = false;
    let (sid, wid) = seed_webhook(&env.pool, &seed).await;
    let (oid, _) = seed_outbox(&env.pool, &sid, &wid, json!({})).await;
    enqueue_outbox(&env.pool, &env.queue, std::slice::from_ref(&oid))
        .await
        .unwrap();

    // A paused webhook's waiting delivery stays redrivable: a failure row, never dispatched.
    wait_for("row failed", || async {
        outbox_status(&env.pool, &oid).await.as_deref() == Some("failed")
    })
    .await;
    assert!(rx.requests().is_empty());
    let failures = failure_rows(&env.pool, &wid).await;
    assert_eq!(failures.len(), 1, "{failures:?}");
    assert_eq!(failures[0].attempts, 0);
    assert_eq!(
        failures[0].last_error.as_deref(),
        Some("webhook deactivated before delivery")
    );
    env.finish().await;
}

async fn reconcile_requeues_a_lost_row(kind: Kind) {
    let env = TestEnv::start(kind, test_settings()).await;
    let rx = Receiver::start(vec![], None).await;
    let (sid, wid) = seed_webhook(&env.pool, &WebhookSeed::new(&rx.url)).await;
    let old = now_ms() - 120_000;
    let (lost, _) = seed_outbox_at(&env.pool, &sid, &wid, json!({"lost": true}), old, old).await;
    let (fresh, _) = seed_outbox(&env.pool, &sid, &wid, json!({"fresh": true})).await;

    let report = reconcile_outbox(
        &env.pool,
        &env.queue,
        &env.settings,
        Duration::from_secs(60),
    )
    .await
    .unwrap();
    assert_eq!(
        report.requeued, 1,
        "only the row untouched for longer than stale_after"
    );
    wait_for("delivered", || async {
        outbox_status(&env.pool, &lost).await.as_deref() == Some("delivered")
    })
    .await;
    assert_eq!(
        outbox_status(&env.pool, &fresh).await.as_deref(),
        Some("pending")
    );
    assert_eq!(rx.requests().len(), 1);
    env.finish().await;
}

/// Marks a seeded row as an attempt `claimer` holds since `at_ms`, as a worker's claim leaves it.
async fn claim_as(pool: &DataPool, id: &str, claimer: &str, at_ms: i64) {
    on_pool!(pool, |p| sqlx::query(
        "UPDATE webhook_outbox_events SET status = 'delivering', attempts = attempts + 1, \
         claimed_by = $2, updated_at = $3 WHERE id = $1"
    )
    .bind(id)
    .bind(claimer)
    .bind(at_ms)
    .execute(p)
    .await
    .map(|_| ())
    .unwrap());
}

async fn a_stale_claim_is_released_and_delivered_in_one_sweep(kind: Kind) {
    let env = TestEnv::start(kind, test_settings()).await;
    let rx = Receiver::start(vec![], None).await;
    let (sid, wid) = seed_webhook(&env.pool, &WebhookSeed::new(&rx.url)).await;
    let (held, _) = seed_outbox(&env.pool, &sid, &wid, json!({"held": true})).await;
    claim_as(&env.pool, &held, "dead-worker", now_ms() - 120_000).await;

    let report = reconcile_outbox(
        &env.pool,
        &env.queue,
        &env.settings,
        Duration::from_secs(60),
    )
    .await
    .unwrap();
    assert_eq!(report.released_inflight, 1);
    assert_eq!(report.requeued, 1, "released and pushed by the same sweep");
    wait_for("delivered", || async {
        outbox_status(&env.pool, &held).await.as_deref() == Some("delivered")
    })
    .await;
    assert_eq!(rx.requests().len(), 1);
    env.finish().await;
}

async fn a_restarted_node_releases_its_own_past_claims_only(kind: Kind) {
    let env = TestEnv::start(kind, test_settings()).await;
    let rx = Receiver::start(vec![], None).await;
    let (sid, wid) = seed_webhook(&env.pool, &WebhookSeed::new(&rx.url)).await;
    let (mine, _) = seed_outbox(&env.pool, &sid, &wid, json!({"mine": true})).await;
    let (theirs, _) = seed_outbox(&env.pool, &sid, &wid, json!({"theirs": true})).await;
    // Claimed a second ago: far inside the stale window, so only the claimer's identity can release them.
    let claimed_at = now_ms() - 1_000;
    claim_as(&env.pool, &mine, "node-a", claimed_at).await;
    claim_as(&env.pool, &theirs, "node-b", claimed_at).await;

    let pushed = release_claims_of_past_life(
        &env.pool,
        &env.queue,
        PastClaims::MadeBy("node-a"),
        now_ms(),
    )
    .await
    .unwrap();
    assert_eq!(pushed, 1);
    wait_for("delivered", || async {
        outbox_status(&env.pool, &mine).await.as_deref() == Some("delivered")
    })
    .await;
    assert_eq!(
        outbox_status(&env.pool, &theirs).await.as_deref(),
        Some("delivering"),
        "another node's live claim is left alone"
    );
    let everyone = release_claims_of_past_life(&env.pool, &env.queue, PastClaims::All, now_ms())
        .await
        .unwrap();
    assert_eq!(everyone, 1, "the sole deliverer releases every past claim");
    wait_for("delivered", || async {
        outbox_status(&env.pool, &theirs).await.as_deref() == Some("delivered")
    })
    .await;
    assert_eq!(rx.requests().len(), 2);
    env.finish().await;
}

/// A retry that was due while the worker was dead (its job died with it) goes out at the next boot, not a
/// stale window later; a row due only after boot waits for its own job.
async fn rows_due_at_boot_are_enqueued_at_once(kind: Kind) {
    let env = TestEnv::start(kind, test_settings()).await;
    let rx = Receiver::start(vec![], None).await;
    let (sid, wid) = seed_webhook(&env.pool, &WebhookSeed::new(&rx.url)).await;
    let recent = now_ms() - 2_000;
    let (due, _) =
        seed_outbox_at(&env.pool, &sid, &wid, json!({"due": true}), recent, recent).await;
    let later = now_ms() + 600_000;
    let (not_yet, _) =
        seed_outbox_at(&env.pool, &sid, &wid, json!({"later": true}), later, recent).await;

    let pushed = release_claims_of_past_life(
        &env.pool,
        &env.queue,
        PastClaims::MadeBy("node-a"),
        now_ms(),
    )
    .await
    .unwrap();
    assert_eq!(pushed, 1);
    wait_for("delivered", || async {
        outbox_status(&env.pool, &due).await.as_deref() == Some("delivered")
    })
    .await;
    assert_eq!(
        outbox_status(&env.pool, &not_yet).await.as_deref(),
        Some("pending")
    );
    assert_eq!(rx.requests().len(), 1);
    env.finish().await;
}

/// More jobs than the dispatch concurrency, each slow: a stop finishes what runs and returns, and leaves
/// the rest queued for the next boot (apalis alone could wait for ever on jobs it fetched but never started).
async fn a_stop_with_more_jobs_than_its_concurrency_returns(kind: Kind) {
    let settings = wagate_workers::WebhookSettings {
        dispatch_concurrency: 8,
        ..test_settings()
    };
    let mut env = TestEnv::start(kind, settings).await;
    let rx = Receiver::start(vec![], None).await;
    let (sid, wid) = seed_webhook(&env.pool, &WebhookSeed::new(&rx.slow_url())).await;
    let mut ids = Vec::new();
    for job in 0..60 {
        let mut rows = Vec::new();
        for n in 0..4 {
            let (id, _) = seed_outbox(&env.pool, &sid, &wid, json!({ "job": job, "n": n })).await;
            rows.push(id);
        }
        enqueue_outbox(&env.pool, &env.queue, &rows).await.unwrap();
        ids.extend(rows);
    }
    wait_for("a delivery under way", || async {
        !rx.requests().is_empty()
    })
    .await;
    assert!(
        env.stop_workers().await,
        "the workers returned after the stop"
    );
    for id in &ids {
        let status = outbox_status(&env.pool, id).await.unwrap_or_default();
        assert!(
            ["delivered", "queued", "pending"].contains(&status.as_str()),
            "{id}: {status}: nothing is left mid-attempt"
        );
    }
    env.finish().await;
}

async fn ingress_job_marks_the_event_processed(kind: Kind) {
    let env = TestEnv::start(kind, test_settings()).await;
    let id = uuid::Uuid::new_v4().to_string();
    on_pool!(&env.pool, |p| {
        sqlx::query(
        "INSERT INTO ingress_events (id, source, payload, status, created_at) VALUES ($1, 'test', '{}', 'received', $2)"
    )
    .bind(&id)
    .bind(now_ms())
    .execute(p)
    .await
    .map(|_| ())
    .unwrap()
    });
    env.queue
        .push_ingress(IngressJob {
            ingress_event_id: id.clone(),
        })
        .await
        .unwrap();
    wait_for("processed", || async {
        let status = on_pool!(&env.pool, |p| sqlx::query_scalar::<_, String>(
            "SELECT status FROM ingress_events WHERE id = $1"
        )
        .bind(&id)
        .fetch_one(p)
        .await
        .unwrap());
        status == "processed"
    })
    .await;
    env.finish().await;
}

async fn finished_jobs_are_vacuumed(kind: Kind) {
    let env = TestEnv::start(kind, test_settings()).await;
    let rx = Receiver::start(vec![], None).await;
    let (sid, wid) = seed_webhook(&env.pool, &WebhookSeed::new(&rx.url)).await;
    let (oid, _) = seed_outbox(&env.pool, &sid, &wid, json!({})).await;
    enqueue_outbox(&env.pool, &env.queue, std::slice::from_ref(&oid))
        .await
        .unwrap();
    wait_for("delivered", || async {
        outbox_status(&env.pool, &oid).await.as_deref() == Some("delivered")
    })
    .await;
    // Acks land just after the handler returns; a positive count means the finished job was found and deleted.
    wait_for("the finished job vacuumed", || async {
        env.queue.vacuum_finished(Duration::ZERO).await.unwrap() >= 1
    })
    .await;
    env.finish().await;
}

macro_rules! suite {
    ($name:ident, $kind:expr) => {
        mod $name {
            use super::*;

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn delivers_a_signed_envelope() {
                super::delivers_a_signed_envelope($kind).await
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn retries_with_growing_gaps_then_records_the_failure() {
                super::retries_with_growing_gaps_then_records_the_failure($kind).await
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn a_later_attempt_can_succeed() {
                super::a_later_attempt_can_succeed($kind).await
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn a_retry_runs_once_due() {
                super::a_retry_runs_once_due($kind).await
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn oversize_payload_is_never_dispatched() {
                super::oversize_payload_is_never_dispatched($kind).await
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn custom_headers_are_sent_without_reserved_ones() {
                super::custom_headers_are_sent_without_reserved_ones($kind).await
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn duplicate_jobs_deliver_once() {
                super::duplicate_jobs_deliver_once($kind).await
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn inactive_webhook_keeps_the_row_in_the_failure_log() {
                super::inactive_webhook_keeps_the_row_in_the_failure_log($kind).await
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn reconcile_requeues_a_lost_row() {
                super::reconcile_requeues_a_lost_row($kind).await
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn a_stale_claim_is_released_and_delivered_in_one_sweep() {
                super::a_stale_claim_is_released_and_delivered_in_one_sweep($kind).await
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn a_restarted_node_releases_its_own_past_claims_only() {
                super::a_restarted_node_releases_its_own_past_claims_only($kind).await
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn rows_due_at_boot_are_enqueued_at_once() {
                super::rows_due_at_boot_are_enqueued_at_once($kind).await
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn a_stop_with_more_jobs_than_its_concurrency_returns() {
                super::a_stop_with_more_jobs_than_its_concurrency_returns($kind).await
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn finished_jobs_are_vacuumed() {
                super::finished_jobs_are_vacuumed($kind).await
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn ingress_job_marks_the_event_processed() {
                super::ingress_job_marks_the_event_processed($kind).await
            }
        }
    };
}

suite!(sqlite, Kind::Sqlite);
suite!(sqlite_sole_pusher, Kind::SqliteSolePusher);
suite!(postgres, Kind::Postgres);
suite!(postgres_redis, Kind::PostgresRedis);
