//! Opt-in send pacing (`SEND_PACING_ENABLED=true`): a warm-up ramp for new sessions, a daily cap, a
//! cold-reachout budget for first contacts, and a failure breaker that opens for 15 minutes after
//! consecutive sends failed on the network (typed 4xx refusals never count). Windows are rolling 24 h,
//! kept in memory per node. A refusal is counted in `wagate_send_pacing_refusals_total{rule}`.

use std::collections::{HashMap, VecDeque};

use parking_lot::Mutex;
use wagate_proto::Jid;

use super::MessagingService;
use super::error::{MessagingError, MessagingResult};
use crate::engine::EngineError;
use crate::store::messages as message_store;

const DAY_MS: i64 = 24 * 3600 * 1000;
/// The spec's breaker cooldown.
pub(crate) const BREAKER_COOLDOWN_MS: i64 = 15 * 60 * 1000;

/// The limits, from `SEND_PACING_*` (defaults in `config.rs` and `.env.example`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct PacingLimits {
    /// Sends per rolling 24 h once warmed up.
    pub daily_cap: u64,
    /// Days a new session ramps from `warmup_start` to `daily_cap`.
    pub warmup_days: u64,
    /// Sends allowed on a session's first day.
    pub warmup_start: u64,
    /// Messages to chats with no history per rolling 24 h.
    pub cold_daily: u64,
    /// Consecutive network failures that open the breaker.
    pub breaker_failures: u64,
}

/// Which rule refused, and when a retry can pass.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Refusal {
    pub rule: &'static str,
    pub retry_after_ms: i64,
}

#[derive(Debug, Default)]
struct SessionPace {
    sends: VecDeque<i64>,
    cold: VecDeque<i64>,
    failures: u64,
    open_until: i64,
}

pub(crate) struct Pacer {
    limits: PacingLimits,
    sessions: Mutex<HashMap<String, SessionPace>>,
}

fn prune(window: &mut VecDeque<i64>, now: i64) {
    while window.front().is_some_and(|t| *t <= now - DAY_MS) {
        window.pop_front();
    }
}

fn retry_after(window: &VecDeque<i64>, now: i64) -> i64 {
    window
        .front()
        .map(|t| t + DAY_MS - now)
        .unwrap_or(1000)
        .max(1000)
}

impl Pacer {
    pub(crate) fn new(limits: PacingLimits) -> Pacer {
        Pacer {
            limits,
            sessions: Mutex::new(HashMap::new()),
        }
    }

    /// Today's allowance for a session created at `created_ms`.
    fn allowance(&self, created_ms: i64, now: i64) -> u64 {
        let l = self.limits;
        let age_days = u64::try_from((now - created_ms).max(0) / DAY_MS).unwrap_or(0);
        if age_days >= l.warmup_days || l.warmup_start >= l.daily_cap {
            return l.daily_cap;
        }
        l.warmup_start + (l.daily_cap - l.warmup_start) * age_days / l.warmup_days.max(1)
    }

    /// Admits a send (reserving its place in the windows) or names the refusing rule.
    pub(crate) fn admit(
        &self,
        session: &str,
        created_ms: i64,
        is_cold: bool,
        now: i64,
    ) -> Result<(), Refusal> {
        let allowance = self.allowance(created_ms, now);
        let mut map = self.sessions.lock();
        let st = map.entry(session.to_string()).or_default();
        if st.open_until > now {
            return Err(Refusal {
                rule: "failure_breaker",
                retry_after_ms: st.open_until - now,
            });
        }
        prune(&mut st.sends, now);
        prune(&mut st.cold, now);
        if st.sends.len() as u64 >= allowance {
            let rule = if allowance < self.limits.daily_cap {
                "warmup"
            } else {
                "daily_cap"
            };
            return Err(Refusal {
                rule,
                retry_after_ms: retry_after(&st.sends, now),
            });
        }
        if is_cold && st.cold.len() as u64 >= self.limits.cold_daily {
            return Err(Refusal {
                rule: "cold_reachout",
                retry_after_ms: retry_after(&st.cold, now),
            });
        }
        st.sends.push_back(now);
        if is_cold {
            st.cold.push_back(now);
        }
        Ok(())
    }

    /// Feeds the breaker: only failures that reached the network count; a success closes the streak.
    pub(crate) fn outcome(&self, session: &str, error: Option<&EngineError>, now: i64) {
        let mut map = self.sessions.lock();
        let st = map.entry(session.to_string()).or_default();
        match error {
            None => st.failures = 0,
            Some(EngineError::Network(_) | EngineError::Timeout) => {
                st.failures += 1;
                if st.failures >= self.limits.breaker_failures {
                    st.open_until = now + BREAKER_COOLDOWN_MS;
                    st.failures = 0;
                }
            }
            Some(_) => {}
        }
    }
}

impl MessagingService {
    /// Pacing gate of the send path (a no-op unless enabled).
    pub(super) async fn pace(&self, session_id: &str, to: &Jid) -> MessagingResult<()> {
        let Some(pacer) = &self.pacer else {
            return Ok(());
        };
        let record = self.sessions.record(session_id).await?;
        let chat = to.to_string();
        let is_cold = !message_store::chat_has_history(&self.db, session_id, &chat, "").await?;
        let now = crate::store::now_ms();
        pacer
            .admit(session_id, record.created_at, is_cold, now)
            .map_err(|r| {
                metrics::counter!(
                    wagate_workers::telemetry::metrics::SENDS_REFUSED,
                    "reason" => "pacing"
                )
                .increment(1);
                MessagingError::Paced {
                    rule: r.rule,
                    retry_after_seconds: u64::try_from((r.retry_after_ms + 999) / 1000)
                        .unwrap_or(1),
                }
            })
    }

    pub(super) fn pace_outcome(&self, session_id: &str, error: Option<&EngineError>) {
        if let Some(pacer) = &self.pacer {
            pacer.outcome(session_id, error, crate::store::now_ms());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pacer() -> Pacer {
        Pacer::new(PacingLimits {
            daily_cap: 10,
            warmup_days: 5,
            warmup_start: 2,
            cold_daily: 1,
            breaker_failures: 2,
        })
    }

    #[test]
    fn new_sessions_ramp_up() {
        let p = pacer();
        assert!(p.admit("s", 0, false, 1).is_ok());
        assert!(p.admit("s", 0, false, 2).is_ok());
        assert_eq!(p.admit("s", 0, false, 3).unwrap_err().rule, "warmup");
        assert_eq!(p.allowance(0, 5 * DAY_MS), 10);
    }

    #[test]
    fn cold_budget_and_daily_cap() {
        let p = pacer();
        let old = -10 * DAY_MS;
        assert!(p.admit("s", old, true, 0).is_ok());
        assert_eq!(
            p.admit("s", old, true, 1).unwrap_err().rule,
            "cold_reachout"
        );
        for t in 2..11 {
            assert!(p.admit("s", old, false, t).is_ok());
        }
        let refusal = p.admit("s", old, false, 20).unwrap_err();
        assert_eq!(refusal.rule, "daily_cap");
        assert!(refusal.retry_after_ms > DAY_MS - 100);
    }

    #[test]
    fn breaker_counts_only_network_failures() {
        let p = pacer();
        let old = -10 * DAY_MS;
        p.outcome("s", Some(&EngineError::NotFound("quote".into())), 0);
        p.outcome("s", Some(&EngineError::Network("x".into())), 0);
        assert!(p.admit("s", old, false, 1).is_ok());
        p.outcome("s", Some(&EngineError::Timeout), 2);
        let refusal = p.admit("s", old, false, 3).unwrap_err();
        assert_eq!(refusal.rule, "failure_breaker");
        assert!(p.admit("s", old, false, 3 + BREAKER_COOLDOWN_MS).is_ok());
    }
}
