//! Row-by-row tests of the spec's transition table ("States and transitions"), one test per row, plus
//! the decided rows (wire-notes §11) and the 409 refusals.

use super::*;
use Effect::*;

fn ctx() -> Context {
    Context::default()
}

fn go(from: SessionStatus, trigger: Trigger, ctx: Context) -> Transition {
    match transition(from, &trigger, &ctx) {
        Ok(t) => t,
        Err(e) => panic!("{from} --{trigger:?}--> refused: {e}"),
    }
}

fn policy(base_delay_ms: u64, max_attempts: Option<u32>) -> ReconnectPolicy {
    ReconnectPolicy {
        base_delay_ms,
        max_attempts,
    }
}

#[test]
fn row_created_start_goes_initializing() {
    let t = go(Created, Trigger::Start, ctx());
    assert_eq!(t.to, Initializing);
    assert!(t.effects.contains(&LaunchEngine) && t.effects.contains(&EmitStatus));
}

#[test]
fn row_initializing_qr_goes_qr_ready_and_emits_qr() {
    let t = go(Initializing, Trigger::QrProduced, ctx());
    assert_eq!(t.to, QrReady);
    assert_eq!(t.effects, vec![CacheQr, EmitQr, EmitStatus]);
}

#[test]
fn row_qr_ready_scan_goes_authenticating() {
    let t = go(QrReady, Trigger::QrScanned, ctx());
    assert_eq!(t.to, Authenticating);
    assert!(t.effects.contains(&DropQr));
}

#[test]
fn row_authenticating_link_completes_goes_ready_with_authenticated_and_status() {
    let t = go(Authenticating, Trigger::LinkCompleted, ctx());
    assert_eq!(t.to, Ready);
    assert!(t.effects.contains(&EmitAuthenticated) && t.effects.contains(&EmitStatus));
    assert!(t.effects.contains(&SetPhone) && t.effects.contains(&ClearLastError));
}

#[test]
fn row_ready_link_drops_goes_disconnected_and_begins_backoff() {
    let t = go(
        Ready,
        Trigger::LinkDropped {
            reason: "lost".into(),
        },
        ctx(),
    );
    assert_eq!(t.to, Disconnected);
    assert!(t.effects.contains(&BeginBackoff {
        attempt: 1,
        delay_ms: 5_000
    }));
    assert!(t.effects.contains(&EmitStatus) && t.effects.contains(&EmitDisconnected));
}

#[test]
fn row_disconnected_relaunch_fails_goes_initializing_with_last_error_and_keeps_retrying() {
    let c = Context {
        failed_attempts: 1,
        ..ctx()
    };
    let t = go(
        Disconnected,
        Trigger::ReconnectFailed {
            reason: "dns".into(),
        },
        c,
    );
    assert_eq!(t.to, Initializing);
    assert!(t.effects.contains(&SetLastError("dns".into())));
    assert!(t.effects.contains(&BeginBackoff {
        attempt: 3,
        delay_ms: 20_000
    }));
}

#[test]
fn row_reconnect_budget_exhausted_goes_failed_from_disconnected_or_initializing() {
    let c = Context {
        reconnect: policy(1_000, Some(2)),
        failed_attempts: 1,
        ..ctx()
    };
    for from in [Disconnected, Initializing] {
        let t = go(
            from,
            Trigger::ReconnectFailed {
                reason: "launch".into(),
            },
            c,
        );
        assert_eq!(t.to, Failed);
        assert!(t.effects.contains(&SetLastError("launch".into())));
        assert!(t.effects.contains(&FireErrorHook) && t.effects.contains(&EmitStatus));
    }
}

/// A start's own launch failing spends none of the budget: attempt 1 (base delay) comes next, so
/// `maxReconnectAttempts: N` leaves N relaunches, as after a drop.
#[test]
fn failed_first_launch_begins_relaunches_at_attempt_one() {
    for max in [Some(1), Some(2), None] {
        let c = Context {
            reconnect: policy(1_000, max),
            ..ctx()
        };
        let t = go(
            Initializing,
            Trigger::LaunchFailed {
                reason: "launch".into(),
            },
            c,
        );
        assert_eq!(t.to, Initializing, "max {max:?}");
        assert!(t.effects.contains(&SetLastError("launch".into())));
        assert!(t.effects.contains(&ResetReconnectAttempts));
        assert!(t.effects.contains(&BeginBackoff {
            attempt: 1,
            delay_ms: 1_000
        }));
        assert!(!t.effects.contains(&EmitStatus), "status unchanged");
    }
}

#[test]
fn failed_first_launch_with_zero_attempts_goes_failed_at_once() {
    let c = Context {
        reconnect: policy(1_000, Some(0)),
        ..ctx()
    };
    let t = go(
        Initializing,
        Trigger::LaunchFailed {
            reason: "launch".into(),
        },
        c,
    );
    assert_eq!(t.to, Failed);
    assert!(t.effects.contains(&SetLastError("launch".into())));
    assert!(t.effects.contains(&StopEngine) && t.effects.contains(&FireErrorHook));
    assert!(t.effects.contains(&EmitStatus));
    assert!(!t.effects.iter().any(|e| matches!(e, BeginBackoff { .. })));
}

#[test]
fn row_any_auth_failure_goes_failed() {
    for from in SessionStatus::ALL {
        let t = go(
            from,
            Trigger::AuthFailed {
                reason: "stale profile".into(),
            },
            ctx(),
        );
        assert_eq!(t.to, Failed);
        assert!(t.effects.contains(&SetLastError("stale profile".into())));
    }
}

#[test]
fn row_ready_stop_succeeds_goes_disconnected() {
    for teardown in [Teardown::Graceful, Teardown::Forced] {
        let t = go(Ready, Trigger::Stop { teardown }, ctx());
        assert_eq!(t.to, Disconnected);
        assert!(!t.effects.contains(&ReportStopIncomplete));
    }
}

#[test]
fn row_ready_stop_both_teardowns_fail_goes_disconnected_with_502() {
    let t = go(
        Ready,
        Trigger::Stop {
            teardown: Teardown::Failed,
        },
        ctx(),
    );
    assert_eq!(t.to, Disconnected);
    assert!(t.effects.contains(&ReportStopIncomplete));
}

#[test]
fn row_action_required_stop_clears_last_error_and_restriction() {
    let t = go(
        ActionRequired,
        Trigger::Stop {
            teardown: Teardown::Graceful,
        },
        ctx(),
    );
    assert_eq!(t.to, Disconnected);
    assert!(t.effects.contains(&ClearLastError));
    assert!(t.effects.contains(&ClearRestriction));
}

#[test]
fn operator_teardown_of_an_active_session_announces_the_disconnect() {
    for trigger in [
        Trigger::Stop {
            teardown: Teardown::Graceful,
        },
        Trigger::Logout { unlinked: true },
        Trigger::ForceKill,
    ] {
        let t = go(Ready, trigger.clone(), ctx());
        assert_eq!(t.to, Disconnected);
        assert!(t.effects.contains(&EmitStatus) && t.effects.contains(&EmitDisconnected));
        let idle = go(Disconnected, trigger, ctx());
        assert!(!idle.effects.contains(&EmitDisconnected));
    }
}

#[test]
fn row_ready_page_reload_stays_ready_without_status_event() {
    let t = go(Ready, Trigger::PageReloadStarted, ctx());
    assert_eq!(t.to, Ready);
    assert!(!t.effects.contains(&EmitStatus));
}

#[test]
fn row_ready_page_reload_too_slow_goes_disconnected_with_status() {
    let t = go(Ready, Trigger::PageReloadStalled, ctx());
    assert_eq!(t.to, Disconnected);
    assert!(t.effects.contains(&EmitStatus));
}

#[test]
fn row_restore_normalises_active_statuses_to_disconnected() {
    for from in [Ready, Initializing, QrReady, Authenticating, ActionRequired] {
        let t = go(from, Trigger::Restored, ctx());
        assert_eq!((t.to, t.effects), (Disconnected, vec![CountNormalized]));
    }
    for from in [Created, Disconnected, Failed] {
        assert_eq!(go(from, Trigger::Restored, ctx()).to, from);
    }
}

#[test]
fn row_takeover_sweep_disconnects_orphaned_sessions() {
    for from in [Ready, Initializing, Authenticating, ActionRequired] {
        let t = go(from, Trigger::TakeoverSweep, ctx());
        assert_eq!(t.to, Disconnected);
        assert!(t.effects.contains(&EmitStatus));
    }
}

#[test]
fn row_takeover_sweep_on_qr_ready_disconnects_only_without_phone() {
    assert_eq!(go(QrReady, Trigger::TakeoverSweep, ctx()).to, Disconnected);
    let with_phone = Context {
        has_phone: true,
        ..ctx()
    };
    let t = go(QrReady, Trigger::TakeoverSweep, with_phone);
    assert_eq!((t.to, t.effects), (QrReady, vec![]));
}

#[test]
fn row_any_logout_stops_locally_and_clears_phone() {
    for from in SessionStatus::ALL {
        let t = go(from, Trigger::Logout { unlinked: true }, ctx());
        assert!(t.effects.contains(&StopEngine) && t.effects.contains(&ClearPhone));
        assert!(t.effects.contains(&ForgetCredentials));
        assert!(!t.effects.contains(&ReportLogoutIncomplete));
        assert!(matches!(t.to, Created | Disconnected));
    }
    let t = go(Ready, Trigger::Logout { unlinked: false }, ctx());
    assert!(t.effects.contains(&ClearPhone) && t.effects.contains(&ReportLogoutIncomplete));
}

// ---- decided rows (wire-notes §11 and the gaps the spec leaves) ----

#[test]
fn zero_max_reconnect_attempts_sends_a_drop_straight_to_failed() {
    let c = Context {
        reconnect: policy(5_000, Some(0)),
        ..ctx()
    };
    let t = go(
        Ready,
        Trigger::LinkDropped {
            reason: "gone".into(),
        },
        c,
    );
    assert_eq!(t.to, Failed);
    assert!(t.effects.contains(&SetLastError("gone".into())));
    assert!(t.effects.contains(&StopEngine), "{:?}", t.effects);
}

#[test]
fn fifth_consecutive_failure_raises_reconnect_loop() {
    let c = Context {
        reconnect: policy(1_000, None),
        failed_attempts: 4,
        ..ctx()
    };
    let t = go(
        Initializing,
        Trigger::ReconnectFailed { reason: "x".into() },
        c,
    );
    assert!(t.effects.contains(&EmitReconnectLoop {
        attempts: 5,
        next_delay_ms: 32_000
    }));
    let c = Context {
        failed_attempts: 5,
        ..c
    };
    let t = go(
        Initializing,
        Trigger::ReconnectFailed { reason: "x".into() },
        c,
    );
    assert!(
        !t.effects
            .iter()
            .any(|e| matches!(e, EmitReconnectLoop { .. }))
    );
}

#[test]
fn restored_credentials_go_from_initializing_to_ready() {
    let t = go(Initializing, Trigger::LinkCompleted, ctx());
    assert_eq!(t.to, Ready);
    assert!(t.effects.contains(&EmitAuthenticated));
}

#[test]
fn qr_rotation_reemits_without_status_and_relink_is_warned() {
    assert_eq!(
        go(QrReady, Trigger::QrProduced, ctx()).effects,
        vec![CacheQr, EmitQr]
    );
    let linked = Context {
        has_phone: true,
        ..ctx()
    };
    assert!(
        go(Initializing, Trigger::QrProduced, linked)
            .effects
            .contains(&WarnRelinkRequired)
    );
}

#[test]
fn restriction_moves_ready_to_action_required_and_back() {
    let on = Trigger::Restriction {
        kind: "spam".into(),
        active: true,
    };
    let t = go(Ready, on, ctx());
    assert_eq!(t.to, ActionRequired);
    assert!(t.effects.contains(&EmitRestriction));
    let off = Trigger::Restriction {
        kind: "spam".into(),
        active: false,
    };
    assert_eq!(go(ActionRequired, off, ctx()).to, Ready);
}

#[test]
fn phone_unlink_disconnects_and_forgets_the_phone() {
    let t = go(Ready, Trigger::LoggedOutFromPhone, ctx());
    assert_eq!(t.to, Disconnected);
    assert!(t.effects.contains(&ClearPhone) && t.effects.contains(&ForgetCredentials));
}

#[test]
fn a_logout_met_while_launching_relaunches_for_a_new_qr() {
    // Stopped (or between reconnect attempts) when the phone unlinked: the launch learns it.
    let t = go(Initializing, Trigger::LoggedOutFromPhone, ctx());
    assert_eq!(t.to, Initializing);
    for effect in [
        ClearPhone,
        ForgetCredentials,
        EmitDisconnected,
        LaunchEngine,
    ] {
        assert!(t.effects.contains(&effect), "{effect:?} in {:?}", t.effects);
    }
    // The relaunch comes after the credentials are forgotten, so it asks for a QR.
    let position = |e: &Effect| t.effects.iter().position(|x| x == e);
    assert!(position(&ForgetCredentials) < position(&LaunchEngine));
    assert!(
        !t.effects.contains(&EmitStatus),
        "the status did not change"
    );
}

#[test]
fn the_first_qr_after_a_lost_link_warns_relink_required() {
    let lost = Context {
        lost_link: true,
        ..ctx()
    };
    assert!(
        go(Initializing, Trigger::QrProduced, lost)
            .effects
            .contains(&WarnRelinkRequired)
    );
    assert!(
        !go(Initializing, Trigger::QrProduced, ctx())
            .effects
            .contains(&WarnRelinkRequired),
        "a session never linked asks for its first QR"
    );
}

#[test]
fn start_restarts_action_required_and_refuses_running_sessions() {
    let restart = go(ActionRequired, Trigger::Start, ctx());
    assert_eq!(restart.to, Initializing);
    assert!(restart.effects.contains(&ClearRestriction));
    assert_eq!(go(Failed, Trigger::Start, ctx()).to, Initializing);
    // A restriction a dead owner left on the record does not survive the takeover's start.
    assert!(
        go(Disconnected, Trigger::Start, ctx())
            .effects
            .contains(&ClearRestriction)
    );
    for from in [Initializing, QrReady, Authenticating, Ready] {
        let err = transition(from, &Trigger::Start, &ctx()).err();
        assert_eq!(err, Some(TransitionError::AlreadyActive(from)));
    }
}

#[test]
fn pairing_code_is_refused_outside_qr_ready() {
    assert_eq!(go(QrReady, Trigger::PairingRequested, ctx()).to, QrReady);
    for from in [Created, Initializing, Authenticating, Ready] {
        let err = transition(from, &Trigger::PairingRequested, &ctx()).err();
        assert_eq!(err, Some(TransitionError::PairingNotAllowed(from)));
    }
}

#[test]
fn stale_engine_events_are_typed_refusals() {
    let err = transition(Created, &Trigger::QrScanned, &ctx()).err();
    assert_eq!(
        err,
        Some(TransitionError::Invalid {
            from: Created,
            trigger: "scan"
        })
    );
    assert!(
        transition(
            Disconnected,
            &Trigger::LinkDropped { reason: "x".into() },
            &ctx()
        )
        .is_err()
    );
}

fn self_retry(failures: u32) -> Trigger {
    Trigger::SelfRetry {
        failures,
        reason: Some("closed before the handshake".into()),
        next_delay_ms: Some(ctx().reconnect.delay_ms(failures + 1)),
    }
}

#[test]
fn socket_self_retry_stays_initializing_and_sets_last_error_from_the_fifth() {
    let fourth = go(Initializing, self_retry(4), ctx());
    assert_eq!(fourth.to, Initializing);
    assert!(!fourth.effects.iter().any(|e| matches!(e, SetLastError(_))));
    assert!(!fourth.effects.contains(&EmitStatus));
    let fifth = go(Initializing, self_retry(5), ctx());
    assert_eq!(fifth.to, Initializing);
    assert!(
        fifth
            .effects
            .contains(&SetLastError("closed before the handshake".into()))
    );
    assert!(
        fifth
            .effects
            .iter()
            .any(|e| matches!(e, EmitReconnectLoop { attempts: 5, .. }))
    );
    assert!(
        fifth.effects.contains(&CancelReconnect),
        "the engine retries, not the supervisor"
    );
}

#[test]
fn socket_self_retry_after_a_drop_leaves_disconnected_and_honours_max_attempts() {
    let after_drop = Trigger::SelfRetry {
        failures: 0,
        reason: None,
        next_delay_ms: Some(5_000),
    };
    let t = go(Disconnected, after_drop, ctx());
    assert_eq!(t.to, Initializing);
    assert!(t.effects.contains(&CancelReconnect) && t.effects.contains(&EmitStatus));
    let capped = Context {
        reconnect: policy(1000, Some(3)),
        ..ctx()
    };
    let t = go(Initializing, self_retry(3), capped);
    assert_eq!(t.to, Failed);
    assert!(t.effects.contains(&StopEngine));
    assert!(transition(QrReady, &self_retry(1), &ctx()).is_err());
}

/// A socket session whose first connect failed: that connect spends none of `maxReconnectAttempts`, so
/// `1` allows exactly one self-retry and fails when it fails too; `0` fails the first failure.
#[test]
fn socket_first_connect_failure_spends_no_attempt() {
    let one = Context {
        reconnect: policy(1000, Some(1)),
        ..ctx()
    };
    let first = Trigger::SelfRetry {
        failures: 0,
        reason: Some("cannot reach".into()),
        next_delay_ms: Some(1_000),
    };
    let t = go(Initializing, first.clone(), one);
    assert_eq!(t.to, Initializing, "{t:?}");
    assert!(!t.effects.iter().any(|e| matches!(e, SetLastError(_))));
    let spent = Trigger::SelfRetry {
        failures: 1,
        reason: Some("cannot reach".into()),
        next_delay_ms: None,
    };
    let t = go(Initializing, spent, one);
    assert_eq!(t.to, Failed);
    assert!(t.effects.contains(&SetLastError("cannot reach".into())));
    assert!(t.effects.contains(&StopEngine) && t.effects.contains(&FireErrorHook));
    let zero = Context {
        reconnect: policy(1000, Some(0)),
        ..ctx()
    };
    assert_eq!(go(Initializing, first, zero).to, Failed);
}

/// `session.reconnect_loop` names the delay the engine scheduled, not one derived another way.
#[test]
fn socket_reconnect_loop_reports_the_scheduled_delay() {
    let ten = Trigger::SelfRetry {
        failures: 10,
        reason: Some("cannot reach".into()),
        next_delay_ms: Some(300_000),
    };
    let slow = Context {
        reconnect: policy(60_000, None),
        ..ctx()
    };
    let t = go(Initializing, ten, slow);
    assert!(t.effects.contains(&EmitReconnectLoop {
        attempts: 10,
        next_delay_ms: 300_000
    }));
}

#[test]
fn action_needed_moves_an_active_session_to_action_required() {
    let t = go(
        QrReady,
        Trigger::ActionNeeded {
            reason: "passkey".into(),
        },
        ctx(),
    );
    assert_eq!(t.to, ActionRequired);
    assert!(t.effects.contains(&SetLastError("passkey".into())) && t.effects.contains(&DropQr));
}
