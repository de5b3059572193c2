//! Test fixtures for the worker suites: a recording webhook receiver on loopback, a throwaway data DB (SQLite
//! temp file or a fresh PostgreSQL database), a queue (SQLite file or Redis with unique queue names), and
//! row seeding. Real services only; nothing is mocked.

#![allow(dead_code)]

mod receiver;
pub use receiver::Receiver;

use std::path::Path;
use std::time::Duration;

use sqlx::migrate::Migrator;
use tokio_util::sync::CancellationToken;
use wagate_workers::db::{DataPool, DatabaseKind, now_ms};
use wagate_workers::on_pool;
use wagate_workers::{QueueBackend, QueueClient, QueueConfig, WebhookSettings, spawn_workers};

const PG_ADMIN_URL: &str = "postgres://postgres@127.0.0.1:5432/postgres";
const REDIS_URL: &str = "redis://127.0.0.1:6379";

/// Which data DB and queue a suite runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// SQLite data DB, apalis-sqlite queue (embedded mode).
    Sqlite,
    /// The same, the queue fed by this process only (`ROLE=all`): no polls, wakes on pushes and due times.
    SqliteSolePusher,
    /// PostgreSQL data DB, apalis-sqlite queue.
    Postgres,
    /// PostgreSQL data DB, Redis queue (cluster mode).
    PostgresRedis,
}

/// A running worker stack over throwaway storage. Call [`TestEnv::finish`] at the end to stop the workers
/// and drop the PostgreSQL database and Redis keys.
pub struct TestEnv {
    pub pool: DataPool,
    pub queue: QueueClient,
    pub settings: WebhookSettings,
    shutdown: CancellationToken,
    workers: Option<tokio::task::JoinHandle<()>>,
    pg_db: Option<String>,
    _dir: tempfile::TempDir,
}

/// Delivery settings for loopback tests: the guard off (receivers are on 127.0.0.1), short delays.
pub fn test_settings() -> WebhookSettings {
    WebhookSettings {
        timeout_ms: 5_000,
        retry_delay_ms: 50,
        is_ssrf_protected: false,
        ..WebhookSettings::default()
    }
}

impl TestEnv {
    pub async fn start(kind: Kind, settings: WebhookSettings) -> TestEnv {
        let dir = tempfile::tempdir().unwrap();
        let (pool, pg_db) = match kind {
            Kind::Sqlite | Kind::SqliteSolePusher => (sqlite_pool(dir.path()).await, None),
            Kind::Postgres | Kind::PostgresRedis => {
                let (pool, name) = postgres_pool().await;
                (pool, Some(name))
            }
        };
        let tag = uuid::Uuid::new_v4().simple().to_string();
        let backend = match kind {
            Kind::PostgresRedis => QueueBackend::Redis {
                url: REDIS_URL.into(),
            },
            _ => QueueBackend::Sqlite {
                path: dir.path().join("queue.sqlite"),
            },
        };
        let mut config = match kind {
            Kind::SqliteSolePusher => QueueConfig::new(backend).pushed_by_this_process_only(),
            _ => QueueConfig::new(backend),
        };
        config.webhook_queue = format!("wagate-test-{tag}-webhook");
        config.ingress_queue = format!("wagate-test-{tag}-ingress");
        let queue = QueueClient::connect(&config).await.unwrap();
        let shutdown = CancellationToken::new();
        let workers = spawn_workers(
            settings.clone(),
            pool.clone(),
            queue.clone(),
            shutdown.clone(),
        )
        .unwrap();
        TestEnv {
            pool,
            queue,
            settings,
            shutdown,
            workers: Some(workers),
            pg_db,
            _dir: dir,
        }
    }

    /// Stops the workers as a SIGTERM would; true once they have all returned (bounded so that a hang
    /// fails the test instead of stalling it).
    pub async fn stop_workers(&mut self) -> bool {
        self.shutdown.cancel();
        match self.workers.take() {
            Some(workers) => tokio::time::timeout(Duration::from_secs(120), workers)
                .await
                .is_ok(),
            None => true,
        }
    }

    pub async fn finish(self) {
        self.shutdown.cancel();
        if let Some(workers) = self.workers {
            let _ = tokio::time::timeout(Duration::from_secs(10), workers).await;
        }
        if let QueueBackend::Redis { url } = &self.queue.config().backend {
            drop_redis_keys(url, &self.queue.config().webhook_queue).await;
            drop_redis_keys(url, &self.queue.config().ingress_queue).await;
        }
        if let DataPool::Postgres(p) = &self.pool {
            p.close().await;
        }
        if let Some(db) = self.pg_db {
            let admin = wagate_db::pool_options::<sqlx::Postgres>()
                .connect(PG_ADMIN_URL)
                .await
                .unwrap();
            sqlx::query(sqlx::AssertSqlSafe(format!(
                "DROP DATABASE IF EXISTS \"{db}\" WITH (FORCE)"
            )))
            .execute(&admin)
            .await
            .unwrap();
        }
    }
}

async fn migrator(dir: &str) -> Migrator {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../migrations")
        .join(dir);
    Migrator::new(path).await.unwrap()
}

async fn sqlite_pool(dir: &Path) -> DataPool {
    let file = dir.join("wagate.sqlite");
    let pool = DataPool::connect(DatabaseKind::Sqlite, file.to_str().unwrap())
        .await
        .unwrap();
    let DataPool::Sqlite(p) = &pool else {
        unreachable!()
    };
    migrator("sqlite").await.run(p).await.unwrap();
    pool
}

async fn postgres_pool() -> (DataPool, String) {
    let name = format!("wagate_test_{}", uuid::Uuid::new_v4().simple());
    let admin = wagate_db::pool_options::<sqlx::Postgres>()
        .connect(PG_ADMIN_URL)
        .await
        .unwrap();
    sqlx::query(sqlx::AssertSqlSafe(format!("CREATE DATABASE \"{name}\"")))
        .execute(&admin)
        .await
        .unwrap();
    admin.close().await;
    let url = format!("postgres://postgres@127.0.0.1:5432/{name}");
    let pool = DataPool::connect(DatabaseKind::Postgres, &url)
        .await
        .unwrap();
    let DataPool::Postgres(p) = &pool else {
        unreachable!()
    };
    migrator("postgres").await.run(p).await.unwrap();
    (pool, name)
}

async fn drop_redis_keys(url: &str, queue: &str) {
    let client = redis::Client::open(url).unwrap();
    let mut conn = client.get_multiplexed_async_connection().await.unwrap();
    let keys: Vec<String> = redis::cmd("KEYS")
        .arg(format!("{queue}:*"))
        .query_async(&mut conn)
        .await
        .unwrap();
    if !keys.is_empty() {
        let _: () = redis::cmd("DEL")
            .arg(keys)
            .query_async(&mut conn)
            .await
            .unwrap();
    }
}

/// A webhook to seed; `headers` is the raw JSON object column.
pub struct WebhookSeed<'a> {
    pub url: &'a str,
    pub secret: Option<&'a str>,
    pub headers: &'a str,
    pub retry_count: i32,
    pub active: bool,
}

impl<'a> WebhookSeed<'a> {
    pub fn new(url: &'a str) -> WebhookSeed<'a> {
        WebhookSeed {
            url,
            secret: None,
            headers: "{}",
            retry_count: 3,
            active: true,
        }
    }
}

/// Inserts a session and a webhook; returns `(session_id, webhook_id)`.
pub async fn seed_webhook(pool: &DataPool, w: &WebhookSeed<'_>) -> (String, String) {
    let (sid, wid, now) = (
        uuid::Uuid::new_v4().to_string(),
        uuid::Uuid::new_v4().to_string(),
        now_ms(),
    );
    on_pool!(pool, |p| {
        sqlx::query(
            "INSERT INTO sessions (id, name, created_at, updated_at) VALUES ($1, $2, $3, $3)",
        )
        .bind(&sid)
        .bind(format!("s-{sid}"))
        .bind(now)
        .execute(p)
        .await
        .unwrap();
        sqlx::query(
            "INSERT INTO webhooks (id, session_id, url, secret, headers, active, retry_count, created_at, updated_at) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $8)",
        )
        .bind(&wid)
        .bind(&sid)
        .bind(w.url)
        .bind(w.secret)
        .bind(w.headers)
        .bind(w.active)
        .bind(w.retry_count)
        .bind(now)
        .execute(p)
        .await
        .unwrap();
    });
    (sid, wid)
}

/// The stored envelope (no `deliveryId`) the node would write for one event.
pub fn stored_payload(session_id: &str, idempotency_key: &str, data: serde_json::Value) -> String {
    format!(
        r#"{{"event":"message.received","timestamp":"2026-05-01T10:00:00.000Z","sessionId":"{session_id}","idempotencyKey":"{idempotency_key}","data":{data}}}"#
    )
}

/// Inserts a `pending` outbox row due at `due_ms` and untouched since `updated_ms`; returns its id and key.
pub async fn seed_outbox_at(
    pool: &DataPool,
    session_id: &str,
    webhook_id: &str,
    data: serde_json::Value,
    due_ms: i64,
    updated_ms: i64,
) -> (String, String) {
    let (id, key) = (
        uuid::Uuid::new_v4().to_string(),
        format!("idem-{}", uuid::Uuid::new_v4()),
    );
    let payload = stored_payload(session_id, &key, data);
    on_pool!(pool, |p| {
        sqlx::query(
        "INSERT INTO webhook_outbox_events (id, webhook_id, session_id, event, idempotency_key, payload, status, \
         next_attempt_at, created_at, updated_at) VALUES ($1, $2, $3, 'message.received', $4, $5, 'pending', $6, $7, $7)",
    )
    .bind(&id)
    .bind(webhook_id)
    .bind(session_id)
    .bind(&key)
    .bind(&payload)
    .bind(due_ms)
    .bind(updated_ms)
    .execute(p)
    .await
    .map(|_| ())
    .unwrap()
    });
    (id, key)
}

pub async fn seed_outbox(
    pool: &DataPool,
    session_id: &str,
    webhook_id: &str,
    data: serde_json::Value,
) -> (String, String) {
    let now = now_ms();
    seed_outbox_at(pool, session_id, webhook_id, data, now, now).await
}

/// The outbox row's status, or `None` once it is gone.
pub async fn outbox_status(pool: &DataPool, id: &str) -> Option<String> {
    on_pool!(pool, |p| sqlx::query_scalar::<_, String>(
        "SELECT status FROM webhook_outbox_events WHERE id = $1"
    )
    .bind(id)
    .fetch_optional(p)
    .await
    .unwrap())
}

/// A delivery-failure row as the API would list it.
#[derive(Debug, sqlx::FromRow)]
pub struct FailureRow {
    pub webhook_id: String,
    pub session_id: String,
    pub event: String,
    pub url: String,
    pub idempotency_key: String,
    pub delivery_id: String,
    pub attempts: i32,
    pub last_status_code: Option<i32>,
    pub last_error: Option<String>,
    pub payload: String,
}

pub async fn failure_rows(pool: &DataPool, webhook_id: &str) -> Vec<FailureRow> {
    on_pool!(pool, |p| {
        sqlx::query_as::<_, FailureRow>(
        "SELECT webhook_id, session_id, event, url, idempotency_key, delivery_id, attempts, last_status_code, \
         last_error, payload FROM webhook_delivery_failures WHERE webhook_id = $1",
    )
    .bind(webhook_id)
    .fetch_all(p)
    .await
    .unwrap()
    })
}

pub async fn last_triggered_at(pool: &DataPool, webhook_id: &str) -> Option<i64> {
    on_pool!(pool, |p| sqlx::query_scalar::<_, Option<i64>>(
        "SELECT last_triggered_at FROM webhooks WHERE id = $1"
    )
    .bind(webhook_id)
    .fetch_one(p)
    .await
    .unwrap())
}

/// Polls `check` until it holds; panics with `what` after a generous limit (a hang, not a timing assertion).
pub async fn wait_for<F, Fut>(what: &str, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    for _ in 0..600 {
        if check().await {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("timed out waiting for {what}");
}
