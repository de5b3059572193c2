//! `RedisLeases`: the cluster's session lease. Key `{prefix}lease:{sessionId}` holds `{nodeId}:{generation}`
//! with a PX TTL; the generation comes from `INCR {prefix}leasegen:{sessionId}` inside the same Lua script
//! that checks and sets the key, so it only ever grows, and is then written to the session row (`claim`).
//! Renew and release are compare-and-set scripts. The renewal loop itself is in `heartbeat.rs`.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use dashmap::DashMap;
use deadpool_redis::{Pool, redis};
use redis::aio::ConnectionManager;

use super::lease::{self, Lease, LeaseError, Leases};
use crate::sessions::cache::RecordCache;
use crate::store::{DataPool, StoreError, sessions};

/// Refuses (-1) when another node holds the key; otherwise bumps the fence (never below the row's
/// generation, ARGV[3]) and sets the key with its TTL.
const ACQUIRE: &str = r"
local cur = redis.call('GET', KEYS[1])
if cur then
  local owner = string.match(cur, '^(.*):%d+$')
  if owner ~= ARGV[1] then return -1 end
end
local g = redis.call('INCR', KEYS[2])
local floor = tonumber(ARGV[3])
if g <= floor then
  g = floor + 1
  redis.call('SET', KEYS[2], g)
end
redis.call('SET', KEYS[1], ARGV[1] .. ':' .. g, 'PX', ARGV[2])
return g
";

const RENEW: &str = r"
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 0
";

/// The lease value, the key `ARGV[1] .. <holder node id>` (the value is `{nodeId}:{generation}`), and
/// whether the key KEYS[2] (the session's handover mark) exists.
const OWNER_WITH: &str = r"
local marked = redis.call('EXISTS', KEYS[2])
local lease = redis.call('GET', KEYS[1])
local node = lease and string.match(lease, '^(.*):%-?%d+$')
if not node then return {marked} end
return {marked, lease, redis.call('GET', ARGV[1] .. node)}
";

const RELEASE: &str = r"
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0
";

#[derive(Debug, thiserror::Error)]
pub(crate) enum RedisError {
    #[error("redis setup: {0}")]
    Setup(String),
    #[error("redis pool: {0}")]
    Pool(#[from] deadpool_redis::PoolError),
    #[error("redis: {0}")]
    Command(#[from] redis::RedisError),
}

impl From<RedisError> for LeaseError {
    fn from(err: RedisError) -> Self {
        LeaseError::Unavailable(err.to_string())
    }
}

/// A lease this node holds, with the monotonic instant by which it must have been renewed.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Held {
    pub generation: i64,
    pub deadline: Instant,
}

/// Who holds a session's lease right now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Owner {
    pub node_id: String,
    pub generation: i64,
}

pub(crate) struct RedisLeases {
    pool: Pool,
    /// The per-request lookup connection (`owner_with`).
    lookups: ConnectionManager,
    owner_with: redis::Script,
    db: DataPool,
    node_id: String,
    prefix: String,
    ttl: Duration,
    /// Every lease this node holds. The heartbeat walks it; a sync map because no entry is held across
    /// an `.await`.
    held: DashMap<String, Held>,
    /// Set by a drain or a graceful shutdown: no new lease is taken from then on.
    is_closed: AtomicBool,
}

impl RedisLeases {
    pub(crate) fn new(
        pool: Pool,
        lookups: ConnectionManager,
        db: DataPool,
        node_id: String,
        prefix: String,
        ttl: Duration,
    ) -> RedisLeases {
        RedisLeases {
            pool,
            lookups,
            owner_with: redis::Script::new(OWNER_WITH),
            db,
            node_id,
            prefix,
            ttl,
            held: DashMap::new(),
            is_closed: AtomicBool::new(false),
        }
    }

    /// Takes no new lease from now on (drain, shutdown); held ones stay until released.
    pub(crate) fn close(&self) {
        self.is_closed.store(true, Ordering::SeqCst);
    }

    fn key(&self, session_id: &str) -> String {
        format!("{}lease:{session_id}", self.prefix)
    }

    fn value(&self, generation: i64) -> String {
        format!("{}:{generation}", self.node_id)
    }

    fn ttl_ms(&self) -> u64 {
        u64::try_from(self.ttl.as_millis()).unwrap_or(u64::MAX)
    }

    /// The leases held now (session id, what we hold), for the heartbeat.
    pub(crate) fn held(&self) -> Vec<(String, Held)> {
        self.held
            .iter()
            .map(|e| (e.key().clone(), *e.value()))
            .collect()
    }

    /// How many leases this node holds now (`wagate_leases_held`).
    pub(crate) fn held_count(&self) -> usize {
        self.held.len()
    }

    /// Whether this node holds `session_id`'s lease (any generation) and its deadline has not passed: the
    /// sim network's check before it hands traffic to a device itself (a local read, no round trip).
    pub(crate) fn holds(&self, session_id: &str) -> bool {
        self.held
            .get(session_id)
            .is_some_and(|held| Instant::now() < held.deadline)
    }

    /// Forgets a lease locally (it was lost); the key itself is left to expire or to its new holder.
    pub(crate) fn forget(&self, session_id: &str, generation: i64) {
        self.held
            .remove_if(session_id, |_, h| h.generation == generation);
    }

    /// Renews one lease (compare-and-set); false when another holder or no key is there.
    #[cfg(test)]
    pub(crate) async fn renew(
        &self,
        session_id: &str,
        generation: i64,
    ) -> Result<bool, RedisError> {
        let renewed = self
            .renew_many(&[(session_id.to_string(), generation)])
            .await?;
        Ok(renewed.first().copied().unwrap_or(false))
    }

    /// Renews many leases in one round trip (a pipeline of the compare-and-set script); answers, in order,
    /// whether each was renewed. One heartbeat then renews every lease at the same instant, so a crashed
    /// node's leases lapse together and one sweep finds them all.
    pub(crate) async fn renew_many(
        &self,
        leases: &[(String, i64)],
    ) -> Result<Vec<bool>, RedisError> {
        if leases.is_empty() {
            return Ok(Vec::new());
        }
        let script = redis::Script::new(RENEW);
        let mut pipe = redis::pipe();
        pipe.load_script(&script).ignore();
        for (id, generation) in leases {
            pipe.invoke_script(
                script
                    .key(self.key(id))
                    .arg(self.value(*generation))
                    .arg(self.ttl_ms()),
            );
        }
        let sent_at = Instant::now();
        let mut conn = self.pool.get().await?;
        let answers: Vec<i64> = pipe.query_async(&mut *conn).await?;
        let renewed: Vec<bool> = answers.iter().map(|a| *a == 1).collect();
        for ((id, generation), ok) in leases.iter().zip(&renewed) {
            if let Some(mut held) = self.held.get_mut(id)
                && *ok
                && held.generation == *generation
            {
                held.deadline = sent_at + self.ttl;
            }
        }
        Ok(renewed)
    }

    /// The current holder of a session's lease, if any.
    #[cfg(test)]
    pub(crate) async fn owner(&self, session_id: &str) -> Result<Option<Owner>, RedisError> {
        let mut conn = self.pool.get().await?;
        let value: Option<String> = redis::cmd("GET")
            .arg(self.key(session_id))
            .query_async(&mut *conn)
            .await?;
        Ok(value.as_deref().and_then(parse_owner))
    }

    /// The current holder of a session's lease and the value of its key under `holder_key_prefix` (the
    /// holder's registry announcement), and whether `mark_key` (its handover mark) exists, in one round
    /// trip: routing a request asks all three on every request.
    pub(crate) async fn owner_with(
        &self,
        session_id: &str,
        holder_key_prefix: &str,
        mark_key: &str,
    ) -> Result<(Option<(Owner, Option<String>)>, bool), RedisError> {
        let mut conn = self.lookups.clone();
        let (marked, found): (i64, Option<(String, Option<String>)>) = {
            let reply: redis::Value = self
                .owner_with
                .key(self.key(session_id))
                .key(mark_key)
                .arg(holder_key_prefix)
                .invoke_async(&mut conn)
                .await?;
            let mut items = match reply {
                redis::Value::Array(items) => items.into_iter(),
                _ => Vec::new().into_iter(),
            };
            let marked = items
                .next()
                .and_then(|v| redis::from_redis_value::<i64>(v).ok())
                .unwrap_or(0);
            let lease = items
                .next()
                .and_then(|v| redis::from_redis_value::<String>(v).ok());
            let announcement = items
                .next()
                .and_then(|v| redis::from_redis_value::<Option<String>>(v).ok())
                .flatten();
            (marked, lease.map(|lease| (lease, announcement)))
        };
        let owner =
            found.and_then(|(value, extra)| parse_owner(&value).map(|owner| (owner, extra)));
        Ok((owner, marked > 0))
    }

    /// Which of `ids` have no lease key at all (nobody holds them) and are not marked in a planned
    /// handover (`mark_key` of an id; the new owner is about to claim those).
    /// Those of `ids` whose lease names this node: after a restart under the same `NODE_ID`, what its past
    /// life held (this process holds none of them yet), which it may take back at once (`ACQUIRE` lets
    /// the named node renew its own lease) instead of waiting for the lease to lapse.
    pub(crate) async fn held_by_this_node(
        &self,
        ids: &[String],
    ) -> Result<Vec<String>, RedisError> {
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let keys: Vec<String> = ids.iter().map(|id| self.key(id)).collect();
        let mut conn = self.pool.get().await?;
        let values: Vec<Option<String>> = redis::cmd("MGET")
            .arg(&keys)
            .query_async(&mut *conn)
            .await?;
        Ok(ids
            .iter()
            .zip(values)
            .filter(|(_, lease)| {
                lease
                    .as_deref()
                    .and_then(parse_owner)
                    .is_some_and(|owner| owner.node_id == self.node_id)
            })
            .map(|(id, _)| id.clone())
            .collect())
    }

    pub(crate) async fn unheld(
        &self,
        ids: &[String],
        mark_key: impl Fn(&str) -> String,
    ) -> Result<Vec<String>, RedisError> {
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let keys: Vec<String> = ids
            .iter()
            .map(|id| self.key(id))
            .chain(ids.iter().map(|id| mark_key(id)))
            .collect();
        let mut conn = self.pool.get().await?;
        let values: Vec<Option<String>> = redis::cmd("MGET")
            .arg(&keys)
            .query_async(&mut *conn)
            .await?;
        let (leases, marks) = values.split_at(ids.len());
        Ok(ids
            .iter()
            .zip(leases.iter().zip(marks))
            .filter(|(_, (lease, mark))| lease.is_none() && mark.is_none())
            .map(|(id, _)| id.clone())
            .collect())
    }

    async fn acquire_key(&self, session_id: &str, floor: i64) -> Result<i64, RedisError> {
        let mut conn = self.pool.get().await?;
        let generation: i64 = redis::Script::new(ACQUIRE)
            .key(self.key(session_id))
            .key(format!("{}leasegen:{session_id}", self.prefix))
            .arg(&self.node_id)
            .arg(self.ttl_ms())
            .arg(floor)
            .invoke_async(&mut *conn)
            .await?;
        Ok(generation)
    }

    async fn release_key(&self, session_id: &str, generation: i64) -> Result<(), RedisError> {
        let mut conn = self.pool.get().await?;
        let _: i64 = redis::Script::new(RELEASE)
            .key(self.key(session_id))
            .arg(self.value(generation))
            .invoke_async(&mut *conn)
            .await?;
        Ok(())
    }
}

/// `{nodeId}:{generation}`; a node id may itself contain ':'.
pub(crate) fn parse_owner(value: &str) -> Option<Owner> {
    let (node_id, generation) = value.rsplit_once(':')?;
    Some(Owner {
        node_id: node_id.to_string(),
        generation: generation.parse().ok()?,
    })
}

#[async_trait]
impl Leases for RedisLeases {
    async fn held_elsewhere(&self, ids: &[&str]) -> Vec<String> {
        if ids.is_empty() {
            return Vec::new();
        }
        let keys: Vec<String> = ids.iter().map(|id| self.key(id)).collect();
        let values: Result<Vec<Option<String>>, RedisError> = async {
            let mut conn = self.pool.get().await?;
            Ok(redis::cmd("MGET")
                .arg(&keys)
                .query_async(&mut *conn)
                .await?)
        }
        .await;
        match values {
            // A lease key lives only while its holder renews it: held = loaded on a live node.
            Ok(values) => ids
                .iter()
                .zip(values)
                .filter(|(_, v)| {
                    v.as_deref()
                        .and_then(parse_owner)
                        .is_some_and(|o| o.node_id != self.node_id)
                })
                .map(|(id, _)| id.to_string())
                .collect(),
            Err(err) => {
                tracing::warn!(error = %err, "lease owners not read; listing this node's view");
                Vec::new()
            }
        }
    }

    async fn forget_session(&self, session_id: &str) {
        let gen_key = format!("{}leasegen:{session_id}", self.prefix);
        let deleted: Result<(), RedisError> = async {
            let mut conn = self.pool.get().await?;
            Ok(redis::cmd("DEL")
                .arg(gen_key)
                .query_async(&mut *conn)
                .await?)
        }
        .await;
        if let Err(err) = deleted {
            tracing::warn!(session_id, error = %err, "lease generation counter not deleted");
        }
    }

    async fn acquire(&self, session_id: &str, records: &RecordCache) -> Result<Lease, LeaseError> {
        if self.is_closed.load(Ordering::SeqCst) {
            return Err(LeaseError::Draining);
        }
        let floor = sessions::get(&self.db, session_id).await?.lease_generation;
        let started = Instant::now();
        let generation = self.acquire_key(session_id, floor).await?;
        if generation < 0 {
            return Err(LeaseError::HeldElsewhere);
        }
        match lease::claim(&self.db, records, session_id, generation, &self.node_id).await {
            Ok(()) => {}
            Err(err) => {
                if let Err(redis) = self.release_key(session_id, generation).await {
                    tracing::warn!(session_id, error = %redis, "lease not released after a failed claim");
                }
                return Err(match err {
                    StoreError::StaleLease => LeaseError::HeldElsewhere,
                    other => other.into(),
                });
            }
        }
        let deadline = started + self.ttl;
        self.held.insert(
            session_id.to_string(),
            Held {
                generation,
                deadline,
            },
        );
        Ok(Lease { generation })
    }

    fn is_current(&self, session_id: &str, lease: Lease) -> bool {
        self.held.get(session_id).is_some_and(|held| {
            held.generation == lease.generation && Instant::now() < held.deadline
        })
    }

    async fn release(&self, session_id: &str, lease: Lease) {
        self.forget(session_id, lease.generation);
        if let Err(err) = self.release_key(session_id, lease.generation).await {
            tracing::warn!(session_id, error = %err, "lease not released; it will expire");
        }
    }
}

#[cfg(test)]
mod tests;
