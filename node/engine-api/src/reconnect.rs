//! The session's reconnect policy (`reconnectBaseDelay`, `maxReconnectAttempts`, read once per start) and
//! its arithmetic: the delay before each automatic reconnect attempt and when the attempts are spent. One
//! function for both sides of the boundary: the supervisor's own relaunches and an engine that reconnects by
//! itself (the socket engine) schedule with it, so a self-retry waits what the session's config says and
//! `session.reconnect_loop` reports the delay actually scheduled.

/// The spec's cap on a single reconnect delay (5 minutes).
pub const MAX_RECONNECT_DELAY_MS: u64 = 300_000;
/// `reconnectBaseDelay` default.
pub const DEFAULT_RECONNECT_BASE_DELAY_MS: u64 = 5_000;

/// The reconnect part of a session's config, as it stood at the start.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReconnectPolicy {
    /// `reconnectBaseDelay` in ms (1000-300000).
    pub base_delay_ms: u64,
    /// `maxReconnectAttempts`: `None` = unlimited, `Some(0)` = no automatic reconnect.
    pub max_attempts: Option<u32>,
}

impl Default for ReconnectPolicy {
    fn default() -> Self {
        Self {
            base_delay_ms: DEFAULT_RECONNECT_BASE_DELAY_MS,
            max_attempts: None,
        }
    }
}

impl ReconnectPolicy {
    /// Delay before reconnect attempt `attempt` (1-based): `base * 2^(attempt-1)`, capped at 5 minutes.
    pub fn delay_ms(&self, attempt: u32) -> u64 {
        reconnect_delay_ms(self.base_delay_ms, attempt)
    }

    /// The next reconnect after `failed_attempts` consecutive failed ones (0 right after a drop, or after a
    /// first connect that failed): `Some((attempt, delay_ms))`, or `None` when the explicit budget is spent.
    pub fn next_attempt(&self, failed_attempts: u32) -> Option<(u32, u64)> {
        if self.max_attempts.is_some_and(|max| failed_attempts >= max) {
            return None;
        }
        let attempt = failed_attempts.saturating_add(1);
        Some((attempt, self.delay_ms(attempt)))
    }
}

/// Delay before reconnect attempt `attempt` (1-based): `base * 2^(attempt-1)`, capped at 5 minutes.
pub fn reconnect_delay_ms(base_delay_ms: u64, attempt: u32) -> u64 {
    let exponent = attempt.saturating_sub(1);
    // 2^19 * 1000 already exceeds the cap, so any larger exponent is the cap too (and cannot overflow).
    if exponent >= 20 {
        return MAX_RECONNECT_DELAY_MS;
    }
    base_delay_ms
        .saturating_mul(1u64 << exponent)
        .min(MAX_RECONNECT_DELAY_MS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delays_double_from_the_base_up_to_the_cap() {
        let policy = ReconnectPolicy {
            base_delay_ms: 60_000,
            max_attempts: None,
        };
        let delays: Vec<u64> = (1..=5).map(|n| policy.delay_ms(n)).collect();
        assert_eq!(delays, vec![60_000, 120_000, 240_000, 300_000, 300_000]);
        assert_eq!(reconnect_delay_ms(1_000, 200), MAX_RECONNECT_DELAY_MS);
        assert_eq!(reconnect_delay_ms(u64::MAX, 3), MAX_RECONNECT_DELAY_MS);
    }

    #[test]
    fn the_budget_counts_failed_reconnects_only() {
        let one = ReconnectPolicy {
            base_delay_ms: 1_000,
            max_attempts: Some(1),
        };
        assert_eq!(one.next_attempt(0), Some((1, 1_000)));
        assert_eq!(one.next_attempt(1), None);
        let none = ReconnectPolicy {
            max_attempts: Some(0),
            ..one
        };
        assert_eq!(none.next_attempt(0), None);
        assert_eq!(
            ReconnectPolicy::default().next_attempt(1_000),
            Some((1_001, MAX_RECONNECT_DELAY_MS))
        );
    }
}
