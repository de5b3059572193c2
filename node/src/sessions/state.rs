//! The spec's session transition table as one pure function: `(status, Trigger, Context) -> Transition`.
//! Input comes from the supervisor (user actions, engine events, sweeps); the output names the new status
//! and the side effects, in order. Nothing here performs an effect, reads a clock or touches storage.

use super::backoff::{self, ReconnectDecision, ReconnectPolicy};
use SessionStatus::*;
use wagate_proto::SessionStatus;

/// Something that may move a session between statuses.
#[derive(Debug, Clone, PartialEq, Eq)]
#[allow(dead_code)] // page-reload, restore and takeover triggers come with the browser engine and cluster issues
pub(crate) enum Trigger {
    /// The operator started the session.
    Start,
    /// The engine produced a QR (first one or a rotation).
    QrProduced,
    /// The phone scanned the QR or accepted the pairing code.
    QrScanned,
    /// The operator asked for a pairing code (allowed only while `qr_ready`).
    PairingRequested,
    /// The link completed (after a scan, or from stored credentials on a (re)start).
    LinkCompleted,
    /// The connection dropped.
    LinkDropped { reason: String },
    /// The supervisor relaunches the engine after a backoff delay.
    ReconnectBegan,
    /// A relaunch failed (network, DNS, browser launch).
    ReconnectFailed { reason: String },
    /// A launch that was not an automatic relaunch (a start's own, or one for a new QR) failed the same
    /// way: the automatic relaunches begin, and none of `maxReconnectAttempts` is spent yet.
    LaunchFailed { reason: String },
    /// An automatic reconnect met an authentication failure or a stale browser profile.
    AuthFailed { reason: String },
    /// The operator stopped the session; `teardown` is how the engine shutdown went.
    Stop { teardown: Teardown },
    /// The browser page started reloading (browser engine).
    PageReloadStarted,
    /// The page reload's 409 outlasted three grace windows.
    PageReloadStalled,
    /// Data restore from an export.
    Restored,
    /// The takeover sweep found the session's owner gone (or its lease lapsed).
    TakeoverSweep,
    /// The operator logged out; `unlinked` says whether the network confirmed the unlink.
    Logout { unlinked: bool },
    /// The operator force-killed the engine.
    ForceKill,
    /// A restriction was imposed (`active`) or lifted.
    Restriction { kind: String, active: bool },
    /// The phone logged the device out.
    LoggedOutFromPhone,
    /// The engine hit a terminal error.
    EngineFailed { reason: String },
    /// An engine that reconnects by itself (socket) lost its connection or failed an attempt and schedules
    /// the next one: `failures` consecutive reconnect attempts failed, `reason` is why the last attempt
    /// failed (`None` after a connection that worked), `next_delay_ms` the delay it scheduled (`None`: none).
    SelfRetry {
        failures: u32,
        reason: Option<String>,
        next_delay_ms: Option<u64>,
    },
    /// The engine needs the user to act outside the service (e.g. a passkey step while linking).
    ActionNeeded { reason: String },
}

impl Trigger {
    fn name(&self) -> &'static str {
        match self {
            Self::Start => "start",
            Self::QrProduced => "qr",
            Self::QrScanned => "scan",
            Self::PairingRequested => "pairing-code",
            Self::LinkCompleted => "link-completed",
            Self::LinkDropped { .. } => "link-dropped",
            Self::ReconnectBegan => "reconnect",
            Self::ReconnectFailed { .. } => "reconnect-failed",
            Self::LaunchFailed { .. } => "launch-failed",
            Self::AuthFailed { .. } => "auth-failed",
            Self::Stop { .. } => "stop",
            Self::PageReloadStarted => "page-reload",
            Self::PageReloadStalled => "page-reload-stalled",
            Self::Restored => "restore",
            Self::TakeoverSweep => "takeover",
            Self::Logout { .. } => "logout",
            Self::ForceKill => "force-kill",
            Self::Restriction { .. } => "restriction",
            Self::LoggedOutFromPhone => "logged-out",
            Self::EngineFailed { .. } => "engine-failed",
            Self::SelfRetry { .. } => "self-retry",
            Self::ActionNeeded { .. } => "action-needed",
        }
    }
}

/// How a stop's engine teardown went.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Teardown {
    Graceful,
    Forced,
    /// Both the graceful and the forced teardown failed.
    Failed,
}

/// Facts about the session the table's conditions read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct Context {
    /// The session has a linked phone number.
    pub has_phone: bool,
    /// The phone logged the session's device out and no new link was made since: its next QR is a relink
    /// although the phone is already cleared.
    pub lost_link: bool,
    pub reconnect: ReconnectPolicy,
    /// Consecutive failed reconnect attempts before this trigger.
    pub failed_attempts: u32,
}

/// A side effect the supervisor performs, in list order, after writing the new status.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Effect {
    LaunchEngine,
    StopEngine,
    KillEngine,
    EmitStatus,
    EmitQr,
    EmitAuthenticated,
    EmitDisconnected,
    EmitRestriction,
    EmitReconnectLoop {
        attempts: u32,
        next_delay_ms: u64,
    },
    /// Schedule reconnect attempt `attempt` after `delay_ms`.
    BeginBackoff {
        attempt: u32,
        delay_ms: u64,
    },
    CancelReconnect,
    ResetReconnectAttempts,
    SetLastError(String),
    ClearLastError,
    /// Forget the account restriction on the record (a restart clears `action_required`).
    ClearRestriction,
    /// Record the phone the engine reported with the link.
    SetPhone,
    ClearPhone,
    ForgetCredentials,
    CacheQr,
    DropQr,
    /// Log `relink_required`: a previously linked session asks for a QR again.
    WarnRelinkRequired,
    /// Fire the plugin hook `session:error`.
    FireErrorHook,
    /// Count the status in the import's normalisation notice.
    CountNormalized,
    /// Answer 502 SESSION_STOP_INCOMPLETE.
    ReportStopIncomplete,
    /// Answer 502 SESSION_LOGOUT_INCOMPLETE.
    ReportLogoutIncomplete,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Transition {
    pub to: SessionStatus,
    pub effects: Vec<Effect>,
}

/// A trigger the current status does not accept; the HTTP layer answers 409.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum TransitionError {
    #[error("Pairing code can only be requested while the session is qr_ready (status: {0})")]
    PairingNotAllowed(SessionStatus),
    #[error("Session is already active (status: {0})")]
    AlreadyActive(SessionStatus),
    #[error("'{trigger}' is not valid while the session is {from}")]
    Invalid {
        from: SessionStatus,
        trigger: &'static str,
    },
    /// The session's runtime was unloaded (stopped, deleted, given up) before the trigger reached it; not
    /// a row of the table, but answered the same way.
    #[error("Session was unloaded from this node by a concurrent stop; retry")]
    Unloaded,
}

/// Statuses in which an engine is loaded (or being loaded).
fn is_active(status: SessionStatus) -> bool {
    matches!(
        status,
        Initializing | QrReady | Authenticating | Ready | ActionRequired
    )
}

/// The transition table. One call per trigger; see the tests for the table row by row. The arms
/// delegate to one helper per trigger family (linking, connection, operator, outside events).
pub(crate) fn transition(
    from: SessionStatus,
    trigger: &Trigger,
    ctx: &Context,
) -> Result<Transition, TransitionError> {
    let invalid = TransitionError::Invalid {
        from,
        trigger: trigger.name(),
    };
    match trigger {
        Trigger::PairingRequested => {
            linking(from, trigger, ctx).ok_or(TransitionError::PairingNotAllowed(from))
        }
        Trigger::QrProduced | Trigger::QrScanned | Trigger::LinkCompleted => {
            linking(from, trigger, ctx).ok_or(invalid)
        }
        Trigger::LinkDropped { .. }
        | Trigger::ReconnectBegan
        | Trigger::ReconnectFailed { .. }
        | Trigger::LaunchFailed { .. }
        | Trigger::PageReloadStarted
        | Trigger::PageReloadStalled => connection(from, trigger, ctx).ok_or(invalid),
        Trigger::SelfRetry {
            failures,
            reason,
            next_delay_ms,
        } => self_retry(from, *failures, reason.as_deref(), *next_delay_ms, ctx).ok_or(invalid),
        Trigger::ActionNeeded { reason } => action_needed(from, reason).ok_or(invalid),
        Trigger::Start => start(from),
        Trigger::Stop { teardown } => Ok(stop(from, *teardown)),
        Trigger::Logout { unlinked } => Ok(logout(from, *unlinked)),
        Trigger::ForceKill => Ok(force_kill(from)),
        Trigger::Restriction { kind, active } => Ok(restriction(from, kind, *active)),
        Trigger::Restored
        | Trigger::TakeoverSweep
        | Trigger::AuthFailed { .. }
        | Trigger::LoggedOutFromPhone
        | Trigger::EngineFailed { .. } => Ok(outside(from, trigger, ctx)),
    }
}

fn to(status: SessionStatus, effects: Vec<Effect>) -> Transition {
    Transition {
        to: status,
        effects,
    }
}

/// QR, scan, pairing and link completion; `None` = not valid from `from`.
fn linking(from: SessionStatus, trigger: &Trigger, ctx: &Context) -> Option<Transition> {
    use Effect::*;
    match (trigger, from) {
        (Trigger::QrProduced, Initializing) => {
            let mut effects = vec![CacheQr, EmitQr, EmitStatus];
            if ctx.has_phone || ctx.lost_link {
                effects.push(WarnRelinkRequired);
            }
            Some(to(QrReady, effects))
        }
        (Trigger::QrProduced, QrReady) => Some(to(QrReady, vec![CacheQr, EmitQr])),
        (Trigger::QrScanned, QrReady) => Some(to(Authenticating, vec![DropQr, EmitStatus])),
        (Trigger::PairingRequested, QrReady) => Some(to(QrReady, vec![])),
        (Trigger::LinkCompleted, Authenticating | Initializing | QrReady) => {
            let effects = vec![
                DropQr,
                SetPhone,
                ClearLastError,
                ResetReconnectAttempts,
                EmitAuthenticated,
                EmitStatus,
            ];
            Some(to(Ready, effects))
        }
        _ => None,
    }
}

/// Drops, reconnect attempts and page reloads; `None` = not valid from `from`.
fn connection(from: SessionStatus, trigger: &Trigger, ctx: &Context) -> Option<Transition> {
    use Effect::*;
    match (trigger, from) {
        (Trigger::LinkDropped { reason }, _) if is_active(from) => Some(link_dropped(reason, ctx)),
        (Trigger::ReconnectBegan, Disconnected) => {
            Some(to(Initializing, vec![LaunchEngine, EmitStatus]))
        }
        (Trigger::ReconnectBegan, Initializing) => Some(to(Initializing, vec![LaunchEngine])),
        (Trigger::ReconnectFailed { reason }, Disconnected | Initializing) => {
            Some(reconnect_failed(from, reason, ctx))
        }
        (Trigger::LaunchFailed { reason }, Initializing) => Some(launch_failed(reason, ctx)),
        (Trigger::PageReloadStarted, Ready) => Some(to(Ready, vec![])),
        (Trigger::PageReloadStalled, Ready) => Some(link_dropped("page reload did not heal", ctx)),
        _ => None,
    }
}

/// Events from outside the session's own engine loop: restore, takeover, auth failure, phone logout,
/// terminal engine error. Every status accepts them.
fn outside(from: SessionStatus, trigger: &Trigger, ctx: &Context) -> Transition {
    use Effect::*;
    match trigger {
        Trigger::Restored if is_active(from) => to(Disconnected, vec![CountNormalized]),
        Trigger::TakeoverSweep => match from {
            Ready | Initializing | Authenticating | ActionRequired => {
                to(Disconnected, vec![EmitStatus])
            }
            QrReady if !ctx.has_phone => to(Disconnected, vec![DropQr, EmitStatus]),
            _ => to(from, vec![]),
        },
        Trigger::AuthFailed { reason } => {
            let effects = vec![
                StopEngine,
                DropQr,
                CancelReconnect,
                SetLastError(reason.clone()),
            ];
            to(Failed, emit_if_changed(from, Failed, effects))
        }
        // A (re)launch met credentials the phone revoked while no engine ran (the session was stopped, or
        // between reconnect attempts): the link is gone, so the session relaunches without them and asks
        // for a new QR (`relink_required` is warned when it does) instead of failing on every start.
        Trigger::LoggedOutFromPhone if from == Initializing => to(
            Initializing,
            vec![
                DropQr,
                CancelReconnect,
                ResetReconnectAttempts,
                ClearPhone,
                ForgetCredentials,
                EmitDisconnected,
                // Replaces the logged-out engine.
                LaunchEngine,
            ],
        ),
        Trigger::LoggedOutFromPhone => {
            let to_status = if is_active(from) { Disconnected } else { from };
            let mut effects = vec![
                StopEngine,
                DropQr,
                CancelReconnect,
                ClearPhone,
                ForgetCredentials,
            ];
            if to_status != from {
                effects.extend([EmitStatus, EmitDisconnected]);
            }
            to(to_status, effects)
        }
        Trigger::EngineFailed { reason } => {
            let effects = vec![
                StopEngine,
                DropQr,
                CancelReconnect,
                SetLastError(reason.clone()),
                FireErrorHook,
            ];
            to(Failed, emit_if_changed(from, Failed, effects))
        }
        _ => to(from, vec![]),
    }
}

fn force_kill(from: SessionStatus) -> Transition {
    use Effect::*;
    if is_active(from) {
        to(
            Disconnected,
            vec![
                KillEngine,
                DropQr,
                CancelReconnect,
                ClearLastError,
                ClearRestriction,
                EmitStatus,
                EmitDisconnected,
            ],
        )
    } else {
        to(from, vec![KillEngine, CancelReconnect])
    }
}

fn emit_if_changed(
    from: SessionStatus,
    to: SessionStatus,
    mut effects: Vec<Effect>,
) -> Vec<Effect> {
    if from != to {
        effects.push(Effect::EmitStatus);
    }
    effects
}

fn start(from: SessionStatus) -> Result<Transition, TransitionError> {
    use Effect::*;
    match from {
        // A restriction belongs to the run that reported it (one a dead owner left, too).
        Created | Disconnected | Failed => Ok(to(
            Initializing,
            vec![
                CancelReconnect,
                ResetReconnectAttempts,
                ClearLastError,
                ClearRestriction,
                LaunchEngine,
                EmitStatus,
            ],
        )),
        // "A session restart clears it": the running engine is replaced.
        ActionRequired => Ok(to(
            Initializing,
            vec![
                StopEngine,
                ResetReconnectAttempts,
                ClearLastError,
                ClearRestriction,
                LaunchEngine,
                EmitStatus,
            ],
        )),
        Initializing | QrReady | Authenticating | Ready => {
            Err(TransitionError::AlreadyActive(from))
        }
    }
}

fn link_dropped(reason: &str, ctx: &Context) -> Transition {
    use Effect::*;
    match backoff::next_attempt(ctx.reconnect, 0) {
        // maxReconnectAttempts 0: no automatic reconnect, straight to failed.
        // The dropped engine is torn down: a failed session runs none (`engineLoaded: false`).
        ReconnectDecision::GiveUp => to(
            Failed,
            vec![
                StopEngine,
                DropQr,
                SetLastError(reason.to_string()),
                EmitStatus,
                EmitDisconnected,
                FireErrorHook,
            ],
        ),
        ReconnectDecision::Retry { attempt, delay_ms } => to(
            Disconnected,
            vec![
                DropQr,
                ResetReconnectAttempts,
                EmitStatus,
                EmitDisconnected,
                BeginBackoff { attempt, delay_ms },
            ],
        ),
    }
}

/// The first launch failed: like a drop, the reconnect budget starts whole (attempt 1 comes next), so
/// `maxReconnectAttempts: N` allows N relaunches after it and 0 fails at once. The session reads
/// `initializing` with `lastError` while it waits, as between relaunches.
fn launch_failed(reason: &str, ctx: &Context) -> Transition {
    use Effect::*;
    let mut effects = vec![SetLastError(reason.to_string())];
    match backoff::next_attempt(ctx.reconnect, 0) {
        ReconnectDecision::GiveUp => {
            // What is left of the failed launch is torn down: a failed session runs none.
            effects.extend([StopEngine, FireErrorHook, EmitStatus]);
            to(Failed, effects)
        }
        ReconnectDecision::Retry { attempt, delay_ms } => {
            effects.extend([ResetReconnectAttempts, BeginBackoff { attempt, delay_ms }]);
            to(Initializing, effects)
        }
    }
}

fn reconnect_failed(from: SessionStatus, reason: &str, ctx: &Context) -> Transition {
    use Effect::*;
    let failed = ctx.failed_attempts.saturating_add(1);
    let mut effects = vec![SetLastError(reason.to_string())];
    match backoff::next_attempt(ctx.reconnect, failed) {
        ReconnectDecision::GiveUp => {
            // What is left of the failed launch is torn down: a failed session runs none.
            effects.extend([StopEngine, FireErrorHook]);
            to(Failed, emit_if_changed(from, Failed, effects))
        }
        ReconnectDecision::Retry { attempt, delay_ms } => {
            if backoff::is_loop_alert(failed) {
                effects.push(EmitReconnectLoop {
                    attempts: failed,
                    next_delay_ms: delay_ms,
                });
            }
            effects.push(BeginBackoff { attempt, delay_ms });
            to(Initializing, emit_if_changed(from, Initializing, effects))
        }
    }
}

/// The socket engine retries a dropped (or never established) connection itself, on the session's policy:
/// the session reads `initializing` while it does, `lastError` appears from the fifth consecutive failed
/// self-retry, every fifth raises the reconnect-loop alert with the delay the engine scheduled, and an
/// explicit `maxReconnectAttempts` still ends in `failed`. A first connect that failed (`failures` 0 with a
/// reason) spends no attempt, as a failed first launch does; `maxReconnectAttempts: 0` fails it at once.
fn self_retry(
    from: SessionStatus,
    failures: u32,
    reason: Option<&str>,
    next_delay_ms: Option<u64>,
    ctx: &Context,
) -> Option<Transition> {
    use Effect::*;
    if !matches!(from, Initializing | Disconnected | Authenticating | Ready) {
        return None;
    }
    // The engine reconnects on its own: a relaunch the supervisor scheduled would only replace it.
    let mut effects = vec![CancelReconnect, DropQr];
    let Some(reason) = reason else {
        // After a connection that worked (its drop already went through `link_dropped`, which failed the
        // session if the policy allows no reconnect) or a restart the network asked for.
        return Some(to(
            Initializing,
            emit_if_changed(from, Initializing, effects),
        ));
    };
    // The engine scheduled with the same policy; one that schedules nothing more has spent it too.
    let next =
        next_delay_ms.map(|delay_ms| (backoff::next_attempt(ctx.reconnect, failures), delay_ms));
    match next {
        None | Some((ReconnectDecision::GiveUp, _)) => {
            effects.extend([StopEngine, SetLastError(reason.to_string()), FireErrorHook]);
            Some(to(Failed, emit_if_changed(from, Failed, effects)))
        }
        Some((ReconnectDecision::Retry { .. }, delay_ms)) => {
            if failures >= SELF_RETRY_ERROR_AFTER {
                effects.push(SetLastError(reason.to_string()));
            }
            if backoff::is_loop_alert(failures) {
                // The delay the engine actually scheduled.
                effects.push(EmitReconnectLoop {
                    attempts: failures,
                    next_delay_ms: delay_ms,
                });
            }
            Some(to(
                Initializing,
                emit_if_changed(from, Initializing, effects),
            ))
        }
    }
}

/// Consecutive self-retries after which `lastError` is shown (the spec's "fifth consecutive self-retry").
const SELF_RETRY_ERROR_AFTER: u32 = 5;

/// Something outside the service must change before the running engine can go on.
fn action_needed(from: SessionStatus, reason: &str) -> Option<Transition> {
    use Effect::*;
    if !is_active(from) {
        return None;
    }
    let effects = vec![DropQr, SetLastError(reason.to_string())];
    Some(to(
        ActionRequired,
        emit_if_changed(from, ActionRequired, effects),
    ))
}

fn stop(from: SessionStatus, teardown: Teardown) -> Transition {
    use Effect::*;
    if !is_active(from) {
        return to(from, vec![CancelReconnect]);
    }
    let mut effects = vec![
        DropQr,
        CancelReconnect,
        ClearLastError,
        ClearRestriction,
        EmitStatus,
        EmitDisconnected,
    ];
    if teardown == Teardown::Failed {
        effects.push(ReportStopIncomplete);
    }
    to(Disconnected, effects)
}

fn logout(from: SessionStatus, unlinked: bool) -> Transition {
    use Effect::*;
    let to_status = if from == Created {
        Created
    } else {
        Disconnected
    };
    let mut effects = vec![
        StopEngine,
        DropQr,
        CancelReconnect,
        ClearPhone,
        ForgetCredentials,
        ClearLastError,
        ClearRestriction,
    ];
    effects = emit_if_changed(from, to_status, effects);
    if is_active(from) {
        effects.push(EmitDisconnected);
    }
    if !unlinked {
        effects.push(ReportLogoutIncomplete);
    }
    to(to_status, effects)
}

fn restriction(from: SessionStatus, kind: &str, active: bool) -> Transition {
    use Effect::*;
    match (from, active) {
        (Ready, true) => to(
            ActionRequired,
            vec![
                SetLastError(format!("Account restricted: {kind}")),
                EmitStatus,
                EmitRestriction,
            ],
        ),
        (ActionRequired, false) => to(Ready, vec![ClearLastError, EmitStatus, EmitRestriction]),
        _ => to(from, vec![EmitRestriction]),
    }
}

#[cfg(test)]
#[path = "state_tests.rs"]
mod tests;
