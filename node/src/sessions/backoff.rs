//! Reconnect timing: the delay before each automatic reconnect attempt, when to give up, and when a
//! stuck reconnect raises `session.reconnect_loop`. Pure arithmetic over the session config; the
//! supervisor owns the timers and the attempt counter. The policy and its delay function are the engine
//! API's (`wagate_engine_api::reconnect`), so an engine that reconnects by itself (socket) schedules its
//! attempts with the very same numbers.

pub(crate) use wagate_engine_api::ReconnectPolicy;

/// `session.reconnect_loop` fires on every fifth consecutive failed attempt.
pub(crate) const LOOP_ALERT_EVERY: u32 = 5;

/// What to do after a drop or a failed relaunch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ReconnectDecision {
    /// Schedule attempt number `attempt` (1-based) after `delay_ms`.
    Retry { attempt: u32, delay_ms: u64 },
    /// The explicit attempt budget is spent: the session fails.
    GiveUp,
}

/// Decides the next step given how many consecutive attempts have already failed (0 right after a drop).
/// The delay is `base * 2^(attempt-1)` capped at 5 minutes (`ReconnectPolicy::delay_ms`).
pub(crate) fn next_attempt(policy: ReconnectPolicy, failed_attempts: u32) -> ReconnectDecision {
    match policy.next_attempt(failed_attempts) {
        Some((attempt, delay_ms)) => ReconnectDecision::Retry { attempt, delay_ms },
        None => ReconnectDecision::GiveUp,
    }
}

/// Whether `failed_attempts` consecutive failures warrant a `session.reconnect_loop` alert.
pub(crate) fn is_loop_alert(failed_attempts: u32) -> bool {
    failed_attempts > 0 && failed_attempts.is_multiple_of(LOOP_ALERT_EVERY)
}

#[cfg(test)]
mod tests {
    use super::*;
    use wagate_engine_api::reconnect::{
        MAX_RECONNECT_DELAY_MS as MAX_DELAY_MS, reconnect_delay_ms as delay_ms,
    };

    #[test]
    fn delay_doubles_from_the_base() {
        assert_eq!(delay_ms(5_000, 1), 5_000);
        assert_eq!(delay_ms(5_000, 2), 10_000);
        assert_eq!(delay_ms(5_000, 3), 20_000);
        assert_eq!(delay_ms(1_000, 5), 16_000);
    }

    #[test]
    fn delay_is_capped_at_five_minutes() {
        assert_eq!(delay_ms(5_000, 7), 300_000);
        assert_eq!(delay_ms(300_000, 1), 300_000);
        assert_eq!(delay_ms(1_000, 200), 300_000);
        assert_eq!(delay_ms(u64::MAX, 3), 300_000);
    }

    #[test]
    fn unlimited_policy_never_gives_up() {
        let policy = ReconnectPolicy::default();
        assert_eq!(
            next_attempt(policy, 1_000),
            ReconnectDecision::Retry {
                attempt: 1_001,
                delay_ms: MAX_DELAY_MS
            }
        );
    }

    #[test]
    fn zero_attempts_means_no_automatic_reconnect() {
        let policy = ReconnectPolicy {
            base_delay_ms: 5_000,
            max_attempts: Some(0),
        };
        assert_eq!(next_attempt(policy, 0), ReconnectDecision::GiveUp);
    }

    #[test]
    fn explicit_budget_is_spent_after_max_failures() {
        let policy = ReconnectPolicy {
            base_delay_ms: 1_000,
            max_attempts: Some(3),
        };
        assert_eq!(
            next_attempt(policy, 0),
            ReconnectDecision::Retry {
                attempt: 1,
                delay_ms: 1_000
            }
        );
        assert_eq!(
            next_attempt(policy, 2),
            ReconnectDecision::Retry {
                attempt: 3,
                delay_ms: 4_000
            }
        );
        assert_eq!(next_attempt(policy, 3), ReconnectDecision::GiveUp);
    }

    #[test]
    fn loop_alert_fires_every_fifth_consecutive_failure() {
        let alerts: Vec<u32> = (0..=15).filter(|n| is_loop_alert(*n)).collect();
        assert_eq!(alerts, vec![5, 10, 15]);
    }
}
