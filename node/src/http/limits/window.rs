//! The rate-limit rule both limiters share, and the in-process one. Each tier is a sliding log: a request is
//! admitted only when every tier holds fewer than its limit of admitted requests in the window
//! `(now - ttl, now]`, and then it is recorded in every tier. So no window of a tier's length ever holds more
//! than its limit, whether requests arrive at once or spread out. Refused requests are not recorded.

use std::collections::VecDeque;
use std::net::IpAddr;
use std::time::Instant;

use dashmap::DashMap;

use crate::config::RateTier;

/// What one tier held for a client just before this request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TierCount {
    /// Admitted requests in the window.
    pub count: u64,
    /// In µs, on the limiter's clock: when the tier is full, the entry whose expiry frees a slot
    /// (`count - limit` oldest); otherwise the oldest entry, or now when there is none.
    pub pivot_us: u64,
}

/// The quota of the tightest tier after an admitted request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Quota {
    pub limit: u64,
    pub remaining: u64,
    /// Whole seconds until the oldest request of that tier leaves its window.
    pub reset_secs: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    Admitted(Quota),
    Refused {
        /// Index of the tier that keeps the request out the longest.
        tier: usize,
        limit: u64,
        retry_after_secs: u64,
    },
}

/// The rule, from each tier's count before the request. Both limiters admit exactly when this admits.
pub fn decide(tiers: &[RateTier], now_us: u64, counts: &[TierCount]) -> Decision {
    let mut refused: Option<(usize, u64)> = None;
    for (i, (tier, seen)) in tiers.iter().zip(counts).enumerate() {
        if seen.count >= tier.limit {
            let wait = (seen.pivot_us + tier.ttl_ms * 1000).saturating_sub(now_us);
            if refused.is_none_or(|(_, longest)| wait > longest) {
                refused = Some((i, wait));
            }
        }
    }
    if let Some((tier, wait_us)) = refused {
        return Decision::Refused {
            tier,
            limit: tiers[tier].limit,
            retry_after_secs: ceil_secs(wait_us).max(1),
        };
    }
    let quota = tiers
        .iter()
        .zip(counts)
        .map(|(tier, seen)| {
            let oldest = if seen.count == 0 {
                now_us
            } else {
                seen.pivot_us
            };
            Quota {
                limit: tier.limit,
                remaining: tier.limit.saturating_sub(seen.count + 1),
                reset_secs: ceil_secs((oldest + tier.ttl_ms * 1000).saturating_sub(now_us)),
            }
        })
        // Tightest: fewest left; on a tie the one that frees up last.
        .min_by_key(|q| (q.remaining, std::cmp::Reverse(q.reset_secs)));
    Decision::Admitted(quota.unwrap_or(Quota {
        limit: 0,
        remaining: 0,
        reset_secs: 0,
    }))
}

fn ceil_secs(us: u64) -> u64 {
    us.div_ceil(1_000_000)
}

/// The in-process limiter: one sliding log per tier per client address, on a monotonic clock.
pub struct LocalWindows {
    tiers: Vec<RateTier>,
    clients: DashMap<IpAddr, Vec<VecDeque<u64>>>,
    origin: Instant,
}

impl LocalWindows {
    pub fn new(tiers: &[RateTier]) -> LocalWindows {
        LocalWindows {
            tiers: tiers.to_vec(),
            clients: DashMap::new(),
            origin: Instant::now(),
        }
    }

    fn now_us(&self) -> u64 {
        // +1 so that a request at the very start is never taken for "no entry".
        u64::try_from(self.origin.elapsed().as_micros()).unwrap_or(u64::MAX) + 1
    }

    pub fn check(&self, ip: IpAddr) -> Decision {
        self.check_at(ip, self.now_us())
    }

    fn check_at(&self, ip: IpAddr, now_us: u64) -> Decision {
        let mut logs = self
            .clients
            .entry(ip)
            .or_insert_with(|| vec![VecDeque::new(); self.tiers.len()]);
        let counts: Vec<TierCount> = self
            .tiers
            .iter()
            .zip(logs.iter_mut())
            .map(|(tier, log)| {
                prune(log, tier, now_us);
                let count = log.len() as u64;
                let pivot = if count >= tier.limit {
                    usize::try_from(count - tier.limit)
                        .ok()
                        .and_then(|i| log.get(i))
                } else {
                    log.front()
                };
                TierCount {
                    count,
                    pivot_us: pivot.copied().unwrap_or(now_us),
                }
            })
            .collect();
        let decision = decide(&self.tiers, now_us, &counts);
        if matches!(decision, Decision::Admitted(_)) {
            for log in logs.iter_mut() {
                log.push_back(now_us);
            }
        }
        decision
    }

    /// Forgets addresses whose windows are all empty, so the map does not grow without bound.
    pub fn forget_idle(&self) {
        let now_us = self.now_us();
        self.clients.retain(|_, logs| {
            for (log, tier) in logs.iter_mut().zip(&self.tiers) {
                prune(log, tier, now_us);
            }
            logs.iter().any(|log| !log.is_empty())
        });
        self.clients.shrink_to_fit();
    }
}

/// Drops the entries that left the window `(now - ttl, now]`.
fn prune(log: &mut VecDeque<u64>, tier: &RateTier, now_us: u64) {
    let ttl_us = tier.ttl_ms.saturating_mul(1000);
    while log
        .front()
        .is_some_and(|at| at.saturating_add(ttl_us) <= now_us)
    {
        log.pop_front();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SPEC: [RateTier; 3] = [
        RateTier {
            ttl_ms: 1_000,
            limit: 10,
        },
        RateTier {
            ttl_ms: 60_000,
            limit: 100,
        },
        RateTier {
            ttl_ms: 3_600_000,
            limit: 1_000,
        },
    ];

    fn ip(last: u8) -> IpAddr {
        [127, 0, 0, last].into()
    }

    fn admitted(d: Decision) -> bool {
        matches!(d, Decision::Admitted(_))
    }

    #[test]
    fn eleven_at_once_the_eleventh_is_refused_and_addresses_are_separate() {
        let l = LocalWindows::new(&SPEC);
        let t = 5_000_000;
        for _ in 0..10 {
            assert!(admitted(l.check_at(ip(1), t)));
        }
        assert_eq!(
            l.check_at(ip(1), t),
            Decision::Refused {
                tier: 0,
                limit: 10,
                retry_after_secs: 1
            }
        );
        assert!(admitted(l.check_at(ip(2), t)), "limits are per address");
    }

    #[test]
    fn no_one_second_window_ever_holds_more_than_ten() {
        // Requests every 45 ms for 10 s: a token bucket would admit bursts past 10 in some windows.
        let l = LocalWindows::new(&SPEC[..1]);
        let mut admitted_at = Vec::new();
        for step in 0..222u64 {
            let t = 1 + step * 45_000;
            if admitted(l.check_at(ip(1), t)) {
                admitted_at.push(t);
            }
        }
        for (i, start) in admitted_at.iter().enumerate() {
            let in_window = admitted_at[i..]
                .iter()
                .take_while(|t| **t < start + 1_000_000)
                .count();
            assert!(in_window <= 10, "{in_window} in the second from {start}");
        }
        // And the limit is reached, not undershot: about 10 per second over 10 s.
        assert!(admitted_at.len() >= 90, "{}", admitted_at.len());
    }

    #[test]
    fn a_slot_frees_exactly_when_the_oldest_request_leaves_the_window() {
        let l = LocalWindows::new(&SPEC[..1]);
        for k in 0..10u64 {
            assert!(admitted(l.check_at(ip(1), 1 + k * 50_000)));
        }
        // The first request was at 1 µs: still inside (now - 1 s, now] at 1_000_000 µs.
        assert!(!admitted(l.check_at(ip(1), 1_000_000)));
        assert!(admitted(l.check_at(ip(1), 1_000_001)));
        assert!(!admitted(l.check_at(ip(1), 1_000_002)));
    }

    #[test]
    fn the_longer_tiers_refuse_with_their_own_wait() {
        let tiers = [
            RateTier {
                ttl_ms: 1_000,
                limit: 10,
            },
            RateTier {
                ttl_ms: 60_000,
                limit: 15,
            },
        ];
        let l = LocalWindows::new(&tiers);
        let mut t = 1;
        for _ in 0..15 {
            assert!(admitted(l.check_at(ip(1), t)));
            t += 200_000;
        }
        match l.check_at(ip(1), t) {
            Decision::Refused {
                tier,
                limit,
                retry_after_secs,
            } => {
                assert_eq!((tier, limit), (1, 15));
                assert_eq!(retry_after_secs, 57, "the first request leaves at 60 s");
            }
            other => panic!("expected a refusal, got {other:?}"),
        }
    }

    #[test]
    fn admitted_requests_report_the_tightest_tier() {
        let l = LocalWindows::new(&SPEC);
        let Decision::Admitted(first) = l.check_at(ip(1), 1) else {
            panic!("admitted");
        };
        assert_eq!(
            first,
            Quota {
                limit: 10,
                remaining: 9,
                reset_secs: 1
            }
        );
        for _ in 0..8 {
            l.check_at(ip(1), 2);
        }
        let Decision::Admitted(tenth) = l.check_at(ip(1), 3) else {
            panic!("admitted");
        };
        assert_eq!(tenth.remaining, 0);
    }

    #[test]
    fn idle_addresses_are_forgotten() {
        let l = LocalWindows::new(&[RateTier {
            ttl_ms: 1,
            limit: 5,
        }]);
        l.check(ip(1));
        std::thread::sleep(std::time::Duration::from_millis(5));
        l.forget_idle();
        assert!(l.clients.is_empty());
    }
}
