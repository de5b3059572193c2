//! The supervisor's side of the state table: turning lifecycle engine events into triggers, applying the
//! table's state effects, and publishing the `session.*` events with the wire-notes §5 data.

use serde_json::json;
use wagate_proto::EventName;

use super::run_state::{PendingRestriction, RunState};
use super::runtime::Runtime;
use super::state::{Effect, Trigger};
use crate::engine::EngineEvent;
use crate::events::Event;
use crate::store::{StoreResult, now_ms, sessions as session_store};

/// Whether the supervisor (rather than the message ingest) handles this event.
pub(crate) fn is_lifecycle(event: &EngineEvent) -> bool {
    matches!(
        event,
        EngineEvent::Qr { .. }
            | EngineEvent::PairingCode { .. }
            | EngineEvent::Authenticating
            | EngineEvent::Authenticated { .. }
            | EngineEvent::Ready
            | EngineEvent::Disconnected { .. }
            | EngineEvent::LoggedOut { .. }
            | EngineEvent::Restriction { .. }
            | EngineEvent::SelfRetry { .. }
            | EngineEvent::ActionRequired { .. }
            | EngineEvent::Failed { .. }
    )
}

/// Records what a lifecycle event carries and names the trigger it fires (if any).
pub(crate) async fn prepare(
    rt: &Runtime,
    st: &mut RunState,
    event: EngineEvent,
) -> Option<Trigger> {
    match event {
        EngineEvent::Qr { data_url } => {
            st.pending_qr = Some(data_url);
            Some(Trigger::QrProduced)
        }
        EngineEvent::PairingCode { .. } => None,
        EngineEvent::Authenticating => Some(Trigger::QrScanned),
        EngineEvent::Authenticated { account } => {
            if let Err(err) = store_credentials(rt, &account).await {
                tracing::error!(session_id = %rt.id, error = %err, "engine credentials not stored");
            }
            st.has_credentials = true;
            st.pending_account = Some(account);
            None
        }
        EngineEvent::Ready => Some(Trigger::LinkCompleted),
        EngineEvent::Disconnected { reason } => {
            st.pending_disconnect = Some(reason.clone());
            Some(Trigger::LinkDropped { reason })
        }
        EngineEvent::LoggedOut { reason } => {
            st.pending_disconnect = Some(reason);
            // The next QR of a session that was linked is a relink, though the logout clears the phone.
            st.lost_link |= st.phone.is_some() || st.has_credentials;
            Some(Trigger::LoggedOutFromPhone)
        }
        EngineEvent::Restriction {
            kind,
            active,
            code,
            expires_at,
        } => {
            st.pending_restriction = Some(PendingRestriction {
                code: restriction_code(code, &kind),
                kind: kind.clone(),
                active,
                expires_at,
            });
            Some(Trigger::Restriction { kind, active })
        }
        EngineEvent::SelfRetry {
            failures,
            reason,
            next_delay_ms,
        } => Some(Trigger::SelfRetry {
            failures,
            reason,
            next_delay_ms,
        }),
        EngineEvent::ActionRequired { reason } => Some(Trigger::ActionNeeded { reason }),
        EngineEvent::Failed { reason } => Some(Trigger::EngineFailed { reason }),
        _ => None,
    }
}

/// A restriction's `code` is never empty (OpenWA's clients read it as a required string): the engine's
/// own token when it gave one, else the kind upper-cased (`reachout_timelock` -> `REACHOUT_TIMELOCK`).
pub(crate) fn restriction_code(code: Option<String>, kind: &str) -> String {
    code.map(|c| c.trim().to_owned())
        .filter(|c| !c.is_empty())
        .unwrap_or_else(|| kind.trim().to_uppercase())
}

async fn store_credentials(
    rt: &Runtime,
    account: &crate::engine::LinkedAccount,
) -> StoreResult<()> {
    let text = crate::store::to_json(account)?;
    let kind = rt.deps.factory.kind().as_str();
    session_store::save_engine_auth(&rt.deps.db, &rt.id, kind, &text).await
}

/// Applies an effect to the session's state (before it is persisted).
pub(crate) async fn apply_local(
    rt: &Runtime,
    st: &mut RunState,
    effect: &Effect,
) -> StoreResult<()> {
    match effect {
        Effect::SetLastError(reason) => st.last_error = Some(reason.clone()),
        Effect::ClearLastError => st.last_error = None,
        Effect::ClearRestriction => {
            st.restriction = None;
            st.pending_restriction = None;
        }
        Effect::SetPhone => set_phone(st),
        Effect::ClearPhone => {
            st.phone = None;
            st.push_name = None;
        }
        Effect::ForgetCredentials => {
            rt.deps.forget_credentials(&rt.id).await.map_err(|err| {
                crate::store::StoreError::Corrupt(format!("credentials not wiped: {err}"))
            })?;
            st.has_credentials = false;
            st.desired_running = false;
        }
        Effect::CacheQr => st.qr = st.pending_qr.take(),
        Effect::DropQr => st.qr = None,
        Effect::ResetReconnectAttempts => st.failed_attempts = 0,
        Effect::BeginBackoff { delay_ms, .. } => {
            st.reconnect_at =
                Some(tokio::time::Instant::now() + std::time::Duration::from_millis(*delay_ms));
            rt.wake_loop();
        }
        Effect::CancelReconnect => {
            st.reconnect_at = None;
            rt.wake_loop();
        }
        Effect::EmitRestriction => {
            st.restriction = st.pending_restriction.as_ref().filter(|r| r.active).map(|r| {
                json!({ "kind": r.kind, "code": r.code, "expiresAt": r.expires_at.map(|secs| wagate_proto::iso_ms(secs.saturating_mul(1000))) })
            });
        }
        Effect::WarnRelinkRequired => {
            tracing::warn!(session_id = %rt.id, "relink_required: a previously linked session asks for a QR again");
            st.lost_link = false;
        }
        // An engine launched is one meant to run, so a boot starts it again: a relaunch for a new QR after
        // the phone's logout keeps the session running though `ForgetCredentials` just cleared the flag.
        Effect::LaunchEngine => st.desired_running = true,
        Effect::FireErrorHook => {
            crate::hooks::hooks().session_error(&rt.id, st.last_error.as_deref());
        }
        _ => {}
    }
    // A failed session runs nothing, so a later boot does not start it again either.
    if st.status == wagate_proto::SessionStatus::Failed {
        st.desired_running = false;
    }
    Ok(())
}

fn set_phone(st: &mut RunState) {
    st.lost_link = false;
    if let Some(account) = st.pending_account.take() {
        st.phone = Some(account.phone.to_string());
        st.push_name = account.push_name;
    }
    st.connected_at = Some(now_ms());
}

/// Publishes the `session.*` event an effect names.
pub(crate) async fn emit(rt: &Runtime, st: &RunState, effect: &Effect, trigger: &Trigger) {
    let id = rt.id.as_str();
    let (name, data) = match effect {
        Effect::EmitStatus => {
            crate::hooks::hooks().session_status(id, st.status);
            (
                EventName::SessionStatus,
                json!({ "sessionId": id, "status": st.status }),
            )
        }
        Effect::EmitQr => (
            EventName::SessionQr,
            json!({ "sessionId": id, "qr": st.qr }),
        ),
        Effect::EmitAuthenticated => (
            EventName::SessionAuthenticated,
            json!({ "sessionId": id, "phone": st.phone.as_deref().map(super::linked_number), "pushName": st.push_name }),
        ),
        Effect::EmitDisconnected => {
            // An operator's stop names itself: the reason of an earlier drop would mislead.
            let reason = match trigger {
                Trigger::Stop { .. } | Trigger::Logout { .. } | Trigger::ForceKill => {
                    trigger_reason(trigger)
                }
                _ => st
                    .pending_disconnect
                    .clone()
                    .unwrap_or_else(|| trigger_reason(trigger)),
            };
            (
                EventName::SessionDisconnected,
                json!({ "sessionId": id, "reason": reason }),
            )
        }
        Effect::EmitRestriction => {
            let r = st.pending_restriction.clone();
            let data = json!({
                "sessionId": id,
                "active": r.as_ref().is_some_and(|r| r.active),
                "kind": r.as_ref().map(|r| r.kind.clone()),
                "expiresAt": r.as_ref().and_then(|r| r.expires_at),
            });
            (EventName::SessionRestriction, data)
        }
        Effect::EmitReconnectLoop {
            attempts,
            next_delay_ms,
        } => {
            metrics::counter!(wagate_workers::telemetry::metrics::RECONNECT_LOOP_ALERTS)
                .increment(1);
            let data =
                json!({ "sessionId": id, "attempts": attempts, "nextDelayMs": next_delay_ms });
            (EventName::SessionReconnectLoop, data)
        }
        _ => return,
    };
    // Made here, so kept here: retried through a database outage rather than dropped.
    if let Err(err) = rt
        .deps
        .pipeline
        .publish_kept(Event::new(name, id, data))
        .await
    {
        tracing::error!(session_id = id, event = name.as_str(), error = %err, "session event not persisted");
    }
}

fn trigger_reason(trigger: &Trigger) -> String {
    match trigger {
        Trigger::LinkDropped { reason }
        | Trigger::AuthFailed { reason }
        | Trigger::EngineFailed { reason } => reason.clone(),
        Trigger::LoggedOutFromPhone => "logged out from the phone".into(),
        Trigger::Stop { .. } => "stopped".into(),
        Trigger::Logout { .. } => "logged out".into(),
        Trigger::ForceKill => "force-killed".into(),
        _ => "disconnected".into(),
    }
}
