//! The cluster-wide limiter (`REDIS_ENABLED=true`): the same sliding logs as `window.rs`, one sorted set per
//! tier per client under `{REDIS_KEY_PREFIX}rl:{<ip>}:<tier>`, checked and recorded by one Lua script in one
//! round trip on Redis's own clock, so every node counts against the same windows. When Redis does not
//! answer, the node decides with its in-process limiter, logs the outage once, counts each such decision in
//! `wagate_rate_limit_fallback_total`, and tries Redis again after `RETRY_AFTER_FAILURE`.

use std::net::IpAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use redis::aio::{ConnectionManager, ConnectionManagerConfig};

use super::window::{Decision, LocalWindows, TierCount, decide};
use crate::config::RateTier;

/// KEYS: one per tier. ARGV: a unique member, then each tier's ttl (ms), then each tier's limit.
/// Returns `{admitted, now_us, count_1, pivot_1, ..., count_n, pivot_n}` with the counts taken before this
/// request; records the request in every tier only when all admit. A pivot is read (`ZRANGE`) only where the
/// rule in `window.rs` looks at it: every full tier when refused, else the tiers with the fewest left (the
/// tightest and its ties, for `RateLimit-Reset`); elsewhere it is `now`, which the rule never reads.
const CHECK: &str = r"
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local n = #KEYS
local counts, limits = {}, {}
local admitted, least = true, nil
for i = 1, n do
  limits[i] = tonumber(ARGV[1 + n + i])
  redis.call('ZREMRANGEBYSCORE', KEYS[i], '-inf', now - tonumber(ARGV[1 + i]) * 1000)
  counts[i] = redis.call('ZCARD', KEYS[i])
  if counts[i] >= limits[i] then admitted = false end
  local left = limits[i] - counts[i]
  if least == nil or left < least then least = left end
end
local out = {admitted and 1 or 0, now}
for i = 1, n do
  local count, pivot = counts[i], now
  local full = count >= limits[i]
  local looked_at = (admitted and limits[i] - count == least) or ((not admitted) and full)
  if looked_at and count > 0 then
    local rank = 0
    if full then rank = count - limits[i] end
    pivot = tonumber(redis.call('ZRANGE', KEYS[i], rank, rank, 'WITHSCORES')[2])
  end
  out[#out + 1] = count
  out[#out + 1] = pivot
end
if admitted then
  for i = 1, n do
    redis.call('ZADD', KEYS[i], now, ARGV[1])
    redis.call('PEXPIRE', KEYS[i], ARGV[1 + i])
  end
end
return out
";

/// A Redis call that takes longer than this is an outage: the request is decided locally.
const REDIS_BUDGET: Duration = Duration::from_millis(250);
/// After a failure, requests go straight to the local limiter for this long before Redis is tried again.
const RETRY_AFTER_FAILURE: Duration = Duration::from_secs(1);

pub struct SharedWindows {
    conn: ConnectionManager,
    script: redis::Script,
    prefix: String,
    tiers: Vec<RateTier>,
    member_prefix: String,
    sequence: AtomicU64,
    fallback: LocalWindows,
    is_degraded: AtomicBool,
    next_attempt: Mutex<Option<Instant>>,
}

impl SharedWindows {
    /// Connects lazily: the first request opens the connection, so boot does not depend on it.
    pub fn new(
        redis_url: &str,
        prefix: &str,
        node_id: &str,
        tiers: &[RateTier],
    ) -> redis::RedisResult<SharedWindows> {
        let client = redis::Client::open(redis_url)?;
        let config = ConnectionManagerConfig::new()
            .set_number_of_retries(1)
            .set_connection_timeout(Some(REDIS_BUDGET))
            .set_response_timeout(Some(REDIS_BUDGET));
        Ok(SharedWindows {
            conn: ConnectionManager::new_lazy_with_config(client, config)?,
            script: redis::Script::new(CHECK),
            prefix: prefix.to_string(),
            tiers: tiers.to_vec(),
            member_prefix: format!("{node_id}:{:08x}:", rand::random::<u32>()),
            sequence: AtomicU64::new(0),
            fallback: LocalWindows::new(tiers),
            is_degraded: AtomicBool::new(false),
            next_attempt: Mutex::new(None),
        })
    }

    pub async fn check(&self, ip: IpAddr) -> Decision {
        let may_try = self
            .next_attempt
            .lock()
            .is_none_or(|at| Instant::now() >= at);
        if may_try {
            match tokio::time::timeout(REDIS_BUDGET, self.check_in_redis(ip)).await {
                Ok(Ok(decision)) => {
                    if self.is_degraded.swap(false, Ordering::Relaxed) {
                        tracing::info!(
                            "rate limiter: Redis answers again; the shared limit applies"
                        );
                    }
                    *self.next_attempt.lock() = None;
                    return decision;
                }
                Ok(Err(err)) => self.degrade(&err.to_string()),
                Err(_) => self.degrade("no answer within the budget"),
            }
        }
        metrics::counter!("wagate_rate_limit_fallback_total").increment(1);
        self.fallback.check(ip)
    }

    fn degrade(&self, why: &str) {
        *self.next_attempt.lock() = Some(Instant::now() + RETRY_AFTER_FAILURE);
        if !self.is_degraded.swap(true, Ordering::Relaxed) {
            tracing::warn!(
                error = why,
                "rate limiter: Redis unreachable; limiting per node until it answers"
            );
        }
    }

    async fn check_in_redis(&self, ip: IpAddr) -> redis::RedisResult<Decision> {
        let mut invocation = self.script.prepare_invoke();
        for i in 0..self.tiers.len() {
            // The hash tag keeps a client's tiers in one slot, as a script's keys must be on Redis Cluster.
            invocation.key(format!("{}rl:{{{ip}}}:{i}", self.prefix));
        }
        let n = self.sequence.fetch_add(1, Ordering::Relaxed);
        invocation.arg(format!("{}{n}", self.member_prefix));
        for tier in &self.tiers {
            invocation.arg(tier.ttl_ms);
        }
        for tier in &self.tiers {
            invocation.arg(tier.limit);
        }
        let mut conn = self.conn.clone();
        let reply: Vec<i64> = invocation.invoke_async(&mut conn).await?;
        Ok(read_reply(&self.tiers, &reply))
    }

    pub fn forget_idle(&self) {
        self.fallback.forget_idle();
    }
}

/// The script's reply through the shared rule; a malformed reply admits (the limiter never breaks the API).
fn read_reply(tiers: &[RateTier], reply: &[i64]) -> Decision {
    let as_u64 = |v: &i64| u64::try_from(*v).unwrap_or(0);
    let now_us = reply.get(1).map(as_u64).unwrap_or(0);
    let counts: Vec<TierCount> = reply
        .get(2..)
        .unwrap_or(&[])
        .chunks_exact(2)
        .map(|pair| TierCount {
            count: as_u64(&pair[0]),
            pivot_us: as_u64(&pair[1]),
        })
        .collect();
    if counts.len() != tiers.len() {
        tracing::debug!(?reply, "rate limiter: unexpected script reply");
    }
    decide(&tiers[..counts.len().min(tiers.len())], now_us, &counts)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tiers() -> Vec<RateTier> {
        vec![
            RateTier {
                ttl_ms: 1_000,
                limit: 3,
            },
            RateTier {
                ttl_ms: 60_000,
                limit: 100,
            },
        ]
    }

    fn shared(prefix: &str) -> SharedWindows {
        SharedWindows::new("redis://127.0.0.1:6379", prefix, "unit", &tiers()).expect("client")
    }

    #[tokio::test]
    async fn the_script_admits_the_limit_and_refuses_the_next_on_the_shared_redis() {
        let prefix = format!("wagate-unit:{}:", uuid::Uuid::new_v4().simple());
        let (a, b) = (shared(&prefix), shared(&prefix));
        let ip: IpAddr = [10, 9, 8, 7].into();
        let mut admitted = 0;
        for i in 0..6 {
            let limiter = if i % 2 == 0 { &a } else { &b };
            if matches!(limiter.check(ip).await, Decision::Admitted(_)) {
                admitted += 1;
            }
        }
        assert_eq!(admitted, 3, "two limiters share one window");
        assert!(!a.is_degraded.load(Ordering::Relaxed));
        match a.check(ip).await {
            Decision::Refused {
                tier,
                limit,
                retry_after_secs,
            } => assert_eq!((tier, limit, retry_after_secs), (0, 3, 1)),
            other => panic!("expected a refusal, got {other:?}"),
        }
    }

    /// The script reads pivots only where the rule looks; the quota it reports must still match the local
    /// limiter's, ties between tiers included.
    #[tokio::test]
    async fn the_shared_quota_matches_the_local_one_on_tied_tiers() {
        let tied = [
            RateTier {
                ttl_ms: 1_000,
                limit: 3,
            },
            RateTier {
                ttl_ms: 60_000,
                limit: 3,
            },
        ];
        let prefix = format!("wagate-unit:{}:", uuid::Uuid::new_v4().simple());
        let remote =
            SharedWindows::new("redis://127.0.0.1:6379", &prefix, "unit", &tied).expect("client");
        let local = LocalWindows::new(&tied);
        let ip: IpAddr = [10, 9, 8, 5].into();
        for _ in 0..3 {
            match (remote.check(ip).await, local.check(ip)) {
                (Decision::Admitted(r), Decision::Admitted(l)) => {
                    assert_eq!((r.limit, r.remaining), (l.limit, l.remaining));
                    assert_eq!(
                        r.reset_secs, 60,
                        "the tie goes to the tier that frees up last"
                    );
                    assert_eq!(l.reset_secs, 60);
                }
                other => panic!("both admit the first three, got {other:?}"),
            }
        }
        match remote.check(ip).await {
            Decision::Refused {
                tier,
                retry_after_secs,
                ..
            } => assert_eq!((tier, retry_after_secs), (1, 60)),
            other => panic!("expected a refusal, got {other:?}"),
        }
        assert!(!remote.is_degraded.load(Ordering::Relaxed));
    }

    #[tokio::test]
    async fn an_unreachable_redis_falls_back_to_the_local_limit() {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map(|a| a.port())
            .expect("port");
        let limiter = SharedWindows::new(
            &format!("redis://127.0.0.1:{port}"),
            "wagate-unit:",
            "unit",
            &tiers(),
        )
        .expect("client");
        let ip: IpAddr = [10, 9, 8, 6].into();
        let mut admitted = 0;
        for _ in 0..5 {
            if matches!(limiter.check(ip).await, Decision::Admitted(_)) {
                admitted += 1;
            }
        }
        assert_eq!(admitted, 3, "the local limiter applies the same tiers");
        assert!(limiter.is_degraded.load(Ordering::Relaxed));
    }
}
