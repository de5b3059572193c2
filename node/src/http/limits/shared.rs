//! The cluster-wide limiter (`REDIS_ENABLED=true`): the same sliding logs as `window.rs`, one sorted set per
//! tier per client under `{REDIS_KEY_PREFIX}rl:{<ip>}:<tier>`, checked and recorded by one Lua script in one
//! round trip on Redis's own clock, so every node counts against the same windows. When Redis does not
//! answer, the node decides with its in-process limiter, logs the outage once, counts each such decision in
//! `wagate_rate_limit_fallback_total`, and tries Redis again after `RETRY_AFTER_FAILURE`.
//!
//! Checks of one client address are batched: while a script call for an address is in flight, the node's
//! further requests from it queue, and the next call decides them all at once, as if they had arrived in
//! order at the same instant (the first `m` that fit are admitted and recorded, the rest refused). Why: the
//! script costs Redis ~30 us a call (most of it the Lua call itself, not the set operations), so a busy
//! client at 64 concurrent requests made it the cluster's busiest process (docs "Measured", session 25).

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use tokio::sync::oneshot;

use super::window::{Decision, LocalWindows, TierCount, decide};
use crate::config::RateTier;

/// KEYS: one per tier. ARGV: how many requests to decide (k), the member prefix, the first member's
/// sequence number, then each tier's ttl (ms), then each tier's limit.
/// Admits the first `m = min(k, fewest left)` requests and records them in every tier, then returns
/// `{m, now_us, count_1, oldest_1, freeing_1, ..., count_n, oldest_n, freeing_n}`: each tier's count before
/// the batch; its oldest entry (read only for the tiers with the fewest left, the ones `window.rs` reports;
/// else `now`); and, when some requests are refused and the tier is full after the admitted ones, the entry
/// whose expiry frees a slot (else `now`, which the rule never reads).
const CHECK: &str = r"
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local n = #KEYS
local k = tonumber(ARGV[1])
local counts, limits = {}, {}
local least = nil
for i = 1, n do
  limits[i] = tonumber(ARGV[3 + n + i])
  redis.call('ZREMRANGEBYSCORE', KEYS[i], '-inf', now - tonumber(ARGV[3 + i]) * 1000)
  counts[i] = redis.call('ZCARD', KEYS[i])
  local left = limits[i] - counts[i]
  if least == nil or left < least then least = left end
end
local admitted = math.max(0, math.min(k, least))
if admitted > 0 then
  local seq = tonumber(ARGV[3])
  local entries = {}
  for j = 0, admitted - 1 do
    entries[#entries + 1] = now
    entries[#entries + 1] = ARGV[2] .. (seq + j)
  end
  for i = 1, n do
    redis.call('ZADD', KEYS[i], unpack(entries))
    redis.call('PEXPIRE', KEYS[i], ARGV[3 + i])
  end
end
local out = {admitted, now}
for i = 1, n do
  local oldest, freeing = now, now
  if admitted > 0 and counts[i] > 0 and limits[i] - counts[i] == least then
    oldest = tonumber(redis.call('ZRANGE', KEYS[i], 0, 0, 'WITHSCORES')[2])
  end
  local seen = counts[i] + admitted
  if admitted < k and seen > 0 and seen >= limits[i] then
    local rank = seen - limits[i]
    freeing = tonumber(redis.call('ZRANGE', KEYS[i], rank, rank, 'WITHSCORES')[2])
  end
  out[#out + 1] = counts[i]
  out[#out + 1] = oldest
  out[#out + 1] = freeing
end
return out
";

/// A Redis call that takes longer than this is an outage: the request is decided locally.
const REDIS_BUDGET: Duration = Duration::from_millis(250);
/// After a failure, requests go straight to the local limiter for this long before Redis is tried again.
const RETRY_AFTER_FAILURE: Duration = Duration::from_secs(1);
/// Most requests one script call decides (the script passes them to `ZADD` as arguments at once).
const MAX_BATCH: usize = 128;

/// What a queued check is told: its decision, or that it now makes the next call (the baton).
enum Turn {
    Decided(Decision),
    Lead(Baton),
}

/// The checks of one address waiting for the call in flight to finish.
#[derive(Default)]
struct Queue {
    waiting: Vec<oneshot::Sender<Turn>>,
}

/// Addresses with a call in flight, and the checks queued behind each.
type InFlight = Arc<Mutex<HashMap<IpAddr, Queue, foldhash::fast::RandomState>>>;

pub struct SharedWindows {
    conn: ConnectionManager,
    script: redis::Script,
    prefix: String,
    tiers: Vec<RateTier>,
    member_prefix: String,
    sequence: AtomicU64,
    in_flight: InFlight,
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
            in_flight: InFlight::default(),
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
            match tokio::time::timeout(REDIS_BUDGET, self.check_in_turn(ip)).await {
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

    /// Makes the call for `ip` when none is in flight; otherwise queues and waits to be decided by the
    /// next call, or to be handed the next call itself.
    async fn check_in_turn(&self, ip: IpAddr) -> redis::RedisResult<Decision> {
        let queued = {
            let mut in_flight = self.in_flight.lock();
            match in_flight.get_mut(&ip) {
                Some(queue) => {
                    let (tell, told) = oneshot::channel();
                    queue.waiting.push(tell);
                    Some(told)
                }
                None => {
                    in_flight.insert(ip, Queue::default());
                    None
                }
            }
        };
        let baton = match queued {
            None => Baton {
                in_flight: self.in_flight.clone(),
                ip,
                others: Vec::new(),
                armed: true,
            },
            Some(told) => match told.await {
                Ok(Turn::Decided(decision)) => return Ok(decision),
                Ok(Turn::Lead(baton)) => baton,
                Err(_) => return Err(lead_lost()),
            },
        };
        let decided = self.check_in_redis(ip, 1 + baton.others.len()).await;
        baton.pass_on(decided)
    }

    async fn check_in_redis(&self, ip: IpAddr, k: usize) -> redis::RedisResult<Vec<Decision>> {
        let mut invocation = self.script.prepare_invoke();
        for i in 0..self.tiers.len() {
            // The hash tag keeps a client's tiers in one slot, as a script's keys must be on Redis Cluster.
            invocation.key(format!("{}rl:{{{ip}}}:{i}", self.prefix));
        }
        let first = self.sequence.fetch_add(k as u64, Ordering::Relaxed);
        invocation.arg(k).arg(&self.member_prefix).arg(first);
        for tier in &self.tiers {
            invocation.arg(tier.ttl_ms);
        }
        for tier in &self.tiers {
            invocation.arg(tier.limit);
        }
        let mut conn = self.conn.clone();
        let reply: Vec<i64> = invocation.invoke_async(&mut conn).await?;
        Ok(read_reply(&self.tiers, &reply, k))
    }

    pub fn forget_idle(&self) {
        self.fallback.forget_idle();
    }
}

fn lead_lost() -> redis::RedisError {
    redis::RedisError::from((
        redis::ErrorKind::Io,
        "the rate-limit call this check waited on was abandoned",
    ))
}

/// The right to make the next call for an address, with the queued checks that call decides too. When
/// the call answers, the holder tells them, then hands the baton to the first check that queued meanwhile.
/// When Redis fails they fail with it (and fall back). Dropped unused (its check went away or ran out of
/// budget, before or during the call) it is handed on all the same, its batch first: they are decided
/// again rather than left waiting for nothing (at worst counted twice, never a stalled address).
struct Baton {
    in_flight: InFlight,
    ip: IpAddr,
    others: Vec<oneshot::Sender<Turn>>,
    armed: bool,
}

impl Baton {
    /// Answers the holder's own decision (the batch's first).
    fn pass_on(
        mut self,
        decided: redis::RedisResult<Vec<Decision>>,
    ) -> redis::RedisResult<Decision> {
        self.armed = false;
        let decisions = match decided {
            Ok(decisions) => decisions,
            Err(err) => {
                // Dropping the batch and the queue tells every waiting check that the call failed.
                self.others.clear();
                self.in_flight.lock().remove(&self.ip);
                return Err(err);
            }
        };
        let mut decisions = decisions.into_iter();
        let mine = decisions.next().ok_or_else(lead_lost);
        for (tell, decision) in std::mem::take(&mut self.others).into_iter().zip(decisions) {
            let _ = tell.send(Turn::Decided(decision));
        }
        hand_over(&self.in_flight, self.ip, Vec::new());
        mine
    }
}

impl Drop for Baton {
    fn drop(&mut self) {
        if self.armed {
            self.armed = false;
            hand_over(&self.in_flight, self.ip, std::mem::take(&mut self.others));
        }
    }
}

/// Gives the baton to the first check still waiting (`carried` ahead of the queue), with up to
/// `MAX_BATCH - 1` others behind it; with none waiting, the address has no call in flight any more.
fn hand_over(in_flight: &InFlight, ip: IpAddr, carried: Vec<oneshot::Sender<Turn>>) {
    let mut map = in_flight.lock();
    let queue = map.entry(ip).or_default();
    queue.waiting.splice(0..0, carried);
    while !queue.waiting.is_empty() {
        let take = queue.waiting.len().min(MAX_BATCH);
        let mut others: Vec<_> = queue.waiting.drain(..take).collect();
        let next = others.remove(0);
        let baton = Baton {
            in_flight: in_flight.clone(),
            ip,
            others,
            armed: true,
        };
        match next.send(Turn::Lead(baton)) {
            Ok(()) => return,
            // That check stopped waiting: its batch goes back to the front of the queue (disarmed first,
            // so dropping it does not hand over again under this lock).
            Err(Turn::Lead(mut baton)) => {
                baton.armed = false;
                queue
                    .waiting
                    .splice(0..0, std::mem::take(&mut baton.others));
            }
            Err(Turn::Decided(_)) => {}
        }
    }
    map.remove(&ip);
}

/// The script's reply through the shared rule, one decision per request of the batch in order; a malformed
/// reply admits (the limiter never breaks the API).
fn read_reply(tiers: &[RateTier], reply: &[i64], k: usize) -> Vec<Decision> {
    let as_u64 = |v: &i64| u64::try_from(*v).unwrap_or(0);
    let admitted = reply.first().map(as_u64).unwrap_or(k as u64);
    let now_us = reply.get(1).map(as_u64).unwrap_or(0);
    let tiers_seen: Vec<&[i64]> = reply.get(2..).unwrap_or(&[]).chunks_exact(3).collect();
    if tiers_seen.len() != tiers.len() {
        tracing::debug!(?reply, "rate limiter: unexpected script reply");
    }
    let tiers = &tiers[..tiers_seen.len().min(tiers.len())];
    (0..k as u64)
        .map(|j| {
            let counts: Vec<TierCount> = tiers_seen
                .iter()
                .map(|seen| {
                    let (count, oldest, freeing) =
                        (as_u64(&seen[0]), as_u64(&seen[1]), as_u64(&seen[2]));
                    if j < admitted {
                        TierCount {
                            count: count + j,
                            pivot_us: oldest,
                        }
                    } else {
                        TierCount {
                            count: count + admitted,
                            pivot_us: freeing,
                        }
                    }
                })
                .collect();
            decide(tiers, now_us, &counts)
        })
        .collect()
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

    /// Concurrent checks of one address on two nodes are batched into few script calls, and still admit
    /// exactly the limit, each with its own place in the window.
    #[tokio::test]
    async fn concurrent_checks_of_one_address_admit_exactly_the_limit() {
        let prefix = format!("wagate-unit:{}:", uuid::Uuid::new_v4().simple());
        let (a, b) = (shared(&prefix), shared(&prefix));
        let ip: IpAddr = [10, 9, 8, 4].into();
        let checks = (0..40).map(|i| if i % 2 == 0 { a.check(ip) } else { b.check(ip) });
        let decisions = futures::future::join_all(checks).await;
        let mut remaining: Vec<u64> = decisions
            .iter()
            .filter_map(|d| match d {
                Decision::Admitted(quota) => Some(quota.remaining),
                Decision::Refused { .. } => None,
            })
            .collect();
        remaining.sort_unstable();
        assert_eq!(
            remaining,
            vec![0, 1, 2],
            "three admitted, each one place further"
        );
        for decision in &decisions {
            if let Decision::Refused {
                tier,
                limit,
                retry_after_secs,
            } = decision
            {
                assert_eq!((*tier, *limit, *retry_after_secs), (0, 3, 1));
            }
        }
        assert!(!a.is_degraded.load(Ordering::Relaxed));
        assert!(!b.is_degraded.load(Ordering::Relaxed));
        assert!(a.in_flight.lock().is_empty(), "no call left in flight");
    }

    /// A check that makes the call and is dropped before the answer hands the next call on: the checks
    /// queued behind it are not left waiting, and the address is free again afterwards.
    #[tokio::test]
    async fn a_dropped_caller_hands_the_next_call_on() {
        let limiter = shared(&format!("wagate-unit:{}:", uuid::Uuid::new_v4().simple()));
        let ip: IpAddr = [10, 9, 8, 3].into();
        let (tell, told) = oneshot::channel();
        limiter.in_flight.lock().insert(
            ip,
            Queue {
                waiting: vec![tell],
            },
        );
        drop(Baton {
            in_flight: limiter.in_flight.clone(),
            ip,
            others: Vec::new(),
            armed: true,
        });
        let Ok(Turn::Lead(baton)) = told.await else {
            panic!("the queued check is handed the next call");
        };
        assert!(baton.others.is_empty());
        // Dropped unused in turn (its check went away), the baton frees the address: nobody else waits.
        drop(baton);
        assert!(limiter.in_flight.lock().is_empty());
        let (gone, _) = oneshot::channel::<Turn>();
        let (tell, told) = oneshot::channel();
        limiter.in_flight.lock().insert(
            ip,
            Queue {
                waiting: vec![gone, tell],
            },
        );
        drop(Baton {
            in_flight: limiter.in_flight.clone(),
            ip,
            others: Vec::new(),
            armed: true,
        });
        assert!(
            matches!(told.await, Ok(Turn::Lead(_))),
            "a check that stopped waiting is passed over"
        );
        assert!(limiter.in_flight.lock().is_empty());
        // A baton handed to a check that goes away before reading it is handed on from the channel.
        let (tell, told) = oneshot::channel();
        let (next, next_told) = oneshot::channel();
        limiter.in_flight.lock().insert(
            ip,
            Queue {
                waiting: vec![tell, next],
            },
        );
        hand_over(&limiter.in_flight, ip, Vec::new());
        drop(told);
        assert!(matches!(next_told.await, Ok(Turn::Lead(_))));
        assert!(limiter.in_flight.lock().is_empty());
        assert!(matches!(limiter.check(ip).await, Decision::Admitted(_)));
        assert!(limiter.in_flight.lock().is_empty());
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
