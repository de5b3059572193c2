//! The job queues (`webhook-queue`, `ingress-queue`) on apalis 1.0: SQLite storage in its own file in embedded
//! mode, Redis when `REDIS_ENABLED=true`. Input: a [`QueueConfig`]. `QueueClient` pushes jobs; consuming them is
//! `workers.rs`. apalis never retries on its own here: the outbox table owns every retry schedule.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use apalis::prelude::{TaskBuilder, TaskSink};
use apalis_core::backend::Vacuum;
use apalis_redis::RedisStorage;
use apalis_sqlite::{SqliteConnectOptions, SqlitePool, SqliteStorage};
use sqlx::sqlite::{SqliteJournalMode, SqliteSynchronous};
use wagate_proto::jobs::{INGRESS_QUEUE, IngressJob, WEBHOOK_QUEUE, WebhookDeliveryJob};

use crate::wake::{Pushers, Wakes};

/// Finished jobs stay in apalis storage forever; ours are worthless once done (the outbox row holds the
/// outcome), so they are deleted after an hour.
const DELETE_FINISHED_SQLITE: &str =
    "DELETE FROM Jobs WHERE status IN ('Done', 'Killed') AND done_at IS NOT NULL AND done_at < $1";

/// apalis may re-run a job whose handler failed or panicked; our handlers answer `Ok` after recording the
/// outcome themselves, so this only bounds a crash loop.
const MAX_JOB_ATTEMPTS: usize = 3;

#[derive(Debug, thiserror::Error)]
pub enum QueueError {
    #[error("cannot open the queue database: {0}")]
    Sqlite(#[from] apalis_sqlite::Error),
    #[error("cannot open the queue database: {0}")]
    SqliteConnect(#[from] sqlx::Error),
    #[error("cannot reach Redis for the queues: {0}")]
    Redis(#[from] apalis_redis::RedisError),
    #[error("Redis queue error: {0}")]
    RedisQueue(#[from] apalis_redis::Error),
    #[error("cannot push a job: {0}")]
    Push(String),
}

/// Jobs of one queue per state, as operators see them (the queue dashboard, `/api/infra/status`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct JobCounts {
    pub waiting: u64,
    pub active: u64,
    pub delayed: u64,
    pub completed: u64,
    pub failed: u64,
}

impl JobCounts {
    /// Not yet finished: waiting + active + delayed (the spec's `pending`).
    pub fn pending(&self) -> u64 {
        self.waiting + self.active + self.delayed
    }

    pub fn by_state(&self) -> [(&'static str, u64); 5] {
        [
            ("waiting", self.waiting),
            ("active", self.active),
            ("delayed", self.delayed),
            ("completed", self.completed),
            ("failed", self.failed),
        ]
    }
}

/// Where the queues live.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum QueueBackend {
    /// Embedded mode: apalis-sqlite in its own file (apalis' migrations cannot share the data DB's file).
    Sqlite { path: PathBuf },
    /// Cluster mode (`REDIS_ENABLED=true`).
    Redis { url: String },
}

/// Queue location, names and polling. Names are configurable so tests can isolate themselves on one Redis.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueueConfig {
    pub backend: QueueBackend,
    pub webhook_queue: String,
    pub ingress_queue: String,
    /// How often workers poll when other processes push too. Without it apalis sees delayed jobs and jobs
    /// pushed by another process only at its 30 s heartbeat.
    pub poll_interval_ms: u64,
    /// Whether this process's workers must poll for others' jobs (see `wake.rs`).
    pub pushers: Pushers,
}

impl QueueConfig {
    pub fn new(backend: QueueBackend) -> QueueConfig {
        QueueConfig {
            backend,
            webhook_queue: WEBHOOK_QUEUE.to_owned(),
            ingress_queue: INGRESS_QUEUE.to_owned(),
            poll_interval_ms: 150,
            pushers: Pushers::AnyProcess,
        }
    }

    /// Only this process pushes to these queues (an embedded node's SQLite file): its workers stop polling
    /// and wake on its pushes instead.
    pub fn pushed_by_this_process_only(mut self) -> QueueConfig {
        self.pushers = Pushers::ThisProcess;
        self
    }

    /// Prefixes both queue names (`QUEUE_PREFIX`), so deployments or tests can share one Redis.
    pub fn with_prefix(mut self, prefix: &str) -> QueueConfig {
        self.webhook_queue = format!("{prefix}{}", self.webhook_queue);
        self.ingress_queue = format!("{prefix}{}", self.ingress_queue);
        self
    }
}

/// The two storages of one backend. Each push clones a storage (a pool or connection-manager handle).
#[derive(Clone)]
pub(crate) enum Storages {
    Sqlite {
        webhook: SqliteStorage<WebhookDeliveryJob>,
        ingress: SqliteStorage<IngressJob>,
    },
    Redis {
        webhook: RedisStorage<WebhookDeliveryJob>,
        ingress: RedisStorage<IngressJob>,
    },
}

/// A handle for pushing jobs. Created once at boot with [`QueueClient::connect`]; cheap to clone.
#[derive(Clone)]
pub struct QueueClient {
    pub(crate) storages: Storages,
    pub(crate) config: QueueConfig,
    /// Signalled after every push, so a worker in this process (`ROLE=all`) fetches at once instead of at its
    /// next poll (or, with no poll, when a delayed job falls due); workers in other processes still poll.
    pub(crate) wakes: Arc<Wakes>,
}

impl std::fmt::Debug for QueueClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("QueueClient")
            .field("config", &self.config)
            .finish()
    }
}

impl QueueClient {
    /// Opens the queue storage and runs apalis' own setup (SQLite migrations) where it has one.
    pub async fn connect(config: &QueueConfig) -> Result<QueueClient, QueueError> {
        let storages = match &config.backend {
            QueueBackend::Sqlite { path } => {
                // Every connection WAL and synchronous=NORMAL (apalis' setup sets its pragmas on one pooled
                // connection only): a commit then writes the WAL without an fsync. A queue row lost to a power
                // cut is found again by the outbox reconciler; a kill -9 loses nothing.
                let opts = SqliteConnectOptions::new()
                    .filename(path)
                    .create_if_missing(true)
                    .journal_mode(SqliteJournalMode::Wal)
                    .synchronous(SqliteSynchronous::Normal)
                    .busy_timeout(Duration::from_secs(5))
                    .pragma("mmap_size", "268435456"); // reads without read() copies, as the data DB
                let pool: SqlitePool = wagate_db::pool_options()
                    .max_connections(4)
                    .test_before_acquire(false) // a local file: no liveness round trip per acquire
                    .connect_with(opts)
                    .await?;
                SqliteStorage::setup(&pool).await?;
                Storages::Sqlite {
                    webhook: SqliteStorage::new(&pool)
                        .with_config(sqlite_config(&config.webhook_queue, config.pushers)),
                    ingress: SqliteStorage::new(&pool)
                        .with_config(sqlite_config(&config.ingress_queue, config.pushers)),
                }
            }
            QueueBackend::Redis { url } => {
                let conn = apalis_redis::connect(url.as_str()).await?;
                Storages::Redis {
                    webhook: RedisStorage::new(conn.clone())
                        .with_config(redis_config(&config.webhook_queue)),
                    ingress: RedisStorage::new(conn)
                        .with_config(redis_config(&config.ingress_queue)),
                }
            }
        };
        Ok(QueueClient {
            storages,
            config: config.clone(),
            wakes: Arc::new(Wakes::default()),
        })
    }

    pub fn config(&self) -> &QueueConfig {
        &self.config
    }

    /// The SQLite pool behind the queues, when they are in SQLite.
    pub fn sqlite_pool(&self) -> Option<&SqlitePool> {
        match &self.storages {
            Storages::Sqlite { webhook, .. } => Some(webhook.pool()),
            Storages::Redis { .. } => None,
        }
    }

    /// Pushes one delivery job for a batch of outbox rows, runnable after `delay` (whole seconds on every
    /// backend).
    pub async fn push_deliveries(
        &self,
        outbox_ids: Vec<String>,
        delay: Option<Duration>,
    ) -> Result<(), QueueError> {
        self.push_traced_deliveries(outbox_ids, BTreeMap::new(), delay)
            .await
    }

    /// [`QueueClient::push_deliveries`] with the trace context of some of the rows (`traceparent` by id).
    pub async fn push_traced_deliveries(
        &self,
        outbox_ids: Vec<String>,
        traces: BTreeMap<String, String>,
        delay: Option<Duration>,
    ) -> Result<(), QueueError> {
        let task = build_task(
            WebhookDeliveryJob::new(outbox_ids).with_traces(traces),
            delay,
        );
        match &self.storages {
            Storages::Sqlite { webhook, .. } => {
                webhook.clone().push_task(task).await.map_err(push_err)?
            }
            Storages::Redis { webhook, .. } => {
                webhook.clone().push_task(task).await.map_err(push_err)?
            }
        }
        self.wakes.webhook.pushed(delay);
        Ok(())
    }

    /// Pushes a delivery job for one outbox row (see [`QueueClient::push_deliveries`]).
    pub async fn push_delivery(
        &self,
        outbox_id: &str,
        delay: Option<Duration>,
    ) -> Result<(), QueueError> {
        self.push_deliveries(vec![outbox_id.to_owned()], delay)
            .await
    }

    /// Pushes an ingress job.
    pub async fn push_ingress(&self, job: IngressJob) -> Result<(), QueueError> {
        let task = build_task(job, None);
        match &self.storages {
            Storages::Sqlite { ingress, .. } => {
                ingress.clone().push_task(task).await.map_err(push_err)?
            }
            Storages::Redis { ingress, .. } => {
                ingress.clone().push_task(task).await.map_err(push_err)?
            }
        }
        self.wakes.ingress.pushed(None);
        Ok(())
    }
}

impl QueueClient {
    /// Deletes jobs of both queues that finished more than `older_than` ago; returns how many.
    pub async fn vacuum_finished(&self, older_than: Duration) -> Result<usize, QueueError> {
        match &self.storages {
            Storages::Sqlite { webhook, .. } => {
                // One table holds both queues. apalis' own vacuum also runs `VACUUM`, which needs the file to
                // itself, so a plain DELETE is used instead.
                let cutoff = chrono::Utc::now().timestamp()
                    - i64::try_from(older_than.as_secs()).unwrap_or(0);
                let done = sqlx::query(DELETE_FINISHED_SQLITE)
                    .bind(cutoff)
                    .execute(webhook.pool())
                    .await?;
                Ok(usize::try_from(done.rows_affected()).unwrap_or(usize::MAX))
            }
            Storages::Redis { webhook, ingress } => {
                let a = webhook.clone().vacuum_before(older_than).await?;
                let b = ingress.clone().vacuum_before(older_than).await?;
                Ok(a + b)
            }
        }
    }
}

fn build_task<T>(job: T, delay: Option<Duration>) -> apalis::prelude::Task<T> {
    let builder = TaskBuilder::new(job).max_attempts(MAX_JOB_ATTEMPTS);
    match delay {
        Some(d) => builder.run_after(d).build(),
        None => builder.build(),
    }
}

fn push_err(e: impl std::fmt::Display) -> QueueError {
    QueueError::Push(e.to_string())
}

/// The heartbeat also makes an idle worker look for jobs. A worker fed by other processes too beats every
/// second, the longest a job pushed elsewhere can wait; one that only this process feeds wakes on its pushes
/// and beats at apalis' default. Either way a worker that stops beating is taken for dead, and its jobs
/// handed on, after a minute.
fn sqlite_config(queue: &str, pushers: Pushers) -> apalis_sqlite::Config {
    let (every, missed) = match pushers {
        Pushers::AnyProcess => (Duration::from_secs(1), 60),
        Pushers::ThisProcess => (Duration::from_secs(30), 2),
    };
    apalis_sqlite::Config::default()
        .queue(queue)
        .heartbeat_interval(every)
        .missed_heartbeats(missed)
}

fn redis_config(queue: &str) -> apalis_redis::Config {
    apalis_redis::Config::default().queue(queue)
}
